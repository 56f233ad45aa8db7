//! RFC 0007 checkpoint members on `SqliteHandle`: claim, advance (storage
//! and transaction forms), source coverage, the source-change check and
//! activation. `declareCheckpoint` and the gate reads are in `handle.rs`.

use super::convert::{int, JsCheckpoint};
use super::guard;
use super::handle::SqliteHandle;
use napi::bindgen_prelude::*;
use napi_derive::napi;

#[napi]
impl SqliteHandle {
    #[napi]
    pub fn claim_checkpoint(
        &self, lease: u32, partition: String, name: String, schema_version: f64, now_ms: f64,
    ) -> Result<JsCheckpoint> {
        guard(|| {
            let version = int(schema_version, "schemaVersion")?;
            let now = int(now_ms, "nowMs")?;
            Ok(self
                .engine
                .claim_checkpoint(lease, &partition, &name, version, now)?
                .into())
        })
    }

    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn advance_checkpoint(
        &self, lease: u32, partition: String, name: String, owner_epoch: f64, watermark: f64,
        observed_rows: f64, now_ms: f64,
    ) -> Result<bool> {
        guard(|| {
            let epoch = int(owner_epoch, "ownerEpoch")?;
            let watermark = int(watermark, "watermark")?;
            let observed = int(observed_rows, "observedRows")?;
            let now = int(now_ms, "nowMs")?;
            self.engine
                .advance_checkpoint(lease, &partition, &name, epoch, watermark, observed, now)
        })
    }

    #[napi]
    pub fn tx_advance_checkpoint(
        &self, lease: u32, name: String, owner_epoch: f64, watermark: f64, observed_rows: f64,
        now_ms: f64,
    ) -> Result<bool> {
        guard(|| {
            let epoch = int(owner_epoch, "ownerEpoch")?;
            let watermark = int(watermark, "watermark")?;
            let observed = int(observed_rows, "observedRows")?;
            let now = int(now_ms, "nowMs")?;
            self.engine
                .tx_advance_checkpoint(lease, &name, epoch, watermark, observed, now)
        })
    }

    #[napi]
    pub fn source_coverage_seq(&self, partition: String, tables: Vec<String>) -> Result<i64> {
        guard(|| self.engine.source_coverage_seq(&partition, &tables))
    }

    #[napi(ts_return_type = "'clean' | 'changed' | 'unverifiable'")]
    pub fn has_source_changes_above(
        &self, partition: String, tables: Vec<String>, seq: f64,
    ) -> Result<String> {
        guard(|| {
            let seq = int(seq, "seq")?;
            Ok(self
                .engine
                .has_source_changes_above(&partition, &tables, seq)?
                .as_str()
                .to_owned())
        })
    }

    #[napi(ts_return_type = "'activated' | 'stale' | 'unverifiable'")]
    #[allow(clippy::too_many_arguments)]
    pub fn activate_checkpoint(
        &self, lease: u32, partition: String, name: String, owner_epoch: f64, watermark: f64,
        sources: Vec<String>, now_ms: f64,
    ) -> Result<String> {
        guard(|| {
            let epoch = int(owner_epoch, "ownerEpoch")?;
            let watermark = int(watermark, "watermark")?;
            let now = int(now_ms, "nowMs")?;
            Ok(self
                .engine
                .activate_checkpoint(lease, &partition, &name, epoch, watermark, &sources, now)?
                .as_str()
                .to_owned())
        })
    }
}
