//! Commit windows (storage-layout §7.4): candidates come from the change
//! scope index on the first sorted filter variable, never from a log scan;
//! each candidate commit is folded with its changes to the table that pass
//! the whole filter.

use super::conn::map_err;
use crate::error::Result;
use crate::model::StoredCommit;
use crate::scope::ScopeFilter;
use crate::window::{ChangeRow, WindowFold};
use rusqlite::{Connection, ToSql};

pub use crate::window::WindowQuery;

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
    let Some((var, values)) = q.probe() else {
        return Ok(Vec::new());
    };
    let batch = q.batch();
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
    let mut fold = WindowFold::new(q);
    loop {
        let mut binds: Vec<&dyn ToSql> = vec![
            &partition,
            &q.table,
            &var,
            &fold.after,
            &q.through_seq,
            &batch,
        ];
        for v in values {
            binds.push(v);
        }
        let mut rows = st.query(&*binds).map_err(map_err)?;
        while let Some(r) = rows.next().map_err(map_err)? {
            let seq: i64 = r.get(0).map_err(map_err)?;
            if fold.is_new(seq) {
                let actor: Option<String> = r.get(1).map_err(map_err)?;
                let created: Option<i64> = r.get(2).map_err(map_err)?;
                if !fold.start(seq, actor.zip(created)) {
                    return Ok(fold.finish());
                }
            }
            let row_id: Option<String> = r.get(3).map_err(map_err)?;
            let Some(row_id) = row_id else { continue };
            let scopes_json: String = r.get(6).map_err(map_err)?;
            if !fold.wants(&scopes_json) {
                continue;
            }
            fold.add(ChangeRow {
                row_id,
                op: r.get(4).map_err(map_err)?,
                row_version: r.get(5).map_err(map_err)?,
                scopes_json,
                payload: r.get(7).map_err(map_err)?,
            });
        }
        if !fold.next_page() {
            return Ok(fold.finish());
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
