//! JS-facing shapes and argument checks.

use crate::core::error::{Error, Result};
use crate::core::model::*;
use napi_derive::napi;

/// A JS number that must be a safe integer (NaN, fractions, ±Infinity and
/// values beyond 2^53 are refused, never truncated).
pub fn int(v: f64, name: &str) -> Result<i64> {
    if v.is_finite() && v.fract() == 0.0 && v.abs() <= MAX_SAFE_INTEGER as f64 {
        Ok(v as i64)
    } else {
        Err(Error::invalid(format!(
            "{name} must be a safe integer, got {v}"
        )))
    }
}

pub fn non_negative(v: f64, name: &str) -> Result<i64> {
    let i = int(v, name)?;
    if i < 0 {
        return Err(Error::invalid(format!("{name} must be ≥ 0, got {v}")));
    }
    Ok(i)
}

/// A count option (`maxResultRows`, `maxResultBytes`): an integer ≥ 1.
pub fn positive_count(v: f64, what: &str) -> Result<u64> {
    let n = int(v, what)?;
    if n < 1 {
        return Err(Error::invalid(format!("{what} must be ≥ 1, got {v}")));
    }
    Ok(n as u64)
}

/// `queryTimeoutMs`: a positive integer of milliseconds, or the default.
/// A duration option in ms: an integer ≥ 1.
pub fn positive_ms(v: f64, what: &str) -> Result<std::time::Duration> {
    let ms = int(v, what)?;
    if ms < 1 {
        return Err(Error::invalid(format!("{what} must be ≥ 1, got {v}")));
    }
    Ok(std::time::Duration::from_millis(ms as u64))
}

pub fn query_timeout(ms: Option<f64>) -> Result<std::time::Duration> {
    match ms {
        None => Ok(crate::core::query::DEFAULT_TIMEOUT),
        Some(v) => {
            let ms = int(v, "queryTimeoutMs")?;
            if ms < 1 {
                return Err(Error::invalid(format!(
                    "queryTimeoutMs must be ≥ 1, got {v}"
                )));
            }
            Ok(std::time::Duration::from_millis(ms as u64))
        }
    }
}

#[napi(object)]
pub struct JsDeclaration {
    pub partition: String,
    pub name: String,
    pub schema_version: f64,
}

impl JsDeclaration {
    pub fn into_model(self) -> Result<CheckpointDeclaration> {
        Ok(CheckpointDeclaration {
            schema_version: int(self.schema_version, "checkpoint schemaVersion")?,
            partition: self.partition,
            name: self.name,
        })
    }
}

/// The prune cursor of `pruneCommitsThrough`: `log_epoch` absent selects the
/// legacy 0.15.x form.
pub fn prune_target(through_seq: f64, log_epoch: Option<String>) -> Result<PruneTarget> {
    let through = non_negative(through_seq, "throughSeq")
        .map_err(|_| crate::core::error::Error::query("sync.storage.invalid_prune_cursor"))?;
    match log_epoch {
        Some(e) if e.is_empty() => Err(crate::core::error::Error::query(
            "sync.storage.invalid_prune_cursor",
        )),
        Some(e) => Ok(PruneTarget::Checked {
            log_epoch: e,
            through_seq: through,
        }),
        None => Ok(PruneTarget::Legacy(through)),
    }
}
