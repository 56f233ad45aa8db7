//! `NativeEngine`: one storage's engine as the JS layer sees it, whichever
//! engine the url names. Each member converts its arguments, calls the
//! engine once and hands back a [`Reply`]: a value when the engine answered
//! at once, else a Promise. Members taking `lease` run under a lease from
//! `begin` (see `crate::seam`). Checkpoints, reactions, admin reads and
//! registered queries are in the sibling files, as further `impl` blocks.

use super::args::{At, Buf, Str};
use super::convert::*;
use super::lifecycle;
use super::packed::{self, Packed, Records};
use super::panicked;
use super::reply::Reply;
use super::rowpack::{unpack_changes, RowTuple};
use crate::core::model::{
    ClientRecord, CursorAdvance, NewCommit, PruneResult, RegistryEntry, StoredRow,
};
use crate::core::schema::Schema;
use crate::core::scope::ScopeFilter;
use crate::core::window::Window;
use crate::open::Options;
use crate::seam::{Call, Engine};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use std::panic::{catch_unwind, AssertUnwindSafe};

#[napi(object, object_to_js = false)]
pub struct EngineOptions {
    pub url: Option<String>,
    pub synchronous: Option<String>,
    pub busy_timeout_ms: Option<f64>,
    pub query_timeout_ms: Option<f64>,
    pub max_result_rows: Option<f64>,
    pub max_result_bytes: Option<f64>,
    pub max_connections: Option<f64>,
    pub schema: Option<String>,
    pub connect_timeout_ms: Option<f64>,
    pub pooling: Option<String>,
}

impl EngineOptions {
    fn into_options(self) -> crate::Result<Options> {
        Ok(Options {
            url: self.url,
            synchronous: self.synchronous,
            busy_timeout_ms: self
                .busy_timeout_ms
                .map(|v| non_negative(v, "busyTimeoutMs"))
                .transpose()?,
            query_timeout: self
                .query_timeout_ms
                .map(|v| query_timeout(Some(v)))
                .transpose()?,
            max_result_rows: self
                .max_result_rows
                .map(|v| positive_count(v, "maxResultRows"))
                .transpose()?,
            max_result_bytes: self
                .max_result_bytes
                .map(|v| positive_count(v, "maxResultBytes"))
                .transpose()?,
            max_connections: self
                .max_connections
                .map(|v| non_negative(v, "maxConnections"))
                .transpose()?
                .map(|v| v.min(u32::MAX as i64) as u32),
            schema: self.schema,
            connect_timeout: self
                .connect_timeout_ms
                .map(|v| positive_ms(v, "connectTimeoutMs"))
                .transpose()?,
            pooling: self.pooling,
        })
    }
}

#[napi]
pub struct NativeEngine {
    engine: Option<Box<dyn Engine>>,
    /// The same engine by its type when it is SQLite, for `storage.db`.
    sqlite: Option<std::sync::Arc<crate::sqlite::SqliteEngine>>,
    /// The configuration when it is PostgreSQL, for `copyTo`.
    postgres: Option<crate::postgres::Config>,
}

impl Drop for NativeEngine {
    fn drop(&mut self) {
        // Released first, so the engine's last reference goes with
        // `dispose` (which closes it off the JS thread).
        self.sqlite = None;
        if let Some(engine) = self.engine.take() {
            lifecycle::dispose(engine);
        }
    }
}

fn filter(json: &str) -> crate::Result<ScopeFilter> {
    ScopeFilter::parse(json)
}

impl NativeEngine {
    fn engine(&self) -> &dyn Engine {
        self.engine.as_deref().expect("engine present until drop")
    }

    /// The SQLite engine behind this storage, for `storage.db`.
    pub(super) fn sqlite_engine(&self) -> Option<std::sync::Arc<crate::sqlite::SqliteEngine>> {
        self.sqlite.clone()
    }

    /// The PostgreSQL engine's configuration, for `copyTo`.
    pub(super) fn postgres_config(&self) -> Option<crate::postgres::Config> {
        self.postgres.clone()
    }

    pub(super) fn with_engine<T>(&self, f: impl FnOnce(&dyn Engine) -> T) -> T {
        f(self.engine())
    }

    /// Runs one member: `f` converts the arguments and calls the engine.
    /// A panic on the way becomes an error, never an unwind into Node.
    pub(super) fn run<T: Send + 'static>(
        &self, member: &'static str, f: impl FnOnce(&dyn Engine) -> crate::Result<Call<T>>,
    ) -> Reply<T> {
        let started = crate::core::telemetry::call_started();
        let engine = self.engine();
        let call = match catch_unwind(AssertUnwindSafe(|| f(engine))) {
            Ok(Ok(call)) => call,
            Ok(Err(e)) => Call::Now(Err(e)),
            Err(p) => Call::Now(Err(panicked(p))),
        };
        Reply::new(call, member, engine.name(), started)
    }
}

#[napi]
impl NativeEngine {
    /// Validates the options; the database opens on first use.
    #[napi(constructor)]
    pub fn new(env: Env, options: EngineOptions) -> Result<Self> {
        lifecycle::hook_env(&env)?;
        super::guard(|| {
            let opened = crate::open::open(options.into_options()?)?;
            Ok(NativeEngine {
                engine: Some(opened.engine),
                sqlite: opened.sqlite,
                postgres: opened.postgres,
            })
        })
    }

    /// `"sqlite"` or `"postgres"`.
    #[napi(getter)]
    pub fn kind(&self) -> &'static str {
        self.engine().name()
    }

    /// True when storage-level writes need a lease from `begin(null)`.
    #[napi(getter)]
    pub fn exclusive_writes(&self) -> bool {
        self.engine().exclusive_writes()
    }

    #[napi(ts_return_type = "void | Promise<void>")]
    pub fn close(&self) -> Reply<()> {
        self.run("close", |e| Ok(e.close()))
    }

    // ---- leases and transactions ------------------------------------------------

    /// A lease number (a transaction on `partition`, or with `null` a
    /// storage-level write lease); a Promise when it must wait.
    #[napi(ts_return_type = "number | Promise<number>")]
    pub fn begin(&self, partition: Option<String>) -> Reply<u32> {
        self.run("begin", |e| Ok(e.begin(partition)))
    }

    #[napi(ts_return_type = "void | Promise<void>")]
    pub fn unlock(&self, lease: u32, commit: bool) -> Reply<()> {
        self.run(if commit { "commit" } else { "rollback" }, |e| {
            Ok(e.unlock(lease, commit))
        })
    }

    /// Group commit: ends the lease, its work staged in the open
    /// transaction until `flush` (see `SqliteEngine::hold`).
    #[napi(ts_return_type = "void | Promise<void>")]
    pub fn hold(&self, lease: u32) -> Reply<()> {
        self.run("hold", |e| Ok(e.hold(lease)))
    }

    /// Makes held leases durable; `false` when it could not yet.
    #[napi(ts_return_type = "boolean | Promise<boolean>")]
    pub fn flush(&self) -> Reply<bool> {
        self.run("flush", |e| Ok(e.flush()))
    }

    #[napi]
    pub fn is_held(&self, lease: u32) -> bool {
        self.engine().is_held(lease)
    }

    /// Test hook (not part of the package's API): the next COMMIT and/or
    /// ROLLBACK of the SQLite writer connection fail (PostgreSQL: see
    /// `PgEngine::arm_trailing_fault`).
    #[napi]
    pub fn test_arm_faults(&self, commit: bool, rollback: bool) -> Result<()> {
        super::guard(|| self.engine().arm_faults(commit, rollback))
    }

    // ---- schema and partitions --------------------------------------------------

    #[napi(ts_return_type = "boolean | Promise<boolean>")]
    pub fn ensure_schema(
        &self, lease: u32, schema_json: String, declarations: Vec<JsDeclaration>, now_ms: f64,
    ) -> Reply<bool> {
        self.run("ensureSchema", |e| {
            let schema = Schema::parse(&schema_json)?;
            let decls = declarations
                .into_iter()
                .map(JsDeclaration::into_model)
                .collect::<crate::Result<Vec<_>>>()?;
            Ok(e.ensure_schema(lease, schema, decls, int(now_ms, "nowMs")?))
        })
    }

    /// Swap back: the declared indexes a layout repair replaced get the
    /// form the older version created; the names restored.
    #[napi(ts_return_type = "string[] | Promise<string[]>")]
    pub fn restore_layout(&self, lease: u32) -> Reply<Vec<String>> {
        self.run("restoreLayout", |e| Ok(e.restore_layout(lease)))
    }

    #[napi]
    pub fn schema_version(&self) -> i64 {
        self.engine().schema_version()
    }

    /// Records an authentication of `partition` at `at_ms`. With `rotate`,
    /// `epoch` replaces the partition's log epoch (`rotatePartitionLogEpoch`);
    /// without, it is only the epoch of a partition seen for the first time.
    #[napi(ts_return_type = "RegistryEntry | Promise<RegistryEntry>")]
    pub fn touch_partition(
        &self, lease: u32, partition: String, epoch: String, at_ms: f64, rotate: bool,
    ) -> Reply<RegistryEntry> {
        let member = if rotate {
            "rotatePartitionLogEpoch"
        } else {
            "touchPartition"
        };
        self.run(member, |e| {
            let at = int(at_ms, "authenticatedAtMs")?;
            Ok(if rotate {
                e.rotate_partition_log_epoch(lease, partition, epoch, at)
            } else {
                e.touch_partition(lease, partition, at, epoch)
            })
        })
    }

    // ---- the log ------------------------------------------------------------------

    #[napi(ts_return_type = "void | Promise<void>")]
    pub fn set_horizon_seq(&self, lease: u32, partition: String, seq: f64) -> Reply<()> {
        self.run("setHorizonSeq", |e| {
            Ok(e.set_horizon_seq(lease, partition, non_negative(seq, "seq")?))
        })
    }

    /// `log_epoch` absent selects the legacy 0.15.x form.
    #[napi(ts_return_type = "JsPruneResult | Promise<JsPruneResult>")]
    pub fn prune_commits_through(
        &self, lease: u32, partition: String, through_seq: f64, log_epoch: Option<String>,
    ) -> Reply<PruneResult> {
        self.run("pruneCommitsThrough", |e| {
            let target = prune_target(through_seq, log_epoch)?;
            Ok(e.prune_commits_through(lease, partition, target)
                .map(Into::into))
        })
    }

    #[napi(ts_return_type = "number | Promise<number>")]
    pub fn get_commit_seq_before(&self, partition: String, before_ms: f64) -> Reply<i64> {
        self.run("getCommitSeqBefore", |e| {
            Ok(e.get_commit_seq_before(partition, int(before_ms, "createdBeforeMs")?))
        })
    }

    // ---- reads --------------------------------------------------------------------

    #[napi(ts_return_type = "RowTuple | null | Promise<RowTuple | null>")]
    pub fn get_row(&self, partition: String, table: Str, row_id: Str) -> Reply<Option<RowTuple>> {
        self.get_row_at(At::Committed(partition), table, row_id)
    }

    #[napi(ts_return_type = "RowTuple | null | Promise<RowTuple | null>")]
    pub fn tx_get_row(&self, lease: u32, table: Str, row_id: Str) -> Reply<Option<RowTuple>> {
        self.get_row_at(At::Tx(lease), table, row_id)
    }

    #[napi(ts_return_type = "string | null | Promise<string | null>")]
    pub fn get_push_result(
        &self, partition: String, client_id: Str, commit_id: Str,
    ) -> Reply<Option<String>> {
        self.get_push_result_at(At::Committed(partition), client_id, commit_id)
    }

    #[napi(ts_return_type = "string | null | Promise<string | null>")]
    pub fn tx_get_push_result(
        &self, lease: u32, client_id: Str, commit_id: Str,
    ) -> Reply<Option<String>> {
        self.get_push_result_at(At::Tx(lease), client_id, commit_id)
    }

    #[napi(ts_return_type = "Records | Promise<Records>")]
    pub fn read_commit_window(
        &self, partition: String, table: String, filter_json: String, after_seq: f64,
        through_seq: f64, limit_changes: f64,
    ) -> Reply<Records> {
        self.run("readCommitWindow", |e| {
            let window = Window {
                table,
                filter: filter(&filter_json)?,
                after_seq: int(after_seq, "afterSeq")?,
                through_seq: int(through_seq, "throughSeq")?,
                limit_changes: int(limit_changes, "limitChanges")?,
            };
            Ok(e.read_commit_window(partition, window))
        })
    }

    #[napi(ts_return_type = "number | Promise<number>")]
    pub fn latest_scoped_change_seq(
        &self, partition: String, table: String, filter_json: String,
    ) -> Reply<i64> {
        self.run("latestScopedChangeSeq", |e| {
            Ok(e.latest_scoped_change_seq(partition, table, filter(&filter_json)?))
        })
    }

    #[napi(ts_return_type = "Records | Promise<Records>")]
    pub fn scan_rows(
        &self, partition: String, table: String, filter_json: String, after_row_id: String,
        limit: f64,
    ) -> Reply<Records> {
        self.scan_rows_at(
            At::Committed(partition),
            table,
            filter_json,
            after_row_id,
            limit,
        )
    }

    #[napi(ts_return_type = "Records | Promise<Records>")]
    pub fn tx_scan_rows(
        &self, lease: u32, table: String, filter_json: String, after_row_id: String, limit: f64,
    ) -> Reply<Records> {
        self.scan_rows_at(At::Tx(lease), table, filter_json, after_row_id, limit)
    }

    // ---- clients ------------------------------------------------------------------

    #[napi(ts_return_type = "void | Promise<void>")]
    #[allow(clippy::too_many_arguments)]
    pub fn put_client_record(
        &self, lease: u32, partition: String, client_id: String, actor_id: String,
        wire_version: f64, cursor: f64, updated_at_ms: f64, subscriptions_json: String,
    ) -> Reply<()> {
        self.run("putClientRecord", |e| {
            let record = ClientRecord {
                client_id,
                actor_id,
                wire_version: int(wire_version, "wireVersion")?,
                cursor: int(cursor, "cursor")?,
                updated_at_ms: int(updated_at_ms, "updatedAtMs")?,
                subscriptions_json,
            };
            Ok(e.put_client_record(lease, partition, record))
        })
    }

    /// With `actor_id` and `log_epoch`: the guarded realtime advance;
    /// without: `updateClientCursor`.
    #[napi(ts_return_type = "void | Promise<void>")]
    #[allow(clippy::too_many_arguments)]
    pub fn advance_client_cursor(
        &self, lease: u32, partition: String, client_id: String, actor_id: Option<String>,
        log_epoch: Option<String>, cursor: f64, updated_at_ms: f64,
    ) -> Reply<()> {
        self.run("advanceClientCursor", |e| {
            let advance = CursorAdvance {
                client_id,
                guard: actor_id.zip(log_epoch),
                cursor: int(cursor, "cursor")?,
                at_ms: int(updated_at_ms, "updatedAtMs")?,
            };
            Ok(e.advance_client_cursor(lease, partition, advance))
        })
    }

    #[napi(ts_return_type = "number | null | Promise<number | null>")]
    pub fn get_active_client_cursor_floor(
        &self, partition: String, cutoff_ms: f64,
    ) -> Reply<Option<i64>> {
        self.run("getActiveClientCursorFloor", |e| {
            Ok(e.get_active_client_cursor_floor(partition, int(cutoff_ms, "cutoffMs")?))
        })
    }

    // ---- the transaction ------------------------------------------------------------

    #[napi(ts_return_type = "void | Promise<void>")]
    #[allow(clippy::too_many_arguments)]
    pub fn tx_upsert_row(
        &self, lease: u32, table: Str, row_id: Str, server_version: f64, scopes_json: Str,
        payload: Buf, column_versions: Option<Buf>, op_index: Option<f64>,
    ) -> Reply<()> {
        self.run("tx.upsertRow", |e| {
            let op_index = op_index
                .map(|v| non_negative(v, "opIndex"))
                .transpose()?
                .map(|v| v as u32);
            let row = StoredRow {
                row_id: row_id.into_string(),
                server_version: int(server_version, "serverVersion")?,
                scopes_json: scopes_json.into_string(),
                payload: payload.to_vec(),
                column_versions: column_versions.map(|c| c.to_vec()),
            };
            Ok(e.tx_upsert_row(lease, table.into_string(), row, op_index))
        })
    }

    /// Changes arrive packed (see `rowpack::unpack_changes`).
    #[napi(ts_return_type = "number | Promise<number>")]
    #[allow(clippy::too_many_arguments)]
    pub fn tx_append_commit(
        &self, lease: u32, client_id: Str, client_commit_id: Str, actor_id: Str,
        created_at_ms: f64, changes: String, payloads: Buf,
    ) -> Reply<i64> {
        self.run("tx.appendCommit", |e| {
            let commit = NewCommit {
                client_id: client_id.into_string(),
                client_commit_id: client_commit_id.into_string(),
                actor_id: actor_id.into_string(),
                created_at_ms: int(created_at_ms, "createdAtMs")?,
                changes: unpack_changes(&changes, &payloads)?,
            };
            Ok(e.tx_append_commit(lease, commit))
        })
    }

    #[napi(ts_return_type = "void | Promise<void>")]
    pub fn tx_put_push_result(
        &self, lease: u32, client_id: Str, commit_id: Str, result_json: String,
    ) -> Reply<()> {
        self.run("tx.putPushResult", |e| {
            let (c, k) = (client_id.into_string(), commit_id.into_string());
            Ok(e.tx_put_push_result(lease, c, k, result_json))
        })
    }

    /// Rows and tombstones of `row_ids`, packed (see `packed::prefetched`),
    /// for the caller's cache.
    #[napi(ts_return_type = "Packed | Promise<Packed>")]
    pub fn tx_prefetch_rows(
        &self, lease: u32, table: String, row_ids: Vec<String>,
    ) -> Reply<Packed> {
        self.run("tx.prefetchRows", |e| {
            Ok(e.tx_prefetch_rows(lease, table, row_ids)
                .map(packed::prefetched))
        })
    }
}

/// The bodies of the members with a storage-level and a transaction form.
impl NativeEngine {
    fn get_row_at(&self, at: At, table: Str, row_id: Str) -> Reply<Option<RowTuple>> {
        self.run("getRow", |e| {
            let (t, r) = (table.into_string(), row_id.into_string());
            let row = match at {
                At::Committed(p) => e.get_row(p, t, r),
                At::Tx(lease) => e.tx_get_row(lease, t, r),
            };
            Ok(row.map(|row| row.map(RowTuple)))
        })
    }

    fn get_push_result_at(&self, at: At, client_id: Str, commit_id: Str) -> Reply<Option<String>> {
        self.run("getPushResult", |e| {
            let (c, k) = (client_id.into_string(), commit_id.into_string());
            Ok(match at {
                At::Committed(p) => e.get_push_result(p, c, k),
                At::Tx(lease) => e.tx_get_push_result(lease, c, k),
            })
        })
    }

    fn scan_rows_at(
        &self, at: At, table: String, filter_json: String, after_row_id: String, limit: f64,
    ) -> Reply<Records> {
        self.run("scanRows", |e| {
            let (filter, limit) = (filter(&filter_json)?, int(limit, "limit")?);
            // An empty filter is refused by the engines (`ScopeFilter::probe`).
            let rows = match at {
                At::Committed(p) => e.scan_rows(p, table, filter, after_row_id, limit),
                At::Tx(lease) => e.tx_scan_rows(lease, table, filter, after_row_id, limit),
            };
            // Packed by the engines as they read.
            Ok(rows)
        })
    }
}
