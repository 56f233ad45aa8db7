//! Fewer round trips per push (storage-layout §8.1, §17): the deferred
//! `BEGIN`, the lock batch, the `prefetchRows` cache, and the push result
//! that travels with `COMMIT`.
//!
//! Batches go out as one simple-protocol query string, so the values in
//! them are literals: `E'…'` strings with `\` and `'` escaped, which read
//! the same whatever `standard_conforming_strings` says. A value holding a
//! NUL (which PostgreSQL text cannot store anyway) takes the prepared path.

use super::conn::map_err;
use super::{exec, rows, sql, PgEngine, TxState};
use crate::error::{Error, Result};
use crate::model::StoredRow;
use sqlx::{AssertSqlSafe, PgConnection, Row};
use std::collections::{HashMap, HashSet};

/// A push result whose insert has not been sent yet.
pub struct PendingPut {
    client_id: String,
    commit_id: String,
    json: String,
}

/// Rows and tombstones read by `prefetchRows`, keyed by (table, row id).
/// A tombstone entry remembers whether it was read under the partition
/// lock: only then can no other transaction change it before commit.
#[derive(Default)]
pub struct Cache {
    rows: HashMap<(String, String), Option<StoredRow>>,
    tombs: HashMap<(String, String), (Option<i64>, bool)>,
}

impl Cache {
    fn key(table: &str, row_id: &str) -> (String, String) {
        (table.to_owned(), row_id.to_owned())
    }

    pub fn clear(&mut self) {
        self.rows.clear();
        self.tombs.clear();
    }
}

/// `E'…'`, a string literal that reads the same whatever
/// `standard_conforming_strings` says, or `None` for a value holding a NUL
/// (which PostgreSQL text cannot hold).
pub(super) fn lit(s: &str) -> Option<String> {
    if s.contains('\0') {
        return None;
    }
    let mut out = String::with_capacity(s.len() + 4);
    out.push_str("E'");
    for ch in s.chars() {
        match ch {
            '\'' => out.push_str("''"),
            '\\' => out.push_str("\\\\"),
            _ => out.push(ch),
        }
    }
    out.push('\'');
    Some(out)
}

const PUT_PUSH_RESULT: &str =
    "INSERT INTO sync_push_results (partition, client_id, client_commit_id, result) VALUES";

fn put_text(partition: &str, put: &PendingPut) -> Option<String> {
    Some(format!(
        "{PUT_PUSH_RESULT} ({}, {}, {}, {}::jsonb) ON CONFLICT DO NOTHING",
        lit(partition)?,
        lit(&put.client_id)?,
        lit(&put.commit_id)?,
        lit(&put.json)?
    ))
}

/// The deferred insert and `COMMIT` in one round trip. `Ok(false)`: the
/// insert went out alone (a value could not be a literal); the caller
/// still has to commit.
pub async fn put_and_commit(
    c: &mut PgConnection, partition: &str, put: &PendingPut,
) -> Result<bool> {
    match put_text(partition, put) {
        Some(text) => {
            sqlx::raw_sql(AssertSqlSafe(format!("{text}; COMMIT")))
                .execute(&mut *c)
                .await
                .map_err(map_err)?;
            Ok(true)
        }
        None => {
            super::meta::put_push_result(c, partition, &put.client_id, &put.commit_id, &put.json)
                .await?;
            Ok(false)
        }
    }
}

impl TxState {
    fn conn(&mut self) -> Result<&mut PgConnection> {
        match self.conn.as_mut() {
            Some(c) => Ok(&mut **c),
            None => Err(Error::tx_finished()),
        }
    }

    /// Opens the transaction when nothing has been sent yet, and writes a
    /// deferred push result, so the next statement sees both.
    pub async fn ready(&mut self) -> Result<()> {
        if !self.begun {
            self.begun = true;
            exec(self.conn()?, "BEGIN").await?;
        }
        if let Some(put) = self.pending_put.take() {
            let partition = self.partition.clone();
            super::meta::put_push_result(
                self.conn()?,
                &partition,
                &put.client_id,
                &put.commit_id,
                &put.json,
            )
            .await?;
        }
        Ok(())
    }

    /// `BEGIN` (when not yet sent), the counter row lock and the savepoint
    /// in one round trip; only a missing counter row costs more.
    async fn lock_partition(&mut self) -> Result<()> {
        let partition = self.partition.clone();
        let begin = if self.begun { "" } else { "BEGIN; " };
        match (lit(&partition), self.pending_put.is_none()) {
            (Some(p), true) => {
                self.begun = true;
                let text = format!(
                    "{begin}SELECT max_commit_seq FROM sync_partitions WHERE partition = {p} FOR UPDATE; {}",
                    sql::SAVEPOINT
                );
                let waited = crate::telemetry::lock_wait_started();
                let found = sqlx::raw_sql(AssertSqlSafe(text))
                    .fetch_all(self.conn()?)
                    .await
                    .map_err(map_err);
                crate::telemetry::lock_waited(waited, crate::telemetry::POSTGRES, Some(&partition));
                let found = found?;
                if found.is_empty() {
                    // The row did not exist: lock it outside the savepoint.
                    let c = self.conn()?;
                    exec(c, sql::RELEASE_SAVEPOINT).await?;
                    super::log::lock_partition(c, &partition).await?;
                    exec(c, sql::SAVEPOINT).await?;
                }
            }
            _ => {
                self.ready().await?;
                let c = self.conn()?;
                super::log::lock_partition(c, &partition).await?;
                exec(c, sql::SAVEPOINT).await?;
            }
        }
        self.savepoint = true;
        Ok(())
    }
}

/// Rows and tombstones of `ids` in one statement.
const PREFETCH: &str = "SELECT k.id, t.\"_sync_row_id\" IS NOT NULL, t.\"_sync_server_version\", t.\"_sync_scopes\"::text, \
t.\"_sync_payload\", t.\"_sync_column_versions\", ts.commit_seq \
FROM unnest($2::text[]) AS k(id) \
LEFT JOIN {table} t ON t.\"_sync_partition\" = $1 AND t.\"_sync_row_id\" = k.id \
LEFT JOIN sync_tombstones ts ON ts.partition = $1 AND ts.tbl = $3 AND ts.row_id = k.id";

pub fn prefetch_sql(quoted_table: &str) -> String {
    PREFETCH.replace("{table}", quoted_table)
}

impl PgEngine {
    /// The partition row lock, then the candidate savepoint.
    pub async fn tx_lock_partition_for_push(&self, id: u32) -> Result<()> {
        let slot = self.tx_slot(id)?;
        let mut st = slot.lock().await;
        st.conn()?;
        if !st.savepoint {
            st.lock_partition().await?;
        }
        Ok(())
    }

    /// Reads the rows and tombstones of `row_ids` not cached yet, in one
    /// statement; later `getRow` / `getTombstoneSeq` calls answer from it.
    pub async fn tx_prefetch_rows(&self, id: u32, table: &str, row_ids: &[String]) -> Result<()> {
        let (loaded, i) = self.table(table)?;
        let slot = self.tx_slot(id)?;
        let mut st = slot.lock().await;
        st.conn()?;
        // A set, not a scan of `want` per id: a push may prefetch hundreds
        // of thousands of ids under the partition lock.
        let mut seen: HashSet<&str> = HashSet::with_capacity(row_ids.len());
        let mut want: Vec<&str> = Vec::new();
        for r in row_ids {
            if !seen.insert(r.as_str()) {
                continue;
            }
            let k = Cache::key(table, r);
            if !st.cache.rows.contains_key(&k) || !st.cache.tombs.contains_key(&k) {
                want.push(r);
            }
        }
        if want.is_empty() {
            return Ok(());
        }
        st.ready().await?;
        let locked = st.savepoint;
        let found = sqlx::query(AssertSqlSafe(loaded.sql[i].prefetch.clone()))
            .bind(&st.partition)
            .bind(&want)
            .bind(table)
            .fetch_all(st.conn()?)
            .await
            .map_err(map_err)?;
        for r in &found {
            let row_id: String = r.try_get(0).map_err(map_err)?;
            let present: bool = r.try_get(1).map_err(map_err)?;
            let row = if present {
                Some(rows::row_from_parts(r, row_id.clone(), 2)?)
            } else {
                None
            };
            let tomb: Option<i64> = r.try_get(6).map_err(map_err)?;
            let k = Cache::key(table, &row_id);
            st.cache.rows.entry(k.clone()).or_insert(row);
            st.cache.tombs.entry(k).or_insert((tomb, locked));
        }
        Ok(())
    }

    pub async fn tx_get_row(
        &self, id: u32, table: &str, row_id: &str,
    ) -> Result<Option<StoredRow>> {
        let (loaded, i) = self.table(table)?;
        let slot = self.tx_slot(id)?;
        let mut st = slot.lock().await;
        st.conn()?;
        if let Some(hit) = st.cache.rows.get(&Cache::key(table, row_id)) {
            return Ok(hit.clone());
        }
        st.ready().await?;
        let partition = st.partition.clone();
        rows::get_row(st.conn()?, &loaded.sql[i], &partition, row_id).await
    }

    pub async fn tx_get_tombstone_seq(
        &self, id: u32, table: &str, row_id: &str,
    ) -> Result<Option<i64>> {
        let slot = self.tx_slot(id)?;
        let mut st = slot.lock().await;
        st.conn()?;
        if let Some((hit, _)) = st.cache.tombs.get(&Cache::key(table, row_id)) {
            return Ok(*hit);
        }
        st.ready().await?;
        let partition = st.partition.clone();
        rows::get_tombstone_seq(st.conn()?, &partition, table, row_id).await
    }

    /// Skips the statement when a tombstone read under the partition lock
    /// says there is none.
    pub async fn tx_clear_tombstone(&self, id: u32, table: &str, row_id: &str) -> Result<()> {
        let slot = self.tx_slot(id)?;
        let mut st = slot.lock().await;
        st.conn()?;
        let k = Cache::key(table, row_id);
        if let Some((None, true)) = st.cache.tombs.get(&k) {
            return Ok(());
        }
        st.ready().await?;
        let partition = st.partition.clone();
        rows::clear_tombstone(st.conn()?, &partition, table, row_id).await?;
        st.cache.tombs.remove(&k);
        Ok(())
    }

    /// Deferred: the insert goes out with the next statement of the
    /// transaction or with `COMMIT` (first writer wins either way).
    pub async fn tx_put_push_result(
        &self, id: u32, client_id: &str, commit_id: &str, json: &str,
    ) -> Result<()> {
        let slot = self.tx_slot(id)?;
        let mut st = slot.lock().await;
        st.conn()?;
        st.ready().await?;
        st.pending_put = Some(PendingPut {
            client_id: client_id.to_owned(),
            commit_id: commit_id.to_owned(),
            json: json.to_owned(),
        });
        Ok(())
    }

    pub(super) fn invalidate_row(st: &mut TxState, table: &str, row_id: &str) {
        st.cache.rows.remove(&Cache::key(table, row_id));
    }

    pub(super) fn invalidate_tombstones(st: &mut TxState) {
        st.cache.tombs.clear();
    }
}
