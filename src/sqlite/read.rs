//! Reads of committed state: on the idle writer when its cache is warm
//! and the call is on the calling thread, otherwise on a pooled WAL reader
//! connection; one statement, or several in one snapshot.

use super::conn::{self, map_err};
use super::kept::Conn;
use super::mutex::lock;
use super::storage::SqliteEngine;
use super::writer::Db;
use crate::core::error::Result;
use crate::core::telemetry::{self, Site, Slow};

const MAX_IDLE_READERS: usize = 4;

impl SqliteEngine {
    /// Runs a read of committed state: on the idle writer or a reader
    /// connection (below). Slow reads warn when `_slow` drops, naming the
    /// caller's line (see `telemetry`).
    #[track_caller]
    pub fn read<T>(&self, f: impl FnOnce(&Conn) -> Result<T>) -> Result<T> {
        let _slow = Slow::start(telemetry::SQLITE, "read", Site::caller());
        self.read_on_idle_writer_or_pooled(f)
    }

    /// On the calling thread, an idle writer answers: it wrote last, so its
    /// page cache is warm, where a reader's is thrown away by every commit
    /// since its last read. Never off-thread (a JS-thread write would wait
    /// for it), never while any transaction is open on it (its state is not
    /// the committed state). Otherwise a pooled reader answers.
    fn read_on_idle_writer_or_pooled<T>(&self, f: impl FnOnce(&Conn) -> Result<T>) -> Result<T> {
        let db = self.db()?;
        if !crate::seam::off_thread() {
            if let Ok(w) = db.writer.try_lock() {
                if w.lease.is_none() && w.held == 0 && w.conn.is_autocommit() {
                    return f(&w.conn);
                }
            }
        }
        Self::read_pooled(&db, f)
    }

    /// [`read`](Self::read) timed by `_slow` (a registered query names its
    /// text).
    fn read_timed<T>(&self, _slow: Slow<'_>, f: impl FnOnce(&Conn) -> Result<T>) -> Result<T> {
        Self::read_pooled(&*self.db()?, f)
    }

    /// Runs `f` on a pooled reader connection of `db`.
    fn read_pooled<T>(db: &Db, f: impl FnOnce(&Conn) -> Result<T>) -> Result<T> {
        let pooled = lock(&db.readers).pop();
        let conn = match pooled {
            Some(c) => c,
            None => conn::open_reader(&db.cfg)?,
        };
        let out = f(&conn);
        // A reader left inside a transaction would pin an old snapshot;
        // drop it instead of pooling it.
        if conn.is_autocommit() {
            let mut idle = lock(&db.readers);
            if idle.len() < MAX_IDLE_READERS {
                idle.push(conn);
            }
        }
        out
    }

    /// Runs `f` in one read transaction, so several statements share one
    /// snapshot, on the connection [`read`](Self::read) would use: a
    /// window or a page read right after a request's writes then finds the
    /// writer's cache warm.
    #[track_caller]
    pub fn read_snapshot<T>(&self, f: impl FnOnce(&Conn) -> Result<T>) -> Result<T> {
        let _slow = Slow::start(telemetry::SQLITE, "read", Site::caller());
        self.read_on_idle_writer_or_pooled(|c| snapshot(c, f))
    }

    pub(super) fn read_snapshot_timed<T>(
        &self, slow: Slow<'_>, f: impl FnOnce(&Conn) -> Result<T>,
    ) -> Result<T> {
        self.read_timed(slow, |c| snapshot(c, f))
    }
}

/// `f` in one read transaction on `c`, which is back in autocommit after.
fn snapshot<T>(c: &Conn, f: impl FnOnce(&Conn) -> Result<T>) -> Result<T> {
    conn::exec(c, "BEGIN").map_err(map_err)?;
    let out = f(c);
    if conn::exec(c, "COMMIT").is_err() && !c.is_autocommit() {
        let _ = conn::exec(c, "ROLLBACK");
    }
    out
}
