//! The online part of a copy (docs/copy.md, "Online"): passes that bring
//! the target up to the source's state since the last one, and the final
//! pass, run under the storage's write lease, after which the source
//! refuses writes (`ERR_SYNCULAR_MOVED`).
//!
//! A pass reads where the source stands (`Positions`: each partition's
//! last commit and horizon, the push results' last rowid, the schema
//! version) and applies in one PostgreSQL transaction: the commit log
//! above the last pass's positions; the rows those commits touched, with
//! their scope entries, blob references and tombstones, read again;
//! pruning up to a horizon that moved; new push results; and the small
//! mutable tables (counters, registry, clients, reactions, checkpoints,
//! fence, schema marker) replaced whole.

use super::catalog::{self, Table};
use super::target::{self, pg};
use super::value::{literal, quote};
use super::{on_snapshot, runtime, sq, table_exists, Options, Progress};
use crate::core::error::{Error, Result};
use crate::sqlite::moved;
use crate::sqlite::SqliteEngine;
use serde_json::json;
use sqlx::{AssertSqlSafe, Connection as _, PgConnection};
use std::collections::BTreeMap;
use std::time::Instant;

/// Where the source stood when a pass read it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Positions {
    /// partition → (last commit, horizon).
    pub seqs: BTreeMap<String, (i64, i64)>,
    pub push_rowid: i64,
    pub schema_version: Option<i64>,
}

/// Tables replaced whole by every pass: small, and changed in place.
const WHOLE: &[&str] = &[
    "sync_partitions",
    "sync_partition_registry",
    "sync_clients",
    "sync_reactions",
    "sync_backfill_checkpoints",
    "sync_writer_fence",
    "sync_schema_meta",
];
/// The commit log, appended to above the last positions.
const LOG: &[&str] = &["sync_commits", "sync_changes", "sync_change_scopes"];
/// Per-row meta tables, read again for every row a new commit touched.
const PER_ROW: &[&str] = &["sync_row_scopes", "sync_blob_refs", "sync_tombstones"];

impl Positions {
    pub fn read(c: &rusqlite::Connection) -> Result<Positions> {
        let mut out = Positions::default();
        if table_exists(c, "sync_partitions")? {
            let mut st = c
                .prepare("SELECT partition, max_commit_seq, horizon_seq FROM sync_partitions")
                .map_err(sq)?;
            let rows = st
                .query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))
                .map_err(sq)?;
            out.seqs = rows.collect::<rusqlite::Result<_>>().map_err(sq)?;
        }
        if table_exists(c, "sync_push_results")? {
            out.push_rowid = c
                .query_row(
                    "SELECT coalesce(max(rowid), 0) FROM sync_push_results",
                    [],
                    |r| r.get(0),
                )
                .map_err(sq)?;
        }
        if table_exists(c, "sync_schema_meta")? {
            out.schema_version = c
                .query_row(
                    "SELECT schema_version FROM sync_schema_meta WHERE id = 1",
                    [],
                    |r| r.get(0),
                )
                .ok();
        }
        Ok(out)
    }

    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "partitions": self.seqs.iter().map(|(p, (s, h))| (p.clone(), json!([s, h]))).collect::<serde_json::Map<_, _>>(),
            "pushRowid": self.push_rowid,
            "schemaVersion": self.schema_version,
        })
    }

    pub fn parse(text: &str) -> Result<Positions> {
        let bad = || Error::invalid("copy positions: not the positions a copy reported");
        let v: serde_json::Value = serde_json::from_str(text).map_err(|_| bad())?;
        let mut out = Positions {
            push_rowid: v["pushRowid"].as_i64().ok_or_else(bad)?,
            schema_version: v["schemaVersion"].as_i64(),
            ..Default::default()
        };
        for (p, sh) in v["partitions"].as_object().ok_or_else(bad)? {
            let s = sh[0].as_i64().ok_or_else(bad)?;
            let h = sh[1].as_i64().ok_or_else(bad)?;
            out.seqs.insert(p.clone(), (s, h));
        }
        Ok(out)
    }
}

/// The statements of one pass, as SQL text sent a few megabytes at a time
/// inside the pass's transaction: one round trip each, where a `COPY` per
/// table would wait for a delayed TCP acknowledgement every time.
struct Batch<'a> {
    rt: &'a tokio::runtime::Runtime,
    conn: &'a mut PgConnection,
    sql: String,
}

/// SQL text sent at a time; rows per `INSERT`.
const BATCH_BYTES: usize = 4 << 20;
const ROWS_PER_INSERT: usize = 500;

impl Batch<'_> {
    fn push(&mut self, sql: &str) -> Result<()> {
        self.sql.push_str(sql);
        self.sql.push_str(";\n");
        if self.sql.len() >= BATCH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.sql.is_empty() {
            return Ok(());
        }
        let sql = std::mem::take(&mut self.sql);
        self.rt
            .block_on(sqlx::raw_sql(AssertSqlSafe(sql)).execute(&mut *self.conn))
            .map(drop)
            .map_err(pg)
    }

    /// `INSERT INTO into (t's columns) VALUES …` of every row `SELECT <t's
    /// columns> FROM t <tail>` yields for each parameter set; `conflict` is
    /// appended to each statement.
    #[allow(clippy::too_many_arguments)]
    fn rows(
        &mut self, c: &rusqlite::Connection, t: &Table, tail: &str, params: &[Vec<String>],
        conflict: &str, p: &mut Progress,
    ) -> Result<()> {
        let mut st = c
            .prepare(&format!(
                "SELECT {} FROM {} {tail}",
                t.column_list(),
                t.quoted()
            ))
            .map_err(sq)?;
        let head = format!("INSERT INTO {} ({}) VALUES ", t.quoted(), t.column_list());
        let mut stmt = String::new();
        let mut n = 0;
        for ps in params {
            let mut rows = st
                .query(rusqlite::params_from_iter(ps.iter()))
                .map_err(sq)?;
            while let Some(r) = rows.next().map_err(sq)? {
                stmt.push_str(if n == 0 { &head } else { "," });
                stmt.push('(');
                for (i, col) in t.columns.iter().enumerate() {
                    if i > 0 {
                        stmt.push(',');
                    }
                    literal(&mut stmt, col.kind, r.get_ref(i).map_err(sq)?)
                        .map_err(|why| super::stream::value_error(t, &col.name, r, &why))?;
                }
                stmt.push(')');
                n += 1;
                p.rows += 1;
                if n == ROWS_PER_INSERT {
                    stmt.push_str(conflict);
                    self.push(&std::mem::take(&mut stmt))?;
                    n = 0;
                }
            }
        }
        if n > 0 {
            stmt.push_str(conflict);
            self.push(&stmt)?;
        }
        Ok(())
    }

    /// `DELETE FROM table WHERE (cols) IN (VALUES …)` over `keys`.
    fn delete_keys(&mut self, table: &str, cols: &str, keys: &[Vec<&str>]) -> Result<()> {
        for chunk in keys.chunks(ROWS_PER_INSERT) {
            let mut stmt = format!("DELETE FROM {table} WHERE ({cols}) IN (VALUES ");
            for (i, k) in chunk.iter().enumerate() {
                stmt.push_str(if i == 0 { "(" } else { ",(" });
                for (j, v) in k.iter().enumerate() {
                    if j > 0 {
                        stmt.push(',');
                    }
                    quote(&mut stmt, v);
                }
                stmt.push(')');
            }
            stmt.push(')');
            self.push(&stmt)?;
        }
        Ok(())
    }
}

/// One pass over the source as `c` sees it (a snapshot, or the lease's
/// transaction); answers the new positions and the commits it copied.
pub fn pass(
    rt: &tokio::runtime::Runtime, c: &rusqlite::Connection, conn: &mut PgConnection,
    from: &Positions, p: &mut Progress,
) -> Result<(Positions, u64)> {
    let plan = catalog::read(c)?;
    let now = Positions::read(c)?;
    if now.schema_version != from.schema_version {
        return Err(Error::plain(
            "ERR_SYNCULAR_COPY_SCHEMA_CHANGED",
            "the source's schema version changed during the copy: copy again into an empty target",
        ));
    }
    // Commits pruned before a pass copied them leave rows it cannot find.
    for (part, (_, h)) in &now.seqs {
        if *h > from.seqs.get(part).map_or(0, |x| x.0) {
            return Err(Error::plain(
                "ERR_SYNCULAR_COPY_STALE",
                format!("commits of partition {part:?} the copy had not reached were pruned from the source (horizon {h}): copy again into an empty target"),
            ));
        }
    }
    let table = |n: &str| plan.iter().find(|t| t.name == n);
    let mut b = Batch {
        rt,
        conn,
        sql: String::new(),
    };
    b.push("BEGIN")?;
    b.push("SET LOCAL standard_conforming_strings = on")?;
    let mut commits = 0u64;
    // The commit log above the last positions.
    let params: Vec<Vec<String>> = now
        .seqs
        .iter()
        .filter_map(|(part, (s, _))| {
            let old = from.seqs.get(part).map_or(0, |x| x.0);
            (*s > old).then(|| {
                commits += (*s - old) as u64;
                vec![part.clone(), old.to_string()]
            })
        })
        .collect();
    for name in LOG {
        if let Some(t) = table(name) {
            p.table = t.name.clone();
            b.rows(
                c,
                t,
                "WHERE partition = ?1 AND commit_seq > ?2",
                &params,
                "",
                p,
            )?;
        }
    }
    // Pruning up to a horizon that moved.
    for (part, (_, h)) in &now.seqs {
        if *h > from.seqs.get(part).map_or(0, |x| x.1) {
            for name in LOG.iter().chain(&["sync_tombstones"]) {
                if table(name).is_some() {
                    let mut stmt = format!("DELETE FROM {name} WHERE partition = ");
                    quote(&mut stmt, part);
                    stmt.push_str(&format!(" AND commit_seq <= {h}"));
                    b.push(&stmt)?;
                }
            }
        }
    }
    // The rows the new commits touched, read again with their entries.
    let mut touched: Vec<Vec<String>> = Vec::new();
    if table("sync_changes").is_some() {
        let mut st = c
            .prepare("SELECT DISTINCT partition, tbl, row_id FROM sync_changes WHERE partition = ?1 AND commit_seq > ?2")
            .map_err(sq)?;
        for ps in &params {
            let rows = st
                .query_map(rusqlite::params_from_iter(ps.iter()), |r| {
                    Ok(vec![r.get(0)?, r.get(1)?, r.get(2)?])
                })
                .map_err(sq)?;
            touched.extend(rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sq)?);
        }
    }
    for t in plan.iter().filter(|t| t.row.is_some()) {
        let mine: Vec<Vec<String>> = touched
            .iter()
            .filter(|k| k[1] == t.name)
            .map(|k| vec![k[0].clone(), k[2].clone()])
            .collect();
        if mine.is_empty() {
            continue;
        }
        let keys: Vec<Vec<&str>> = mine
            .iter()
            .map(|k| k.iter().map(String::as_str).collect())
            .collect();
        b.delete_keys(&t.quoted(), "\"_sync_partition\", \"_sync_row_id\"", &keys)?;
        p.table = t.name.clone();
        b.rows(
            c,
            t,
            "WHERE \"_sync_partition\" = ?1 AND \"_sync_row_id\" = ?2",
            &mine,
            "",
            p,
        )?;
    }
    if !touched.is_empty() {
        let keys: Vec<Vec<&str>> = touched
            .iter()
            .map(|k| k.iter().map(String::as_str).collect())
            .collect();
        for name in PER_ROW {
            if let Some(t) = table(name) {
                b.delete_keys(name, "partition, tbl, row_id", &keys)?;
                p.table = t.name.clone();
                b.rows(
                    c,
                    t,
                    "WHERE partition = ?1 AND tbl = ?2 AND row_id = ?3",
                    &touched,
                    "",
                    p,
                )?;
            }
        }
    }
    // New push results (written once, INSERT OR IGNORE; rowids only grow).
    if let Some(t) = table("sync_push_results") {
        if now.push_rowid > from.push_rowid {
            p.table = t.name.clone();
            b.rows(
                c,
                t,
                "WHERE rowid > ?1",
                &[vec![from.push_rowid.to_string()]],
                " ON CONFLICT (partition, client_id, client_commit_id) DO UPDATE SET result = EXCLUDED.result",
                p,
            )?;
        }
    }
    for name in WHOLE {
        if let Some(t) = table(name) {
            b.push(&format!("DELETE FROM {name}"))?;
            p.table = t.name.clone();
            b.rows(c, t, "", &[vec![]], "", p)?;
        }
    }
    b.push(&target::record_sql(p.phase, &now.to_json()))?;
    b.push("COMMIT")?;
    b.flush()?;
    Ok((now, commits))
}

fn report(p: &Progress, commits: u64, pos: &Positions) -> serde_json::Value {
    json!({
        "commits": commits,
        "rows": p.rows,
        "bytes": p.bytes,
        "elapsedMs": p.started.elapsed().as_millis() as u64,
        "positions": pos.to_json(),
    })
}

fn progress_at(phase: &'static str) -> Progress {
    Progress {
        phase,
        table: String::new(),
        rows: 0,
        rows_total: 0,
        bytes: 0,
        started: Instant::now(),
    }
}

/// Catch-up passes at most, and the commits a pass may copy for the
/// passes to stop (lib/copy.js has the same for `copyTo`).
const MAX_PASSES: usize = 8;
const LAST_PASS_COMMITS: u64 = 100;

/// An interrupted copy continued from the positions the target recorded:
/// catch-up passes until one copies few commits, then `verify` if asked.
pub fn resume(
    source: &SqliteEngine, o: &Options, positions: &str, progress: &mut dyn FnMut(&Progress),
) -> Result<serde_json::Value> {
    let mut positions = positions.to_owned();
    let mut passes = Vec::new();
    for _ in 0..MAX_PASSES {
        let pass = catch_up(source, o, &positions, progress)?;
        positions = pass["positions"].to_string();
        let few = pass["commits"].as_u64().unwrap_or(0) <= LAST_PASS_COMMITS;
        passes.push(pass);
        if few {
            break;
        }
    }
    let mut out = json!({ "resumed": true, "catchUp": passes, "positions": serde_json::from_str::<serde_json::Value>(&positions).unwrap_or_default() });
    if o.verify {
        out["verify"] = super::verify(source, o, progress)?;
    }
    Ok(out)
}

/// One catch-up pass in a snapshot of `source`, while writes go on.
pub fn catch_up(
    source: &SqliteEngine, o: &Options, positions: &str, progress: &mut dyn FnMut(&Progress),
) -> Result<serde_json::Value> {
    let from = Positions::parse(positions)?;
    let rt = runtime()?;
    let cfg = target::config(o)?;
    let mut conn = rt.block_on(target::connect(&cfg))?;
    let mut p = progress_at("catch-up");
    let (now, commits) = on_snapshot(source, |c| pass(&rt, c, &mut conn, &from, &mut p))?;
    progress(&p);
    Ok(report(&p, commits, &now))
}

/// The target as a final pass left it: a `REPEATABLE READ` transaction
/// opened before the source's writes go on (refused), so `verify` can read
/// it later while the host already writes to the target.
pub struct TargetSnapshot {
    rt: tokio::runtime::Runtime,
    conn: PgConnection,
}

impl TargetSnapshot {
    fn begin(rt: &tokio::runtime::Runtime, conn: &mut PgConnection) -> Result<()> {
        rt.block_on(
            sqlx::raw_sql("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT 1")
                .execute(&mut *conn),
        )
        .map(drop)
        .map_err(pg)
    }

    /// `verify` of the source against the target as the pass left it.
    pub fn verify(
        mut self, source: &SqliteEngine, progress: &mut dyn FnMut(&Progress),
    ) -> Result<serde_json::Value> {
        super::verify::verify_on(source, &self.rt, &mut self.conn, progress)
    }
}

/// The final pass, under the write lease `lease` the caller holds (no
/// write of this storage can commit meanwhile), read on the lease's own
/// connection (it sees the open group's commits, which commit with it);
/// then the storage refuses every later write with `ERR_SYNCULAR_MOVED`,
/// and the mark in the file (committed with the lease) refuses every other
/// writer of it. With `o.verify`, the target's snapshot for `verify`.
pub fn finish(
    source: &SqliteEngine, lease: u32, o: &Options, positions: &str,
    progress: &mut dyn FnMut(&Progress),
) -> Result<(serde_json::Value, Option<TargetSnapshot>)> {
    let mut f = Final::open(o, positions)?;
    let (now, commits) = source.with_lease(lease, |held| f.held(held.conn, &mut |_| {}))?;
    source.refuse_writes(&f.to);
    progress(&f.p);
    let _ = f.rt.block_on(f.conn.close());
    let (p, rt) = (f.p, f.rt);
    let snap = f.snap.map(|conn| TargetSnapshot { rt, conn });
    Ok((report(&p, commits, &now), snap))
}

/// What both final passes open before they hold the writer: the positions
/// to go on from, the target connection, with `o.verify` a second one for
/// the target's snapshot, the progress, and the target named without its
/// password.
struct Final {
    from: Positions,
    rt: tokio::runtime::Runtime,
    conn: PgConnection,
    snap: Option<PgConnection>,
    p: Progress,
    to: String,
}

impl Final {
    fn open(o: &Options, positions: &str) -> Result<Self> {
        let from = Positions::parse(positions)?;
        let rt = runtime()?;
        let cfg = target::config(o)?;
        let conn = rt.block_on(target::connect(&cfg))?;
        let snap = match o.verify {
            true => Some(rt.block_on(target::connect(&cfg))?),
            false => None,
        };
        Ok(Final {
            from,
            rt,
            conn,
            snap,
            p: progress_at("final"),
            to: redact(&o.target),
        })
    }

    /// Under the writer, on its connection `c`: the pass, the target's
    /// snapshot for `verify` (with `o.verify`), then the mark that refuses
    /// every other writer of the file; `step(i)` after each of the three.
    fn held(
        &mut self, c: &rusqlite::Connection, step: &mut dyn FnMut(usize),
    ) -> Result<(Positions, u64)> {
        let out = pass(&self.rt, c, &mut self.conn, &self.from, &mut self.p)?;
        step(0);
        if let Some(s) = self.snap.as_mut() {
            TargetSnapshot::begin(&self.rt, s)?;
        }
        step(1);
        moved::mark(c, &self.to, now_ms())?;
        step(2);
        Ok(out)
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The final pass from a process other than the host's (the command's
/// `--final`): it takes the file's write lock itself (`BEGIN IMMEDIATE`,
/// waiting up to `wait` for the host's writes; the host's writes then wait
/// for it the same way), runs the pass on that connection, and marks the
/// file moved in the same SQLite transaction, which commits after the
/// target's. With `o.verify`, the target is read in a snapshot taken
/// before the mark commits: the host writes to the target only after the
/// mark refused it, so the comparison sees the target as the pass left it.
pub fn finish_locked(
    source: &SqliteEngine, o: &Options, positions: &str, wait: std::time::Duration,
    progress: &mut dyn FnMut(&Progress),
) -> Result<serde_json::Value> {
    let mut f = Final::open(o, positions)?;
    let (asked, asked_ms) = (Instant::now(), now_ms());
    let lease = source.lock_waiting(wait)?;
    let (locked, locked_ms) = (Instant::now(), now_ms());
    // Where the time under the lock goes: the pass (PostgreSQL's commit
    // included), the verify snapshot, the mark, SQLite's commit.
    let mut steps = [0.0f64; 4];
    let mut step = |i: usize, since: &mut Instant| {
        steps[i] = since.elapsed().as_secs_f64() * 1000.0;
        *since = Instant::now();
    };
    let mut since = Instant::now();
    let out = source.with_lease(lease, |held| {
        f.held(held.conn, &mut |i| step(i, &mut since))
    });
    let ended = source.unlock(lease, out.is_ok());
    step(3, &mut since);
    let (now, commits) = out?;
    ended?;
    let held_ms = locked.elapsed().as_secs_f64() * 1000.0;
    progress(&f.p);
    let mut out = report(&f.p, commits, &now);
    out["lockWaitMs"] = json!((locked - asked).as_millis() as u64);
    out["writesHeldMs"] = json!(held_ms.round());
    out["startedAtMs"] = json!(asked_ms);
    out["lockedAtMs"] = json!(locked_ms);
    out["endedAtMs"] = json!(now_ms());
    out["movedTo"] = json!(f.to);
    let r = |x: f64| (x * 10.0).round() / 10.0;
    out["heldMs"] = json!({ "pass": r(steps[0]), "verifySnapshot": r(steps[1]), "mark": r(steps[2]), "commit": r(steps[3]) });
    let _ = f.rt.block_on(f.conn.close());
    if let Some(conn) = f.snap {
        out["verify"] = TargetSnapshot { rt: f.rt, conn }.verify(source, progress)?;
    }
    Ok(out)
}

/// `url` without its password, for messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let user = &url[s + 3..at];
            let user = user.split(':').next().unwrap_or("");
            format!("{}{user}{}", &url[..s + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}
