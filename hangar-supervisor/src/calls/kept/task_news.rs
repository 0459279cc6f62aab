//! The broadcast of the task book's status changes (SEP-2663's `notifications/tasks`): every
//! change the book makes is sent as the book's guard goes ([`Telling`]); `calls/park/news.rs`
//! hands each caller the changes of its own tasks.

use std::ops::{Deref, DerefMut};
use std::sync::MutexGuard;

use tokio::sync::broadcast;

use crate::task_book::{Book, Change};

/// The broadcast of the book's status changes.
pub struct TaskNews(pub(crate) broadcast::Sender<Change>);

impl Default for TaskNews {
    fn default() -> Self {
        TaskNews(broadcast::channel(1024).0)
    }
}

/// The locked book; the status changes made through it are broadcast when it is let go.
pub struct Telling<'a> {
    book: MutexGuard<'a, Book>,
    news: &'a TaskNews,
}

impl<'a> Telling<'a> {
    pub fn new(mut book: MutexGuard<'a, Book>, news: &'a TaskNews) -> Telling<'a> {
        // Nobody follows: no change is worth its copy of the task.
        book.record_changes(news.0.receiver_count() > 0);
        Telling { book, news }
    }
}

impl Deref for Telling<'_> {
    type Target = Book;

    fn deref(&self) -> &Book {
        &self.book
    }
}

impl DerefMut for Telling<'_> {
    fn deref_mut(&mut self) -> &mut Book {
        &mut self.book
    }
}

impl Drop for Telling<'_> {
    fn drop(&mut self) {
        for change in self.book.take_changes() {
            // Nobody listening is no error.
            let _ = self.news.0.send(change);
        }
    }
}
