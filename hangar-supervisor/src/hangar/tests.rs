//! The answers of `Hangar::handle` within a caller's view.

#![allow(clippy::unwrap_used)]

use super::*;
use hangar_core::ipc::{Get, Outcome, Reply, Request, Stop};

fn hangar(auth: &str) -> Arc<Hangar> {
    let yaml = format!(
        "{auth}profiles:\n  ci: {{servers: [math], tools: {{allow: [add]}}}}\nmcp_servers:\n  math: {{command: [\"true\"]}}\n  secret: {{command: [\"true\"]}}\n"
    );
    Hangar::new(&Config::parse(&yaml).unwrap(), None, crate::journal::Journal::in_memory())
}

fn listed(outcome: Outcome) -> Vec<String> {
    match outcome {
        Outcome::Ok(Reply::Servers(servers)) => servers.into_iter().map(|s| s.mcp_server_id).collect(),
        other => panic!("{other:?}"),
    }
}

fn refused(outcome: Outcome) -> ErrorKind {
    match outcome {
        Outcome::Err(err) => err.kind,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_anonymous_caller_is_refused_once_keys_are_configured() {
    let keyed = hangar(&format!("auth:\n  api_keys: [{{name: k, hash: \"sha256:{}\"}}]\n", "ab".repeat(32)));
    assert_eq!(refused(keyed.handle(&Caller::anonymous(), Request::List, None).await), ErrorKind::Forbidden);
    assert_eq!(listed(keyed.handle(&Caller::hangar(), Request::List, None).await), ["math", "secret"]);
    let open = hangar("");
    assert_eq!(listed(open.handle(&Caller::anonymous(), Request::List, None).await), ["math", "secret"]);
}

#[tokio::test]
async fn a_profile_lists_its_servers_and_is_refused_admin_and_internal_requests() {
    let hangar = hangar("");
    let ci = Caller { identity: "ci-bot".into(), profile: Some("ci".into()) };
    assert_eq!(listed(hangar.handle(&ci, Request::List, None).await), ["math"]);
    let get = |id: &str| Request::Get(Get { mcp_server: id.into() });
    assert_eq!(refused(hangar.handle(&ci, get("secret"), None).await), ErrorKind::NotFound);
    assert_eq!(refused(hangar.handle(&ci, get("nosuch"), None).await), ErrorKind::NotFound);
    let stop = Request::Stop(Stop { mcp_server: "math".into() });
    assert_eq!(refused(hangar.handle(&ci, stop, None).await), ErrorKind::Forbidden);
    for internal in [Request::Auth, Request::Targets, Request::Cluster] {
        assert_eq!(refused(hangar.handle(&ci, internal, None).await), ErrorKind::Forbidden);
    }
    let stale = Caller { identity: "old".into(), profile: Some("removed".into()) };
    assert!(listed(hangar.handle(&stale, Request::List, None).await).is_empty(), "a stale profile sees nothing");
}
