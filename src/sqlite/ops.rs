//! The storage members on SQLite, one method each. Reads take a reader
//! connection; writes take the numbered write lease the caller holds.

use super::log;
use super::meta;
use super::rows;
use super::schema_sync;
use super::storage::SqliteEngine;
use super::window;
use super::writer::Held;
use crate::core::error::{Error, Result};
use crate::core::model::*;
use crate::core::schema::Schema;
use crate::core::scope::ScopeFilter;

impl SqliteEngine {
    pub(super) fn table_sql<T>(
        &self, table: &str,
        f: impl FnOnce(&crate::core::schema::Table, &rows::TableSql) -> Result<T>,
    ) -> Result<T> {
        let loaded = self.loaded();
        let i = loaded.schema.index_of(table)?;
        f(&loaded.schema.tables[i], &loaded.sql[i])
    }

    // ---- schema -------------------------------------------------------------

    /// Runs under lease `id`; the caller commits the lease on success.
    pub fn ensure_schema(
        &self, id: u32, schema: Schema, declarations: &[CheckpointDeclaration], now_ms: i64,
    ) -> Result<bool> {
        let outcome = self.with_lease(id, |h| {
            schema_sync::ensure_schema(h.conn, &schema, declarations, now_ms)
        })?;
        // A repair or migration may have written a lot: its COMMIT runs
        // here, off the calling thread (see `commit_early`).
        if !matches!(outcome, schema_sync::Outcome::Unchanged) {
            self.commit_early(id)?;
        }
        self.set_loaded(schema);
        Ok(matches!(outcome, schema_sync::Outcome::Migrated { .. }))
    }

    /// `restoreLayout()` under lease `id`; the caller commits on success.
    pub fn restore_layout(&self, id: u32) -> Result<Vec<String>> {
        self.with_lease(id, |h| schema_sync::restore_layout(h.conn))
    }

    // ---- partitions -----------------------------------------------------------

    pub fn touch_partition(
        &self, id: u32, partition: &str, at_ms: i64, epoch: &str,
    ) -> Result<RegistryEntry> {
        self.with_lease_one_statement(id, |h| {
            meta::touch_partition(h.conn, partition, at_ms, epoch)
        })
    }

    pub fn rotate_partition_log_epoch(
        &self, id: u32, partition: &str, epoch: &str, at_ms: i64,
    ) -> Result<RegistryEntry> {
        self.with_lease(id, |h| meta::rotate_epoch(h.conn, partition, epoch, at_ms))
    }

    pub fn list_partition_registry(&self) -> Result<Vec<RegistryEntry>> {
        self.read(meta::list_registry)
    }

    pub fn get_partition_log_epoch(&self, partition: &str) -> Result<Option<String>> {
        self.read(|c| meta::log_epoch(c, partition))
    }

    // ---- the log ------------------------------------------------------------

    pub fn get_max_commit_seq(&self, partition: &str) -> Result<i64> {
        self.read(|c| log::max_commit_seq(c, partition))
    }

    pub fn get_horizon_seq(&self, partition: &str) -> Result<i64> {
        self.read(|c| log::horizon_seq(c, partition))
    }

    pub fn set_horizon_seq(&self, id: u32, partition: &str, seq: i64) -> Result<()> {
        self.with_lease(id, |h| log::set_horizon_seq(h.conn, partition, seq))
    }

    pub fn prune_commits_through(
        &self, id: u32, partition: &str, target: crate::core::model::PruneTarget,
    ) -> Result<PruneResult> {
        self.with_lease(id, |h| log::prune(h.conn, partition, target))
    }

    pub fn get_commit_seq_before(&self, partition: &str, before_ms: i64) -> Result<i64> {
        self.read(|c| log::commit_seq_before(c, partition, before_ms))
    }

    // ---- reads ----------------------------------------------------------------

    pub fn get_row(&self, partition: &str, table: &str, row_id: &str) -> Result<Option<StoredRow>> {
        self.table_sql(table, |_, sql| {
            self.read(|c| rows::get_row(c, sql, partition, row_id))
        })
    }

    pub fn get_push_result(
        &self, partition: &str, client_id: &str, commit_id: &str,
    ) -> Result<Option<String>> {
        self.read(|c| meta::get_push_result(c, partition, client_id, commit_id))
    }

    pub fn read_commit_window(
        &self, partition: &str, q: &window::WindowQuery<'_>,
    ) -> Result<Vec<StoredCommit>> {
        self.read_snapshot(|c| window::read_commit_window(c, partition, q))
    }

    pub fn latest_scoped_change_seq(
        &self, partition: &str, table: &str, filter: &ScopeFilter,
    ) -> Result<i64> {
        self.read(|c| window::latest_scoped_change_seq(c, partition, table, filter))
    }

    pub fn scan_rows(
        &self, partition: &str, table: &str, filter: &ScopeFilter, after_row_id: &str, limit: i64,
    ) -> Result<Vec<StoredRow>> {
        self.table_sql(table, |t, sql| {
            self.read_snapshot(|c| {
                rows::scan_rows(c, t, sql, partition, filter, after_row_id, limit)
            })
        })
    }

    pub fn read_serve_gate(&self, partition: &str, running: i64) -> Result<ServeGate> {
        self.read(|c| meta::read_serve_gate(c, partition, running))
    }

    pub fn read_checkpoints(&self, partition: &str) -> Result<Vec<Checkpoint>> {
        self.read(|c| meta::read_checkpoints(c, partition))
    }

    pub fn writer_fence_allows(&self, partition: &str, version: i64) -> Result<bool> {
        self.read(|c| meta::writer_fence_allows(c, partition, version))
    }

    pub fn declare_checkpoint(
        &self, id: u32, d: &CheckpointDeclaration, now_ms: i64,
    ) -> Result<Checkpoint> {
        self.with_lease(id, |h| meta::declare_checkpoint(h.conn, d, now_ms))
    }

    // ---- clients --------------------------------------------------------------

    pub fn get_client_record(
        &self, partition: &str, client_id: &str,
    ) -> Result<Option<ClientRecord>> {
        self.read(|c| meta::get_client(c, partition, client_id))
    }

    pub fn list_client_records(&self, partition: &str) -> Result<Vec<ClientRecord>> {
        self.read(|c| meta::list_clients(c, partition))
    }

    pub fn put_client_record(&self, id: u32, partition: &str, record: &ClientRecord) -> Result<()> {
        self.with_lease_one_statement(id, |h| meta::put_client(h.conn, partition, record))
    }

    pub fn list_client_cursors(&self, partition: &str) -> Result<Vec<ClientCursor>> {
        self.read(|c| meta::list_cursors(c, partition))
    }

    pub fn advance_client_cursor(
        &self, id: u32, partition: &str, client_id: &str, guard: Option<(&str, &str)>, cursor: i64,
        at_ms: i64,
    ) -> Result<()> {
        self.with_lease_one_statement(id, |h| {
            meta::advance_cursor(h.conn, partition, client_id, guard, cursor, at_ms)
        })
    }

    pub fn get_active_client_cursor_floor(
        &self, partition: &str, cutoff_ms: i64,
    ) -> Result<Option<i64>> {
        self.read(|c| meta::active_cursor_floor(c, partition, cutoff_ms))
    }

    // ---- the transaction ------------------------------------------------------

    #[track_caller]
    pub(super) fn with_tx<T>(
        &self, id: u32, f: impl FnOnce(Held<'_>, &str) -> Result<T>,
    ) -> Result<T> {
        self.with_lease(id, |h| {
            let partition = h.partition()?;
            f(h, partition)
        })
    }

    pub fn tx_get_row(&self, id: u32, table: &str, row_id: &str) -> Result<Option<StoredRow>> {
        self.table_sql(table, |_, sql| {
            self.with_tx(id, |h, p| rows::get_row(h.conn, sql, p, row_id))
        })
    }

    pub fn tx_get_tombstone_seq(&self, id: u32, table: &str, row_id: &str) -> Result<Option<i64>> {
        self.with_tx(id, |h, p| rows::get_tombstone_seq(h.conn, p, table, row_id))
    }

    pub fn tx_clear_tombstone(&self, id: u32, table: &str, row_id: &str) -> Result<()> {
        self.with_tx(id, |h, p| rows::clear_tombstone(h.conn, p, table, row_id))
    }

    pub fn tx_get_push_result(
        &self, id: u32, client_id: &str, commit_id: &str,
    ) -> Result<Option<String>> {
        self.with_tx(id, |h, p| {
            meta::get_push_result(h.conn, p, client_id, commit_id)
        })
    }

    pub fn tx_scan_rows(
        &self, id: u32, table: &str, filter: &ScopeFilter, after_row_id: &str, limit: i64,
    ) -> Result<Vec<StoredRow>> {
        self.table_sql(table, |t, sql| {
            self.with_tx(id, |h, p| {
                rows::scan_rows(h.conn, t, sql, p, filter, after_row_id, limit)
            })
        })
    }

    pub fn tx_lock_partition_for_push(&self, id: u32) -> Result<()> {
        self.with_tx(id, |mut h, _| h.open_savepoint())
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

    pub fn tx_upsert_row(
        &self, id: u32, table: &str, row: &StoredRow, op_index: Option<u32>,
    ) -> Result<()> {
        self.table_sql(table, |t, sql| {
            self.with_tx(id, |h, p| {
                rows::upsert_row(h.conn, t, sql, p, row, op_index)
            })
        })
    }

    pub fn tx_delete_row(&self, id: u32, table: &str, row_id: &str) -> Result<()> {
        self.table_sql(table, |t, sql| {
            self.with_tx(id, |h, p| rows::delete_row(h.conn, t, sql, p, row_id))
        })
    }

    pub fn tx_append_commit(&self, id: u32, commit: &NewCommit) -> Result<i64> {
        let version = self.writer_version();
        self.with_tx(id, |h, p| log::append_commit(h.conn, p, commit, version))
    }

    pub fn tx_put_push_result(
        &self, id: u32, client_id: &str, commit_id: &str, json: &str,
    ) -> Result<()> {
        self.with_tx(id, |h, p| {
            meta::put_push_result(h.conn, p, client_id, commit_id, json)
        })
    }

    pub fn tx_set_blob_refs(
        &self, id: u32, table: &str, row_id: &str, blob_ids: &[String],
    ) -> Result<()> {
        self.with_tx(id, |h, p| {
            rows::set_blob_refs(h.conn, p, table, row_id, blob_ids)
        })
    }

    pub fn tx_read_serve_gate(&self, id: u32, running: i64) -> Result<ServeGate> {
        self.with_tx(id, |h, p| meta::read_serve_gate(h.conn, p, running))
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
                let mut seen = std::collections::HashSet::with_capacity(row_ids.len());
                for &row_id in row_ids {
                    if !seen.insert(row_id) {
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
    use crate::sqlite::conn::{Config, Location};

    const BENCH_SCHEMA: &str = r#"{"version":1,"tables":[{"name":"tasks","columns":[{"name":"id","type":"string","nullable":false},{"name":"project_id","type":"string","nullable":false},{"name":"title","type":"string","nullable":true},{"name":"n","type":"integer","nullable":true}],"primaryKeyIndex":0,"materialize":true,"indexes":[]}]}"#;

    fn engine() -> SqliteEngine {
        let e = SqliteEngine::new(Config::for_tests(Location::Memory));
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
        e.tx_upsert_row(id, "tasks", &row("a"), Some(0)).unwrap();
        let deleted = e
            .tx_append_commit(
                id,
                &commit(vec![Change {
                    table: "tasks".into(),
                    row_id: "b".into(),
                    op: ChangeOp::Delete,
                    row_version: None,
                    scopes_json: r#"{"project_id":"p1"}"#.into(),
                    payload: None,
                }]),
            )
            .unwrap();
        e.unlock(id, true).unwrap();

        let id = e.try_lock(Some("p")).unwrap().unwrap();
        let got = e
            .tx_prefetch_rows(id, "tasks", &["a", "b", "c", "a"])
            .unwrap();
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
        assert!(e.tx_prefetch_rows(id, "nope", &["a"]).is_err());
        e.unlock(id, false).unwrap();
        assert!(
            e.tx_prefetch_rows(id, "tasks", &["a"]).is_err(),
            "needs the lease"
        );
    }
}
