//! Every upstream in a box (issue 16): a probe upstream (`tests/fixtures/sandbox_probe.py`)
//! tries, from inside its sandbox, what the sandbox must stop (read `/etc/shadow` and a file
//! outside `read`, write outside `write`, connect to a loopback port this test listens on, bind a
//! port, ptrace a process, escape with setsid and a double fork) and each attempt is refused
//! while the server keeps serving; the real `@modelcontextprotocol/server-filesystem` serves its
//! one directory through the front door under the strict preset; and a sandbox the kernel cannot
//! provide (the Landlock ABI the hangar believes in capped by `HANGAR_TEST_LANDLOCK_ABI_MAX`)
//! refuses the start, or, with `require: false`, runs weaker and says so in the details. Its
//! `/tmp` is its own (a mount namespace): what it writes there reaches neither the host nor
//! another server, it sees of the host's `/tmp` only what it is granted, and nothing is left
//! mounted on the host; without root too, where it is still its own uid.

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, alive, node, poll, server_filesystem};

use crate::box_fences::outside_tmp;

/// A process for the probe to try to ptrace, killed with the test.
struct Sleeper(Child);

impl Sleeper {
    fn start() -> Sleeper {
        Sleeper(Command::new("sleep").arg("1000").spawn().expect("sleep"))
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The probe's report of one attempt (a tool of the probe, called through `hangar_call`).
pub(crate) fn attempt(hangar: &Hangar, server: &str, tool: &str, arguments: Value) -> Value {
    let call = json!({"calls": [{"mcp_server": server, "tool": tool, "arguments": arguments}]});
    let batch = hangar.tool_ok("hangar_call", call);
    let result = &batch["results"][0];
    assert_eq!(result["success"], true, "{server}/{tool}({arguments}) failed as a call: {batch}");
    result["result"]["structuredContent"].clone()
}

pub(crate) fn assert_refused(report: &Value, errnos: &[&str], what: &str) {
    assert_eq!(report["ok"], false, "{what} was allowed: {report}");
    let errno = report["errno"].as_str().unwrap_or_default();
    assert!(errnos.contains(&errno), "{what}: expected one of {errnos:?}, got {report}");
}

/// Starts `id`, which must be refused (`start_failed`): why, in the hangar's words.
pub(crate) fn refused_start(hangar: &Hangar, id: &str) -> String {
    let refused = hangar.tool("hangar_start", json!({"mcp_server": id}));
    assert_eq!(refused["structuredContent"]["error_type"], "start_failed", "{refused}");
    refused["structuredContent"]["error"].as_str().unwrap_or_default().to_owned()
}

/// Two probes with the same `filesystem` sandbox, the second with `require: false`.
const REQUIRED_AND_NOT: &str = r#"
mcp_servers:
  required:
    command: ["/usr/bin/python3", "{fixtures}/sandbox_probe.py"]
    sandbox: {filesystem: {read: [/usr, /lib, /lib64, /bin, /etc/ld.so.cache]}}
  optional:
    command: ["/usr/bin/python3", "{fixtures}/sandbox_probe.py"]
    sandbox: {filesystem: {read: [/usr, /lib, /lib64, /bin, /etc/ld.so.cache]}, require: false}
"#;

/// The test's temp dir, opened to other users (the probe runs as `nobody`), with a readable
/// tree, a writable one, and a file outside both.
fn lay_out(dir: &Path) {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    for sub in ["readable", "out"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    std::fs::set_permissions(dir.join("out"), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::write(dir.join("readable/allowed.txt"), "allowed").unwrap();
    std::fs::write(dir.join("outside.txt"), "outside").unwrap();
    for file in ["readable/allowed.txt", "outside.txt"] {
        std::fs::set_permissions(dir.join(file), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
}

#[test]
fn a_sandboxed_probe_is_refused_everything_outside_its_box_and_keeps_serving() {
    let allowed = TcpListener::bind("127.0.0.1:0").unwrap();
    let forbidden = TcpListener::bind("127.0.0.1:0").unwrap();
    let (allowed_port, forbidden_port) = (allowed.local_addr().unwrap().port(), forbidden.local_addr().unwrap().port());
    let config = format!(
        r#"
mcp_servers:
  boxed:
    command: ["/usr/bin/python3", "{{fixtures}}/sandbox_probe.py"]
    sandbox:
      user: nobody
      filesystem: {{read: [/usr, /lib, /lib64, /bin, /etc/ld.so.cache, "{{dir}}/readable"], write: ["{{dir}}/out"]}}
      network: {{tcp_connect: [{allowed_port}], tcp_bind: []}}
      max_open_files: 256
  offline:
    command: ["/usr/bin/python3", "{{fixtures}}/sandbox_probe.py"]
    sandbox: strict
"#
    );
    // It runs as nobody: the probe must be where nobody can reach it, wherever the clone is.
    let hangar = Hangar::start_reachable(&config);
    let dir = hangar.dir.path().to_path_buf();
    lay_out(&dir);
    let sleeper = Sleeper::start();
    let at = |name: &str| dir.join(name).display().to_string();

    // Who it is: nobody, no new privileges, a seccomp filter, a private $HOME.
    let me = attempt(&hangar, "boxed", "whoami", json!({}));
    assert_eq!((me["uid"].as_u64(), me["gid"].as_u64()), (Some(65534), Some(65534)), "{me}");
    assert_eq!(me["groups"], json!([]), "{me}");
    assert_eq!(me["status"]["NoNewPrivs"], "1", "{me}");
    assert_eq!(me["status"]["Seccomp"], "2", "{me}");
    let home = me["home"].as_str().unwrap().to_owned();
    assert!(home.contains("hangar-sandbox-"), "{me}");

    // The file system: only what `read` and `write` (and its private home) allow. Under /tmp
    // (where the test's dir is) its private /tmp hides what is not granted (ENOENT), and keeps
    // what is granted read-only as a read-only mount (EROFS): see the private /tmp story below.
    assert_refused(&attempt(&hangar, "boxed", "read_file", json!({"path": "/etc/shadow"})), &["EACCES"], "/etc/shadow");
    assert_refused(
        &attempt(&hangar, "boxed", "read_file", json!({"path": at("outside.txt")})),
        &["EACCES", "ENOENT"],
        "outside read",
    );
    assert_eq!(attempt(&hangar, "boxed", "read_file", json!({"path": at("readable/allowed.txt")}))["ok"], true);
    assert_refused(
        &attempt(&hangar, "boxed", "write_file", json!({"path": at("readable/x")})),
        &["EACCES", "EROFS"],
        "write in read",
    );
    assert_refused(
        &attempt(&hangar, "boxed", "write_file", json!({"path": at("written.txt")})),
        &["EACCES"],
        "write outside",
    );
    assert_eq!(attempt(&hangar, "boxed", "write_file", json!({"path": at("out/x")}))["ok"], true);
    assert_eq!(attempt(&hangar, "boxed", "write_file", json!({"path": format!("{home}/x")}))["ok"], true);

    // The network: TCP connect only to the listed port, bind nowhere.
    assert_eq!(attempt(&hangar, "boxed", "connect", json!({"port": allowed_port}))["ok"], true);
    let connect = attempt(&hangar, "boxed", "connect", json!({"port": forbidden_port}));
    assert_refused(&connect, &["EACCES"], "connect to a port not listed");
    assert_refused(&attempt(&hangar, "boxed", "bind", json!({"port": 0})), &["EACCES"], "bind");

    // Another process: not to be traced.
    let ptrace = attempt(&hangar, "boxed", "ptrace", json!({"pid": sleeper.0.id()}));
    assert_refused(&ptrace, &["EPERM"], "ptrace");

    // `network: none` and the strict preset, running as root: no network at all, and Landlock
    // (not file modes, which root passes) keeps /etc/shadow out; seccomp stops ptrace.
    for port in [allowed_port, forbidden_port] {
        let report = attempt(&hangar, "offline", "connect", json!({"port": port}));
        assert_refused(&report, &["ENETUNREACH", "EACCES", "EPERM"], "connect from network: none");
    }
    // Its loopback is its own: it may bind the very port this test holds (on the host's it
    // would get EADDRINUSE), and nothing outside can reach what it binds.
    let bound = attempt(&hangar, "offline", "bind", json!({"port": forbidden_port}));
    assert_eq!(bound["ok"], true, "{bound}");
    assert_refused(
        &attempt(&hangar, "offline", "read_file", json!({"path": "/etc/shadow"})),
        &["EACCES"],
        "root shadow",
    );
    assert_refused(&attempt(&hangar, "offline", "ptrace", json!({"pid": sleeper.0.id()})), &["EPERM"], "root ptrace");

    // The details say what is in effect.
    let details = hangar.details("offline");
    let sandbox = &details["sandbox"];
    assert_eq!(sandbox["configured"]["preset"], "strict", "{details}");
    assert_eq!(sandbox["configured"]["network"], "none", "{details}");
    assert_eq!(sandbox["configured"]["memory_mb"], 512, "{details}");
    assert_eq!(sandbox["in_effect"]["fallbacks"], json!([]), "{details}");
    assert!(sandbox["in_effect"]["landlock_abi"].as_u64().is_some_and(|abi| abi >= 4), "{details}");
    let enforced = sandbox["in_effect"]["enforced"].to_string();
    for word in ["network: none", "filesystem: Landlock", "seccomp", "no_new_privs"] {
        assert!(enforced.contains(word), "{word} not in {enforced}");
    }
    assert_eq!(hangar.details("boxed")["sandbox"]["in_effect"]["user"], "nobody (uid 65534, gid 65534)");

    // Still serving after every refusal.
    for id in ["boxed", "offline"] {
        assert_eq!(hangar.details(id)["state"], "ready", "{id}");
        assert_eq!(attempt(&hangar, id, "whoami", json!({}))["ok"], true);
    }
}

#[test]
fn an_escape_by_setsid_and_double_fork_does_not_survive_the_stop() {
    let mut hangar = Hangar::start_reachable(
        r#"
mcp_servers:
  boxed:
    command: ["/usr/bin/python3", "{fixtures}/sandbox_probe.py"]
    sandbox: {user: nobody, network: none}
"#,
    );
    let home = attempt(&hangar, "boxed", "whoami", json!({}))["home"].as_str().unwrap().to_owned();
    let escaped = attempt(&hangar, "boxed", "escape", json!({"dir": home}));
    assert_eq!(escaped["ok"], true, "{escaped}");
    let pid = escaped["pid"].as_u64().unwrap() as u32;
    assert!(alive(pid), "the escapee should be running before the stop");
    hangar.tool_ok("hangar_stop", json!({"mcp_server": "boxed"}));
    poll("the escapee to be gone", Duration::from_secs(10), || (!alive(pid)).then_some(()));
    // Its private home goes with it.
    poll("the private home to be removed", Duration::from_secs(10), || (!Path::new(&home).exists()).then_some(()));
    // And the supervisor's directory of them when it exits.
    let base = Path::new(&home).ancestors().nth(2).unwrap().to_path_buf();
    assert!(base.file_name().unwrap().to_string_lossy().starts_with("hangar-sandbox-"), "{base:?}");
    assert!(base.exists(), "{base:?}");
    hangar.terminate();
    assert!(!base.exists(), "{base:?} outlived the supervisor");
}

#[test]
fn the_real_filesystem_server_serves_its_one_directory_under_the_strict_preset() {
    // `ungranted` is one of the server's own allowed directories, which the sandbox does not
    // grant: the server lets the read through, and only the kernel can refuse it. Outside /tmp,
    // which its private /tmp would hide altogether.
    let elsewhere = tempfile::tempdir_in("/var/tmp").unwrap();
    let ungranted = elsewhere.path().join("ungranted");
    std::fs::create_dir_all(&ungranted).unwrap();
    std::fs::write(ungranted.join("secret.txt"), "outside the box").unwrap();
    let config = format!(
        r#"
tool_access: {{mode: front_door}}
mcp_servers:
  files:
    command: ["{node}", "{script}", "{{dir}}/shared", "{ungranted}"]
    handshake_timeout_s: 30
    sandbox: {{preset: strict, filesystem: {{write: ["{{dir}}/shared"]}}}}
"#,
        node = node().display(),
        script = server_filesystem().display(),
        ungranted = ungranted.display()
    );
    let hangar = Hangar::start(&config);
    let dir = hangar.dir.path();
    std::fs::create_dir_all(dir.join("shared")).unwrap();
    std::fs::write(dir.join("shared/note.txt"), "inside the box").unwrap();
    let at = |name: &str| dir.join(name).display().to_string();

    let listed = hangar.tool("list_directory", json!({"path": at("shared")}));
    assert_ne!(listed["isError"], true, "{listed}");
    assert!(listed.to_string().contains("note.txt"), "{listed}");
    let read = hangar.tool("read_text_file", json!({"path": at("shared/note.txt")}));
    assert!(read.to_string().contains("inside the box"), "{read}");
    let written = hangar.tool("write_file", json!({"path": at("shared/new.txt"), "content": "made inside"}));
    assert_ne!(written["isError"], true, "{written}");
    assert_eq!(std::fs::read_to_string(dir.join("shared/new.txt")).unwrap(), "made inside");

    let outside = hangar.tool("read_text_file", json!({"path": ungranted.join("secret.txt").display().to_string()}));
    assert_eq!(outside["isError"], true, "{outside}");
    assert!(!outside.to_string().contains("outside the box"), "{outside}");
    // The kernel's refusal (Landlock's EACCES), not the server's own "outside allowed directories".
    assert!(outside.to_string().contains("EACCES"), "{outside}");
    let details = hangar.details("files");
    assert_eq!(details["sandbox"]["configured"]["network"], "none", "{details}");
    assert_eq!(details["sandbox"]["in_effect"]["fallbacks"], json!([]), "{details}");
    let enforced = details["sandbox"]["in_effect"]["enforced"].to_string();
    for word in ["filesystem: Landlock", "network: none"] {
        assert!(enforced.contains(word), "{word} not in {enforced}");
    }
}

#[test]
fn a_sandbox_the_kernel_cannot_provide_refuses_the_start_unless_not_required() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let config = r#"
mcp_servers:
  required:
    command: ["/usr/bin/python3", "{fixtures}/sandbox_probe.py"]
    sandbox: {network: {tcp_connect: [1]}}
  optional:
    command: ["/usr/bin/python3", "{fixtures}/sandbox_probe.py"]
    sandbox: {network: {tcp_connect: [1]}, require: false}
"#;
    // TCP port rules need Landlock ABI 4: the hangar is made to believe the kernel has ABI 3.
    let hangar = Hangar::start_with_env(config, &[], &[("HANGAR_TEST_LANDLOCK_ABI_MAX", "3")]);

    let why = refused_start(&hangar, "required");
    assert!(why.contains("Landlock ABI 4") && why.contains("ABI 3") && why.contains("require: false"), "{why}");
    let dead = hangar.details("required")["dead"].clone();
    assert_eq!(dead["reason"], "start_failed", "{dead}");

    // Not required: it runs, weaker, and says so; the port it was not given is reachable.
    let report = attempt(&hangar, "optional", "connect", json!({"port": port}));
    assert_eq!(report["ok"], true, "{report}");
    let details = hangar.details("optional");
    let fallbacks = details["sandbox"]["in_effect"]["fallbacks"].to_string();
    assert!(fallbacks.contains("TCP ports not restricted") && fallbacks.contains("ABI 3"), "{details}");
    assert_eq!(details["sandbox"]["in_effect"]["landlock_abi"], 3, "{details}");
    // The file system is still enforced at the ABI it has.
    let shadow = attempt(&hangar, "optional", "read_file", json!({"path": "/etc/shadow"}));
    assert_refused(&shadow, &["EACCES"], "/etc/shadow at ABI 3");
}

#[test]
fn a_managed_http_server_binds_only_its_own_port() {
    let (port, other) = (hangar_tests::free_port(), hangar_tests::free_port());
    let config = format!(
        r#"
mcp_servers:
  web:
    mode: http
    command: ["{{fake}}", "--http", "127.0.0.1:{port}", "--tools", "echo"]
    endpoint: http://127.0.0.1:{port}/mcp
    sandbox: {{network: {{tcp_bind: [{port}]}}, user: nobody}}
  squatter:
    mode: http
    command: ["{{fake}}", "--http", "127.0.0.1:{other}", "--tools", "echo"]
    endpoint: http://127.0.0.1:{other}/mcp
    handshake_timeout_s: 2
    sandbox: {{network: {{tcp_bind: [{port}]}}}}
"#
    );
    let hangar = Hangar::start_reachable(&config);
    // Its own port, given under tcp_bind: it serves through the hangar as any HTTP upstream.
    let echoed = attempt(&hangar, "web", "echo", json!({"text": "hello"}));
    assert!(echoed.to_string().contains("hello"), "{echoed}");
    let details = hangar.details("web");
    assert_eq!(details["sandbox"]["in_effect"]["user"], "nobody (uid 65534, gid 65534)", "{details}");
    // A port it was not given: it cannot listen, so it never comes up.
    refused_start(&hangar, "squatter");
}

#[test]
fn a_kernel_without_landlock_refuses_a_filesystem_sandbox_unless_not_required() {
    // The hangar is made to believe the kernel has no Landlock at all.
    let hangar = Hangar::start_with_env(REQUIRED_AND_NOT, &[], &[("HANGAR_TEST_LANDLOCK_ABI_MAX", "0")]);

    let why = refused_start(&hangar, "required");
    assert!(why.contains("need Landlock") && why.contains("no Landlock") && why.contains("require: false"), "{why}");
    assert_eq!(hangar.details("required")["dead"]["reason"], "start_failed");

    // Not required: it runs, reads what the sandbox would have denied (as root, the file
    // modes do not), and says why.
    let read = attempt(&hangar, "optional", "read_file", json!({"path": "/etc/shadow"}));
    assert_eq!(read["ok"], true, "{read}");
    let details = hangar.details("optional");
    let in_effect = &details["sandbox"]["in_effect"];
    assert!(in_effect["fallbacks"].to_string().contains("filesystem: not restricted"), "{details}");
    assert!(in_effect["landlock_abi"].is_null(), "{details}");
    assert!(!in_effect["enforced"].to_string().contains("filesystem: Landlock"), "{details}");
    assert_eq!(details["state"], "ready", "{details}");
}

#[test]
fn open_files_cpu_seconds_no_syscall_filter_and_no_private_home_are_as_configured() {
    let config = r#"
mcp_servers:
  limited:
    command: ["/usr/bin/python3", "{fixtures}/sandbox_probe.py"]
    sandbox:
      filesystem: {read: [/usr, /lib, /lib64, /bin, /etc/ld.so.cache], private: false}
      max_open_files: 123
      cpu_seconds: 77
      syscalls: none
  defaults:
    command: ["/usr/bin/python3", "{fixtures}/sandbox_probe.py"]
    sandbox: {filesystem: {read: [/usr, /lib, /lib64, /bin, /etc/ld.so.cache]}}
"#;
    let hangar = Hangar::start(config);
    let limited = attempt(&hangar, "limited", "limits", json!({}));
    assert_eq!(limited["limits"]["Max open files"], json!([123, 123]), "{limited}");
    assert_eq!(limited["limits"]["Max cpu time"], json!([77, 77]), "{limited}");
    assert_eq!(limited["seccomp"], "0", "{limited}");
    let me = attempt(&hangar, "limited", "whoami", json!({}));
    for key in ["home", "tmpdir"] {
        assert!(!me[key].to_string().contains("hangar-sandbox-"), "{key}: {me}");
    }
    // The same probe with the defaults: the filter and the private home are there, so the
    // assertions above tell the keys apart from what the probe always sees.
    let defaults = attempt(&hangar, "defaults", "limits", json!({}));
    assert_eq!(defaults["seccomp"], "2", "{defaults}");
    assert_ne!(defaults["limits"]["Max open files"], json!([123, 123]), "{defaults}");
    assert_ne!(defaults["limits"]["Max cpu time"], json!([77, 77]), "{defaults}");
    let home = attempt(&hangar, "defaults", "whoami", json!({}))["home"].to_string();
    assert!(home.contains("hangar-sandbox-"), "{home}");
    let details = hangar.details("limited");
    let enforced = details["sandbox"]["in_effect"]["enforced"].to_string();
    for word in ["max_open_files: 123", "cpu_seconds: 77"] {
        assert!(enforced.contains(word), "{word} not in {enforced}");
    }
    assert!(!enforced.contains("seccomp"), "{enforced}");
    let fallbacks = details["sandbox"]["in_effect"]["fallbacks"].to_string();
    assert!(fallbacks.contains("other processes: not fenced"), "{fallbacks}");
    for id in ["limited", "defaults"] {
        assert_eq!(hangar.details(id)["state"], "ready", "{id}");
    }
}

#[test]
fn network_none_without_root_is_a_user_and_network_namespace_of_its_own() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let config = r#"
mcp_servers:
  offline:
    command: ["/usr/bin/python3", "{fixtures}/sandbox_probe.py"]
    sandbox: {network: none}
"#;
    // nobody: the supervisor has no root, so `network: none` needs CLONE_NEWUSER with it.
    let hangar = Hangar::start_as_user(config, 65534, 65534);
    let status = std::fs::read_to_string(format!("/proc/{}/status", hangar.pid())).unwrap();
    let uid_line = status.lines().find(|l| l.starts_with("Uid:")).unwrap_or_default().to_owned();
    assert!(uid_line.split_whitespace().skip(1).all(|uid| uid == "65534"), "the supervisor is not nobody: {uid_line}");

    let connect = attempt(&hangar, "offline", "connect", json!({"port": port}));
    assert_refused(&connect, &["ENETUNREACH"], "connect from network: none without root");
    let details = hangar.details("offline");
    let enforced = details["sandbox"]["in_effect"]["enforced"].to_string();
    assert!(enforced.contains("network: none"), "{enforced}");
    assert_eq!(details["sandbox"]["in_effect"]["fallbacks"], json!([]), "{details}");
    assert_eq!(details["state"], "ready", "{details}");
    assert_eq!(attempt(&hangar, "offline", "whoami", json!({}))["ok"], true);
}

/// The host's mount table, as this test sees it.
fn host_mounts() -> String {
    std::fs::read_to_string("/proc/self/mountinfo").unwrap()
}

#[test]
fn a_private_tmp_is_empty_its_own_and_keeps_only_what_it_is_granted() {
    let config = r#"
mcp_servers:
  boxed:
    command: ["/usr/bin/python3", "{fixtures}/sandbox_probe.py"]
    sandbox:
      user: nobody
      filesystem:
        read: [/usr, /lib, /lib64, /bin, /etc/ld.so.cache, "{dir}/readable", "{dir}/single.txt"]
        write: ["{dir}/out"]
  neighbour:
    command: ["/usr/bin/python3", "{fixtures}/sandbox_probe.py"]
    sandbox: strict
"#;
    let mounts = host_mounts();
    // The probe runs as nobody, from copies outside the clone and outside /tmp: what its /tmp
    // lists does not depend on where the clone lives.
    let mut hangar = Hangar::start_reachable(config);
    let dir = hangar.dir.path().to_path_buf();
    assert!(dir.starts_with("/tmp"), "the grants must lie under the host's /tmp for this story: {dir:?}");
    lay_out(&dir);
    // Open to all: only the sandbox keeps it read-only.
    std::fs::set_permissions(dir.join("readable"), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::write(dir.join("single.txt"), "one file").unwrap();
    std::fs::set_permissions(dir.join("single.txt"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let pid = std::process::id();
    let name = format!("private-tmp-{pid}");
    // Removed when dropped, a failed run included.
    let host = tempfile::NamedTempFile::new_in("/tmp").unwrap();
    let host_file = host.path().display().to_string();
    let at = |name: &str| dir.join(name).display().to_string();

    // A hard-coded /tmp path works, and is its own: not the host's, not its neighbour's.
    let me = attempt(&hangar, "boxed", "whoami", json!({}));
    assert_eq!(me["tmpdir"], "/tmp", "{me}");
    let home = me["home"].as_str().unwrap().to_owned();
    let written = attempt(&hangar, "boxed", "write_file", json!({"path": format!("/tmp/{name}")}));
    assert_eq!(written["ok"], true, "{written}");
    assert_eq!(attempt(&hangar, "boxed", "read_file", json!({"path": format!("/tmp/{name}")}))["ok"], true);
    assert!(!Path::new("/tmp").join(&name).exists(), "/tmp/{name} reached the host");
    let neighbour = attempt(&hangar, "neighbour", "read_file", json!({"path": format!("/tmp/{name}")}));
    assert_refused(&neighbour, &["ENOENT"], "the neighbour's /tmp");
    assert_eq!(attempt(&hangar, "neighbour", "write_file", json!({"path": "/tmp/mine"}))["ok"], true);
    assert_refused(&attempt(&hangar, "boxed", "read_file", json!({"path": host_file})), &["ENOENT"], "the host's file");

    // Empty apart from what it wrote and the mount points of its grants (the test's dir) and
    // of its $HOME (the supervisor's directory of private dirs).
    let base = Path::new(&home).ancestors().nth(2).unwrap().file_name().unwrap().to_string_lossy().into_owned();
    let listed = attempt(&hangar, "boxed", "list_dir", json!({"path": "/tmp"}));
    let mut expected = vec![name.clone(), dir.file_name().unwrap().to_string_lossy().into_owned(), base];
    expected.sort();
    assert_eq!(listed["entries"], json!(expected), "{listed}");
    let scaffold = attempt(&hangar, "boxed", "list_dir", json!({"path": dir.display().to_string()}));
    assert_eq!(scaffold["entries"], json!(["out", "readable", "single.txt"]), "{scaffold}");

    // What it is granted under the host's /tmp is still there: read, write, a single file, its $HOME.
    assert_eq!(attempt(&hangar, "boxed", "read_file", json!({"path": at("readable/allowed.txt")}))["ok"], true);
    assert_eq!(attempt(&hangar, "boxed", "read_file", json!({"path": at("single.txt")}))["bytes"], 8);
    assert_eq!(attempt(&hangar, "boxed", "write_file", json!({"path": at("out/y")}))["ok"], true);
    assert!(dir.join("out/y").exists(), "a write grant under /tmp must reach the host's directory");
    assert_refused(
        &attempt(&hangar, "boxed", "write_file", json!({"path": at("readable/y")})),
        &["EROFS"],
        "write in a read grant under /tmp",
    );
    assert_eq!(attempt(&hangar, "boxed", "write_file", json!({"path": format!("{home}/y")}))["ok"], true);
    assert!(Path::new(&home).join("y").exists(), "its $HOME is the one the hangar made");

    let enforced = hangar.details("boxed")["sandbox"]["in_effect"]["enforced"].to_string();
    assert!(enforced.contains("/tmp: private"), "{enforced}");
    assert_eq!(hangar.details("neighbour")["sandbox"]["in_effect"]["fallbacks"], json!([]));
    // Nothing of it is mounted on the host, while it runs or after.
    assert_eq!(host_mounts(), mounts, "a sandbox's mounts reached the host");

    // A second start gets a fresh /tmp.
    hangar.tool_ok("hangar_stop", json!({"mcp_server": "boxed"}));
    hangar.tool_ok("hangar_start", json!({"mcp_server": "boxed"}));
    let again = attempt(&hangar, "boxed", "read_file", json!({"path": format!("/tmp/{name}")}));
    assert_refused(&again, &["ENOENT"], "the last start's /tmp");
    hangar.terminate();
    assert_eq!(host_mounts(), mounts, "a sandbox's mounts outlived it");
}

#[test]
fn a_private_tmp_without_root_is_a_user_and_mount_namespace_where_it_is_still_itself() {
    let config = r#"
mcp_servers:
  boxed:
    command: ["/usr/bin/python3", "{fixtures}/sandbox_probe.py"]
    sandbox: {filesystem: {read: [/usr, /lib, /lib64, /bin, /etc/ld.so.cache]}}
"#;
    // Not nobody: 65534 is also what an unmapped uid reads as inside a user namespace.
    let hangar = Hangar::start_as_user(config, 4242, 4242);
    let me = attempt(&hangar, "boxed", "whoami", json!({}));
    assert_eq!((me["uid"].as_u64(), me["gid"].as_u64()), (Some(4242), Some(4242)), "{me}");
    let name = format!("rootless-tmp-{}", std::process::id());
    assert_eq!(attempt(&hangar, "boxed", "write_file", json!({"path": format!("/tmp/{name}")}))["ok"], true);
    assert!(!Path::new("/tmp").join(&name).exists(), "/tmp/{name} reached the host");
    let home = me["home"].as_str().unwrap().to_owned();
    assert_eq!(attempt(&hangar, "boxed", "write_file", json!({"path": format!("{home}/x")}))["ok"], true);
    let details = hangar.details("boxed");
    assert!(details["sandbox"]["in_effect"]["enforced"].to_string().contains("/tmp: private"), "{details}");
    assert_eq!(details["sandbox"]["in_effect"]["fallbacks"], json!([]), "{details}");
}

#[test]
fn a_hangar_with_only_its_units_capabilities_runs_a_private_tmp_as_another_user() {
    // As the shipped systemd unit runs it: not root, with CAP_SETUID, CAP_SETGID and CAP_CHOWN
    // ambient. The server becomes `daemon`, then enters its user and mount namespaces as that
    // user, with that user mapped to itself.
    let config = r#"
mcp_servers:
  boxed:
    command: ["/usr/bin/python3", "{fixtures}/sandbox_probe.py"]
    sandbox:
      user: daemon
      filesystem: {read: [/usr, /lib, /lib64, /bin, /etc/ld.so.cache]}
"#;
    let daemon = nix::unistd::User::from_name("daemon").unwrap().expect("a `daemon` user");
    let mut hangar = Hangar::start_as_user_with_caps(config, 4242, 4242, "setuid,setgid,chown");
    let me = attempt(&hangar, "boxed", "whoami", json!({}));
    let ids = (me["uid"].as_u64(), me["gid"].as_u64());
    assert_eq!(ids, (Some(daemon.uid.as_raw().into()), Some(daemon.gid.as_raw().into())), "{me}");
    assert_eq!(me["tmpdir"], "/tmp", "{me}");
    let name = format!("unit-tmp-{}", std::process::id());
    let written = attempt(&hangar, "boxed", "write_file", json!({"path": format!("/tmp/{name}")}));
    assert_eq!(written["ok"], true, "{written}");
    assert!(!Path::new("/tmp").join(&name).exists(), "/tmp/{name} reached the host");
    let home = me["home"].as_str().unwrap().to_owned();
    let written = attempt(&hangar, "boxed", "write_file", json!({"path": format!("{home}/x")}));
    assert_eq!(written["ok"], true, "{written}");
    let in_effect = hangar.details("boxed")["sandbox"]["in_effect"].clone();
    assert!(in_effect["enforced"].to_string().contains("/tmp: private"), "{in_effect}");
    assert!(in_effect["enforced"].to_string().contains("user: daemon"), "{in_effect}");
    assert_eq!(in_effect["fallbacks"], json!([]), "{in_effect}");

    // Its private home, that user's now, with what the server left in it, still goes with it.
    assert_eq!(attempt(&hangar, "boxed", "make_dir", json!({"path": format!("{home}/deep/er")}))["ok"], true);
    assert_eq!(attempt(&hangar, "boxed", "write_file", json!({"path": format!("{home}/deep/er/file")}))["ok"], true);
    hangar.tool_ok("hangar_stop", json!({"mcp_server": "boxed"}));
    poll("the private home to be removed", Duration::from_secs(10), || (!Path::new(&home).exists()).then_some(()));
    // And what is left of its private directories when the hangar ends.
    hangar.tool_ok("hangar_start", json!({"mcp_server": "boxed"}));
    let home = attempt(&hangar, "boxed", "whoami", json!({}))["home"].as_str().unwrap().to_owned();
    assert_eq!(attempt(&hangar, "boxed", "make_dir", json!({"path": format!("{home}/kept")}))["ok"], true);
    let base = Path::new(&home).ancestors().nth(2).unwrap().to_path_buf();
    assert!(base.file_name().unwrap().to_string_lossy().starts_with("hangar-sandbox-"), "{base:?}");
    hangar.terminate();
    assert!(!base.exists(), "{base:?} outlived the hangar");
}

#[test]
fn without_user_namespaces_a_private_tmp_refuses_the_start_unless_not_required() {
    // The hangar is made to believe the system forbids unprivileged user namespaces.
    let hangar =
        Hangar::start_as_user_with_env(REQUIRED_AND_NOT, 4242, 4242, &[("HANGAR_TEST_NO_USER_NAMESPACES", "1")]);
    let why = refused_start(&hangar, "required");
    assert!(why.contains("private /tmp needs a mount namespace") && why.contains("require: false"), "{why}");

    // Not required: today's weaker box, said in its fallbacks: a private $TMPDIR, /tmp refused.
    let me = attempt(&hangar, "optional", "whoami", json!({}));
    assert!(me["tmpdir"].as_str().is_some_and(|tmp| tmp.contains("hangar-sandbox-")), "{me}");
    let tmp = attempt(&hangar, "optional", "write_file", json!({"path": "/tmp/not-private"}));
    assert_refused(&tmp, &["EACCES"], "the host's /tmp");
    let in_effect = hangar.details("optional")["sandbox"]["in_effect"].clone();
    assert!(in_effect["fallbacks"].to_string().contains("/tmp: not private"), "{in_effect}");
    assert!(!in_effect["enforced"].to_string().contains("/tmp: private"), "{in_effect}");
}

#[test]
fn a_sandbox_granted_the_hosts_tmp_shares_it_and_says_so() {
    // The hangar's socket and state outside /tmp: a grant of /tmp must not cover them.
    let (run, state) = (outside_tmp("/run"), outside_tmp("/var/tmp"));
    let config = format!(
        r#"
state_dir: "{state}"
mcp_servers:
  shared:
    command: ["/usr/bin/python3", "{{fixtures}}/sandbox_probe.py"]
    sandbox: {{filesystem: {{read: [/usr, /lib, /lib64, /bin, /etc/ld.so.cache], write: [/tmp]}}}}
"#,
        state = state.path().display()
    );
    let socket = run.path().join("supervisor.sock").display().to_string();
    let hangar = Hangar::start_with(&config, &["--socket", &socket]);
    let path = format!("/tmp/granted-tmp-{}", std::process::id());
    assert_eq!(attempt(&hangar, "shared", "write_file", json!({"path": path}))["ok"], true);
    assert!(Path::new(&path).exists(), "a grant of /tmp itself is the host's /tmp");
    std::fs::remove_file(&path).unwrap();
    let in_effect = hangar.details("shared")["sandbox"]["in_effect"].clone();
    assert!(in_effect["fallbacks"].to_string().contains("/tmp: the host's, not private"), "{in_effect}");
    assert!(attempt(&hangar, "shared", "whoami", json!({}))["tmpdir"].as_str().unwrap().contains("hangar-sandbox-"));
}
