//! Linear-time replacements for the SQLite built-ins whose cost grows with
//! the product of their arguments' lengths: `instr(X, Y)`, `replace(X, Y,
//! Z)` and the two-argument `trim`, `ltrim` and `rtrim`.
//!
//! SQLite's progress handler runs between VM instructions, never inside a
//! function call, so one call of `instr` on two strings of a megabyte
//! (SQLite compares the needle at every offset) could run for seconds past
//! a registered query's time limit. These versions search with
//! Knuth-Morris-Pratt and test trim characters against a set, so a call
//! costs time linear in its arguments, which `SQLITE_LIMIT_LENGTH` bounds
//! while a registered query runs (`super::isolation`), and read the
//! query's clock (`super::meter`) as they go, so a call stops near the
//! query's limit whatever its arguments. They return what the built-ins
//! return, NULL handling and types included; the storage's own statements
//! call none of them.

use super::conn::map_err;
use super::meter;
use crate::core::error::Result;
use rusqlite::functions::{Context, FunctionFlags};
use rusqlite::types::{Value, ValueRef};
use rusqlite::Connection;

/// Registers the replacements on `conn`.
pub fn register(conn: &Connection) -> Result<()> {
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_scalar_function("instr", 2, flags, |c| instr(c))
        .map_err(map_err)?;
    conn.create_scalar_function("replace", 3, flags, |c| replace(c))
        .map_err(map_err)?;
    conn.create_scalar_function("trim", 2, flags, |c| trim(c, true, true))
        .map_err(map_err)?;
    conn.create_scalar_function("ltrim", 2, flags, |c| trim(c, true, false))
        .map_err(map_err)?;
    conn.create_scalar_function("rtrim", 2, flags, |c| trim(c, false, true))
        .map_err(map_err)
}

/// The bytes SQLite's `sqlite3_value_text` gives for argument `i`, or
/// `None` for NULL.
pub(super) fn arg_text(ctx: &Context<'_>, i: usize) -> rusqlite::Result<Option<Vec<u8>>> {
    Ok(match ctx.get_raw(i) {
        ValueRef::Null => None,
        ValueRef::Integer(n) => Some(n.to_string().into_bytes()),
        ValueRef::Real(f) => Some(real_text(f)),
        ValueRef::Text(t) | ValueRef::Blob(t) => Some(t.to_vec()),
    })
}

/// A REAL as SQLite renders it as text, by SQLite's own printf and the
/// format its text conversion uses.
fn real_text(f: f64) -> Vec<u8> {
    // SAFETY: a NUL-terminated format taking one double; the result is
    // NUL-terminated (or NULL when out of memory) and freed here.
    unsafe {
        let p = rusqlite::ffi::sqlite3_mprintf(c"%!.15g".as_ptr(), f);
        if p.is_null() {
            return Vec::new();
        }
        let out = std::ffi::CStr::from_ptr(p).to_bytes().to_vec();
        rusqlite::ffi::sqlite3_free(p.cast());
        out
    }
}

/// KMP failure table of `needle` (non-empty).
fn failure(needle: &[u8]) -> Vec<usize> {
    let mut f = vec![0usize; needle.len()];
    let mut k = 0;
    for i in 1..needle.len() {
        while k > 0 && needle[i] != needle[k] {
            k = f[k - 1];
        }
        if needle[i] == needle[k] {
            k += 1;
        }
        f[i] = k;
    }
    f
}

/// Every non-overlapping match of `needle` (non-empty) in `hay`, left to
/// right, as start offsets; stops after the first when `first`. Reads the
/// query's clock every [`meter::CHECK_BYTES`] of `hay`.
fn matches(hay: &[u8], needle: &[u8], first: bool) -> rusqlite::Result<Vec<usize>> {
    let f = failure(needle);
    let mut out = Vec::new();
    let mut k = 0;
    for (n, chunk) in hay.chunks(meter::CHECK_BYTES).enumerate() {
        meter::work(chunk.len())?;
        let base = n * meter::CHECK_BYTES;
        for (j, &b) in chunk.iter().enumerate() {
            while k > 0 && b != needle[k] {
                k = f[k - 1];
            }
            if b == needle[k] {
                k += 1;
            }
            if k == needle.len() {
                out.push(base + j + 1 - needle.len());
                if first {
                    return Ok(out);
                }
                // Non-overlapping: start over after the match.
                k = 0;
            }
        }
    }
    Ok(out)
}

/// `instr(X, Y)`: 1 + the characters (bytes, when both are BLOBs) before
/// the first occurrence of Y in X, 0 when absent, NULL when either is.
fn instr(ctx: &Context<'_>) -> rusqlite::Result<Value> {
    meter::enter()?;
    let blobs =
        matches!(ctx.get_raw(0), ValueRef::Blob(_)) && matches!(ctx.get_raw(1), ValueRef::Blob(_));
    let (Some(hay), Some(needle)) = (arg_text(ctx, 0)?, arg_text(ctx, 1)?) else {
        return Ok(Value::Null);
    };
    if needle.is_empty() {
        return Ok(Value::Integer(1));
    }
    let Some(&at) = matches(&hay, &needle, true)?.first() else {
        return Ok(Value::Integer(0));
    };
    let before = if blobs {
        at
    } else {
        // Characters: bytes that do not continue a UTF-8 sequence.
        hay[..at].iter().filter(|&&b| b & 0xc0 != 0x80).count()
    };
    Ok(Value::Integer(before as i64 + 1))
}

/// `replace(X, Y, Z)`: X with every occurrence of Y replaced by Z (X as
/// text when Y is empty); NULL when any is NULL.
fn replace(ctx: &Context<'_>) -> rusqlite::Result<Value> {
    meter::enter()?;
    let Some(hay) = arg_text(ctx, 0)? else {
        return Ok(Value::Null);
    };
    let Some(pattern) = arg_text(ctx, 1)? else {
        return Ok(Value::Null);
    };
    if pattern.is_empty() {
        return Ok(Value::Text(bytes_to_text(hay)));
    }
    let Some(with) = arg_text(ctx, 2)? else {
        return Ok(Value::Null);
    };
    let found = matches(&hay, &pattern, false)?;
    meter::work(hay.len() + found.len() * with.len())?;
    let mut out = Vec::with_capacity(hay.len() + found.len() * with.len());
    let mut pos = 0;
    for at in found {
        out.extend_from_slice(&hay[pos..at]);
        out.extend_from_slice(&with);
        pos = at + pattern.len();
    }
    out.extend_from_slice(&hay[pos..]);
    Ok(Value::Text(bytes_to_text(out)))
}

/// `trim(X, Y)` and its one-sided forms: X without the characters of Y at
/// the chosen ends; NULL when either is NULL.
fn trim(ctx: &Context<'_>, left: bool, right: bool) -> rusqlite::Result<Value> {
    meter::enter()?;
    let (Some(s), Some(set)) = (arg_text(ctx, 0)?, arg_text(ctx, 1)?) else {
        return Ok(Value::Null);
    };
    let chars: std::collections::HashSet<&[u8]> = utf8_chars(&set).collect();
    let mut start = 0;
    let mut end = s.len();
    if !chars.is_empty() {
        if left {
            for c in utf8_chars(&s) {
                if !chars.contains(c) {
                    break;
                }
                start += c.len();
                meter::work(c.len() * 16)?;
            }
        }
        if right {
            // Back from the end, one character at a time (no table of
            // every offset first: the work stays under the meter).
            while end > start {
                let mut b = end - 1;
                while b > start && s[b] & 0xc0 == 0x80 {
                    b -= 1;
                }
                if !chars.contains(&s[b..end]) {
                    break;
                }
                meter::work((end - b) * 16)?;
                end = b;
            }
        }
    }
    Ok(Value::Text(bytes_to_text(s[start..end].to_vec())))
}

/// The characters of `s` in order (a character starts at a byte that does
/// not continue a UTF-8 sequence, or at the first byte), as SQLite steps
/// through text; lazily, so a caller that stops early does no more work.
fn utf8_chars(s: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut i = 0;
    std::iter::from_fn(move || {
        if i >= s.len() {
            return None;
        }
        let mut j = i + 1;
        while j < s.len() && s[j] & 0xc0 == 0x80 {
            j += 1;
        }
        let c = &s[i..j];
        i = j;
        Some(c)
    })
}

/// SQLite text is bytes; rusqlite's TEXT value is a `String`.
fn bytes_to_text(b: Vec<u8>) -> String {
    String::from_utf8(b).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(conn: &Connection, sql: &str) -> Value {
        conn.query_row(sql, [], |r| r.get::<_, Value>(0)).unwrap()
    }

    /// Each case answered by SQLite's built-in (a fresh connection) and by
    /// the replacement must agree.
    #[test]
    fn replacements_agree_with_the_builtins() {
        let builtin = Connection::open_in_memory().unwrap();
        let ours = Connection::open_in_memory().unwrap();
        register(&ours).unwrap();
        let cases = [
            "instr('hello world', 'o')",
            "instr('hello', '')",
            "instr('', 'a')",
            "instr(NULL, 'a')",
            "instr('a', NULL)",
            "instr('héllo wörld', 'wö')",
            "instr(x'00010203', x'0203')",
            "instr(x'00010203', 'a')",
            "instr(12345, 34)",
            "instr(1.5, '.5')",
            "instr('aaaaab', 'aab')",
            "instr('abababc', 'ababc')",
            "replace('hello world', 'o', '0')",
            "replace('aaaa', 'aa', 'b')",
            "replace('abc', '', 'x')",
            "typeof(replace(12, '', 'x'))",
            "replace(12, '', 'x')",
            "replace(NULL, 'a', 'b')",
            "replace('a', NULL, 'b')",
            "replace('a', 'a', NULL)",
            "replace('héé', 'é', 'e')",
            "replace(1234, 23, 'x')",
            "replace(2.5, '.', ',')",
            "trim('xxhixx', 'x')",
            "ltrim('xxhixx', 'x')",
            "rtrim('xxhixx', 'x')",
            "trim('abcba', 'ab')",
            "trim('éaé', 'é')",
            "trim('hi', '')",
            "trim(NULL, 'x')",
            "trim('x', NULL)",
            "trim(100, '0')",
            "rtrim(1.50, '0')",
            "trim('xxxx', 'x')",
        ];
        for c in cases {
            let sql = format!("SELECT {c}");
            assert_eq!(one(&builtin, &sql), one(&ours, &sql), "{c}");
        }
    }

    #[test]
    fn quadratic_shapes_are_fast() {
        let ours = Connection::open_in_memory().unwrap();
        register(&ours).unwrap();
        let t = std::time::Instant::now();
        let v = one(
            &ours,
            "SELECT instr(printf('%.*c', 1000000, 'a'), printf('%.*c', 500000, 'a') || 'b')",
        );
        assert_eq!(v, Value::Integer(0));
        one(
            &ours,
            "SELECT length(replace(printf('%.*c', 1000000, 'a'), printf('%.*c', 500000, 'a') || 'b', 'x'))",
        );
        assert!(t.elapsed() < std::time::Duration::from_secs(2));
    }
}
