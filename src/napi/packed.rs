//! Row lists and commit windows cross as three values: one string holding
//! every string of the answer, one `Float64Array` of every number, and one
//! byte buffer holding every payload (`Records`). No JSON is written here
//! and none is parsed in JS: the JS layer slices strings out of the text by
//! their lengths and builds each object with a fixed shape (lib/values.js).
//! Strings that repeat (scopes, table names, actor ids) cross once, in a
//! dictionary at the end of the text; each scopes text is parsed once per
//! answer and copied per record.
//!
//! Numbers: `dictionaryLength`, then the UTF-16 length of each dictionary
//! entry, then the records. An inline string is its UTF-16 length, its text
//! at the head of the string in record order; the dictionary's texts end
//! the string. An interned string is its dictionary index. Byte fields are `offset, length` into the buffer,
//! offset -1 for none. Integers are exact up to 2^53, as JSON numbers were.
//!
//! Row: `rowCount`, then per row `rowId` (inline), `serverVersion`,
//! `scopes` (interned), `payloadOffset, payloadLength`,
//! `columnVersionsOffset, columnVersionsLength`.
//! Window: `commitCount`, then per commit `commitSeq, createdAtMs, actorId`
//! (interned), `changeCount`, then per change `table` (interned), `rowId`
//! (inline), `op` (1 upsert, 2 delete), `rowVersion` (NaN for none),
//! `scopes` (interned), `payloadOffset, payloadLength`.
//!
//! Prefetched rows still cross as `[json, bytes]` (`Packed`): a flat JSON
//! array of field values, see `prefetched`.

use super::args::js_type;
use super::bytes::{typed_array, Bytes};
use crate::core::model::{ChangeOp, StoredCommit, StoredRow, Tomb};
use crate::seam::Prefetch;
use napi::bindgen_prelude::{check_status, ToNapiValue};
use napi::sys;
use std::collections::HashMap;
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

/// `[text, numbers, bytes]`: see the module documentation.
pub struct Records {
    text: String,
    /// The dictionary's lengths lead the numbers: they are known last.
    head: Vec<f64>,
    nums: Vec<f64>,
    bytes: Vec<u8>,
}

js_type!(Records, "[string, Float64Array, Uint8Array]", Object);

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

/// Builds [`Records`].
struct Columns<'a> {
    dictionary: Vec<&'a str>,
    index: HashMap<&'a str, usize>,
    /// Per field, the last interned string and its index.
    last: [Option<(&'a str, usize)>; 3],
    inline: String,
    nums: Vec<f64>,
    bytes: Vec<u8>,
}

/// How many UTF-16 code units `s` is as a JS string.
fn utf16_len(s: &str) -> usize {
    if s.is_ascii() {
        s.len()
    } else {
        s.chars().map(char::len_utf16).sum()
    }
}

impl<'a> Columns<'a> {
    fn with_capacity(nums: usize, inline: usize, bytes: usize) -> Self {
        Columns {
            dictionary: Vec::new(),
            index: HashMap::new(),
            last: [None; 3],
            inline: String::with_capacity(inline),
            nums: Vec::with_capacity(nums),
            bytes: Vec::with_capacity(bytes),
        }
    }

    fn int(&mut self, v: i64) {
        self.nums.push(v as f64);
    }

    fn inline(&mut self, s: &str) {
        self.nums.push(utf16_len(s) as f64);
        self.inline.push_str(s);
    }

    /// Interns `s` as field `field` of a record (0..3): a field mostly
    /// repeats its value of the record before (a page's scopes, a window's
    /// actor and table), which is compared rather than hashed.
    fn interned(&mut self, field: usize, s: &'a str) {
        if let Some((last, at)) = self.last[field] {
            if last == s {
                self.nums.push(at as f64);
                return;
            }
        }
        let next = self.dictionary.len();
        let at = *self.index.entry(s).or_insert(next);
        if at == next {
            self.dictionary.push(s);
        }
        self.last[field] = Some((s, at));
        self.nums.push(at as f64);
    }

    /// `offset, length` (or `-1, 0`).
    fn blob(&mut self, b: Option<&[u8]>) {
        match b {
            Some(b) => {
                self.nums.push(self.bytes.len() as f64);
                self.nums.push(b.len() as f64);
                self.bytes.extend_from_slice(b);
            }
            None => self.nums.extend([-1.0, 0.0]),
        }
    }

    fn finish(self) -> Records {
        let mut head = Vec::with_capacity(1 + self.dictionary.len());
        head.push(self.dictionary.len() as f64);
        let mut text = self.inline;
        for d in &self.dictionary {
            head.push(utf16_len(d) as f64);
            text.push_str(d);
        }
        Records {
            text,
            head,
            nums: self.nums,
            bytes: self.bytes,
        }
    }
}

/// Rows as the engines read them: their scopes are JSON objects (every
/// row read checks them, `crate::core::stored`), so JS parses each text as is.
pub fn rows(list: Vec<StoredRow>) -> Records {
    let payloads = list.iter().map(|r| r.payload.len()).sum();
    let ids = list.iter().map(|r| r.row_id.len()).sum();
    let mut c = Columns::with_capacity(1 + list.len() * 7, ids, payloads);
    c.int(list.len() as i64);
    for r in &list {
        c.inline(&r.row_id);
        c.int(r.server_version);
        c.interned(0, &r.scopes_json);
        c.blob(Some(&r.payload));
        c.blob(r.column_versions.as_deref());
    }
    c.finish()
}

/// Window changes were verified against the filter, which read their
/// scopes as JSON objects.
pub fn commits(list: Vec<StoredCommit>) -> Records {
    let (n, ids, bytes) = list
        .iter()
        .flat_map(|c| &c.changes)
        .fold((0, 0, 0), |(n, i, b), ch| {
            (
                n + 1,
                i + ch.row_id.len(),
                b + ch.payload.as_ref().map_or(0, Vec::len),
            )
        });
    let mut c = Columns::with_capacity(1 + list.len() * 4 + n * 7, ids, bytes);
    c.int(list.len() as i64);
    for commit in &list {
        c.int(commit.commit_seq);
        c.int(commit.created_at_ms);
        c.interned(0, &commit.actor_id);
        c.int(commit.changes.len() as i64);
        for ch in &commit.changes {
            c.interned(1, &ch.table);
            c.inline(&ch.row_id);
            c.int(match ch.op {
                ChangeOp::Upsert => 1,
                ChangeOp::Delete => 2,
            });
            c.nums.push(ch.row_version.map_or(f64::NAN, |v| v as f64));
            c.interned(2, &ch.scopes_json);
            c.blob(ch.payload.as_deref());
        }
    }
    c.finish()
}
