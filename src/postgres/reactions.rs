//! Durable reactions on PostgreSQL (storage-layout §15). The records and
//! query shapes are the engine-neutral ones of `sqlite::reactions`; only
//! the SQL differs: claims and pruning pick their rows with
//! `FOR UPDATE SKIP LOCKED`, so concurrent claimers (other processes too)
//! never share a row and never wait on each other.

use super::error::map_err;
use super::handle::PgEngine;
use super::run::{read, write};
use crate::core::error::{Error, Result};
use crate::core::model::reactions::{
    ClaimQuery, FailureUpdate, NewReaction, PruneQuery, PrunedCounts, StoredReaction,
};
use crate::core::stored::{self, Form};
use crate::postgres::handle::pg;
use crate::seam::{Call, Reactions};
use sqlx::postgres::PgRow;
use sqlx::{AssertSqlSafe, PgConnection, Row};
use std::sync::Arc;

const FIELDS: &str = "r.idempotency_key, r.type, r.version, r.payload::text, r.source_client_id, \
r.source_client_commit_id, r.source_commit_seq, r.created_at_ms, r.max_attempts, r.status, r.attempts, \
r.available_at_ms, r.lease_owner, r.lease_expires_at_ms, r.completed_at_ms, r.last_failure::text";

const INSERT: &str = "INSERT INTO sync_reactions (partition, idempotency_key, type, version, payload, \
source_client_id, source_client_commit_id, source_commit_seq, created_at_ms, available_at_ms, \
status, attempts, max_attempts) VALUES ($1, $2, $3, $4, $5::text::jsonb, $6, $7, $8, $9, $9, 'pending', 0, $10)";

const LEASE_GUARD: &str =
    "WHERE partition = $2 AND idempotency_key = $3 AND status = 'leased' AND lease_owner = $4";

const COMPLETE: &str = "UPDATE sync_reactions SET status = 'completed', completed_at_ms = $1, \
lease_owner = NULL, lease_expires_at_ms = NULL";

const EXTEND: &str = "UPDATE sync_reactions SET lease_expires_at_ms = $1";

const FAIL: &str = "UPDATE sync_reactions SET status = $5, available_at_ms = $1, \
last_failure = $6::text::jsonb, lease_owner = NULL, lease_expires_at_ms = NULL";

const RETRY: &str =
    "UPDATE sync_reactions SET status = 'pending', attempts = 0, available_at_ms = $1, \
last_failure = NULL, lease_owner = NULL, lease_expires_at_ms = NULL, completed_at_ms = NULL \
WHERE partition = $2 AND idempotency_key = $3 AND status = 'dead-letter'";

/// A reaction row, its JSON columns in either JSONB form.
fn reaction_from(r: &PgRow, partition: &str) -> Result<StoredReaction> {
    let int = |i: usize| r.try_get::<i32, _>(i).map(i64::from).map_err(map_err);
    let raw = StoredReaction {
        idempotency_key: r.try_get(0).map_err(map_err)?,
        kind: r.try_get(1).map_err(map_err)?,
        version: int(2)?,
        payload_json: r.try_get(3).map_err(map_err)?,
        source_client_id: r.try_get(4).map_err(map_err)?,
        source_client_commit_id: r.try_get(5).map_err(map_err)?,
        source_commit_seq: r.try_get(6).map_err(map_err)?,
        created_at_ms: r.try_get(7).map_err(map_err)?,
        max_attempts: int(8)?,
        status: r.try_get(9).map_err(map_err)?,
        attempts: int(10)?,
        available_at_ms: r.try_get(11).map_err(map_err)?,
        lease_owner: r.try_get(12).map_err(map_err)?,
        lease_expires_at_ms: r.try_get(13).map_err(map_err)?,
        completed_at_ms: r.try_get(14).map_err(map_err)?,
        last_failure_json: r.try_get(15).map_err(map_err)?,
    };
    stored::reaction(Form::Jsonb, raw, partition)
}

fn int4(v: i64, what: &str) -> Result<i32> {
    i32::try_from(v).map_err(|_| Error::invalid(format!("{what} out of range")))
}

/// Plain inserts: a repeated key surfaces as the engine's primary-key error.
pub async fn enqueue(
    c: &mut PgConnection, partition: &str, reactions: &[NewReaction],
) -> Result<()> {
    for r in reactions {
        let payload = stored::payload_for_jsonb(&r.payload_json);
        crate::postgres::stmt::query(INSERT)
            .bind(partition)
            .bind(&r.idempotency_key)
            .bind(&r.kind)
            .bind(int4(r.version, "version")?)
            .bind(payload.as_ref())
            .bind(&r.source_client_id)
            .bind(&r.source_client_commit_id)
            .bind(r.source_commit_seq)
            .bind(r.created_at_ms)
            .bind(int4(r.max_attempts, "maxAttempts")?)
            .execute(&mut *c)
            .await
            .map_err(map_err)?;
    }
    Ok(())
}

/// Leases up to `limit` due rows; rows locked by another claimer are
/// skipped. The caller sorts the result (JS `localeCompare`).
pub async fn claim(
    c: &mut PgConnection, partition: &str, q: &ClaimQuery,
) -> Result<Vec<StoredReaction>> {
    if q.types.is_empty() || q.limit <= 0 {
        return Ok(Vec::new());
    }
    let text = format!(
        "WITH due AS (SELECT partition, idempotency_key FROM sync_reactions \
WHERE partition = $3 AND type = ANY($4) \
AND ((status = 'pending' AND available_at_ms <= $5) OR (status = 'leased' AND lease_expires_at_ms <= $5)) \
ORDER BY CASE WHEN status = 'leased' THEN lease_expires_at_ms ELSE available_at_ms END, \
created_at_ms, idempotency_key LIMIT $6 FOR UPDATE SKIP LOCKED) \
UPDATE sync_reactions AS r SET status = 'leased', attempts = r.attempts + 1, \
lease_owner = $1, lease_expires_at_ms = $2, completed_at_ms = NULL \
FROM due WHERE r.partition = due.partition AND r.idempotency_key = due.idempotency_key \
RETURNING {FIELDS}"
    );
    let rows = crate::postgres::stmt::query(AssertSqlSafe(text))
        .bind(&q.lease_owner)
        .bind(q.lease_expires_at_ms)
        .bind(partition)
        .bind(&q.types)
        .bind(q.now_ms)
        .bind(q.limit)
        .fetch_all(&mut *c)
        .await
        .map_err(map_err)?;
    rows.iter().map(|r| reaction_from(r, partition)).collect()
}

async fn guarded(
    c: &mut PgConnection, sql: &str, at: i64, partition: &str, key: &str, owner: &str,
) -> Result<bool> {
    let done = crate::postgres::stmt::query(AssertSqlSafe(format!("{sql} {LEASE_GUARD}")))
        .bind(at)
        .bind(partition)
        .bind(key)
        .bind(owner)
        .execute(&mut *c)
        .await
        .map_err(map_err)?;
    Ok(done.rows_affected() == 1)
}

pub async fn fail(
    c: &mut PgConnection, partition: &str, key: &str, u: &FailureUpdate,
) -> Result<bool> {
    let (status, available) = match u.retry_at_ms {
        Some(at) => ("pending", at),
        None => ("dead-letter", u.failure_at_ms),
    };
    let done = crate::postgres::stmt::query(AssertSqlSafe(format!("{FAIL} {LEASE_GUARD}")))
        .bind(available)
        .bind(partition)
        .bind(key)
        .bind(&u.lease_owner)
        .bind(status)
        .bind(&u.failure_json)
        .execute(&mut *c)
        .await
        .map_err(map_err)?;
    Ok(done.rows_affected() == 1)
}

pub async fn retry(c: &mut PgConnection, partition: &str, key: &str, now_ms: i64) -> Result<bool> {
    let done = crate::postgres::stmt::query(RETRY)
        .bind(now_ms)
        .bind(partition)
        .bind(key)
        .execute(&mut *c)
        .await
        .map_err(map_err)?;
    Ok(done.rows_affected() == 1)
}

pub async fn get(
    c: &mut PgConnection, partition: &str, key: &str,
) -> Result<Option<StoredReaction>> {
    let r = crate::postgres::stmt::query(AssertSqlSafe(format!(
        "SELECT {FIELDS} FROM sync_reactions r WHERE r.partition = $1 AND r.idempotency_key = $2"
    )))
    .bind(partition)
    .bind(key)
    .fetch_optional(&mut *c)
    .await
    .map_err(map_err)?;
    r.as_ref().map(|r| reaction_from(r, partition)).transpose()
}

/// Newest first; an empty filter list means no filter. A negative limit
/// means no limit, as on SQLite.
pub async fn list(
    c: &mut PgConnection, partition: &str, statuses: &[String], types: &[String], limit: i64,
) -> Result<Vec<StoredReaction>> {
    let mut text = format!("SELECT {FIELDS} FROM sync_reactions r WHERE r.partition = $1");
    if !statuses.is_empty() {
        text.push_str(" AND r.status = ANY($2)");
    }
    if !types.is_empty() {
        text.push_str(" AND r.type = ANY($3)");
    }
    text.push_str(" ORDER BY r.created_at_ms DESC, r.idempotency_key DESC LIMIT $4");
    let rows = crate::postgres::stmt::query(AssertSqlSafe(text))
        .bind(partition)
        .bind(statuses)
        .bind(types)
        .bind((limit >= 0).then_some(limit))
        .fetch_all(&mut *c)
        .await
        .map_err(map_err)?;
    rows.iter().map(|r| reaction_from(r, partition)).collect()
}

/// Deletes at most `limit` aged terminal rows, oldest first, then by key;
/// rows another pruner holds are skipped.
pub async fn prune(c: &mut PgConnection, partition: &str, q: &PruneQuery) -> Result<PrunedCounts> {
    let mut counts = PrunedCounts::default();
    if q.limit <= 0 {
        return Ok(counts);
    }
    let rows = crate::postgres::stmt::query(
        "DELETE FROM sync_reactions WHERE (partition, idempotency_key) IN (\
SELECT partition, idempotency_key FROM sync_reactions WHERE partition = $1 AND \
((status = 'completed' AND completed_at_ms IS NOT NULL AND completed_at_ms < $2) \
OR (status = 'dead-letter' AND available_at_ms < $3)) \
ORDER BY CASE WHEN status = 'completed' THEN completed_at_ms ELSE available_at_ms END, idempotency_key \
LIMIT $4 FOR UPDATE SKIP LOCKED) RETURNING status",
    )
    .bind(partition)
    .bind(q.completed_before_ms)
    .bind(q.dead_letter_before_ms)
    .bind(q.limit)
    .fetch_all(&mut *c)
    .await
    .map_err(map_err)?;
    for r in &rows {
        let status: String = r.try_get(0).map_err(map_err)?;
        if status == "completed" {
            counts.completed += 1;
        } else {
            counts.dead_letter += 1;
        }
    }
    Ok(counts)
}

impl Reactions for Arc<PgEngine> {
    fn claim_reactions(
        &self, _lease: u32, partition: String, q: ClaimQuery,
    ) -> Call<Vec<StoredReaction>> {
        pg!(self, |this| {
            write!(this, |c| claim(c, &partition, &q).await)
        })
    }

    fn complete_reaction(
        &self, _lease: u32, partition: String, key: String, owner: String, completed_at_ms: i64,
    ) -> Call<bool> {
        pg!(self, |this| {
            write!(this, |c| guarded(
                c,
                COMPLETE,
                completed_at_ms,
                &partition,
                &key,
                &owner
            )
            .await)
        })
    }

    fn extend_reaction_lease(
        &self, _lease: u32, partition: String, key: String, owner: String, expires_at_ms: i64,
    ) -> Call<bool> {
        pg!(self, |this| {
            write!(this, |c| guarded(
                c,
                EXTEND,
                expires_at_ms,
                &partition,
                &key,
                &owner
            )
            .await)
        })
    }

    fn fail_reaction(
        &self, _lease: u32, partition: String, key: String, u: FailureUpdate,
    ) -> Call<bool> {
        pg!(self, |this| {
            write!(this, |c| fail(c, &partition, &key, &u).await)
        })
    }

    fn retry_reaction(
        &self, _lease: u32, partition: String, key: String, now_ms: i64,
    ) -> Call<bool> {
        pg!(self, |this| {
            write!(this, |c| retry(c, &partition, &key, now_ms).await)
        })
    }

    fn get_reaction(&self, partition: String, key: String) -> Call<Option<StoredReaction>> {
        pg!(self, |this| {
            read!(this, |c| get(c, &partition, &key).await)
        })
    }

    fn list_reactions(
        &self, partition: String, statuses: Vec<String>, types: Vec<String>, limit: i64,
    ) -> Call<Vec<StoredReaction>> {
        pg!(self, |this| {
            read!(this, |c| list(c, &partition, &statuses, &types, limit)
                .await)
        })
    }

    fn prune_reactions(&self, _lease: u32, partition: String, q: PruneQuery) -> Call<PrunedCounts> {
        pg!(self, |this| {
            write!(this, |c| prune(c, &partition, &q).await)
        })
    }
}
