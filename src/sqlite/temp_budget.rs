//! What registered queries' temporary files may hold: one budget a query
//! run (kept by `super::meter` while the run lasts) and one for the
//! process. `super::temp_vfs` counts the files' writes against both.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

/// The most bytes all registered queries' temporary files of the process
/// may hold at once.
pub const PROCESS_LIMIT: i64 = 1 << 30;

static PROCESS_USED: AtomicI64 = AtomicI64::new(0);

/// One registered query run's temporary-file budget.
#[derive(Debug)]
pub struct Budget {
    limit: i64,
    used: AtomicI64,
    /// Set when a write was refused for this budget (or the process's).
    exceeded: AtomicBool,
}

impl Budget {
    pub fn new(limit: i64) -> Arc<Budget> {
        Arc::new(Budget {
            limit,
            used: AtomicI64::new(0),
            exceeded: AtomicBool::new(false),
        })
    }

    /// Whether a write of this run was refused.
    pub fn exceeded(&self) -> bool {
        self.exceeded.load(Ordering::Relaxed)
    }

    /// Bytes this run's temporary files hold now.
    #[cfg(test)]
    pub fn used(&self) -> i64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Takes `bytes` more, or refuses (and remembers) when that would pass
    /// this run's budget or the process's.
    pub(super) fn take(&self, bytes: i64) -> bool {
        let mine = self.used.fetch_add(bytes, Ordering::Relaxed) + bytes;
        let all = PROCESS_USED.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if mine > self.limit || all > PROCESS_LIMIT {
            self.give(bytes);
            self.exceeded.store(true, Ordering::Relaxed);
            return false;
        }
        true
    }

    pub(super) fn give(&self, bytes: i64) {
        self.used.fetch_sub(bytes, Ordering::Relaxed);
        PROCESS_USED.fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// Bytes all counted temporary files of the process hold now.
#[cfg(test)]
pub fn process_used() -> i64 {
    PROCESS_USED.load(Ordering::Relaxed)
}
