//! Running guarded SQL: the confined settings a registered query runs
//! under, its parameters bound by slot, its rows read against the result
//! bounds and the time limit, the errors that name those limits, and the
//! partition counter read in the round trip that ends it.

use super::bounds;
use super::cells::{bind_value, cell};
use super::guard;
use crate::core::error::{Error, Result};
use crate::core::model::Cell;
use crate::core::query::result::{Limits, Tally};
use crate::core::query::{self, Bind, Value};
use crate::postgres::error::{map_err, sqlstate};
use crate::postgres::quote::lit;
use sqlx::{AssertSqlSafe, Column, Executor, PgConnection, Row};
use std::sync::Mutex;
use std::time::Duration;

/// Per storage: where its tables live, and the guard's results.
#[derive(Default)]
pub struct State {
    /// The storage's schema and the partition counter read qualified by it.
    pub(super) schema: tokio::sync::OnceCell<Where>,
    pub(super) cache: Mutex<guard::Cache>,
}

/// Where the storage's tables live (read once per storage).
pub(super) struct Where {
    pub(super) schema: String,
    /// `schema`, quoted.
    pub(super) quoted: String,
}

/// How long past `queryTimeoutMs` a storage-level registered query whose
/// statement ignores the cancellation is given up (see
/// `PgEngine::query_authoritative`).
pub const ABANDON_AFTER: Duration = Duration::from_millis(50);

/// The settings every registered query runs under, as one message of
/// `SET LOCAL`s: they end with the transaction or savepoint around it.
/// `syncular.partition` is the partition the views show. The host's SQL is
/// planned as PostgreSQL plans by default (the storage's own statements
/// use generic plans: `conn::GENERIC_PLANS`).
pub(super) fn confine(timeout: Duration, partition: &str) -> Result<String> {
    // PostgreSQL text cannot hold U+0000: no stored row has such a partition.
    let p = lit(partition)
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
pub(super) fn missing_view(e: &Error) -> bool {
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
    if sqlstate(&e).as_deref() == Some("57014") {
        query::timed_out(timeout)
    } else {
        map_err(e)
    }
}

/// Binds and runs guarded SQL on `c`; column names come from the first
/// row. The text carries the bound types, so the statement sqlx prepares
/// and caches for it is never reused with values of other types.
pub(super) async fn run(
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

impl Where {
    /// The partition counter's read, with the storage's tables named by
    /// schema (so it works under the confined `search_path`); `partition`
    /// is a literal or a placeholder.
    pub(super) fn counter_sql(&self, partition: &str) -> String {
        format!(
            "SELECT max_commit_seq FROM {}.sync_partitions WHERE partition = {partition}",
            self.quoted
        )
    }
}

/// The counter a counter read answered (0 when the partition has no row).
pub(super) fn counter_of(rows: &[sqlx::postgres::PgRow]) -> Result<i64> {
    match rows.first() {
        Some(r) => r.try_get::<i64, _>(0).map_err(map_err),
        None => Ok(0),
    }
}

/// `max_commit_seq` ([`Where::counter_sql`]), then the control statements
/// `tail`, in one round trip. When the read fails, `tail` has not run.
pub(super) async fn max_commit_seq_then(
    c: &mut PgConnection, w: &Where, partition: &str, tail: &str,
) -> Result<i64> {
    let Some(p) = lit(partition) else {
        let v: Option<i64> =
            crate::postgres::stmt::query_scalar(AssertSqlSafe(w.counter_sql("$1")))
                .bind(partition)
                .fetch_optional(&mut *c)
                .await
                .map_err(map_err)?;
        c.execute(AssertSqlSafe(tail.to_owned()))
            .await
            .map_err(map_err)?;
        return Ok(v.unwrap_or(0));
    };
    let text = format!("{}; {tail}", w.counter_sql(&p));
    let rows = c.fetch_all(AssertSqlSafe(text)).await.map_err(map_err)?;
    counter_of(&rows)
}
