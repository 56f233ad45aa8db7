//! The transaction members (`tx.*`), on the transaction's pinned
//! connection: `prefetchRows` (one statement for a push's rows; the caller
//! caches the answers), the reads and writes of a push, each kept for the
//! next batch where `append`, `upsert` and `put` allow, and the rejection's
//! rollback to the push savepoint. `begin`, `lockPartitionForPush` and
//! `commit`/`rollback` are `batch` and `lock`.

use super::append;
use super::put::PendingPut;
use super::upsert::Deferral;
use crate::core::error::{Error, Result};
use crate::core::model::{NewCommit, Prefetched, ServeGate, StoredRow, Tomb};
use crate::core::scope::ScopeFilter;
use crate::core::stored::{self, Form};
use crate::postgres::error::map_err;
use crate::postgres::handle::PgEngine;
use crate::postgres::run::{slow, with_tx};
use crate::postgres::stmt::exec;
use crate::postgres::{log, meta, rows, sql};
use crate::seam::Prefetch;
use sqlx::{AssertSqlSafe, Row};
use std::collections::HashSet;

impl PgEngine {
    /// Reads the rows and tombstones of `row_ids` in one statement. The
    /// answers are stable (no other transaction can change them before
    /// this one commits) once the partition lock is held.
    pub async fn tx_prefetch_rows(
        &self, id: u32, table: &str, row_ids: &[String],
    ) -> Result<Prefetch> {
        let (loaded, i) = self.table(table)?;
        let slot = self.tx_slot(id)?;
        let mut st = slot.lock().await;
        st.conn()?;
        // A set, not a scan of `want` per id: a push may prefetch hundreds
        // of thousands of ids under the partition lock.
        let mut seen: HashSet<&str> = HashSet::with_capacity(row_ids.len());
        let want: Vec<&str> = row_ids
            .iter()
            .map(String::as_str)
            .filter(|r| seen.insert(r))
            .collect();
        let stable = st.savepoint;
        if want.is_empty() {
            return Ok(Prefetch {
                rows: Vec::new(),
                stable,
            });
        }
        st.ready(self).await?;
        let found = crate::postgres::stmt::query(AssertSqlSafe(loaded.sql[i].prefetch.clone()))
            .bind(&st.partition)
            .bind(&want)
            .bind(table)
            .fetch_all(st.conn()?)
            .await
            .map_err(map_err)?;
        let mut rows = Vec::with_capacity(found.len());
        for r in &found {
            let row_id: String = r.try_get(0).map_err(map_err)?;
            let present: bool = r.try_get(1).map_err(map_err)?;
            let row = if present {
                let row = rows::row_from_parts(r, row_id.clone(), 2)?;
                Some(stored::row(Form::Jsonb, row, table, &st.partition)?)
            } else {
                None
            };
            let tomb: Option<i64> = r.try_get(6).map_err(map_err)?;
            rows.push(Prefetched {
                row_id,
                row,
                tombstone_seq: Tomb::Read(tomb),
            });
        }
        Ok(Prefetch { rows, stable })
    }

    pub async fn tx_get_row(
        &self, id: u32, table: &str, row_id: &str,
    ) -> Result<Option<StoredRow>> {
        let (loaded, i) = self.table(table)?;
        let slot = self.tx_slot(id)?;
        let mut st = slot.lock().await;
        st.conn()?;
        st.ready(self).await?;
        let partition = st.partition.clone();
        rows::get_row(st.conn()?, &loaded.sql[i], &partition, row_id).await
    }

    pub async fn tx_get_tombstone_seq(
        &self, id: u32, table: &str, row_id: &str,
    ) -> Result<Option<i64>> {
        let slot = self.tx_slot(id)?;
        let mut st = slot.lock().await;
        st.conn()?;
        st.ready(self).await?;
        let partition = st.partition.clone();
        rows::get_tombstone_seq(st.conn()?, &partition, table, row_id).await
    }

    pub async fn tx_clear_tombstone(&self, id: u32, table: &str, row_id: &str) -> Result<()> {
        let slot = self.tx_slot(id)?;
        let mut st = slot.lock().await;
        st.conn()?;
        st.ready(self).await?;
        let partition = st.partition.clone();
        rows::clear_tombstone(st.conn()?, &partition, table, row_id).await
    }

    /// Deferred: the insert goes out with the next statement of the
    /// transaction or with `COMMIT` (first writer wins either way).
    pub async fn tx_put_push_result(
        &self, id: u32, client_id: &str, commit_id: &str, json: &str,
    ) -> Result<()> {
        let slot = self.tx_slot(id)?;
        let mut st = slot.lock().await;
        st.conn()?;
        // A deferred append waits for this insert (the host's order: both
        // then go with `COMMIT`); anything else pending goes now.
        if st.pending_append.is_none() || st.pending_put.is_some() {
            st.ready(self).await?;
        }
        st.pending_put = Some(PendingPut::new(client_id, commit_id, json));
        Ok(())
    }

    pub async fn tx_get_push_result(
        &self, id: u32, client_id: &str, commit_id: &str,
    ) -> Result<Option<String>> {
        let slot = self.tx_slot(id)?;
        let mut st = slot.lock().await;
        self.push_keys.answered(&st.partition, client_id, commit_id);
        if let Some(found) = st.push_result_after_lock(client_id, commit_id) {
            return Ok(found);
        }
        let _slow = slow!("tx");
        with_tx!(@locked self, st, |_st, c, p| meta::get_push_result(
            c, &p, client_id, commit_id
        )
        .await)
    }

    pub async fn tx_scan_rows(
        &self, id: u32, table: &str, filter: &ScopeFilter, after_row_id: &str, limit: i64,
    ) -> Result<Vec<StoredRow>> {
        let (loaded, i) = self.table(table)?;
        let (t, sql) = (&loaded.schema.tables[i], &loaded.sql[i]);
        with_tx!(self, id, |_st, c, p| rows::scan_rows(
            c,
            t,
            sql,
            &p,
            filter,
            after_row_id,
            limit
        )
        .await)
    }

    /// Discards staged candidate writes, records the rejection (first
    /// writer wins) and commits; the transaction ends either way, except
    /// when it has no savepoint (it stays open and usable, as in-tree).
    pub async fn tx_commit_rejected_push_result(
        &self, id: u32, client_id: &str, commit_id: &str, json: &str,
    ) -> Result<()> {
        // An append not sent yet goes with the candidates (it can only
        // follow the lock batch, which made the savepoint).
        {
            let slot = self.tx_slot(id)?;
            let mut st = slot.lock().await;
            if st.savepoint {
                st.pending_append = None;
                st.discard_rows();
            }
        }
        let staged: Result<()> = with_tx!(self, id, |st, c, p| {
            if !st.savepoint {
                return Err(Error::plain(
                    "ERR_SYNCULAR_NO_SAVEPOINT",
                    "push rejection requires its apply savepoint",
                ));
            }
            exec(c, sql::ROLLBACK_TO_SAVEPOINT).await?;
            exec(c, sql::RELEASE_SAVEPOINT).await?;
            st.savepoint = false;
            meta::put_push_result(c, &p, client_id, commit_id, json).await
        });
        match staged {
            Ok(()) => self.unlock(id, true).await,
            Err(e) => {
                if !matches!(
                    &e,
                    Error::Plain {
                        code: "ERR_SYNCULAR_NO_SAVEPOINT",
                        ..
                    }
                ) {
                    self.unlock(id, false).await?;
                }
                Err(e)
            }
        }
    }

    /// `defer`: whether to try keeping it for the next batch (the caller's
    /// thread may already have found it cannot be, `immediate::upsert_row_now`).
    pub async fn tx_upsert_row(
        &self, id: u32, table: &str, row: &StoredRow, op_index: Option<u32>, defer: bool,
    ) -> Result<()> {
        let (loaded, i) = self.table(table)?;
        let (t, sql) = (&loaded.schema.tables[i], &loaded.sql[i]);
        let slot = self.tx_slot(id)?;
        let mut st = slot.lock().await;
        if st.conn.is_none() {
            return Err(Error::tx_finished());
        }
        if defer {
            match st.defer_upsert(t, sql, row, true)? {
                Deferral::Kept => return Ok(()),
                Deferral::Flush => return st.ready(self).await,
                Deferral::No | Deferral::Full => {}
            }
        }
        let _slow = slow!("tx");
        with_tx!(@locked self, st, |_st, c, p| {
            rows::upsert_row(c, t, sql, &p, row, op_index).await
        })
    }

    pub async fn tx_delete_row(&self, id: u32, table: &str, row_id: &str) -> Result<()> {
        let (loaded, i) = self.table(table)?;
        let (t, sql) = (&loaded.schema.tables[i], &loaded.sql[i]);
        with_tx!(self, id, |_st, c, p| {
            rows::delete_row(c, t, sql, &p, row_id).await
        })
    }

    /// Answered at once and sent with the next batch where `append`
    /// allows; otherwise sent now.
    pub async fn tx_append_commit(&self, id: u32, commit: &NewCommit) -> Result<i64> {
        let version = self.writer_version();
        let slot = self.tx_slot(id)?;
        let mut st = slot.lock().await;
        if st.conn.is_none() {
            return Err(Error::tx_finished());
        }
        // Only the transaction's first append: it changes the counter row.
        let locked = st.locked.take();
        if st.pending_put.is_none() && st.pending_append.is_none() {
            if let Some((seq, append)) = append::defer(locked, &st.partition, commit, version) {
                st.after_lock = None;
                st.pending_append = Some(append);
                return Ok(seq);
            }
        }
        let _slow = slow!("tx");
        with_tx!(@locked self, st, |_st, c, p| log::append_commit(c, &p, commit, version).await)
    }

    pub async fn tx_set_blob_refs(
        &self, id: u32, table: &str, row_id: &str, blob_ids: &[String],
    ) -> Result<()> {
        with_tx!(self, id, |_st, c, p| rows::set_blob_refs(
            c, &p, table, row_id, blob_ids
        )
        .await)
    }

    pub async fn tx_read_serve_gate(&self, id: u32, running: i64) -> Result<ServeGate> {
        let slot = self.tx_slot(id)?;
        let mut st = slot.lock().await;
        if let Some(gate) = st.gate_after_lock(running) {
            return Ok(gate);
        }
        let _slow = slow!("tx");
        with_tx!(@locked self, st, |_st, c, p| meta::read_serve_gate(c, &p, running)
            .await)
    }
}
