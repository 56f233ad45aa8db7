//! The storage members on PostgreSQL, one method each: reads on a pool
//! connection, storage-level writes in their own transaction. The
//! transaction members are `tx::members`.

use super::error::map_err;
use super::handle::PgEngine;
use super::run::{read, write};
use super::tx::upsert;
use super::{log, meta, rows, schema_sync, window};
use crate::core::error::Result;
use crate::core::model::*;
use crate::core::schema::Schema;
use crate::core::scope::ScopeFilter;
use crate::core::window::WindowQuery;

impl PgEngine {
    /// `SELECT current_setting('server_version')` through the pool.
    pub async fn ping(&self) -> Result<String> {
        read!(self, |c| {
            super::stmt::query_scalar::<String>("SELECT current_setting('server_version')")
                .fetch_one(&mut *c)
                .await
                .map_err(map_err)
        })
    }

    // ---- schema -------------------------------------------------------------

    pub async fn ensure_schema(
        &self, schema: Schema, declarations: &[CheckpointDeclaration], now_ms: i64,
    ) -> Result<bool> {
        // An in-tree host creating the same tables at the same instant makes
        // this fail with a catalog conflict: the next try finds them made.
        let (migrated, deferrable) = super::meta_setup::retry_ddl_race!(
            super::meta_setup::ddl_race,
            write!(self, |c| {
                let migrated = schema_sync::ensure_schema(c, &schema, declarations, now_ms).await?;
                Ok((migrated, upsert::check(c, &schema).await?))
            })
        )?;
        self.set_loaded(schema, &deferrable);
        Ok(migrated)
    }

    /// `restoreLayout()` in a transaction of its own.
    pub async fn restore_layout(&self) -> Result<Vec<String>> {
        write!(self, |c| schema_sync::restore_layout(c).await)
    }

    // ---- partitions -----------------------------------------------------------

    pub async fn touch_partition(
        &self, partition: &str, at_ms: i64, epoch: &str,
    ) -> Result<RegistryEntry> {
        write!(self, |c| meta::touch_partition(c, partition, at_ms, epoch)
            .await)
    }

    pub async fn rotate_partition_log_epoch(
        &self, partition: &str, epoch: &str, at_ms: i64,
    ) -> Result<RegistryEntry> {
        write!(self, |c| meta::rotate_epoch(c, partition, epoch, at_ms)
            .await)
    }

    pub async fn list_partition_registry(&self) -> Result<Vec<RegistryEntry>> {
        read!(self, |c| meta::list_registry(c).await)
    }

    pub async fn get_partition_log_epoch(&self, partition: &str) -> Result<Option<String>> {
        read!(self, |c| meta::log_epoch(c, partition).await)
    }

    // ---- the log ------------------------------------------------------------

    pub async fn get_max_commit_seq(&self, partition: &str) -> Result<i64> {
        read!(self, |c| log::max_commit_seq(c, partition).await)
    }

    pub async fn get_horizon_seq(&self, partition: &str) -> Result<i64> {
        read!(self, |c| log::horizon_seq(c, partition).await)
    }

    pub async fn set_horizon_seq(&self, partition: &str, seq: i64) -> Result<()> {
        write!(self, |c| log::set_horizon_seq(c, partition, seq).await)
    }

    pub async fn prune_commits_through(
        &self, partition: &str, target: log::PruneTarget,
    ) -> Result<PruneResult> {
        write!(self, |c| log::prune(c, partition, target.clone()).await)
    }

    pub async fn get_commit_seq_before(&self, partition: &str, before_ms: i64) -> Result<i64> {
        read!(self, |c| log::commit_seq_before(c, partition, before_ms)
            .await)
    }

    // ---- reads ----------------------------------------------------------------

    pub async fn get_row(
        &self, partition: &str, table: &str, row_id: &str,
    ) -> Result<Option<StoredRow>> {
        let (loaded, i) = self.table(table)?;
        read!(self, |c| rows::get_row(
            c,
            &loaded.sql[i],
            partition,
            row_id
        )
        .await)
    }

    pub async fn get_push_result(
        &self, partition: &str, client_id: &str, commit_id: &str,
    ) -> Result<Option<String>> {
        let found = read!(self, |c| meta::get_push_result(
            c, partition, client_id, commit_id
        )
        .await)?;
        if found.is_none() {
            self.push_keys.asked(partition, client_id, commit_id);
        }
        Ok(found)
    }

    /// Each page is one statement, so one snapshot; a window that needs a
    /// second page reads it as the in-tree storage does, from the last
    /// candidate seq (everything at or below `throughSeq` is committed).
    pub async fn read_commit_window(
        &self, partition: &str, q: &WindowQuery<'_>,
    ) -> Result<Vec<StoredCommit>> {
        if q.probe().is_none() {
            return Ok(Vec::new());
        }
        read!(self, |c| window::read_commit_window(c, partition, q).await)
    }

    pub async fn latest_scoped_change_seq(
        &self, partition: &str, table: &str, filter: &ScopeFilter,
    ) -> Result<i64> {
        read!(self, |c| window::latest_scoped_change_seq(
            c, partition, table, filter
        )
        .await)
    }

    pub async fn scan_rows(
        &self, partition: &str, table: &str, filter: &ScopeFilter, after_row_id: &str, limit: i64,
    ) -> Result<Vec<StoredRow>> {
        let (loaded, i) = self.table(table)?;
        let (t, sql) = (&loaded.schema.tables[i], &loaded.sql[i]);
        read!(self, |c| rows::scan_rows(
            c,
            t,
            sql,
            partition,
            filter,
            after_row_id,
            limit
        )
        .await)
    }

    pub async fn read_serve_gate(&self, partition: &str, running: i64) -> Result<ServeGate> {
        read!(self, |c| meta::read_serve_gate(c, partition, running).await)
    }

    pub async fn read_checkpoints(&self, partition: &str) -> Result<Vec<Checkpoint>> {
        read!(self, |c| meta::read_checkpoints(c, partition).await)
    }

    pub async fn writer_fence_allows(&self, partition: &str, version: i64) -> Result<bool> {
        read!(self, |c| meta::writer_fence_allows(c, partition, version)
            .await)
    }

    pub async fn declare_checkpoint(
        &self, d: &CheckpointDeclaration, now_ms: i64,
    ) -> Result<Checkpoint> {
        write!(self, |c| meta::declare_checkpoint(c, d, now_ms).await)
    }

    // ---- clients --------------------------------------------------------------

    pub async fn get_client_record(
        &self, partition: &str, client_id: &str,
    ) -> Result<Option<ClientRecord>> {
        read!(self, |c| meta::get_client(c, partition, client_id).await)
    }

    pub async fn list_client_records(&self, partition: &str) -> Result<Vec<ClientRecord>> {
        read!(self, |c| meta::list_clients(c, partition).await)
    }

    pub async fn put_client_record(&self, partition: &str, record: &ClientRecord) -> Result<()> {
        write!(self, |c| meta::put_client(c, partition, record).await)
    }

    pub async fn list_client_cursors(&self, partition: &str) -> Result<Vec<ClientCursor>> {
        read!(self, |c| meta::list_cursors(c, partition).await)
    }

    pub async fn advance_client_cursor(
        &self, partition: &str, client_id: &str, guard: Option<(&str, &str)>, cursor: i64,
        at_ms: i64,
    ) -> Result<()> {
        write!(self, |c| meta::advance_cursor(
            c, partition, client_id, guard, cursor, at_ms
        )
        .await)
    }

    pub async fn get_active_client_cursor_floor(
        &self, partition: &str, cutoff_ms: i64,
    ) -> Result<Option<i64>> {
        read!(self, |c| meta::active_cursor_floor(c, partition, cutoff_ms)
            .await)
    }
}
