//! Operations on the embedded database: the round trip of `ping()`, the
//! numbers of `stats()`, and online backup through SQLite's backup API
//! (`docs/operations.md`).

use super::conn::Location;
use super::conn::{self, map_err};
use super::mutex::lock;
use super::storage::SqliteEngine;
use crate::core::error::{Error, Result};
use crate::seam::EngineStats;
use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};
use std::time::{Duration, Instant};

impl SqliteEngine {
    /// A read on a reader connection: the linked SQLite's version.
    pub fn ping(&self) -> Result<String> {
        self.read(|c| {
            c.query_row("SELECT sqlite_version()", [], |r| r.get(0))
                .map_err(map_err)
        })
    }

    /// Counters and the WAL's size; opens nothing.
    pub fn stats(&self) -> EngineStats {
        let (lock_waits, lock_wait_micros) = self.waits.read();
        let mut out = EngineStats {
            lock_waits,
            lock_wait_micros,
            ..EngineStats::default()
        };
        let Some(db) = lock(&self.db).clone() else {
            return out;
        };
        if let Location::File(path) = &db.cfg.location {
            // No WAL file: nothing written since the last connection closed.
            out.wal_bytes = Some(
                std::fs::metadata(format!("{path}-wal"))
                    .map(|m| m.len())
                    .unwrap_or(0),
            );
        }
        if let Some(p) = &db.progress {
            let (passes, lag) = p.read();
            out.checkpoints = Some(passes);
            out.checkpoint_lag_frames = Some(lag);
        }
        out
    }

    /// Copies the committed database into a new file at `path`, in one
    /// backup step on a reader connection: one read snapshot, so writers
    /// go on (WAL) and the copy holds exactly the commits durable when it
    /// began. Call off the JS thread. A failed copy leaves no file.
    pub fn backup(&self, path: &str) -> Result<()> {
        if path.is_empty() {
            return Err(Error::invalid("backup: path must be a file path"));
        }
        if std::fs::symlink_metadata(path).is_ok() {
            return Err(Error::invalid(format!(
                "backup: {path:?} exists; backup() writes a new file only"
            )));
        }
        let db = self.db()?;
        let source = conn::open_reader(&db.cfg)?;
        let out = copy(&source, path, self.cfg.busy_timeout);
        if out.is_err() {
            let _ = std::fs::remove_file(path);
        }
        out
    }
}

fn copy(source: &Connection, path: &str, patience: Duration) -> Result<()> {
    let mut target = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(map_err)?;
    {
        let backup = Backup::new(source, &mut target).map_err(map_err)?;
        let deadline = Instant::now() + patience;
        loop {
            // -1: every page in one step, under one read transaction.
            match backup.step(-1).map_err(map_err)? {
                StepResult::Done => break,
                StepResult::More => {}
                _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
                _ => return Err(Error::Busy),
            }
        }
    }
    target.close().map_err(|(_, e)| map_err(e))
}
