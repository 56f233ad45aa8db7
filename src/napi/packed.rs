//! Row lists and commit windows cross as three values: one string holding
//! every string of the answer, one `Float64Array` of every number, and one
//! byte buffer holding every payload, in the form `crate::core::records`
//! describes (the engines write windows, scope scans and index lookups in
//! it as they read). The JS layer slices strings out of the text by their
//! lengths and builds each object with a fixed shape (lib/values.js); each
//! scopes text is parsed once per answer and copied per record.
//!
//! Prefetched rows still cross as `[json, bytes]` (`Packed`): a flat JSON
//! array of field values, see `prefetched`.

use super::args::js_type;
use super::bytes::{typed_array, Bytes};
use crate::core::model::{StoredRow, Tomb};
pub use crate::core::records::Records;
use crate::seam::Prefetch;
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
        unsafe {
            js_array(
                env,
                &[
                    String::to_napi_value(env, val.json)?,
                    Bytes::to_napi_value(env, Bytes(val.bytes))?,
                ],
            )
        }
    }
}

/// A JS array of `items`.
unsafe fn js_array(env: sys::napi_env, items: &[sys::napi_value]) -> napi::Result<sys::napi_value> {
    let mut array = ptr::null_mut();
    check_status!(unsafe { sys::napi_create_array_with_length(env, items.len(), &mut array) })?;
    for (i, v) in items.iter().enumerate() {
        check_status!(unsafe { sys::napi_set_element(env, array, i as u32, *v) })?;
    }
    Ok(array)
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

    /// `serverVersion, scopes, payload…, columnVersions…` of a row.
    fn row_fields(&mut self, r: &StoredRow) {
        self.int(r.server_version);
        self.json.push(',');
        // Stored scopes, read as a JSON object (`crate::core::stored`).
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

js_type!(Records, "[string, Float64Array, Uint8Array]", Object);

/// `[text, numbers, bytes]`: see the module documentation.
impl ToNapiValue for Records {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        let numbers = [f64_bytes(&val.head), f64_bytes(&val.nums)];
        unsafe {
            js_array(
                env,
                &[
                    String::to_napi_value(env, val.text)?,
                    typed_array(env, sys::TypedarrayType::float64_array, 8, &numbers)?,
                    Bytes::to_napi_value(env, Bytes(val.bytes))?,
                ],
            )
        }
    }
}

/// The bytes of `v`, in the machine's order (a `Float64Array` reads them so).
fn f64_bytes(v: &[f64]) -> &[u8] {
    // SAFETY: any initialized f64 is 8 initialized bytes, u8 has no
    // alignment, and the slice borrows `v`.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}
