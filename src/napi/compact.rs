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
use super::jsontext::{int, string};
use crate::core::model::{ClientRecord, RegistryEntry};
use napi::bindgen_prelude::ToNapiValue;
use napi::sys;

js_type!(ClientRecord, "string", String);

/// `[clientId, actorId, wireVersion, cursor, updatedAtMs, subscriptions]`.
impl ToNapiValue for ClientRecord {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        let mut out = String::with_capacity(64 + val.subscriptions_json.len());
        out.push('[');
        string(&mut out, &val.client_id);
        out.push(',');
        string(&mut out, &val.actor_id);
        for n in [val.wire_version, val.cursor, val.updated_at_ms] {
            out.push(',');
            int(&mut out, n);
        }
        out.push(',');
        out.push_str(&val.subscriptions_json);
        out.push(']');
        unsafe { String::to_napi_value(env, out) }
    }
}

js_type!(RegistryEntry, "string", String);

/// `[partition, logEpoch, epochRequired, lastAuthenticatedAtMs]`.
impl ToNapiValue for RegistryEntry {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        let mut out = String::with_capacity(48 + val.partition.len() + val.log_epoch.len());
        out.push('[');
        string(&mut out, &val.partition);
        out.push(',');
        string(&mut out, &val.log_epoch);
        out.push_str(if val.epoch_required {
            ",true,"
        } else {
            ",false,"
        });
        int(&mut out, val.last_authenticated_at_ms);
        out.push(']');
        unsafe { String::to_napi_value(env, out) }
    }
}
