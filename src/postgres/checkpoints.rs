//! RFC 0007 checkpoint lifecycle beyond declaration on PostgreSQL
//! (storage-layout §14.3–§14.5): claim, the owner-epoch compare-and-set,
//! source coverage, the source-change check and activation under the
//! partition row lock. The decisions are `crate::core::checkpoint`'s.

use super::error::map_err;
use super::handle::PgEngine;
use super::log;
use super::meta;
use super::meta::{checkpoint_from, version_i32};
use super::run::{read, snapshot, write};
use crate::core::checkpoint::{fence_covers, Activation, SourceState};
use crate::core::error::{Error, Result};
use crate::core::model::{Checkpoint, CheckpointProgress};
use crate::core::model::{CheckpointDeclaration, ServeGate};
use crate::postgres::handle::pg;
use crate::seam::{Call, Checkpoints};
use sqlx::{PgConnection, Row};
use std::sync::Arc;

const CLAIM: &str = "UPDATE sync_backfill_checkpoints
   SET owner_epoch = owner_epoch + 1,
       state = CASE WHEN state = 'declared' THEN 'backfilling' ELSE state END,
       schema_version = $3,
       updated_at_ms = $4
 WHERE partition = $1 AND name = $2 AND state <> 'activated'
 RETURNING partition, name, schema_version, state, watermark, owner_epoch, observed_rows, updated_at_ms";

/// Counts RETURNING rows, as the in-tree storage does.
const ADVANCE: &str = "UPDATE sync_backfill_checkpoints
   SET watermark = $4, observed_rows = $5, updated_at_ms = $6
 WHERE partition = $1 AND name = $2 AND owner_epoch = $3
 RETURNING 1";

const FENCE_AND_VERSION: &str = "SELECT
   (SELECT required_writer_version FROM sync_writer_fence WHERE partition = $1),
   (SELECT schema_version FROM sync_backfill_checkpoints WHERE partition = $1 AND name = $2)";

const ACTIVATE: &str = "UPDATE sync_backfill_checkpoints
   SET state = 'activated', watermark = $4, updated_at_ms = $5
 WHERE partition = $1 AND name = $2 AND owner_epoch = $3 AND state <> 'activated'";

/// Newest retained change of the tables (backward scan of
/// `(partition, commit_seq, tbl, idx)` per table).
const COVERAGE: &str = "SELECT coalesce(max(s), 0)::bigint FROM unnest($2::text[]) AS t(tbl),
 LATERAL (SELECT commit_seq AS s FROM sync_changes
   WHERE partition = $1 AND tbl = t.tbl ORDER BY commit_seq DESC LIMIT 1) x";

const CHANGED_ABOVE: &str = "SELECT EXISTS (SELECT 1 FROM sync_changes
 WHERE partition = $1 AND commit_seq > $3 AND tbl = ANY($2))";

pub async fn claim(
    c: &mut PgConnection, partition: &str, name: &str, schema_version: i64, now_ms: i64,
) -> Result<Checkpoint> {
    let r = crate::postgres::stmt::query(CLAIM)
        .bind(partition)
        .bind(name)
        .bind(version_i32(schema_version)?)
        .bind(now_ms)
        .fetch_optional(&mut *c)
        .await
        .map_err(map_err)?
        .ok_or_else(|| Error::query("sync.storage.checkpoint_not_declared"))?;
    checkpoint_from(&r)
}

pub async fn advance(
    c: &mut PgConnection, partition: &str, name: &str, g: &CheckpointProgress,
) -> Result<bool> {
    let rows = crate::postgres::stmt::query(ADVANCE)
        .bind(partition)
        .bind(name)
        .bind(g.owner_epoch)
        .bind(g.watermark)
        .bind(g.observed_rows)
        .bind(g.now_ms)
        .fetch_all(&mut *c)
        .await
        .map_err(map_err)?;
    Ok(rows.len() == 1)
}

pub async fn source_coverage_seq(
    c: &mut PgConnection, partition: &str, tables: &[String],
) -> Result<i64> {
    if tables.is_empty() {
        return Ok(0);
    }
    crate::postgres::stmt::query_scalar(COVERAGE)
        .bind(partition)
        .bind(tables)
        .fetch_one(&mut *c)
        .await
        .map_err(map_err)
}

/// Horizon first, then the changes (inside the caller's snapshot).
pub async fn has_source_changes_above(
    c: &mut PgConnection, partition: &str, tables: &[String], seq: i64,
) -> Result<SourceState> {
    let horizon = log::horizon_seq(c, partition).await?;
    if tables.is_empty() {
        return Ok(SourceState::Clean);
    }
    let changed: bool = crate::postgres::stmt::query_scalar(CHANGED_ABOVE)
        .bind(partition)
        .bind(tables)
        .bind(seq)
        .fetch_one(&mut *c)
        .await
        .map_err(map_err)?;
    Ok(SourceState::decide(changed, horizon, seq))
}

/// Under the partition row lock, which the caller's transaction takes
/// first (storage-layout §14.5); nothing is written unless activated.
#[allow(clippy::too_many_arguments)]
pub async fn activate(
    c: &mut PgConnection, partition: &str, name: &str, owner_epoch: i64, watermark: i64,
    sources: &[String], now_ms: i64,
) -> Result<Activation> {
    log::lock_partition(c, partition).await?;
    let r = crate::postgres::stmt::query(FENCE_AND_VERSION)
        .bind(partition)
        .bind(name)
        .fetch_one(&mut *c)
        .await
        .map_err(map_err)?;
    let required: Option<i32> = r.try_get(0).map_err(map_err)?;
    let version: Option<i32> = r.try_get(1).map_err(map_err)?;
    if !fence_covers(required.map(i64::from), version.map(i64::from)) {
        return Err(Error::query("sync.storage.checkpoint_fence_missing"));
    }
    let state = has_source_changes_above(c, partition, sources, watermark).await?;
    if let Some(refused) = Activation::refused_by(state) {
        return Ok(refused);
    }
    let done = crate::postgres::stmt::query(ACTIVATE)
        .bind(partition)
        .bind(name)
        .bind(owner_epoch)
        .bind(watermark)
        .bind(now_ms)
        .execute(&mut *c)
        .await
        .map_err(map_err)?;
    Ok(Activation::from_changed(done.rows_affected()))
}

impl PgEngine {
    #[allow(clippy::too_many_arguments)]
    pub async fn activate_checkpoint(
        &self, partition: &str, name: &str, owner_epoch: i64, watermark: i64, sources: &[String],
        now_ms: i64,
    ) -> Result<Activation> {
        write!(self, |c| activate(
            c,
            partition,
            name,
            owner_epoch,
            watermark,
            sources,
            now_ms
        )
        .await)
    }
}

impl Checkpoints for Arc<PgEngine> {
    fn read_serve_gate(&self, partition: String, running: i64) -> Call<ServeGate> {
        pg!(self, |this| {
            read!(this, |c| meta::read_serve_gate(c, &partition, running)
                .await)
        })
    }

    fn read_checkpoints(&self, partition: String) -> Call<Vec<Checkpoint>> {
        pg!(self, |this| {
            read!(this, |c| meta::read_checkpoints(c, &partition).await)
        })
    }

    fn writer_fence_allows(&self, partition: String, version: i64) -> Call<bool> {
        pg!(self, |this| {
            read!(this, |c| meta::writer_fence_allows(c, &partition, version)
                .await)
        })
    }

    fn declare_checkpoint(
        &self, _lease: u32, d: CheckpointDeclaration, now_ms: i64,
    ) -> Call<Checkpoint> {
        pg!(self, |this| {
            write!(this, |c| meta::declare_checkpoint(c, &d, now_ms).await)
        })
    }

    fn claim_checkpoint(
        &self, _lease: u32, partition: String, name: String, schema_version: i64, now_ms: i64,
    ) -> Call<Checkpoint> {
        pg!(self, |this| {
            write!(this, |c| claim(
                c,
                &partition,
                &name,
                schema_version,
                now_ms
            )
            .await)
        })
    }

    fn advance_checkpoint(
        &self, _lease: u32, partition: String, name: String, g: CheckpointProgress,
    ) -> Call<bool> {
        pg!(self, |this| {
            write!(this, |c| advance(c, &partition, &name, &g).await)
        })
    }

    fn source_coverage_seq(&self, partition: String, tables: Vec<String>) -> Call<i64> {
        pg!(self, |this| {
            read!(this, |c| source_coverage_seq(c, &partition, &tables).await)
        })
    }

    fn has_source_changes_above(
        &self, partition: String, tables: Vec<String>, seq: i64,
    ) -> Call<SourceState> {
        pg!(self, |this| {
            snapshot!(this, |c| has_source_changes_above(
                c, &partition, &tables, seq
            )
            .await)
        })
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
