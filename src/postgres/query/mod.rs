//! Registered authoritative queries (storage-layout §13) and index lookups
//! (§7.6) on PostgreSQL. The shared rewrite (`crate::query`) runs first,
//! for its upstream-compatible errors; its placeholders are renumbered
//! (`?` → `$n`, §13.5), then [`guard`] parses the text with PostgreSQL's
//! own parser, binds every table to the call's partition in the tree,
//! checks the tree against an allowlist and prints the SQL that runs.
//!
//! A table is read through the session's security-barrier view of it
//! (`pg_temp."_syncular_q_…"`, [`guard::view_ddl`]), which shows the rows
//! of the partition set in `syncular.partition`. Each call sets that
//! setting locally to its transaction or savepoint, in the message that
//! opens it; a connection that lacks the views (new, or its transaction
//! that created them rolled back) creates them when the query reports
//! them missing, and runs the query again.
//!
//! Execution confines what the query can touch even beyond the guard:
//! `search_path` is `pg_catalog, pg_temp` (unqualified names reach nothing
//! of the database's own), `statement_timeout` is `queryTimeoutMs`, and no
//! effect survives the call: the storage-level form runs in a READ ONLY
//! snapshot that is rolled back, the transaction-bound form inside a
//! savepoint that is rolled back (SET LOCAL reverts with either). Result
//! cells are decoded into the engine-neutral cell values the binding turns
//! into JS (int8 beyond 2^53 as `bigint`).

mod bounds;
mod cost;
mod guard;
#[cfg(test)]
mod guard_tests;

use super::error::map_err;
use super::{meta, read, rows, with_tx, Loaded, PgEngine};
use crate::codec::ColumnType;
use crate::error::{Error, Result};
use crate::model::StoredRow;
use crate::model::{Cell, QueryOutput};
use crate::query::result::{Limits, Tally};
use crate::query::{self, Bind, Prepared, Request, Value};
use crate::schema::{quote_ident, Table};
use crate::stored::{self, Form};
use crate::telemetry::{self, Site, Slow};
use sqlx::encode::{Encode, IsNull};
use sqlx::error::BoxDynError;
use sqlx::postgres::types::Oid;
use sqlx::postgres::{PgArgumentBuffer, PgArguments, PgRow, PgTypeInfo, PgValueFormat};
use sqlx::query::Query;
use sqlx::{AssertSqlSafe, Column, Executor, PgConnection, Postgres, Row, TypeInfo, ValueRef};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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

fn bind_value<'q>(
    q: Query<'q, Postgres, PgArguments>, v: &Value,
) -> Query<'q, Postgres, PgArguments> {
    match v {
        Value::Null | Value::Undefined => q.bind(UntypedNull),
        Value::Integer(i) => q.bind(*i),
        Value::Real(f) => q.bind(*f),
        Value::Text(s) => q.bind(s.clone()),
        Value::Blob(b) => q.bind(b.clone()),
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

/// Per storage: where its tables live, and the guard's results.
#[derive(Default)]
pub struct State {
    /// The storage's schema and the partition counter read qualified by it.
    schema: tokio::sync::OnceCell<Where>,
    cache: Mutex<guard::Cache>,
}

struct Where {
    schema: String,
    /// `schema`, quoted.
    quoted: String,
}

const SAVEPOINT: &str = "syncular_query";

/// How long past `queryTimeoutMs` a storage-level registered query whose
/// statement ignores the cancellation is given up (see
/// `PgEngine::query_authoritative`).
pub const ABANDON_AFTER: Duration = Duration::from_millis(50);

/// The settings every registered query runs under, as one message of
/// `SET LOCAL`s: they end with the transaction or savepoint around it.
/// `syncular.partition` is the partition the views show. The host's SQL is
/// planned as PostgreSQL plans by default (the storage's own statements
/// use generic plans: `conn::GENERIC_PLANS`).
fn confine(timeout: Duration, partition: &str) -> Result<String> {
    // PostgreSQL text cannot hold U+0000: no stored row has such a partition.
    let p = super::quote::lit(partition)
        .ok_or_else(|| Error::invalid("a partition cannot contain U+0000 on PostgreSQL"))?;
    Ok(format!(
        "SET LOCAL search_path = pg_catalog, pg_temp; SET LOCAL statement_timeout = {}; SET LOCAL standard_conforming_strings = on; SET LOCAL plan_cache_mode = auto; SET LOCAL {} = {p}",
        timeout.as_millis().clamp(1, i32::MAX as u128),
        guard::PARTITION_SETTING,
    ))
}

/// Whether `e` says a view the guarded SQL reads does not exist on this
/// connection (yet, or any more): the views are (re)created and the query
/// runs once more.
fn missing_view(e: &Error) -> bool {
    match e {
        Error::Engine { code, message } => match code.as_str() {
            // A view, or the refusal function (`bounds::REFUSE_DDL`).
            "42P01" | "42883" => message.contains("_syncular_q_"),
            // The session has no temporary schema yet.
            "3F000" => message.contains("pg_temp"),
            _ => false,
        },
        _ => false,
    }
}

/// A query error: the time limit and the bounds of `bounds` become their
/// coded errors.
fn run_err(e: sqlx::Error, timeout: Duration, limits: Limits) -> Error {
    if let sqlx::Error::Database(d) = &e {
        if let Some(out) = d
            .code()
            .and_then(|c| bounds::coded(&c, d.message(), limits))
        {
            return out;
        }
    }
    if super::error::sqlstate(&e).as_deref() == Some("57014") {
        query::timed_out(timeout)
    } else {
        map_err(e)
    }
}

/// Binds and runs guarded SQL on `c`; column names come from the first
/// row. The text carries the bound types, so the statement sqlx prepares
/// and caches for it is never reused with values of other types.
async fn run(
    c: &mut PgConnection, g: &guard::Guarded, binds: &[Bind], params: &[Value], partition: &str,
    timeout: Duration, limits: Limits, abandoned: &mut bool,
) -> Result<(Vec<String>, Vec<Vec<Cell>>)> {
    let partition_value = Value::Text(partition.to_owned());
    let unused = Value::Text(String::new());
    let mut sql = bounds::wrap(&g.sql, limits);
    sql.push_str(" /* types:");
    let mut values = Vec::with_capacity(g.slots.len());
    for (slot, used) in g.slots.iter().zip(&g.used) {
        let v = match slot {
            guard::Slot::Partition => &partition_value,
            guard::Slot::Bind(i) => match binds.get(*i) {
                Some(Bind::Param(p)) => params
                    .get(*p)
                    .ok_or_else(|| Error::plain(query::PLAN_ERROR, query::MSG_BINDS))?,
                _ => return Err(Error::plain(query::PLAN_ERROR, query::MSG_BINDS)),
            },
        };
        // An unused untyped NULL would leave its type undeterminable.
        let v = match v {
            Value::Null | Value::Undefined if !*used => &unused,
            v => v,
        };
        sql.push(' ');
        sql.push(match v {
            Value::Null | Value::Undefined => 'n',
            Value::Integer(_) => 'i',
            Value::Real(_) => 'f',
            Value::Text(_) => 't',
            Value::Blob(_) => 'b',
        });
        values.push(v);
    }
    sql.push_str(" */");
    let mut q = crate::postgres::stmt::query(AssertSqlSafe(sql));
    for v in values {
        q = bind_value(q, v);
    }
    // Rows are counted as they arrive, each converted and dropped at once,
    // so the result never holds more than its bounds.
    let mut tally = Tally::new(limits);
    let mut columns: Option<Vec<String>> = None;
    let mut out = Vec::new();
    // The server's statement_timeout does not cover the time spent here
    // on rows it has already sent (a fast server fills the socket, and
    // reading buffered rows never waits, so no timer runs meanwhile): the
    // limit is checked on this side too, every few rows.
    let deadline = std::time::Instant::now() + timeout;
    let mut rows = q.fetch(&mut *c);
    while let Some(r) = std::future::poll_fn(|cx| rows.as_mut().poll_next(cx)).await {
        let r = r.map_err(|e| run_err(e, timeout, limits))?;
        if out.len() % 16 == 15 && std::time::Instant::now() >= deadline {
            *abandoned = true;
            return Err(query::timed_out(timeout));
        }
        let names = columns.get_or_insert_with(|| {
            r.columns()
                .iter()
                .map(|col| col.name().to_owned())
                .collect()
        });
        // Past a bound the rest of the result is not read: the caller
        // closes the connection rather than wait for it (`abandoned`).
        let mut over = tally.row().err();
        let mut row = Vec::with_capacity(names.len());
        for i in 0..names.len() {
            if over.is_some() {
                break;
            }
            let v = cell(&r, i)?;
            over = tally.bytes(query::result::cell_bytes(&v)).err();
            row.push(v);
        }
        if let Some(e) = over {
            *abandoned = true;
            return Err(e);
        }
        out.push(row);
    }
    Ok((columns.unwrap_or_default(), out))
}

/// `max_commit_seq` (read with the storage's tables named by schema, so it
/// works under the confined `search_path`), then the control statements
/// `tail`, in one round trip. When the read fails, `tail` has not run.
async fn max_commit_seq_then(
    c: &mut PgConnection, w: &Where, partition: &str, tail: &str,
) -> Result<i64> {
    let Some(p) = super::quote::lit(partition) else {
        let v: Option<i64> = crate::postgres::stmt::query_scalar(AssertSqlSafe(format!(
            "SELECT max_commit_seq FROM {}.sync_partitions WHERE partition = $1",
            w.quoted
        )))
        .bind(partition)
        .fetch_optional(&mut *c)
        .await
        .map_err(map_err)?;
        c.execute(AssertSqlSafe(tail.to_owned()))
            .await
            .map_err(map_err)?;
        return Ok(v.unwrap_or(0));
    };
    let text = format!(
        "SELECT max_commit_seq FROM {}.sync_partitions WHERE partition = {p}; {tail}",
        w.quoted
    );
    let rows = c.fetch_all(AssertSqlSafe(text)).await.map_err(map_err)?;
    match rows.first() {
        Some(r) => r.try_get::<i64, _>(0).map_err(map_err),
        None => Ok(0),
    }
}

// ---- index lookups (§7.6) -----------------------------------------------------------

/// One index value as bound: booleans from numbers, JSON as text.
enum IndexBind<'v> {
    Bool(bool),
    Text(String),
    Value(&'v Value),
}

/// The comparison with placeholder `$n` for one index value, cast to its
/// column's type, and what to bind. A `json` column holds either the value
/// or, written by a Bun.SQL host, a jsonb string of its text
/// (docs/legacy-forms.md): both match, in one index condition.
fn index_bind(n: usize, ty: Option<ColumnType>, v: &Value) -> (String, IndexBind<'_>) {
    match (ty, v) {
        (Some(ColumnType::Boolean), Value::Integer(i)) => {
            (format!("= ${n}"), IndexBind::Bool(*i != 0))
        }
        (Some(ColumnType::Json), v) => {
            let text = match v {
                Value::Text(s) => s.clone(),
                Value::Integer(i) => i.to_string(),
                Value::Real(f) => f.to_string(),
                _ => String::new(),
            };
            (
                format!("IN (${n}::text::jsonb, to_jsonb(${n}::text))"),
                IndexBind::Text(text),
            )
        }
        (Some(ty), v) => (
            format!("= ${n}::{}", rows::pg_type(ty)),
            IndexBind::Value(v),
        ),
        (None, v) => (format!("= ${n}"), IndexBind::Value(v)),
    }
}

const INDEX_ROW_FIELDS: &str = r#""_sync_row_id", "_sync_server_version", "_sync_scopes"::text, "_sync_payload", "_sync_column_versions""#;

#[allow(clippy::too_many_arguments)]
pub async fn scan_rows_by_index(
    c: &mut PgConnection, table: &Table, partition: &str, index: &str, values: Option<&[Value]>,
    after_row_id: &str, limit: f64,
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
            let (compare, bind) = index_bind(binds.len() + 2, ty, v);
            binds.push(bind);
            text.push_str(&format!(" AND {} {compare}", quote_ident(column)));
        }
    }
    let n = binds.len() + 1;
    text.push_str(&format!(
        r#" AND "_sync_row_id" > ${} ORDER BY "_sync_row_id" LIMIT ${}"#,
        n + 1,
        n + 2
    ));
    let mut q = crate::postgres::stmt::query(AssertSqlSafe(text)).bind(partition);
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
    rows.iter()
        .map(|r| stored::row(Form::Jsonb, rows::row_from(r, 0)?, &table.name, partition))
        .collect()
}

impl PgEngine {
    /// The loaded schema; registered queries refuse to run before
    /// `ensureSchema`.
    fn registered_schema(&self) -> Result<Arc<Loaded>> {
        query::ensured(&self.loaded)
    }

    /// The storage's schema: the `schema` option, else the connection's
    /// `current_schema()` (read once).
    async fn query_where(&self, c: &mut PgConnection) -> Result<&Where> {
        self.query
            .schema
            .get_or_try_init(|| async {
                let schema = match &self.cfg.schema {
                    Some(s) => s.clone(),
                    // Simple protocol: one message, whatever session a
                    // transaction pooler gives it.
                    None => sqlx::Row::try_get::<Option<String>, _>(
                        &c.fetch_one("SELECT current_schema()")
                            .await
                            .map_err(map_err)?,
                        0,
                    )
                    .map_err(map_err)?
                    .ok_or_else(|| {
                            Error::plain(
                                "ERR_SYNCULAR_NO_SCHEMA",
                                "the connection has no current schema (search_path names none that exists)",
                            )
                        })?,
                };
                Ok::<_, Error>(Where {
                    quoted: quote_ident(&schema),
                    schema,
                })
            })
            .await
    }

    /// The rewrite, then the guard (cached per SQL text).
    fn prepare_query(
        &self, req: &Request, params: &[Value], declared: &[String], w: &Where,
    ) -> Result<(Prepared, Arc<guard::Guarded>)> {
        let loaded = self.registered_schema()?;
        let text = match req {
            Request::Legacy { sql } | Request::Plan { sql, .. } => sql.len(),
            Request::Malformed => 0,
        };
        if text > guard::MAX_QUERY_BYTES {
            // Before the rewrite and the guard: their work grows with it.
            return Err(Error::plain(
                query::REFUSED,
                format!(
                    "registered query refused: it is longer than {} bytes",
                    guard::MAX_QUERY_BYTES
                ),
            ));
        }
        let prepared = query::prepare(req, params, declared, &loaded.schema)?;
        if query::count_params(&prepared.sql) != prepared.binds.len() {
            return Err(Error::plain(query::PLAN_ERROR, query::MSG_BINDS));
        }
        let sql = query::dollar_params(&prepared.sql);
        let scope = guard::Scope {
            schema: &w.schema,
            tables: &loaded.schema.tables,
        };
        let owner: Arc<dyn std::any::Any + Send + Sync> = loaded.clone();
        let g = guard::cached(&self.query.cache, owner, &sql, &prepared.binds, &scope)?;
        Ok((prepared, g))
    }

    /// Storage-level `queryAuthoritative`: one REPEATABLE READ READ ONLY
    /// snapshot holding the serve gate (when `gate_running` is given), the
    /// rows and `max_commit_seq`; always rolled back.
    pub async fn query_authoritative(
        &self, partition: &str, req: &Request, params: &[Value], declared: &[String],
        gate_running: Option<i64>,
    ) -> Result<QueryOutput> {
        let loaded = self.registered_schema()?;
        let mut conn = self.acquire().await?;
        let w = self.query_where(&mut conn).await?;
        let (prepared, g) = self.prepare_query(req, params, declared, w)?;
        let timeout = self.cfg.query_timeout;
        let confined = confine(timeout, partition)?;
        let mut created = false;
        // PostgreSQL checks statement_timeout between rows, not inside one
        // call of a function: a call still running ABANDON_AFTER past the
        // limit is given up, and its connection closed (the server stops
        // the statement at its next check, when it finds the client gone).
        let give_up = tokio::time::Instant::now() + timeout + ABANDON_AFTER;
        loop {
            let attempt = self.query_attempt(
                &mut conn,
                w,
                &g,
                &prepared,
                params,
                partition,
                gate_running,
                &confined,
            );
            let (out, healthy) = match tokio::time::timeout_at(give_up, attempt).await {
                Ok(done) => done,
                Err(_) => (Err(query::timed_out(timeout)), false),
            };
            let missing = match &out {
                Err(e) | Ok(QueryOutput { error: Some(e), .. }) => missing_view(e),
                Ok(_) => false,
            };
            if missing && healthy && !created && !self.pooled() {
                // Outside any transaction (the attempt rolled back): the
                // views outlive the call, for the connection's session.
                created = true;
                let ddl = guard::view_ddl(&w.schema, &loaded.schema.tables);
                if let Err(e) = conn.execute(AssertSqlSafe(ddl)).await {
                    let e = map_err(e);
                    let healthy = super::exec(&mut conn, "ROLLBACK").await.is_ok();
                    if !healthy {
                        conn.close_on_drop();
                    }
                    self.recycle(conn, healthy);
                    return Err(self.cancelled_by_close(e));
                }
                continue;
            }
            if !healthy {
                conn.close_on_drop();
            }
            self.recycle(conn, healthy);
            return out.map_err(|e| self.cancelled_by_close(e));
        }
    }

    /// One run of a storage-level query; the connection is left outside
    /// any transaction when the second value (healthy) is true.
    #[allow(clippy::too_many_arguments)]
    async fn query_attempt(
        &self, conn: &mut sqlx::pool::PoolConnection<Postgres>, w: &Where, g: &guard::Guarded,
        prepared: &Prepared, params: &[Value], partition: &str, gate_running: Option<i64>,
        confined: &str,
    ) -> (Result<QueryOutput>, bool) {
        let timeout = self.cfg.query_timeout;
        // Behind a transaction pooler nothing of the session is kept: the
        // views and the bound functions are made inside the transaction
        // (rolled back with it, so no other client's session keeps them),
        // which then turns read-only, and the storage's schema is set for it.
        let pooled_begin;
        let begin = if self.pooled() {
            let loaded = match self.registered_schema() {
                Ok(l) => l,
                Err(e) => return (Err(e), true),
            };
            let ddl = guard::view_ddl_for(&w.schema, &loaded.schema.tables, &g.sql);
            pooled_begin = format!(
                "BEGIN ISOLATION LEVEL REPEATABLE READ; {}{ddl} SET TRANSACTION READ ONLY",
                self.cfg.local_schema
            );
            pooled_begin.as_str()
        } else {
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
        };
        // Without a gate to read first, the settings travel with BEGIN.
        let opening = match gate_running {
            None => format!("{begin}; {confined}"),
            Some(_) => begin.to_owned(),
        };
        if let Err(e) = conn.execute(AssertSqlSafe(opening.clone())).await {
            // A connection that died while idle: once more on a tested one.
            let e = map_err(e);
            // Either way this connection is not used again (a failed
            // opening may have left its transaction open).
            conn.close_on_drop();
            if !super::error::is_connection_lost(&e) {
                return (Err(e), false);
            }
            *conn = match self.acquire_tested().await {
                Ok(c) => c,
                Err(e) => return (Err(e), false),
            };
            if let Err(e) = conn.execute(AssertSqlSafe(opening)).await {
                return (Err(map_err(e)), false);
            }
        }
        // Nothing is ever committed: ROLLBACK also undoes any setting the
        // query might have changed. On success it travels with the
        // max_commit_seq read.
        let mut ended = false;
        let mut abandoned = false;
        let out = super::body(async {
            let c: &mut PgConnection = &mut *conn;
            let gate = match gate_running {
                Some(running) => {
                    let gate = meta::read_serve_gate(c, partition, running).await?;
                    c.execute(AssertSqlSafe(confined.to_owned()))
                        .await
                        .map_err(map_err)?;
                    Some(gate)
                }
                None => None,
            };
            let slow = Slow::start(
                telemetry::POSTGRES,
                "query",
                Site::Text("queryAuthoritative"),
            )
            .sql(&g.sql);
            let ran = run(
                c,
                g,
                &prepared.binds,
                params,
                partition,
                timeout,
                self.cfg.result_limits,
                &mut abandoned,
            )
            .await;
            drop(slow);
            match ran {
                Ok((columns, rows)) => {
                    let max_commit_seq = max_commit_seq_then(c, w, partition, "ROLLBACK").await?;
                    ended = true;
                    Ok(QueryOutput {
                        gate,
                        error: None,
                        columns,
                        rows,
                        max_commit_seq,
                    })
                }
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
        .await;
        // A result abandoned past its bounds is not waited for: closing the
        // connection stops the server at its next row.
        let healthy = ended || (!abandoned && super::exec(conn, "ROLLBACK").await.is_ok());
        (out, healthy)
    }

    /// A query cancelled because the storage closed reports the close, not
    /// its time limit.
    fn cancelled_by_close(&self, e: Error) -> Error {
        match &e {
            Error::Plain { code, .. } if *code == query::TIMEOUT && self.is_closed() => {
                Error::plain("ERR_SYNCULAR_CLOSED", "storage is closed")
            }
            _ => e,
        }
    }

    /// `tx.queryAuthoritative`: on the transaction's connection, staged
    /// writes visible, no gate; inside a savepoint that is rolled back, so
    /// the query leaves neither writes nor settings behind, and a failing
    /// query does not abort the transaction.
    ///
    /// A statement that ignores the cancellation (one call that never checks
    /// for it, see `cost`) is given up [`ABANDON_AFTER`] past the limit, as
    /// on the storage-level form, and the transaction with it: its
    /// connection is closed (the server rolls the transaction back once the
    /// call ends and it finds the client gone), so the call answers
    /// `ERR_SYNCULAR_QUERY_TIMEOUT` and the transaction's later calls
    /// `ERR_SYNCULAR_TX_FINISHED`; rolling it back succeeds.
    pub async fn tx_query_authoritative(
        &self, id: u32, req: &Request, params: &[Value], declared: &[String],
    ) -> Result<QueryOutput> {
        let loaded = self.registered_schema()?;
        let timeout = self.cfg.query_timeout;
        with_tx!(self, id, untimed, |_st, c, p| {
            let w = self.query_where(c).await?;
            let (prepared, g) = self.prepare_query(req, params, declared, w)?;
            // Behind a transaction pooler the views and bound functions are
            // made inside the query's savepoint and go with its rollback:
            // the transaction's commit would leave them on a server session
            // that other clients get next.
            let views = if self.pooled() {
                guard::view_ddl_for(&w.schema, &loaded.schema.tables, &g.sql)
            } else {
                String::new()
            };
            let open = format!("SAVEPOINT {SAVEPOINT}; {views}{}", confine(timeout, &p)?);
            let undo = format!("ROLLBACK TO SAVEPOINT {SAVEPOINT}; RELEASE SAVEPOINT {SAVEPOINT}");
            let give_up = tokio::time::Instant::now() + timeout + ABANDON_AFTER;
            let mut created = false;
            loop {
                c.execute(AssertSqlSafe(open.clone()))
                    .await
                    .map_err(map_err)?;
                let slow = Slow::start(
                    telemetry::POSTGRES,
                    "query",
                    Site::Text("tx.queryAuthoritative"),
                )
                .sql(&g.sql);
                // A result abandoned past its bounds is read to its end by
                // the savepoint's rollback (at most `maxResultRows + 1`
                // rows, within the time limit): the transaction stays usable.
                let mut abandoned = false;
                let running = run(
                    c,
                    &g,
                    &prepared.binds,
                    params,
                    &p,
                    timeout,
                    self.cfg.result_limits,
                    &mut abandoned,
                );
                let out = tokio::time::timeout_at(give_up, running).await;
                drop(slow);
                let Ok(out) = out else {
                    // Still inside one call past the limit: the connection
                    // is given up, and the transaction with it.
                    if let Some(mut gone) = _st.conn.take() {
                        gone.close_on_drop();
                    }
                    break Err(Error::plain(
                        query::TIMEOUT,
                        format!(
                            "registered query exceeded its time limit of {} ms (queryTimeoutMs) inside one call that PostgreSQL does not interrupt; the transaction was rolled back",
                            timeout.as_millis()
                        ),
                    ));
                };
                match out {
                    Ok((columns, rows)) => {
                        // The savepoint ends with the max_commit_seq read.
                        let max_commit_seq = max_commit_seq_then(c, w, &p, &undo).await;
                        if max_commit_seq.is_err() {
                            c.execute(AssertSqlSafe(undo)).await.map_err(map_err)?;
                        }
                        break Ok(QueryOutput {
                            gate: None,
                            error: None,
                            columns,
                            rows,
                            max_commit_seq: max_commit_seq?,
                        });
                    }
                    Err(e) if missing_view(&e) && !created => {
                        // The views belong to the transaction from here:
                        // created after the query's savepoint ends, in one
                        // of their own, so a failure leaves the
                        // transaction as it was.
                        created = true;
                        c.execute(AssertSqlSafe(undo.clone()))
                            .await
                            .map_err(map_err)?;
                        let ddl = guard::view_ddl(&w.schema, &loaded.schema.tables);
                        let made = c
                            .execute(AssertSqlSafe(format!(
                                "SAVEPOINT syncular_views; {ddl} RELEASE SAVEPOINT syncular_views"
                            )))
                            .await;
                        if let Err(e) = made {
                            c.execute(
                                "ROLLBACK TO SAVEPOINT syncular_views; RELEASE SAVEPOINT syncular_views",
                            )
                            .await
                            .map_err(map_err)?;
                            break Err(map_err(e));
                        }
                    }
                    Err(e) => {
                        // A result abandoned past its bounds is read to its
                        // end first, and an error the server sent meanwhile
                        // (its time limit) is reported to this command, not
                        // run: then the rollback is sent once more.
                        let undone = c.execute(AssertSqlSafe(undo.clone())).await;
                        if undone.is_err() && abandoned {
                            c.execute(AssertSqlSafe(undo)).await.map_err(map_err)?;
                        } else {
                            undone.map_err(map_err)?;
                        }
                        break Err(e);
                    }
                }
            }
        })
        .map_err(|e| self.cancelled_by_close(e))
    }

    pub async fn scan_rows_by_index(
        &self, partition: &str, table: &str, index: &str, values: Option<&[Value]>,
        after_row_id: &str, limit: f64,
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
        &self, id: u32, table: &str, index: &str, values: Option<&[Value]>, after_row_id: &str,
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
}
