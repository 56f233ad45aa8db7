//! Admin console and blob reads (contract S40–S45, storage-layout §17):
//! commit metadata, scope activity, row scopes without the payload, and
//! the blob reference index. All read committed state; multi-statement
//! reads share one snapshot.

use super::conn::map_err;
use super::rows;
use super::storage::SqliteEngine;
use crate::core::error::Result;
use crate::core::model::admin::*;
use crate::core::schema::Table;
use crate::core::stored::{self, Form, Shape};
use crate::seam::{Admin, Call};
use rusqlite::{params, Connection, OptionalExtension};
use std::sync::Arc;

const COMMIT_FIELDS: &str =
    "c.commit_seq, c.client_id, c.client_commit_id, c.actor_id, c.created_at_ms";

/// Newest first, `commit_seq > ?2`, `LIMIT ?3` bound as given (in-tree
/// parity).
const COMMITS: &str = "FROM sync_commits c WHERE c.partition = ?1 AND c.commit_seq > ?2";

const COMMITS_TOUCHING: &str = "AND EXISTS (SELECT 1 FROM sync_changes ch \
WHERE ch.partition = c.partition AND ch.commit_seq = c.commit_seq AND ch.tbl = ?4)";

const CHANGES_PER_TABLE: &str = "SELECT tbl, count(*) FROM sync_changes \
WHERE partition = ?1 AND commit_seq = ?2 GROUP BY tbl ORDER BY tbl";

/// Distinct (commit, table) pairs of one scope value from the change-scope
/// index, newest first and limited before commits missing their metadata
/// are dropped (as in-tree), each with its change count in that table.
const SCOPE_ACTIVITY: &str = "SELECT s.commit_seq, s.tbl, c.created_at_ms, c.actor_id, \
(SELECT count(*) FROM sync_changes ch WHERE ch.partition = s.partition AND ch.commit_seq = s.commit_seq AND ch.tbl = s.tbl) \
FROM (SELECT DISTINCT partition, commit_seq, tbl FROM sync_change_scopes \
WHERE partition = ?1 AND var = ?2 AND value = ?3 ORDER BY commit_seq DESC, tbl LIMIT ?4) s \
JOIN sync_commits c ON c.partition = s.partition AND c.commit_seq = s.commit_seq \
ORDER BY s.commit_seq DESC, s.tbl";

/// Blob references in insertion order (the by-blob index order).
const REFS_BY_BLOB: &str =
    "SELECT tbl, row_id FROM sync_blob_refs WHERE partition = ?1 AND blob_id = ?2 ORDER BY rowid";

const REFERENCED_BLOBS: &str =
    "SELECT DISTINCT blob_id FROM sync_blob_refs WHERE partition = ?1 ORDER BY blob_id";

pub fn list_commit_metadata(
    conn: &Connection, partition: &str, after_seq: i64, limit: i64, table: Option<&str>,
) -> Result<Vec<CommitMetadata>> {
    let base = |r: &rusqlite::Row<'_>| {
        Ok(CommitMetadata {
            commit_seq: r.get(0)?,
            client_id: r.get(1)?,
            client_commit_id: r.get(2)?,
            actor_id: r.get(3)?,
            created_at_ms: r.get(4)?,
            change_count: 0,
            tables: Vec::new(),
        })
    };
    let order = "ORDER BY c.commit_seq DESC LIMIT ?3";
    let mut commits: Vec<CommitMetadata> = match table {
        Some(t) => {
            let mut st = conn
                .prepare_cached(&format!(
                    "SELECT {COMMIT_FIELDS} {COMMITS} {COMMITS_TOUCHING} {order}"
                ))
                .map_err(map_err)?;
            let rows = st
                .query_map(params![partition, after_seq, limit, t], base)
                .map_err(map_err)?;
            rows.collect::<rusqlite::Result<_>>().map_err(map_err)?
        }
        None => {
            let mut st = conn
                .prepare_cached(&format!("SELECT {COMMIT_FIELDS} {COMMITS} {order}"))
                .map_err(map_err)?;
            let rows = st
                .query_map(params![partition, after_seq, limit], base)
                .map_err(map_err)?;
            rows.collect::<rusqlite::Result<_>>().map_err(map_err)?
        }
    };
    let mut st = conn.prepare_cached(CHANGES_PER_TABLE).map_err(map_err)?;
    for c in &mut commits {
        let mut rows = st
            .query(params![partition, c.commit_seq])
            .map_err(map_err)?;
        while let Some(r) = rows.next().map_err(map_err)? {
            c.tables.push(r.get(0).map_err(map_err)?);
            c.change_count += r.get::<_, i64>(1).map_err(map_err)?;
        }
    }
    Ok(commits)
}

pub fn scope_activity(
    conn: &Connection, partition: &str, variable: &str, value: &str, limit: i64,
) -> Result<Vec<ScopeActivity>> {
    let mut st = conn.prepare_cached(SCOPE_ACTIVITY).map_err(map_err)?;
    let rows = st
        .query_map(params![partition, variable, value, limit], |r| {
            Ok(ScopeActivity {
                commit_seq: r.get(0)?,
                table: r.get(1)?,
                created_at_ms: r.get(2)?,
                actor_id: r.get(3)?,
                change_count: r.get(4)?,
            })
        })
        .map_err(map_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(map_err)
}

/// `(serverVersion, scopes JSON)` without reading the payload.
pub fn row_scopes(
    conn: &Connection, table: &Table, partition: &str, row_id: &str,
) -> Result<Option<(i64, String)>> {
    let found: Option<(i64, String)> = conn
        .prepare_cached(&format!(
            r#"SELECT "_sync_server_version", "_sync_scopes" FROM {} WHERE "_sync_partition" = ?1 AND "_sync_row_id" = ?2"#,
            table.quoted
        ))
        .and_then(|mut st| {
            st.query_row(params![partition, row_id], |r| {
                Ok((r.get(0)?, rows::json_text(r, 1)?))
            })
            .optional()
        })
        .map_err(map_err)?;
    found
        .map(|(v, s)| Ok((v, checked_scopes(s, &table.name, partition, row_id)?)))
        .transpose()
}

fn checked_scopes(text: String, table: &str, partition: &str, row_id: &str) -> Result<String> {
    stored::read(Form::Text, text, Shape::Object)
        .ok_or_else(|| stored::row_corrupt(table, partition, row_id))
}

pub fn blob_refs(
    conn: &Connection, partition: &str, blob_id: &str,
) -> Result<Vec<(String, String)>> {
    let mut st = conn.prepare_cached(REFS_BY_BLOB).map_err(map_err)?;
    let rows = st
        .query_map(params![partition, blob_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(map_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(map_err)
}

pub fn referenced_blob_ids(conn: &Connection, partition: &str) -> Result<Vec<String>> {
    let mut st = conn.prepare_cached(REFERENCED_BLOBS).map_err(map_err)?;
    let rows = st.query_map([partition], |r| r.get(0)).map_err(map_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(map_err)
}

impl SqliteEngine {
    pub fn list_commit_metadata(
        &self, partition: &str, after_seq: i64, limit: i64, table: Option<&str>,
    ) -> Result<Vec<CommitMetadata>> {
        self.read_snapshot(|c| list_commit_metadata(c, partition, after_seq, limit, table))
    }
}

impl Admin for Arc<SqliteEngine> {
    fn list_commit_metadata(
        &self, p: String, after_seq: i64, limit: i64, table: Option<String>,
    ) -> Call<Vec<CommitMetadata>> {
        SqliteEngine::list_commit_metadata(self, &p, after_seq, limit, table.as_deref()).into()
    }

    fn scope_activity(
        &self, partition: String, variable: String, value: String, limit: i64,
    ) -> Call<Vec<ScopeActivity>> {
        self.read(|c| scope_activity(c, &partition, &variable, &value, limit))
            .into()
    }

    /// Unknown tables fail with the unknown-table error.
    fn get_row_scopes(
        &self, partition: String, table: String, row_id: String,
    ) -> Call<Option<(i64, String)>> {
        self.table_sql(&table, |t, _| {
            self.read(|c| row_scopes(c, t, &partition, &row_id))
        })
        .into()
    }

    /// Live rows referencing `blob_id`, with their stored scopes; references
    /// to tables outside the loaded schema or to missing rows are skipped.
    fn list_rows_referencing_blob(
        &self, partition: String, blob_id: String,
    ) -> Call<Vec<BlobReferencingRow>> {
        let loaded = self.loaded();
        self.read_snapshot(|c| {
            let mut out = Vec::new();
            for (table, row_id) in blob_refs(c, &partition, &blob_id)? {
                let Ok(i) = loaded.schema.index_of(&table) else {
                    continue;
                };
                if let Some(text) = rows::get_row_scopes(c, &loaded.sql[i], &partition, &row_id)? {
                    let scopes_json = checked_scopes(text, &table, &partition, &row_id)?;
                    out.push(BlobReferencingRow {
                        table,
                        row_id,
                        scopes_json,
                    });
                }
            }
            Ok(out)
        })
        .into()
    }

    fn list_referenced_blob_ids(&self, partition: String) -> Call<Vec<String>> {
        self.read(|c| referenced_blob_ids(c, &partition)).into()
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

    fn commit(c: &Connection, seq: i64, changes: &[(&str, &str)]) {
        c.execute(
            "INSERT INTO sync_commits VALUES ('p', ?1, 'cl', ?2, 'actor', ?3, 1)",
            params![seq, format!("cc{seq}"), seq * 10],
        )
        .unwrap();
        for (i, (tbl, scope)) in changes.iter().enumerate() {
            c.execute(
                "INSERT INTO sync_changes VALUES ('p', ?1, ?2, ?3, 'r', 1, 1, '{}', NULL)",
                params![seq, i as i64, tbl],
            )
            .unwrap();
            c.execute(
                "INSERT OR IGNORE INTO sync_change_scopes VALUES ('p', ?1, 'v', ?2, ?3)",
                params![tbl, scope, seq],
            )
            .unwrap();
        }
    }

    #[test]
    fn commit_metadata_newest_first_with_table_filter() {
        let c = db();
        commit(&c, 1, &[("b", "x"), ("a", "x"), ("b", "x")]);
        commit(&c, 2, &[("a", "y")]);
        commit(&c, 3, &[]);
        let all = list_commit_metadata(&c, "p", 0, 10, None).unwrap();
        assert_eq!(
            all.iter().map(|m| m.commit_seq).collect::<Vec<_>>(),
            vec![3, 2, 1]
        );
        assert_eq!(all[2].change_count, 3);
        assert_eq!(all[2].tables, vec!["a", "b"]);
        assert_eq!(all[0].change_count, 0);
        let b = list_commit_metadata(&c, "p", 0, 10, Some("b")).unwrap();
        assert_eq!(b.len(), 1);
        assert_eq!(list_commit_metadata(&c, "p", 1, 10, None).unwrap().len(), 2);
        assert_eq!(list_commit_metadata(&c, "p", 0, 1, None).unwrap().len(), 1);
    }

    #[test]
    fn scope_activity_counts_per_table() {
        let c = db();
        commit(&c, 1, &[("b", "x"), ("a", "x"), ("b", "x")]);
        commit(&c, 2, &[("a", "y")]);
        let acts = scope_activity(&c, "p", "v", "x", 10).unwrap();
        assert_eq!(
            acts.iter()
                .map(|a| (a.commit_seq, a.table.as_str(), a.change_count))
                .collect::<Vec<_>>(),
            vec![(1, "a", 1), (1, "b", 2)]
        );
        assert_eq!(acts[0].created_at_ms, 10);
    }
}
