//! Commit windows (storage-layout §7.4): candidates come from the change
//! scope index on the first sorted filter variable, never from a log scan;
//! each candidate commit is folded with its changes to the table that pass
//! the whole filter.

use super::conn::map_err;
use crate::error::Result;
use crate::model::{Change, ChangeOp, StoredCommit};
use crate::scope::ScopeFilter;
use rusqlite::{Connection, ToSql};

pub struct WindowQuery<'a> {
    pub table: &'a str,
    pub filter: &'a ScopeFilter,
    pub after_seq: i64,
    pub through_seq: i64,
    pub limit_changes: i64,
}

/// The commit being folded: (seq, (actor, createdAtMs) when its metadata
/// row exists, matching changes).
type Folding = (i64, Option<(String, i64)>, Vec<Change>);

fn numbered(from: usize, n: usize) -> String {
    (0..n)
        .map(|i| format!("?{}", from + i))
        .collect::<Vec<_>>()
        .join(",")
}

pub fn read_commit_window(
    conn: &Connection,
    partition: &str,
    q: &WindowQuery<'_>,
) -> Result<Vec<StoredCommit>> {
    let Some((var, values)) = q.filter.probe() else {
        return Ok(Vec::new());
    };
    if values.is_empty() || q.limit_changes <= 0 {
        return Ok(Vec::new());
    }
    let batch = q.limit_changes.max(64);
    let text = format!(
        "SELECT c.commit_seq, m.actor_id, m.created_at_ms, ch.row_id, ch.op, ch.row_version, ch.scopes, ch.payload
FROM (SELECT DISTINCT commit_seq FROM sync_change_scopes
      WHERE partition = ?1 AND tbl = ?2 AND var = ?3 AND commit_seq > ?4 AND commit_seq <= ?5 AND value IN ({})
      ORDER BY commit_seq LIMIT ?6) c
LEFT JOIN sync_commits m ON m.partition = ?1 AND m.commit_seq = c.commit_seq
LEFT JOIN sync_changes ch ON ch.partition = ?1 AND ch.commit_seq = c.commit_seq AND ch.tbl = ?2
ORDER BY c.commit_seq, ch.idx",
        numbered(7, values.len())
    );
    let mut st = conn.prepare_cached(&text).map_err(map_err)?;
    let mut out: Vec<StoredCommit> = Vec::new();
    let mut total = 0i64;
    let mut after = q.after_seq;
    loop {
        let mut binds: Vec<&dyn ToSql> =
            vec![&partition, &q.table, &var, &after, &q.through_seq, &batch];
        for v in values {
            binds.push(v);
        }
        let mut rows = st.query(&*binds).map_err(map_err)?;
        let mut candidates = 0i64;
        let mut current: Option<Folding> = None;
        let flush = |cur: Option<Folding>,
                     out: &mut Vec<StoredCommit>,
                     total: &mut i64| {
            if let Some((seq, Some((actor_id, created_at_ms)), changes)) = cur {
                if !changes.is_empty() {
                    *total += changes.len() as i64;
                    out.push(StoredCommit {
                        commit_seq: seq,
                        created_at_ms,
                        actor_id,
                        changes,
                    });
                }
            }
        };
        while let Some(r) = rows.next().map_err(map_err)? {
            let seq: i64 = r.get(0).map_err(map_err)?;
            if current.as_ref().is_none_or(|c| c.0 != seq) {
                flush(current.take(), &mut out, &mut total);
                after = seq;
                candidates += 1;
                if total >= q.limit_changes {
                    return Ok(out);
                }
                let actor: Option<String> = r.get(1).map_err(map_err)?;
                let created: Option<i64> = r.get(2).map_err(map_err)?;
                current = Some((seq, actor.zip(created), Vec::new()));
            }
            let row_id: Option<String> = r.get(3).map_err(map_err)?;
            let Some(row_id) = row_id else { continue };
            let scopes_json: String = r.get(6).map_err(map_err)?;
            if !q.filter.matches_json(&scopes_json) {
                continue;
            }
            let op = ChangeOp::from_code(r.get(4).map_err(map_err)?);
            if let Some((_, _, changes)) = current.as_mut() {
                changes.push(Change {
                    table: q.table.to_owned(),
                    row_id,
                    op,
                    row_version: r.get(5).map_err(map_err)?,
                    scopes_json,
                    payload: r.get(7).map_err(map_err)?,
                });
            }
        }
        flush(current.take(), &mut out, &mut total);
        if total >= q.limit_changes || candidates < batch {
            return Ok(out);
        }
    }
}

/// Upper bound of what a window read on this filter would deliver: the
/// index-only maximum on the probe variable (post-0.24 member).
pub fn latest_scoped_change_seq(
    conn: &Connection,
    partition: &str,
    table: &str,
    filter: &ScopeFilter,
) -> Result<i64> {
    let Some((var, values)) = filter.probe() else {
        return Ok(0);
    };
    if values.is_empty() {
        return Ok(0);
    }
    let text = format!(
        "SELECT coalesce(max(commit_seq), 0) FROM sync_change_scopes
         WHERE partition = ?1 AND tbl = ?2 AND var = ?3 AND value IN ({})",
        numbered(4, values.len())
    );
    let mut st = conn.prepare_cached(&text).map_err(map_err)?;
    let mut binds: Vec<&dyn ToSql> = vec![&partition, &table, &var];
    for v in values {
        binds.push(v);
    }
    st.query_row(&*binds, |r| r.get(0)).map_err(map_err)
}
