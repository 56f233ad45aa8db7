//! The `Transaction` area on SQLite: the members of an open push
//! transaction, each under the lease that names it (`with_tx` checks the
//! lease and its partition). A push's prefetch answers its point reads.

use super::checkpoints;
use super::committed::NOW_STEPS;
use super::log;
use super::meta;
use super::reactions;
use super::rows;
use super::storage::SqliteEngine;
use super::writer::Held;
use crate::core::error::{Error, Result};
use crate::core::model::reactions::NewReaction;
use crate::core::model::*;
use crate::core::query::{Request, Value};
use crate::core::records::Records;
use crate::core::scope::ScopeFilter;
use crate::seam::{blocking, Call, Prefetch, Transaction};
use std::sync::Arc;

impl Transaction for Arc<SqliteEngine> {
    fn tx_get_row(&self, id: u32, table: String, row_id: String) -> Call<Option<StoredRow>> {
        self.table_sql(&table, |_, sql| {
            self.with_tx(id, |h, p| rows::get_row(h.conn, sql, p, &row_id))
        })
        .into()
    }

    fn tx_get_tombstone_seq(&self, id: u32, table: String, row_id: String) -> Call<Option<i64>> {
        self.with_tx(id, |h, p| {
            rows::get_tombstone_seq(h.conn, p, &table, &row_id)
        })
        .into()
    }

    fn tx_clear_tombstone(&self, id: u32, table: String, row_id: String) -> Call<()> {
        self.with_tx(id, |h, p| rows::clear_tombstone(h.conn, p, &table, &row_id))
            .into()
    }

    fn tx_get_push_result(
        &self, id: u32, client_id: String, commit_id: String,
    ) -> Call<Option<String>> {
        self.with_tx(id, |h, p| {
            meta::get_push_result(h.conn, p, &client_id, &commit_id)
        })
        .into()
    }

    fn tx_scan_rows(
        &self, id: u32, table: String, filter: ScopeFilter, after_row_id: String, limit: i64,
    ) -> Call<Records> {
        self.table_sql(&table, |t, sql| {
            self.with_tx(id, |h, p| {
                rows::scan_rows(h.conn, t, sql, p, &filter, &after_row_id, limit)
            })
        })
        .into()
    }

    fn tx_scan_rows_by_index(
        &self, lease: u32, table: String, index: String, values: Option<Vec<Value>>,
        after_row_id: String, limit: f64,
    ) -> Call<Records> {
        SqliteEngine::tx_scan_rows_by_index(
            self,
            lease,
            &table,
            &index,
            values.as_deref(),
            &after_row_id,
            limit,
        )
        .into()
    }

    fn tx_query_authoritative(
        &self, lease: u32, request: Request, params: Vec<Value>, declared: Vec<String>,
    ) -> Call<QueryOutput> {
        // As the storage-level form: on this thread within NOW_STEPS, else
        // on the transaction's connection from a worker (the host awaits
        // the call before its next one on this transaction).
        if let Some(r) =
            self.try_tx_query_authoritative_now(lease, &request, &params, &declared, NOW_STEPS)
        {
            return Call::Now(r);
        }
        let e = self.clone();
        blocking(move || {
            SqliteEngine::tx_query_authoritative(&e, lease, &request, &params, &declared)
        })
    }

    fn tx_lock_partition_for_push(&self, id: u32) -> Call<()> {
        self.with_tx(id, |mut h, _| h.open_savepoint()).into()
    }

    fn tx_commit_rejected_push_result(
        &self, lease: u32, client_id: String, commit_id: String, result_json: String,
    ) -> Call<()> {
        SqliteEngine::tx_commit_rejected_push_result(
            self,
            lease,
            &client_id,
            &commit_id,
            &result_json,
        )
        .into()
    }

    fn tx_upsert_row(
        &self, id: u32, table: String, row: StoredRow, op_index: Option<u32>,
    ) -> Call<()> {
        self.table_sql(&table, |t, sql| {
            self.with_tx(id, |h, p| {
                rows::upsert_row(h.conn, t, sql, p, &row, op_index)
            })
        })
        .into()
    }

    fn tx_delete_row(&self, id: u32, table: String, row_id: String) -> Call<()> {
        self.table_sql(&table, |t, sql| {
            self.with_tx(id, |h, p| rows::delete_row(h.conn, t, sql, p, &row_id))
        })
        .into()
    }

    fn tx_append_commit(&self, id: u32, commit: NewCommit) -> Call<i64> {
        let version = self.writer_version();
        self.with_tx(id, |h, p| log::append_commit(h.conn, p, &commit, version))
            .into()
    }

    fn tx_put_push_result(
        &self, id: u32, client_id: String, commit_id: String, json: String,
    ) -> Call<()> {
        self.with_tx(id, |h, p| {
            meta::put_push_result(h.conn, p, &client_id, &commit_id, &json)
        })
        .into()
    }

    fn tx_set_blob_refs(
        &self, id: u32, table: String, row_id: String, blob_ids: Vec<String>,
    ) -> Call<()> {
        self.with_tx(id, |h, p| {
            rows::set_blob_refs(h.conn, p, &table, &row_id, &blob_ids)
        })
        .into()
    }

    fn tx_read_serve_gate(&self, id: u32, running: i64) -> Call<ServeGate> {
        self.with_tx(id, |h, p| meta::read_serve_gate(h.conn, p, running))
            .into()
    }

    /// Transaction form: the CAS commits with the transaction's writes.
    fn tx_advance_checkpoint(&self, id: u32, name: String, g: CheckpointProgress) -> Call<bool> {
        self.with_tx(id, |h, p| checkpoints::advance(h.conn, p, &name, &g))
            .into()
    }

    fn tx_enqueue_reactions(&self, id: u32, reactions: Vec<NewReaction>) -> Call<()> {
        self.with_tx(id, |h, p| reactions::enqueue(h.conn, p, &reactions))
            .into()
    }

    fn tx_prefetch_rows(&self, lease: u32, table: String, row_ids: Vec<String>) -> Call<Prefetch> {
        let ids: Vec<&str> = row_ids.iter().map(String::as_str).collect();
        // The write lock is held: nothing else changes these rows.
        SqliteEngine::tx_prefetch_rows(self, lease, &table, &ids)
            .map(|rows| Prefetch { rows, stable: true })
            .into()
    }
}

/// Up to this many row ids, a prefetch finds repeated ones by a scan.
const FEW_ROWS: usize = 16;

impl SqliteEngine {
    #[track_caller]
    pub(super) fn with_tx<T>(
        &self, id: u32, f: impl FnOnce(Held<'_>, &str) -> Result<T>,
    ) -> Result<T> {
        self.with_lease(id, |h| {
            let partition = h.partition()?;
            f(h, partition)
        })
    }

    /// Discards staged candidate writes, records the rejection (first
    /// writer wins) and commits; the lease ends either way.
    pub fn tx_commit_rejected_push_result(
        &self, id: u32, client_id: &str, commit_id: &str, json: &str,
    ) -> Result<()> {
        let staged = self.with_tx(id, |mut h, p| {
            h.rollback_savepoint()?;
            meta::put_push_result(h.conn, p, client_id, commit_id, json)
        });
        match staged {
            Ok(()) => self.unlock(id, true),
            Err(e) => {
                // Without its savepoint the transaction stays open and usable,
                // as in-tree; any other failure ends it.
                if !matches!(
                    &e,
                    Error::Plain {
                        code: "ERR_SYNCULAR_NO_SAVEPOINT",
                        ..
                    }
                ) {
                    self.unlock(id, false)?;
                }
                Err(e)
            }
        }
    }

    /// Reads the row and tombstone of each distinct id in one call, so the
    /// JS layer can answer the push's `getRow` / `getTombstoneSeq` calls
    /// without crossing into native code once per row. The write lease
    /// keeps every answer current until this transaction writes.
    pub fn tx_prefetch_rows(
        &self, id: u32, table: &str, row_ids: &[&str],
    ) -> Result<Vec<Prefetched>> {
        self.table_sql(table, |_, sql| {
            self.with_tx(id, |h, p| {
                let mut out: Vec<Prefetched> = Vec::with_capacity(row_ids.len());
                // A push names a few rows: those are told apart by a scan
                // of what is read so far, not a hash set allocated per call.
                let mut seen = (row_ids.len() > FEW_ROWS)
                    .then(|| std::collections::HashSet::with_capacity(row_ids.len()));
                for &row_id in row_ids {
                    let repeated = match seen.as_mut() {
                        Some(seen) => !seen.insert(row_id),
                        None => out.iter().any(|p| p.row_id == row_id),
                    };
                    if repeated {
                        continue;
                    }
                    let row = rows::get_row(h.conn, sql, p, row_id)?;
                    // Hosts read the tombstone only of a row that is absent.
                    let tombstone_seq = match row {
                        Some(_) => Tomb::Unread,
                        None => Tomb::Read(rows::get_tombstone_seq(h.conn, p, table, row_id)?),
                    };
                    out.push(Prefetched {
                        row_id: row_id.to_owned(),
                        row,
                        tombstone_seq,
                    });
                }
                Ok(out)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::codec::{encode_row, Value};
    use crate::core::schema::Schema;
    use crate::seam::Transaction;
    use crate::sqlite::conn::{Config, Location};
    use std::sync::Arc;

    const BENCH_SCHEMA: &str = r#"{"version":1,"tables":[{"name":"tasks","columns":[{"name":"id","type":"string","nullable":false},{"name":"project_id","type":"string","nullable":false},{"name":"title","type":"string","nullable":true},{"name":"n","type":"integer","nullable":true}],"primaryKeyIndex":0,"materialize":true,"indexes":[]}]}"#;

    fn engine() -> Arc<SqliteEngine> {
        let e = Arc::new(SqliteEngine::new(Config::for_tests(Location::Memory)));
        let id = e.try_lock(None).unwrap().unwrap();
        e.ensure_schema(id, Schema::parse(BENCH_SCHEMA).unwrap(), &[], 0)
            .unwrap();
        e.unlock(id, true).unwrap();
        e
    }

    fn row(id: &str) -> StoredRow {
        let schema = Schema::parse(BENCH_SCHEMA).unwrap();
        let defs = &schema.table("tasks").unwrap().defs;
        let payload = encode_row(
            defs,
            &[
                Value::Text(id),
                Value::Text("p1"),
                Value::Null,
                Value::Integer(1),
            ],
        )
        .unwrap();
        StoredRow {
            row_id: id.into(),
            server_version: 1,
            scopes_json: r#"{"project_id":"p1"}"#.into(),
            payload,
            column_versions: None,
        }
    }

    fn commit(changes: Vec<Change>) -> NewCommit {
        NewCommit {
            client_id: "c".into(),
            client_commit_id: format!("cc-{}", changes.len()),
            actor_id: "a".into(),
            created_at_ms: 1,
            changes,
        }
    }

    #[test]
    fn prefetch_reads_rows_and_the_tombstones_of_absent_rows() {
        let e = engine();
        let id = e.try_lock(Some("p")).unwrap().unwrap();
        e.tx_upsert_row(id, "tasks".into(), row("a"), Some(0))
            .wait()
            .unwrap();
        let deleted = e
            .tx_append_commit(
                id,
                commit(vec![Change {
                    table: "tasks".into(),
                    row_id: "b".into(),
                    op: ChangeOp::Delete,
                    row_version: None,
                    scopes_json: r#"{"project_id":"p1"}"#.into(),
                    payload: None,
                }]),
            )
            .wait()
            .unwrap();
        e.unlock(id, true).unwrap();

        let id = e.try_lock(Some("p")).unwrap().unwrap();
        let got = SqliteEngine::tx_prefetch_rows(&e, id, "tasks", &["a", "b", "c", "a"]).unwrap();
        assert_eq!(got.len(), 3, "duplicates are read once");
        assert_eq!(got[0].row, Some(row("a")));
        assert_eq!(got[0].tombstone_seq, Tomb::Unread);
        assert_eq!(
            (got[1].row.clone(), got[1].tombstone_seq),
            (None, Tomb::Read(Some(deleted)))
        );
        assert_eq!(
            (got[2].row.clone(), got[2].tombstone_seq),
            (None, Tomb::Read(None))
        );
        // Past FEW_ROWS ids, repeats are found by a set: the same answer.
        let many: Vec<String> = (0..40).map(|i| format!("r{}", i % 25)).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let got = SqliteEngine::tx_prefetch_rows(&e, id, "tasks", &many).unwrap();
        let ids: Vec<&str> = got.iter().map(|p| p.row_id.as_str()).collect();
        assert_eq!(ids, many[..25], "each id once, in first-named order");
        assert!(SqliteEngine::tx_prefetch_rows(&e, id, "nope", &["a"]).is_err());
        e.unlock(id, false).unwrap();
        assert!(
            SqliteEngine::tx_prefetch_rows(&e, id, "tasks", &["a"]).is_err(),
            "needs the lease"
        );
    }
}
