//! Hot-path shapes that cross as arrays: indexed elements cost less to
//! create and read than named properties (each property name is a string
//! N-API creates per call). The JS layer turns them into the host's
//! objects.

use super::args::js_type;
use super::bytes::Bytes;
use crate::core::error::{Error, Result};
use crate::core::model::{Change, ChangeOp, StoredRow};
use napi::bindgen_prelude::{check_status, ToNapiValue};
use napi::sys;
use serde_json::value::RawValue;
use std::ptr;

/// `[rowId, serverVersion, scopesJson, payload, columnVersions | null]`.
pub struct RowTuple(pub StoredRow);

js_type!(
    RowTuple,
    "[string, number, string, Uint8Array, Uint8Array | null]",
    Object
);

impl ToNapiValue for RowTuple {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        let r = val.0;
        let items = unsafe {
            [
                String::to_napi_value(env, r.row_id)?,
                i64::to_napi_value(env, r.server_version)?,
                String::to_napi_value(env, r.scopes_json)?,
                Bytes::to_napi_value(env, Bytes(r.payload))?,
                Option::<Bytes>::to_napi_value(env, r.column_versions.map(Bytes))?,
            ]
        };
        let mut array = ptr::null_mut();
        check_status!(unsafe { sys::napi_create_array_with_length(env, items.len(), &mut array) })?;
        for (i, v) in items.into_iter().enumerate() {
            check_status!(unsafe { sys::napi_set_element(env, array, i as u32, v) })?;
        }
        Ok(array)
    }
}

/// One packed change: `[table, rowId, op (1 upsert, 2 delete), rowVersion
/// | null, payload length (-1 = none), scopes]`. The scopes object is kept
/// as its raw text, which is exactly what `JSON.stringify(scopes)` gives,
/// so the stored JSON stays byte-identical to the in-tree storage's.
type PackedChange = (String, String, u8, Option<f64>, i64, Box<RawValue>);

/// A commit's changes as the JS layer packs them: one JSON array of
/// [`PackedChange`]s and the payloads concatenated in change order. Two
/// crossings instead of six property reads per change.
pub fn unpack_changes(text: &str, payloads: &[u8]) -> Result<Vec<Change>> {
    let packed: Vec<PackedChange> = serde_json::from_str(text).map_err(|e| {
        Error::invalid(format!(
            "changes: table and rowId must be strings, op 'upsert' or 'delete' ({e})"
        ))
    })?;
    let mut offset = 0usize;
    let mut out = Vec::with_capacity(packed.len());
    for (i, (table, row_id, op, version, len, scopes)) in packed.into_iter().enumerate() {
        let op = match op {
            1 => ChangeOp::Upsert,
            2 => ChangeOp::Delete,
            _ => {
                return Err(Error::invalid(format!(
                    "changes[{i}].op must be 'upsert' or 'delete'"
                )))
            }
        };
        let row_version = version
            .map(|v| super::convert::int(v, "rowVersion"))
            .transpose()?;
        let payload = if len < 0 {
            None
        } else {
            let end = usize::try_from(len)
                .ok()
                .and_then(|l| offset.checked_add(l))
                .filter(|e| *e <= payloads.len())
                .ok_or_else(|| {
                    Error::invalid("changes: payload lengths exceed the packed payloads")
                })?;
            let p = payloads[offset..end].to_vec();
            offset = end;
            Some(p)
        };
        out.push(Change {
            table,
            row_id,
            op,
            row_version,
            scopes_json: scopes.get().to_owned(),
            payload,
        });
    }
    Ok(out)
}
