//! Commit windows on PostgreSQL (storage-layout §7.4): the page query; the
//! folding and stop rule are `crate::core::window`.
//!
//! Candidates are read per probe value (a LATERAL index range per value,
//! each ordered by `commit_seq` and limited to the batch), then merged: a
//! plain `value = ANY(…)` cannot use the index order, so PostgreSQL would
//! read and sort every entry after `afterSeq` before the LIMIT.
//!
//! The metadata and the changes are read per candidate (LATERAL, kept
//! from being flattened by `LIMIT 1` / `OFFSET 0`), so each is a primary
//! key probe whatever the statistics say: as plain joins, tables not yet
//! analyzed (every table right after it fills) got a plan that rescanned
//! the partition's commits for every candidate, 8 ms a page instead of 1.
//!
//! Scopes are read in either stored form (`crate::core::stored`): the jsonb
//! object, or the jsonb string Bun.SQL hosts wrote before 0.26.4.

use super::error::map_err;
use super::stmt::next_row;
use crate::core::error::Result;
use crate::core::records::Records;
use crate::core::scope::ScopeFilter;
use crate::core::stored::{self, Form, Shape};
use crate::core::window::{change_corrupt, ChangeRef, WindowFold, WindowQuery};
use sqlx::{PgConnection, Row};

/// A page's candidate commits (`c.commit_seq`, ordered, at most `$6`) for
/// the probe values `$7`. Several values are merged (DISTINCT, sorted); one
/// value's entries are distinct and in `commit_seq` order in the index, so
/// its page is read as they come, with no sort.
macro_rules! page {
    ($candidates:expr) => {
        concat!(
            "SELECT c.commit_seq, m.actor_id, m.created_at_ms, ch.row_id, ch.op, ch.row_version, ch.scopes::text, ch.payload, ch.idx
FROM (",
            $candidates,
            ") c
LEFT JOIN LATERAL (SELECT m.actor_id, m.created_at_ms FROM sync_commits m
      WHERE m.partition = $1 AND m.commit_seq = c.commit_seq LIMIT 1) m ON true
LEFT JOIN LATERAL (SELECT ch.idx, ch.row_id, ch.op, ch.row_version, ch.scopes, ch.payload FROM sync_changes ch
      WHERE ch.partition = $1 AND ch.commit_seq = c.commit_seq AND ch.tbl = $2 OFFSET 0) ch ON true
ORDER BY c.commit_seq, ch.idx"
        )
    };
}
const PAGE_ANY: &str = page!(
    "SELECT DISTINCT x.commit_seq FROM unnest($7::text[]) AS v(value)
      CROSS JOIN LATERAL (SELECT s.commit_seq FROM sync_change_scopes s
        WHERE s.partition = $1 AND s.tbl = $2 AND s.var = $3 AND s.value = v.value
          AND s.commit_seq > $4 AND s.commit_seq <= $5
        ORDER BY s.commit_seq LIMIT $6) x
      ORDER BY x.commit_seq LIMIT $6"
);
const PAGE_ONE: &str = page!(
    "SELECT s.commit_seq FROM sync_change_scopes s
        WHERE s.partition = $1 AND s.tbl = $2 AND s.var = $3 AND s.value = ($7::text[])[1]
          AND s.commit_seq > $4 AND s.commit_seq <= $5
        ORDER BY s.value, s.commit_seq LIMIT $6"
);

pub async fn read_commit_window(
    c: &mut PgConnection, partition: &str, q: &WindowQuery<'_>,
) -> Result<Records> {
    let Some((var, values)) = q.probe() else {
        return Ok(Records::none());
    };
    let mut fold = WindowFold::new(q);
    loop {
        let page = if values.len() == 1 {
            PAGE_ONE
        } else {
            PAGE_ANY
        };
        let mut rows = crate::postgres::stmt::query(page)
            .bind(partition)
            .bind(q.table)
            .bind(var)
            .bind(fold.after)
            .bind(q.through_seq)
            .bind(q.batch())
            .bind(values)
            .fetch(&mut *c);
        while let Some(r) = next_row(&mut rows).await? {
            let seq: i64 = r.try_get(0).map_err(map_err)?;
            if fold.is_new(seq) {
                let actor: Option<&str> = r.try_get(1).map_err(map_err)?;
                let created: Option<i64> = r.try_get(2).map_err(map_err)?;
                if !fold.start(seq, actor.zip(created)) {
                    return Ok(fold.finish());
                }
            }
            let row_id: Option<&str> = r.try_get(3).map_err(map_err)?;
            let Some(row_id) = row_id else { continue };
            let text: String = r.try_get(6).map_err(map_err)?;
            let wanted = stored::read(Form::Jsonb, text, Shape::Object)
                .and_then(|s| fold.wants(&s).map(|w| (s, w)));
            let scopes_json = match wanted {
                Some((s, true)) => s,
                Some((_, false)) => continue,
                None => {
                    let idx: i32 = r.try_get(8).map_err(map_err)?;
                    return Err(change_corrupt(partition, seq, i64::from(idx)));
                }
            };
            fold.add(ChangeRef {
                row_id,
                op: i64::from(r.try_get::<i16, _>(4).map_err(map_err)?),
                row_version: r.try_get(5).map_err(map_err)?,
                scopes_json: &scopes_json,
                payload: r.try_get(7).map_err(map_err)?,
            });
        }
        if !fold.next_page() {
            return Ok(fold.finish());
        }
    }
}

/// The index-only upper bound on the probe variable (post-0.24 member).
pub async fn latest_scoped_change_seq(
    c: &mut PgConnection, partition: &str, table: &str, filter: &ScopeFilter,
) -> Result<i64> {
    let Some((var, values)) = filter.probe() else {
        return Ok(0);
    };
    if values.is_empty() {
        return Ok(0);
    }
    crate::postgres::stmt::query_scalar(
        "SELECT coalesce(max(commit_seq), 0)::bigint FROM sync_change_scopes
         WHERE partition = $1 AND tbl = $2 AND var = $3 AND value = ANY($4)",
    )
    .bind(partition)
    .bind(table)
    .bind(var)
    .bind(values)
    .fetch_one(&mut *c)
    .await
    .map_err(map_err)
}
