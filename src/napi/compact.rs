//! The records a host reads on every request (its client record, the
//! partition registry entry `touchPartition` answers) cross as one JSON
//! text with a field order fixed per record type; `lib/values.js`
//! (`clientOut`, `registryOut`) builds the object from it. One string
//! crossing instead of one N-API property call per field, which the
//! per-call profile showed (bench/README.md, "Layers of a call").
//!
//! A client record's subscriptions are stored JSON text and go in as they
//! are, as the last element: the JS side checks the array's length, so a
//! stored text that is not exactly one JSON value cannot pass for fields.

use super::args::js_type;
use crate::model::{ClientRecord, RegistryEntry};
use napi::bindgen_prelude::ToNapiValue;
use napi::sys;

/// `s` as a JSON string literal.
fn text(out: &mut Vec<u8>, s: &str) -> napi::Result<()> {
    serde_json::to_writer(&mut *out, s).map_err(|e| napi::Error::from_reason(e.to_string()))
}

fn number(out: &mut Vec<u8>, n: i64) {
    out.extend_from_slice(n.to_string().as_bytes());
}

unsafe fn finish(env: sys::napi_env, out: Vec<u8>) -> napi::Result<sys::napi_value> {
    // serde_json writes UTF-8, and everything else here is ASCII or
    // stored text that was a Rust String.
    let s = String::from_utf8(out).map_err(|e| napi::Error::from_reason(e.to_string()))?;
    unsafe { String::to_napi_value(env, s) }
}

js_type!(ClientRecord, "string", String);

/// `[clientId, actorId, wireVersion, cursor, updatedAtMs, subscriptions]`.
impl ToNapiValue for ClientRecord {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        let mut out = Vec::with_capacity(64 + val.subscriptions_json.len());
        out.push(b'[');
        text(&mut out, &val.client_id)?;
        out.push(b',');
        text(&mut out, &val.actor_id)?;
        for n in [val.wire_version, val.cursor, val.updated_at_ms] {
            out.push(b',');
            number(&mut out, n);
        }
        out.push(b',');
        out.extend_from_slice(val.subscriptions_json.as_bytes());
        out.push(b']');
        unsafe { finish(env, out) }
    }
}

js_type!(RegistryEntry, "string", String);

/// `[partition, logEpoch, epochRequired, lastAuthenticatedAtMs]`.
impl ToNapiValue for RegistryEntry {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        let mut out = Vec::with_capacity(48 + val.partition.len() + val.log_epoch.len());
        out.push(b'[');
        text(&mut out, &val.partition)?;
        out.push(b',');
        text(&mut out, &val.log_epoch)?;
        out.extend_from_slice(if val.epoch_required {
            b",true,"
        } else {
            b",false,"
        });
        number(&mut out, val.last_authenticated_at_ms);
        out.push(b']');
        unsafe { finish(env, out) }
    }
}
