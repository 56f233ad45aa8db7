//! Scope maps and filters: how stored scopes are indexed and matched.
//! Stored scopes are a JSON object variable → one string (kept as the
//! host's `JSON.stringify` text); a filter maps each variable to the
//! values it admits.

use crate::error::{Error, Result};
use serde_json::Value as Json;
use std::cmp::Ordering;

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
            .filter_map(|(k, v)| scalar_text(&v).map(|v| (k, v)))
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

    /// Full verification of a stored scope map against every filter key.
    pub fn matches_json(&self, scopes_json: &str) -> bool {
        let Ok(Json::Object(stored)) = serde_json::from_str::<Json>(scopes_json) else {
            return false;
        };
        self.keys.iter().all(|(k, values)| {
            stored
                .get(k)
                .and_then(scalar_text)
                .is_some_and(|s| values.contains(&s))
        })
    }
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
    fn matches_every_key() {
        let f = ScopeFilter::parse(r#"{"p":["1","2"],"u":["x"]}"#).unwrap();
        assert!(f.matches_json(r#"{"p":"2","u":"x","z":"q"}"#));
        assert!(!f.matches_json(r#"{"p":"3","u":"x"}"#));
        assert!(!f.matches_json(r#"{"p":"1"}"#));
        let empty = ScopeFilter::parse(r#"{"p":[]}"#).unwrap();
        assert!(!empty.matches_json(r#"{"p":"1"}"#));
    }
}
