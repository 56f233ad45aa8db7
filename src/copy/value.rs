//! Values on their way between the engines: a SQLite value written as a
//! field of PostgreSQL's binary `COPY` format for the column's kind, and
//! the canonical form `verify` hashes, the same for a value read from
//! either engine (docs/copy.md, "verify").

use super::tables::Kind;
use rusqlite::types::ValueRef;

/// The header of a binary `COPY` stream: signature, flags, extension length.
pub const COPY_HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";
/// The trailer: a field count of -1.
pub const COPY_TRAILER: &[u8] = &[0xff, 0xff];

/// Starts a tuple of `n` fields.
pub fn tuple(buf: &mut Vec<u8>, n: usize) {
    buf.extend_from_slice(&(n as i16).to_be_bytes());
}

fn field(buf: &mut Vec<u8>, bytes: &[u8]) {
    buf.extend_from_slice(&(bytes.len() as i32).to_be_bytes());
    buf.extend_from_slice(bytes);
}

fn null(buf: &mut Vec<u8>) {
    buf.extend_from_slice(&(-1i32).to_be_bytes());
}

fn is_json(b: &[u8]) -> bool {
    serde_json::from_slice::<&serde_json::value::RawValue>(b).is_ok()
}

/// Appends `v` as a field of a column of `kind`; on a value the column
/// cannot hold, what was wrong (the caller names the table, column, row).
pub fn encode(buf: &mut Vec<u8>, kind: Kind, v: ValueRef<'_>) -> Result<(), String> {
    use ValueRef as V;
    let wrong = |what: &str| {
        Err(format!(
            "a {} value where the column holds {what}",
            match v {
                V::Null => "NULL",
                V::Integer(_) => "INTEGER",
                V::Real(_) => "REAL",
                V::Text(_) => "TEXT",
                V::Blob(_) => "BLOB",
            }
        ))
    };
    match (kind, v) {
        (_, V::Null) => null(buf),
        (Kind::Text, V::Text(b)) => field(buf, b),
        (Kind::Int8, V::Integer(i)) => field(buf, &i.to_be_bytes()),
        (Kind::Int4, V::Integer(i)) => match i32::try_from(i) {
            Ok(i) => field(buf, &i.to_be_bytes()),
            Err(_) => return Err(format!("{i} does not fit a 32-bit INTEGER")),
        },
        (Kind::Int2, V::Integer(i)) => match i16::try_from(i) {
            Ok(i) => field(buf, &i.to_be_bytes()),
            Err(_) => return Err(format!("{i} does not fit a SMALLINT")),
        },
        (Kind::Bool, V::Integer(i @ (0 | 1))) => field(buf, &[i as u8]),
        (Kind::Bool, V::Integer(i)) => return Err(format!("{i} is not a boolean 0 or 1")),
        (Kind::Float8, V::Real(f)) => field(buf, &f.to_bits().to_be_bytes()),
        (Kind::Float8, V::Integer(i)) => field(buf, &(i as f64).to_bits().to_be_bytes()),
        (Kind::Json | Kind::JsonOrNull, V::Text(b)) => {
            if is_json(b) {
                buf.extend_from_slice(&(b.len() as i32 + 1).to_be_bytes());
                buf.push(1);
                buf.extend_from_slice(b);
            } else if kind == Kind::JsonOrNull {
                null(buf);
            } else {
                return Err("text that is not JSON".to_owned());
            }
        }
        (Kind::Bytea, V::Blob(b) | V::Text(b)) => field(buf, b),
        (Kind::Text, _) => return wrong("TEXT"),
        (Kind::Int8 | Kind::Int4 | Kind::Int2 | Kind::Bool, _) => return wrong("an integer"),
        (Kind::Float8, _) => return wrong("a number"),
        (Kind::Json | Kind::JsonOrNull, _) => return wrong("JSON text"),
        (Kind::Bytea, _) => return wrong("bytes"),
    }
    Ok(())
}

/// Appends `s` as a SQL string literal (`standard_conforming_strings` on).
pub fn quote(out: &mut String, s: &str) {
    out.push('\'');
    for ch in s.chars() {
        if ch == '\'' {
            out.push('\'');
        }
        out.push(ch);
    }
    out.push('\'');
}

/// Appends `v` as a SQL literal of a column of `kind`, with the
/// conversions of [`encode`] (the catch-up passes send their rows as SQL
/// text: one round trip, where each `COPY` costs a delayed acknowledgement).
pub fn literal(out: &mut String, kind: Kind, v: ValueRef<'_>) -> Result<(), String> {
    use std::fmt::Write;
    fn text(b: &[u8]) -> Result<&str, String> {
        std::str::from_utf8(b).map_err(|_| "text that is not UTF-8".to_owned())
    }
    match (kind, v) {
        (_, ValueRef::Null) => out.push_str("NULL"),
        (Kind::Float8, ValueRef::Real(f)) if !f.is_finite() => {
            out.push_str(if f.is_nan() {
                "'NaN'"
            } else if f > 0.0 {
                "'Infinity'"
            } else {
                "'-Infinity'"
            });
            out.push_str("::float8");
        }
        (Kind::Float8, ValueRef::Real(f)) => {
            let _ = write!(out, "{f:?}::float8");
        }
        (Kind::Float8, ValueRef::Integer(i)) => {
            let _ = write!(out, "{:?}::float8", i as f64);
        }
        (Kind::Json | Kind::JsonOrNull, ValueRef::Text(b)) => {
            if is_json(b) {
                quote(out, text(b)?);
                out.push_str("::jsonb");
            } else if kind == Kind::JsonOrNull {
                out.push_str("NULL");
            } else {
                return Err("text that is not JSON".to_owned());
            }
        }
        (Kind::Bytea, ValueRef::Blob(b) | ValueRef::Text(b)) => {
            out.push_str("'\\x");
            for byte in b {
                let _ = write!(out, "{byte:02x}");
            }
            out.push_str("'::bytea");
        }
        (Kind::Text, ValueRef::Text(b)) => quote(out, text(b)?),
        _ => {
            // Integers and booleans: checked as for COPY, written as numbers.
            let mut probe = Vec::new();
            encode(&mut probe, kind, v)?;
            match (kind, v) {
                (Kind::Bool, ValueRef::Integer(i)) => {
                    out.push_str(if i == 1 { "true" } else { "false" })
                }
                (_, ValueRef::Integer(i)) => {
                    let _ = write!(out, "{i}");
                }
                _ => unreachable!("encode refused every other pair"),
            }
        }
    }
    Ok(())
}

/// A value as `verify` sees it, whichever engine it was read from.
#[derive(Debug, Clone, PartialEq)]
pub enum Canon {
    Null,
    Int(i64),
    Real(f64),
    Bytes(Vec<u8>),
    /// JSON re-written with sorted keys, or the raw text when it does not
    /// parse (then it compares as text).
    Json(String),
}

impl Canon {
    /// Appends the value's tagged bytes to a row's canonical encoding.
    pub fn write(&self, out: &mut Vec<u8>) {
        match self {
            Canon::Null => out.push(0),
            Canon::Int(i) => {
                out.push(1);
                out.extend_from_slice(&i.to_be_bytes());
            }
            Canon::Real(f) => {
                out.push(2);
                out.extend_from_slice(&f.to_bits().to_be_bytes());
            }
            Canon::Bytes(b) => {
                out.push(3);
                out.extend_from_slice(&(b.len() as u64).to_be_bytes());
                out.extend_from_slice(b);
            }
            Canon::Json(s) => {
                out.push(4);
                out.extend_from_slice(&(s.len() as u64).to_be_bytes());
                out.extend_from_slice(s.as_bytes());
            }
        }
    }

    /// A short display form for a report (keys, differing values).
    pub fn show(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            Canon::Null => J::Null,
            Canon::Int(i) => J::from(*i),
            Canon::Real(f) => J::from(*f),
            Canon::Bytes(b) => match std::str::from_utf8(b) {
                Ok(s) => J::from(s),
                Err(_) => J::from(format!("<{} bytes>", b.len())),
            },
            Canon::Json(s) => J::from(s.as_str()),
        }
    }
}

/// The canonical form of JSON text: keys sorted, no spaces, numbers as
/// integers where they are integral; a JSON string holding an object or
/// array (the Bun.SQL form, docs/legacy-forms.md) is its content.
pub fn canon_json(text: &str) -> Canon {
    let Ok(mut v) = serde_json::from_str::<serde_json::Value>(text) else {
        return Canon::Json(format!("invalid:{text}"));
    };
    if let serde_json::Value::String(s) = &v {
        if let Ok(inner @ (serde_json::Value::Object(_) | serde_json::Value::Array(_))) =
            serde_json::from_str::<serde_json::Value>(s)
        {
            v = inner;
        }
    }
    let mut out = String::new();
    write_json(&v, &mut out);
    Canon::Json(out)
}

fn write_json(v: &serde_json::Value, out: &mut String) {
    use serde_json::Value as J;
    match v {
        J::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&J::from(k.as_str()).to_string());
                out.push(':');
                write_json(&m[k], out);
            }
            out.push('}');
        }
        J::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(x, out);
            }
            out.push(']');
        }
        J::Number(n) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 9.2e18 => {
                out.push_str(&(f as i64).to_string())
            }
            Some(f) => out.push_str(&f.to_string()),
            None => out.push_str(&n.to_string()),
        },
        other => out.push_str(&other.to_string()),
    }
}

/// The canonical form of a SQLite value in a column of `kind`, following
/// the conversions of [`encode`].
pub fn canon_sqlite(kind: Kind, v: ValueRef<'_>) -> Canon {
    use ValueRef as V;
    match (kind, v) {
        (_, V::Null) => Canon::Null,
        (Kind::Float8, V::Integer(i)) => Canon::Real(i as f64),
        (_, V::Integer(i)) => Canon::Int(i),
        (_, V::Real(f)) => Canon::Real(f),
        (Kind::Json, V::Text(b)) => canon_json(&String::from_utf8_lossy(b)),
        (Kind::JsonOrNull, V::Text(b)) => {
            if is_json(b) {
                canon_json(&String::from_utf8_lossy(b))
            } else {
                Canon::Null
            }
        }
        (_, V::Text(b) | V::Blob(b)) => Canon::Bytes(b.to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_canon_erases_what_jsonb_changes() {
        assert_eq!(
            canon_json(r#"{"b":1,"a":[1.0,"x"]}"#),
            canon_json(r#"{"a": [1, "x"], "b": 1}"#)
        );
        assert_eq!(
            canon_json(r#""{\"a\":1}""#),
            canon_json(r#"{"a": 1}"#),
            "the string form is its content"
        );
        assert_ne!(canon_json(r#"{"a":1}"#), canon_json(r#"{"a":2}"#));
        assert_eq!(canon_json(r#""12""#), Canon::Json(r#""12""#.to_owned()));
    }

    #[test]
    fn encodes_copy_fields() {
        let mut b = Vec::new();
        encode(&mut b, Kind::Int4, ValueRef::Integer(7)).unwrap();
        assert_eq!(b, [0, 0, 0, 4, 0, 0, 0, 7]);
        b.clear();
        encode(&mut b, Kind::Bool, ValueRef::Integer(1)).unwrap();
        assert_eq!(b, [0, 0, 0, 1, 1]);
        b.clear();
        encode(&mut b, Kind::JsonOrNull, ValueRef::Text(b"nope")).unwrap();
        assert_eq!(b, [0xff, 0xff, 0xff, 0xff]);
        b.clear();
        encode(&mut b, Kind::Json, ValueRef::Text(b"{}")).unwrap();
        assert_eq!(b, [0, 0, 0, 3, 1, b'{', b'}']);
        assert!(encode(&mut b, Kind::Json, ValueRef::Text(b"{")).is_err());
        assert!(encode(&mut b, Kind::Int2, ValueRef::Integer(70000)).is_err());
        assert!(encode(&mut b, Kind::Int8, ValueRef::Text(b"1")).is_err());
        assert!(encode(&mut b, Kind::Bool, ValueRef::Integer(2)).is_err());
    }

    #[test]
    fn writes_literals() {
        let lit = |k, v| {
            let mut s = String::new();
            literal(&mut s, k, v).map(|()| s)
        };
        assert_eq!(lit(Kind::Text, ValueRef::Text(b"it's")).unwrap(), "'it''s'");
        assert_eq!(
            lit(Kind::Bytea, ValueRef::Blob(&[0, 255])).unwrap(),
            "'\\x00ff'::bytea"
        );
        assert_eq!(lit(Kind::Bool, ValueRef::Integer(1)).unwrap(), "true");
        assert_eq!(lit(Kind::Int8, ValueRef::Integer(-5)).unwrap(), "-5");
        assert_eq!(
            lit(Kind::Float8, ValueRef::Real(0.1)).unwrap(),
            "0.1::float8"
        );
        assert_eq!(
            lit(Kind::Float8, ValueRef::Real(f64::NAN)).unwrap(),
            "'NaN'::float8"
        );
        assert_eq!(
            lit(Kind::Json, ValueRef::Text(b"{\"a\":1}")).unwrap(),
            "'{\"a\":1}'::jsonb"
        );
        assert_eq!(
            lit(Kind::JsonOrNull, ValueRef::Text(b"nope")).unwrap(),
            "NULL"
        );
        assert!(lit(Kind::Int2, ValueRef::Integer(1 << 20)).is_err());
        assert!(lit(Kind::Text, ValueRef::Integer(1)).is_err());
    }
}
