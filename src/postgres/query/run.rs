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
use sqlx::postgres::PgRow;
use sqlx::{AssertSqlSafe, Column, Executor, PgConnection, Row};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// Per storage: where its tables live, and the guard's results.
#[derive(Default)]
pub struct State {
    /// The storage's schema and the partition counter read qualified by it.
    pub(super) schema: tokio::sync::OnceCell<Where>,
    pub(super) cache: Mutex<guard::Cache>,
    /// The statements the one-message path names (`one_message`).
    pub(super) named: Named,
}

/// The most distinct statement texts one storage names (`one_message`),
/// as many as sqlx keeps prepared on a connection: a session holds each
/// one it met until it closes (a prepared statement costs the server
/// session memory), and a text past them takes the two-message path, whose
/// statements sqlx evicts least recently used first.
pub(super) const MAX_NAMED: usize = 100;

/// Per storage: the name of each statement text this path prepares.
#[derive(Default)]
pub(super) struct Named(Mutex<HashMap<String, u32>>);

impl Named {
    pub(super) fn id(&self, sql: &str) -> Option<u32> {
        let mut names = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(id) = names.get(sql) {
            return Some(*id);
        }
        if names.len() >= MAX_NAMED {
            return None;
        }
        let id = names.len() as u32;
        names.insert(sql.to_owned(), id);
        Some(id)
    }
}

/// What a storage-level attempt left its connection in.
#[derive(Clone, Copy)]
pub(super) enum Left {
    /// Outside any transaction.
    Clean,
    /// Inside its transaction, which still needs its `ROLLBACK`.
    Open,
    /// Not to be used again (lost, given up, or a result abandoned).
    Broken,
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
/// How many statements [`confine`]'s text holds.
pub(super) const CONFINED: usize = 5;

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
pub(super) fn run_err(e: sqlx::Error, timeout: Duration, limits: Limits) -> Error {
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

/// The guarded SQL as it runs (wrapped in the result bounds, its bound
/// types in a trailing comment) and the value of each of its slots. The
/// text carries the bound types, so a statement prepared for it is never
/// reused with values of other types.
pub(super) fn statement(
    g: &guard::Guarded, binds: &[Bind], params: &[Value], partition: &str, limits: Limits,
) -> Result<(String, Vec<Value>)> {
    let mut sql = bounds::wrap(&g.sql, limits);
    sql.push_str(" /* types:");
    let mut values = Vec::with_capacity(g.slots.len());
    for (slot, used) in g.slots.iter().zip(&g.used) {
        let v = match slot {
            guard::Slot::Partition => Value::Text(partition.to_owned()),
            guard::Slot::Bind(i) => match binds.get(*i) {
                Some(Bind::Param(p)) => params
                    .get(*p)
                    .ok_or_else(|| Error::plain(query::PLAN_ERROR, query::MSG_BINDS))?
                    .clone(),
                _ => return Err(Error::plain(query::PLAN_ERROR, query::MSG_BINDS)),
            },
        };
        // An unused untyped NULL would leave its type undeterminable.
        let v = match v {
            Value::Null | Value::Undefined if !*used => Value::Text(String::new()),
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
    Ok((sql, values))
}

/// A query's rows, read as they arrive: each converted and dropped at
/// once and counted against the result bounds, so the result never holds
/// more than its bounds; column names come from the first row.
pub(super) struct Reader {
    tally: Tally,
    columns: Option<Vec<String>>,
    out: Vec<Vec<Cell>>,
    timeout: Duration,
    // The server's statement_timeout does not cover the time spent here
    // on rows it has already sent (a fast server fills the socket, and
    // reading buffered rows never waits, so no timer runs meanwhile): the
    // limit is checked on this side too, every few rows.
    deadline: std::time::Instant,
}

impl Reader {
    pub(super) fn new(timeout: Duration, limits: Limits) -> Reader {
        Reader {
            tally: Tally::new(limits),
            columns: None,
            out: Vec::new(),
            timeout,
            deadline: std::time::Instant::now() + timeout,
        }
    }

    /// One more row. Past a bound or the time limit the rest of the result
    /// is not to be read: `abandoned` is set, and the caller closes the
    /// connection rather than wait for it.
    pub(super) fn row(&mut self, r: &PgRow, abandoned: &mut bool) -> Result<()> {
        if self.out.len() % 16 == 15 && std::time::Instant::now() >= self.deadline {
            *abandoned = true;
            return Err(query::timed_out(self.timeout));
        }
        let names = self.columns.get_or_insert_with(|| {
            r.columns()
                .iter()
                .map(|col| col.name().to_owned())
                .collect()
        });
        let mut over = self.tally.row().err();
        let mut row = Vec::with_capacity(names.len());
        for i in 0..names.len() {
            if over.is_some() {
                break;
            }
            let v = cell(r, i)?;
            over = self.tally.bytes(query::result::cell_bytes(&v)).err();
            row.push(v);
        }
        if let Some(e) = over {
            *abandoned = true;
            return Err(e);
        }
        self.out.push(row);
        Ok(())
    }

    pub(super) fn done(self) -> (Vec<String>, Vec<Vec<Cell>>) {
        (self.columns.unwrap_or_default(), self.out)
    }
}

/// Binds and runs guarded SQL on `c` (extended protocol: the statement is
/// prepared and cached by sqlx).
#[allow(clippy::too_many_arguments)]
pub(super) async fn run(
    c: &mut PgConnection, g: &guard::Guarded, binds: &[Bind], params: &[Value], partition: &str,
    timeout: Duration, limits: Limits, abandoned: &mut bool,
) -> Result<(Vec<String>, Vec<Vec<Cell>>)> {
    let (sql, values) = statement(g, binds, params, partition, limits)?;
    let mut q = crate::postgres::stmt::query(AssertSqlSafe(sql));
    for v in values {
        q = bind_value(q, v);
    }
    let mut reader = Reader::new(timeout, limits);
    let mut rows = q.fetch(&mut *c);
    while let Some(r) = std::future::poll_fn(|cx| rows.as_mut().poll_next(cx)).await {
        let r = r.map_err(|e| run_err(e, timeout, limits))?;
        reader.row(&r, abandoned)?;
    }
    Ok(reader.done())
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
