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

use super::catalog::{self, Column, Table};
use super::stream::Stream;
use super::tables::Kind;
use super::target::{self, pg};
use super::{on_snapshot, runtime, sq, Options, Progress};
use crate::core::error::{Error, Result};
use crate::sqlite::SqliteEngine;
use serde_json::json;
use sqlx::{AssertSqlSafe, Executor, PgConnection};
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

fn exists(c: &rusqlite::Connection, table: &str) -> Result<bool> {
    c.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [table],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
    .map_err(sq)
}

impl Positions {
    pub fn read(c: &rusqlite::Connection) -> Result<Positions> {
        let mut out = Positions::default();
        if exists(c, "sync_partitions")? {
            let mut st = c
                .prepare("SELECT partition, max_commit_seq, horizon_seq FROM sync_partitions")
                .map_err(sq)?;
            let rows = st
                .query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))
                .map_err(sq)?;
            out.seqs = rows.collect::<rusqlite::Result<_>>().map_err(sq)?;
        }
        if exists(c, "sync_push_results")? {
            out.push_rowid = c
                .query_row(
                    "SELECT coalesce(max(rowid), 0) FROM sync_push_results",
                    [],
                    |r| r.get(0),
                )
                .map_err(sq)?;
        }
        if exists(c, "sync_schema_meta")? {
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

fn run(rt: &tokio::runtime::Runtime, conn: &mut PgConnection, sql: String) -> Result<()> {
    rt.block_on(conn.execute(AssertSqlSafe(sql)))
        .map(drop)
        .map_err(pg)
}

/// Streams `SELECT <t's columns> FROM <from> <tail>` for each parameter
/// set into `into`.
#[allow(clippy::too_many_arguments)]
fn load(
    rt: &tokio::runtime::Runtime, c: &rusqlite::Connection, conn: &mut PgConnection, t: &Table,
    into: &str, tail: &str, params: &[Vec<String>], p: &mut Progress,
    progress: &mut dyn FnMut(&Progress),
) -> Result<u64> {
    let mut st = c
        .prepare(&format!(
            "SELECT {} FROM {} {tail}",
            t.column_list(),
            t.quoted()
        ))
        .map_err(sq)?;
    let mut out = Stream::open(rt, conn, t, into)?;
    for ps in params {
        let mut rows = st
            .query(rusqlite::params_from_iter(ps.iter()))
            .map_err(sq)?;
        out.rows(t, &mut rows, p, progress)?;
    }
    Ok(out.finish(p)?.0)
}

/// One pass over the source as `c` sees it (a snapshot, or the lease's
/// transaction); answers the new positions and the commits it copied.
pub fn pass(
    rt: &tokio::runtime::Runtime, c: &rusqlite::Connection, conn: &mut PgConnection,
    from: &Positions, p: &mut Progress, progress: &mut dyn FnMut(&Progress),
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
    run(rt, conn, "BEGIN".to_owned())?;
    let mut commits = 0u64;
    // The commit log above the last positions.
    let grown: Vec<(String, i64)> = now
        .seqs
        .iter()
        .filter_map(|(part, (s, _))| {
            let old = from.seqs.get(part).map_or(0, |x| x.0);
            (*s > old).then(|| {
                commits += (*s - old) as u64;
                (part.clone(), old)
            })
        })
        .collect();
    let params: Vec<Vec<String>> = grown
        .iter()
        .map(|(part, old)| vec![part.clone(), old.to_string()])
        .collect();
    for name in LOG {
        if let Some(t) = table(name) {
            p.table = t.name.clone();
            load(
                rt,
                c,
                conn,
                t,
                &t.quoted(),
                "WHERE partition = ?1 AND commit_seq > ?2",
                &params,
                p,
                progress,
            )?;
        }
    }
    // Pruning up to a horizon that moved.
    for (part, (_, h)) in &now.seqs {
        if *h > from.seqs.get(part).map_or(0, |x| x.1) {
            for name in LOG.iter().chain(&["sync_tombstones"]) {
                if table(name).is_some() {
                    rt.block_on(
                        sqlx::query(AssertSqlSafe(format!(
                            "DELETE FROM {name} WHERE partition = $1 AND commit_seq <= $2"
                        )))
                        .bind(part)
                        .bind(h)
                        .execute(&mut *conn),
                    )
                    .map_err(pg)?;
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
    if !touched.is_empty() {
        run(
            rt,
            conn,
            "CREATE TEMP TABLE copy_touched (partition TEXT, tbl TEXT, row_id TEXT) ON COMMIT DROP"
                .to_owned(),
        )?;
        let keys = Table {
            name: "copy_touched".to_owned(),
            columns: ["partition", "tbl", "row_id"]
                .iter()
                .map(|n| Column {
                    name: (*n).to_owned(),
                    kind: Kind::Text,
                    not_null: true,
                })
                .collect(),
            key: vec![0, 1, 2],
            partition: Some(0),
            seq: None,
            row: None,
        };
        // The keys go in from memory (the source holds no such table).
        send_keys(rt, conn, &keys, &touched)?;
        for t in plan.iter().filter(|t| t.row.is_some()) {
            rt.block_on(
                sqlx::query(AssertSqlSafe(format!(
                    "DELETE FROM {} t USING copy_touched k WHERE k.tbl = $1 AND t.\"_sync_partition\" = k.partition AND t.\"_sync_row_id\" = k.row_id",
                    t.quoted()
                )))
                .bind(&t.name)
                .execute(&mut *conn),
            )
            .map_err(pg)?;
            let mine: Vec<Vec<String>> = touched
                .iter()
                .filter(|k| k[1] == t.name)
                .map(|k| vec![k[0].clone(), k[2].clone()])
                .collect();
            if !mine.is_empty() {
                p.table = t.name.clone();
                load(
                    rt,
                    c,
                    conn,
                    t,
                    &t.quoted(),
                    "WHERE \"_sync_partition\" = ?1 AND \"_sync_row_id\" = ?2",
                    &mine,
                    p,
                    progress,
                )?;
            }
        }
        for name in PER_ROW {
            if let Some(t) = table(name) {
                run(rt, conn, format!(
                    "DELETE FROM {name} t USING copy_touched k WHERE t.partition = k.partition AND t.tbl = k.tbl AND t.row_id = k.row_id"
                ))?;
                p.table = t.name.clone();
                load(
                    rt,
                    c,
                    conn,
                    t,
                    &t.quoted(),
                    "WHERE partition = ?1 AND tbl = ?2 AND row_id = ?3",
                    &touched,
                    p,
                    progress,
                )?;
            }
        }
    }
    // New push results (rowids only grow; a replaced record gets a new one).
    if let Some(t) = table("sync_push_results") {
        if now.push_rowid > from.push_rowid {
            run(
                rt,
                conn,
                "CREATE TEMP TABLE copy_push (LIKE sync_push_results) ON COMMIT DROP".to_owned(),
            )?;
            p.table = t.name.clone();
            load(
                rt,
                c,
                conn,
                t,
                "copy_push",
                "WHERE rowid > ?1",
                &[vec![from.push_rowid.to_string()]],
                p,
                progress,
            )?;
            let cols = t.column_list();
            run(rt, conn, format!(
                "INSERT INTO sync_push_results ({cols}) SELECT {cols} FROM copy_push \
                 ON CONFLICT (partition, client_id, client_commit_id) DO UPDATE SET result = EXCLUDED.result"
            ))?;
        }
    }
    for name in WHOLE {
        if let Some(t) = table(name) {
            run(rt, conn, format!("DELETE FROM {name}"))?;
            p.table = t.name.clone();
            load(rt, c, conn, t, &t.quoted(), "", &[vec![]], p, progress)?;
        }
    }
    rt.block_on(target::record(conn, p.phase, &now.to_json()))?;
    run(rt, conn, "COMMIT".to_owned())?;
    Ok((now, commits))
}

/// Writes `keys` (rows of `t`'s text columns) with one `COPY`.
fn send_keys(
    rt: &tokio::runtime::Runtime, conn: &mut PgConnection, t: &Table, keys: &[Vec<String>],
) -> Result<()> {
    let mut data = super::value::COPY_HEADER.to_vec();
    for k in keys {
        super::value::tuple(&mut data, k.len());
        for v in k {
            super::value::encode(
                &mut data,
                Kind::Text,
                rusqlite::types::ValueRef::Text(v.as_bytes()),
            )
            .map_err(|e| Error::plain("ERR_SYNCULAR_COPY_VALUE", e))?;
        }
    }
    data.extend_from_slice(super::value::COPY_TRAILER);
    rt.block_on(async {
        let mut copy = conn
            .copy_in_raw(&format!(
                "COPY {} ({}) FROM STDIN (FORMAT binary)",
                t.name,
                t.column_list()
            ))
            .await?;
        copy.send(data.as_slice()).await?;
        copy.finish().await
    })
    .map_err(pg)?;
    Ok(())
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
    let (now, commits) = on_snapshot(source, |c| pass(&rt, c, &mut conn, &from, &mut p, progress))?;
    progress(&p);
    Ok(report(&p, commits, &now))
}

/// The final pass, under the write lease `lease` the caller holds (no
/// write of this storage can commit meanwhile), read on the lease's own
/// connection (it sees the open group's commits, which commit with it);
/// then the storage refuses every later write with `ERR_SYNCULAR_MOVED`.
pub fn finish(
    source: &SqliteEngine, lease: u32, o: &Options, positions: &str,
    progress: &mut dyn FnMut(&Progress),
) -> Result<serde_json::Value> {
    let from = Positions::parse(positions)?;
    let rt = runtime()?;
    let cfg = target::config(o)?;
    let mut conn = rt.block_on(target::connect(&cfg))?;
    let mut p = progress_at("final");
    let (now, commits) = source.with_lease(lease, |held| {
        pass(&rt, held.conn, &mut conn, &from, &mut p, progress)
    })?;
    source.refuse_writes(&redact(&o.target));
    progress(&p);
    Ok(report(&p, commits, &now))
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
