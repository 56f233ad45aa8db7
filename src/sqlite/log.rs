//! The commit log: dense commitSeq allocation, appends with their change
//! scope index and tombstones, the horizon and pruning.

use super::conn::map_err;
use super::kept::{kept, Conn};
use crate::core::error::{Error, Result};
use crate::core::model::{ChangeOp, NewCommit, PruneResult, PruneTarget};
use crate::core::scope::scope_pairs;
use rusqlite::{params, OptionalExtension};

pub fn max_commit_seq(conn: &Conn, partition: &str) -> Result<i64> {
    kept!(
        conn,
        "SELECT max_commit_seq FROM sync_partitions WHERE partition = ?1"
    )
    .and_then(|mut st| st.query_row([partition], |r| r.get(0)).optional())
    .map(|v| v.unwrap_or(0))
    .map_err(map_err)
}

pub fn horizon_seq(conn: &Conn, partition: &str) -> Result<i64> {
    kept!(
        conn,
        "SELECT horizon_seq FROM sync_partitions WHERE partition = ?1"
    )
    .and_then(|mut st| st.query_row([partition], |r| r.get(0)).optional())
    .map(|v| v.unwrap_or(0))
    .map_err(map_err)
}

pub fn commit_seq_before(conn: &Conn, partition: &str, before_ms: i64) -> Result<i64> {
    kept!(conn, "SELECT coalesce(max(commit_seq), 0) FROM sync_commits WHERE partition = ?1 AND created_at_ms < ?2",
    )
    .and_then(|mut st| st.query_row(params![partition, before_ms], |r| r.get(0)))
    .map_err(map_err)
}

/// Monotonic: the stored horizon never goes down.
pub fn set_horizon_seq(conn: &Conn, partition: &str, seq: i64) -> Result<()> {
    kept!(conn, "INSERT INTO sync_partitions (partition, horizon_seq) VALUES (?1, ?2)
         ON CONFLICT (partition) DO UPDATE SET horizon_seq = max(horizon_seq, excluded.horizon_seq)",
    )
    .and_then(|mut st| st.execute(params![partition, seq]))
    .map_err(map_err)?;
    Ok(())
}

/// Runs `f` inside a savepoint so a failure leaves nothing staged.
pub fn atomically<T>(conn: &Conn, f: impl FnOnce() -> Result<T>) -> Result<T> {
    super::conn::exec(conn, "SAVEPOINT syncular_step").map_err(map_err)?;
    match f() {
        Ok(v) => {
            super::conn::exec(conn, "RELEASE SAVEPOINT syncular_step").map_err(map_err)?;
            Ok(v)
        }
        Err(e) => {
            let _ = super::conn::exec(conn, "ROLLBACK TO SAVEPOINT syncular_step");
            let _ = super::conn::exec(conn, "RELEASE SAVEPOINT syncular_step");
            Err(e)
        }
    }
}

/// Takes the partition's next commitSeq, if its counter row exists: the
/// counter is raised, then read, inside the append's transaction. Not one
/// statement with RETURNING: SQLite gathers a RETURNING statement's rows in
/// an ephemeral table, with a pager and page cache of its own opened and
/// closed on every run (docs/performance.md, "Statements without
/// RETURNING").
fn next_commit_seq(conn: &Conn, partition: &str) -> Result<Option<i64>> {
    let raised = kept!(
        conn,
        "UPDATE sync_partitions SET max_commit_seq = max_commit_seq + 1 WHERE partition = ?1",
    )
    .and_then(|mut st| st.execute([partition]))
    .map_err(map_err)?;
    if raised == 0 {
        return Ok(None);
    }
    kept!(
        conn,
        "SELECT max_commit_seq FROM sync_partitions WHERE partition = ?1",
    )
    .and_then(|mut st| st.query_row([partition], |r| r.get(0)))
    .map(Some)
    .map_err(map_err)
}

/// Appends one commit (storage-layout §8). Returns its commitSeq.
pub fn append_commit(
    conn: &Conn, partition: &str, commit: &NewCommit, writer_version: i64,
) -> Result<i64> {
    // Parse every scope map before writing anything.
    let pairs: Vec<Vec<(String, String)>> = commit
        .changes
        .iter()
        .map(|c| scope_pairs(&c.scopes_json))
        .collect::<Result<_>>()?;
    atomically(conn, || {
        let seq = match next_commit_seq(conn, partition)? {
            Some(seq) => seq,
            // A partition's first commit: its counter row is created once,
            // not probed with an insert on every append.
            None => {
                kept!(
                    conn,
                    "INSERT OR IGNORE INTO sync_partitions (partition) VALUES (?1)",
                )
                .and_then(|mut st| st.execute([partition]))
                .map_err(map_err)?;
                next_commit_seq(conn, partition)?.ok_or_else(|| {
                    Error::plain("ERR_SYNCULAR_INTERNAL", "partition counter row missing")
                })?
            }
        };
        kept!(conn, "INSERT INTO sync_commits (partition, commit_seq, client_id, client_commit_id, actor_id, created_at_ms, writer_version)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )
        .and_then(|mut st| {
            st.execute(params![
                partition,
                seq,
                commit.client_id,
                commit.client_commit_id,
                commit.actor_id,
                commit.created_at_ms,
                writer_version
            ])
        })
        .map_err(map_err)?;
        if commit.changes.is_empty() {
            return Ok(seq);
        }
        let mut ins_change = kept!(conn, "INSERT INTO sync_changes (partition, commit_seq, idx, tbl, row_id, op, row_version, scopes, payload)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )
            .map_err(map_err)?;
        let mut ins_scope = kept!(conn, "INSERT OR IGNORE INTO sync_change_scopes (partition, tbl, var, value, commit_seq) VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .map_err(map_err)?;
        let mut ins_tomb = kept!(conn, "INSERT INTO sync_tombstones (partition, tbl, row_id, commit_seq) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (partition, tbl, row_id) DO UPDATE SET commit_seq = excluded.commit_seq",
            )
            .map_err(map_err)?;
        for (idx, (change, pairs)) in commit.changes.iter().zip(&pairs).enumerate() {
            let (row_version, payload) = match change.op {
                ChangeOp::Upsert => (change.row_version, change.payload.as_deref()),
                ChangeOp::Delete => (None, None),
            };
            ins_change
                .execute(params![
                    partition,
                    seq,
                    idx as i64,
                    change.table,
                    change.row_id,
                    change.op.code(),
                    row_version,
                    change.scopes_json,
                    payload
                ])
                .map_err(map_err)?;
            for (var, value) in pairs {
                ins_scope
                    .execute(params![partition, change.table, var, value, seq])
                    .map_err(map_err)?;
            }
            if change.op == ChangeOp::Delete {
                ins_tomb
                    .execute(params![partition, change.table, change.row_id, seq])
                    .map_err(map_err)?;
            }
        }
        Ok(seq)
    })
}

/// Raises the horizon and removes everything at or below it (§9). Runs
/// under the caller's write lease, so it is one atomic step.
pub fn prune(conn: &Conn, partition: &str, target: PruneTarget) -> Result<PruneResult> {
    let through = match target {
        PruneTarget::Checked {
            log_epoch,
            through_seq,
        } => {
            let stored: Option<String> = kept!(
                conn,
                "SELECT log_epoch FROM sync_partition_registry WHERE partition = ?1",
            )
            .and_then(|mut st| st.query_row([partition], |r| r.get(0)).optional())
            .map_err(map_err)?;
            if stored.as_deref() != Some(log_epoch.as_str()) {
                return Err(Error::query("sync.storage.prune_epoch_mismatch"));
            }
            through_seq
        }
        PruneTarget::Legacy(seq) => seq,
    };
    let previous = horizon_seq(conn, partition)?;
    let horizon = previous.max(through);
    set_horizon_seq(conn, partition, horizon)?;
    let removed = kept!(
        conn,
        "DELETE FROM sync_commits WHERE partition = ?1 AND commit_seq <= ?2"
    )
    .and_then(|mut st| st.execute(params![partition, horizon]))
    .map_err(map_err)? as i64;
    for stmt in [
        "DELETE FROM sync_changes WHERE partition = ?1 AND commit_seq <= ?2",
        "DELETE FROM sync_change_scopes WHERE partition = ?1 AND commit_seq <= ?2",
        "DELETE FROM sync_tombstones WHERE partition = ?1 AND commit_seq <= ?2",
    ] {
        conn.prepare_cached(stmt)
            .and_then(|mut st| st.execute(params![partition, horizon]))
            .map_err(map_err)?;
    }
    Ok(PruneResult {
        previous_horizon_seq: previous,
        horizon_seq: horizon,
        removed_commits: removed,
    })
}
