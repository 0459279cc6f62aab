//! A 2026-07-28 client's front-door call whose legacy upstream asks the client something
//! mid-call (sampling, elicitation, roots): the call is held here, still running, and answered
//! `input_required` with a `requestState` naming it. The client's retry (to any API instance)
//! with `inputResponses` and that state answers the upstream's request and waits on for the
//! same call's result: the call is not sent again. A held call belongs to its caller's identity
//! and waits at most [`HOLD`] (or `tool_access.client_answer_timeout_s`, if shorter) for the
//! retry; then it is cancelled upstream and the upstream's request is answered with an error.
//!
//! Every call whose stance may hold comes here ([`Hangar::held_or_called`]): a 2026-07-28
//! front-door call answered as JSON or as an event stream, a task's every run, a supervisor-run
//! batch's every call. A call whose client can be asked nothing runs
//! inline, as any call; only one that may be held runs on its own, so it can outlive its request.
//! A streamed call's progress and log notices go to whichever request waits for it: the first,
//! then the retry that resumed it (from any API instance).

use hangar_core::access::Caller;
use hangar_core::ipc::{ErrorKind, IpcError, Outcome, Relay, Reply};
use hangar_core::jsonrpc::{INTERNAL_ERROR, RpcError};
use hangar_core::mcp::{
    HELD_CALL_STATE_PREFIX, INPUT_REQUESTS, INPUT_RESPONSES, REQUEST_STATE, RESULT_TYPE_INPUT_REQUIRED, not_declared,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{HOLD, state_token, unknown_state};
use crate::calls::CallRequest;
use crate::calls::kept::{Held, Running};
use crate::calls::running::AbortOnDrop;
use crate::hangar::{Decision, Hangar};

/// The key of the one question in `inputRequests`.
const ASK_KEY: &str = "upstream";

/// The token of a `requestState` that names a held call, if it is one.
pub fn held_token(extra: Option<&Value>) -> Option<&str> {
    state_token(extra, HELD_CALL_STATE_PREFIX)
}

impl Hangar {
    /// A call that may be held (a [`CallEra::Modern`](hangar_core::ipc::CallEra) front-door
    /// call, a batch's call): the retry of a held call resumes it; a call whose client can be
    /// asked something runs on its own and may be held; any other is made here and now.
    pub(crate) async fn held_or_called(&self, decide: &Decision<'_>, mut call: CallRequest) -> Result<Value, IpcError> {
        let notices = call.notices.take();
        if let Some(token) = held_token(call.extra.as_ref()) {
            return self.resume_held(decide.caller(), token, call.extra.as_ref(), notices).await;
        }
        let may_ask = call.stance.asks;
        if !may_ask.any() {
            return self.pipeline(decide, CallRequest { notices, ..call }).await;
        }
        let me = self.owned()?;
        // The upstream's requests come back here, beside the notices the caller asked for.
        let (asks_to, asks) = mpsc::unbounded_channel();
        let call = CallRequest { relay: Relay { asks: true, ..call.relay }, notices: Some(asks_to), ..call };
        let running = tokio::spawn(me.call_on_its_own(decide.caller().clone(), call));
        self.wait_or_hold(decide.caller(), Running { call: running, asks, may_ask }, notices).await
    }

    /// Waits for `running` to end, or for its upstream to ask the client something the client
    /// declared it can answer: then the call is held and answered `input_required`. Its
    /// notifications meanwhile go to `notices`.
    pub(crate) async fn wait_or_hold(
        &self,
        caller: &Caller,
        mut running: Running,
        notices: Option<mpsc::UnboundedSender<Value>>,
    ) -> Result<Value, IpcError> {
        let mut guard = AbortOnDrop(Some(running.call.abort_handle()));
        loop {
            let ask = tokio::select! {
                outcome = &mut running.call => return match outcome {
                    Ok(Outcome::Ok(Reply::Called(result))) => {
                        // Notifications that raced the answer still go first.
                        while let Ok(notice) = running.asks.try_recv() {
                            if notice.get("id").is_none() {
                                pass_on(notices.as_ref(), notice);
                            }
                        }
                        Ok(result)
                    }
                    Ok(Outcome::Ok(_)) => Err(IpcError::new(ErrorKind::Internal, "the call answered something else")),
                    Ok(Outcome::Err(err)) => Err(err),
                    Err(_) => Err(IpcError::new(ErrorKind::Internal, "the call's task ended")),
                },
                Some(ask) = running.asks.recv() => ask,
            };
            // A notification (it has no id) is for whoever waits for the call now.
            if ask.get("id").is_none() {
                pass_on(notices.as_ref(), ask);
                continue;
            }
            let text = |key: &str| ask.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
            let (server, ask_id, method) = (text("mcp_server"), text("id"), text("method"));
            if !running.may_ask.allows_request(&method, ask.get("params")) {
                self.answer_held_ask(&server, &ask_id, json!({"error": not_declared(&method).to_json()}));
                continue;
            }
            let mut question = json!({"method": method});
            if let Some(params) = ask.get("params") {
                question["params"] = params.clone();
            }
            let token = self.owned_id(self.calls.held.ids.next());
            guard.0 = None;
            let held = Held { identity: caller.identity.clone(), server, ask_id, running };
            self.calls.held.calls().insert(token.clone(), held);
            self.expire_held(token.clone());
            return Ok(json!({
                "resultType": RESULT_TYPE_INPUT_REQUIRED,
                INPUT_REQUESTS: {ASK_KEY: question},
                REQUEST_STATE: format!("{HELD_CALL_STATE_PREFIX}{token}"),
            }));
        }
    }

    /// The client's retry of a held call: its answer goes to the upstream's request, then the
    /// same call is waited for. An unknown token, or another identity's, is refused alike.
    pub(crate) async fn resume_held(
        &self,
        caller: &Caller,
        token: &str,
        extra: Option<&Value>,
        notices: Option<mpsc::UnboundedSender<Value>>,
    ) -> Result<Value, IpcError> {
        let held = {
            let mut book = self.calls.held.calls();
            match book.get(token) {
                Some(held) if held.identity == caller.identity => book.remove(token),
                _ => None,
            }
        };
        let held = held.ok_or_else(unknown_state)?;
        let answer = extra.and_then(|e| e.get(INPUT_RESPONSES)).and_then(|r| r.get(ASK_KEY));
        let response = match answer {
            Some(result) => json!({"result": result}),
            None => json!({"error": RpcError::new(INTERNAL_ERROR, "hangar: the client gave no answer").to_json()}),
        };
        self.answer_held_ask(&held.server, &held.ask_id, response);
        self.wait_or_hold(caller, held.running, notices).await
    }

    /// Forgets the held call `token` after [`HOLD`] if no retry took it: its upstream's
    /// request is answered with an error and the call is cancelled upstream.
    fn expire_held(&self, token: String) {
        let me = self.me.clone();
        let hold = HOLD.min(self.client_answer_timeout());
        tokio::spawn(async move {
            tokio::time::sleep(hold).await;
            let Some(hangar) = me.upgrade() else { return };
            let Some(held) = hangar.calls.held.calls().remove(&token) else { return };
            let error = RpcError::new(INTERNAL_ERROR, "hangar: the client did not answer in time");
            hangar.answer_held_ask(&held.server, &held.ask_id, json!({"error": error.to_json()}));
            held.running.call.abort();
        });
    }
}

/// A notification about a running call, to the request waiting for it (if that one asked for
/// notices and still listens).
fn pass_on(notices: Option<&mpsc::UnboundedSender<Value>>, notice: Value) {
    if let Some(notices) = notices {
        let _ = notices.send(notice);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_hangars_own_states_name_held_calls() {
        assert_eq!(held_token(Some(&json!({REQUEST_STATE: "hangar-held-abc"}))), Some("abc"));
        assert_eq!(held_token(Some(&json!({REQUEST_STATE: "the-upstreams-own"}))), None);
        assert_eq!(held_token(Some(&json!({REQUEST_STATE: 7}))), None);
        assert_eq!(held_token(None), None);
    }
}
