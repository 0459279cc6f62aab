//! Task status notifications (SEP-2663's `notifications/tasks`): every status change the book
//! makes is broadcast as the book's guard goes ([`Telling`]), and [`Request::TaskFollow`]
//! hands a caller the changes of its own tasks among those it named, for its
//! `subscriptions/listen` stream. Only the owner hears of a task, and only while its current
//! view sees what the task reached: another's id, like an unknown one, is simply not followed.
//!
//! [`Request::TaskFollow`]: hangar_core::ipc::Request::TaskFollow

use std::collections::HashSet;

use hangar_core::access::Caller;
use hangar_core::ipc::{ErrorKind, IpcError, MAX_FOLLOWED_TASKS, Reply};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::calls::kept::now_ms;
use crate::hangar::Hangar;

impl Hangar {
    /// [`Request::TaskFollow`]: the caller's own live tasks among `task_ids`, as they stand and
    /// then at every status change, until each is finished or the caller goes.
    ///
    /// [`Request::TaskFollow`]: hangar_core::ipc::Request::TaskFollow
    pub(crate) async fn task_follow(
        &self,
        caller: &Caller,
        task_ids: Vec<String>,
        notices: Option<mpsc::UnboundedSender<Value>>,
    ) -> Result<Reply, IpcError> {
        let notices = notices.ok_or_else(|| IpcError::new(ErrorKind::Internal, "following tasks needs notices"))?;
        // Subscribed before the book is read, so no change between the two is missed.
        let mut news = self.calls.tasks.news.0.subscribe();
        let mut open = HashSet::new();
        let (accepted, current) = self.standing(caller, task_ids.iter().take(MAX_FOLLOWED_TASKS), &mut open);
        if notices.send(json!({"taskIds": accepted})).is_err() {
            return Ok(Reply::Task(json!({})));
        }
        for task in current {
            let _ = notices.send(task);
        }
        while !open.is_empty() {
            let told = tokio::select! {
                change = news.recv() => change,
                () = notices.closed() => break,
            };
            match told {
                Ok(change)
                    if change.owner == caller.identity
                        && open.contains(&change.id)
                        && self.calls.tasks.seen_by(&change.id, &self.view(caller)) =>
                {
                    if change.terminal {
                        open.remove(&change.id);
                    }
                    if notices.send(change.task).is_err() {
                        break;
                    }
                }
                Ok(_) => {}
                // Too many changes at once: tell each followed task as it stands now instead.
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    let still: Vec<String> = open.drain().collect();
                    let (_, current) = self.standing(caller, still.iter(), &mut open);
                    for task in current {
                        let _ = notices.send(task);
                    }
                }
                Err(broadcast::error::RecvError::Closed) => break,
            }
        }
        Ok(Reply::Task(json!({})))
    }

    /// Of `task_ids`, the caller's live tasks: their ids and how each stands; the unfinished
    /// ones join `open`.
    fn standing<'a>(
        &self,
        caller: &Caller,
        task_ids: impl Iterator<Item = &'a String>,
        open: &mut HashSet<String>,
    ) -> (Vec<String>, Vec<Value>) {
        let view = self.view(caller);
        let mut book = self.calls.tasks.book();
        let (mut accepted, mut current) = (Vec::new(), Vec::new());
        for id in task_ids {
            if !self.calls.tasks.seen_by(id, &view) {
                continue;
            }
            let Ok(task) = book.get(&caller.identity, id, now_ms()) else { continue };
            if accepted.contains(id) {
                continue;
            }
            if !task.status.is_terminal() {
                open.insert(id.clone());
            }
            accepted.push(id.clone());
            current.push(task.detailed());
        }
        (accepted, current)
    }
}
