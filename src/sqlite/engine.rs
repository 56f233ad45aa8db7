//! SQLite behind the engine seam. Point work answers at once on the
//! calling thread (a statement costs microseconds, less than a thread hop),
//! and so do windows, scans and registered queries judged small before
//! they run (see `NOW_CANDIDATES`, `NOW_STEPS`); larger ones, and waits for
//! a lock held by another process, are blocking work for the host's worker
//! pool.

use super::storage::SqliteEngine;
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
    blocking, Admin, Call, Checkpoints, Clients, Lifecycle, Log, Prefetch, Reactions, Reads,
    Transaction,
};
use std::sync::Arc;

/// Storage-level work that may take seconds (index builds over every row):
/// on the worker pool, and under a lease of its own, never in one call
/// (`OWN_TRANSACTION`, answered `would_block`): the JS queue then keeps
/// every other write behind it, and the calling thread never waits for the
/// writer while the work holds it.
fn leased_on_worker<T: Send + 'static>(
    engine: &Arc<SqliteEngine>, lease: u32,
    f: impl FnOnce(&SqliteEngine) -> crate::core::error::Result<T> + Send + 'static,
) -> Call<T> {
    if lease == super::lease::OWN_TRANSACTION {
        return Call::Now(Err(super::lease::would_block()));
    }
    let e = Arc::clone(engine);
    blocking(move || f(&e))
}

/// A window or scan on one scope value runs on the calling thread
/// (`Call::Now`) when its limit, or a bound on its candidates, is at most
/// this: a pull's 100-change window, a bootstrap's 1000-row page. A
/// window's bound is its seq range (commit seqs are dense); a scan's, an
/// index-only count of at most this many + 1 entries. Measured on such
/// reads, bun and Node 24 on a quiet machine: a 100-change window costs
/// about 135 µs of work here against 290 µs to settle off-thread, and a
/// 1000-row page 650-790 µs against 935-1140 µs: the hop to a worker, its
/// wake-up and its cold caches cost more than they free the loop for.
/// Larger reads run off-thread.
const NOW_CANDIDATES: i64 = 1024;
/// The most rows such a read steps on the calling thread before it is run
/// again off-thread (a candidate commit with many changes, a filter that
/// passes few candidates): at about 14k instructions a window row and 10k
/// a scan row, at most about 2 ms.
const NOW_ROWS: usize = 1536;
/// The most payload bytes such a read copies on the calling thread before
/// it is run again off-thread (large rows): a few milliseconds of copying
/// and crossing at most.
const NOW_BYTES: usize = 4 << 20;

/// Thousands of VM steps a registered query may take on the calling
/// thread before it is stopped and run off-thread instead (an indexed
/// point query takes well under one; a 10k-row scan about 50). Time bounds
/// it too: `isolation::NOW_STALL`, about as long as the largest window or
/// page read there.
const NOW_STEPS: u32 = 128;

impl Lifecycle for Arc<SqliteEngine> {
    fn name(&self) -> &'static str {
        crate::core::telemetry::SQLITE
    }

    fn exclusive_writes(&self) -> bool {
        true
    }

    fn close(&self) -> Call<()> {
        SqliteEngine::close(self);
        Call::Now(Ok(()))
    }

    fn schema_version(&self) -> i64 {
        self.writer_version()
    }

    fn ping(&self) -> Call<String> {
        SqliteEngine::ping(self).into()
    }

    fn stats(&self) -> crate::seam::EngineStats {
        SqliteEngine::stats(self)
    }

    fn backup(&self, path: String) -> Call<()> {
        let engine = Arc::clone(self);
        blocking(move || SqliteEngine::backup(&engine, &path))
    }

    fn begin(&self, partition: Option<String>) -> Call<u32> {
        // The first write of a host (ensureSchema, usually) opens the file
        // on a worker (`unopened_file`): on the calling thread the switch to
        // WAL stalled the event loop for 200 ms beside two processes
        // reading the file (issue 48).
        if self.unopened_file() {
            let e = self.clone();
            return blocking(move || SqliteEngine::lock_blocking(&e, partition.as_deref()));
        }
        match self.try_lock(partition.as_deref()) {
            Ok(Some(id)) => Call::Now(Ok(id)),
            Ok(None) => {
                let e = self.clone();
                blocking(move || SqliteEngine::lock_blocking(&e, partition.as_deref()))
            }
            Err(err) => Call::Now(Err(err)),
        }
    }

    fn unlock(&self, lease: u32, commit: bool) -> Call<()> {
        SqliteEngine::unlock(self, lease, commit).into()
    }

    fn hold(&self, lease: u32) -> Call<()> {
        SqliteEngine::hold(self, lease).into()
    }

    fn flush(&self) -> Call<bool> {
        SqliteEngine::flush(self).into()
    }

    fn is_held(&self, lease: u32) -> bool {
        SqliteEngine::is_held(self, lease)
    }

    fn arm_faults(&self, commit: bool, rollback: bool) -> crate::Result<()> {
        SqliteEngine::arm_faults(self, commit, rollback)
    }

    fn ensure_schema(
        &self, lease: u32, schema: Schema, declarations: Vec<CheckpointDeclaration>, now_ms: i64,
    ) -> Call<bool> {
        // The first ensureSchema of a file an older version wrote may repair
        // its layout (an index built over every row of a table).
        leased_on_worker(self, lease, move |e| {
            SqliteEngine::ensure_schema(e, lease, schema, &declarations, now_ms)
        })
    }

    fn restore_layout(&self, lease: u32) -> Call<Vec<String>> {
        // Index builds over every row, as a repair's.
        leased_on_worker(self, lease, move |e| SqliteEngine::restore_layout(e, lease))
    }
}

impl Log for Arc<SqliteEngine> {
    fn touch_partition(
        &self, lease: u32, p: String, at_ms: i64, epoch: String,
    ) -> Call<RegistryEntry> {
        SqliteEngine::touch_partition(self, lease, &p, at_ms, &epoch).into()
    }

    fn rotate_partition_log_epoch(
        &self, lease: u32, p: String, epoch: String, at_ms: i64,
    ) -> Call<RegistryEntry> {
        SqliteEngine::rotate_partition_log_epoch(self, lease, &p, &epoch, at_ms).into()
    }

    fn list_partition_registry(&self) -> Call<Vec<RegistryEntry>> {
        SqliteEngine::list_partition_registry(self).into()
    }

    fn get_partition_log_epoch(&self, p: String) -> Call<Option<String>> {
        SqliteEngine::get_partition_log_epoch(self, &p).into()
    }

    fn get_max_commit_seq(&self, p: String) -> Call<i64> {
        SqliteEngine::get_max_commit_seq(self, &p).into()
    }

    fn get_horizon_seq(&self, p: String) -> Call<i64> {
        SqliteEngine::get_horizon_seq(self, &p).into()
    }

    fn set_horizon_seq(&self, lease: u32, p: String, seq: i64) -> Call<()> {
        SqliteEngine::set_horizon_seq(self, lease, &p, seq).into()
    }

    fn prune_commits_through(
        &self, lease: u32, p: String, target: PruneTarget,
    ) -> Call<PruneResult> {
        SqliteEngine::prune_commits_through(self, lease, &p, target).into()
    }

    fn get_commit_seq_before(&self, p: String, before_ms: i64) -> Call<i64> {
        SqliteEngine::get_commit_seq_before(self, &p, before_ms).into()
    }
}

impl Reads for Arc<SqliteEngine> {
    fn get_row(&self, p: String, table: String, row_id: String) -> Call<Option<StoredRow>> {
        SqliteEngine::get_row(self, &p, &table, &row_id).into()
    }

    fn get_push_result(
        &self, p: String, client_id: String, commit_id: String,
    ) -> Call<Option<String>> {
        SqliteEngine::get_push_result(self, &p, &client_id, &commit_id).into()
    }

    fn read_commit_window(&self, p: String, window: Window) -> Call<Vec<StoredCommit>> {
        // One scope value (read in index order, no sort), and at most
        // NOW_CANDIDATES candidate commits: commit seqs are dense, so a
        // window's candidates lie among its `throughSeq - afterSeq` seqs,
        // a bound known without reading anything (a live pull that is
        // little behind).
        let few = window.limit_changes <= NOW_CANDIDATES
            || window.through_seq.saturating_sub(window.after_seq) <= NOW_CANDIDATES;
        if few && window.filter.probe().is_some_and(|(_, v)| v.len() == 1) {
            let q = crate::core::window::WindowQuery {
                page: Some(window.limit_changes.min(NOW_CANDIDATES)),
                ..window.query()
            };
            let r = self.read_snapshot(|c| {
                super::window::read_commit_window_within(
                    c,
                    &p,
                    &q,
                    super::budget::Budget::within(NOW_ROWS, NOW_BYTES),
                )
            });
            match r {
                Err(e) if super::budget::is_over_budget(&e) => {}
                r => return Call::Now(r),
            }
        }
        let e = self.clone();
        blocking(move || SqliteEngine::read_commit_window(&e, &p, &window.query()))
    }

    fn latest_scoped_change_seq(&self, p: String, table: String, filter: ScopeFilter) -> Call<i64> {
        SqliteEngine::latest_scoped_change_seq(self, &p, &table, &filter).into()
    }

    fn scan_rows(
        &self, p: String, table: String, filter: ScopeFilter, after_row_id: String, limit: i64,
    ) -> Call<Vec<StoredRow>> {
        // An unknown table fails before any work is queued.
        if let Err(err) = self.loaded().schema.table(&table) {
            return Call::Now(Err(err));
        }
        // As windows: a small page on one scope value runs here.
        if filter.probe().is_some_and(|(_, v)| v.len() == 1) {
            let small = limit <= NOW_CANDIDATES;
            let r = self.table_sql(&table, |t, sql| {
                self.read_snapshot(|c| {
                    if !small
                        && !super::rows::few_candidates(
                            c,
                            &t.name,
                            &p,
                            &filter,
                            &after_row_id,
                            NOW_CANDIDATES,
                        )?
                    {
                        return Ok(None);
                    }
                    super::rows::scan_rows_within(
                        c,
                        t,
                        sql,
                        &p,
                        &filter,
                        &after_row_id,
                        limit,
                        super::budget::Budget::within(NOW_ROWS, NOW_BYTES),
                    )
                    .map(Some)
                })
            });
            match r {
                Ok(None) => {}
                Err(e) if super::budget::is_over_budget(&e) => {}
                r => return Call::Now(r.map(Option::unwrap_or_default)),
            }
        }
        let e = self.clone();
        blocking(move || SqliteEngine::scan_rows(&e, &p, &table, &filter, &after_row_id, limit))
    }

    fn scan_rows_by_index(
        &self, p: String, table: String, index: String, values: Option<Vec<Value>>,
        after_row_id: String, limit: f64,
    ) -> Call<Vec<StoredRow>> {
        SqliteEngine::scan_rows_by_index(
            self,
            &p,
            &table,
            &index,
            values.as_deref(),
            &after_row_id,
            limit,
        )
        .into()
    }

    fn query_authoritative(
        &self, p: String, request: Request, params: Vec<Value>, declared: Vec<String>,
        gate_running: Option<i64>,
    ) -> Call<QueryOutput> {
        // Tried here unless recent runs of its text outgrew the budget
        // (`super::query::Placement`); a run past NOW_STEPS goes off-thread.
        if let Some(r) = self.try_query_authoritative_now(
            &p,
            &request,
            &params,
            &declared,
            gate_running,
            NOW_STEPS,
        ) {
            return Call::Now(r);
        }
        let e = self.clone();
        blocking(move || {
            SqliteEngine::query_authoritative(&e, &p, &request, &params, &declared, gate_running)
        })
    }
}

impl Checkpoints for Arc<SqliteEngine> {
    fn read_serve_gate(&self, p: String, running: i64) -> Call<ServeGate> {
        SqliteEngine::read_serve_gate(self, &p, running).into()
    }

    fn read_checkpoints(&self, p: String) -> Call<Vec<Checkpoint>> {
        SqliteEngine::read_checkpoints(self, &p).into()
    }

    fn writer_fence_allows(&self, p: String, version: i64) -> Call<bool> {
        SqliteEngine::writer_fence_allows(self, &p, version).into()
    }

    fn declare_checkpoint(
        &self, lease: u32, d: CheckpointDeclaration, now_ms: i64,
    ) -> Call<Checkpoint> {
        SqliteEngine::declare_checkpoint(self, lease, &d, now_ms).into()
    }

    fn claim_checkpoint(
        &self, lease: u32, p: String, name: String, schema_version: i64, now_ms: i64,
    ) -> Call<Checkpoint> {
        SqliteEngine::claim_checkpoint(self, lease, &p, &name, schema_version, now_ms).into()
    }

    fn advance_checkpoint(
        &self, lease: u32, p: String, name: String, g: CheckpointProgress,
    ) -> Call<bool> {
        SqliteEngine::advance_checkpoint(self, lease, &p, &name, &g).into()
    }

    fn source_coverage_seq(&self, p: String, tables: Vec<String>) -> Call<i64> {
        SqliteEngine::source_coverage_seq(self, &p, &tables).into()
    }

    fn has_source_changes_above(
        &self, p: String, tables: Vec<String>, seq: i64,
    ) -> Call<SourceState> {
        SqliteEngine::has_source_changes_above(self, &p, &tables, seq).into()
    }

    fn activate_checkpoint(
        &self, lease: u32, p: String, name: String, owner_epoch: i64, watermark: i64,
        sources: Vec<String>, now_ms: i64,
    ) -> Call<Activation> {
        SqliteEngine::activate_checkpoint(
            self,
            lease,
            &p,
            &name,
            owner_epoch,
            watermark,
            &sources,
            now_ms,
        )
        .into()
    }
}

impl Clients for Arc<SqliteEngine> {
    fn get_client_record(&self, p: String, client_id: String) -> Call<Option<ClientRecord>> {
        SqliteEngine::get_client_record(self, &p, &client_id).into()
    }

    fn list_client_records(&self, p: String) -> Call<Vec<ClientRecord>> {
        SqliteEngine::list_client_records(self, &p).into()
    }

    fn put_client_record(&self, lease: u32, p: String, record: ClientRecord) -> Call<()> {
        SqliteEngine::put_client_record(self, lease, &p, &record).into()
    }

    fn list_client_cursors(&self, p: String) -> Call<Vec<ClientCursor>> {
        SqliteEngine::list_client_cursors(self, &p).into()
    }

    fn advance_client_cursor(&self, lease: u32, p: String, a: CursorAdvance) -> Call<()> {
        let guard = a
            .guard
            .as_ref()
            .map(|(actor, epoch)| (actor.as_str(), epoch.as_str()));
        SqliteEngine::advance_client_cursor(self, lease, &p, &a.client_id, guard, a.cursor, a.at_ms)
            .into()
    }

    fn get_active_client_cursor_floor(&self, p: String, cutoff_ms: i64) -> Call<Option<i64>> {
        SqliteEngine::get_active_client_cursor_floor(self, &p, cutoff_ms).into()
    }
}

impl Reactions for Arc<SqliteEngine> {
    fn claim_reactions(&self, lease: u32, p: String, q: ClaimQuery) -> Call<Vec<StoredReaction>> {
        SqliteEngine::claim_reactions(self, lease, &p, &q).into()
    }

    fn complete_reaction(
        &self, lease: u32, p: String, key: String, owner: String, at_ms: i64,
    ) -> Call<bool> {
        SqliteEngine::complete_reaction(self, lease, &p, &key, &owner, at_ms).into()
    }

    fn extend_reaction_lease(
        &self, lease: u32, p: String, key: String, owner: String, at_ms: i64,
    ) -> Call<bool> {
        SqliteEngine::extend_reaction_lease(self, lease, &p, &key, &owner, at_ms).into()
    }

    fn fail_reaction(&self, lease: u32, p: String, key: String, u: FailureUpdate) -> Call<bool> {
        SqliteEngine::fail_reaction(self, lease, &p, &key, &u).into()
    }

    fn retry_reaction(&self, lease: u32, p: String, key: String, now_ms: i64) -> Call<bool> {
        SqliteEngine::retry_reaction(self, lease, &p, &key, now_ms).into()
    }

    fn get_reaction(&self, p: String, key: String) -> Call<Option<StoredReaction>> {
        SqliteEngine::get_reaction(self, &p, &key).into()
    }

    fn list_reactions(
        &self, p: String, statuses: Vec<String>, types: Vec<String>, limit: i64,
    ) -> Call<Vec<StoredReaction>> {
        SqliteEngine::list_reactions(self, &p, &statuses, &types, limit).into()
    }

    fn prune_reactions(&self, lease: u32, p: String, q: PruneQuery) -> Call<PrunedCounts> {
        SqliteEngine::prune_reactions(self, lease, &p, &q).into()
    }
}

impl Admin for Arc<SqliteEngine> {
    fn list_commit_metadata(
        &self, p: String, after_seq: i64, limit: i64, table: Option<String>,
    ) -> Call<Vec<CommitMetadata>> {
        SqliteEngine::list_commit_metadata(self, &p, after_seq, limit, table.as_deref()).into()
    }

    fn scope_activity(
        &self, p: String, variable: String, value: String, limit: i64,
    ) -> Call<Vec<ScopeActivity>> {
        SqliteEngine::scope_activity(self, &p, &variable, &value, limit).into()
    }

    fn get_row_scopes(
        &self, p: String, table: String, row_id: String,
    ) -> Call<Option<(i64, String)>> {
        SqliteEngine::get_row_scopes(self, &p, &table, &row_id).into()
    }

    fn list_rows_referencing_blob(
        &self, p: String, blob_id: String,
    ) -> Call<Vec<BlobReferencingRow>> {
        SqliteEngine::list_rows_referencing_blob(self, &p, &blob_id).into()
    }

    fn list_referenced_blob_ids(&self, p: String) -> Call<Vec<String>> {
        SqliteEngine::list_referenced_blob_ids(self, &p).into()
    }
}

impl Transaction for Arc<SqliteEngine> {
    fn tx_get_row(&self, lease: u32, table: String, row_id: String) -> Call<Option<StoredRow>> {
        SqliteEngine::tx_get_row(self, lease, &table, &row_id).into()
    }

    fn tx_get_tombstone_seq(&self, lease: u32, table: String, row_id: String) -> Call<Option<i64>> {
        SqliteEngine::tx_get_tombstone_seq(self, lease, &table, &row_id).into()
    }

    fn tx_clear_tombstone(&self, lease: u32, table: String, row_id: String) -> Call<()> {
        SqliteEngine::tx_clear_tombstone(self, lease, &table, &row_id).into()
    }

    fn tx_get_push_result(
        &self, lease: u32, client_id: String, commit_id: String,
    ) -> Call<Option<String>> {
        SqliteEngine::tx_get_push_result(self, lease, &client_id, &commit_id).into()
    }

    fn tx_scan_rows(
        &self, lease: u32, table: String, filter: ScopeFilter, after_row_id: String, limit: i64,
    ) -> Call<Vec<StoredRow>> {
        SqliteEngine::tx_scan_rows(self, lease, &table, &filter, &after_row_id, limit).into()
    }

    fn tx_scan_rows_by_index(
        &self, lease: u32, table: String, index: String, values: Option<Vec<Value>>,
        after_row_id: String, limit: f64,
    ) -> Call<Vec<StoredRow>> {
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

    fn tx_lock_partition_for_push(&self, lease: u32) -> Call<()> {
        SqliteEngine::tx_lock_partition_for_push(self, lease).into()
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
        &self, lease: u32, table: String, row: StoredRow, op_index: Option<u32>,
    ) -> Call<()> {
        SqliteEngine::tx_upsert_row(self, lease, &table, &row, op_index).into()
    }

    fn tx_delete_row(&self, lease: u32, table: String, row_id: String) -> Call<()> {
        SqliteEngine::tx_delete_row(self, lease, &table, &row_id).into()
    }

    fn tx_append_commit(&self, lease: u32, commit: NewCommit) -> Call<i64> {
        SqliteEngine::tx_append_commit(self, lease, &commit).into()
    }

    fn tx_put_push_result(
        &self, lease: u32, client_id: String, commit_id: String, result_json: String,
    ) -> Call<()> {
        SqliteEngine::tx_put_push_result(self, lease, &client_id, &commit_id, &result_json).into()
    }

    fn tx_set_blob_refs(
        &self, lease: u32, table: String, row_id: String, blob_ids: Vec<String>,
    ) -> Call<()> {
        SqliteEngine::tx_set_blob_refs(self, lease, &table, &row_id, &blob_ids).into()
    }

    fn tx_read_serve_gate(&self, lease: u32, running: i64) -> Call<ServeGate> {
        SqliteEngine::tx_read_serve_gate(self, lease, running).into()
    }

    fn tx_advance_checkpoint(&self, lease: u32, name: String, g: CheckpointProgress) -> Call<bool> {
        SqliteEngine::tx_advance_checkpoint(self, lease, &name, &g).into()
    }

    fn tx_enqueue_reactions(&self, lease: u32, reactions: Vec<NewReaction>) -> Call<()> {
        SqliteEngine::tx_enqueue_reactions(self, lease, &reactions).into()
    }

    fn tx_prefetch_rows(&self, lease: u32, table: String, row_ids: Vec<String>) -> Call<Prefetch> {
        let ids: Vec<&str> = row_ids.iter().map(String::as_str).collect();
        // The write lock is held: nothing else changes these rows.
        SqliteEngine::tx_prefetch_rows(self, lease, &table, &ids)
            .map(|rows| Prefetch { rows, stable: true })
            .into()
    }
}
