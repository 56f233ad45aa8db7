//! Registered authoritative queries (storage-layout §13) and index lookups
//! (§7.6) on SQLite. The rewrite itself is engine-neutral (`crate::core::query`);
//! this file executes it.
//!
//! Isolation is enforced by SQLite itself (`super::isolation`): the
//! rewrite points each relation at the partition's view, and whatever the
//! rewrite misses is refused by the authorizer.

use super::bind::{cell, Bound};
use super::conn::map_err;
use super::isolation;
use super::log;
use super::meta;
use super::rewrites::Rewrite;
use super::rewrites::{NOW_MAX_TEXT, UNKNOWN};
use super::rows;
use super::rows::Loaded;
use super::storage::SqliteEngine;
use crate::core::error::{Error, Result};
use crate::core::model::{Cell as SqlValue, QueryOutput};
use crate::core::query::result::{Limits, Tally, CELL};
use crate::core::query::{self, Bind, Prepared, Request, Value};
use crate::core::records::Records;
use crate::core::scan::IndexFold;
use crate::core::schema::{quote_ident, Table};
use crate::core::stored::Form;
use crate::core::telemetry::{self, Site, Slow};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, ToSql};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What [`crate::core::query::result::cell_bytes`] counts for `v`.
fn ref_bytes(v: ValueRef<'_>) -> u64 {
    CELL + match v {
        ValueRef::Text(b) | ValueRef::Blob(b) => b.len() as u64,
        _ => 0,
    }
}

fn refused(msg: &str) -> Error {
    Error::plain(query::REFUSED, msg)
}

/// What bounds one query run: the schema tables it may read through their
/// views, its time limit, and the storage's closed flag.
pub struct Bounds<'a> {
    pub tables: Vec<&'a Table>,
    pub limit: Duration,
    pub closed: &'a Arc<AtomicBool>,
    /// Thousands of VM steps the run may take before it stops with
    /// `OVER_BUDGET` (a run on the calling thread).
    pub budget: Option<u32>,
    /// `maxResultRows` and `maxResultBytes`.
    pub results: Limits,
    /// The heaviest straight run of the compiled program
    /// (`super::shape`), kept across runs of the same query; [`UNKNOWN`]
    /// until a run has read it. `None`: read on every run.
    pub heavy: Option<&'a AtomicUsize>,
}

impl<'a> Bounds<'a> {
    /// The tables the query declares (the rewrite has checked that they
    /// exist and are materialized): only their views are made and readable.
    pub fn new(
        loaded: &'a Loaded, prepared: &Prepared, limit: Duration, closed: &'a Arc<AtomicBool>,
    ) -> Bounds<'a> {
        Bounds {
            tables: loaded
                .schema
                .tables
                .iter()
                .filter(|t| t.materialize && prepared.tables.contains(&t.name))
                .collect(),
            limit,
            closed,
            budget: None,
            results: Limits::default(),
            heavy: None,
        }
    }
}

/// Runs a prepared query on `conn` within `bounds` and collects its rows.
fn execute(
    conn: &Connection, bounds: &Bounds<'_>, prepared: &Prepared, params: &[Value], partition: &str,
) -> Result<(Vec<String>, Vec<Vec<SqlValue>>)> {
    let bounded = isolation::bound(
        conn,
        partition,
        &bounds.tables,
        bounds.limit,
        bounds.closed,
        bounds.budget,
        bounds
            .results
            .bytes
            .saturating_add(isolation::WORKING_MEMORY),
    )?;
    let err = |e| bounded.err(e, bounds.limit, bounds.closed);
    let text = if prepared.sql.starts_with(isolation::MARK) {
        std::borrow::Cow::Borrowed(prepared.sql.as_str())
    } else {
        std::borrow::Cow::Owned(format!("{}{}", isolation::MARK, prepared.sql))
    };
    // The program's heaviest straight run sets its value limit, and whether
    // it may run on the calling thread.
    let heavy = match bounds.heavy.map(|h| h.load(Ordering::Relaxed)) {
        Some(h) if h != UNKNOWN => Some(h),
        _ => super::shape::heaviest_run(conn, &text).inspect(|&h| {
            if let Some(known) = bounds.heavy {
                known.store(h, Ordering::Relaxed);
            }
        }),
    };
    // A program that does not compile as EXPLAIN reports why when it
    // compiles below.
    let heavy = heavy.unwrap_or(0);
    if bounds.budget.is_some() && heavy > super::shape::NOW_MAX_HEAVY {
        // Too heavy between two checks to run on the calling thread: on a
        // worker from the start (and from now on).
        return Err(Error::plain(
            super::budget::OVER_BUDGET,
            "registered query too heavy between two checks for the calling thread",
        ));
    }
    match super::shape::value_limit(heavy, isolation::MAX_VALUE) {
        Some(bytes) if bounds.budget.is_some() => {
            bounded.limit_values(bytes.min(super::shape::now_value_limit(heavy, bytes)))
        }
        Some(bytes) => bounded.limit_values(bytes),
        None => {
            return Err(refused(&format!(
                "registered query has {heavy} operators between two loops of its program; \
                 at most {} values of {} bytes each fit the work allowed between two checks of its time limit",
                super::shape::WORK_BYTES / super::shape::MIN_VALUE as i64 - isolation::PROGRESS_OPS as i64,
                super::shape::MIN_VALUE
            )))
        }
    }
    let mut st = conn.prepare_cached(&text).map_err(err)?;
    let out = run(
        &mut st,
        &bounded,
        &err,
        prepared,
        params,
        partition,
        bounds.results,
    );
    if out.is_err() {
        // Not kept: a run that failed may have compiled it again with
        // names not yet checked, and a later run that finds it compiled
        // would skip the check (see `isolation::Bounded::verify`).
        st.discard();
    }
    out
}

/// Checks, binds and steps a compiled registered query; its rows leave
/// only once everything its compiles admitted has been checked.
fn run(
    st: &mut rusqlite::Statement<'_>, bounded: &isolation::Bounded<'_>,
    err: &dyn Fn(rusqlite::Error) -> Error, prepared: &Prepared, params: &[Value], partition: &str,
    limits: Limits,
) -> Result<(Vec<String>, Vec<Vec<SqlValue>>)> {
    bounded.verify()?;
    if !st.readonly() {
        return Err(refused("registered query must be one read-only SELECT"));
    }
    // Only anonymous `?`: a named or numbered variable could take a value
    // the flattened bind list does not give it.
    let n = st.parameter_count();
    if n != prepared.binds.len() || (1..=n).any(|i| st.parameter_name(i).is_some()) {
        return Err(Error::plain(query::PLAN_ERROR, query::MSG_BINDS));
    }
    let partition_value = Value::Text(partition.to_owned());
    for (i, b) in prepared.binds.iter().enumerate() {
        let v = match b {
            Bind::Partition => &partition_value,
            Bind::Param(p) => &params[*p],
        };
        st.raw_bind_parameter(i + 1, Bound(v)).map_err(map_err)?;
    }
    let columns: Vec<String> = st.column_names().into_iter().map(str::to_owned).collect();
    let n = columns.len();
    let mut out = Vec::new();
    let mut tally = Tally::new(limits);
    let mut rows = st.raw_query();
    while let Some(r) = rows.next().map_err(err)? {
        // Counted as it is read, each cell before it is copied.
        tally.row()?;
        let mut row = Vec::with_capacity(n);
        for i in 0..n {
            let v = r.get_ref(i).map_err(map_err)?;
            tally.bytes(ref_bytes(v))?;
            row.push(cell(v));
        }
        out.push(row);
    }
    drop(rows);
    // A schema change compiles the statement again as it runs.
    bounded.verify()?;
    Ok((columns, out))
}

// ---- index lookups (§7.6) ---------------------------------------------------------

/// Validates an index lookup (codes in the §7.6 order) and runs it, its
/// rows packed as they are stepped (`crate::core::scan::IndexFold`).
/// `values` is `None` when the caller's `values` is not an array.
#[allow(clippy::too_many_arguments)]
pub fn scan_rows_by_index(
    conn: &Connection, table: &Table, partition: &str, index: &str, values: Option<&[Value]>,
    after_row_id: &str, limit: f64,
) -> Result<Records> {
    let (ix, values, limit) = crate::core::scan::check_index_lookup(table, index, values, limit)?;
    let mut text = format!(
        r#"SELECT {} FROM {} WHERE "_sync_partition" = ?"#,
        rows::ROW_FIELDS,
        table.quoted
    );
    let mut binds: Vec<Bound<'_>> = Vec::with_capacity(values.len());
    for (column, v) in ix.columns.iter().zip(values) {
        if matches!(v, Value::Null | Value::Undefined) {
            text.push_str(&format!(" AND {} IS NULL", quote_ident(column)));
        } else {
            text.push_str(&format!(" AND {} = ?", quote_ident(column)));
            binds.push(Bound(v));
        }
    }
    text.push_str(r#" AND "_sync_row_id" > ? ORDER BY "_sync_row_id" LIMIT ?"#);
    let mut all: Vec<&dyn ToSql> = Vec::with_capacity(binds.len() + 3);
    all.push(&partition);
    for b in &binds {
        all.push(b);
    }
    all.push(&after_row_id);
    all.push(&limit);
    let mut st = conn.prepare_cached(&text).map_err(map_err)?;
    let mut stepped = st.query(&*all).map_err(map_err)?;
    let mut fold = IndexFold::new(Form::Text, &table.name, partition, limit);
    while let Some(r) = stepped.next().map_err(map_err)? {
        rows::fold_row(r, &mut fold)?;
    }
    Ok(fold.finish())
}

// ---- the rewrite cache ---------------------------------------------------------------

impl SqliteEngine {
    /// The loaded schema; registered queries refuse to run before
    /// `ensureSchema`.
    fn registered_schema(&self) -> Result<Arc<Loaded>> {
        query::ensured(&self.loaded)
    }

    fn prepare_query(
        &self, req: &Request, params: &[Value], declared: &[String],
    ) -> Result<(Arc<Loaded>, Arc<Rewrite>)> {
        let loaded = self.registered_schema()?;
        let prepared = self.rewrites.prepare(&loaded, req, params, declared)?;
        Ok((loaded, prepared))
    }

    /// Storage-level `queryAuthoritative`: one read snapshot holding the
    /// serve gate (when `gate_running` is given), the rows, and
    /// `max_commit_seq`.
    pub fn query_authoritative(
        &self, partition: &str, req: &Request, params: &[Value], declared: &[String],
        gate_running: Option<i64>,
    ) -> Result<QueryOutput> {
        let (loaded, rewrite) = self.prepare_query(req, params, declared)?;
        self.run_query(partition, &loaded, &rewrite, params, gate_running, None)
    }

    /// [`query_authoritative`](Self::query_authoritative) on the calling
    /// thread, unless its [`Placement`] sends it off: it may take `steps`
    /// thousand VM steps there. `None` when it must run off-thread (sent
    /// off, or stopped at the budget now).
    pub fn try_query_authoritative_now(
        &self, partition: &str, req: &Request, params: &[Value], declared: &[String],
        gate_running: Option<i64>, steps: u32,
    ) -> Option<Result<QueryOutput>> {
        self.try_now(req, params, declared, |loaded, rewrite| {
            self.run_query(
                partition,
                loaded,
                rewrite,
                params,
                gate_running,
                Some(steps),
            )
        })
    }

    /// The rewrite of `req` run by `run` on the calling thread, unless the
    /// text is too long for it or its [`Placement`] sends it off (`None`);
    /// the run's end is recorded in that placement.
    fn try_now(
        &self, req: &Request, params: &[Value], declared: &[String],
        run: impl FnOnce(&Loaded, &Rewrite) -> Result<QueryOutput>,
    ) -> Option<Result<QueryOutput>> {
        let (loaded, rewrite) = match self.prepare_query(req, params, declared) {
            Ok(x) => x,
            Err(e) => return Some(Err(e)),
        };
        if rewrite.prepared.sql.len() > NOW_MAX_TEXT || !rewrite.placement.try_now() {
            return None;
        }
        rewrite.placement.record(run(&loaded, &rewrite))
    }

    /// The bounds of one run of `rewrite`: the storage's time and result
    /// limits, `budget` on the calling thread.
    fn bounds<'a>(
        &'a self, loaded: &'a Loaded, rewrite: &'a Rewrite, budget: Option<u32>,
    ) -> Bounds<'a> {
        let mut bounds = Bounds::new(
            loaded,
            &rewrite.prepared,
            self.cfg.query_timeout,
            &self.closed,
        );
        bounds.budget = budget;
        bounds.heavy = Some(&rewrite.heavy);
        bounds.results = self.cfg.result_limits;
        bounds
    }

    fn run_query(
        &self, partition: &str, loaded: &Loaded, rewrite: &Rewrite, params: &[Value],
        gate_running: Option<i64>, budget: Option<u32>,
    ) -> Result<QueryOutput> {
        let prepared = &rewrite.prepared;
        let bounds = self.bounds(loaded, rewrite, budget);
        let slow = Slow::start(telemetry::SQLITE, "query", Site::Text("queryAuthoritative"))
            .sql(&prepared.sql);
        self.read_snapshot_timed(slow, |c| {
            let gate = gate_running
                .map(|running| meta::read_serve_gate(c, partition, running))
                .transpose()?;
            let (columns, rows, error) = match execute(c, &bounds, prepared, params, partition) {
                Ok((columns, rows)) => (columns, rows, None),
                Err(e) if super::budget::is_over_budget(&e) => return Err(e),
                Err(e) if gate.is_some() => (Vec::new(), Vec::new(), Some(e)),
                Err(e) => return Err(e),
            };
            let max_commit_seq = log::max_commit_seq(c, partition)?;
            Ok(QueryOutput {
                gate,
                error,
                columns,
                rows,
                max_commit_seq,
            })
        })
    }

    /// `tx.queryAuthoritative`: on the transaction's connection, staged
    /// writes visible, no gate.
    pub fn tx_query_authoritative(
        &self, id: u32, req: &Request, params: &[Value], declared: &[String],
    ) -> Result<QueryOutput> {
        let (loaded, rewrite) = self.prepare_query(req, params, declared)?;
        self.tx_run_query(id, &loaded, &rewrite, params, None)
    }

    /// [`tx_query_authoritative`](Self::tx_query_authoritative) on the
    /// calling thread, as [`try_query_authoritative_now`]
    /// (Self::try_query_authoritative_now) does for the storage-level form.
    pub fn try_tx_query_authoritative_now(
        &self, id: u32, req: &Request, params: &[Value], declared: &[String], steps: u32,
    ) -> Option<Result<QueryOutput>> {
        self.try_now(req, params, declared, |loaded, rewrite| {
            self.tx_run_query(id, loaded, rewrite, params, Some(steps))
        })
    }

    fn tx_run_query(
        &self, id: u32, loaded: &Loaded, rewrite: &Rewrite, params: &[Value], budget: Option<u32>,
    ) -> Result<QueryOutput> {
        let prepared = &rewrite.prepared;
        let bounds = self.bounds(loaded, rewrite, budget);
        let site = Site::Text("tx.queryAuthoritative");
        let slow = || Slow::start(telemetry::SQLITE, "query", site).sql(&prepared.sql);
        self.with_lease_timed(id, slow, |h| {
            let p = h.partition()?;
            let (columns, rows) = execute(h.conn, &bounds, prepared, params, p)?;
            Ok(QueryOutput {
                gate: None,
                error: None,
                columns,
                rows,
                max_commit_seq: log::max_commit_seq(h.conn, p)?,
            })
        })
    }

    pub fn scan_rows_by_index(
        &self, partition: &str, table: &str, index: &str, values: Option<&[Value]>,
        after_row_id: &str, limit: f64,
    ) -> Result<Records> {
        self.table_sql(table, |t, _| {
            self.read(|c| scan_rows_by_index(c, t, partition, index, values, after_row_id, limit))
        })
    }

    pub fn tx_scan_rows_by_index(
        &self, id: u32, table: &str, index: &str, values: Option<&[Value]>, after_row_id: &str,
        limit: f64,
    ) -> Result<Records> {
        self.table_sql(table, |t, _| {
            self.with_tx(id, |h, p| {
                scan_rows_by_index(h.conn, t, p, index, values, after_row_id, limit)
            })
        })
    }
}

#[cfg(test)]
#[path = "query_tests.rs"]
mod tests;
