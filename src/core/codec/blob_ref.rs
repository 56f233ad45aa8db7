//! Canonical BlobRef check (§6.1 "BlobRef rules").
//!
//! The text must `JSON.parse` to an object whose own keys are a subset of
//! `blobId`, `byteLength`, `mediaType`, `name`, present in exactly that
//! order. As with `JSON.parse`, a duplicated key keeps its first position
//! and its last value. `blobId` and `byteLength` are required; `blobId`
//! matches `^sha256:[0-9a-f]{64}$`; `byteLength` is a number whose value is
//! a non-negative safe integer (`1.0` and `1e3` count, as in JS);
//! `mediaType` and `name`, when present, are strings.

use super::json::{is_valid_json, scan_number, scan_string, skip_ws};
use super::DecodeError;

const KEYS: [&str; 4] = ["blobId", "byteLength", "mediaType", "name"];
const BLOB_ID: usize = 0;
const BYTE_LENGTH: usize = 1;
const MAX_SAFE_INTEGER_F64: f64 = 9_007_199_254_740_991.0;

/// The part of a member value the rules look at.
enum Member {
    Str(String),
    Num(f64),
    Other,
}

fn err(message: impl Into<String>) -> DecodeError {
    DecodeError::new(format!("invalid BlobRef: {}", message.into()))
}

fn malformed() -> DecodeError {
    err("malformed JSON")
}

fn hex4(b: &[u8], pos: usize) -> Option<u16> {
    let digits = std::str::from_utf8(b.get(pos..pos + 4)?).ok()?;
    u16::from_str_radix(digits, 16).ok()
}

/// Decodes the (already validated) string literal at `pos`; returns the text
/// and the position after the closing quote. A lone surrogate becomes
/// U+FFFD, which no rule accepts where it matters (keys, `blobId`).
fn read_string(b: &[u8], pos: usize) -> Option<(String, usize)> {
    let end = scan_string(b, pos)?;
    let inner = b.get(pos + 1..end - 1)?;
    let mut out = String::with_capacity(inner.len());
    let mut i = 0;
    while i < inner.len() {
        let plain_end = inner[i..]
            .iter()
            .position(|&c| c == b'\\')
            .map_or(inner.len(), |off| i + off);
        out.push_str(std::str::from_utf8(&inner[i..plain_end]).ok()?);
        i = plain_end;
        if i >= inner.len() {
            break;
        }
        // Escape at `i`.
        let esc = *inner.get(i + 1)?;
        i += 2;
        let c = match esc {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let unit = hex4(inner, i)?;
                i += 4;
                if (0xD800..0xDC00).contains(&unit) && inner.get(i..i + 2) == Some(&b"\\u"[..]) {
                    match hex4(inner, i + 2) {
                        Some(low @ 0xDC00..=0xDFFF) => {
                            i += 6;
                            let cp = 0x10000
                                + ((u32::from(unit) - 0xD800) << 10)
                                + (u32::from(low) - 0xDC00);
                            char::from_u32(cp).unwrap_or('\u{FFFD}')
                        }
                        _ => '\u{FFFD}',
                    }
                } else {
                    char::from_u32(u32::from(unit)).unwrap_or('\u{FFFD}')
                }
            }
            _ => return None,
        };
        out.push(c);
    }
    Some((out, end))
}

/// Skips any (already validated) value at `pos` and classifies it.
fn read_value(b: &[u8], pos: usize) -> Option<(Member, usize)> {
    match *b.get(pos)? {
        b'"' => read_string(b, pos).map(|(s, end)| (Member::Str(s), end)),
        b'-' | b'0'..=b'9' => {
            let end = scan_number(b, pos)?;
            let text = std::str::from_utf8(b.get(pos..end)?).ok()?;
            // Rust's parse is correctly rounded, like JS `Number(text)`;
            // overflow gives an infinity, as in JS.
            let v: f64 = text.parse().ok()?;
            Some((Member::Num(v), end))
        }
        b'{' | b'[' => {
            // Validated input: brackets balance outside strings.
            let mut depth = 0usize;
            let mut i = pos;
            loop {
                match *b.get(i)? {
                    b'"' => {
                        i = scan_string(b, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some((Member::Other, i + 1));
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            // true / false / null
            let mut i = pos;
            while b.get(i).is_some_and(u8::is_ascii_alphabetic) {
                i += 1;
            }
            Some((Member::Other, i))
        }
    }
}

fn is_blob_id(s: &str) -> bool {
    s.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64 && hex.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
    })
}

fn is_safe_non_negative_integer(v: f64) -> bool {
    v.is_finite() && v.trunc() == v && (0.0..=MAX_SAFE_INTEGER_F64).contains(&v)
}

/// Checks that `text` is a canonical BlobRef JSON object.
pub fn check_blob_ref(text: &str) -> Result<(), DecodeError> {
    if !is_valid_json(text) {
        return Err(err("not a JSON document"));
    }
    let b = text.as_bytes();
    let mut pos = skip_ws(b, 0);
    if b.get(pos) != Some(&b'{') {
        return Err(err("not a JSON object"));
    }
    pos = skip_ws(b, pos + 1);

    // Last value per key, and keys in order of first appearance.
    let mut members: [Option<Member>; 4] = [None, None, None, None];
    let mut order: Vec<usize> = Vec::with_capacity(KEYS.len());
    if b.get(pos) == Some(&b'}') {
        pos += 1;
    } else {
        loop {
            let (key, after_key) = read_string(b, pos).ok_or_else(malformed)?;
            let Some(slot) = KEYS.iter().position(|k| *k == key) else {
                return Err(err(format!("unexpected key {key:?}")));
            };
            pos = skip_ws(b, after_key);
            if b.get(pos) != Some(&b':') {
                return Err(malformed());
            }
            let (value, after_value) = read_value(b, skip_ws(b, pos + 1)).ok_or_else(malformed)?;
            if members[slot].is_none() {
                order.push(slot);
            }
            members[slot] = Some(value);
            pos = skip_ws(b, after_value);
            match b.get(pos) {
                Some(b',') => pos = skip_ws(b, pos + 1),
                Some(b'}') => {
                    pos += 1;
                    break;
                }
                _ => return Err(malformed()),
            }
        }
    }
    if skip_ws(b, pos) != b.len() {
        return Err(malformed());
    }

    if order.windows(2).any(|w| w[0] > w[1]) {
        let got: Vec<&str> = order.iter().map(|&i| KEYS[i]).collect();
        return Err(err(format!(
            "keys out of order ({}); expected blobId, byteLength, mediaType, name",
            got.join(", ")
        )));
    }
    match &members[BLOB_ID] {
        Some(Member::Str(s)) if is_blob_id(s) => {}
        Some(_) => return Err(err("blobId does not match ^sha256:[0-9a-f]{64}$")),
        None => return Err(err("missing blobId")),
    }
    match &members[BYTE_LENGTH] {
        Some(Member::Num(v)) if is_safe_non_negative_integer(*v) => {}
        Some(_) => return Err(err("byteLength is not a non-negative safe integer")),
        None => return Err(err("missing byteLength")),
    }
    for slot in [2, 3] {
        if let Some(Member::Num(_) | Member::Other) = members[slot] {
            return Err(err(format!("{} is not a string", KEYS[slot])));
        }
    }
    Ok(())
}
