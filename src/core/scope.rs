//! Scope maps and filters: how stored scopes are indexed and matched.
//! Stored scopes are a JSON object variable → one string (kept as the
//! host's `JSON.stringify` text); a filter maps each variable to the
//! values it admits.

use crate::core::error::{Error, Result};
use serde_json::Value as Json;
use std::cmp::Ordering;

/// The last scope text a filter judged, and its verdict
/// ([`ScopeFilter::matches_json_memo`]).
#[derive(Default)]
pub struct ScopeMemo {
    text: String,
    verdict: Option<bool>,
    known: bool,
}

/// A parsed scope filter, keys sorted in JS default order (UTF-16 code
/// units), so `keys[0]` is the variable the index probe uses.
#[derive(Debug, Clone, Default)]
pub struct ScopeFilter {
    pub keys: Vec<(String, Vec<String>)>,
}

pub fn cmp_utf16(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// The text a stored scope value is compared and indexed as.
pub fn scalar_text(v: &Json) -> Option<String> {
    match v {
        Json::String(s) => Some(s.clone()),
        Json::Number(n) => Some(n.to_string()),
        Json::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Every (variable, value) pair of a stored scope map, in map order.
pub fn scope_pairs(scopes_json: &str) -> Result<Vec<(String, String)>> {
    match serde_json::from_str::<Json>(scopes_json) {
        Ok(Json::Object(o)) => Ok(o
            .into_iter()
            // A string is moved out, not copied.
            .filter_map(|(k, v)| match v {
                Json::String(s) => Some((k, s)),
                v => scalar_text(&v).map(|v| (k, v)),
            })
            .collect()),
        _ => Err(Error::invalid(
            "scopes must be an object of variable → string",
        )),
    }
}

impl ScopeFilter {
    pub fn parse(filter_json: &str) -> Result<ScopeFilter> {
        let v: Json = serde_json::from_str(filter_json)
            .map_err(|_| Error::invalid("scopeFilter must be an object of variable → string[]"))?;
        let Json::Object(o) = v else {
            return Err(Error::invalid(
                "scopeFilter must be an object of variable → string[]",
            ));
        };
        let mut keys = Vec::with_capacity(o.len());
        for (k, v) in o {
            let values = match v {
                Json::Array(a) => a
                    .into_iter()
                    .map(|x| match x {
                        Json::String(s) => Ok(s),
                        _ => Err(Error::invalid(format!(
                            "scopeFilter[{k:?}] must be an array of strings"
                        ))),
                    })
                    .collect::<Result<Vec<_>>>()?,
                _ => {
                    return Err(Error::invalid(format!(
                        "scopeFilter[{k:?}] must be an array of strings"
                    )))
                }
            };
            keys.push((k, values));
        }
        keys.sort_by(|a, b| cmp_utf16(&a.0, &b.0));
        Ok(ScopeFilter { keys })
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The index probe: first sorted variable and its values.
    pub fn probe(&self) -> Option<(&str, &[String])> {
        self.keys.first().map(|(k, v)| (k.as_str(), v.as_slice()))
    }

    /// Full verification of a stored scope map against every filter key;
    /// `None` when the text is not a JSON object (`JSON.parse` semantics),
    /// which a caller reports as a corrupt value. Runs once per candidate
    /// row of every scan and window, so the common shape (a flat object of
    /// plain strings) is matched without parsing into a map; anything else
    /// takes the general path.
    pub fn matches_json(&self, scopes_json: &str) -> Option<bool> {
        match self.matches_flat(scopes_json) {
            Some(m) => Some(m),
            None => self.matches_parsed(scopes_json),
        }
    }

    /// [`matches_json`](Self::matches_json), remembering the last text
    /// and its verdict in `memo`: the rows of a page mostly repeat one
    /// scope map, and comparing the bytes costs less than reading them
    /// as JSON again.
    pub fn matches_json_memo(&self, memo: &mut ScopeMemo, scopes_json: &str) -> Option<bool> {
        if memo.known && memo.text == scopes_json {
            return memo.verdict;
        }
        let verdict = self.matches_json(scopes_json);
        memo.text.clear();
        memo.text.push_str(scopes_json);
        memo.verdict = verdict;
        memo.known = true;
        verdict
    }

    fn matches_parsed(&self, scopes_json: &str) -> Option<bool> {
        let stored = match serde_json::from_str::<Json>(scopes_json) {
            Ok(Json::Object(o)) => o,
            Ok(_) => return None,
            // JSON.parse also reads `\u` escapes of lone surrogates, which
            // serde refuses: match those as U+FFFD (no filter value, being
            // UTF-8, holds a lone surrogate).
            Err(_) if crate::core::stored::Shape::Object.holds(scopes_json) => {
                match serde_json::from_str::<Json>(&lone_surrogates_replaced(scopes_json)) {
                    Ok(Json::Object(o)) => o,
                    _ => return None,
                }
            }
            Err(_) => return None,
        };
        Some(self.keys.iter().all(|(k, values)| {
            stored
                .get(k)
                .and_then(scalar_text)
                .is_some_and(|s| values.contains(&s))
        }))
    }

    /// `None` when the text is not a flat object of escape-free strings
    /// (or has more keys to track than fit the bitmask).
    fn matches_flat(&self, text: &str) -> Option<bool> {
        if self.keys.len() > 64 {
            return None;
        }
        let b = text.as_bytes();
        let mut i = 0;
        let skip_ws = |i: &mut usize| {
            while *i < b.len() && matches!(b[*i], b' ' | b'\t' | b'\n' | b'\r') {
                *i += 1;
            }
        };
        // A plain string literal starting at b[*i] == '"'; escapes and raw
        // control characters (invalid JSON) bail out, so text this accepts
        // is always valid JSON (the packers embed verified scopes as is).
        let string = |i: &mut usize| -> Option<&str> {
            if b.get(*i) != Some(&b'"') {
                return None;
            }
            let start = *i + 1;
            let len = b[start..]
                .iter()
                .position(|c| *c == b'"' || *c == b'\\' || *c < 0x20)?;
            if b[start + len] != b'"' {
                return None;
            }
            *i = start + len + 1;
            text.get(start..start + len)
        };
        let mut matched: u64 = 0;
        let mut seen: u64 = 0;
        skip_ws(&mut i);
        if b.get(i) != Some(&b'{') {
            return None;
        }
        i += 1;
        skip_ws(&mut i);
        if b.get(i) == Some(&b'}') {
            i += 1;
        } else {
            loop {
                skip_ws(&mut i);
                let key = string(&mut i)?;
                skip_ws(&mut i);
                if b.get(i) != Some(&b':') {
                    return None;
                }
                i += 1;
                skip_ws(&mut i);
                let value = string(&mut i)?;
                if let Some(k) = self.keys.iter().position(|(name, _)| name == key) {
                    // JSON.parse keeps the last of duplicated keys.
                    let bit = 1u64 << k;
                    seen |= bit;
                    if self.keys[k].1.iter().any(|v| v == value) {
                        matched |= bit;
                    } else {
                        matched &= !bit;
                    }
                }
                skip_ws(&mut i);
                match b.get(i) {
                    Some(b',') => i += 1,
                    Some(b'}') => {
                        i += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        skip_ws(&mut i);
        if i != b.len() {
            return None;
        }
        let all = if self.keys.len() == 64 {
            u64::MAX
        } else {
            (1u64 << self.keys.len()) - 1
        };
        Some(seen & matched == all)
    }
}

/// `text` (valid JSON) with every `\u` escape of a lone surrogate replaced
/// by `\ufffd`; escaped surrogate pairs stay.
fn lone_surrogates_replaced(text: &str) -> String {
    let hex = |s: &str| u16::from_str_radix(s, 16).ok();
    let surrogate = |s: &str, lo: u16, hi: u16| {
        s.strip_prefix("\\u")
            .and_then(|h| h.get(..4))
            .and_then(hex)
            .is_some_and(|u| (lo..=hi).contains(&u))
    };
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let esc = &rest[at..];
        if surrogate(esc, 0xD800, 0xDBFF) && surrogate(&esc[6..], 0xDC00, 0xDFFF) {
            out.push_str(&esc[..12]);
            rest = &esc[12..];
        } else if surrogate(esc, 0xD800, 0xDFFF) {
            out.push_str("\\ufffd");
            rest = &esc[6..];
        } else {
            // Any other escape is two characters, or six for `\uXXXX`.
            let n = if esc.as_bytes().get(1) == Some(&b'u') {
                6
            } else {
                2
            };
            let n = n.min(esc.len());
            out.push_str(&esc[..n]);
            rest = &esc[n..];
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_keys_by_utf16() {
        // U+FF21 sorts after U+1F600 in UTF-8 byte order but before it in UTF-16.
        let f = ScopeFilter::parse(r#"{"😀":["a"],"Ａ":["b"]}"#).unwrap();
        assert_eq!(f.keys[0].0, "😀");
        let f = ScopeFilter::parse(r#"{"b":["1"],"a":["2","3"]}"#).unwrap();
        assert_eq!(f.probe().unwrap().0, "a");
    }

    #[test]
    fn flat_matcher_agrees_with_the_parser() {
        let f = ScopeFilter::parse(r#"{"p":["1","2"],"u":["x"]}"#).unwrap();
        for text in [
            r#"{"p":"2","u":"x","z":"q"}"#,
            r#"{"p":"3","u":"x"}"#,
            r#"{"p":"1"}"#,
            r#" { "u" : "x" , "p" : "1" } "#,
            r#"{"p":"1","u":"x","p":"9"}"#,
            r#"{"p":"9","u":"x","p":"1"}"#,
            r#"{}"#,
            r#"{"p":"1","u":"x"} trailing"#,
            r#"{"p":1,"u":"x"}"#,
            r#"{"p":"\u0031","u":"x"}"#,
            r#"[]"#,
            r#"{"p":"1","u":"x""#,
        ] {
            assert_eq!(f.matches_json(text), f.matches_parsed(text), "{text}");
            assert_eq!(
                f.matches_json(text).is_some(),
                crate::core::stored::Shape::Object.holds(text),
                "{text}"
            );
        }
    }

    #[test]
    fn matches_every_key() {
        let f = ScopeFilter::parse(r#"{"p":["1","2"],"u":["x"]}"#).unwrap();
        assert_eq!(f.matches_json(r#"{"p":"2","u":"x","z":"q"}"#), Some(true));
        assert_eq!(f.matches_json(r#"{"p":"3","u":"x"}"#), Some(false));
        assert_eq!(f.matches_json(r#"{"p":"1"}"#), Some(false));
        let empty = ScopeFilter::parse(r#"{"p":[]}"#).unwrap();
        assert_eq!(empty.matches_json(r#"{"p":"1"}"#), Some(false));
    }

    #[test]
    fn unreadable_scopes_are_none_and_lone_surrogates_are_read() {
        let f = ScopeFilter::parse(r#"{"p":["1"]}"#).unwrap();
        for text in [
            "",
            "[]",
            "42",
            r#""{\"p\":\"1\"}""#,
            r#"{"p":"1""#,
            "{\"p\":\"1\"} x",
        ] {
            assert_eq!(f.matches_json(text), None, "{text}");
        }
        // JSON.parse reads these; serde refuses the lone surrogates.
        assert_eq!(f.matches_json(r#"{"x":"\ud800","p":"1"}"#), Some(true));
        assert_eq!(
            f.matches_json(r#"{"x":"\udc00\\ud800","p":"2"}"#),
            Some(false)
        );
        assert_eq!(f.matches_json(r#"{"p":"\ud83d\ude00"}"#), Some(false));
        assert_eq!(
            lone_surrogates_replaced(r#"["\ud800","\\ud800","\ud83d\ude00","\udc00x","\n"]"#),
            r#"["\ufffd","\\ud800","\ud83d\ude00","\ufffdx","\n"]"#
        );
    }
}
