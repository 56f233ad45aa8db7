//! The private directory behind a `sqlite::memory:` storage.
//!
//! An in-memory SQLite database has one connection, so a read would see
//! whatever another call has staged in the open write transaction. A WAL
//! database in a private temporary directory gives readers their own
//! committed snapshot, exactly as on a file, at little cost: nothing is
//! flushed, and the OS keeps the pages in memory. The directory is removed
//! when the storage closes or is collected, and when the JS environment
//! that made the storage exits (the binding calls [`remove_owned_by`] from
//! that environment's cleanup hook: a worker thread that exits removes its
//! own storages' directories, never another thread's); a process killed
//! outright leaves it in the temporary directory.

use crate::core::error::{Error, Result};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Live directories with the thread (JS environment) that owns them.
static LIVE: Mutex<Vec<(u64, PathBuf)>> = Mutex::new(Vec::new());
static NEXT: AtomicU64 = AtomicU64::new(0);
static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static OWNER: u64 = NEXT_OWNER.fetch_add(1, Ordering::Relaxed);
}

/// The calling thread's owner token. A storage takes it when constructed,
/// on its environment's JS thread.
pub fn this_thread() -> u64 {
    OWNER.with(|o| *o)
}

pub struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    pub fn new(owner: u64) -> Result<Scratch> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!(
            "syncular-memory-{}-{}-{nanos:x}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        // Only Unix sets a mode on it.
        #[cfg_attr(not(unix), allow(unused_mut))]
        let mut b = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
        b.create(&dir).map_err(|e| {
            Error::plain(
                "ERR_SYNCULAR_OPEN",
                format!("could not create the memory database's directory {dir:?}: {e}"),
            )
        })?;
        super::mutex::lock(&LIVE).push((owner, dir.clone()));
        Ok(Scratch { dir })
    }

    pub fn db_path(&self) -> String {
        self.dir.join("memory.db").to_string_lossy().into_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        super::mutex::lock(&LIVE).retain(|(_, d)| d != &self.dir);
    }
}

/// Removes the live directories of `owner`'s storages (its environment
/// is exiting).
pub fn remove_owned_by(owner: u64) {
    let mine: Vec<PathBuf> = {
        let mut live = super::mutex::lock(&LIVE);
        let (mine, rest): (Vec<_>, Vec<_>) = live.drain(..).partition(|(o, _)| *o == owner);
        *live = rest;
        mine.into_iter().map(|(_, d)| d).collect()
    };
    for d in mine {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exiting_environment_removes_only_its_own_directories() {
        let (a, b) = (u64::MAX - 1, u64::MAX - 2);
        let mine = Scratch::new(a).unwrap();
        let theirs = Scratch::new(b).unwrap();
        remove_owned_by(a);
        assert!(!mine.dir.exists());
        assert!(
            theirs.dir.exists(),
            "another environment's database survives"
        );
        drop(theirs);
        drop(mine);
    }
}
