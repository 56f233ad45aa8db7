//! One open transaction's state (`TxState`): its pinned connection and
//! partition, and what it holds back to save round trips: the deferred
//! `BEGIN`, the upserts, append and push result kept for the next batch,
//! and what the lock batch read. Keeping things here sends nothing; the
//! batch goes out in `batch`.

use super::append::PendingAppend;
use super::lock_reads::{AfterLock, Locked};
use super::put::PendingPut;
use super::upsert::{execute_text, Deferral, PendingRow, MAX_PENDING};
use crate::core::error::{Error, Result};
use crate::core::model::{ServeGate, StoredRow};
use crate::core::schema::Table;
use crate::postgres::rows::TableSql;
use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, Postgres};
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// One open transaction: its pinned connection, its partition, and whether
/// the push savepoint is open.
///
/// Round trips are what a PostgreSQL push costs, so the state also holds:
/// `begun` (`BEGIN` is sent with the first statement, not by `begin`) and
/// one deferred push result
/// (`putPushResult` returns nothing, so its insert travels with the next
/// statement's round trip or with `COMMIT`).
pub struct TxState {
    pub(in crate::postgres) conn: Option<PoolConnection<Postgres>>,
    pub(in crate::postgres) partition: String,
    pub(in crate::postgres) savepoint: bool,
    pub(in crate::postgres) begun: bool,
    pub(in crate::postgres) pending_put: Option<PendingPut>,
    /// An append answered but not sent yet (`append`).
    pub(in crate::postgres) pending_append: Option<PendingAppend>,
    /// Upserts answered but not sent yet, in call order (`upsert`).
    pub(in crate::postgres) pending_rows: Vec<PendingRow>,
    /// The upsert statements this connection has prepared, as the lock
    /// batch found them, with those this transaction's batches prepare.
    pub(in crate::postgres) upserts: HashSet<Arc<str>>,
    /// The counter row and fence the lock batch read, until this
    /// transaction appends (`append`).
    pub(in crate::postgres) locked: Option<Locked>,
    /// What the lock batch read for the host's next calls.
    pub(in crate::postgres) after_lock: Option<AfterLock>,
    /// The lock batch executed the prepared statements of
    /// `lock_reads::prepare` on this connection, in this transaction.
    pub(in crate::postgres) prepared: bool,
}

impl TxState {
    /// A transaction on `conn` for `partition`, nothing sent yet.
    pub(in crate::postgres) fn new(conn: PoolConnection<Postgres>, partition: &str) -> TxState {
        TxState {
            conn: Some(conn),
            partition: partition.to_owned(),
            savepoint: false,
            begun: false,
            pending_put: None,
            pending_append: None,
            pending_rows: Vec::new(),
            upserts: Default::default(),
            locked: None,
            after_lock: None,
            prepared: false,
        }
    }

    /// The pinned connection, or `ERR_SYNCULAR_TX_FINISHED`.
    pub(in crate::postgres) fn conn(&mut self) -> Result<&mut PgConnection> {
        match self.conn.as_mut() {
            Some(c) => Ok(&mut **c),
            None => Err(Error::tx_finished()),
        }
    }

    /// Keeps `row`'s upsert for the next batch where the module comment
    /// allows. Without `may_flush` (the caller cannot send), a row that
    /// would fill the batch is not kept: [`Deferral::Full`].
    pub fn defer_upsert(
        &mut self, t: &Table, sql: &TableSql, row: &StoredRow, may_flush: bool,
    ) -> Result<Deferral> {
        if !(sql.deferrable.load(Ordering::Relaxed)
            && self.prepared
            && self.savepoint
            && self.pending_append.is_none()
            && self.pending_put.is_none())
        {
            return Ok(Deferral::No);
        }
        let Some(execute) = execute_text(t, sql, &self.partition, row)? else {
            return Ok(Deferral::No);
        };
        let full = self
            .pending_rows
            .iter()
            .map(|r| r.text.len())
            .sum::<usize>()
            + execute.len()
            + sql.upsert_prepare.len()
            > MAX_PENDING;
        if full && !may_flush {
            return Ok(Deferral::Full);
        }
        let prepares = (!self.upserts.contains(&sql.upsert_name)).then(|| sql.upsert_name.clone());
        let text = match &prepares {
            Some(_) => format!("{}; {execute}", sql.upsert_prepare),
            None => execute,
        };
        if let Some(name) = &prepares {
            self.upserts.insert(name.clone());
        }
        self.after_lock = None;
        self.pending_rows.push(PendingRow { text, prepares });
        Ok(if full {
            Deferral::Flush
        } else {
            Deferral::Kept
        })
    }

    /// Drops the upserts not sent (their statements were not prepared).
    pub fn discard_rows(&mut self) {
        for r in self.pending_rows.drain(..) {
            if let Some(name) = r.prepares {
                self.upserts.remove(&name);
            }
        }
    }

    /// The pending upserts and append as one text, emptied.
    pub fn take_batch(&mut self) -> Option<String> {
        let mut parts: Vec<String> = self.pending_rows.drain(..).map(|r| r.text).collect();
        if let Some(a) = self.pending_append.take() {
            parts.push(a.text);
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// The serve gate read in the lock batch, when nothing was sent since.
    pub fn gate_after_lock(&mut self, running: i64) -> Option<ServeGate> {
        self.after_lock.as_mut()?.take_gate(running)
    }

    /// A push result read in the lock batch, when nothing was sent since:
    /// `Some(answer)` for a client commit it asked about.
    pub fn push_result_after_lock(
        &mut self, client_id: &str, commit_id: &str,
    ) -> Option<Option<String>> {
        self.after_lock.as_mut()?.take_result(client_id, commit_id)
    }
}
