//! What the supervisor keeps of its tasks (`calls/park/` runs them): the book, the running
//! call of each working task, what each task's call was made of and reached, and the upstream
//! tasks ours follow. A store only: nothing here runs a call.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use hangar_core::access::Caller;
use hangar_core::ipc::{Relay, Stance, Target};
use hangar_core::policy::View;
use hangar_core::sync::Unpoisoned;
use hangar_core::trace::TraceContext;
use serde_json::Value;
use tokio::task::AbortHandle;

use super::task_news::{TaskNews, Telling};
use crate::calls::running::Ids;
use crate::server::Server;
use crate::task_book::Book;

/// The supervisor's tasks: the book, and the running call of each working task.
#[derive(Default)]
pub struct Tasks {
    pub(crate) book: Mutex<Book>,
    pub(crate) runs: Mutex<HashMap<String, AbortHandle>>,
    /// What a task was made of, to run it again after `tasks/update`.
    pub(crate) calls: Mutex<HashMap<String, ParkedCall>>,
    /// Tasks that follow an upstream's own task (pass-through): ours to the upstream's.
    pub(crate) followed: Mutex<HashMap<String, Followed>>,
    pub(crate) ids: Ids,
    /// Every status change the book makes, told to the owners' listens (`news.rs`).
    pub(crate) news: TaskNews,
    /// What each task's call reached, checked against its owner's view on every read.
    pub(crate) reach: Mutex<HashMap<String, Reach>>,
}

/// The servers and tools a task's call went to (a batch's every call), and until when the
/// task can be asked about.
pub(crate) struct Reach {
    pub(crate) tools: Vec<(String, String)>,
    pub(crate) until_ms: u64,
}

impl Reach {
    /// Whether `view` still sees every server and tool the task reached.
    pub(crate) fn seen_by(&self, view: &View) -> bool {
        self.tools.iter().all(|(server, tool)| view.sees_server(server) && view.allows_tool(tool))
    }
}

/// An upstream's own task that one of ours follows.
#[derive(Clone)]
pub(crate) struct Followed {
    pub(crate) server: Arc<Server>,
    pub(crate) task_id: String,
    /// Whose task it is: a per-caller server is asked about it on that caller's connection.
    pub(crate) identity: String,
}

/// A parked call as it was made: run again, the same way, after `tasks/update`.
#[derive(Clone)]
pub(crate) struct ParkedCall {
    pub(crate) caller: Caller,
    pub(crate) target: Target,
    pub(crate) arguments: Value,
    pub(crate) extra: Option<Value>,
    pub(crate) trace: Option<TraceContext>,
    /// The client's `Mcp-Param-*` headers (SEP-2243), checked by every run of the call.
    pub(crate) param_headers: Option<Box<hangar_core::custom_headers::ParamHeaders>>,
    /// A task's call may take as long as the task lives; a plain call has the usual bound.
    pub(crate) timeout_ms: Option<u64>,
    /// The server the call goes to, once resolved (for following its own task).
    pub(crate) server: Option<Arc<Server>>,
    /// The notices a streamed call relays (until it is answered).
    pub(crate) relay: Relay,
    /// Its client's stance (it takes tasks), for every run of the call.
    pub(crate) stance: Stance,
}

pub(crate) use hangar_core::time::now_ms;

impl Tasks {
    /// The book; the status changes made through it are told as the guard goes.
    pub(crate) fn book(&self) -> Telling<'_> {
        Telling::new(self.book.locked(), &self.news)
    }

    pub(crate) fn runs(&self) -> MutexGuard<'_, HashMap<String, AbortHandle>> {
        self.runs.locked()
    }

    pub(crate) fn calls(&self) -> MutexGuard<'_, HashMap<String, ParkedCall>> {
        self.calls.locked()
    }

    pub(crate) fn followed(&self) -> MutexGuard<'_, HashMap<String, Followed>> {
        self.followed.locked()
    }

    /// Takes `tasks:` (at start and on every reload).
    pub(crate) fn configure(&self, config: &hangar_core::config::TasksConfig) {
        self.book().configure(config);
    }

    pub(crate) fn reach(&self) -> MutexGuard<'_, HashMap<String, Reach>> {
        self.reach.locked()
    }

    /// Task `id` reached `tools` (server, tool); kept as long as the task can be asked about.
    pub(crate) fn reached(&self, id: &str, tools: Vec<(String, String)>) {
        let now = now_ms();
        let mut reach = self.reach();
        reach.retain(|_, reach| now < reach.until_ms);
        reach.insert(id.to_owned(), Reach { tools, until_ms: now.saturating_add(crate::task_book::TTL_MS) });
    }

    /// Whether `view` sees task `id` (that is, everything its call reached); the owner is the
    /// book's to check.
    pub(crate) fn seen_by(&self, id: &str, view: &View) -> bool {
        self.reach().get(id).is_none_or(|reach| reach.seen_by(view))
    }

    /// Drops what is kept to run finished or expired tasks again: only a task waiting for
    /// answers (or working) needs its call.
    pub(crate) fn forget_gone(&self) {
        let mut book = self.book();
        book.expire(now_ms());
        self.calls().retain(|id, _| book.is_open(id));
        self.runs().retain(|id, run| book.is_open(id) && !run.is_finished());
        self.followed().retain(|id, _| book.is_open(id));
    }
}
