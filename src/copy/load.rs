//! The snapshot copy (docs/copy.md): one SQLite read transaction is the
//! snapshot; one PostgreSQL transaction receives every table through
//! binary `COPY`, row tables made before their rows and their indexes
//! after. Nothing is visible on the target until it commits.

use super::catalog::{self, Table};
use super::target::{self, pg};
use super::value::{encode, tuple, COPY_HEADER, COPY_TRAILER};
use super::{on_snapshot, runtime, sq, Options, Progress};
use crate::core::error::{Error, Result};
use crate::sqlite::SqliteEngine;
use serde_json::json;
use sqlx::{AssertSqlSafe, Executor, PgConnection};
use std::time::{Duration, Instant};

/// Bytes of `COPY` data sent to the server at a time.
const CHUNK: usize = 1 << 20;
/// How often progress is reported while a table loads.
const TICK: Duration = Duration::from_millis(250);

/// Copies everything `source` holds into the PostgreSQL database `o`
/// names; answers the report (and `verify`'s when asked).
pub fn copy(
    source: &SqliteEngine, o: &Options, progress: &mut dyn FnMut(&Progress),
) -> Result<serde_json::Value> {
    let rt = runtime()?;
    let cfg = target::config(o)?;
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
        let mut tables = Vec::new();
        for t in &plan {
            let (rows, bytes) = copy_table(&rt, c, &mut conn, t, &mut p, progress)?;
            tables.push(json!({ "table": t.name, "rows": rows, "bytes": bytes }));
        }
        rt.block_on(conn.execute("COMMIT")).map_err(pg)?;
        // Fresh statistics, so the first pulls after a switch plan well.
        for t in &plan {
            rt.block_on(conn.execute(AssertSqlSafe(format!("ANALYZE {}", t.quoted()))))
                .map_err(pg)?;
        }
        progress(&p);
        let secs = started.elapsed().as_secs_f64().max(1e-6);
        let skipped: Vec<String> = plan
            .iter()
            .filter_map(|t| t.row.as_ref())
            .flat_map(|r| r.skipped_indexes.iter().cloned())
            .collect();
        Ok(json!({
                "tables": tables,
                "rows": p.rows,
                "bytes": p.bytes,
                "elapsedMs": (secs * 1000.0).round(),
                "rowsPerSec": (p.rows as f64 / secs).round(),
                "mbPerSec": (p.bytes as f64 / 1e6 / secs * 100.0).round() / 100.0,
                "skippedIndexes": skipped,
        }))
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
    let copy_sql = format!(
        "COPY {} ({}) FROM STDIN (FORMAT binary)",
        t.quoted(),
        t.column_list()
    );
    let mut copy = rt.block_on(conn.copy_in_raw(&copy_sql)).map_err(pg)?;
    let mut buf = Vec::with_capacity(CHUNK + 4096);
    buf.extend_from_slice(COPY_HEADER);
    let (mut n, mut bytes) = (0u64, 0u64);
    let mut last = Instant::now();
    while let Some(r) = rows.next().map_err(sq)? {
        tuple(&mut buf, t.columns.len());
        for (i, col) in t.columns.iter().enumerate() {
            let v = r.get_ref(i).map_err(sq)?;
            encode(&mut buf, col.kind, v).map_err(|why| value_error(t, &col.name, r, &why))?;
        }
        n += 1;
        p.rows += 1;
        if buf.len() >= CHUNK {
            bytes += buf.len() as u64;
            p.bytes += buf.len() as u64;
            rt.block_on(copy.send(std::mem::take(&mut buf).as_slice()))
                .map_err(pg)?;
            buf.reserve(CHUNK + 4096);
            if last.elapsed() >= TICK {
                last = Instant::now();
                progress(p);
            }
        }
    }
    buf.extend_from_slice(COPY_TRAILER);
    bytes += buf.len() as u64;
    p.bytes += buf.len() as u64;
    rt.block_on(async {
        copy.send(buf.as_slice()).await?;
        copy.finish().await
    })
    .map_err(pg)?;
    if let Some(row) = &t.row {
        for ix in &row.indexes {
            rt.block_on(conn.execute(AssertSqlSafe(ix.clone())))
                .map_err(pg)?;
        }
    }
    Ok((n, bytes))
}

/// `ERR_SYNCULAR_COPY_VALUE`, naming the table, the column and the row's key.
fn value_error(t: &Table, column: &str, r: &rusqlite::Row<'_>, why: &str) -> Error {
    let key: Vec<String> = t
        .key
        .iter()
        .map(|&i| {
            let v = match r.get_ref(i) {
                Ok(rusqlite::types::ValueRef::Text(b)) => String::from_utf8_lossy(b).into_owned(),
                Ok(rusqlite::types::ValueRef::Integer(i)) => i.to_string(),
                Ok(other) => format!("{other:?}"),
                Err(e) => e.to_string(),
            };
            format!("{} {:?}", t.columns[i].name, v)
        })
        .collect();
    Error::plain(
        "ERR_SYNCULAR_COPY_VALUE",
        format!(
            "cannot copy {}.{} of the row {}: {why}",
            t.name,
            column,
            key.join(", ")
        ),
    )
}
