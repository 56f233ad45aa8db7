//! JSON document validation with the acceptance set of JS `JSON.parse`.
//!
//! RFC 8259 grammar over any value, JSON whitespace (space, tab, LF, CR)
//! around it, duplicate keys allowed, `\u` escapes of lone surrogates
//! allowed, numbers of any magnitude allowed (`1e400` parses to `Infinity`).
//! The validator is iterative: nesting depth only costs one bit of heap per
//! level, so deep input can never overflow the stack.

/// Skips JSON whitespace starting at `pos`.
pub(super) fn skip_ws(b: &[u8], mut pos: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = b.get(pos) {
        pos += 1;
    }
    pos
}

/// Scans a string whose opening quote is at `pos`; returns the position after
/// the closing quote.
pub(super) fn scan_string(b: &[u8], pos: usize) -> Option<usize> {
    if b.get(pos) != Some(&b'"') {
        return None;
    }
    let mut i = pos + 1;
    loop {
        match *b.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => match *b.get(i + 1)? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                b'u' => {
                    let hex = b.get(i + 2..i + 6)?;
                    if !hex.iter().all(u8::is_ascii_hexdigit) {
                        return None;
                    }
                    i += 6;
                }
                _ => return None,
            },
            0x00..=0x1F => return None,
            // Any other byte, including the parts of multi-byte UTF-8
            // sequences (the input is a valid &str).
            _ => i += 1,
        }
    }
}

fn scan_digits(b: &[u8], mut pos: usize) -> usize {
    while b.get(pos).is_some_and(u8::is_ascii_digit) {
        pos += 1;
    }
    pos
}

/// Scans a number starting at `pos`; returns the position after it.
pub(super) fn scan_number(b: &[u8], mut pos: usize) -> Option<usize> {
    if b.get(pos) == Some(&b'-') {
        pos += 1;
    }
    match *b.get(pos)? {
        b'0' => pos += 1,
        b'1'..=b'9' => pos = scan_digits(b, pos + 1),
        _ => return None,
    }
    if b.get(pos) == Some(&b'.') {
        let end = scan_digits(b, pos + 1);
        if end == pos + 1 {
            return None;
        }
        pos = end;
    }
    if let Some(b'e' | b'E') = b.get(pos) {
        pos += 1;
        if let Some(b'+' | b'-') = b.get(pos) {
            pos += 1;
        }
        let end = scan_digits(b, pos);
        if end == pos {
            return None;
        }
        pos = end;
    }
    Some(pos)
}

fn scan_literal(b: &[u8], pos: usize, word: &[u8]) -> Option<usize> {
    let end = pos.checked_add(word.len())?;
    (b.get(pos..end)? == word).then_some(end)
}

/// Scans `"key" ws ":" ws` at `pos` (already past leading whitespace) and
/// returns the position of the member value.
fn scan_member_key(b: &[u8], pos: usize) -> Option<usize> {
    let pos = skip_ws(b, scan_string(b, pos)?);
    if b.get(pos) != Some(&b':') {
        return None;
    }
    Some(skip_ws(b, pos + 1))
}

fn validate(b: &[u8]) -> Option<()> {
    // `true` = inside an object, `false` = inside an array.
    let mut stack: Vec<bool> = Vec::new();
    let mut pos = skip_ws(b, 0);
    'value: loop {
        // Expect a value at `pos` (whitespace already skipped).
        match *b.get(pos)? {
            b'{' => {
                pos = skip_ws(b, pos + 1);
                if b.get(pos) == Some(&b'}') {
                    pos += 1;
                } else {
                    pos = scan_member_key(b, pos)?;
                    stack.push(true);
                    continue 'value;
                }
            }
            b'[' => {
                pos = skip_ws(b, pos + 1);
                if b.get(pos) == Some(&b']') {
                    pos += 1;
                } else {
                    stack.push(false);
                    continue 'value;
                }
            }
            b'"' => pos = scan_string(b, pos)?,
            b't' => pos = scan_literal(b, pos, b"true")?,
            b'f' => pos = scan_literal(b, pos, b"false")?,
            b'n' => pos = scan_literal(b, pos, b"null")?,
            b'-' | b'0'..=b'9' => pos = scan_number(b, pos)?,
            _ => return None,
        }
        // A value just ended; close containers / move to the next element.
        loop {
            pos = skip_ws(b, pos);
            let Some(&in_object) = stack.last() else {
                return (pos == b.len()).then_some(());
            };
            match (*b.get(pos)?, in_object) {
                (b',', true) => {
                    pos = scan_member_key(b, skip_ws(b, pos + 1))?;
                    continue 'value;
                }
                (b',', false) => {
                    pos = skip_ws(b, pos + 1);
                    continue 'value;
                }
                (b'}', true) | (b']', false) => {
                    stack.pop();
                    pos += 1;
                }
                _ => return None,
            }
        }
    }
}

/// True iff JS `JSON.parse(text)` would succeed.
pub fn is_valid_json(text: &str) -> bool {
    validate(text.as_bytes()).is_some()
}
