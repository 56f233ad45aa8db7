//! Row lists and commit windows cross as one JSON text plus one byte buffer
//! holding every payload: V8's JSON.parse builds the objects far faster
//! than N-API can set their properties one by one, and the text is built
//! on the worker thread, so the JS thread only parses. Payload fields carry
//! `[offset, length]` into the buffer; the JS layer swaps in a copy.

use super::bytes::Bytes;
use crate::model::{ChangeOp, StoredCommit, StoredRow};
use napi::bindgen_prelude::{check_status, ToNapiValue, TypeName, ValueType};
use napi::sys;
use std::fmt::Write;
use std::ptr;

/// `[json, bytes]`.
pub struct Packed {
    json: String,
    bytes: Vec<u8>,
}

impl TypeName for Packed {
    fn type_name() -> &'static str {
        "[string, Uint8Array]"
    }

    fn value_type() -> ValueType {
        ValueType::Object
    }
}

impl ToNapiValue for Packed {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        let items = unsafe {
            [
                String::to_napi_value(env, val.json)?,
                Bytes::to_napi_value(env, Bytes(val.bytes))?,
            ]
        };
        let mut array = ptr::null_mut();
        check_status!(unsafe { sys::napi_create_array_with_length(env, 2, &mut array) })?;
        for (i, v) in items.into_iter().enumerate() {
            check_status!(unsafe { sys::napi_set_element(env, array, i as u32, v) })?;
        }
        Ok(array)
    }
}

struct Writer {
    json: String,
    bytes: Vec<u8>,
}

impl Writer {
    fn new() -> Writer {
        Writer {
            json: String::with_capacity(4096),
            bytes: Vec::new(),
        }
    }

    fn string(&mut self, s: &str) {
        // SAFETY: serde_json writes valid UTF-8 (a JSON string literal), so
        // the String stays UTF-8; writing into a Vec cannot fail.
        let _ = serde_json::to_writer(unsafe { self.json.as_mut_vec() }, s);
    }

    fn blob(&mut self, b: &[u8]) {
        let _ = write!(self.json, "[{},{}]", self.bytes.len(), b.len());
        self.bytes.extend_from_slice(b);
    }

    fn row(&mut self, r: &StoredRow) {
        self.json.push_str("{\"rowId\":");
        self.string(&r.row_id);
        let _ = write!(
            self.json,
            ",\"serverVersion\":{},\"scopes\":",
            r.server_version
        );
        // Stored scopes are JSON text the host wrote; they pass through as is.
        self.json.push_str(&r.scopes_json);
        self.json.push_str(",\"payload\":");
        self.blob(&r.payload);
        if let Some(cv) = &r.column_versions {
            self.json.push_str(",\"columnVersions\":");
            self.blob(cv);
        }
        self.json.push('}');
    }

    fn finish(self) -> Packed {
        Packed {
            json: self.json,
            bytes: self.bytes,
        }
    }
}

/// Scope JSON embedded raw must itself be valid JSON; anything else (a
/// hand-edited database) is re-encoded as a string so the batch still parses.
fn safe_scopes(mut r: StoredRow) -> StoredRow {
    if serde_json::from_str::<&serde_json::value::RawValue>(&r.scopes_json).is_err() {
        r.scopes_json = serde_json::to_string(&r.scopes_json).unwrap_or_else(|_| "{}".into());
    }
    r
}

pub fn rows(list: Vec<StoredRow>) -> Packed {
    let mut w = Writer::new();
    w.json.push('[');
    for (i, r) in list.into_iter().map(safe_scopes).enumerate() {
        if i > 0 {
            w.json.push(',');
        }
        w.row(&r);
    }
    w.json.push(']');
    w.finish()
}

/// Window changes were verified against the filter, which parsed their
/// scopes, so their text is known to be valid JSON.
pub fn commits(list: Vec<StoredCommit>) -> Packed {
    let mut w = Writer::new();
    w.json.push('[');
    for (i, c) in list.iter().enumerate() {
        if i > 0 {
            w.json.push(',');
        }
        let _ = write!(
            w.json,
            "{{\"commitSeq\":{},\"createdAtMs\":{},\"actorId\":",
            c.commit_seq, c.created_at_ms
        );
        w.string(&c.actor_id);
        w.json.push_str(",\"changes\":[");
        for (j, ch) in c.changes.iter().enumerate() {
            if j > 0 {
                w.json.push(',');
            }
            w.json.push_str("{\"table\":");
            w.string(&ch.table);
            w.json.push_str(",\"rowId\":");
            w.string(&ch.row_id);
            w.json.push_str(match ch.op {
                ChangeOp::Upsert => ",\"op\":\"upsert\"",
                ChangeOp::Delete => ",\"op\":\"delete\"",
            });
            if let Some(v) = ch.row_version {
                let _ = write!(w.json, ",\"rowVersion\":{v}");
            }
            w.json.push_str(",\"scopes\":");
            w.json.push_str(&ch.scopes_json);
            if let Some(p) = &ch.payload {
                w.json.push_str(",\"payload\":");
                w.blob(p);
            }
            w.json.push('}');
        }
        w.json.push_str("]}");
    }
    w.json.push(']');
    w.finish()
}
