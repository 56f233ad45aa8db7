//! The commit log on PostgreSQL: dense commitSeq allocation through the
//! partition's counter row (inside the caller's transaction, so a rollback
//! consumes nothing), appends with their change scope index and
//! tombstones (one statement), the horizon and pruning.

use super::error::map_err;
use crate::core::error::{Error, Result};
use crate::core::model::{ChangeOp, NewCommit, PruneResult};
use crate::core::scope::scope_pairs;
use sqlx::PgConnection;

pub use crate::core::model::PruneTarget;

pub async fn max_commit_seq(c: &mut PgConnection, partition: &str) -> Result<i64> {
    let v: Option<i64> = crate::postgres::stmt::query_scalar(
        "SELECT max_commit_seq FROM sync_partitions WHERE partition = $1",
    )
    .bind(partition)
    .fetch_optional(&mut *c)
    .await
    .map_err(map_err)?;
    Ok(v.unwrap_or(0))
}

pub async fn horizon_seq(c: &mut PgConnection, partition: &str) -> Result<i64> {
    let v: Option<i64> = crate::postgres::stmt::query_scalar(
        "SELECT horizon_seq FROM sync_partitions WHERE partition = $1",
    )
    .bind(partition)
    .fetch_optional(&mut *c)
    .await
    .map_err(map_err)?;
    Ok(v.unwrap_or(0))
}

pub async fn commit_seq_before(
    c: &mut PgConnection, partition: &str, before_ms: i64,
) -> Result<i64> {
    crate::postgres::stmt::query_scalar(
        "SELECT coalesce(max(commit_seq), 0)::bigint FROM sync_commits WHERE partition = $1 AND created_at_ms < $2",
    )
    .bind(partition)
    .bind(before_ms)
    .fetch_one(&mut *c)
    .await
    .map_err(map_err)
}

/// Monotonic: the stored horizon never goes down.
pub async fn set_horizon_seq(c: &mut PgConnection, partition: &str, seq: i64) -> Result<()> {
    crate::postgres::stmt::query(
        "INSERT INTO sync_partitions (partition, horizon_seq) VALUES ($1, $2)
         ON CONFLICT (partition) DO UPDATE SET horizon_seq = GREATEST(sync_partitions.horizon_seq, EXCLUDED.horizon_seq)",
    )
    .bind(partition)
    .bind(seq)
    .execute(&mut *c)
    .await
    .map_err(map_err)?;
    Ok(())
}

/// The partition's counter row, locked (storage-layout §11.2): lock first;
/// only when missing, insert and lock again. A wait above the slow
/// threshold warns on `syncular::lock`.
pub async fn lock_partition(c: &mut PgConnection, partition: &str) -> Result<()> {
    let waited = crate::core::telemetry::lock_wait_started();
    let out = lock_partition_row(c, partition).await;
    crate::core::telemetry::lock_waited(waited, crate::core::telemetry::POSTGRES, Some(partition));
    out
}

async fn lock_partition_row(c: &mut PgConnection, partition: &str) -> Result<()> {
    let row: Option<i64> = crate::postgres::stmt::query_scalar(super::sql::LOCK_PARTITION)
        .bind(partition)
        .fetch_optional(&mut *c)
        .await
        .map_err(map_err)?;
    if row.is_none() {
        crate::postgres::stmt::query(super::sql::INSERT_PARTITION)
            .bind(partition)
            .execute(&mut *c)
            .await
            .map_err(map_err)?;
        crate::postgres::stmt::query(super::sql::LOCK_PARTITION)
            .bind(partition)
            .fetch_optional(&mut *c)
            .await
            .map_err(map_err)?;
    }
    Ok(())
}

/// The append's parameters `$7` to `$18`: one entry per change, then one
/// per scope pair, then one per delete.
pub struct AppendArrays<'a> {
    pub idx: Vec<i32>,
    pub tbl: Vec<&'a str>,
    pub row_id: Vec<&'a str>,
    pub op: Vec<i16>,
    pub row_version: Vec<Option<i64>>,
    pub scopes: Vec<&'a str>,
    pub payload: Vec<Option<&'a [u8]>>,
    pub s_tbl: Vec<&'a str>,
    pub s_var: Vec<String>,
    pub s_val: Vec<String>,
    pub t_tbl: Vec<&'a str>,
    pub t_row: Vec<&'a str>,
}

impl<'a> AppendArrays<'a> {
    pub fn of(commit: &'a NewCommit) -> Result<AppendArrays<'a>> {
        let n = commit.changes.len();
        let mut a = AppendArrays {
            idx: Vec::with_capacity(n),
            tbl: Vec::with_capacity(n),
            row_id: Vec::with_capacity(n),
            op: Vec::with_capacity(n),
            row_version: Vec::with_capacity(n),
            scopes: Vec::with_capacity(n),
            payload: Vec::with_capacity(n),
            s_tbl: Vec::new(),
            s_var: Vec::new(),
            s_val: Vec::new(),
            t_tbl: Vec::new(),
            t_row: Vec::new(),
        };
        for (i, ch) in commit.changes.iter().enumerate() {
            a.idx.push(i as i32);
            a.tbl.push(ch.table.as_str());
            a.row_id.push(ch.row_id.as_str());
            a.op.push(ch.op.code() as i16);
            a.scopes.push(ch.scopes_json.as_str());
            match ch.op {
                ChangeOp::Upsert => {
                    a.row_version.push(ch.row_version);
                    a.payload.push(ch.payload.as_deref());
                }
                ChangeOp::Delete => {
                    a.row_version.push(None);
                    a.payload.push(None);
                    a.t_tbl.push(ch.table.as_str());
                    a.t_row.push(ch.row_id.as_str());
                }
            }
            for (var, value) in scope_pairs(&ch.scopes_json)? {
                a.s_tbl.push(ch.table.as_str());
                a.s_var.push(var);
                a.s_val.push(value);
            }
        }
        Ok(a)
    }
}

/// Appends one commit (storage-layout §8). Returns its commitSeq.
pub async fn append_commit(
    c: &mut PgConnection, partition: &str, commit: &NewCommit, writer_version: i64,
) -> Result<i64> {
    let a = AppendArrays::of(commit)?;
    crate::postgres::stmt::query_scalar(APPEND_COMMIT)
        .bind(partition)
        .bind(&commit.client_id)
        .bind(&commit.client_commit_id)
        .bind(&commit.actor_id)
        .bind(commit.created_at_ms)
        .bind(writer_version)
        .bind(a.idx)
        .bind(a.tbl)
        .bind(a.row_id)
        .bind(a.op)
        .bind(a.row_version)
        .bind(a.scopes)
        .bind(a.payload)
        .bind(a.s_tbl)
        .bind(a.s_var)
        .bind(a.s_val)
        .bind(a.t_tbl)
        .bind(a.t_row)
        .bind(None::<i64>)
        .fetch_one(&mut *c)
        .await
        .map_err(map_err)
}

/// The whole append as one statement (storage-layout §8): the allocation
/// upsert (which takes the partition row lock), the commit row (the fence
/// trigger may abort it), the changes, their scope entries and the
/// tombstones of deletes (one per key: a commit may delete a row twice).
/// Data-modifying CTEs always run to completion; empty arrays insert
/// nothing. `$19`, when not null, is the commitSeq the caller already
/// answered (`tx::append`): any other allocation fails the statement
/// (division by zero) rather than record a commit under another number.
pub const APPEND_COMMIT: &str = "WITH s AS (
  INSERT INTO sync_partitions (partition, max_commit_seq) VALUES ($1, 1)
  ON CONFLICT (partition) DO UPDATE SET max_commit_seq = sync_partitions.max_commit_seq + 1
  RETURNING max_commit_seq AS seq),
m AS (
  INSERT INTO sync_commits (partition, commit_seq, client_id, client_commit_id, actor_id, created_at_ms, writer_version)
  SELECT $1, s.seq + 0 * (1 / (s.seq = coalesce($19::int8, s.seq))::int), $2, $3, $4, $5, $6 FROM s
  RETURNING commit_seq),
ch AS (
  INSERT INTO sync_changes (partition, commit_seq, idx, tbl, row_id, op, row_version, scopes, payload)
  SELECT $1, s.seq, u.idx, u.tbl, u.row_id, u.op, u.row_version, u.scopes::jsonb, u.payload
  FROM s, unnest($7::int4[], $8::text[], $9::text[], $10::int2[], $11::int8[], $12::text[], $13::bytea[])
    AS u(idx, tbl, row_id, op, row_version, scopes, payload)),
sc AS (
  INSERT INTO sync_change_scopes (partition, tbl, var, value, commit_seq)
  SELECT $1, u.tbl, u.var, u.value, s.seq FROM s, unnest($14::text[], $15::text[], $16::text[]) AS u(tbl, var, value)
  ON CONFLICT DO NOTHING),
tb AS (
  INSERT INTO sync_tombstones (partition, tbl, row_id, commit_seq)
  SELECT DISTINCT ON (u.tbl, u.row_id) $1, u.tbl, u.row_id, s.seq
  FROM s, unnest($17::text[], $18::text[]) AS u(tbl, row_id)
  ON CONFLICT (partition, tbl, row_id) DO UPDATE SET commit_seq = EXCLUDED.commit_seq)
SELECT commit_seq FROM m";

/// Raises the horizon and removes everything at or below it (§9), under
/// the partition row lock, then the registry row lock.
pub async fn prune(
    c: &mut PgConnection, partition: &str, target: PruneTarget,
) -> Result<PruneResult> {
    lock_partition(c, partition).await?;
    let through = match target {
        PruneTarget::Checked {
            log_epoch,
            through_seq,
        } => {
            let stored: Option<String> = crate::postgres::stmt::query_scalar(
                "SELECT log_epoch FROM sync_partition_registry WHERE partition = $1 FOR UPDATE",
            )
            .bind(partition)
            .fetch_optional(&mut *c)
            .await
            .map_err(map_err)?;
            if stored.as_deref() != Some(log_epoch.as_str()) {
                return Err(Error::query("sync.storage.prune_epoch_mismatch"));
            }
            through_seq
        }
        PruneTarget::Legacy(seq) => seq,
    };
    let previous = horizon_seq(c, partition).await?;
    let horizon = previous.max(through);
    set_horizon_seq(c, partition, horizon).await?;
    let removed = crate::postgres::stmt::query(
        "DELETE FROM sync_commits WHERE partition = $1 AND commit_seq <= $2",
    )
    .bind(partition)
    .bind(horizon)
    .execute(&mut *c)
    .await
    .map_err(map_err)?
    .rows_affected() as i64;
    for stmt in [
        "DELETE FROM sync_changes WHERE partition = $1 AND commit_seq <= $2",
        "DELETE FROM sync_change_scopes WHERE partition = $1 AND commit_seq <= $2",
        "DELETE FROM sync_tombstones WHERE partition = $1 AND commit_seq <= $2",
    ] {
        crate::postgres::stmt::query(stmt)
            .bind(partition)
            .bind(horizon)
            .execute(&mut *c)
            .await
            .map_err(map_err)?;
    }
    Ok(PruneResult {
        previous_horizon_seq: previous,
        horizon_seq: horizon,
        removed_commits: removed,
    })
}
