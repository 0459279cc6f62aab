use super::*;

fn target(name: &str, interval_ms: u64, due_in_ms: u64) -> ProbeTarget {
    ProbeTarget { mcp_server: name.into(), interval_ms, timeout_ms: 500, due_in_ms }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn names(due: &[Due]) -> Vec<&str> {
    due.iter().map(|d| d.mcp_server.as_str()).collect()
}

#[test]
fn reconcile_adds_servers_due_when_the_supervisor_says() {
    let t0 = Instant::now();
    let mut schedule = Schedule::default();
    schedule.reconcile(&[target("math", 1000, 300), target("web", 1000, 0)], t0);
    assert_eq!(schedule.len(), 2);
    assert_eq!(schedule.next_due(), Some(t0));
    assert_eq!(names(&schedule.take_due(t0)), ["web"]);
    assert_eq!(schedule.next_due(), Some(t0 + ms(300)));
}

#[test]
fn reconcile_drops_servers_no_longer_targeted() {
    let t0 = Instant::now();
    let mut schedule = Schedule::default();
    schedule.reconcile(&[target("math", 1000, 0), target("web", 1000, 0)], t0);
    schedule.reconcile(&[target("web", 1000, 0)], t0);
    assert_eq!(names(&schedule.take_due(t0)), ["web"]);
    schedule.reconcile(&[], t0);
    assert_eq!((schedule.len(), schedule.next_due()), (0, None));
}

#[test]
fn reconcile_keeps_the_due_time_of_a_server_already_scheduled() {
    let t0 = Instant::now();
    let mut schedule = Schedule::default();
    schedule.reconcile(&[target("math", 1000, 400)], t0);
    // A later answer with another `due_in_ms` must not push the check back (or forward).
    schedule.reconcile(&[target("math", 1000, 900)], t0 + ms(200));
    assert_eq!(schedule.next_due(), Some(t0 + ms(400)));
}

#[test]
fn an_interval_change_takes_the_supervisors_due_time() {
    let t0 = Instant::now();
    let mut schedule = Schedule::default();
    schedule.reconcile(&[target("math", 1000, 400)], t0);
    schedule.reconcile(&[target("math", 200, 50)], t0 + ms(100));
    assert_eq!(schedule.next_due(), Some(t0 + ms(150)));
    assert_eq!(names(&schedule.take_due(t0 + ms(150))), ["math"]);
    schedule.finished("math");
    assert_eq!(schedule.next_due(), Some(t0 + ms(350)), "then every new interval");
}

#[test]
fn take_due_hands_out_earliest_first_then_by_name() {
    let t0 = Instant::now();
    let mut schedule = Schedule::default();
    let targets = [target("c", 1000, 10), target("b", 1000, 30), target("a", 1000, 30), target("later", 1000, 99)];
    schedule.reconcile(&targets, t0);
    assert!(schedule.take_due(t0).is_empty());
    assert_eq!(names(&schedule.take_due(t0 + ms(50))), ["c", "a", "b"]);
    assert_eq!(schedule.next_due(), Some(t0 + ms(99)), "in-flight servers do not count");
}

#[test]
fn a_server_has_one_check_in_flight_at_most() {
    let t0 = Instant::now();
    let mut schedule = Schedule::default();
    schedule.reconcile(&[target("math", 100, 0)], t0);
    assert_eq!(schedule.take_due(t0)[0], Due { mcp_server: "math".into(), timeout_ms: 500 });
    // Its next turn comes while the check still runs (a hung upstream): no second check.
    assert!(schedule.take_due(t0 + ms(250)).is_empty());
    assert_eq!(schedule.next_due(), None);
    // Not even after being unscheduled and scheduled again meanwhile.
    schedule.reconcile(&[], t0 + ms(260));
    schedule.reconcile(&[target("math", 100, 0)], t0 + ms(260));
    assert!(schedule.take_due(t0 + ms(260)).is_empty());
    schedule.finished("math");
    assert_eq!(names(&schedule.take_due(t0 + ms(270))), ["math"]);
}

#[test]
fn each_check_moves_the_entry_on_one_interval_without_bursts() {
    let t0 = Instant::now();
    let mut schedule = Schedule::default();
    schedule.reconcile(&[target("math", 100, 0)], t0);
    schedule.take_due(t0 + ms(5));
    schedule.finished("math");
    assert_eq!(schedule.next_due(), Some(t0 + ms(100)), "on the beat, not 100 ms after the late start");
    // Far behind (the link was down): one check now, the next an interval later.
    assert_eq!(schedule.take_due(t0 + ms(1000)).len(), 1);
    schedule.finished("math");
    assert_eq!(schedule.next_due(), Some(t0 + ms(1100)));
}

#[test]
fn a_zero_interval_is_floored_and_an_absurd_wait_capped() {
    let t0 = Instant::now();
    let mut schedule = Schedule::default();
    schedule.reconcile(&[target("math", 0, 0)], t0);
    schedule.take_due(t0);
    schedule.finished("math");
    assert_eq!(schedule.next_due(), Some(t0 + MIN_INTERVAL));
    schedule.reconcile(&[target("math", 1000, u64::MAX)], t0);
    assert_eq!(schedule.next_due(), Some(t0 + MAX_WAIT));
}
