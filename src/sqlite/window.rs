//! Commit windows (storage-layout §7.4): candidates come from the change
//! scope index on the first sorted filter variable, never from a log scan;
//! each candidate commit is folded with its changes to the table that pass
//! the whole filter.

use super::budget::Budget;
use super::conn::map_err;
use super::sql::ValueSet;
use crate::core::error::Result;
use crate::core::records::Records;
use crate::core::scope::ScopeFilter;
use crate::core::window::{change_corrupt, ChangeRef, WindowFold};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, ToSql};

pub use crate::core::window::WindowQuery;

pub fn read_commit_window(
    conn: &Connection, partition: &str, q: &WindowQuery<'_>,
) -> Result<Records> {
    read_commit_window_within(conn, partition, q, Budget::unbounded())
}

/// [`read_commit_window`], failing with `OVER_BUDGET` once it
/// would step more rows, or copy more payload bytes, than `budget` allows.
pub fn read_commit_window_within(
    conn: &Connection, partition: &str, q: &WindowQuery<'_>, mut budget: Budget,
) -> Result<Records> {
    let Some((var, values)) = q.probe() else {
        return Ok(Records::none());
    };
    let batch = q.batch();
    let probe = values;
    let values = ValueSet::new(values);
    // No ORDER BY on the joined rows: SQLite would sort every payload
    // through a temporary b-tree (measured: about 3× the cost of the page
    // itself). The page is ordered here instead, by (commit_seq, idx).
    let text = format!(
        "SELECT c.commit_seq, m.actor_id, m.created_at_ms, ch.idx, ch.row_id, ch.op, ch.row_version, ch.scopes, ch.payload
FROM (SELECT DISTINCT commit_seq FROM sync_change_scopes
      WHERE partition = ?1 AND tbl = ?2 AND var = ?3 AND commit_seq > ?4 AND commit_seq <= ?5 AND value IN ({})
      ORDER BY commit_seq LIMIT ?6) c
LEFT JOIN sync_commits m ON m.partition = ?1 AND m.commit_seq = c.commit_seq
LEFT JOIN sync_changes ch ON ch.partition = ?1 AND ch.commit_seq = c.commit_seq AND ch.tbl = ?2",
        values.sql(7)
    );
    let mut fold = WindowFold::new(q);
    if let [value] = probe {
        if merged(conn, partition, q, (var, value), &mut fold, &mut budget)? {
            return Ok(fold.finish());
        }
    }
    let mut st = conn.prepare_cached(&text).map_err(map_err)?;
    let mut page: Vec<PageRow> = Vec::new();
    // (seq, (actor, createdAtMs) when the commit row exists), once per
    // candidate rather than once per change row.
    let mut metas: Vec<(i64, Option<(String, i64)>)> = Vec::new();
    loop {
        let mut binds: Vec<&dyn ToSql> = vec![
            &partition,
            &q.table,
            &var,
            &fold.after,
            &q.through_seq,
            &batch,
        ];
        values.bind(&mut binds);
        page.clear();
        metas.clear();
        let mut rows = st.query(&*binds).map_err(map_err)?;
        while let Some(r) = rows.next().map_err(map_err)? {
            budget.step()?;
            let seq = int(r, 0)?;
            if metas.last().is_none_or(|m| m.0 != seq) {
                let meta = match (r.get_ref(1), r.get_ref(2)) {
                    (Ok(ValueRef::Null), _) | (_, Ok(ValueRef::Null)) => None,
                    _ => Some((text_at(r, 1)?.to_owned(), int(r, 2)?)),
                };
                metas.push((seq, meta));
            }
            let idx = match r.get_ref(3).map_err(map_err)? {
                ValueRef::Null => -1,
                _ => int(r, 3)?,
            };
            // A change of the table joins each candidate; only those that
            // pass the whole filter are built.
            let change = match r.get_ref(4).map_err(map_err)? {
                ValueRef::Null => None,
                _ => {
                    // TEXT holding an object; anything else is corrupt.
                    let (scopes, wanted) =
                        wanted_scopes(r, 7, &mut fold, partition, seq, || Ok(idx))?;
                    if wanted {
                        Some(PageChange {
                            row_id: text_at(r, 4)?.to_owned(),
                            op: int(r, 5)?,
                            row_version: r.get(6).map_err(map_err)?,
                            scopes_json: scopes.to_owned(),
                            payload: {
                                let payload = blob_at(r, 8)?.map(<[u8]>::to_vec);
                                budget.copy(payload.as_ref().map_or(0, Vec::len))?;
                                payload
                            },
                        })
                    } else {
                        None
                    }
                }
            };
            page.push(PageRow { seq, idx, change });
        }
        drop(rows);
        // Already in order in practice (nested loops over ordered
        // candidates and the changes index); sorting only when not.
        if !page.is_sorted_by_key(|p| (p.seq, p.idx)) {
            page.sort_by_key(|p| (p.seq, p.idx));
            metas.sort_by_key(|m| m.0);
            metas.dedup_by_key(|m| m.0);
        }
        let mut meta = metas.iter_mut();
        for row in page.drain(..) {
            if fold.is_new(row.seq) {
                // Both lists ascend by seq, and every page seq has a meta.
                let m = meta.find(|m| m.0 == row.seq).and_then(|m| m.1.take());
                if !fold.start(row.seq, m.as_ref().map(|(a, t)| (a.as_str(), *t))) {
                    return Ok(fold.finish());
                }
            }
            if let Some(c) = &row.change {
                fold.add(ChangeRef {
                    row_id: &c.row_id,
                    op: c.op,
                    row_version: c.row_version,
                    scopes_json: &c.scopes_json,
                    payload: c.payload.as_deref(),
                });
            }
        }
        if !fold.next_page() {
            return Ok(fold.finish());
        }
    }
}

/// Rows of `sync_commits` and of the table's `sync_changes` a merged window
/// may step past beyond one per candidate before it judges the log sparse
/// in the scope and hands over to the join.
const MERGE_SLACK: i64 = 32;

/// A one-value window as three walks in `commit_seq` order merged here:
/// the candidates from the change-scope index, the commits' metadata and
/// the table's changes from the cursor on. Stepping each walk to its next
/// row costs a fraction of the join's two key-index seeks per candidate.
/// A log whose commits mostly lie outside the scope would be walked in
/// vain, so once the walks have stepped past more than one row per
/// candidate (plus [`MERGE_SLACK`]) the merge stops with `false` at a
/// candidate boundary, and the join goes on from the fold's cursor.
/// `true`: the window is complete in `fold`.
fn merged(
    conn: &Connection, partition: &str, q: &WindowQuery<'_>, (var, value): (&str, &str),
    fold: &mut WindowFold<'_>, budget: &mut Budget,
) -> Result<bool> {
    let mut cands = conn
        .prepare_cached(
            "SELECT commit_seq FROM sync_change_scopes
             WHERE partition = ?1 AND tbl = ?2 AND var = ?3 AND value = ?4
               AND commit_seq > ?5 AND commit_seq <= ?6
             ORDER BY commit_seq",
        )
        .map_err(map_err)?;
    let mut metas = conn
        .prepare_cached(
            "SELECT commit_seq, actor_id, created_at_ms FROM sync_commits
             WHERE partition = ?1 AND commit_seq > ?2 AND commit_seq <= ?3
             ORDER BY commit_seq",
        )
        .map_err(map_err)?;
    let mut changes = conn
        .prepare_cached(
            "SELECT commit_seq, idx, row_id, op, row_version, scopes, payload FROM sync_changes
             WHERE partition = ?1 AND commit_seq > ?2 AND commit_seq <= ?3 AND tbl = ?4
             ORDER BY commit_seq, idx",
        )
        .map_err(map_err)?;
    let (after, through) = (fold.after, q.through_seq);
    let mut c = cands
        .query(rusqlite::params![
            partition, q.table, var, value, after, through
        ])
        .map_err(map_err)?;
    let mut m = metas
        .query(rusqlite::params![partition, after, through])
        .map_err(map_err)?;
    let mut ch = changes
        .query(rusqlite::params![partition, after, through, q.table])
        .map_err(map_err)?;
    // Each walk's current row and its seq, read once per row (column
    // reads cross into SQLite one by one).
    let mut meta_row = m.next().map_err(map_err)?;
    let mut meta_seq = None;
    let mut change_row = ch.next().map_err(map_err)?;
    let mut change_seq = None;
    let (mut candidates, mut passed) = (0i64, 0i64);
    while let Some(cr) = c.next().map_err(map_err)? {
        let seq = int(cr, 0)?;
        candidates += 1;
        // Both walks up to the candidate.
        while seq_at(meta_row, &mut meta_seq)?.is_some_and(|s| s < seq) {
            passed += 1;
            meta_row = m.next().map_err(map_err)?;
            meta_seq = None;
        }
        while seq_at(change_row, &mut change_seq)?.is_some_and(|s| s < seq) {
            passed += 1;
            change_row = ch.next().map_err(map_err)?;
            change_seq = None;
        }
        if passed > candidates + MERGE_SLACK {
            return Ok(false);
        }
        let meta = match meta_row {
            Some(r) if seq_at(meta_row, &mut meta_seq)? == Some(seq) => {
                match (
                    r.get_ref(1).map_err(map_err)?,
                    r.get_ref(2).map_err(map_err)?,
                ) {
                    (ValueRef::Null, _) | (_, ValueRef::Null) => None,
                    (actor, created) => Some((text_of(actor, 1)?, int_of(r, created, 2)?)),
                }
            }
            _ => None,
        };
        if !fold.start(seq, meta) {
            return Ok(true);
        }
        let mut any = false;
        while let Some(r) = change_row {
            if seq_at(change_row, &mut change_seq)? != Some(seq) {
                break;
            }
            any = true;
            budget.step()?;
            let (scopes, wanted) = wanted_scopes(r, 5, fold, partition, seq, || int(r, 1))?;
            if wanted {
                let payload = blob_at(r, 6)?;
                budget.copy(payload.map_or(0, <[u8]>::len))?;
                fold.add(ChangeRef {
                    row_id: text_at(r, 2)?,
                    op: int(r, 3)?,
                    row_version: r.get(4).map_err(map_err)?,
                    scopes_json: scopes,
                    payload,
                });
            }
            change_row = ch.next().map_err(map_err)?;
            change_seq = None;
        }
        if !any {
            // The join's one row of a candidate without changes.
            budget.step()?;
        }
    }
    Ok(true)
}

struct PageRow {
    seq: i64,
    idx: i64,
    /// The change, when there is one and it passed the filter.
    change: Option<PageChange>,
}

/// A change of a joined page, owned: the page may need sorting before
/// it is folded.
struct PageChange {
    row_id: String,
    op: i64,
    row_version: Option<i64>,
    scopes_json: String,
    payload: Option<Vec<u8>>,
}

/// The payload at column `i`: a BLOB, or none; any other value fails as
/// reading it as bytes does.
fn blob_at<'r>(r: &'r rusqlite::Row<'_>, i: usize) -> Result<Option<&'r [u8]>> {
    match r.get_ref(i).map_err(map_err)? {
        ValueRef::Null => Ok(None),
        ValueRef::Blob(b) => Ok(Some(b)),
        _ => r.get::<_, Vec<u8>>(i).map(|_| None).map_err(map_err),
    }
}

/// The change's scopes at column `i` and whether the window wants them:
/// TEXT holding an object the filter reads, or the change is corrupt.
fn wanted_scopes<'r>(
    r: &'r rusqlite::Row<'_>, i: usize, fold: &mut WindowFold<'_>, partition: &str, seq: i64,
    idx: impl FnOnce() -> Result<i64>,
) -> Result<(&'r str, bool)> {
    let wanted = match r.get_ref(i).map_err(map_err)? {
        ValueRef::Text(t) => std::str::from_utf8(t)
            .ok()
            .and_then(|s| fold.wants(s).map(|w| (s, w))),
        _ => None,
    };
    match wanted {
        Some(w) => Ok(w),
        None => Err(change_corrupt(partition, seq, idx()?)),
    }
}

/// The seq (column 0) of a walk's current row, read once: `cache` holds
/// it until the walk steps.
fn seq_at(row: Option<&rusqlite::Row<'_>>, cache: &mut Option<i64>) -> Result<Option<i64>> {
    match (row, *cache) {
        (None, _) => Ok(None),
        (Some(_), Some(seq)) => Ok(Some(seq)),
        (Some(r), None) => {
            let seq = int(r, 0)?;
            *cache = Some(seq);
            Ok(Some(seq))
        }
    }
}

/// [`int`] of a value already read from column `i` of `r`.
fn int_of(r: &rusqlite::Row<'_>, v: ValueRef<'_>, i: usize) -> Result<i64> {
    match v {
        ValueRef::Integer(v) => Ok(v),
        _ => r.get(i).map_err(map_err),
    }
}

/// [`text_at`] of a value already read from column `i`.
fn text_of(v: ValueRef<'_>, i: usize) -> Result<&str> {
    v.as_str()
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(i, v.data_type(), Box::new(e)))
        .map_err(map_err)
}

fn int(r: &rusqlite::Row<'_>, i: usize) -> Result<i64> {
    match r.get_ref(i).map_err(map_err)? {
        ValueRef::Integer(v) => Ok(v),
        _ => r.get(i).map_err(map_err),
    }
}

fn text_at<'r>(r: &'r rusqlite::Row<'_>, i: usize) -> Result<&'r str> {
    text_of(r.get_ref(i).map_err(map_err)?, i)
}

/// Upper bound of what a window read on this filter would deliver: the
/// index-only maximum on the probe variable (post-0.24 member).
pub fn latest_scoped_change_seq(
    conn: &Connection, partition: &str, table: &str, filter: &ScopeFilter,
) -> Result<i64> {
    let Some((var, values)) = filter.probe() else {
        return Ok(0);
    };
    if values.is_empty() {
        return Ok(0);
    }
    let values = ValueSet::new(values);
    let text = format!(
        "SELECT coalesce(max(commit_seq), 0) FROM sync_change_scopes
         WHERE partition = ?1 AND tbl = ?2 AND var = ?3 AND value IN ({})",
        values.sql(4)
    );
    let mut st = conn.prepare_cached(&text).map_err(map_err)?;
    let mut binds: Vec<&dyn ToSql> = vec![&partition, &table, &var];
    values.bind(&mut binds);
    st.query_row(&*binds, |r| r.get(0)).map_err(map_err)
}
