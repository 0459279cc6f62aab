//! Gateway-side tasks (SEP-2663): the book of every task the supervisor runs, and its rules.
//!
//! Pure: callers pass the time (milliseconds since the Unix epoch) and do the running; this
//! file only decides. A task belongs to the identity that created it: to anyone else it does
//! not exist. A task is kept for its `ttl_ms` from creation, then forgotten (an expired id
//! reads as unknown, as the spec's `-32602` says); a book holds at most [`MAX_LIVE`] tasks and
//! a result of at most [`MAX_RESULT_BYTES`].
//!
//! One identity holds at most `tasks.max_per_identity` unfinished tasks, so no identity fills
//! the book for everyone: at its quota its next call that may become a task is refused before it
//! runs ([`Book::admits`]). Finished tasks give way first: an identity at its quota frees its own
//! oldest finished task, and a full book frees the oldest finished task of the identity holding
//! the most finished tasks; only a book full of unfinished tasks runs a call without a task.

use std::collections::HashMap;

use hangar_core::jsonrpc::INTERNAL_ERROR;
use serde_json::{Map, Value, json};

/// How long a task is kept after its creation.
pub const TTL_MS: u64 = 60 * 60 * 1000;
/// How often a client is told to poll.
pub const POLL_INTERVAL_MS: u64 = 500;
/// The most tasks kept at once (over every identity); past it a call runs without a task.
pub const MAX_LIVE: usize = hangar_core::config::MAX_LIVE_TASKS;
/// The largest result a task keeps; a larger one fails the task (the result is dropped).
pub const MAX_RESULT_BYTES: usize = 4 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Working => "working",
            Status::InputRequired => "input_required",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, Status::Completed | Status::Failed | Status::Cancelled)
    }
}

/// One task.
#[derive(Debug, Clone)]
pub struct Task {
    pub id: String,
    pub owner: String,
    pub status: Status,
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
    pub ttl_ms: u64,
    /// The call's result (completed) or its JSON-RPC error (failed).
    result: Option<Value>,
    error: Option<Value>,
    /// Questions still unanswered (input_required), by the upstream's keys.
    pending: Map<String, Value>,
    /// Answers gathered so far in this round.
    answers: Map<String, Value>,
    /// The upstream's `requestState` of the round that asked.
    request_state: Option<Value>,
    /// Bumped at every run, so a stale run's outcome is ignored.
    pub run: u64,
}

/// Why a task request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Unknown, expired, or another identity's.
    Unknown,
    /// The book is full.
    Full,
    /// The identity holds `held` unfinished tasks, its quota (`tasks.max_per_identity`).
    Quota { held: usize, max: usize },
}

/// What `update` asks the caller to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Update {
    /// Nothing more: still waiting for other answers (or not waiting for any).
    Acknowledged,
    /// Every question is answered: run the call again with these `inputResponses` and
    /// `requestState`, as run number `run`.
    Resume { input_responses: Value, request_state: Option<Value>, run: u64 },
}

#[derive(Debug)]
pub struct Book {
    tasks: HashMap<String, Task>,
    /// The status changes since [`Book::take_changes`] last ran, in order.
    changed: Vec<Change>,
    /// Whether changes are recorded: each carries the whole task (its result up to 4 MiB), so
    /// they are made only while someone follows tasks ([`Book::record_changes`]).
    recording: bool,
    /// The most tasks one identity holds (`tasks.max_per_identity`).
    max_per_identity: usize,
}

impl Default for Book {
    fn default() -> Self {
        Book {
            tasks: HashMap::new(),
            changed: Vec::new(),
            recording: true,
            max_per_identity: hangar_core::config::DEFAULT_MAX_TASKS_PER_IDENTITY,
        }
    }
}

/// A task's status changed: what `tasks/get` now answers its owner.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub owner: String,
    pub id: String,
    /// The `DetailedTask`.
    pub task: Value,
    pub terminal: bool,
}

impl Book {
    /// The status changes since the last call, each with the task as it stood then, for
    /// status notifications (`notifications/tasks`).
    pub fn take_changes(&mut self) -> Vec<Change> {
        std::mem::take(&mut self.changed)
    }

    /// Whether the status changes from now on are recorded (by default they are). A follower
    /// that starts listening reads the book afterwards, so what it was not told it sees there.
    pub fn record_changes(&mut self, on: bool) {
        self.recording = on;
    }

    /// Forgets tasks past their TTL.
    pub fn expire(&mut self, now_ms: u64) {
        self.tasks.retain(|_, t| now_ms < t.created_at_ms.saturating_add(t.ttl_ms));
    }

    /// Takes `tasks.max_per_identity` (at start and on every reload); an identity already past
    /// a lowered quota keeps its tasks and gets no new one until it is under it.
    pub fn configure(&mut self, config: &hangar_core::config::TasksConfig) {
        self.max_per_identity = config.max_per_identity();
    }

    /// Whether `owner` may start a call that may become a task: refused (before the call runs,
    /// so nothing is done for it) when it holds its quota of unfinished tasks.
    pub fn admits(&mut self, owner: &str, now_ms: u64) -> Result<(), Refusal> {
        self.expire(now_ms);
        if self.max_per_identity >= MAX_LIVE {
            return Ok(());
        }
        let unfinished = self.tasks.values().filter(|t| t.owner == owner && !t.status.is_terminal()).count();
        if unfinished >= self.max_per_identity {
            return Err(Refusal::Quota { held: unfinished, max: self.max_per_identity });
        }
        Ok(())
    }

    /// A new working task of `owner`, known by `id` (the caller draws it: unguessable). Makes
    /// room first from finished tasks: `owner`'s own oldest at its quota, the crowding
    /// identity's oldest when the book is full.
    pub fn create(&mut self, id: String, owner: &str, now_ms: u64) -> Result<&Task, Refusal> {
        self.expire(now_ms);
        let held = self.tasks.values().filter(|t| t.owner == owner).count();
        // A quota as large as the book is the book's own bound.
        let quota = self.max_per_identity < MAX_LIVE;
        if quota && held >= self.max_per_identity && !self.free_finished(Some(owner)) {
            return Err(Refusal::Quota { held, max: self.max_per_identity });
        }
        if self.tasks.len() >= MAX_LIVE && !self.free_finished(None) {
            return Err(Refusal::Full);
        }
        let task = Task {
            id: id.clone(),
            owner: owner.to_owned(),
            status: Status::Working,
            created_at_ms: now_ms,
            updated_at_ms: now_ms,
            ttl_ms: TTL_MS,
            result: None,
            error: None,
            pending: Map::new(),
            answers: Map::new(),
            request_state: None,
            run: 0,
        };
        Ok(self.tasks.entry(id).or_insert(task))
    }

    /// Forgets one finished task to make room: the oldest finished one of `owner`, or (with
    /// `None`) of the identity holding the most finished tasks. Whether one was freed.
    fn free_finished(&mut self, owner: Option<&str>) -> bool {
        let finished = |t: &&Task| t.status.is_terminal() && owner.is_none_or(|o| t.owner == o);
        let owner = match owner {
            Some(owner) => owner.to_owned(),
            None => {
                let mut counts: HashMap<&str, usize> = HashMap::new();
                for task in self.tasks.values().filter(finished) {
                    *counts.entry(task.owner.as_str()).or_default() += 1;
                }
                let Some((crowding, _)) = counts.into_iter().max_by_key(|(_, n)| *n) else { return false };
                crowding.to_owned()
            }
        };
        let oldest = self
            .tasks
            .values()
            .filter(|t| t.status.is_terminal() && t.owner == owner)
            .min_by_key(|t| (t.updated_at_ms, t.created_at_ms))
            .map(|t| t.id.clone());
        oldest.is_some_and(|id| self.tasks.remove(&id).is_some())
    }

    /// Whether task `id` lives and is not finished (working, or waiting for answers).
    pub fn is_open(&self, id: &str) -> bool {
        self.tasks.get(id).is_some_and(|t| !t.status.is_terminal())
    }

    /// `owner`'s task `id`, if it lives.
    pub fn get(&mut self, owner: &str, id: &str, now_ms: u64) -> Result<&Task, Refusal> {
        self.expire(now_ms);
        self.tasks.get(id).filter(|t| t.owner == owner).ok_or(Refusal::Unknown)
    }

    /// The `requestState` a parked task of `owner`'s keeps (its held calls and batches are
    /// named there), if any.
    pub fn request_state(&mut self, owner: &str, id: &str, now_ms: u64) -> Option<Value> {
        self.get(owner, id, now_ms).ok()?.request_state.clone()
    }

    fn get_mut(&mut self, owner: &str, id: &str, now_ms: u64) -> Result<&mut Task, Refusal> {
        self.expire(now_ms);
        self.tasks.get_mut(id).filter(|t| t.owner == owner).ok_or(Refusal::Unknown)
    }

    /// Run `run` of task `id` answered `result` (a `tools/call` result): a tool error is
    /// `completed` with `isError`, an `input_required` result parks the task for answers, a
    /// result over [`MAX_RESULT_BYTES`] fails it. Ignored if the task is finished (cancelled)
    /// or the run is stale.
    pub fn answered(&mut self, id: &str, run: u64, result: Value, now_ms: u64) {
        let Some(task) = self.tasks.get_mut(id).filter(|t| t.run == run && !t.status.is_terminal()) else { return };
        task.updated_at_ms = now_ms;
        if result.get("resultType").and_then(Value::as_str) == Some("input_required") {
            task.status = Status::InputRequired;
            task.pending = result.get("inputRequests").and_then(Value::as_object).cloned().unwrap_or_default();
            task.answers = Map::new();
            task.request_state = result.get("requestState").cloned();
        } else if serde_json::to_vec(&result).map_or(usize::MAX, |b| b.len()) > MAX_RESULT_BYTES {
            task.status = Status::Failed;
            task.error =
                Some(json!({"code": INTERNAL_ERROR, "message": "the task's result is larger than the hangar keeps"}));
        } else {
            task.status = Status::Completed;
            task.result = Some(inlined(result));
        }
        self.changed.extend(self.recording.then(|| task.change()));
    }

    /// Run `run` of task `id` failed with a JSON-RPC error `{code, message, data?}`.
    pub fn failed(&mut self, id: &str, run: u64, error: Value, now_ms: u64) {
        let Some(task) = self.tasks.get_mut(id).filter(|t| t.run == run && !t.status.is_terminal()) else { return };
        task.updated_at_ms = now_ms;
        task.status = Status::Failed;
        task.error = Some(error);
        self.changed.extend(self.recording.then(|| task.change()));
    }

    /// Task `id` follows an upstream's own task (pass-through): `upstream` is that task as the
    /// upstream's `tasks/get` answered it. Its status, result, error and questions are taken
    /// over (the id is ours); an unknown status changes nothing. Ignored once finished here.
    pub fn mirrored(&mut self, id: &str, upstream: &Value, now_ms: u64) {
        let Some(task) = self.tasks.get_mut(id).filter(|t| !t.status.is_terminal()) else { return };
        let status = match upstream.get("status").and_then(Value::as_str) {
            Some("working") => Status::Working,
            Some("input_required") => Status::InputRequired,
            Some("completed") => Status::Completed,
            Some("failed") => Status::Failed,
            Some("cancelled") => Status::Cancelled,
            _ => return,
        };
        let changed = status != task.status;
        if changed {
            task.updated_at_ms = now_ms;
        }
        task.status = status;
        task.pending = upstream.get("inputRequests").and_then(Value::as_object).cloned().unwrap_or_default();
        task.result = upstream.get("result").cloned().map(inlined);
        task.error = upstream.get("error").cloned();
        if changed {
            self.changed.extend(self.recording.then(|| task.change()));
        }
    }

    /// Cancels `owner`'s task `id`: whether its run must be stopped (false for a finished one,
    /// which stays as it was: cancelling it again is no error).
    pub fn cancel(&mut self, owner: &str, id: &str, now_ms: u64) -> Result<bool, Refusal> {
        let recording = self.recording;
        let task = self.get_mut(owner, id, now_ms)?;
        if task.status.is_terminal() {
            return Ok(false);
        }
        task.status = Status::Cancelled;
        task.updated_at_ms = now_ms;
        task.pending.clear();
        let change = recording.then(|| task.change());
        self.changed.extend(change);
        Ok(true)
    }

    /// Answers to some of a parked task's questions. Answers to keys not asked are ignored;
    /// once every question has an answer the task works again and the caller resumes it.
    pub fn update(
        &mut self,
        owner: &str,
        id: &str,
        responses: &Map<String, Value>,
        now_ms: u64,
    ) -> Result<Update, Refusal> {
        let recording = self.recording;
        let task = self.get_mut(owner, id, now_ms)?;
        if task.status != Status::InputRequired {
            return Ok(Update::Acknowledged);
        }
        for (key, answer) in responses {
            if task.pending.remove(key).is_some() {
                task.answers.insert(key.clone(), answer.clone());
            }
        }
        task.updated_at_ms = now_ms;
        if !task.pending.is_empty() {
            return Ok(Update::Acknowledged);
        }
        task.status = Status::Working;
        task.run += 1;
        let input_responses = Value::Object(std::mem::take(&mut task.answers));
        let resume = Update::Resume { input_responses, request_state: task.request_state.take(), run: task.run };
        let change = recording.then(|| task.change());
        self.changed.extend(change);
        Ok(resume)
    }
}

impl Task {
    /// This task's status change, as it now stands.
    fn change(&self) -> Change {
        Change {
            owner: self.owner.clone(),
            id: self.id.clone(),
            task: self.detailed(),
            terminal: self.status.is_terminal(),
        }
    }

    /// The `DetailedTask` of `tasks/get` (without `resultType`, which the era adds).
    pub fn detailed(&self) -> Value {
        let mut out = self.envelope();
        match self.status {
            Status::Completed => out["result"] = self.result.clone().unwrap_or_else(|| json!({"content": []})),
            Status::Failed => {
                out["error"] =
                    self.error.clone().unwrap_or_else(|| json!({"code": INTERNAL_ERROR, "message": "the task failed"}))
            }
            Status::InputRequired => out["inputRequests"] = Value::Object(self.pending.clone()),
            Status::Working | Status::Cancelled => {}
        }
        out
    }

    /// The `CreateTaskResult` answered to the call that made the task.
    pub fn created(&self) -> Value {
        let mut out = self.envelope();
        out["resultType"] = json!("task");
        out
    }

    fn envelope(&self) -> Value {
        json!({
            "taskId": self.id,
            "status": self.status.as_str(),
            "createdAt": rfc3339(self.created_at_ms),
            "lastUpdatedAt": rfc3339(self.updated_at_ms),
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": POLL_INTERVAL_MS,
        })
    }
}

/// A result as `tasks/get` inlines it: without its own `resultType` (the task's status says
/// it) and without the v1 related-task `_meta` (the task id is at the root).
fn inlined(mut result: Value) -> Value {
    if let Some(map) = result.as_object_mut() {
        map.remove("resultType");
        if let Some(Value::Object(meta)) = map.get_mut("_meta") {
            meta.remove(hangar_core::mcp::META_RELATED_TASK);
        }
    }
    result
}

fn rfc3339(ms: u64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_millis(at).to_string()
}

#[cfg(test)]
#[path = "task_book_tests.rs"]
mod tests;
