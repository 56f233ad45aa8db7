//! Fewer round trips per push (storage-layout §8.1, §17): the deferred
//! `BEGIN`, the lock batch, `prefetchRows` (one statement for a push's
//! rows; the caller caches the answers), and the push result that travels
//! with `COMMIT`.
//!
//! Batches go out as one simple-protocol query string, so the values in
//! them are literals: `E'…'` strings with `\` and `'` escaped, which read
//! the same whatever `standard_conforming_strings` says. A value holding a
//! NUL (which PostgreSQL text cannot store anyway) takes the prepared path.

use super::error::map_err;
use super::quote::lit;
use super::{exec, rows, sql, PgEngine, TxState};
use crate::engine::Prefetch;
use crate::error::{Error, Result};
use crate::model::{Prefetched, StoredRow, Tomb};
use crate::stored::{self, Form};
use sqlx::{AssertSqlSafe, Column, PgConnection, Row};
use std::collections::HashSet;

/// A push result whose insert has not been sent yet.
pub struct PendingPut {
    client_id: String,
    commit_id: String,
    json: String,
}

impl PendingPut {
    pub fn new(client_id: &str, commit_id: &str, json: &str) -> PendingPut {
        PendingPut {
            client_id: client_id.to_owned(),
            commit_id: commit_id.to_owned(),
            json: json.to_owned(),
        }
    }
}

/// The insert as text: the prepared statement where this transaction's
/// lock batch executed the prepared ones (so the connection has it).
fn put_text(partition: &str, put: &PendingPut, prepared: bool) -> Option<String> {
    let (p, c, k, json) = (
        lit(partition)?,
        lit(&put.client_id)?,
        lit(&put.commit_id)?,
        lit(&put.json)?,
    );
    Some(if prepared {
        format!("EXECUTE {}({p}, {c}, {k}, {json})", super::after_lock::PUT)
    } else {
        let into = super::after_lock::PUT_INTO;
        format!("{into} ({p}, {c}, {k}, {json}::pg_catalog.jsonb) ON CONFLICT DO NOTHING")
    })
}

/// The deferred writes (`TxState::take_batch`) and insert (either may be
/// absent) and `COMMIT` in one round trip. `Ok(false)`: the insert went out
/// alone (a value could not be a literal), after the writes; the caller
/// still has to commit.
pub async fn put_and_commit(
    c: &mut PgConnection, partition: &str, head: Option<&str>, put: Option<&PendingPut>,
    prepared: bool,
) -> Result<bool> {
    let mut text = head.map_or_else(String::new, |h| format!("{h}; "));
    match put.map(|p| (p, put_text(partition, p, prepared))) {
        None => text.push_str(super::CHECKED_COMMIT),
        Some((_, Some(insert))) => {
            text.push_str(&insert);
            text.push_str("; COMMIT");
        }
        Some((put, None)) => {
            if let Some(h) = head {
                send(c, h).await?;
            }
            super::meta::put_push_result(c, partition, &put.client_id, &put.commit_id, &put.json)
                .await?;
            return Ok(false);
        }
    }
    sqlx::raw_sql(AssertSqlSafe(text))
        .execute(&mut *c)
        .await
        .map_err(map_err)?;
    Ok(true)
}

/// Deferred writes, sent without `COMMIT`.
async fn send(c: &mut PgConnection, text: &str) -> Result<()> {
    sqlx::raw_sql(AssertSqlSafe(text.to_owned()))
        .execute(&mut *c)
        .await
        .map_err(map_err)?;
    Ok(())
}

impl TxState {
    fn conn(&mut self) -> Result<&mut PgConnection> {
        match self.conn.as_mut() {
            Some(c) => Ok(&mut **c),
            None => Err(Error::tx_finished()),
        }
    }

    /// Opens the transaction when nothing has been sent yet, and writes a
    /// deferred append and push result, so the next statement sees them.
    pub async fn ready(&mut self, engine: &PgEngine) -> Result<()> {
        self.after_lock = None;
        if !self.begun {
            self.begun = true;
            let begin = &engine.cfg.begin;
            if let Err(e) = super::exec_text(self.conn()?, begin).await {
                self.reconnect(engine, e).await?;
                super::exec_text(self.conn()?, begin).await?;
            }
        }
        let rows = !self.pending_rows.is_empty();
        if let Some(batch) = self.take_batch() {
            if let Err(e) = send(self.conn()?, &batch).await {
                if rows {
                    super::deferred_upsert::refused(engine, &e);
                }
                return Err(e);
            }
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

    /// After the transaction's first statement failed with `e`: when the
    /// connection was gone (it died while idle; nothing of the transaction
    /// had reached the server), pins a tested one instead, so the caller
    /// sends again; any other error is returned.
    async fn reconnect(&mut self, engine: &PgEngine, e: Error) -> Result<()> {
        if !super::error::is_connection_lost(&e) {
            return Err(e);
        }
        if let Some(mut dead) = self.conn.take() {
            dead.close_on_drop();
        }
        self.conn = Some(engine.acquire_tested().await?);
        Ok(())
    }

    /// The partition lock, counted in `stats()` (`lockWaits`).
    async fn lock_partition(&mut self, engine: &PgEngine) -> Result<()> {
        let started = std::time::Instant::now();
        let out = self.take_partition_lock(engine).await;
        engine.lock_waits.record(started.elapsed());
        out
    }

    /// `BEGIN` (when not yet sent), the counter row lock and the savepoint
    /// in one round trip; only a missing counter row costs more.
    async fn take_partition_lock(&mut self, engine: &PgEngine) -> Result<()> {
        let partition = self.partition.clone();
        let first = !self.begun;
        let begin = if first {
            format!("{}; ", engine.cfg.begin)
        } else {
            String::new()
        };
        // Behind a transaction pooler no statement is prepared by name: the
        // next transaction may run on another server session.
        let may_prepare = first && !engine.pooled();
        match (lit(&partition), self.pending_put.is_none()) {
            (Some(p), true) => {
                self.begun = true;
                // The prepared reads only in a batch that begins the
                // transaction: on a connection without the statement, that
                // batch fails before anything of the transaction is done,
                // and is sent again whole after a rollback.
                let batch = |prepared: bool| {
                    let (tail, asked) =
                        super::after_lock::batch_tail(&engine.push_keys, &partition, prepared)
                            .unwrap_or_default();
                    let lock = if prepared {
                        format!("EXECUTE {}({p})", super::after_lock::LOCK)
                    } else {
                        super::after_lock::select_lock(&p)
                    };
                    let text = format!("{begin}{lock}; {}; {tail}", sql::SAVEPOINT);
                    (text, asked)
                };
                let (mut text, mut asked) = batch(may_prepare);
                let mut prepared = may_prepare;
                let waited = crate::telemetry::lock_wait_started();
                let mut found = sqlx::raw_sql(AssertSqlSafe(text.clone()))
                    .fetch_all(self.conn()?)
                    .await
                    .map_err(map_err);
                if let (true, Err(e)) = (first, &found) {
                    if super::error::is_connection_lost(e) {
                        let e = found.err().unwrap_or_else(Error::tx_finished);
                        self.reconnect(engine, e).await?;
                        found = sqlx::raw_sql(AssertSqlSafe(text.clone()))
                            .fetch_all(self.conn()?)
                            .await
                            .map_err(map_err);
                    }
                }
                if let (true, Err(e)) = (may_prepare, &found) {
                    if matches!(e.primary(), Error::Engine { code, .. } if code == "26000") {
                        // No prepared statement on this connection (its
                        // tables came after it connected, or a proxy moved
                        // the session): prepare it for the next batch, and
                        // send this one whole.
                        let again = format!("ROLLBACK; {}", super::after_lock::prepare());
                        sqlx::raw_sql(AssertSqlSafe(again))
                            .execute(self.conn()?)
                            .await
                            .map_err(map_err)?;
                        (text, asked) = batch(false);
                        prepared = false;
                        found = sqlx::raw_sql(AssertSqlSafe(text))
                            .fetch_all(self.conn()?)
                            .await
                            .map_err(map_err);
                    }
                }
                crate::telemetry::lock_waited(waited, crate::telemetry::POSTGRES, Some(&partition));
                let found = found?;
                self.prepared = prepared;
                if prepared {
                    self.upserts = super::after_lock::prepared_upserts(&found);
                }
                let locked = found.iter().any(|r| {
                    r.columns()
                        .first()
                        .is_some_and(|c| c.name() == "max_commit_seq")
                });
                if locked {
                    self.locked = if prepared {
                        super::after_lock::locked(&found)
                    } else {
                        None
                    };
                    self.after_lock = super::after_lock::read(&found, asked);
                } else {
                    // The row did not exist: lock it outside the savepoint.
                    let c = self.conn()?;
                    exec(c, sql::RELEASE_SAVEPOINT).await?;
                    super::log::lock_partition(c, &partition).await?;
                    exec(c, sql::SAVEPOINT).await?;
                }
            }
            _ => {
                self.ready(engine).await?;
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
            st.lock_partition(self).await?;
        }
        Ok(())
    }

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
