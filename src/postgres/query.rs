//! Registered authoritative queries (storage-layout §13) and index lookups
//! (§7.6) on PostgreSQL. The rewrite is `crate::query`'s, shared with
//! SQLite; here only the placeholders are renumbered (`?` → `$n`, §13.5),
//! values are bound, and result cells are decoded into the engine-neutral
//! cell values the binding turns into JS (int8 beyond 2^53 as `bigint`).
//!
//! Defence in depth beyond the rewrite's checks: the storage-level form
//! runs in a READ ONLY transaction, one statement per prepare (PostgreSQL
//! refuses several commands in a prepared statement), and any name in the
//! SQL that starts with `pg_` or is `information_schema` (catalogs, and
//! administrative functions) is refused.

use super::conn::map_err;
use super::{log, meta, read, rows, snapshot, with_tx, Loaded, PgEngine};
use crate::codec::ColumnType;
use crate::error::{Error, Result};
use crate::model::StoredRow;
use crate::query::lex::{tokenize, Kind};
use crate::query::{self, Bind, Prepared, Request, Value};
use crate::schema::{quote_ident, Table};
use crate::sqlite::QueryOutput;
use rusqlite::types::Value as Cell;
use sqlx::encode::{Encode, IsNull};
use sqlx::error::BoxDynError;
use sqlx::postgres::types::Oid;
use sqlx::postgres::{PgArgumentBuffer, PgArguments, PgRow, PgTypeInfo, PgValueFormat};
use sqlx::query::Query;
use sqlx::{AssertSqlSafe, Column, PgConnection, Postgres, Row, TypeInfo, ValueRef};
use std::sync::Arc;

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
        &self,
        _buf: &mut PgArgumentBuffer,
    ) -> std::result::Result<IsNull, BoxDynError> {
        Ok(IsNull::Yes)
    }
}

fn bind_value<'q>(
    q: Query<'q, Postgres, PgArguments>,
    v: &Value,
) -> Query<'q, Postgres, PgArguments> {
    match v {
        Value::Null | Value::Undefined => q.bind(UntypedNull),
        Value::Integer(i) => q.bind(*i),
        Value::Real(f) => q.bind(*f),
        Value::Text(s) => q.bind(s.clone()),
        Value::Blob(b) => q.bind(b.clone()),
    }
}

/// Catalog names and administrative functions (`pg_*`), and
/// `information_schema`, anywhere outside string literals.
fn touches_catalog(sql: &str) -> bool {
    tokenize(sql).iter().any(|t| {
        let name = match t.kind {
            Kind::Word | Kind::DoubleQuoted => t.name(sql),
            _ => None,
        };
        name.is_some_and(|n| {
            let n = n.to_ascii_lowercase();
            n.starts_with("pg_") || n == "information_schema"
        })
    })
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
fn cell(r: &PgRow, i: usize) -> Result<Cell> {
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

/// Runs a prepared query on `c`; column names come from the first row.
async fn execute(
    c: &mut PgConnection,
    prepared: &Prepared,
    params: &[Value],
    partition: &str,
) -> Result<(Vec<String>, Vec<Vec<Cell>>)> {
    if touches_catalog(&prepared.sql) {
        return Err(Error::plain(
            query::REFUSED,
            "registered query names a PostgreSQL catalog or administrative function (pg_*, information_schema)",
        ));
    }
    if query::count_params(&prepared.sql) != prepared.binds.len() {
        return Err(Error::plain(query::PLAN_ERROR, query::MSG_BINDS));
    }
    let sql = query::dollar_params(&prepared.sql);
    let partition_value = Value::Text(partition.to_owned());
    let mut q = sqlx::query(AssertSqlSafe(sql));
    for b in &prepared.binds {
        q = bind_value(
            q,
            match b {
                Bind::Partition => &partition_value,
                Bind::Param(p) => &params[*p],
            },
        );
    }
    let rows = q.fetch_all(&mut *c).await.map_err(map_err)?;
    let columns: Vec<String> = rows
        .first()
        .map(|r| {
            r.columns()
                .iter()
                .map(|col| col.name().to_owned())
                .collect()
        })
        .unwrap_or_default();
    let mut out = Vec::with_capacity(rows.len());
    for r in &rows {
        out.push(
            (0..columns.len())
                .map(|i| cell(r, i))
                .collect::<Result<Vec<_>>>()?,
        );
    }
    Ok((columns, out))
}

// ---- index lookups (§7.6) -----------------------------------------------------------

/// One index value as bound: booleans from numbers, JSON as text.
enum IndexBind<'v> {
    Bool(bool),
    Text(String),
    Value(&'v Value),
}

/// The placeholder for one index value, cast to its column's type, and
/// what to bind.
fn index_bind(n: usize, ty: Option<ColumnType>, v: &Value) -> (String, IndexBind<'_>) {
    match (ty, v) {
        (Some(ColumnType::Boolean), Value::Integer(i)) => {
            (format!("${n}"), IndexBind::Bool(*i != 0))
        }
        (Some(ColumnType::Json), v) => {
            let text = match v {
                Value::Text(s) => s.clone(),
                Value::Integer(i) => i.to_string(),
                Value::Real(f) => f.to_string(),
                _ => String::new(),
            };
            (format!("${n}::text::jsonb"), IndexBind::Text(text))
        }
        (Some(ty), v) => (format!("${n}::{}", rows::pg_type(ty)), IndexBind::Value(v)),
        (None, v) => (format!("${n}"), IndexBind::Value(v)),
    }
}

const INDEX_ROW_FIELDS: &str = r#""_sync_row_id", "_sync_server_version", "_sync_scopes"::text, "_sync_payload", "_sync_column_versions""#;

#[allow(clippy::too_many_arguments)]
pub async fn scan_rows_by_index(
    c: &mut PgConnection,
    table: &Table,
    partition: &str,
    index: &str,
    values: Option<&[Value]>,
    after_row_id: &str,
    limit: f64,
) -> Result<Vec<StoredRow>> {
    let (ix, values, limit) = crate::scan::check_index_lookup(table, index, values, limit)?;
    let mut text = format!(
        r#"SELECT {INDEX_ROW_FIELDS} FROM {} WHERE "_sync_partition" = $1"#,
        table.quoted
    );
    let mut binds = Vec::with_capacity(values.len());
    for (column, v) in ix.columns.iter().zip(values) {
        if matches!(v, Value::Null | Value::Undefined) {
            text.push_str(&format!(" AND {} IS NULL", quote_ident(column)));
        } else {
            let ty = table
                .columns
                .iter()
                .find(|c| &c.name == column)
                .map(|c| c.def.ty);
            let (placeholder, bind) = index_bind(binds.len() + 2, ty, v);
            binds.push(bind);
            text.push_str(&format!(" AND {} = {placeholder}", quote_ident(column)));
        }
    }
    let n = binds.len() + 1;
    text.push_str(&format!(
        r#" AND "_sync_row_id" > ${} ORDER BY "_sync_row_id" LIMIT ${}"#,
        n + 1,
        n + 2
    ));
    let mut q = sqlx::query(AssertSqlSafe(text)).bind(partition);
    for b in binds {
        q = match b {
            IndexBind::Bool(v) => q.bind(v),
            IndexBind::Text(v) => q.bind(v),
            IndexBind::Value(v) => bind_value(q, v),
        };
    }
    let rows = q
        .bind(after_row_id)
        .bind(limit)
        .fetch_all(&mut *c)
        .await
        .map_err(map_err)?;
    rows.iter().map(|r| rows::row_from(r, 0)).collect()
}

impl PgEngine {
    /// The loaded schema; registered queries refuse to run before
    /// `ensureSchema`.
    fn registered_schema(&self) -> Result<Arc<Loaded>> {
        query::ensured(&self.loaded)
    }

    fn prepare_query(
        &self,
        req: &Request,
        params: &[Value],
        declared: &[String],
    ) -> Result<Prepared> {
        let loaded = self.registered_schema()?;
        query::prepare(req, params, declared, &loaded.schema)
    }

    /// Storage-level `queryAuthoritative`: one REPEATABLE READ READ ONLY
    /// snapshot holding the serve gate (when `gate_running` is given), the
    /// rows and `max_commit_seq`.
    pub async fn query_authoritative(
        &self,
        partition: &str,
        req: &Request,
        params: &[Value],
        declared: &[String],
        gate_running: Option<i64>,
    ) -> Result<QueryOutput> {
        let prepared = self.prepare_query(req, params, declared)?;
        snapshot!(self, |c| {
            let gate = match gate_running {
                Some(running) => Some(meta::read_serve_gate(c, partition, running).await?),
                None => None,
            };
            match execute(c, &prepared, params, partition).await {
                Ok((columns, rows)) => Ok(QueryOutput {
                    gate,
                    error: None,
                    columns,
                    rows,
                    max_commit_seq: log::max_commit_seq(c, partition).await?,
                }),
                // The transaction is aborted now; the gate decides first.
                Err(e) if gate.is_some() => Ok(QueryOutput {
                    gate,
                    error: Some(e),
                    columns: Vec::new(),
                    rows: Vec::new(),
                    max_commit_seq: 0,
                }),
                Err(e) => Err(e),
            }
        })
    }

    /// `tx.queryAuthoritative`: on the transaction's connection, staged
    /// writes visible, no gate.
    pub async fn tx_query_authoritative(
        &self,
        id: u32,
        req: &Request,
        params: &[Value],
        declared: &[String],
    ) -> Result<QueryOutput> {
        let prepared = self.prepare_query(req, params, declared)?;
        with_tx!(self, id, |_st, c, p| {
            let (columns, rows) = execute(c, &prepared, params, &p).await?;
            Ok(QueryOutput {
                gate: None,
                error: None,
                columns,
                rows,
                max_commit_seq: log::max_commit_seq(c, &p).await?,
            })
        })
    }

    pub async fn scan_rows_by_index(
        &self,
        partition: &str,
        table: &str,
        index: &str,
        values: Option<&[Value]>,
        after_row_id: &str,
        limit: f64,
    ) -> Result<Vec<StoredRow>> {
        let (loaded, i) = self.table(table)?;
        let t = &loaded.schema.tables[i];
        read!(self, |c| scan_rows_by_index(
            c,
            t,
            partition,
            index,
            values,
            after_row_id,
            limit
        )
        .await)
    }

    pub async fn tx_scan_rows_by_index(
        &self,
        id: u32,
        table: &str,
        index: &str,
        values: Option<&[Value]>,
        after_row_id: &str,
        limit: f64,
    ) -> Result<Vec<StoredRow>> {
        let (loaded, i) = self.table(table)?;
        let t = &loaded.schema.tables[i];
        with_tx!(self, id, |_st, c, p| scan_rows_by_index(
            c,
            t,
            &p,
            index,
            values,
            after_row_id,
            limit
        )
        .await)
    }
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

    #[test]
    fn catalog_names_are_refused() {
        assert!(touches_catalog("SELECT * FROM pg_authid"));
        assert!(touches_catalog("SELECT pg_sleep(1)"));
        assert!(touches_catalog("SELECT * FROM \"PG_class\""));
        assert!(touches_catalog("SELECT * FROM information_schema.tables"));
        assert!(!touches_catalog("SELECT 'pg_class' AS x FROM tasks"));
    }
}
