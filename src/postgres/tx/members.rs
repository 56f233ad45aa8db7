//! The transaction members that work on its state itself rather than
//! through `with_tx!`: `prefetchRows` (one statement for a push's rows;
//! the caller caches the answers), the row and tombstone reads and the
//! tombstone clear of a push, and `putPushResult`, kept for the next batch.

use super::put::PendingPut;
use crate::engine::Prefetch;
use crate::error::Result;
use crate::model::{Prefetched, StoredRow, Tomb};
use crate::postgres::error::map_err;
use crate::postgres::handle::PgEngine;
use crate::postgres::rows;
use crate::stored::{self, Form};
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
}
