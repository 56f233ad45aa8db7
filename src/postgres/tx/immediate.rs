//! Members answered on the caller's thread (issue 27): where a call needs
//! no round trip (a push's `begin` on an idle connection, the answers the
//! lock batch read, a deferred upsert, append or push result), it does not
//! go to a runtime worker and back. Each answers exactly what its async
//! form would, and returns `None` to send the caller there instead: the
//! transaction is busy with another call, or the work needs the server.

use super::append;
use super::lock_reads::Locked;
use super::put::PendingPut;
use super::state::TxState;
use super::upsert::Deferral;
use crate::core::error::{Error, Result};
use crate::core::model::{NewCommit, ServeGate, StoredRow};
use crate::postgres::handle::PgEngine;

impl PgEngine {
    /// Runs `f` on transaction `id` when no other call holds it.
    fn now<T>(
        &self, id: u32, f: impl FnOnce(&mut TxState) -> Option<Result<T>>,
    ) -> Option<Result<T>> {
        let slot = match self.tx_slot(id) {
            Ok(s) => s,
            Err(e) => return Some(Err(e)),
        };
        let mut st = slot.try_lock().ok()?;
        if st.conn.is_none() {
            return Some(Err(Error::tx_finished()));
        }
        f(&mut st)
    }

    /// `begin` on a connection from the idle list.
    pub fn begin_now(&self, partition: &str) -> Option<u32> {
        let conn = self.take_idle()?;
        Some(self.pin(conn, partition))
    }

    /// A deferred upsert; `Later { defer: false }` when the row must be
    /// written now (the async path then does not try to defer it again).
    pub fn upsert_row_now(&self, id: u32, table: &str, row: &StoredRow) -> UpsertNow {
        let (loaded, i) = match self.table(table) {
            Ok(found) => found,
            Err(e) => return UpsertNow::Done(Err(e)),
        };
        let mut defer = true;
        let done = self.now(id, |st| {
            match st.defer_upsert(&loaded.schema.tables[i], &loaded.sql[i], row, false) {
                Ok(Deferral::Kept) => Some(Ok(())),
                Ok(Deferral::No) => {
                    defer = false;
                    None
                }
                Ok(_) => None,
                Err(e) => Some(Err(e)),
            }
        });
        match done {
            Some(r) => UpsertNow::Done(r),
            None => UpsertNow::Later { defer },
        }
    }

    pub fn append_commit_now(&self, id: u32, commit: &NewCommit) -> Option<Result<i64>> {
        let version = self.writer_version();
        self.now(id, |st| {
            if st.pending_put.is_some() || st.pending_append.is_some() {
                return None;
            }
            let locked: Option<Locked> = st.locked;
            let (seq, append) = append::defer(locked, &st.partition, commit, version)?;
            st.locked = None;
            st.after_lock = None;
            st.pending_append = Some(append);
            Some(Ok(seq))
        })
    }

    /// Kept for `COMMIT` when an append waits for it (the host's order).
    pub fn put_push_result_now(
        &self, id: u32, client_id: &str, commit_id: &str, json: &str,
    ) -> Option<Result<()>> {
        self.now(id, |st| {
            if st.pending_append.is_none() || st.pending_put.is_some() {
                return None;
            }
            st.pending_put = Some(PendingPut::new(client_id, commit_id, json));
            Some(Ok(()))
        })
    }

    pub fn read_serve_gate_now(&self, id: u32, running: i64) -> Option<Result<ServeGate>> {
        self.now(id, |st| st.gate_after_lock(running).map(Ok))
    }

    pub fn get_push_result_now(
        &self, id: u32, client_id: &str, commit_id: &str,
    ) -> Option<Result<Option<String>>> {
        self.now(id, |st| {
            let found = st.push_result_after_lock(client_id, commit_id)?;
            self.push_keys.answered(&st.partition, client_id, commit_id);
            Some(Ok(found))
        })
    }
}

/// What `upsert_row_now` did.
pub enum UpsertNow {
    Done(Result<()>),
    /// The async path's turn; `defer`: whether it should try to defer.
    Later {
        defer: bool,
    },
}
