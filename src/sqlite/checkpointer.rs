//! WAL checkpoints off the writer's thread.
//!
//! With SQLite's automatic checkpoint, the COMMIT that crosses 1000 WAL
//! pages copies the log back into the database and syncs it, on the thread
//! that committed: the host's JS thread for a push. Here a WAL hook on the
//! writer (`sqlite3_wal_hook`, which SQLite calls after every commit with
//! the WAL's length in pages) asks a thread of the storage's own for a
//! PASSIVE checkpoint (never waiting for readers or the writer, on its own
//! connection) each time the WAL has grown by [`STEP_PAGES`]. Counting
//! pages, not commits, keeps small commits cheap: a `touchPartition`
//! writes one page, a push a dozen or more, and a checkpoint (a wake-up
//! and two syncs) per fixed number of commits cost the small ones most.
//! Durability is unchanged: a commit is durable once in the WAL, at the
//! configured `synchronous` level; a checkpoint only moves it.

use super::conn::map_err;
use crate::core::error::Result;
use rusqlite::{ffi, Connection, OpenFlags};
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

/// WAL growth, in pages, between checkpoint requests: SQLite's own
/// automatic checkpoint interval.
pub const STEP_PAGES: i32 = 1000;

/// The writer's own checkpoint, in pages (what SQLite's automatic
/// checkpoint would do, at a larger size). A PASSIVE checkpoint beside a
/// busy writer rarely catches up with the newest frames, and SQLite
/// restarts the WAL from its start only after one that did; the writer's
/// own checkpoint, run while it holds the write lock, always does. The
/// thread has copied almost everything by then, so that one is short. 4000
/// pages (16 MB of 4 KiB pages) also keeps the WAL index to one hash
/// segment, so page lookups of reads do not grow with it.
pub const BACKSTOP_PAGES: i32 = 4000;

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

/// What the WAL hook reads: the way to wake the thread, and the WAL's
/// length when it last did.
struct Hook {
    wake: Mutex<Option<SyncSender<()>>>,
    asked_at: AtomicI32,
}

/// SQLite's WAL hook on the writer: called after each commit, on the
/// committing thread, with the writer's connection mutex held.
unsafe extern "C" fn on_commit(
    data: *mut c_void, db: *mut ffi::sqlite3, name: *const c_char, pages: c_int,
) -> c_int {
    // SAFETY: `data` is the `Hook` registered with this callback; it is
    // freed only after the hook is unregistered (`Checkpointer::stop`), or
    // never (`Drop`).
    let hook = unsafe { &*data.cast::<Hook>() };
    if pages >= BACKSTOP_PAGES {
        // As SQLite's own automatic checkpoint does from this hook.
        // SAFETY: `db` and `name` are what SQLite passed to its hook.
        unsafe { ffi::sqlite3_wal_checkpoint(db, name) };
        return ffi::SQLITE_OK;
    }
    // A shorter WAL than at the last request restarted from its start.
    let asked = hook.asked_at.load(Relaxed).min(pages);
    if pages >= asked + STEP_PAGES {
        hook.asked_at.store(pages, Relaxed);
        if let Some(wake) = hook.wake.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            // A request already pending covers this one.
            match wake.try_send(()) {
                Ok(()) | Err(TrySendError::Full(())) | Err(TrySendError::Disconnected(())) => {}
            }
        }
    } else {
        hook.asked_at.store(asked, Relaxed);
    }
    ffi::SQLITE_OK
}

pub struct Checkpointer {
    /// Registered on the writer while `registered` holds.
    hook: Option<Box<Hook>>,
    registered: bool,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Stopping waits for the thread: its connection must be closed before the
/// storage's `close()` returns, or the database would still be open (and,
/// as the last connection, locked while it checkpoints on close) after it.
/// A checkpointer dropped while its hook is still registered (not through
/// [`Checkpointer::stop`]) leaves the hook's few bytes allocated, so the
/// writer never calls into freed memory.
impl Drop for Checkpointer {
    fn drop(&mut self) {
        if let Some(hook) = &self.hook {
            hook.wake.lock().unwrap_or_else(|p| p.into_inner()).take();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if self.registered {
            std::mem::forget(self.hook.take());
        }
    }
}

impl Checkpointer {
    /// Starts the thread for the database file at `path`, and hooks it to
    /// `writer`'s commits. It exits when the checkpointer is stopped or
    /// dropped.
    pub fn start(path: &str, progress: Arc<Progress>, writer: &Connection) -> Result<Checkpointer> {
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
            .map_err(|e| crate::core::error::Error::plain("ERR_SYNCULAR_OPEN", e.to_string()))?;
        let hook = Box::new(Hook {
            wake: Mutex::new(Some(wake)),
            asked_at: AtomicI32::new(0),
        });
        // SAFETY: the handle is the writer's open connection; the hook data
        // outlives the registration (see `Drop` and `stop`).
        unsafe {
            ffi::sqlite3_wal_hook(
                writer.handle(),
                Some(on_commit),
                std::ptr::from_ref::<Hook>(&hook).cast_mut().cast(),
            )
        };
        Ok(Checkpointer {
            hook: Some(hook),
            registered: true,
            thread: Some(thread),
        })
    }

    /// Unhooks from `writer` (the connection given to `start`) and stops
    /// the thread.
    pub fn stop(mut self, writer: &Connection) {
        // SAFETY: the writer's open connection; removing its WAL hook.
        unsafe { ffi::sqlite3_wal_hook(writer.handle(), None, std::ptr::null_mut()) };
        self.registered = false;
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
