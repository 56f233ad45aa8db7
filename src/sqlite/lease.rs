//! The write lock as a numbered lease: taking it (at once or waiting for
//! another process), running calls under it, a storage-level write in a
//! transaction of its own, and ending it by commit, rollback or holding
//! its commit in the open group (group commit) until `flush`.

use super::conn::{self, map_err};
use super::mutex::lock;
use super::shared;
use super::sql;
use super::storage::SqliteEngine;
use super::writer::{Held, Lease, Writer};
use crate::core::error::{Error, Result};
use crate::core::telemetry::{self, Site, Slow};
use std::time::{Duration, Instant};

/// The lease number of a storage-level write that runs in one call, in a
/// transaction of its own ([`SqliteEngine::with_lease`]); granted leases
/// start at 1 and skip 0 when they wrap.
pub const OWN_TRANSACTION: u32 = 0;

/// Internal: a write asked to run in its own transaction found the write
/// lock taken; the JS queue takes a lease instead. Never reaches the host.
pub(crate) const WOULD_BLOCK: &str = "ERR_SYNCULAR_WOULD_BLOCK";

/// How [`SqliteEngine::own_transaction`] runs its write.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Own {
    /// BEGIN IMMEDIATE, the write, COMMIT.
    Transaction,
    /// One statement in autocommit.
    Statement,
}

pub(super) fn would_block() -> Error {
    Error::plain(WOULD_BLOCK, "the write lock is not free at once")
}

/// The error of the calls that would have made a lost group durable.
fn group_lost_error() -> Error {
    Error::plain(
        crate::core::error::TX_ABORTED,
        "the database rolled back the open group of commits after an error; none of them was stored",
    )
}

impl SqliteEngine {
    /// Refuses every write lease from now on, naming where the database
    /// moved (`crate::copy`'s final pass, run under the last lease). Reads
    /// go on.
    pub fn refuse_writes(&self, to: &str) {
        let _ = self.moved.set(to.to_owned());
    }

    fn check_moved(&self) -> Result<()> {
        match self.moved.get() {
            None => Ok(()),
            Some(to) => Err(Error::plain(super::moved::CODE, super::moved::message(to))),
        }
    }

    fn grant(w: &mut Writer, partition: Option<&str>, member: bool) -> u32 {
        let id = w.next_id;
        w.next_id = w.next_id.wrapping_add(1).max(1);
        w.lease = Some(Lease {
            id,
            partition: partition.map(str::to_owned),
            savepoint: false,
            member,
            used: false,
            mark: w.staged.len(),
            savepoint_mark: w.staged.len(),
            aborted: false,
            settled: false,
        });
        id
    }

    /// Tries to take the write lock without waiting. `Ok(None)`: another
    /// connection holds it; retry with [`lock_blocking`](Self::lock_blocking)
    /// off the calling thread.
    pub fn try_lock(&self, partition: Option<&str>) -> Result<Option<u32>> {
        self.check_moved()?;
        let db = match self.db() {
            Ok(db) => db,
            // Opening can meet another process mid-recovery or switching
            // the file to WAL, where SQLite answers "locked" without
            // waiting; the caller then retries off the JS thread.
            Err(Error::Engine { code, .. })
                if code.starts_with("SQLITE_BUSY") || code.starts_with("SQLITE_LOCKED") =>
            {
                return Ok(None)
            }
            Err(e) => return Err(e),
        };
        let mut w = lock(&db.writer);
        if w.lease.is_some() {
            return Err(Error::plain(
                "ERR_SYNCULAR_WRITER_BUSY",
                "the write lock is already held by this storage; calls must be queued",
            ));
        }
        if let Some(f) = w.foreign.as_mut() {
            f.check()?;
        }
        if w.held > 0 {
            // A group is open: this lease joins its transaction, which
            // already holds the write lock.
            conn::exec(&w.conn, sql::GROUP_MEMBER).map_err(map_err)?;
            return Ok(Some(Self::grant(&mut w, partition, true)));
        }
        Self::end_stray(&mut w)?;
        Ok(Self::begin_immediate(&w)?.then(|| Self::grant(&mut w, partition, false)))
    }

    /// No lease and no group, yet a transaction is open: a ROLLBACK failed
    /// (see `conn::rollback_after`). End it before anything else runs in it.
    fn end_stray(w: &mut Writer) -> Result<()> {
        if !w.conn.is_autocommit() {
            conn::exec(&w.conn, "ROLLBACK").map_err(map_err)?;
            shared::replay_fresh(w);
        }
        Ok(())
    }

    /// BEGIN IMMEDIATE on the idle writer; `false` when another connection
    /// holds the database's write lock.
    fn begin_immediate(w: &Writer) -> Result<bool> {
        match conn::exec(&w.conn, "BEGIN IMMEDIATE") {
            Ok(()) => Ok(true),
            Err(e) if conn::is_busy(&e) => Ok(false),
            Err(e) => Err(map_err(e)),
        }
    }

    /// Waits for the write lock (another process holds it); call off the JS
    /// thread.
    pub fn lock_blocking(&self, partition: Option<&str>) -> Result<u32> {
        let started = Instant::now();
        let deadline = started + self.cfg.busy_timeout;
        let mut pause = Duration::from_micros(200);
        let mut retries = 0u32;
        let waited = telemetry::lock_wait_started();
        let out = loop {
            match self.try_lock(partition) {
                Ok(Some(id)) => break Ok(id),
                Ok(None) => {}
                Err(e) => break Err(e),
            }
            retries += 1;
            let gave_up = Instant::now() >= deadline;
            telemetry::busy_retry(
                telemetry::SQLITE,
                "BEGIN IMMEDIATE",
                retries,
                started.elapsed(),
                gave_up,
            );
            if gave_up {
                break Err(Error::Busy);
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        };
        telemetry::lock_waited(waited, telemetry::SQLITE, partition);
        self.waits.record(started.elapsed());
        out
    }

    /// Ends the lease: commit or roll back. Releasing a lease that is no
    /// longer held is a no-op when rolling back (idempotent rollback) and an
    /// error when committing. Committing makes durable every lease the open
    /// group holds too; if that fails, they are all rolled back with it.
    #[track_caller]
    pub fn unlock(&self, id: u32, commit: bool) -> Result<()> {
        let db = self.db()?;
        let mut w = lock(&db.writer);
        let (member, mark, aborted, settled) = match &w.lease {
            Some(l) if l.id == id => (l.member, l.mark, l.aborted, l.settled),
            _ if commit => return Err(Error::tx_finished()),
            _ => return Ok(()),
        };
        w.lease = None;
        if settled {
            return Ok(());
        }
        if aborted && !commit {
            // Already rolled back (with the group it was a member of, which
            // `lost` reports).
            shared::replay_fresh(&mut w);
            return Ok(());
        }
        if aborted {
            return Err(Self::refuse_aborted(&mut w));
        }
        if commit && w.lost {
            return Err(Self::group_lost(&mut w));
        }
        if commit {
            if member {
                if let Err(e) = conn::exec(&w.conn, sql::RELEASE_GROUP_MEMBER) {
                    return Err(Self::abort_group(&mut w, e));
                }
            }
            Self::commit_physical(&mut w)
        } else if member {
            // Only this lease's savepoint goes; the group's held commits
            // stay staged.
            let undone = conn::exec(&w.conn, sql::ROLLBACK_TO_GROUP_MEMBER)
                .and_then(|()| conn::exec(&w.conn, sql::RELEASE_GROUP_MEMBER));
            match undone {
                Ok(()) => {
                    shared::replay(&w.conn, &w.staged[mark..]);
                    Ok(())
                }
                Err(e) => Err(Self::abort_group(&mut w, e)),
            }
        } else {
            // A failed ROLLBACK (the engine already rolled back) leaves the
            // connection in autocommit, which is what we want.
            let _ = conn::exec(&w.conn, "ROLLBACK");
            shared::replay_fresh(&mut w);
            Ok(())
        }
    }

    /// Ends the lease by committing its work into the open transaction
    /// without making it durable: the next lease joins that transaction,
    /// and [`flush`](Self::flush) (or the next plain commit) makes them all
    /// durable together, with one sync. The caller acknowledges the lease's
    /// commit only after that.
    pub fn hold(&self, id: u32) -> Result<()> {
        let db = self.db()?;
        let mut w = lock(&db.writer);
        let (member, savepoint, aborted) = match &w.lease {
            Some(l) if l.id == id => (l.member, l.savepoint, l.aborted),
            _ => return Err(Error::tx_finished()),
        };
        w.lease = None;
        if aborted {
            return Err(Self::refuse_aborted(&mut w));
        }
        if w.lost {
            return Err(Self::group_lost(&mut w));
        }
        // Releasing the member's savepoint releases the apply savepoint
        // nested in it; a first lease may still have its own open.
        let released = if member {
            conn::exec(&w.conn, sql::RELEASE_GROUP_MEMBER)
        } else if savepoint {
            conn::exec(&w.conn, sql::RELEASE_SAVEPOINT)
        } else {
            Ok(())
        };
        if let Err(e) = released {
            return Err(Self::abort_group(&mut w, e));
        }
        w.held += 1;
        Ok(())
    }

    /// Makes the open group durable (COMMIT). With a lease held, only when
    /// that lease has run nothing yet: its savepoint is dropped, the group
    /// committed, and the lease given a transaction of its own, so a caller
    /// that awaits an earlier commit while holding a later lease does not
    /// wait forever. `Ok(false)`: nothing could be flushed now.
    pub fn flush(&self) -> Result<bool> {
        let db = self.db()?;
        let mut w = lock(&db.writer);
        if w.lost {
            w.lost = false;
            return Err(group_lost_error());
        }
        if w.held == 0 {
            return Ok(true);
        }
        let Some(lease) = &w.lease else {
            return Self::commit_physical(&mut w).map(|()| true);
        };
        if lease.used || !lease.member {
            return Ok(false);
        }
        let mark = lease.mark;
        let undone = conn::exec(&w.conn, sql::ROLLBACK_TO_GROUP_MEMBER)
            .and_then(|()| conn::exec(&w.conn, sql::RELEASE_GROUP_MEMBER));
        if let Err(e) = undone {
            w.lease = None;
            return Err(Self::abort_group(&mut w, e));
        }
        // `db` writes made since the lease began commit with the group.
        shared::replay(&w.conn, &w.staged[mark..]);
        let committed = Self::commit_physical(&mut w);
        // The lease keeps its number and now needs the lock for itself.
        // Between COMMIT and BEGIN nothing of ours can take it; another
        // process can, and then the lease ends (its calls fail as finished),
        // the same as a transaction whose BEGIN failed.
        match conn::exec(&w.conn, "BEGIN IMMEDIATE") {
            Ok(()) => {
                if let Some(l) = w.lease.as_mut() {
                    l.member = false;
                    l.mark = 0;
                    l.savepoint_mark = 0;
                }
            }
            Err(e) => {
                w.lease = None;
                committed?;
                return Err(map_err(e));
            }
        }
        committed.map(|()| true)
    }

    /// Makes lease `id`'s work durable now, from the thread that did it
    /// (a layout repair's COMMIT writes every page of the indexes it built
    /// to the WAL: tens of milliseconds that would otherwise run on the
    /// calling thread when the host commits), and begins a new transaction
    /// for the rest of the lease, waiting for the write lock as long as the
    /// busy timeout allows. Only a lease with a transaction of its own (not
    /// a group member, no held commits in it); otherwise nothing happens
    /// and the host's commit makes it durable as usual.
    pub fn commit_early(&self, id: u32) -> Result<()> {
        let db = self.db()?;
        let mut w = lock(&db.writer);
        let own = w.held == 0
            && !w.lost
            && w.lease
                .as_ref()
                .is_some_and(|l| l.id == id && !l.member && !l.aborted && !l.settled);
        if !own || w.conn.is_autocommit() {
            return Ok(());
        }
        if let Err(e) = conn::exec(&w.conn, "COMMIT") {
            let e = conn::rollback_after(&w.conn, map_err(e));
            shared::replay_fresh(&mut w);
            if let Some(l) = w.lease.as_mut() {
                l.aborted = true;
            }
            return Err(e);
        }
        w.staged.clear();
        let timeout = w.busy_timeout;
        let begun = conn::retry_busy(timeout, || w.conn.execute_batch("BEGIN IMMEDIATE"));
        if let Some(l) = w.lease.as_mut() {
            l.savepoint = false;
            l.mark = 0;
            l.savepoint_mark = 0;
            l.settled = begun.is_err();
        }
        Ok(())
    }

    /// COMMIT of the physical transaction (every held lease with it).
    fn commit_physical(w: &mut Writer) -> Result<()> {
        w.held = 0;
        let _slow = Slow::start(telemetry::SQLITE, "commit", Site::caller()).sql("COMMIT");
        if let Err(e) = conn::exec(&w.conn, "COMMIT") {
            let e = conn::rollback_after(&w.conn, map_err(e));
            shared::replay_fresh(w);
            return Err(e);
        }
        w.staged.clear();
        Ok(())
    }

    /// An aborted lease (already rolled back) asked to be made durable: its
    /// caller fails the open group with this error, which so reports a
    /// group lost with it.
    fn refuse_aborted(w: &mut Writer) -> Error {
        shared::replay_fresh(w);
        w.lost = false;
        Error::tx_aborted()
    }

    /// The group's commits were lost (see `Writer::lost`): the open
    /// transaction, if any (a lease begun since, whose caller is told its
    /// work was not stored either), is rolled back, and the error says so.
    fn group_lost(w: &mut Writer) -> Error {
        w.lost = false;
        w.held = 0;
        if !w.conn.is_autocommit() {
            let _ = conn::exec(&w.conn, "ROLLBACK");
        }
        shared::replay_fresh(w);
        group_lost_error()
    }

    /// A control statement of a group failed: nothing of it can be trusted
    /// any more, so it is rolled back whole.
    fn abort_group(w: &mut Writer, e: rusqlite::Error) -> Error {
        w.lost |= w.held > 0;
        w.held = 0;
        w.lease = None;
        let e = conn::rollback_after(&w.conn, map_err(e));
        shared::replay_fresh(w);
        e
    }

    /// Test hook: the writer connection's next COMMIT and/or ROLLBACK fail
    /// (SQLite refuses them through an authorizer, as it would refuse any
    /// statement), so the path where both fail can be exercised. One-shot.
    pub fn arm_faults(&self, commit: bool, rollback: bool) -> Result<()> {
        let db = self.db()?;
        let mut w = lock(&db.writer);
        conn::arm_faults(w.conn.get_mut(), commit, rollback)
    }

    pub fn is_held(&self, id: u32) -> bool {
        self.db()
            .map(|db| lock(&db.writer).lease.as_ref().is_some_and(|l| l.id == id))
            .unwrap_or(false)
    }

    /// Runs `f` under lease `id`. Slow runs warn, naming the caller's line
    /// (see `telemetry`).
    #[track_caller]
    pub fn with_lease<T>(&self, id: u32, f: impl FnOnce(Held<'_>) -> Result<T>) -> Result<T> {
        let site = Site::caller();
        self.with_lease_timed(id, || Slow::start(telemetry::SQLITE, "write", site), f)
    }

    /// [`with_lease`](Self::with_lease), timed by the guard `slow` makes
    /// once the writer is ours (a registered query names its text).
    pub(super) fn with_lease_timed<'s, T>(
        &self, id: u32, slow: impl FnOnce() -> Slow<'s>, f: impl FnOnce(Held<'_>) -> Result<T>,
    ) -> Result<T> {
        let db = self.db()?;
        let mut guard = lock(&db.writer);
        let _slow = slow();
        let w = &mut *guard;
        if id == OWN_TRANSACTION {
            self.check_moved()?;
            return Self::own_transaction(w, Own::Transaction, f);
        }
        let Some(lease) = w.lease.as_mut().filter(|l| l.id == id) else {
            return Err(Error::tx_finished());
        };
        if lease.aborted {
            return Err(Error::tx_aborted());
        }
        if lease.settled {
            return Err(Error::tx_finished());
        }
        lease.used = true;
        let out = f(Held {
            conn: &w.conn,
            partition: lease.partition.as_deref(),
            savepoint: &mut lease.savepoint,
            savepoint_mark: &mut lease.savepoint_mark,
            staged: &w.staged,
        });
        // Every lease runs inside a transaction: in autocommit now, SQLite
        // rolled it back, and the lease's next statement would otherwise
        // commit on its own.
        if w.conn.is_autocommit() {
            lease.aborted = true;
            if w.held > 0 {
                w.held = 0;
                w.lost = true;
            }
            return Err(match out {
                Err(e) => e,
                Ok(_) => Error::tx_aborted(),
            });
        }
        out
    }

    /// [`with_lease`](Self::with_lease) for `f` that runs exactly one
    /// statement, stepped to its end (so a failed commit is its error): as
    /// a storage-level write in one call, that statement runs in autocommit,
    /// without BEGIN and COMMIT around it.
    #[track_caller]
    pub fn with_lease_one_statement<T>(
        &self, id: u32, f: impl FnOnce(Held<'_>) -> Result<T>,
    ) -> Result<T> {
        if id != OWN_TRANSACTION {
            return self.with_lease(id, f);
        }
        self.check_moved()?;
        let site = Site::caller();
        let db = self.db()?;
        let mut guard = lock(&db.writer);
        let _slow = Slow::start(telemetry::SQLITE, "write", site);
        Self::own_transaction(&mut guard, Own::Statement, f)
    }

    /// A storage-level write in one call: `f` in a transaction of its own,
    /// begun and committed here (or one statement in autocommit), when the
    /// write lock is free at once. Otherwise nothing runs and the answer is
    /// [`WOULD_BLOCK`]: another lease or group of this storage's holds the
    /// writer (the JS queue asks only when its line is empty, so that is a
    /// caller's bug made safe), or another connection holds the database's
    /// lock; the caller then takes a lease the usual way.
    fn own_transaction<T>(
        w: &mut Writer, own: Own, f: impl FnOnce(Held<'_>) -> Result<T>,
    ) -> Result<T> {
        if w.lease.is_some() || w.held > 0 {
            return Err(would_block());
        }
        if let Some(fw) = w.foreign.as_mut() {
            fw.check()?;
        }
        Self::end_stray(w)?;
        if own == Own::Transaction && !Self::begin_immediate(w)? {
            return Err(would_block());
        }
        let (mut savepoint, mut savepoint_mark) = (false, 0);
        let out = f(Held {
            conn: &w.conn,
            partition: None,
            savepoint: &mut savepoint,
            savepoint_mark: &mut savepoint_mark,
            staged: &w.staged,
        });
        match (own, out) {
            (Own::Transaction, Ok(v)) => Self::commit_physical(w).map(|()| v),
            (Own::Statement, Ok(v)) => Ok(v),
            // The statement could not take the write lock: nothing ran.
            (Own::Statement, Err(e)) if e.is_busy() => Err(would_block()),
            (Own::Statement, Err(e)) => Err(e),
            (Own::Transaction, Err(e)) => {
                let _ = conn::exec(&w.conn, "ROLLBACK");
                shared::replay_fresh(w);
                Err(e)
            }
        }
    }
}

impl<'a> Held<'a> {
    pub fn partition(&self) -> Result<&'a str> {
        self.partition.ok_or_else(|| {
            Error::plain(
                "ERR_SYNCULAR_NO_PARTITION",
                "this lease is not bound to a partition",
            )
        })
    }

    pub fn open_savepoint(&mut self) -> Result<()> {
        if !*self.savepoint {
            conn::exec(self.conn, sql::SAVEPOINT).map_err(map_err)?;
            *self.savepoint = true;
            *self.savepoint_mark = self.staged.len();
        }
        Ok(())
    }

    /// Discards everything staged since the savepoint and closes it.
    pub fn rollback_savepoint(&mut self) -> Result<()> {
        if !*self.savepoint {
            return Err(Error::plain(
                "ERR_SYNCULAR_NO_SAVEPOINT",
                "push rejection requires its apply savepoint",
            ));
        }
        conn::exec(self.conn, sql::ROLLBACK_TO_SAVEPOINT).map_err(map_err)?;
        conn::exec(self.conn, sql::RELEASE_SAVEPOINT).map_err(map_err)?;
        *self.savepoint = false;
        // `db` writes made since the savepoint were the host's, not the
        // candidate's.
        shared::replay(self.conn, &self.staged[*self.savepoint_mark..]);
        Ok(())
    }
}
