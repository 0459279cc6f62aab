//! `hangar_call` of a 2026-07-28 client that takes no tasks but can be asked something
//! (a [`Called::Batch`](hangar_core::ipc::Called) without tasks): the supervisor runs the batch as it runs a batch task
//! (`park/batch.rs`), each call held when its legacy upstream asks the client something
//! (`call.rs`). When calls ask, the batch is answered ONE `input_required` with every open
//! question (keyed `<index>/<key>`) and a `requestState` naming the batch, which waits here,
//! bound to its caller's identity. The retry (to any API instance) with `inputResponses` and
//! that state resumes the calls that asked, each with its answers; the calls that finished keep
//! their results, and nothing runs twice. A retry that answers only some questions is asked the
//! rest; one that answers no open question, or is not an object, is refused and changes nothing.
//! An unanswered batch is forgotten after [`HOLD`] (or `tool_access.client_answer_timeout_s`, if
//! shorter), as its held calls are.

use hangar_core::access::Caller;
use hangar_core::echo::bounded;
use hangar_core::ipc::{ErrorKind, IpcError, Reply};
use hangar_core::mcp::{
    HELD_BATCH_STATE_PREFIX, INPUT_REQUESTS, INPUT_RESPONSES, REQUEST_STATE, RESULT_TYPE_INPUT_REQUIRED,
};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::{HOLD, state_token, unknown_state};
use crate::calls::kept::HeldBatch;
use crate::calls::park::BatchRequest;
use crate::hangar::Hangar;

/// The most batches held at once: each keeps its report so far.
pub const MAX_HELD_BATCHES: usize = 1024;

/// What a retry found: the rest of the questions to ask, or every answer and the batch's state.
enum Retry {
    Asks(Value),
    Answered { state: Value, answers: Value },
}

/// The token of a `requestState` that names a held batch, if it is one.
fn held_batch_token(extra: Option<&Value>) -> Option<&str> {
    state_token(extra, HELD_BATCH_STATE_PREFIX)
}

fn refused(message: String) -> IpcError {
    IpcError::new(ErrorKind::InvalidArgument, format!("Invalid params: {message}"))
}

/// The `input_required` result asking `questions` for the batch held as `token`.
fn asking(questions: Map<String, Value>, token: &str) -> Value {
    json!({
        "resultType": RESULT_TYPE_INPUT_REQUIRED,
        INPUT_REQUESTS: questions,
        REQUEST_STATE: format!("{HELD_BATCH_STATE_PREFIX}{token}"),
    })
}

impl Hangar {
    /// A batch of a client that takes no tasks: the batch's `tools/call` result, or its
    /// questions.
    pub(crate) async fn held_batch(
        &self,
        caller: &Caller,
        request: BatchRequest,
        notices: Option<mpsc::UnboundedSender<Value>>,
    ) -> Result<Reply, IpcError> {
        let BatchRequest { batch, trace, extra, relay, asks } = request;
        let me = self.owned()?;
        let relayed = notices.filter(|_| !relay.is_off()).map(|to| (relay, to));
        let result = match held_batch_token(extra.as_ref()) {
            Some(token) => match self.retried_batch(caller, token, extra.as_ref())? {
                Retry::Asks(result) => return Ok(Reply::Called(result)),
                Retry::Answered { state, answers } => {
                    me.resume_parked(caller.clone(), &state, &answers, relayed)?.await?
                }
            },
            None => me.run_batch(caller.clone(), (batch, asks), trace, extra, relayed).await?,
        };
        self.hold_if_asks(caller, result).map(Reply::Called)
    }

    /// The batch's result as its client sees it: one that asks is held, and its state named.
    fn hold_if_asks(&self, caller: &Caller, mut result: Value) -> Result<Value, IpcError> {
        if result.get("resultType").and_then(Value::as_str) != Some(RESULT_TYPE_INPUT_REQUIRED) {
            return Ok(result);
        }
        let questions = match result.get_mut(INPUT_REQUESTS).map(Value::take) {
            Some(Value::Object(questions)) => questions,
            _ => Map::new(),
        };
        let state = result.get_mut(REQUEST_STATE).map(Value::take).unwrap_or_default();
        // Tagged with this hangar in a fleet, so a retry through another hangar comes back here.
        let token = self.owned_id(self.calls.held.ids.next());
        {
            let mut held = self.calls.held.batches.held();
            if held.len() >= MAX_HELD_BATCHES {
                // Its held calls end on their own, their upstreams answered with an error.
                return Err(IpcError::new(
                    ErrorKind::ConcurrencyLimited,
                    format!("too many batches wait for their clients' answers (at most {MAX_HELD_BATCHES})"),
                ));
            }
            let batch = HeldBatch {
                identity: caller.identity.clone(),
                questions: questions.clone(),
                answers: Map::new(),
                state,
            };
            held.insert(token.clone(), batch);
        }
        self.expire_held_batch(token.clone());
        Ok(asking(questions, &token))
    }

    /// The client's retry of held batch `token`: its answers are checked against the open
    /// questions and kept. An unknown token, or another identity's, is refused alike.
    fn retried_batch(&self, caller: &Caller, token: &str, extra: Option<&Value>) -> Result<Retry, IpcError> {
        let mut book = self.calls.held.batches.held();
        let held = match book.get_mut(token) {
            Some(held) if held.identity == caller.identity => held,
            _ => return Err(unknown_state()),
        };
        let Some(responses) = extra.and_then(|e| e.get(INPUT_RESPONSES)).and_then(Value::as_object) else {
            return Err(refused(format!(
                "`{INPUT_RESPONSES}` must be an object answering the batch's questions by key"
            )));
        };
        if let Some(odd) = responses.keys().find(|key| !held.questions.contains_key(*key)) {
            let open: Vec<&str> = held.questions.keys().map(String::as_str).collect();
            return Err(refused(format!(
                "`{INPUT_RESPONSES}` answers no open question of the batch: `{}` (open: {})",
                bounded(odd),
                open.join(", ")
            )));
        }
        held.answers.extend(responses.iter().map(|(key, answer)| (key.clone(), answer.clone())));
        let missing: Map<String, Value> = held
            .questions
            .iter()
            .filter(|(key, _)| !held.answers.contains_key(*key))
            .map(|(k, q)| (k.clone(), q.clone()))
            .collect();
        if !missing.is_empty() {
            return Ok(Retry::Asks(asking(missing, token)));
        }
        let held = book.remove(token).ok_or_else(unknown_state)?;
        Ok(Retry::Answered { state: held.state, answers: Value::Object(held.answers) })
    }

    /// Forgets held batch `token` after [`HOLD`] (or the client answer timeout, if shorter) if
    /// no retry took it; its held calls end on their own by then.
    fn expire_held_batch(&self, token: String) {
        let me = self.me.clone();
        let hold = HOLD.min(self.client_answer_timeout());
        tokio::spawn(async move {
            tokio::time::sleep(hold).await;
            if let Some(hangar) = me.upgrade() {
                hangar.calls.held.batches.held().remove(&token);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_hangars_batch_states_name_held_batches() {
        assert_eq!(held_batch_token(Some(&json!({REQUEST_STATE: "hangar-batch-abc"}))), Some("abc"));
        assert_eq!(held_batch_token(Some(&json!({REQUEST_STATE: "hangar-held-abc"}))), None);
        assert_eq!(held_batch_token(Some(&json!({REQUEST_STATE: {"k": 1}}))), None);
        assert_eq!(held_batch_token(None), None);
    }
}
