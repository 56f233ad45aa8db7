//! Row lists and commit windows cross as one JSON text plus one byte buffer
//! holding every payload. The text is a flat array of field values (no
//! per-row objects: V8 parses flat arrays about twice as fast, and the JS
//! layer then builds each object with a fixed shape); byte fields appear as
//! `offset, length` into the buffer, offset -1 for none. The text is built
//! on the worker thread, so the JS thread only parses.
//!
//! Row: `rowId, serverVersion, scopes, payloadOffset, payloadLength,
//! columnVersionsOffset, columnVersionsLength`.
//! Commit: `commitSeq, createdAtMs, actorId, changeCount`, then per change
//! `table, rowId, op (1 upsert, 2 delete), rowVersion | null, scopes,
//! payloadOffset, payloadLength`. Prefetched rows: see `prefetched`.

use super::args::js_type;
use super::bytes::Bytes;
use crate::engine::Prefetch;
use crate::model::{ChangeOp, StoredCommit, StoredRow, Tomb};
use napi::bindgen_prelude::{check_status, ToNapiValue};
use napi::sys;
use std::fmt::Write;
use std::ptr;

/// `[json, bytes]`.
pub struct Packed {
    json: String,
    bytes: Vec<u8>,
}

js_type!(Packed, "[string, Uint8Array]", Object);

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
        Writer::with_capacity(4096, 0)
    }

    fn with_capacity(json: usize, bytes: usize) -> Writer {
        Writer {
            json: String::with_capacity(json),
            bytes: Vec::with_capacity(bytes),
        }
    }

    fn int(&mut self, v: i64) {
        super::jsontext::int(&mut self.json, v);
    }

    fn string(&mut self, s: &str) {
        super::jsontext::string(&mut self.json, s);
    }

    /// `,offset,length` (or `,-1,0`).
    fn blob(&mut self, b: Option<&[u8]>) {
        match b {
            Some(b) => {
                self.json.push(',');
                self.int(self.bytes.len() as i64);
                self.json.push(',');
                self.int(b.len() as i64);
                self.bytes.extend_from_slice(b);
            }
            None => self.json.push_str(",-1,0"),
        }
    }

    fn row(&mut self, r: &StoredRow) {
        self.string(&r.row_id);
        self.json.push(',');
        self.row_fields(r);
    }

    /// `serverVersion, scopes, payload…, columnVersions…` of a row.
    fn row_fields(&mut self, r: &StoredRow) {
        self.int(r.server_version);
        self.json.push(',');
        // Stored scopes, read as a JSON object (`crate::stored`).
        self.json.push_str(&r.scopes_json);
        self.blob(Some(&r.payload));
        self.blob(r.column_versions.as_deref());
    }

    fn finish(self) -> Packed {
        Packed {
            json: self.json,
            bytes: self.bytes,
        }
    }
}

/// Rows as the engines read them: their scopes are JSON objects (every
/// row read checks them, `crate::stored`), so they are embedded as is.
pub fn rows(list: Vec<StoredRow>) -> Packed {
    let mut w = Writer::with_capacity(list.len() * 96, list.iter().map(|r| r.payload.len()).sum());
    w.json.push('[');
    for (i, r) in list.iter().enumerate() {
        if i > 0 {
            w.json.push(',');
        }
        w.row(r);
    }
    w.json.push(']');
    w.finish()
}

/// `prefetchRows`: `stable` (1 or 0, see `engine::Prefetch`), then per row
/// id `rowId, tombstoneSeq | null (-1 = not read), serverVersion (-1 = no
/// row), scopes | null, payloadOffset, payloadLength, columnVersionsOffset,
/// columnVersionsLength`.
pub fn prefetched(p: Prefetch) -> Packed {
    let mut w = Writer::new();
    w.json.push_str(if p.stable { "[1" } else { "[0" });
    for f in p.rows {
        w.json.push(',');
        w.string(&f.row_id);
        match f.tombstone_seq {
            Tomb::Read(Some(seq)) => {
                let _ = write!(w.json, ",{seq},");
            }
            Tomb::Read(None) => w.json.push_str(",null,"),
            Tomb::Unread => w.json.push_str(",-1,"),
        }
        match &f.row {
            Some(r) => w.row_fields(r),
            None => w.json.push_str("-1,null,-1,0,-1,0"),
        }
    }
    w.json.push(']');
    w.finish()
}

/// Window changes were verified against the filter, which read their
/// scopes as JSON objects.
pub fn commits(list: Vec<StoredCommit>) -> Packed {
    let (n, bytes) = list
        .iter()
        .flat_map(|c| &c.changes)
        .fold((0, 0), |(n, b), ch| {
            (n + 1, b + ch.payload.as_ref().map_or(0, Vec::len))
        });
    let mut w = Writer::with_capacity(n * 96 + list.len() * 32, bytes);
    w.json.push('[');
    for (i, c) in list.iter().enumerate() {
        if i > 0 {
            w.json.push(',');
        }
        w.int(c.commit_seq);
        w.json.push(',');
        w.int(c.created_at_ms);
        w.json.push(',');
        w.string(&c.actor_id);
        w.json.push(',');
        w.int(c.changes.len() as i64);
        for ch in &c.changes {
            w.json.push(',');
            w.string(&ch.table);
            w.json.push(',');
            w.string(&ch.row_id);
            w.json.push_str(match ch.op {
                ChangeOp::Upsert => ",1,",
                ChangeOp::Delete => ",2,",
            });
            match ch.row_version {
                Some(v) => {
                    w.int(v);
                    w.json.push(',');
                }
                None => w.json.push_str("null,"),
            }
            w.json.push_str(&ch.scopes_json);
            w.blob(ch.payload.as_deref());
        }
    }
    w.json.push(']');
    w.finish()
}
