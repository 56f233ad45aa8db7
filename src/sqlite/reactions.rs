//! Durable reactions (`sync_reactions`, storage-layout §2.10 and §15): the
//! job queue of the host's reaction runner. Enqueue runs inside the push
//! transaction; claims and lifecycle updates are storage-level writes under
//! the write lease, so concurrent claimers are serialized and never share a
//! row. JSON columns (`payload`, `last_failure`) hold the text the host's
//! `JSON.stringify` produced.

use super::conn::map_err;
use super::sql::placeholders;
use super::storage::SqliteEngine;
use crate::core::error::Result;
use crate::core::model::reactions::*;
use crate::core::stored::{self, Form};
use crate::seam::{Call, Reactions};
use rusqlite::{params, Connection, OptionalExtension, ToSql};
use std::sync::Arc;

const FIELDS: &str = "idempotency_key, type, version, payload, source_client_id, \
source_client_commit_id, source_commit_seq, created_at_ms, max_attempts, status, attempts, \
available_at_ms, lease_owner, lease_expires_at_ms, completed_at_ms, last_failure";

const INSERT: &str =
    "INSERT INTO sync_reactions (partition, idempotency_key, type, version, payload, \
source_client_id, source_client_commit_id, source_commit_seq, created_at_ms, available_at_ms, \
status, attempts, max_attempts) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9, 'pending', 0, ?10)";

const LEASE_GUARD: &str =
    "WHERE partition = ?2 AND idempotency_key = ?3 AND status = 'leased' AND lease_owner = ?4";

const COMPLETE: &str = "UPDATE sync_reactions SET status = 'completed', completed_at_ms = ?1, \
lease_owner = NULL, lease_expires_at_ms = NULL";

const EXTEND: &str = "UPDATE sync_reactions SET lease_expires_at_ms = ?1";

const FAIL: &str =
    "UPDATE sync_reactions SET status = ?5, available_at_ms = ?1, last_failure = ?6, \
lease_owner = NULL, lease_expires_at_ms = NULL";

const RETRY: &str =
    "UPDATE sync_reactions SET status = 'pending', attempts = 0, available_at_ms = ?1, \
last_failure = NULL, lease_owner = NULL, lease_expires_at_ms = NULL, completed_at_ms = NULL \
WHERE partition = ?2 AND idempotency_key = ?3 AND status = 'dead-letter'";

/// Terminal rows old enough to prune; `?1` partition, `?2` completed
/// cutoff, `?3` dead-letter cutoff.
const PRUNABLE: &str =
    "((status = 'completed' AND completed_at_ms IS NOT NULL AND completed_at_ms < ?2) \
OR (status = 'dead-letter' AND available_at_ms < ?3))";

/// The reactions `text` (bound to `args`) answers, of `partition`.
fn reactions_of(
    conn: &Connection, text: &str, args: &[&dyn ToSql], partition: &str,
) -> Result<Vec<StoredReaction>> {
    let mut st = conn.prepare(text).map_err(map_err)?;
    let rows = st.query_map(args, reaction_from).map_err(map_err)?;
    rows.map(|r| stored::reaction(Form::Text, r.map_err(map_err)?, partition))
        .collect()
}

/// The reaction as stored; [`stored::reaction`] checks its JSON columns.
fn reaction_from(r: &rusqlite::Row<'_>) -> rusqlite::Result<StoredReaction> {
    Ok(StoredReaction {
        idempotency_key: r.get(0)?,
        kind: r.get(1)?,
        version: r.get(2)?,
        payload_json: super::rows::json_text(r, 3)?,
        source_client_id: r.get(4)?,
        source_client_commit_id: r.get(5)?,
        source_commit_seq: r.get(6)?,
        created_at_ms: r.get(7)?,
        max_attempts: r.get(8)?,
        status: r.get(9)?,
        attempts: r.get(10)?,
        available_at_ms: r.get(11)?,
        lease_owner: r.get(12)?,
        lease_expires_at_ms: r.get(13)?,
        completed_at_ms: r.get(14)?,
        last_failure_json: super::rows::json_text_opt(r, 15)?,
    })
}

/// Plain inserts: a repeated key surfaces as the engine's primary-key error.
pub fn enqueue(conn: &Connection, partition: &str, reactions: &[NewReaction]) -> Result<()> {
    let mut st = conn.prepare_cached(INSERT).map_err(map_err)?;
    for r in reactions {
        st.execute(params![
            partition,
            r.idempotency_key,
            r.kind,
            r.version,
            r.payload_json,
            r.source_client_id,
            r.source_client_commit_id,
            r.source_commit_seq,
            r.created_at_ms,
            r.max_attempts
        ])
        .map_err(map_err)?;
    }
    Ok(())
}

/// Leases up to `limit` due rows in one statement. Rows come back in the
/// engine's RETURNING order; the caller sorts them (JS `localeCompare`).
pub fn claim(conn: &Connection, partition: &str, q: &ClaimQuery) -> Result<Vec<StoredReaction>> {
    if q.types.is_empty() || q.limit <= 0 {
        return Ok(Vec::new());
    }
    let text = format!(
        "UPDATE sync_reactions SET status = 'leased', attempts = attempts + 1, \
lease_owner = ?, lease_expires_at_ms = ?, completed_at_ms = NULL \
WHERE (partition, idempotency_key) IN (\
SELECT partition, idempotency_key FROM sync_reactions \
WHERE partition = ? AND type IN ({}) \
AND ((status = 'pending' AND available_at_ms <= ?) OR (status = 'leased' AND lease_expires_at_ms <= ?)) \
ORDER BY CASE WHEN status = 'leased' THEN lease_expires_at_ms ELSE available_at_ms END, \
created_at_ms, idempotency_key LIMIT ?) RETURNING {FIELDS}",
        placeholders(q.types.len())
    );
    let mut args: Vec<&dyn ToSql> = vec![&q.lease_owner, &q.lease_expires_at_ms, &partition];
    args.extend(q.types.iter().map(|t| t as &dyn ToSql));
    args.extend([&q.now_ms as &dyn ToSql, &q.now_ms, &q.limit]);
    reactions_of(conn, &text, &args, partition)
}

pub fn complete(
    conn: &Connection, partition: &str, key: &str, owner: &str, completed_at_ms: i64,
) -> Result<bool> {
    under_lease(conn, COMPLETE, completed_at_ms, partition, key, owner)
}

pub fn extend(
    conn: &Connection, partition: &str, key: &str, owner: &str, expires_at_ms: i64,
) -> Result<bool> {
    under_lease(conn, EXTEND, expires_at_ms, partition, key, owner)
}

/// `update` (setting its one time value `at_ms`) of the reaction `key`,
/// guarded by its lease (`LEASE_GUARD`: still `owner`'s); `true` when that
/// one row changed.
fn under_lease(
    conn: &Connection, update: &str, at_ms: i64, partition: &str, key: &str, owner: &str,
) -> Result<bool> {
    conn.prepare_cached(&format!("{update} {LEASE_GUARD}"))
        .and_then(|mut st| st.execute(params![at_ms, partition, key, owner]))
        .map(changed_one)
        .map_err(map_err)
}

fn changed_one(n: usize) -> bool {
    n == 1
}

/// With `retry_at_ms`: back to `pending` at that time; without: dead-letter,
/// available at the failure's time.
pub fn fail(conn: &Connection, partition: &str, key: &str, u: &FailureUpdate) -> Result<bool> {
    let (status, available) = match u.retry_at_ms {
        Some(at) => ("pending", at),
        None => ("dead-letter", u.failure_at_ms),
    };
    conn.prepare_cached(&format!("{FAIL} {LEASE_GUARD}"))
        .and_then(|mut st| {
            st.execute(params![
                available,
                partition,
                key,
                &u.lease_owner,
                status,
                &u.failure_json
            ])
        })
        .map(changed_one)
        .map_err(map_err)
}

pub fn retry(conn: &Connection, partition: &str, key: &str, now_ms: i64) -> Result<bool> {
    conn.prepare_cached(RETRY)
        .and_then(|mut st| st.execute(params![now_ms, partition, key]))
        .map(changed_one)
        .map_err(map_err)
}

pub fn get(conn: &Connection, partition: &str, key: &str) -> Result<Option<StoredReaction>> {
    conn.prepare_cached(&format!(
        "SELECT {FIELDS} FROM sync_reactions WHERE partition = ?1 AND idempotency_key = ?2"
    ))
    .and_then(|mut st| st.query_row([partition, key], reaction_from).optional())
    .map_err(map_err)?
    .map(|r| stored::reaction(Form::Text, r, partition))
    .transpose()
}

/// Newest first. An empty filter list means no filter; `limit` is bound as
/// given (in-tree parity: SQLite reads a negative LIMIT as no limit).
pub fn list(
    conn: &Connection, partition: &str, statuses: &[String], types: &[String], limit: i64,
) -> Result<Vec<StoredReaction>> {
    let mut text = format!("SELECT {FIELDS} FROM sync_reactions WHERE partition = ?");
    let mut args: Vec<&dyn ToSql> = vec![&partition];
    if !statuses.is_empty() {
        text.push_str(&format!(
            " AND status IN ({})",
            placeholders(statuses.len())
        ));
        args.extend(statuses.iter().map(|s| s as &dyn ToSql));
    }
    if !types.is_empty() {
        text.push_str(&format!(" AND type IN ({})", placeholders(types.len())));
        args.extend(types.iter().map(|t| t as &dyn ToSql));
    }
    text.push_str(" ORDER BY created_at_ms DESC, idempotency_key DESC LIMIT ?");
    args.push(&limit);
    reactions_of(conn, &text, &args, partition)
}

/// Deletes at most `limit` aged terminal rows, oldest first, then by key.
pub fn prune(conn: &Connection, partition: &str, q: &PruneQuery) -> Result<PrunedCounts> {
    let mut counts = PrunedCounts::default();
    if q.limit <= 0 {
        return Ok(counts);
    }
    let mut st = conn
        .prepare_cached(&format!(
            "DELETE FROM sync_reactions WHERE partition = ?1 AND idempotency_key IN (\
SELECT idempotency_key FROM sync_reactions WHERE partition = ?1 AND {PRUNABLE} \
ORDER BY CASE WHEN status = 'completed' THEN completed_at_ms ELSE available_at_ms END, idempotency_key \
LIMIT ?4) AND {PRUNABLE} RETURNING status"
        ))
        .map_err(map_err)?;
    let mut rows = st
        .query(params![
            partition,
            q.completed_before_ms,
            q.dead_letter_before_ms,
            q.limit
        ])
        .map_err(map_err)?;
    while let Some(r) = rows.next().map_err(map_err)? {
        let status: String = r.get(0).map_err(map_err)?;
        if status == "completed" {
            counts.completed += 1;
        } else {
            counts.dead_letter += 1;
        }
    }
    Ok(counts)
}

impl Reactions for Arc<SqliteEngine> {
    fn claim_reactions(
        &self, id: u32, partition: String, q: ClaimQuery,
    ) -> Call<Vec<StoredReaction>> {
        self.with_lease(id, |h| claim(h.conn, &partition, &q))
            .into()
    }

    fn complete_reaction(
        &self, id: u32, partition: String, key: String, owner: String, completed_at_ms: i64,
    ) -> Call<bool> {
        self.with_lease(id, |h| {
            complete(h.conn, &partition, &key, &owner, completed_at_ms)
        })
        .into()
    }

    fn extend_reaction_lease(
        &self, id: u32, partition: String, key: String, owner: String, expires_at_ms: i64,
    ) -> Call<bool> {
        self.with_lease(id, |h| {
            extend(h.conn, &partition, &key, &owner, expires_at_ms)
        })
        .into()
    }

    fn fail_reaction(
        &self, id: u32, partition: String, key: String, u: FailureUpdate,
    ) -> Call<bool> {
        self.with_lease(id, |h| fail(h.conn, &partition, &key, &u))
            .into()
    }

    fn retry_reaction(&self, id: u32, partition: String, key: String, now_ms: i64) -> Call<bool> {
        self.with_lease(id, |h| retry(h.conn, &partition, &key, now_ms))
            .into()
    }

    fn get_reaction(&self, partition: String, key: String) -> Call<Option<StoredReaction>> {
        self.read(|c| get(c, &partition, &key)).into()
    }

    fn list_reactions(
        &self, partition: String, statuses: Vec<String>, types: Vec<String>, limit: i64,
    ) -> Call<Vec<StoredReaction>> {
        self.read(|c| list(c, &partition, &statuses, &types, limit))
            .into()
    }

    fn prune_reactions(&self, id: u32, partition: String, q: PruneQuery) -> Call<PrunedCounts> {
        self.with_lease(id, |h| prune(h.conn, &partition, &q))
            .into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> Connection {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(super::super::sql::meta_ddl()).unwrap();
        c
    }

    fn reaction(key: &str, kind: &str, created: i64) -> NewReaction {
        NewReaction {
            idempotency_key: key.into(),
            kind: kind.into(),
            version: 1,
            payload_json: r#"{"a":1}"#.into(),
            source_client_id: "c1".into(),
            source_client_commit_id: "cc1".into(),
            source_commit_seq: 1,
            created_at_ms: created,
            max_attempts: 3,
        }
    }

    fn claim_all(c: &Connection, owner: &str, now: i64, limit: i64) -> Vec<String> {
        let types = vec!["t".to_string()];
        let mut out: Vec<String> = claim(
            c,
            "p",
            &ClaimQuery {
                lease_owner: owner.to_owned(),
                types,
                now_ms: now,
                lease_expires_at_ms: now + 100,
                limit,
            },
        )
        .unwrap()
        .into_iter()
        .map(|r| r.idempotency_key)
        .collect();
        out.sort();
        out
    }

    #[test]
    fn claim_orders_due_rows_and_skips_future_ones() {
        let c = db();
        enqueue(
            &c,
            "p",
            &[
                reaction("b", "t", 10),
                reaction("a", "t", 10),
                reaction("z", "t", 500),
            ],
        )
        .unwrap();
        assert_eq!(claim_all(&c, "w", 100, 1), vec!["a"]);
        assert_eq!(claim_all(&c, "w", 100, 10), vec!["b"]);
        assert!(claim_all(&c, "w", 100, 10).is_empty());
        // the lease of "a" expires at 200
        assert_eq!(claim_all(&c, "w2", 200, 10), vec!["a", "b"]);
        let a = get(&c, "p", "a").unwrap().unwrap();
        assert_eq!((a.attempts, a.lease_owner.as_deref()), (2, Some("w2")));
        assert!(!complete(&c, "p", "a", "w", 1).unwrap());
        assert!(complete(&c, "p", "a", "w2", 1).unwrap());
    }

    #[test]
    fn duplicate_key_is_a_primary_key_error() {
        let c = db();
        enqueue(&c, "p", &[reaction("a", "t", 1)]).unwrap();
        match enqueue(&c, "p", &[reaction("a", "t", 2)]) {
            Err(crate::core::error::Error::Engine { code, .. }) => {
                assert_eq!(code, "SQLITE_CONSTRAINT_PRIMARYKEY")
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
