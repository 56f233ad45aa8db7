//! WAL checkpoints off the writer's thread.
//!
//! With SQLite's automatic checkpoint, the COMMIT that crosses 1000 WAL
//! pages copies the log back into the database and syncs it, on the thread
//! that committed: the host's JS thread for a push. Here the writer's
//! automatic checkpoint is raised to a backstop and a thread of the
//! storage's own runs PASSIVE checkpoints (never waiting for readers or
//! the writer) on its own connection every [`EVERY`] commits. Durability
//! is unchanged: a commit is durable once in the WAL, at the configured
//! `synchronous` level; a checkpoint only moves it.

use super::conn::map_err;
use crate::error::Result;
use rusqlite::{Connection, OpenFlags};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;

/// Commits between checkpoint requests: about SQLite's default of 1000
/// pages for pushes that write a few pages each.
pub const EVERY: u32 = 64;

/// The writer's own automatic checkpoint, in pages. A PASSIVE checkpoint
/// beside a busy writer rarely catches up with the newest frames, and SQLite
/// restarts the WAL from its start only after one that did; the writer's
/// own checkpoint, run while it holds the write lock, always does. The
/// thread has copied almost everything by then, so that one is short. 4000
/// pages (16 MB of 4 KiB pages) also keeps the WAL index to one hash
/// segment, so page lookups of reads do not grow with it.
pub const BACKSTOP_PAGES: u32 = 4000;

/// What the thread's passes did, for `stats()`.
#[derive(Debug, Default)]
pub struct Progress {
    passes: AtomicU64,
    lag: AtomicI64,
}

impl Progress {
    /// Passes run, and the WAL frames the last one left uncopied.
    pub fn read(&self) -> (u64, i64) {
        (self.passes.load(Relaxed), self.lag.load(Relaxed))
    }
}

pub struct Checkpointer {
    wake: Option<SyncSender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    commits: u32,
}

/// Stopping waits for the thread: its connection must be closed before the
/// storage's `close()` returns, or the database would still be open (and,
/// as the last connection, locked while it checkpoints on close) after it.
impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.wake.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Checkpointer {
    /// Starts the thread for the database file at `path`. It exits when
    /// the checkpointer is dropped (with the writer).
    pub fn start(path: &str, progress: Arc<Progress>) -> Result<Checkpointer> {
        let (wake, asked) = sync_channel::<()>(1);
        let path = path.to_owned();
        let thread = std::thread::Builder::new()
            .name("syncular-checkpoint".into())
            .spawn(move || {
                let mut conn: Option<Connection> = None;
                while asked.recv().is_ok() {
                    if conn.is_none() {
                        conn = open(&path).ok();
                    }
                    let Some(c) = &conn else { continue };
                    // A failure (the file went away, I/O error) drops the
                    // connection; the next request opens a new one, and the
                    // writer's backstop still bounds the WAL. A pass that
                    // left frames behind is repeated a few times: between
                    // pushes it can catch up, and the WAL then restarts.
                    for _ in 0..3 {
                        match passive(c) {
                            Ok((log, copied)) => {
                                progress.passes.fetch_add(1, Relaxed);
                                progress.lag.store((log - copied).max(0), Relaxed);
                                if log >= 0 && copied >= log {
                                    break;
                                }
                            }
                            Err(_) => {
                                conn = None;
                                break;
                            }
                        }
                    }
                }
            })
            .map_err(|e| crate::error::Error::plain("ERR_SYNCULAR_OPEN", e.to_string()))?;
        Ok(Checkpointer {
            wake: Some(wake),
            thread: Some(thread),
            commits: 0,
        })
    }

    /// Counts a physical commit; every [`EVERY`]th asks for a checkpoint
    /// without waiting (a request already pending covers this one).
    pub fn committed(&mut self) {
        self.commits = self.commits.wrapping_add(1);
        if self.commits % EVERY == 0 {
            if let Some(wake) = &self.wake {
                match wake.try_send(()) {
                    Ok(()) | Err(TrySendError::Full(())) | Err(TrySendError::Disconnected(())) => {}
                }
            }
        }
    }
}

/// One PASSIVE checkpoint: the WAL's frames, and how many are copied.
fn passive(c: &Connection) -> rusqlite::Result<(i64, i64)> {
    c.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
        Ok((r.get(1)?, r.get(2)?))
    })
}

fn open(path: &str) -> Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(map_err)?;
    // Checkpointing also runs through the busy handler when another
    // connection holds the checkpoint lock; PASSIVE gives up instead.
    conn.busy_timeout(std::time::Duration::ZERO)
        .map_err(map_err)?;
    Ok(conn)
}
