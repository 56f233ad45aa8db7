//! Locking a mutex another call's panic poisoned: every mutex of the engine
//! guards state that stays consistent across a panic, so the engine keeps
//! serving.

use std::sync::{Mutex, MutexGuard};

/// Poisoning only means another call panicked mid-way; the connection
/// itself is still consistent (SQLite rolls back on the next BEGIN), so
/// keep serving.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
