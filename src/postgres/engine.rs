//! PostgreSQL behind the engine seam: every member is a round trip, so
//! every answer is a future that owns its arguments. Storage-level writes
//! run in their own transaction and ignore the lease.

use super::handle::PgEngine;
use super::tx::immediate::UpsertNow;
use crate::core::checkpoint::{Activation, SourceState};
use crate::core::model::admin::{BlobReferencingRow, CommitMetadata, ScopeActivity};
use crate::core::model::reactions::{
    ClaimQuery, FailureUpdate, NewReaction, PruneQuery, PrunedCounts, StoredReaction,
};
use crate::core::model::*;
use crate::core::query::{Request, Value};
use crate::core::schema::Schema;
use crate::core::scope::ScopeFilter;
use crate::core::window::Window;
use crate::seam::{
    later, Admin, Call, Checkpoints, Clients, Lifecycle, Log, Prefetch, Reactions, Reads,
    Transaction,
};
use std::sync::Arc;

/// `pg!(self, |e| e.member(&arg).await)`: the body runs later, on a clone
/// of the engine, with the arguments moved in.
macro_rules! pg {
    ($self:ident, |$e:ident| $body:expr) => {{
        let engine = Arc::clone($self);
        later(async move {
            // The inherent methods, not this trait's namesakes.
            let $e: &PgEngine = &engine;
            $body
        })
    }};
}

impl Lifecycle for Arc<PgEngine> {
    fn name(&self) -> &'static str {
        crate::core::telemetry::POSTGRES
    }

    fn exclusive_writes(&self) -> bool {
        false
    }

    fn close(&self) -> Call<()> {
        pg!(self, |e| {
            e.close().await;
            Ok(())
        })
    }

    fn abandon_all(&self) {
        PgEngine::abandon_all(self)
    }

    fn ping(&self) -> Call<String> {
        pg!(self, |e| e.ping().await)
    }

    fn stats(&self) -> crate::seam::EngineStats {
        PgEngine::stats(self)
    }

    fn schema_version(&self) -> i64 {
        self.writer_version()
    }

    fn begin(&self, partition: Option<String>) -> Call<u32> {
        if let Some(id) = self.begin_now(partition.as_deref().unwrap_or_default()) {
            return Call::Now(Ok(id));
        }
        pg!(self, |e| e
            .begin(partition.as_deref().unwrap_or_default())
            .await)
    }

    fn unlock(&self, lease: u32, commit: bool) -> Call<()> {
        pg!(self, |e| e.unlock(lease, commit).await)
    }

    fn is_held(&self, lease: u32) -> bool {
        PgEngine::is_held(self, lease)
    }

    fn ensure_schema(
        &self, _lease: u32, schema: Schema, declarations: Vec<CheckpointDeclaration>, now_ms: i64,
    ) -> Call<bool> {
        pg!(self, |e| e
            .ensure_schema(schema, &declarations, now_ms)
            .await)
    }

    fn restore_layout(&self, _lease: u32) -> Call<Vec<String>> {
        pg!(self, |e| e.restore_layout().await)
    }
}

impl Log for Arc<PgEngine> {
    fn touch_partition(
        &self, _lease: u32, p: String, at_ms: i64, epoch: String,
    ) -> Call<RegistryEntry> {
        pg!(self, |e| e.touch_partition(&p, at_ms, &epoch).await)
    }

    fn rotate_partition_log_epoch(
        &self, _lease: u32, p: String, epoch: String, at_ms: i64,
    ) -> Call<RegistryEntry> {
        pg!(self, |e| e
            .rotate_partition_log_epoch(&p, &epoch, at_ms)
            .await)
    }

    fn list_partition_registry(&self) -> Call<Vec<RegistryEntry>> {
        pg!(self, |e| e.list_partition_registry().await)
    }

    fn get_partition_log_epoch(&self, p: String) -> Call<Option<String>> {
        pg!(self, |e| e.get_partition_log_epoch(&p).await)
    }

    fn get_max_commit_seq(&self, p: String) -> Call<i64> {
        pg!(self, |e| e.get_max_commit_seq(&p).await)
    }

    fn get_horizon_seq(&self, p: String) -> Call<i64> {
        pg!(self, |e| e.get_horizon_seq(&p).await)
    }

    fn set_horizon_seq(&self, _lease: u32, p: String, seq: i64) -> Call<()> {
        pg!(self, |e| e.set_horizon_seq(&p, seq).await)
    }

    fn prune_commits_through(
        &self, _lease: u32, p: String, target: PruneTarget,
    ) -> Call<PruneResult> {
        pg!(self, |e| e.prune_commits_through(&p, target).await)
    }

    fn get_commit_seq_before(&self, p: String, before_ms: i64) -> Call<i64> {
        pg!(self, |e| e.get_commit_seq_before(&p, before_ms).await)
    }
}

impl Reads for Arc<PgEngine> {
    fn get_row(&self, p: String, table: String, row_id: String) -> Call<Option<StoredRow>> {
        pg!(self, |e| e.get_row(&p, &table, &row_id).await)
    }

    fn get_push_result(
        &self, p: String, client_id: String, commit_id: String,
    ) -> Call<Option<String>> {
        pg!(self, |e| e
            .get_push_result(&p, &client_id, &commit_id)
            .await)
    }

    fn read_commit_window(&self, p: String, window: Window) -> Call<Vec<StoredCommit>> {
        pg!(self, |e| e.read_commit_window(&p, &window.query()).await)
    }

    fn latest_scoped_change_seq(&self, p: String, table: String, filter: ScopeFilter) -> Call<i64> {
        pg!(self, |e| e
            .latest_scoped_change_seq(&p, &table, &filter)
            .await)
    }

    fn scan_rows(
        &self, p: String, table: String, filter: ScopeFilter, after_row_id: String, limit: i64,
    ) -> Call<Vec<StoredRow>> {
        pg!(self, |e| e
            .scan_rows(&p, &table, &filter, &after_row_id, limit)
            .await)
    }

    fn scan_rows_by_index(
        &self, p: String, table: String, index: String, values: Option<Vec<Value>>,
        after_row_id: String, limit: f64,
    ) -> Call<Vec<StoredRow>> {
        pg!(self, |e| {
            e.scan_rows_by_index(&p, &table, &index, values.as_deref(), &after_row_id, limit)
                .await
        })
    }

    fn query_authoritative(
        &self, p: String, request: Request, params: Vec<Value>, declared: Vec<String>,
        gate_running: Option<i64>,
    ) -> Call<QueryOutput> {
        pg!(self, |e| {
            e.query_authoritative(&p, &request, &params, &declared, gate_running)
                .await
        })
    }
}

impl Checkpoints for Arc<PgEngine> {
    fn read_serve_gate(&self, p: String, running: i64) -> Call<ServeGate> {
        pg!(self, |e| e.read_serve_gate(&p, running).await)
    }

    fn read_checkpoints(&self, p: String) -> Call<Vec<Checkpoint>> {
        pg!(self, |e| e.read_checkpoints(&p).await)
    }

    fn writer_fence_allows(&self, p: String, version: i64) -> Call<bool> {
        pg!(self, |e| e.writer_fence_allows(&p, version).await)
    }

    fn declare_checkpoint(
        &self, _lease: u32, d: CheckpointDeclaration, now_ms: i64,
    ) -> Call<Checkpoint> {
        pg!(self, |e| e.declare_checkpoint(&d, now_ms).await)
    }

    fn claim_checkpoint(
        &self, _lease: u32, p: String, name: String, schema_version: i64, now_ms: i64,
    ) -> Call<Checkpoint> {
        pg!(self, |e| e
            .claim_checkpoint(&p, &name, schema_version, now_ms)
            .await)
    }

    fn advance_checkpoint(
        &self, _lease: u32, p: String, name: String, g: CheckpointProgress,
    ) -> Call<bool> {
        pg!(self, |e| e.advance_checkpoint(&p, &name, &g).await)
    }

    fn source_coverage_seq(&self, p: String, tables: Vec<String>) -> Call<i64> {
        pg!(self, |e| e.source_coverage_seq(&p, &tables).await)
    }

    fn has_source_changes_above(
        &self, p: String, tables: Vec<String>, seq: i64,
    ) -> Call<SourceState> {
        pg!(self, |e| e.has_source_changes_above(&p, &tables, seq).await)
    }

    fn activate_checkpoint(
        &self, _lease: u32, p: String, name: String, owner_epoch: i64, watermark: i64,
        sources: Vec<String>, now_ms: i64,
    ) -> Call<Activation> {
        pg!(self, |e| {
            e.activate_checkpoint(&p, &name, owner_epoch, watermark, &sources, now_ms)
                .await
        })
    }
}

impl Clients for Arc<PgEngine> {
    fn get_client_record(&self, p: String, client_id: String) -> Call<Option<ClientRecord>> {
        pg!(self, |e| e.get_client_record(&p, &client_id).await)
    }

    fn list_client_records(&self, p: String) -> Call<Vec<ClientRecord>> {
        pg!(self, |e| e.list_client_records(&p).await)
    }

    fn put_client_record(&self, _lease: u32, p: String, record: ClientRecord) -> Call<()> {
        pg!(self, |e| e.put_client_record(&p, &record).await)
    }

    fn list_client_cursors(&self, p: String) -> Call<Vec<ClientCursor>> {
        pg!(self, |e| e.list_client_cursors(&p).await)
    }

    fn advance_client_cursor(&self, _lease: u32, p: String, a: CursorAdvance) -> Call<()> {
        pg!(self, |e| {
            let guard = a
                .guard
                .as_ref()
                .map(|(actor, epoch)| (actor.as_str(), epoch.as_str()));
            e.advance_client_cursor(&p, &a.client_id, guard, a.cursor, a.at_ms)
                .await
        })
    }

    fn get_active_client_cursor_floor(&self, p: String, cutoff_ms: i64) -> Call<Option<i64>> {
        pg!(self, |e| e
            .get_active_client_cursor_floor(&p, cutoff_ms)
            .await)
    }
}

impl Reactions for Arc<PgEngine> {
    fn claim_reactions(&self, _lease: u32, p: String, q: ClaimQuery) -> Call<Vec<StoredReaction>> {
        pg!(self, |e| e.claim_reactions(&p, &q).await)
    }

    fn complete_reaction(
        &self, _lease: u32, p: String, key: String, owner: String, at_ms: i64,
    ) -> Call<bool> {
        pg!(self, |e| e.complete_reaction(&p, &key, &owner, at_ms).await)
    }

    fn extend_reaction_lease(
        &self, _lease: u32, p: String, key: String, owner: String, at_ms: i64,
    ) -> Call<bool> {
        pg!(self, |e| e
            .extend_reaction_lease(&p, &key, &owner, at_ms)
            .await)
    }

    fn fail_reaction(&self, _lease: u32, p: String, key: String, u: FailureUpdate) -> Call<bool> {
        pg!(self, |e| e.fail_reaction(&p, &key, &u).await)
    }

    fn retry_reaction(&self, _lease: u32, p: String, key: String, now_ms: i64) -> Call<bool> {
        pg!(self, |e| e.retry_reaction(&p, &key, now_ms).await)
    }

    fn get_reaction(&self, p: String, key: String) -> Call<Option<StoredReaction>> {
        pg!(self, |e| e.get_reaction(&p, &key).await)
    }

    fn list_reactions(
        &self, p: String, statuses: Vec<String>, types: Vec<String>, limit: i64,
    ) -> Call<Vec<StoredReaction>> {
        pg!(self, |e| e
            .list_reactions(&p, &statuses, &types, limit)
            .await)
    }

    fn prune_reactions(&self, _lease: u32, p: String, q: PruneQuery) -> Call<PrunedCounts> {
        pg!(self, |e| e.prune_reactions(&p, &q).await)
    }
}

impl Admin for Arc<PgEngine> {
    fn list_commit_metadata(
        &self, p: String, after_seq: i64, limit: i64, table: Option<String>,
    ) -> Call<Vec<CommitMetadata>> {
        pg!(self, |e| e
            .list_commit_metadata(&p, after_seq, limit, table.as_deref())
            .await)
    }

    fn scope_activity(
        &self, p: String, variable: String, value: String, limit: i64,
    ) -> Call<Vec<ScopeActivity>> {
        pg!(self, |e| e
            .scope_activity(&p, &variable, &value, limit)
            .await)
    }

    fn get_row_scopes(
        &self, p: String, table: String, row_id: String,
    ) -> Call<Option<(i64, String)>> {
        pg!(self, |e| e.get_row_scopes(&p, &table, &row_id).await)
    }

    fn list_rows_referencing_blob(
        &self, p: String, blob_id: String,
    ) -> Call<Vec<BlobReferencingRow>> {
        pg!(self, |e| e.list_rows_referencing_blob(&p, &blob_id).await)
    }

    fn list_referenced_blob_ids(&self, p: String) -> Call<Vec<String>> {
        pg!(self, |e| e.list_referenced_blob_ids(&p).await)
    }
}

impl Transaction for Arc<PgEngine> {
    fn tx_get_row(&self, lease: u32, table: String, row_id: String) -> Call<Option<StoredRow>> {
        pg!(self, |e| e.tx_get_row(lease, &table, &row_id).await)
    }

    fn tx_get_tombstone_seq(&self, lease: u32, table: String, row_id: String) -> Call<Option<i64>> {
        pg!(self, |e| e
            .tx_get_tombstone_seq(lease, &table, &row_id)
            .await)
    }

    fn tx_clear_tombstone(&self, lease: u32, table: String, row_id: String) -> Call<()> {
        pg!(self, |e| e.tx_clear_tombstone(lease, &table, &row_id).await)
    }

    fn tx_get_push_result(
        &self, lease: u32, client_id: String, commit_id: String,
    ) -> Call<Option<String>> {
        if let Some(done) = self.get_push_result_now(lease, &client_id, &commit_id) {
            return Call::Now(done);
        }
        pg!(self, |e| e
            .tx_get_push_result(lease, &client_id, &commit_id)
            .await)
    }

    fn tx_scan_rows(
        &self, lease: u32, table: String, filter: ScopeFilter, after_row_id: String, limit: i64,
    ) -> Call<Vec<StoredRow>> {
        pg!(self, |e| e
            .tx_scan_rows(lease, &table, &filter, &after_row_id, limit)
            .await)
    }

    fn tx_scan_rows_by_index(
        &self, lease: u32, table: String, index: String, values: Option<Vec<Value>>,
        after_row_id: String, limit: f64,
    ) -> Call<Vec<StoredRow>> {
        pg!(self, |e| {
            e.tx_scan_rows_by_index(
                lease,
                &table,
                &index,
                values.as_deref(),
                &after_row_id,
                limit,
            )
            .await
        })
    }

    fn tx_query_authoritative(
        &self, lease: u32, request: Request, params: Vec<Value>, declared: Vec<String>,
    ) -> Call<QueryOutput> {
        pg!(self, |e| e
            .tx_query_authoritative(lease, &request, &params, &declared)
            .await)
    }

    fn tx_lock_partition_for_push(&self, lease: u32) -> Call<()> {
        pg!(self, |e| e.tx_lock_partition_for_push(lease).await)
    }

    fn tx_commit_rejected_push_result(
        &self, lease: u32, client_id: String, commit_id: String, result_json: String,
    ) -> Call<()> {
        pg!(self, |e| {
            e.tx_commit_rejected_push_result(lease, &client_id, &commit_id, &result_json)
                .await
        })
    }

    fn tx_upsert_row(
        &self, lease: u32, table: String, row: StoredRow, op_index: Option<u32>,
    ) -> Call<()> {
        let defer = match self.upsert_row_now(lease, &table, &row) {
            UpsertNow::Done(done) => return Call::Now(done),
            UpsertNow::Later { defer } => defer,
        };
        pg!(self, |e| e
            .tx_upsert_row(lease, &table, &row, op_index, defer)
            .await)
    }

    fn tx_delete_row(&self, lease: u32, table: String, row_id: String) -> Call<()> {
        pg!(self, |e| e.tx_delete_row(lease, &table, &row_id).await)
    }

    fn tx_append_commit(&self, lease: u32, commit: NewCommit) -> Call<i64> {
        if let Some(done) = self.append_commit_now(lease, &commit) {
            return Call::Now(done);
        }
        pg!(self, |e| e.tx_append_commit(lease, &commit).await)
    }

    fn tx_put_push_result(
        &self, lease: u32, client_id: String, commit_id: String, result_json: String,
    ) -> Call<()> {
        if let Some(done) = self.put_push_result_now(lease, &client_id, &commit_id, &result_json) {
            return Call::Now(done);
        }
        pg!(self, |e| e
            .tx_put_push_result(lease, &client_id, &commit_id, &result_json)
            .await)
    }

    fn tx_set_blob_refs(
        &self, lease: u32, table: String, row_id: String, blob_ids: Vec<String>,
    ) -> Call<()> {
        pg!(self, |e| e
            .tx_set_blob_refs(lease, &table, &row_id, &blob_ids)
            .await)
    }

    fn tx_read_serve_gate(&self, lease: u32, running: i64) -> Call<ServeGate> {
        if let Some(done) = self.read_serve_gate_now(lease, running) {
            return Call::Now(done);
        }
        pg!(self, |e| e.tx_read_serve_gate(lease, running).await)
    }

    fn tx_advance_checkpoint(&self, lease: u32, name: String, g: CheckpointProgress) -> Call<bool> {
        pg!(self, |e| {
            e.tx_advance_checkpoint(lease, &name, &g).await
        })
    }

    fn tx_enqueue_reactions(&self, lease: u32, reactions: Vec<NewReaction>) -> Call<()> {
        pg!(self, |e| e.tx_enqueue_reactions(lease, &reactions).await)
    }

    fn tx_prefetch_rows(&self, lease: u32, table: String, row_ids: Vec<String>) -> Call<Prefetch> {
        pg!(self, |e| e.tx_prefetch_rows(lease, &table, &row_ids).await)
    }
}
