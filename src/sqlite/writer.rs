//! The state behind one open storage: its writer connection with the
//! write lease and the open group of commits, its pooled readers, and what
//! a lease-holding call sees. Data only: the members that change it are in
//! `lease` (the write lock), `read` and `storage` (open and close).

use super::checkpointer;
use super::conn::Config;
use super::foreign;
use super::kept::Conn;
use super::scratch;
use crate::core::query::Value;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug)]
pub(super) struct Lease {
    pub(super) id: u32,
    pub(super) partition: Option<String>,
    pub(super) savepoint: bool,
    /// Runs inside a group's open transaction, in its own savepoint.
    pub(super) member: bool,
    /// Has run a call (see `SqliteEngine::flush`).
    pub(super) used: bool,
    /// `staged.len()` when the lease began (a member: when its savepoint
    /// opened) and when its apply savepoint opened: the `db` writes a
    /// rollback to either undoes (see `shared`).
    pub(super) mark: usize,
    pub(super) savepoint_mark: usize,
    /// SQLite rolled the whole transaction back under a call (an
    /// interrupted write, or an I/O, disk-full or out-of-memory error it
    /// could not undo one statement of): nothing more runs under the
    /// lease, and its commit is refused (see `with_lease_timed`).
    pub(super) aborted: bool,
    /// Its work was committed early (`SqliteEngine::commit_early`) and
    /// no new transaction could be begun for it: its commit and rollback
    /// have nothing left to do.
    pub(super) settled: bool,
}

pub(super) struct Writer {
    pub(super) conn: Conn,
    pub(super) lease: Option<Lease>,
    pub(super) next_id: u32,
    /// Leases committed into the open physical transaction but not yet
    /// durable (group commit): that transaction stays open between leases
    /// until `SqliteEngine::flush` or a plain commit ends it.
    pub(super) held: u32,
    /// The physical transaction was rolled back while it held leases'
    /// commits (`held` > 0): those commits are lost, and the next call
    /// that would make the group durable (`hold`, a commit, `flush`) says
    /// so instead (see `SqliteEngine::group_lost`).
    pub(super) lost: bool,
    /// File databases: WAL checkpoints on a thread of their own.
    pub(super) checkpointer: Option<checkpointer::Checkpointer>,
    /// Writes through `storage.db` in the open physical transaction, kept
    /// until it commits (see `shared`).
    pub(super) staged: Vec<Staged>,
    /// How long a `db` statement on an idle writer waits for another
    /// process's lock.
    pub(super) busy_timeout: Duration,
    /// File databases: another SQLite library in this process on the file
    /// (see `foreign`).
    pub(super) foreign: Option<foreign::Watch>,
}

pub(super) struct Db {
    pub(super) writer: Mutex<Writer>,
    pub(super) readers: Mutex<Vec<Conn>>,
    /// The configuration the connections opened with (a memory database's
    /// file is its scratch path).
    pub(super) cfg: Config,
    /// This file counts as open by this process's SQLite (see `foreign`)
    /// until the connections above have closed.
    pub(super) registration: foreign::Registration,
    /// File databases: what the checkpoint thread did.
    pub(super) progress: Option<Arc<checkpointer::Progress>>,
    /// A memory database's directory: declared last, so it is removed
    /// after the connections above have closed.
    pub(super) _scratch: Option<scratch::Scratch>,
}

/// One write through `db` inside the open transaction, kept until that
/// transaction commits (see `shared`).
pub(super) struct Staged {
    pub(super) sql: String,
    pub(super) params: Vec<Value>,
}

/// What a lease-holding call sees.
pub struct Held<'a> {
    pub conn: &'a Conn,
    pub partition: Option<&'a str>,
    pub(super) savepoint: &'a mut bool,
    pub(super) savepoint_mark: &'a mut usize,
    pub(super) staged: &'a [Staged],
}
