//! JSON text written by hand for the answers that cross as text
//! (`compact`, `packed`): integers without `format!`, and strings copied
//! as they are when nothing in them needs an escape (ids, names, epochs:
//! almost always), through serde_json otherwise.

/// A decimal integer (`write!` or `to_string` cost several times more).
pub fn int(out: &mut String, v: i64) {
    let mut buf = [0u8; 20];
    let mut n = v.unsigned_abs();
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        out.push('-');
    }
    // SAFETY: ASCII digits.
    out.push_str(unsafe { std::str::from_utf8_unchecked(&buf[at..]) });
}

/// `s` as a JSON string literal.
pub fn string(out: &mut String, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push('"');
        out.push_str(s);
        out.push('"');
        return;
    }
    // SAFETY: serde_json writes valid UTF-8 (a JSON string literal), so the
    // String stays UTF-8; writing into a Vec cannot fail.
    let _ = serde_json::to_writer(unsafe { out.as_mut_vec() }, s);
}

#[cfg(test)]
mod tests {
    use super::*;

    const STRINGS: [&str; 8] = [
        "",
        "plain id",
        "quote\"",
        "back\\slash",
        "tab\t",
        "nul\0",
        "é ✓ 𝄞",
        "\u{2028}",
    ];

    #[test]
    fn ints_and_strings_parse_back() {
        let mut out = String::from("[");
        for v in [0, 7, -1, 10, i64::MAX, i64::MIN, 1_700_000_000_000] {
            int(&mut out, v);
            out.push(',');
        }
        for s in STRINGS {
            string(&mut out, s);
            out.push(',');
        }
        out.push_str("null]");
        let back: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
        assert_eq!(back[5], serde_json::json!(i64::MIN));
        assert_eq!(back[4], serde_json::json!(i64::MAX));
        let strings: Vec<&str> = back[7..15].iter().map(|v| v.as_str().unwrap()).collect();
        assert_eq!(strings, STRINGS);
    }
}
