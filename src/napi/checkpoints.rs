//! RFC 0007 members: the serve gate and writer fence, and the checkpoint
//! lifecycle (declare, claim, advance in both forms, source checks,
//! activation).

use super::args::At;
use super::convert::{int, JsDeclaration};
use super::records::Gate;
use super::reply::Reply;
use super::storage::NativeEngine;
use crate::core::model::{Checkpoint, CheckpointProgress};
use napi_derive::napi;

fn progress(
    owner_epoch: f64, watermark: f64, observed_rows: f64, now_ms: f64,
) -> crate::Result<CheckpointProgress> {
    Ok(CheckpointProgress {
        owner_epoch: int(owner_epoch, "ownerEpoch")?,
        watermark: int(watermark, "watermark")?,
        observed_rows: int(observed_rows, "observedRows")?,
        now_ms: int(now_ms, "nowMs")?,
    })
}

#[napi]
impl NativeEngine {
    #[napi(ts_return_type = "Gate | Promise<Gate>")]
    pub fn read_serve_gate(&self, partition: String, running: f64) -> Reply<Gate> {
        self.serve_gate_at(At::Committed(partition), running)
    }

    #[napi(ts_return_type = "Gate | Promise<Gate>")]
    pub fn tx_read_serve_gate(&self, lease: u32, running: f64) -> Reply<Gate> {
        self.serve_gate_at(At::Tx(lease), running)
    }

    #[napi(ts_return_type = "boolean | Promise<boolean>")]
    pub fn writer_fence_allows(&self, partition: String, version: f64) -> Reply<bool> {
        self.run("writerFenceAllows", |e| {
            Ok(e.writer_fence_allows(partition, int(version, "writerVersion")?))
        })
    }

    #[napi(ts_return_type = "Checkpoint | Promise<Checkpoint>")]
    pub fn declare_checkpoint(
        &self, lease: u32, declaration: JsDeclaration, now_ms: f64,
    ) -> Reply<Checkpoint> {
        self.run("declareCheckpoint", |e| {
            let now = int(now_ms, "nowMs")?;
            Ok(e.declare_checkpoint(lease, declaration.into_model()?, now))
        })
    }

    #[napi(ts_return_type = "Checkpoint | Promise<Checkpoint>")]
    pub fn claim_checkpoint(
        &self, lease: u32, partition: String, name: String, schema_version: f64, now_ms: f64,
    ) -> Reply<Checkpoint> {
        self.run("claimCheckpoint", |e| {
            let version = int(schema_version, "schemaVersion")?;
            let now = int(now_ms, "nowMs")?;
            Ok(e.claim_checkpoint(lease, partition, name, version, now))
        })
    }

    /// `partition` absent: the transaction form (`lease` is its lease).
    #[napi(ts_return_type = "boolean | Promise<boolean>")]
    #[allow(clippy::too_many_arguments)]
    pub fn advance_checkpoint(
        &self, lease: u32, partition: Option<String>, name: String, owner_epoch: f64,
        watermark: f64, observed_rows: f64, now_ms: f64,
    ) -> Reply<bool> {
        self.run("advanceCheckpoint", |e| {
            let g = progress(owner_epoch, watermark, observed_rows, now_ms)?;
            Ok(match partition {
                Some(p) => e.advance_checkpoint(lease, p, name, g),
                None => e.tx_advance_checkpoint(lease, name, g),
            })
        })
    }

    #[napi(ts_return_type = "SourceState | Promise<SourceState>")]
    pub fn has_source_changes_above(
        &self, partition: String, tables: Vec<String>, seq: f64,
    ) -> Reply<String> {
        self.run("hasSourceChangesAbove", |e| {
            let seq = int(seq, "seq")?;
            Ok(e.has_source_changes_above(partition, tables, seq)
                .map(|s| s.as_str().to_owned()))
        })
    }

    #[napi(ts_return_type = "Activation | Promise<Activation>")]
    #[allow(clippy::too_many_arguments)]
    pub fn activate_checkpoint(
        &self, lease: u32, partition: String, name: String, owner_epoch: f64, watermark: f64,
        sources: Vec<String>, now_ms: f64,
    ) -> Reply<String> {
        self.run("activateCheckpoint", |e| {
            let (epoch, mark) = (
                int(owner_epoch, "ownerEpoch")?,
                int(watermark, "watermark")?,
            );
            let now = int(now_ms, "nowMs")?;
            Ok(
                e.activate_checkpoint(lease, partition, name, epoch, mark, sources, now)
                    .map(|a| a.as_str().to_owned()),
            )
        })
    }
}

impl NativeEngine {
    fn serve_gate_at(&self, at: At, running: f64) -> Reply<Gate> {
        self.run("readServeGate", |e| {
            let running = int(running, "runningSchemaVersion")?;
            let gate = match at {
                At::Committed(p) => e.read_serve_gate(p, running),
                At::Tx(lease) => e.tx_read_serve_gate(lease, running),
            };
            Ok(gate.map(Gate::from))
        })
    }
}
