//! The `Lifecycle` area on SQLite: close, health, leases (`begin`,
//! `unlock`, group commit's `hold` and `flush`) and the schema. The lease
//! machinery itself is in `lease.rs`; the first write of a host and every
//! repair or migration run off the calling thread.

use super::schema_sync;
use super::storage::SqliteEngine;
use crate::core::error::Result;
use crate::core::model::*;
use crate::core::schema::Schema;
use crate::seam::{blocking, Call, Lifecycle};
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

impl SqliteEngine {
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
}
