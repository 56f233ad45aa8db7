//! Registered-query values in and out: how a JS value is bound to the
//! guarded SQL (an untyped NULL as a text driver would send it), and how a
//! result cell of any PostgreSQL type becomes an engine-neutral cell (int8
//! beyond 2^53 as `bigint`, numeric as text).

use crate::core::error::{Error, Result};
use crate::core::model::Cell;
use crate::core::query::Value;
use crate::postgres::error::map_err;
use sqlx::encode::{Encode, IsNull};
use sqlx::error::BoxDynError;
use sqlx::postgres::types::Oid;
use sqlx::postgres::{PgArgumentBuffer, PgArguments, PgRow, PgTypeInfo, PgValueFormat};
use sqlx::query::Query;
use sqlx::{Postgres, Row, TypeInfo, ValueRef};

/// A NULL whose type the server infers from where it is used, as a text
/// driver's untyped parameter would be.
struct UntypedNull;

impl sqlx::Type<Postgres> for UntypedNull {
    fn type_info() -> PgTypeInfo {
        PgTypeInfo::with_oid(Oid(0))
    }
}

impl Encode<'_, Postgres> for UntypedNull {
    fn encode_by_ref(
        &self, _buf: &mut PgArgumentBuffer,
    ) -> std::result::Result<IsNull, BoxDynError> {
        Ok(IsNull::Yes)
    }
}

pub(super) fn bind_value<'q>(
    q: Query<'q, Postgres, PgArguments>, v: Value,
) -> Query<'q, Postgres, PgArguments> {
    match v {
        Value::Null | Value::Undefined => q.bind(UntypedNull),
        Value::Integer(i) => q.bind(i),
        Value::Real(f) => q.bind(f),
        Value::Text(s) => q.bind(s),
        Value::Blob(b) => q.bind(b),
    }
}

/// Binary numeric → text (`-123.4500`), for the NUMERIC results of
/// aggregates such as `sum(bigint)`.
fn numeric_text(b: &[u8]) -> Option<String> {
    let word = |i: usize| -> Option<i16> { Some(i16::from_be_bytes([*b.get(i)?, *b.get(i + 1)?])) };
    let ndigits = word(0)? as usize;
    let weight = word(2)? as i32;
    let sign = word(4)? as u16;
    let dscale = word(6)? as usize;
    if sign == 0xC000 {
        return Some("NaN".into());
    }
    let digits: Vec<i16> = (0..ndigits)
        .map(|i| word(8 + 2 * i))
        .collect::<Option<_>>()?;
    let mut int = String::new();
    for w in 0..=weight.max(-1) {
        let d = digits.get(w as usize).copied().unwrap_or(0);
        if int.is_empty() {
            int.push_str(&d.to_string());
        } else {
            int.push_str(&format!("{d:04}"));
        }
    }
    if int.is_empty() {
        int.push('0');
    }
    let mut frac = String::new();
    let mut w = weight + 1;
    while frac.len() < dscale {
        let d = if w < 0 {
            0
        } else {
            digits.get(w as usize).copied().unwrap_or(0)
        };
        frac.push_str(&format!("{d:04}"));
        w += 1;
    }
    frac.truncate(dscale);
    let mut out = String::new();
    if sign == 0x4000 {
        out.push('-');
    }
    out.push_str(&int);
    if !frac.is_empty() {
        out.push('.');
        out.push_str(&frac);
    }
    Some(out)
}

/// One result cell as the SQLite path shapes it: integers (booleans as
/// 0/1), doubles, text (JSON as its text), bytes.
pub(super) fn cell(r: &PgRow, i: usize) -> Result<Cell> {
    let raw = r.try_get_raw(i).map_err(map_err)?;
    if raw.is_null() {
        return Ok(Cell::Null);
    }
    let ty = raw.type_info().name().to_ascii_uppercase();
    let get_err = |e| map_err(e);
    Ok(match ty.as_str() {
        "BOOL" => Cell::Integer(i64::from(r.try_get::<bool, _>(i).map_err(get_err)?)),
        "INT2" => Cell::Integer(i64::from(r.try_get::<i16, _>(i).map_err(get_err)?)),
        "INT4" => Cell::Integer(i64::from(r.try_get::<i32, _>(i).map_err(get_err)?)),
        "INT8" => Cell::Integer(r.try_get::<i64, _>(i).map_err(get_err)?),
        "OID" => Cell::Integer(i64::from(r.try_get::<Oid, _>(i).map_err(get_err)?.0)),
        "FLOAT4" => Cell::Real(f64::from(r.try_get::<f32, _>(i).map_err(get_err)?)),
        "FLOAT8" => Cell::Real(r.try_get::<f64, _>(i).map_err(get_err)?),
        "BYTEA" => Cell::Blob(r.try_get::<Vec<u8>, _>(i).map_err(get_err)?),
        "NUMERIC" => {
            let bytes = raw.as_bytes().map_err(|e| unsupported(&ty, e))?;
            let text = if raw.format() == PgValueFormat::Binary {
                numeric_text(bytes).ok_or_else(|| unsupported(&ty, "malformed"))?
            } else {
                String::from_utf8_lossy(bytes).into_owned()
            };
            match text.parse::<i64>() {
                Ok(n) => Cell::Integer(n),
                Err(_) => match text.split_once('.') {
                    Some((int, frac)) if frac.bytes().all(|d| d == b'0') => int
                        .parse::<i64>()
                        .map(Cell::Integer)
                        .unwrap_or_else(|_| Cell::Text(text.clone())),
                    _ => text
                        .parse::<f64>()
                        .map(Cell::Real)
                        .unwrap_or(Cell::Text(text)),
                },
            }
        }
        "JSONB" => {
            let bytes = raw.as_bytes().map_err(|e| unsupported(&ty, e))?;
            let body = match (raw.format(), bytes.first()) {
                (PgValueFormat::Binary, Some(1)) => &bytes[1..],
                _ => bytes,
            };
            Cell::Text(String::from_utf8_lossy(body).into_owned())
        }
        "TEXT" | "VARCHAR" | "BPCHAR" | "NAME" | "JSON" | "UNKNOWN" | "CHAR" | "CITEXT" => {
            let bytes = raw.as_bytes().map_err(|e| unsupported(&ty, e))?;
            Cell::Text(String::from_utf8_lossy(bytes).into_owned())
        }
        _ => return Err(unsupported(&ty, "no conversion")),
    })
}

fn unsupported(ty: &str, why: impl std::fmt::Display) -> Error {
    Error::plain(
        "ERR_SYNCULAR_UNSUPPORTED_VALUE",
        format!("registered query result column of type {ty} cannot be returned ({why}); cast it to text"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_binary_to_text() {
        // 12345.678 : ndigits 3, weight 1, sign +, dscale 3, digits 1 2345 6780
        let mut b = Vec::new();
        for w in [3i16, 1, 0, 3, 1, 2345, 6780] {
            b.extend_from_slice(&w.to_be_bytes());
        }
        assert_eq!(numeric_text(&b).unwrap(), "12345.678");
        // 0.05 : ndigits 1, weight -1, dscale 2, digits 500
        let mut b = Vec::new();
        for w in [1i16, -1, 0, 2, 500] {
            b.extend_from_slice(&w.to_be_bytes());
        }
        assert_eq!(numeric_text(&b).unwrap(), "0.05");
        // -7 : ndigits 1, weight 0, sign -, dscale 0
        let mut b = Vec::new();
        for w in [1i16, 0, 0x4000, 0, 7] {
            b.extend_from_slice(&w.to_be_bytes());
        }
        assert_eq!(numeric_text(&b).unwrap(), "-7");
    }
}
