//! `--conformance` over stdio. Unlike the plain fake, every request runs on
//! its own thread: fixtures pause between notifications and, on the legacy
//! wire, wait for the client's answers to their own requests, which arrive
//! on the same stdin the reader must keep reading.

use std::process::ExitCode;
use std::sync::Arc;
use std::thread::JoinHandle;

use serde_json::Value;

use super::Server;
use super::peer::StdioPeer;
use crate::log::log;
use crate::output::Output;
use crate::protocol::{self, Incoming};

pub fn serve(server: &Arc<Server>, out: &Arc<Output>) -> ExitCode {
    let peer = Arc::new(StdioPeer::new(Arc::clone(out)));
    let mut running: Vec<JoinHandle<()>> = Vec::new();
    let code = crate::stdio::read_messages(
        out,
        || false,
        |msg| {
            if let Incoming::Response { id } = protocol::classify(&msg) {
                if !peer.deliver(id, msg.clone()) {
                    log(&format!("an answer to no request of ours: {msg}"));
                }
                return;
            }
            running.retain(|h| !h.is_finished());
            let (server, peer, out) = (Arc::clone(server), Arc::clone(&peer), Arc::clone(out));
            let is_call = msg.get("method").and_then(Value::as_str) == Some("tools/call");
            let job = move || {
                if let Some(reply) = server.handle(&msg, &*peer) {
                    out.answer(&reply, is_call);
                }
            };
            match std::thread::Builder::new().name("conformance-request".into()).spawn(job) {
                Ok(handle) => running.push(handle),
                Err(e) => log(&format!("cannot start a thread for a request, dropping it: {e}")),
            }
        },
    );
    // No answer can come any more: release the waiters, then let every
    // request finish, so nothing already read goes unanswered.
    peer.close();
    for handle in running {
        let _ = handle.join();
    }
    code
}
