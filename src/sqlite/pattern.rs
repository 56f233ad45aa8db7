//! `like(P, S)`, `like(P, S, E)` and `glob(P, S)`: what the LIKE, GLOB and
//! `LIKE … ESCAPE` operators call, in place of SQLite's own.
//!
//! SQLite's matcher can cost the product of the pattern's and the string's
//! lengths, and runs inside one VM instruction, where the progress handler
//! cannot stop it (a 1 MiB string and a 256-byte pattern of `%a%a…`: seconds
//! per call). This one follows SQLite's matcher step for step (the same
//! character decoding, ASCII-only case folding, escape rules, character
//! classes and early exits, so it answers what SQLite answers) and reads
//! the query's clock (`super::meter`) every few thousand steps, so a call
//! stops within microseconds of the query's limit.
//!
//! Overriding `like` turns off SQLite's LIKE optimization (a prefix pattern
//! served by an index range); the storage's own statements use neither
//! operator.

use super::linear_fns::arg_text;
use super::meter;
use rusqlite::functions::{Context, FunctionFlags};
use rusqlite::types::Value;
use rusqlite::Connection;

/// Registers the three functions on `conn`.
pub fn register(conn: &Connection) -> rusqlite::Result<()> {
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_scalar_function("like", 2, flags, |c| call(c, &LIKE))?;
    conn.create_scalar_function("like", 3, flags, |c| call(c, &LIKE))?;
    conn.create_scalar_function("glob", 2, flags, |c| call(c, &GLOB))
}

/// One dialect of matching (SQLite's `compareInfo`).
#[derive(Clone, Copy)]
struct Info {
    match_all: u32,
    match_one: u32,
    match_set: u32,
    no_case: bool,
}

const GLOB: Info = Info {
    match_all: b'*' as u32,
    match_one: b'?' as u32,
    match_set: b'[' as u32,
    no_case: false,
};

const LIKE: Info = Info {
    match_all: b'%' as u32,
    match_one: b'_' as u32,
    match_set: 0,
    no_case: true,
};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Match,
    NoMatch,
    /// No match, and none is possible at any later start.
    NoWildcardMatch,
}

/// Steps of matching since the last clock read.
struct Steps(usize);

impl Steps {
    const BATCH: usize = 4096;

    fn add(&mut self, n: usize) -> rusqlite::Result<()> {
        self.0 += n;
        if self.0 >= Self::BATCH {
            let n = std::mem::take(&mut self.0);
            meter::work(n)?;
        }
        Ok(())
    }
}

fn call(ctx: &Context<'_>, info: &Info) -> rusqlite::Result<Value> {
    meter::enter()?;
    // SQLite limits the pattern's length in bytes before anything else.
    let pattern = arg_text(ctx, 0)?;
    let limit = meter::limits().pattern.max(0) as usize;
    if pattern.as_ref().map_or(0, Vec::len) > limit {
        return Err(rusqlite::Error::UserFunctionError(
            "LIKE or GLOB pattern too complex".into(),
        ));
    }
    let mut info = *info;
    let escape = if ctx.len() == 3 {
        let Some(esc) = arg_text(ctx, 2)? else {
            return Ok(Value::Null);
        };
        let esc = until_nul(&esc);
        if char_count(esc) != 1 {
            return Err(rusqlite::Error::UserFunctionError(
                "ESCAPE expression must be a single character".into(),
            ));
        }
        let e = read(esc, &mut 0);
        if e == info.match_all {
            info.match_all = 0;
        }
        if e == info.match_one {
            info.match_one = 0;
        }
        e
    } else {
        info.match_set
    };
    let (Some(pattern), Some(string)) = (pattern, arg_text(ctx, 1)?) else {
        return Ok(Value::Null);
    };
    let mut steps = Steps(0);
    let out = compare(
        until_nul(&pattern),
        until_nul(&string),
        &info,
        escape,
        &mut steps,
    )?;
    Ok(Value::Integer(i64::from(out == Outcome::Match)))
}

/// SQLite matches NUL-terminated text: an embedded NUL ends it.
fn until_nul(b: &[u8]) -> &[u8] {
    match b.iter().position(|&c| c == 0) {
        Some(i) => &b[..i],
        None => b,
    }
}

const TRANS1: [u8; 64] = [
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
    0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x00, 0x01, 0x02, 0x03, 0x00, 0x01, 0x00, 0x00,
];

/// One character at `*at` as SQLite decodes UTF-8 (0 past the end): a lead
/// byte and every continuation byte after it; overlong 7-bit forms,
/// surrogates and U+FFFE/U+FFFF become U+FFFD; a stray continuation byte
/// is a character of its own.
fn read(s: &[u8], at: &mut usize) -> u32 {
    let Some(&b) = s.get(*at) else { return 0 };
    *at += 1;
    let mut c = u32::from(b);
    if c >= 0xc0 {
        c = u32::from(TRANS1[(c - 0xc0) as usize]);
        while let Some(&n) = s.get(*at) {
            if n & 0xc0 != 0x80 {
                break;
            }
            c = (c << 6) + u32::from(0x3f & n);
            *at += 1;
        }
        if c < 0x80 || (c & 0xFFFF_F800) == 0xD800 || (c & 0xFFFF_FFFE) == 0xFFFE {
            c = 0xFFFD;
        }
    }
    c
}

/// SQLite's character skip: a lead byte ≥ 0xC0 takes its continuation bytes.
fn skip(s: &[u8], at: &mut usize) {
    if let Some(&b) = s.get(*at) {
        *at += 1;
        if b >= 0xc0 {
            while s.get(*at).is_some_and(|&n| n & 0xc0 == 0x80) {
                *at += 1;
            }
        }
    }
}

fn char_count(s: &[u8]) -> usize {
    let mut at = 0;
    let mut n = 0;
    while at < s.len() {
        skip(s, &mut at);
        n += 1;
    }
    n
}

fn lower(c: u32) -> u32 {
    if c < 0x80 {
        u32::from((c as u8).to_ascii_lowercase())
    } else {
        c
    }
}

fn upper(c: u32) -> u32 {
    if c < 0x80 {
        u32::from((c as u8).to_ascii_uppercase())
    } else {
        c
    }
}

/// SQLite's `patternCompare` over `pattern` and `string`, both ending at
/// their slices' ends; `other` is the escape character (LIKE) or `[`
/// (GLOB).
fn compare(
    pattern: &[u8], string: &[u8], info: &Info, other: u32, steps: &mut Steps,
) -> rusqlite::Result<Outcome> {
    let (mut p, mut s) = (0usize, 0usize);
    // One past the last escaped pattern character.
    let mut escaped: Option<usize> = None;
    loop {
        steps.add(1)?;
        let mut c = read(pattern, &mut p);
        if c == 0 {
            break;
        }
        if c == info.match_all {
            // Runs of `*` and `?` after a `*`: each `?` takes one character.
            loop {
                c = read(pattern, &mut p);
                if c == info.match_all || (c == info.match_one && info.match_one != 0) {
                    if c == info.match_one && read(string, &mut s) == 0 {
                        return Ok(Outcome::NoWildcardMatch);
                    }
                    continue;
                }
                break;
            }
            if c == 0 {
                return Ok(Outcome::Match);
            }
            if c == other {
                if info.match_set == 0 {
                    c = read(pattern, &mut p);
                    if c == 0 {
                        return Ok(Outcome::NoWildcardMatch);
                    }
                } else {
                    // `[…]` right after `*`: try every start.
                    let class = p - 1;
                    while s < string.len() {
                        steps.add(1)?;
                        let m = compare(&pattern[class..], &string[s..], info, other, steps)?;
                        if m != Outcome::NoMatch {
                            return Ok(m);
                        }
                        skip(string, &mut s);
                    }
                    return Ok(Outcome::NoWildcardMatch);
                }
            }
            // The first literal after the `*`: each place it occurs is a
            // start to try the rest of the pattern from.
            if c < 0x80 {
                let (a, b) = if info.no_case {
                    (upper(c) as u8, lower(c) as u8)
                } else {
                    (c as u8, c as u8)
                };
                loop {
                    let found = string[s..].iter().position(|&x| x == a || x == b);
                    steps.add(found.unwrap_or(string.len() - s))?;
                    let Some(i) = found else { break };
                    s += i + 1;
                    let m = compare(&pattern[p..], &string[s..], info, other, steps)?;
                    if m != Outcome::NoMatch {
                        return Ok(m);
                    }
                }
            } else {
                loop {
                    steps.add(1)?;
                    let c2 = read(string, &mut s);
                    if c2 == 0 {
                        break;
                    }
                    if c2 != c {
                        continue;
                    }
                    let m = compare(&pattern[p..], &string[s..], info, other, steps)?;
                    if m != Outcome::NoMatch {
                        return Ok(m);
                    }
                }
            }
            return Ok(Outcome::NoWildcardMatch);
        }
        if c == other {
            if info.match_set == 0 {
                c = read(pattern, &mut p);
                if c == 0 {
                    return Ok(Outcome::NoMatch);
                }
                escaped = Some(p);
            } else {
                // A character class `[…]`, `[^…]`, with ranges `a-z`.
                let mut prior = 0u32;
                let mut seen = false;
                let mut invert = false;
                let c = read(string, &mut s);
                if c == 0 {
                    return Ok(Outcome::NoMatch);
                }
                let mut c2 = read(pattern, &mut p);
                if c2 == u32::from(b'^') {
                    invert = true;
                    c2 = read(pattern, &mut p);
                }
                if c2 == u32::from(b']') {
                    if c == u32::from(b']') {
                        seen = true;
                    }
                    c2 = read(pattern, &mut p);
                }
                while c2 != 0 && c2 != u32::from(b']') {
                    steps.add(1)?;
                    let next = pattern.get(p).copied().unwrap_or(0);
                    if c2 == u32::from(b'-') && next != b']' && next != 0 && prior > 0 {
                        c2 = read(pattern, &mut p);
                        if c >= prior && c <= c2 {
                            seen = true;
                        }
                        prior = 0;
                    } else {
                        if c == c2 {
                            seen = true;
                        }
                        prior = c2;
                    }
                    c2 = read(pattern, &mut p);
                }
                if c2 == 0 || !(seen ^ invert) {
                    return Ok(Outcome::NoMatch);
                }
                continue;
            }
        }
        let c2 = read(string, &mut s);
        if c == c2 {
            continue;
        }
        if info.no_case && lower(c) == lower(c2) && c < 0x80 && c2 < 0x80 {
            continue;
        }
        if c == info.match_one && escaped != Some(p) && c2 != 0 {
            continue;
        }
        return Ok(Outcome::NoMatch);
    }
    Ok(if s >= string.len() {
        Outcome::Match
    } else {
        Outcome::NoMatch
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqlite::fn_tests::{assert_agree, builtin_and_ours};

    /// Every case answered by SQLite's own operators (a fresh connection)
    /// and by these functions must agree, errors included.
    #[test]
    fn the_matchers_agree_with_sqlite() {
        let (builtin, ours) = builtin_and_ours(register);
        let strings = [
            "",
            "a",
            "A",
            "abc",
            "ABC",
            "aXc",
            "a%c",
            "a_c",
            "a\\c",
            "abcabc",
            "ab",
            "éa",
            "Éa",
            "é",
            "x]y",
            "[",
            "-",
            "a-b",
            "aaab",
            "baaa",
            "\u{FFFD}",
            "日本語",
            "a\u{0}b",
        ];
        let patterns = [
            "", "%", "_", "a%", "%c", "%b%", "a_c", "A%", "%A%", "a\\%c", "%%", "_%_", "%_%",
            "a%%c", "%é%", "É%", "é_", "日%", "%本_", "a", "abc", "[", "[a]%", "[^a]%", "[]]%",
            "[a-c]*", "*[b]*", "*", "?", "a*", "*c", "a?c", "[-]", "[a-]", "[!a]", "*[", "a[",
            "\\", "%\\", "%\u{0}%", "a*?c", "*?", "?*", "[z-a]",
        ];
        let mut cases = Vec::new();
        for s in strings {
            for p in patterns {
                let lit = |t: &str| {
                    format!(
                        "'{}'",
                        t.replace('\'', "''").replace('\u{0}', "' || char(0) || '")
                    )
                };
                cases.push(format!("{} LIKE {}", lit(s), lit(p)));
                cases.push(format!("{} GLOB {}", lit(s), lit(p)));
                for e in ["\\", "%", "_", "a", "é"] {
                    cases.push(format!("{} LIKE {} ESCAPE {}", lit(s), lit(p), lit(e)));
                }
            }
        }
        for extra in [
            "'a' LIKE 'a' ESCAPE 'ab'",
            "'a' LIKE 'a' ESCAPE ''",
            "'a' LIKE 'a' ESCAPE NULL",
            "NULL LIKE 'a'",
            "'a' LIKE NULL",
            "12345 LIKE '12%'",
            "1.5 LIKE '1._'",
            "x'616263' LIKE 'a%'",
            "x'61006263' GLOB 'a*'",
            "'abc' GLOB x'612a'",
            "like('%b%', 'abc')",
            "glob('*b*', 'abc')",
            "'\u{80}' LIKE '_'",
            "char(55296) LIKE '_'",
            "cast(x'c0' as text) LIKE '_'",
            "cast(x'e08080' as text) LIKE '_'",
            "cast(x'80' as text) LIKE '_'",
            "cast(x'ff' as text) GLOB '?'",
            "cast(x'efbfbf' as text) GLOB '?'",
        ] {
            cases.push(extra.to_owned());
        }
        assert_agree(&builtin, &ours, &cases);
        // The pattern limit, as SQLite applies it (ours reads it from the
        // meter of the running query).
        builtin
            .set_limit(rusqlite::limits::Limit::SQLITE_LIMIT_LIKE_PATTERN_LENGTH, 4)
            .unwrap();
        let closed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let far = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let limits = meter::Limits {
            value: 1 << 20,
            pattern: 4,
            memory: i64::MAX,
        };
        let _run = meter::start(limits, far, None, &closed);
        assert_agree(
            &builtin,
            &ours,
            [
                "'abcde' LIKE 'abcde'",
                "'abcd' LIKE 'abcd'",
                "NULL LIKE '%%%%%'",
            ],
        );
    }

    #[test]
    fn a_quadratic_match_stops_at_the_deadline() {
        let ours = Connection::open_in_memory().unwrap();
        register(&ours).unwrap();
        let closed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let t = std::time::Instant::now();
        let _run = meter::start(
            meter::tests::TEST,
            t + std::time::Duration::from_millis(50),
            None,
            &closed,
        );
        let r = ours.query_row(
            "SELECT printf('%.*c', 1000000, 'a') LIKE '%' || printf('%.*c', 250, 'a') || 'b'",
            [],
            |r| r.get::<_, i64>(0),
        );
        assert!(r.is_err());
        assert_eq!(meter::stopped(), Some(meter::Stop::Deadline));
        assert!(
            t.elapsed() < std::time::Duration::from_secs(1),
            "{:?}",
            t.elapsed()
        );
    }
}
