//! The private directory behind a `sqlite::memory:` storage.
//!
//! An in-memory SQLite database has one connection, so a read would see
//! whatever another call has staged in the open write transaction. A WAL
//! database in a private temporary directory gives readers their own
//! committed snapshot, exactly as on a file, at little cost: nothing is
//! flushed, and the OS keeps the pages in memory. The directory is removed
//! when the storage closes or is collected, and at process exit (the
//! binding calls [`remove_all`] from its exit hook); a process killed
//! outright leaves it in the temporary directory.

use crate::error::{Error, Result};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static NEXT: AtomicU64 = AtomicU64::new(0);

pub struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    pub fn new() -> Result<Scratch> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!(
            "syncular-memory-{}-{}-{nanos:x}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let mut b = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
        b.create(&dir).map_err(|e| {
            Error::plain(
                "ERR_SYNCULAR_OPEN",
                format!("could not create the memory database's directory {dir:?}: {e}"),
            )
        })?;
        super::lock(&LIVE).push(dir.clone());
        Ok(Scratch { dir })
    }

    pub fn db_path(&self) -> String {
        self.dir.join("memory.db").to_string_lossy().into_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        super::lock(&LIVE).retain(|d| d != &self.dir);
    }
}

/// Removes every live scratch directory (process exit).
pub fn remove_all() {
    for d in super::lock(&LIVE).drain(..) {
        let _ = std::fs::remove_dir_all(d);
    }
}
