//! The snapshot copy (docs/copy.md): one SQLite read transaction is the
//! snapshot; one PostgreSQL transaction receives every table through
//! binary `COPY`, row tables made before their rows and their indexes
//! after. Nothing is visible on the target until it commits.

use super::catalog::{self, Table};
use super::stream::Stream;
use super::target::{self, pg};
use super::{on_snapshot, runtime, sq, Options, Progress};
use crate::core::error::{Error, Result};
use crate::sqlite::SqliteEngine;
use serde_json::json;
use sqlx::{AssertSqlSafe, Executor, PgConnection};
use std::time::Instant;

const FENCE_OFF: &str = "ALTER TABLE sync_commits DISABLE TRIGGER sync_commits_writer_fence";
const FENCE_ON: &str = "ALTER TABLE sync_commits ENABLE TRIGGER sync_commits_writer_fence";

/// Copies everything `source` holds into the PostgreSQL database `o`
/// names; answers the report (and `verify`'s when asked).
pub fn copy(
    source: &SqliteEngine, o: &Options, progress: &mut dyn FnMut(&Progress),
) -> Result<serde_json::Value> {
    let rt = runtime()?;
    let cfg = target::config(o)?;
    if o.resume {
        let recorded = rt.block_on(async {
            let mut c = target::connect(&cfg).await?;
            target::recorded(&mut c).await
        })?;
        if let Some(positions) = recorded {
            return super::catchup::resume(source, o, &positions, progress);
        }
    }
    let started = Instant::now();
    // A snapshot from the first statement on: the plan, the counts and
    // every row are of one state.
    let report = on_snapshot(source, |c| {
        let plan = catalog::read(c)?;
        let mut conn = rt.block_on(async {
            let mut conn = target::connect(&cfg).await?;
            target::refuse_non_empty(&mut conn, &plan).await?;
            target::make_meta(&cfg).await?;
            conn.execute("BEGIN").await.map_err(pg)?;
            // The fence checks new commits against the running version; the
            // copied history is not new. Off for the load (the table is
            // ours alone until this transaction commits), on again before.
            conn.execute(FENCE_OFF).await.map_err(pg)?;
            Ok::<_, Error>(conn)
        })?;
        let mut p = Progress {
            phase: "copy",
            table: String::new(),
            rows: 0,
            rows_total: count_rows(c, &plan)?,
            bytes: 0,
            started,
        };
        let positions = super::catchup::Positions::read(c)?;
        let mut tables = Vec::new();
        for t in &plan {
            let (rows, bytes) = copy_table(&rt, c, &mut conn, t, &mut p, progress)?;
            tables.push(json!({ "table": t.name, "rows": rows, "bytes": bytes }));
        }
        rt.block_on(conn.execute(FENCE_ON)).map_err(pg)?;
        rt.block_on(target::record(&mut conn, "snapshot", &positions.to_json()))?;
        rt.block_on(conn.execute("COMMIT")).map_err(pg)?;
        // Fresh statistics, so the first pulls after a switch plan well.
        for t in &plan {
            rt.block_on(conn.execute(AssertSqlSafe(format!("ANALYZE {}", t.quoted()))))
                .map_err(pg)?;
        }
        progress(&p);
        let skipped: Vec<String> = plan
            .iter()
            .filter_map(|t| t.row.as_ref())
            .flat_map(|r| r.skipped_indexes.iter().cloned())
            .collect();
        let mut report = p.report(json!(tables), skipped);
        report["positions"] = positions.to_json();
        Ok(report)
    })?;
    if !o.verify {
        return Ok(report);
    }
    let verified = super::verify(source, o, progress)?;
    let mut report = report;
    report["verify"] = verified;
    Ok(report)
}

/// The total rows of the snapshot, for progress and the time left.
fn count_rows(c: &rusqlite::Connection, plan: &[Table]) -> Result<u64> {
    let mut n = 0u64;
    for t in plan {
        let k: i64 = c
            .query_row(&format!("SELECT count(*) FROM {}", t.quoted()), [], |r| {
                r.get(0)
            })
            .map_err(sq)?;
        n += k as u64;
    }
    Ok(n)
}

/// Loads one table; answers its rows and bytes.
fn copy_table(
    rt: &tokio::runtime::Runtime, c: &rusqlite::Connection, conn: &mut PgConnection, t: &Table,
    p: &mut Progress, progress: &mut dyn FnMut(&Progress),
) -> Result<(u64, u64)> {
    p.table = t.name.clone();
    progress(p);
    if let Some(row) = &t.row {
        rt.block_on(conn.execute(AssertSqlSafe(row.create.clone())))
            .map_err(pg)?;
    }
    let mut st = c
        .prepare(&format!("SELECT {} FROM {}", t.column_list(), t.quoted()))
        .map_err(sq)?;
    let mut rows = st.query([]).map_err(sq)?;
    let mut out = Stream::open(rt, conn, t, &t.quoted())?;
    out.rows(t, &mut rows, p, progress)?;
    let done = out.finish(p)?;
    if let Some(row) = &t.row {
        for ix in &row.indexes {
            rt.block_on(conn.execute(AssertSqlSafe(ix.clone())))
                .map_err(pg)?;
        }
    }
    Ok(done)
}
