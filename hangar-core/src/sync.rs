//! Locks that a panic does not break. A thread that panics while it holds a `std` lock poisons
//! it, and every later `lock()` then returns an error. The hangar's choice, made once here
//! rather than at every lock: the next holder takes the data as the panicking one left it, so
//! one request's bug never fails every request after it (bad input is refused, never fatal).
//! The data behind the hangar's locks are maps and counters changed in single steps, which a
//! panic cannot leave half-made.

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// [`Mutex::lock`], poisoned or not.
pub trait Unpoisoned<T: ?Sized> {
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> Unpoisoned<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// [`RwLock::read`] and [`RwLock::write`], poisoned or not.
pub trait UnpoisonedRw<T: ?Sized> {
    fn reading(&self) -> RwLockReadGuard<'_, T>;
    fn writing(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T: ?Sized> UnpoisonedRw<T> for RwLock<T> {
    fn reading(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn writing(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_poisoned_by_a_panic_is_still_taken() {
        let (mutex, rw) = (Mutex::new(1), RwLock::new(2));
        let _ = std::panic::catch_unwind(|| {
            let (_m, _w) = (mutex.lock(), rw.write());
            panic!("a bug while holding both");
        });
        assert!(mutex.is_poisoned() && rw.is_poisoned());
        *mutex.locked() += 1;
        *rw.writing() += 1;
        assert_eq!((*mutex.locked(), *rw.reading()), (2, 3));
    }
}
