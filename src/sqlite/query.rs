//! Registered authoritative queries (storage-layout §13) and index lookups
//! (§7.6) on SQLite. The rewrite itself is engine-neutral (`crate::query`);
//! this file executes it.
//!
//! Isolation is enforced by SQLite itself (`super::isolation`): the
//! rewrite points each relation at the partition's view, and whatever the
//! rewrite misses is refused by the authorizer.

use super::conn::map_err;
use super::isolation;
use super::{log, meta, rows, Loaded, SqliteEngine};
use crate::error::{Error, Result};
use crate::model::StoredRow;
use crate::model::{Cell as SqlValue, QueryOutput};
use crate::query::result::{Limits, Tally, CELL};
use crate::query::{self, Bind, Prepared, Request, Target, Value};
use crate::schema::{quote_ident, Table};
use crate::stored::{self, Form};
use crate::telemetry::{self, Site, Slow};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, ToSql};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub(super) struct Bound<'a>(pub(super) &'a Value);

impl ToSql for Bound<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self.0 {
            Value::Null | Value::Undefined => ValueRef::Null,
            Value::Integer(i) => ValueRef::Integer(*i),
            Value::Real(f) => ValueRef::Real(*f),
            Value::Text(s) => ValueRef::Text(s.as_bytes()),
            Value::Blob(b) => ValueRef::Blob(b),
        }))
    }
}

pub(super) fn cell(v: ValueRef<'_>) -> SqlValue {
    match v {
        ValueRef::Null => SqlValue::Null,
        ValueRef::Integer(i) => SqlValue::Integer(i),
        ValueRef::Real(f) => SqlValue::Real(f),
        ValueRef::Text(t) => SqlValue::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => SqlValue::Blob(b.to_vec()),
    }
}

/// What [`crate::query::result::cell_bytes`] counts for `v`.
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

/// A heaviest straight run not read yet.
pub const UNKNOWN: usize = usize::MAX;

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
            super::OVER_BUDGET,
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

const INDEX_ROW_FIELDS: &str = r#""_sync_row_id", "_sync_server_version", "_sync_scopes", "_sync_payload", "_sync_column_versions""#;

/// Validates an index lookup (codes in the §7.6 order) and runs it.
/// `values` is `None` when the caller's `values` is not an array.
#[allow(clippy::too_many_arguments)]
pub fn scan_rows_by_index(
    conn: &Connection, table: &Table, partition: &str, index: &str, values: Option<&[Value]>,
    after_row_id: &str, limit: f64,
) -> Result<Vec<StoredRow>> {
    let (ix, values, limit) = crate::scan::check_index_lookup(table, index, values, limit)?;
    let mut text = format!(
        r#"SELECT {INDEX_ROW_FIELDS} FROM {} WHERE "_sync_partition" = ?"#,
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
    let rows = st
        .query_map(&*all, |r| rows::row_from(r, 0))
        .map_err(map_err)?;
    rows.map(|r| stored::row(Form::Text, r.map_err(map_err)?, &table.name, partition))
        .collect()
}

// ---- the rewrite cache ---------------------------------------------------------------

/// Rewrites of registered queries, per request text, relations and
/// declared tables, for one loaded schema. The rewrite depends on the
/// params only through the check that every bind has a value, which a hit
/// repeats; failed rewrites are not kept.
#[derive(Default)]
pub struct RewriteCache {
    inner: std::sync::Mutex<Option<Rewrites>>,
}

struct Rewrites {
    /// The schema these rewrites are for (held, so its address is never
    /// reused while it keys this map).
    loaded: Arc<Loaded>,
    map: std::collections::HashMap<u64, Vec<(Key, Arc<Rewrite>)>>,
    len: usize,
}

/// The longest query text tried on the calling thread: compiling (and
/// checking) a longer one there would hold the event loop by itself.
const NOW_MAX_TEXT: usize = 4096;

/// Bounds the cache: a host registers a fixed set of queries, so reaching
/// this means generated text, and the map starts over.
const MAX_REWRITES: usize = 1024;

/// A cached rewrite, and what its runs have shown.
#[derive(Debug)]
pub struct Rewrite {
    pub prepared: Prepared,
    /// Where the query runs, from what its runs on the calling thread have
    /// shown (see [`Placement`]).
    pub placement: Placement,
    /// The heaviest straight run of its program (`super::shape`), read by
    /// its first run; [`UNKNOWN`] before.
    pub heavy: AtomicUsize,
}

/// Whether a registered query runs on the calling thread. Every query is
/// tried there first. A run stopped at its budget (steps, time, or a value
/// too large for the calling thread) sends the query off-thread for its
/// next 2, 4, ... up to [`MAX_SKIP`] calls, doubling with each such run in
/// a row; then it is tried there again. A run that fits starts the count
/// over. A query near the budget thus stays on the calling thread when
/// most of its runs fit, rather than leaving it for good after one slow
/// run. One that never fits costs the calling thread one budget (about
/// 2 ms) every [`MAX_SKIP`] calls.
#[derive(Debug, Default)]
pub struct Placement {
    /// Runs over budget in a row, capped.
    misses: AtomicU32,
    /// Calls left to send off-thread before the next try.
    skip: AtomicU32,
}

/// The most calls a query is sent off-thread between two tries on the
/// calling thread.
pub const MAX_SKIP: u32 = 64;

impl Placement {
    /// True when this call may try the calling thread.
    pub fn try_now(&self) -> bool {
        // Racing callers may both decrement or both try: either is harmless.
        let left = self.skip.load(Ordering::Relaxed);
        if left == 0 {
            return true;
        }
        self.skip.store(left - 1, Ordering::Relaxed);
        false
    }

    pub fn over_budget(&self) {
        let misses = (self.misses.load(Ordering::Relaxed) + 1).min(6);
        self.misses.store(misses, Ordering::Relaxed);
        self.skip
            .store((1u32 << misses).min(MAX_SKIP), Ordering::Relaxed);
    }

    pub fn within_budget(&self) {
        if self.misses.load(Ordering::Relaxed) != 0 {
            self.misses.store(0, Ordering::Relaxed);
        }
    }

    /// Records how a run on the calling thread ended: `None` when it was
    /// stopped at its budget (it runs again off-thread), else its answer.
    pub fn record<T>(&self, run: Result<T>) -> Option<Result<T>> {
        match run {
            Err(e) if super::is_over_budget(&e) => {
                self.over_budget();
                None
            }
            r => {
                self.within_budget();
                Some(r)
            }
        }
    }
}

#[derive(PartialEq)]
enum Key {
    Legacy(String, Vec<String>),
    Plan(String, Vec<(String, u64, u64, Option<String>)>, Vec<String>),
}

impl Key {
    fn of(req: &Request, declared: &[String]) -> Option<Key> {
        match req {
            Request::Legacy { sql } => Some(Key::Legacy(sql.clone(), declared.to_vec())),
            Request::Plan { sql, relations } => Some(Key::Plan(
                sql.clone(),
                relations
                    .iter()
                    .map(|r| {
                        (
                            r.table.clone(),
                            r.start.to_bits(),
                            r.end.to_bits(),
                            r.alias.clone(),
                        )
                    })
                    .collect(),
                declared.to_vec(),
            )),
            Request::Malformed => None,
        }
    }

    fn matches(&self, req: &Request, declared: &[String]) -> bool {
        match (self, req) {
            (Key::Legacy(k, d), Request::Legacy { sql }) => k == sql && d == declared,
            (Key::Plan(k, rels, d), Request::Plan { sql, relations }) => {
                k == sql
                    && d == declared
                    && rels.len() == relations.len()
                    && rels.iter().zip(relations).all(|((t, s, e, a), r)| {
                        *t == r.table
                            && *s == r.start.to_bits()
                            && *e == r.end.to_bits()
                            && *a == r.alias
                    })
            }
            _ => false,
        }
    }
}

fn key_hash(req: &Request, declared: &[String]) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    match req {
        Request::Legacy { sql } => (0u8, sql).hash(&mut h),
        Request::Plan { sql, relations } => {
            (1u8, sql).hash(&mut h);
            for r in relations {
                (&r.table, r.start.to_bits(), r.end.to_bits(), &r.alias).hash(&mut h);
            }
        }
        Request::Malformed => return None,
    }
    declared.hash(&mut h);
    Some(h.finish())
}

impl RewriteCache {
    /// The rewrite of `req` against `loaded`, from the cache when present.
    fn prepare(
        &self, loaded: &Arc<Loaded>, req: &Request, params: &[Value], declared: &[String],
    ) -> Result<Arc<Rewrite>> {
        let hash = key_hash(req, declared);
        if let Some(hash) = hash {
            let inner = lock(&self.inner);
            let hit = inner
                .as_ref()
                .filter(|r| Arc::ptr_eq(&r.loaded, loaded))
                .and_then(|r| r.map.get(&hash))
                .and_then(|list| list.iter().find(|(k, _)| k.matches(req, declared)))
                .map(|(_, p)| p.clone());
            drop(inner);
            if let Some(p) = hit {
                // What `flatten` checks of the params.
                for b in &p.prepared.binds {
                    if let Bind::Param(i) = b {
                        if matches!(params.get(*i), None | Some(Value::Undefined)) {
                            return Err(Error::plain(query::PLAN_ERROR, query::MSG_BINDS));
                        }
                    }
                }
                return Ok(p);
            }
        }
        let mut prepared = query::prepare_for(req, params, declared, &loaded.schema, Target::View)?;
        prepared.sql.insert_str(0, isolation::MARK);
        let prepared = Arc::new(Rewrite {
            prepared,
            placement: Placement::default(),
            heavy: AtomicUsize::new(UNKNOWN),
        });
        if let (Some(hash), Some(key)) = (hash, Key::of(req, declared)) {
            let mut inner = lock(&self.inner);
            let fresh = match inner.as_ref() {
                Some(r) => !Arc::ptr_eq(&r.loaded, loaded) || r.len >= MAX_REWRITES,
                None => true,
            };
            if fresh {
                *inner = Some(Rewrites {
                    loaded: loaded.clone(),
                    map: Default::default(),
                    len: 0,
                });
            }
            if let Some(r) = inner.as_mut() {
                r.map.entry(hash).or_default().push((key, prepared.clone()));
                r.len += 1;
            }
        }
        Ok(prepared)
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

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
        let (loaded, rewrite) = match self.prepare_query(req, params, declared) {
            Ok(x) => x,
            Err(e) => return Some(Err(e)),
        };
        if rewrite.prepared.sql.len() > NOW_MAX_TEXT || !rewrite.placement.try_now() {
            return None;
        }
        rewrite.placement.record(self.run_query(
            partition,
            &loaded,
            &rewrite,
            params,
            gate_running,
            Some(steps),
        ))
    }

    fn run_query(
        &self, partition: &str, loaded: &Loaded, rewrite: &Rewrite, params: &[Value],
        gate_running: Option<i64>, budget: Option<u32>,
    ) -> Result<QueryOutput> {
        let prepared = &rewrite.prepared;
        let mut bounds = Bounds::new(loaded, prepared, self.cfg.query_timeout, &self.closed);
        bounds.budget = budget;
        bounds.heavy = Some(&rewrite.heavy);
        bounds.results = self.cfg.result_limits;
        let slow = Slow::start(telemetry::SQLITE, "query", Site::Text("queryAuthoritative"))
            .sql(&prepared.sql);
        self.read_snapshot_timed(slow, |c| {
            let gate = gate_running
                .map(|running| meta::read_serve_gate(c, partition, running))
                .transpose()?;
            let (columns, rows, error) = match execute(c, &bounds, prepared, params, partition) {
                Ok((columns, rows)) => (columns, rows, None),
                Err(e) if super::is_over_budget(&e) => return Err(e),
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
        let (loaded, rewrite) = match self.prepare_query(req, params, declared) {
            Ok(x) => x,
            Err(e) => return Some(Err(e)),
        };
        if rewrite.prepared.sql.len() > NOW_MAX_TEXT || !rewrite.placement.try_now() {
            return None;
        }
        rewrite
            .placement
            .record(self.tx_run_query(id, &loaded, &rewrite, params, Some(steps)))
    }

    fn tx_run_query(
        &self, id: u32, loaded: &Loaded, rewrite: &Rewrite, params: &[Value], budget: Option<u32>,
    ) -> Result<QueryOutput> {
        let prepared = &rewrite.prepared;
        let mut bounds = Bounds::new(loaded, prepared, self.cfg.query_timeout, &self.closed);
        bounds.budget = budget;
        bounds.heavy = Some(&rewrite.heavy);
        bounds.results = self.cfg.result_limits;
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
    ) -> Result<Vec<StoredRow>> {
        self.table_sql(table, |t, _| {
            self.read(|c| scan_rows_by_index(c, t, partition, index, values, after_row_id, limit))
        })
    }

    pub fn tx_scan_rows_by_index(
        &self, id: u32, table: &str, index: &str, values: Option<&[Value]>, after_row_id: &str,
        limit: f64,
    ) -> Result<Vec<StoredRow>> {
        self.table_sql(table, |t, _| {
            self.with_tx(id, |h, p| {
                scan_rows_by_index(h.conn, t, p, index, values, after_row_id, limit)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Schema;

    fn setup() -> (Connection, Loaded) {
        let mut conn = Connection::open_in_memory().unwrap();
        isolation::register(&mut conn).unwrap();
        conn.execute_batch(
            r#"CREATE TABLE tasks("_sync_partition" TEXT, "_sync_row_id" TEXT, id TEXT, title TEXT, "_sync_payload" BLOB);
               CREATE INDEX tasks_p ON tasks("_sync_partition", id);
               INSERT INTO tasks VALUES ('p1', 'r1', 'r1', 'mine', x'00'), ('p2', 'r2', 'r2', 'theirs', x'00');
               CREATE TABLE sync_commits(partition TEXT, commit_seq INTEGER);"#,
        )
        .unwrap();
        let schema = Schema::parse(
            r#"{"version":1,"tables":[{"name":"tasks","columns":[{"name":"id","type":"string","nullable":false},
               {"name":"title","type":"string","nullable":false}],"primaryKeyIndex":0,"materialize":true,"indexes":[]}]}"#,
        )
        .unwrap();
        (conn, Loaded::new(schema, super::rows::TableSql::new))
    }

    fn view(loaded: &Loaded) -> String {
        format!(
            "temp.{}",
            quote_ident(&query::view_name(&loaded.schema.tables[0]))
        )
    }

    /// Runs SQL as the engine would after a rewrite, including SQL the
    /// rewrite would never produce (as if it had a hole).
    fn raw_as(
        conn: &Connection, loaded: &Loaded, sql: &str, partition: &str,
    ) -> Result<Vec<Vec<SqlValue>>> {
        let prepared = Prepared {
            sql: sql.into(),
            binds: vec![],
            tables: vec!["tasks".into()],
        };
        let closed = Arc::new(AtomicBool::new(false));
        let bounds = Bounds::new(loaded, &prepared, Duration::from_secs(5), &closed);
        execute(conn, &bounds, &prepared, &[], partition).map(|(_, rows)| rows)
    }

    fn raw(conn: &Connection, loaded: &Loaded, sql: &str) -> Result<Vec<Vec<SqlValue>>> {
        raw_as(conn, loaded, sql, "p1")
    }

    fn code(r: Result<Vec<Vec<SqlValue>>>) -> String {
        match r {
            Err(Error::Plain { code, .. }) => code.to_owned(),
            Err(e) => format!("{e:?}"),
            Ok(rows) => format!("answered {rows:?}"),
        }
    }

    #[test]
    fn the_engine_refuses_what_the_rewrite_must_never_produce() {
        let (conn, loaded) = setup();
        for sql in [
            "SELECT * FROM sync_commits",
            "SELECT name FROM sqlite_master",
            "SELECT name FROM temp.sqlite_master",
            "SELECT id FROM tasks",
            "SELECT id FROM main.tasks",
            "SELECT t.title FROM tasks AS window, tasks AS t",
            "SELECT \"_sync_payload\" FROM tasks",
            "DELETE FROM tasks",
            "PRAGMA user_version = 3",
            "SELECT * FROM pragma_table_info('tasks')",
            "SELECT load_extension('x')",
            "SELECT zeroblob(1000000000)",
            "ATTACH ':memory:' AS o",
            "CREATE TEMP VIEW v AS SELECT 1",
            "DROP VIEW IF EXISTS temp.x",
        ] {
            assert_eq!(code(raw(&conn, &loaded, sql)), query::REFUSED, "{sql}");
        }
        assert_eq!(
            code(raw(&conn, &loaded, "SELECT 1; SELECT 2")),
            query::REFUSED
        );
        // Named and numbered variables are refused even when counted right.
        for sql in [
            "SELECT :a",
            "SELECT #a",
            "SELECT @a",
            "SELECT $a",
            "SELECT ?1",
        ] {
            let prepared = Prepared {
                sql: sql.into(),
                binds: vec![Bind::Partition],
                tables: vec![],
            };
            let closed = Arc::new(AtomicBool::new(false));
            let bounds = Bounds::new(&loaded, &prepared, Duration::from_secs(5), &closed);
            let r = execute(&conn, &bounds, &prepared, &[], "p1").map(|(_, r)| r);
            assert_eq!(code(r), query::PLAN_ERROR, "{sql}");
        }
        // Nothing was written, and the bounds are gone afterwards.
        let n: i64 = conn
            .query_row("SELECT count(*) FROM tasks", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 2);
        conn.execute_batch("DELETE FROM sync_commits").unwrap();
    }

    #[test]
    fn views_show_one_partition_whatever_the_aliases() {
        let (conn, loaded) = setup();
        let v = view(&loaded);
        let rows = raw(
            &conn,
            &loaded,
            &format!("SELECT a.title FROM {v} AS window, {v} AS a"),
        )
        .unwrap();
        assert_eq!(rows, vec![vec![SqlValue::Text("mine".into())]]);
        let rows = raw_as(
            &conn,
            &loaded,
            &format!("SELECT title FROM {v} WHERE id > ?",),
            "p2",
        );
        assert!(rows.is_err(), "unbound variable counted");
        // The same cached statement, run for another partition.
        let rows = raw_as(&conn, &loaded, &format!("SELECT title FROM {v}"), "p2").unwrap();
        assert_eq!(rows, vec![vec![SqlValue::Text("theirs".into())]]);
        let rows = raw_as(&conn, &loaded, &format!("SELECT title FROM {v}"), "p1").unwrap();
        assert_eq!(rows, vec![vec![SqlValue::Text("mine".into())]]);
        // Outside a query the views are empty.
        let n: i64 = conn
            .query_row(&format!("SELECT count(*) FROM {v}"), [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 0);
        // The partition index serves the view.
        let plan: String = conn
            .query_row(
                &format!("EXPLAIN QUERY PLAN SELECT title FROM {v} WHERE id = 'r1'"),
                [],
                |r| r.get(3),
            )
            .unwrap();
        assert!(plan.contains("USING INDEX tasks_p"), "{plan}");
    }

    /// The authorizer stays installed, so running a registered query
    /// recompiles neither it nor the connection's other cached statements,
    /// and a denied query refused once stays refused when served from the
    /// cache.
    #[test]
    fn registered_queries_leave_cached_statements_compiled() {
        use rusqlite::StatementStatus::RePrepare;
        let (conn, loaded) = setup();
        let own = "SELECT count(*) FROM sync_commits WHERE partition = ?1";
        let v = view(&loaded);
        let sql = format!("SELECT title FROM {v}");
        // The first run makes the view: a schema change, after which SQLite
        // recompiles what was cached before, once.
        raw(&conn, &loaded, &sql).unwrap();
        for partition in ["p1", "p2", "p1"] {
            conn.prepare_cached(own)
                .unwrap()
                .query_row(["p1"], |r| r.get::<_, i64>(0))
                .unwrap();
            raw_as(&conn, &loaded, &sql, partition).unwrap();
            assert_eq!(
                code(raw(&conn, &loaded, "SELECT * FROM sync_commits")),
                query::REFUSED
            );
        }
        let reprepared = |text: &str| conn.prepare_cached(text).unwrap().get_status(RePrepare);
        assert_eq!(reprepared(own), 0);
        assert_eq!(reprepared(&format!("{}{sql}", isolation::MARK)), 0);
        // Outside a registered query the storage's own statements may read
        // its tables; the same text as a registered query may not.
        assert!(conn.prepare("SELECT * FROM sync_commits").is_ok());
        assert_eq!(
            code(raw(&conn, &loaded, "SELECT * FROM sync_commits")),
            query::REFUSED
        );
    }

    #[test]
    fn rewrites_are_reused_per_text_and_schema() {
        let (_, loaded) = setup();
        let loaded = Arc::new(loaded);
        let cache = RewriteCache::default();
        let req = Request::Legacy {
            sql: "SELECT title FROM tasks WHERE id = ?".into(),
        };
        let declared = vec!["tasks".to_owned()];
        let one = [Value::Text("r1".into())];
        let a = cache.prepare(&loaded, &req, &one, &declared).unwrap();
        let b = cache.prepare(&loaded, &req, &one, &declared).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert!(a.prepared.sql.starts_with(isolation::MARK));
        // A hit still checks that every bind has a value, as the rewrite does.
        for params in [&[][..], &[Value::Undefined][..]] {
            let e = cache.prepare(&loaded, &req, params, &declared).unwrap_err();
            assert_eq!(code(Err(e)), query::PLAN_ERROR);
        }
        // Other declared tables, other text: their own rewrite (or error).
        assert!(cache.prepare(&loaded, &req, &one, &[]).is_err());
        let other = Request::Legacy {
            sql: "SELECT title FROM tasks WHERE id = ? ".into(),
        };
        let c = cache.prepare(&loaded, &other, &one, &declared).unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
        // A new schema starts over.
        let (_, again) = setup();
        let d = cache
            .prepare(&Arc::new(again), &req, &one, &declared)
            .unwrap();
        assert!(!Arc::ptr_eq(&a, &d));
        assert_eq!(a.prepared.sql, d.prepared.sql);
    }

    #[test]
    fn a_query_over_budget_leaves_the_calling_thread_for_doubling_stretches() {
        let p = Placement::default();
        assert!(p.try_now());
        // Calls sent off-thread before the next try, for each miss in a row.
        let mut stretches = Vec::new();
        for _ in 0..8 {
            p.over_budget();
            let mut off = 0;
            while !p.try_now() {
                off += 1;
            }
            stretches.push(off);
        }
        assert_eq!(stretches, [2, 4, 8, 16, 32, 64, 64, 64]);
        // One run that fits: tried on every call again, and the next miss
        // starts the count over.
        p.within_budget();
        assert!(p.try_now() && p.try_now());
        p.over_budget();
        assert!(!p.try_now() && !p.try_now() && p.try_now());
    }

    #[test]
    fn a_budgeted_run_stops_at_its_step_budget() {
        let (conn, loaded) = setup();
        let prepared = Prepared {
            sql: "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 100000) SELECT count(*) FROM r".into(),
            binds: vec![],
            tables: vec![],
        };
        let closed = Arc::new(AtomicBool::new(false));
        let mut bounds = Bounds::new(&loaded, &prepared, Duration::from_secs(60), &closed);
        bounds.budget = Some(2);
        let r = execute(&conn, &bounds, &prepared, &[], "p1").map(|(_, r)| r);
        assert_eq!(code(r), super::super::OVER_BUDGET);
        // A small query fits; without a budget the big one runs to the end.
        let small = format!("SELECT title FROM {}", view(&loaded));
        let rows = raw(&conn, &loaded, &small).unwrap();
        assert_eq!(rows.len(), 1);
        bounds.budget = None;
        let r = execute(&conn, &bounds, &prepared, &[], "p1").map(|(_, r)| r);
        assert_eq!(r.unwrap(), vec![vec![SqlValue::Integer(100000)]]);
    }

    #[test]
    fn a_runaway_query_stops_at_its_limit_or_when_the_storage_closes() {
        let (conn, loaded) = setup();
        let prepared = Prepared {
            sql: "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r".into(),
            binds: vec![],
            tables: vec![],
        };
        let closed = Arc::new(AtomicBool::new(false));
        let bounds = Bounds::new(&loaded, &prepared, Duration::from_millis(50), &closed);
        let t = std::time::Instant::now();
        let r = execute(&conn, &bounds, &prepared, &[], "p1").map(|(_, r)| r);
        assert_eq!(code(r), query::TIMEOUT);
        assert!(t.elapsed() < Duration::from_secs(5));
        closed.store(true, std::sync::atomic::Ordering::Relaxed);
        let bounds = Bounds::new(&loaded, &prepared, Duration::from_secs(60), &closed);
        let r = execute(&conn, &bounds, &prepared, &[], "p1").map(|(_, r)| r);
        assert_eq!(code(r), "ERR_SYNCULAR_CLOSED");
    }

    #[test]
    fn a_column_free_read_names_only_a_view_or_the_query_s_own_cte() {
        let (conn, loaded) = setup();
        conn.execute_batch(
            "CREATE TABLE host_secrets(x); INSERT INTO host_secrets VALUES (1), (2), (3);
             CREATE VIEW host_view AS SELECT x FROM host_secrets;",
        )
        .unwrap();
        let v = view(&loaded);
        for sql in [
            "SELECT count(*) FROM sync_commits".to_owned(),
            "SELECT 1 FROM sqlite_master".into(),
            "SELECT count(*) FROM sqlite_schema".into(),
            "SELECT count(*) FROM sqlite_temp_master".into(),
            "SELECT count(*) FROM tasks".into(),
            "SELECT count(*) FROM TASKS".into(),
            "SELECT count(*) FROM host_secrets".into(),
            "SELECT count(*) FROM host_view".into(),
            "SELECT count(*) FROM pragma_table_list".into(),
            "SELECT count(*) FROM dbstat".into(),
            "SELECT EXISTS (SELECT 1 FROM host_secrets)".into(),
            format!("SELECT count(*) FROM {v} AS x, tasks"),
            format!("SELECT x.title FROM {v} AS x, sync_commits"),
            // A CTE in one scope does not cover the same name in another.
            "SELECT (WITH host_secrets AS (SELECT 1) SELECT 1), (SELECT count(*) FROM host_secrets)".into(),
            // A CTE named like a table is refused too (SQLite cannot tell).
            "WITH host_secrets AS (SELECT 1) SELECT count(*) FROM host_secrets".into(),
        ] {
            assert_eq!(code(raw(&conn, &loaded, &sql)), query::REFUSED, "{sql}");
        }
        let one = |sql: String| raw(&conn, &loaded, &sql).unwrap();
        assert_eq!(
            one(format!("SELECT count(*) FROM {v}")),
            vec![vec![SqlValue::Integer(1)]]
        );
        assert_eq!(
            one(format!(
                "WITH c AS (SELECT id FROM {v}) SELECT count(*) FROM c"
            )),
            vec![vec![SqlValue::Integer(1)]]
        );
        assert_eq!(
            one("SELECT count(*) FROM json_each('[1,2]')".into()),
            vec![vec![SqlValue::Integer(2)]]
        );
        assert_eq!(
            one("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT count(*) FROM r".into()),
            vec![vec![SqlValue::Integer(3)]]
        );
        // A refused text is not left compiled for a later run to skip the
        // check: the same text is refused every time.
        for _ in 0..3 {
            assert_eq!(
                code(raw(&conn, &loaded, "SELECT count(*) FROM host_secrets")),
                query::REFUSED
            );
        }
        // After a table of a CTE's name appears, a cached statement that
        // reads the CTE without a column answers from the CTE (SQLite kept
        // its program) or is refused (SQLite compiled it again, and the
        // check ran again): never from the table.
        for sql in [
            "WITH late AS (SELECT 1) SELECT (SELECT count(*) FROM late) AS n".to_owned(),
            format!("WITH late AS (SELECT 1) SELECT (SELECT count(*) FROM late), (SELECT count(*) FROM {v})"),
        ] {
            let before = raw(&conn, &loaded, &sql).unwrap();
            assert_eq!(before[0][0], SqlValue::Integer(1), "{sql}");
            conn.execute_batch("CREATE TABLE late(x); INSERT INTO late VALUES (1), (2);")
                .unwrap();
            match raw(&conn, &loaded, &sql) {
                Ok(after) => assert_eq!(after, before, "{sql}"),
                Err(e) => assert_eq!(code(Err(e)), query::REFUSED, "{sql}"),
            }
            conn.execute_batch("DROP TABLE late").unwrap();
        }
    }

    #[test]
    fn one_instruction_is_bounded_by_the_value_limit() {
        let (conn, loaded) = setup();
        let t = std::time::Instant::now();
        // Past the value limit (under 1 MiB, less for a longer program):
        // not built, and the query fails naming the bound; printf too,
        // where SQLite's own answers NULL.
        for sql in [
            "SELECT printf('%.*c', 2000000000, 'x')",
            "SELECT printf('%2000000000d', 1)",
            "SELECT length(printf('%.*c', 1048577, 'x'))",
            "SELECT length(printf('%.*c', 1000000, 'x'))",
            "SELECT length(printf('%.*c', 300000, 'x') || printf('%.*c', 300000, 'x'))",
            "SELECT length(replace(printf('%.*c', 300000, 'x'), 'x', 'xx'))",
            "SELECT length(group_concat(printf('%.*c', 200000, 'x'))) FROM json_each('[1,2,3]')",
        ] {
            let r = raw(&conn, &loaded, sql);
            assert_eq!(code(r), query::result::TOO_LARGE, "{sql}");
        }
        // A query with many operators between two loops may hold smaller
        // values: 200 KB fits one, not one with 150 additions.
        let many: Vec<String> = (0..150).map(|i| format!("v + {i}")).collect();
        let wide = |n: usize| {
            format!(
                "WITH m AS MATERIALIZED (SELECT printf('%.*c', {n}, '7') AS v) SELECT {} FROM m",
                many.join(", ")
            )
        };
        assert_eq!(
            code(raw(&conn, &loaded, &wide(200_000))),
            query::result::TOO_LARGE
        );
        assert_eq!(raw(&conn, &loaded, &wide(50_000)).unwrap()[0].len(), 150);
        // Quadratic built-ins run in linear time.
        let rows = raw(
            &conn,
            &loaded,
            "SELECT instr(printf('%.*c', 400000, 'a'), printf('%.*c', 200000, 'a') || 'b')",
        )
        .unwrap();
        assert_eq!(rows, vec![vec![SqlValue::Integer(0)]]);
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        // The storage's own statements keep the connection's limits.
        let n: i64 = conn
            .query_row("SELECT length(printf('%.*c', 2000000, 'x'))", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(n, 2_000_000);
    }

    #[test]
    fn a_run_on_the_calling_thread_hands_over_long_steps() {
        let (conn, loaded) = setup();
        let closed = Arc::new(AtomicBool::new(false));
        for sql in [
            // Few VM steps, each one slow: the thread's time budget.
            "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 2000) SELECT count(*) FROM r WHERE instr(printf('%.*c', 60000 + n % 2, 'a'), 'b') = 0",
        ] {
            let prepared = Prepared {
                sql: sql.into(),
                binds: vec![],
                tables: vec![],
            };
            let mut bounds = Bounds::new(&loaded, &prepared, Duration::from_secs(60), &closed);
            bounds.budget = Some(1000);
            let t = std::time::Instant::now();
            let r = execute(&conn, &bounds, &prepared, &[], "p1").map(|(_, r)| r);
            assert_eq!(code(r), super::super::OVER_BUDGET, "{sql}");
            assert!(t.elapsed() < Duration::from_millis(200), "{sql}: {:?}", t.elapsed());
            bounds.budget = None;
            assert!(execute(&conn, &bounds, &prepared, &[], "p1").is_ok(), "{sql}");
        }
    }

    #[test]
    fn slow_instructions_stop_near_the_limit() {
        let (conn, loaded) = setup();
        let prepared = Prepared {
            sql: "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r WHERE instr(printf('%.*c', 400000, 'a'), printf('%.*c', 1000, 'a') || 'b') = 0".into(),
            binds: vec![],
            tables: vec![],
        };
        let closed = Arc::new(AtomicBool::new(false));
        let bounds = Bounds::new(&loaded, &prepared, Duration::from_millis(200), &closed);
        let t = std::time::Instant::now();
        let r = execute(&conn, &bounds, &prepared, &[], "p1").map(|(_, r)| r);
        assert_eq!(code(r), query::TIMEOUT);
        // Generous for a loaded machine; typically within a few ms.
        assert!(
            t.elapsed() < Duration::from_millis(1200),
            "{:?}",
            t.elapsed()
        );
    }
}
