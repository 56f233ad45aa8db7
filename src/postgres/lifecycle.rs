//! The `Lifecycle` area on PostgreSQL: close, health, leases and the
//! schema. Every member is a round trip, so every answer is a future that
//! owns its arguments (`handle::pg!`). Storage-level writes run in their own
//! transaction and ignore the lease.

use super::error::map_err;
use super::handle::pg;
use super::handle::PgEngine;
use super::run::{read, write};
use super::{schema_sync, tx::upsert};
use crate::core::error::Result;
use crate::core::model::*;
use crate::core::schema::Schema;
use crate::seam::{Call, Lifecycle};
use std::sync::Arc;

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

    /// Test hook: on PostgreSQL it arms the next rollback that runs after
    /// a registered query's answer (`PgEngine::arm_trailing_fault`):
    /// `rollback` makes it fail, `commit` holds it 2 s first.
    fn arm_faults(&self, commit: bool, rollback: bool) -> crate::Result<()> {
        self.arm_trailing_fault(rollback, commit);
        Ok(())
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
}
