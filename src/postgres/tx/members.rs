//! The transaction members (`tx.*`), on the transaction's pinned
//! connection: `prefetchRows` (one statement for a push's rows; the caller
//! caches the answers), the reads and writes of a push, each kept for the
//! next batch where `append`, `upsert` and `put` allow, and the rejection's
//! rollback to the push savepoint. `begin`, `lockPartitionForPush` and
//! `commit`/`rollback` are `batch` and `lock`.

use super::append;
use super::immediate::UpsertNow;
use super::put::PendingPut;
use super::upsert::Deferral;
use crate::core::error::{Error, Result};
use crate::core::model::reactions::NewReaction;
use crate::core::model::{CheckpointProgress, QueryOutput};
use crate::core::model::{NewCommit, Prefetched, ServeGate, StoredRow, Tomb};
use crate::core::query::{Request, Value};
use crate::core::records::Records;
use crate::core::scope::ScopeFilter;
use crate::core::stored::{self, Form};
use crate::postgres::error::map_err;
use crate::postgres::handle::pg;
use crate::postgres::handle::PgEngine;
use crate::postgres::run::slow;
use crate::postgres::run::with_tx;
use crate::postgres::stmt::exec;
use crate::postgres::{checkpoints, reactions};
use crate::postgres::{log, meta, rows, sql};
use crate::seam::Prefetch;
use crate::seam::{Call, Transaction};
use sqlx::{AssertSqlSafe, Row};
use std::collections::HashSet;
use std::sync::Arc;

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

impl Transaction for Arc<PgEngine> {
    fn tx_get_row(&self, id: u32, table: String, row_id: String) -> Call<Option<StoredRow>> {
        pg!(self, |this| {
            let (loaded, i) = this.table(&table)?;
            let slot = this.tx_slot(id)?;
            let mut st = slot.lock().await;
            st.conn()?;
            st.ready(this).await?;
            let partition = st.partition.clone();
            rows::get_row(st.conn()?, &loaded.sql[i], &partition, &row_id).await
        })
    }

    fn tx_get_tombstone_seq(&self, id: u32, table: String, row_id: String) -> Call<Option<i64>> {
        pg!(self, |this| {
            let slot = this.tx_slot(id)?;
            let mut st = slot.lock().await;
            st.conn()?;
            st.ready(this).await?;
            let partition = st.partition.clone();
            rows::get_tombstone_seq(st.conn()?, &partition, &table, &row_id).await
        })
    }

    fn tx_clear_tombstone(&self, id: u32, table: String, row_id: String) -> Call<()> {
        pg!(self, |this| {
            let slot = this.tx_slot(id)?;
            let mut st = slot.lock().await;
            st.conn()?;
            st.ready(this).await?;
            let partition = st.partition.clone();
            rows::clear_tombstone(st.conn()?, &partition, &table, &row_id).await
        })
    }

    fn tx_get_push_result(
        &self, lease: u32, client_id: String, commit_id: String,
    ) -> Call<Option<String>> {
        if let Some(done) = self.get_push_result_now(lease, &client_id, &commit_id) {
            return Call::Now(done);
        }
        pg!(self, |e| e
            .tx_get_push_result(lease, &client_id, &commit_id)
            .await)
    }

    fn tx_scan_rows(
        &self, id: u32, table: String, filter: ScopeFilter, after_row_id: String, limit: i64,
    ) -> Call<Records> {
        pg!(self, |this| {
            let (loaded, i) = this.table(&table)?;
            let (t, sql) = (&loaded.schema.tables[i], &loaded.sql[i]);
            with_tx!(this, id, |_st, c, p| rows::scan_rows(
                c,
                t,
                sql,
                &p,
                &filter,
                &after_row_id,
                limit
            )
            .await)
        })
    }

    fn tx_scan_rows_by_index(
        &self, lease: u32, table: String, index: String, values: Option<Vec<Value>>,
        after_row_id: String, limit: f64,
    ) -> Call<Records> {
        pg!(self, |e| {
            e.tx_scan_rows_by_index(
                lease,
                &table,
                &index,
                values.as_deref(),
                &after_row_id,
                limit,
            )
            .await
        })
    }

    fn tx_query_authoritative(
        &self, lease: u32, request: Request, params: Vec<Value>, declared: Vec<String>,
    ) -> Call<QueryOutput> {
        pg!(self, |e| e
            .tx_query_authoritative(lease, &request, &params, &declared)
            .await)
    }

    /// The partition row lock, then the candidate savepoint.
    fn tx_lock_partition_for_push(&self, id: u32) -> Call<()> {
        pg!(self, |this| {
            let slot = this.tx_slot(id)?;
            let mut st = slot.lock().await;
            st.conn()?;
            if !st.savepoint {
                st.lock_partition(this).await?;
            }
            Ok(())
        })
    }

    fn tx_commit_rejected_push_result(
        &self, lease: u32, client_id: String, commit_id: String, result_json: String,
    ) -> Call<()> {
        pg!(self, |e| {
            e.tx_commit_rejected_push_result(lease, &client_id, &commit_id, &result_json)
                .await
        })
    }

    fn tx_upsert_row(
        &self, lease: u32, table: String, row: StoredRow, op_index: Option<u32>,
    ) -> Call<()> {
        let defer = match self.upsert_row_now(lease, &table, &row) {
            UpsertNow::Done(done) => return Call::Now(done),
            UpsertNow::Later { defer } => defer,
        };
        pg!(self, |e| e
            .tx_upsert_row(lease, &table, &row, op_index, defer)
            .await)
    }

    fn tx_delete_row(&self, id: u32, table: String, row_id: String) -> Call<()> {
        pg!(self, |this| {
            let (loaded, i) = this.table(&table)?;
            let (t, sql) = (&loaded.schema.tables[i], &loaded.sql[i]);
            with_tx!(this, id, |_st, c, p| {
                rows::delete_row(c, t, sql, &p, &row_id).await
            })
        })
    }

    fn tx_append_commit(&self, lease: u32, commit: NewCommit) -> Call<i64> {
        if let Some(done) = self.append_commit_now(lease, &commit) {
            return Call::Now(done);
        }
        pg!(self, |e| e.tx_append_commit(lease, &commit).await)
    }

    fn tx_put_push_result(
        &self, lease: u32, client_id: String, commit_id: String, result_json: String,
    ) -> Call<()> {
        if let Some(done) = self.put_push_result_now(lease, &client_id, &commit_id, &result_json) {
            return Call::Now(done);
        }
        pg!(self, |e| e
            .tx_put_push_result(lease, &client_id, &commit_id, &result_json)
            .await)
    }

    fn tx_set_blob_refs(
        &self, id: u32, table: String, row_id: String, blob_ids: Vec<String>,
    ) -> Call<()> {
        pg!(self, |this| {
            with_tx!(this, id, |_st, c, p| rows::set_blob_refs(
                c, &p, &table, &row_id, &blob_ids
            )
            .await)
        })
    }

    fn tx_read_serve_gate(&self, lease: u32, running: i64) -> Call<ServeGate> {
        if let Some(done) = self.read_serve_gate_now(lease, running) {
            return Call::Now(done);
        }
        pg!(self, |e| e.tx_read_serve_gate(lease, running).await)
    }

    /// Transaction form: the CAS commits with the transaction's writes.
    fn tx_advance_checkpoint(&self, id: u32, name: String, g: CheckpointProgress) -> Call<bool> {
        pg!(self, |this| {
            with_tx!(this, id, |_st, c, p| checkpoints::advance(c, &p, &name, &g)
                .await)
        })
    }

    fn tx_enqueue_reactions(&self, id: u32, reactions: Vec<NewReaction>) -> Call<()> {
        pg!(self, |this| {
            with_tx!(this, id, |_st, c, p| reactions::enqueue(c, &p, &reactions)
                .await)
        })
    }

    fn tx_prefetch_rows(&self, lease: u32, table: String, row_ids: Vec<String>) -> Call<Prefetch> {
        pg!(self, |e| e.tx_prefetch_rows(lease, &table, &row_ids).await)
    }
}
