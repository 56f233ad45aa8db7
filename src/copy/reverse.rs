//! The copy from PostgreSQL into SQLite (docs/copy.md, "PostgreSQL →
//! SQLite"): a snapshot, for backups and tests. One `REPEATABLE READ`
//! transaction on the source is the snapshot; every table streams out of
//! it with binary `COPY` into one SQLite transaction of prepared
//! `INSERT`s, row tables made before their rows and their indexes after.
//! `verify` runs in the same snapshot, so it compares the copy with the
//! state it was taken from while the source goes on serving. There are no
//! catch-up passes and no final pass in this direction.

use super::binary::{self, Reader, Step};
use super::catalog::Table;
use super::pg_source::{self, Plan};
use super::sqlite_target::{Load, Target};
use super::target::pg;
use super::verify::{compare, Direction};
use super::{runtime, sq, Options, Progress};
use crate::core::error::{Error, Result};
use crate::postgres::Config;
use serde_json::json;
use sqlx::{Executor, PgConnection};
use std::time::{Duration, Instant};

/// How often progress is reported while a table loads.
const TICK: Duration = Duration::from_millis(250);

/// The copy from the PostgreSQL schema `source` names into the SQLite
/// file `o.target` names, or only the comparison of the two.
pub fn from_postgres(
    source: &crate::postgres::Config, o: &Options, verify_only: bool,
    progress: &mut dyn FnMut(&Progress),
) -> Result<serde_json::Value> {
    if verify_only {
        verify(source, o, progress)
    } else {
        copy(source, o, progress)
    }
}

/// Refuses, before anything runs, a target the copy from PostgreSQL
/// cannot write (a PostgreSQL url, a memory database, an unknown scheme).
pub fn check_sqlite_target(url: &str) -> Result<()> {
    Target::parse(url).map(drop)
}

/// The PostgreSQL source a url names, its schema `schema` (the
/// command's `--schema`), read as a storage's options would be.
pub fn postgres_source(url: &str, schema: Option<String>) -> Result<crate::postgres::Config> {
    crate::postgres::Config::parse(url, Some(1), schema, None)
}

/// Refuses what only the copy into PostgreSQL does.
fn refuse_online(o: &Options) -> Result<()> {
    let asked = if o.final_pass {
        "finalPass"
    } else if o.resume {
        "resume"
    } else {
        return Ok(());
    };
    Err(super::unsupported(&format!(
        "{asked} is not supported when copying from PostgreSQL: the copy into SQLite is one consistent snapshot while the source keeps serving (writes after it are not in the copy); copy again for a newer one"
    )))
}

/// Copies the PostgreSQL schema `source` names into the new (or empty)
/// SQLite file `o.target` names; answers the report (and `verify`'s when
/// asked).
pub fn copy(
    source: &Config, o: &Options, progress: &mut dyn FnMut(&Progress),
) -> Result<serde_json::Value> {
    refuse_online(o)?;
    let target = Target::parse(&o.target)?;
    let rt = runtime()?;
    let started = Instant::now();
    let mut c = rt.block_on(pg_source::open(source))?;
    let plan = rt.block_on(pg_source::plan(&mut c))?;
    target.refuse_non_empty(&plan)?;
    let mut p = Progress {
        phase: "copy",
        table: String::new(),
        rows: 0,
        rows_total: rt.block_on(pg_source::count(&mut c, &plan))?,
        bytes: 0,
        started,
    };
    let snapshot = rt.block_on(snapshot(&mut c))?;
    target.make_meta()?;
    let load = target.load()?;
    let tables = match load_all(&rt, &mut c, &load, &plan, &mut p, progress) {
        Ok(tables) => tables,
        Err(e) => return Err(load.fail(e)),
    };
    load.commit()?;
    progress(&p);
    let skipped: Vec<String> = plan
        .rows
        .iter()
        .flat_map(|r| r.skipped_indexes.iter().cloned())
        .collect();
    let mut report = p.report(json!(tables), skipped);
    report["notCopied"] = json!(plan.not_copied);
    report["snapshot"] = json!(snapshot);
    if o.verify {
        report["verify"] = verify_in(&rt, &mut c, &plan, &target, progress)?;
    }
    rt.block_on(c.execute("COMMIT")).map_err(pg)?;
    Ok(report)
}

/// Compares the PostgreSQL schema `source` names with the SQLite file
/// `o.target` names, in one snapshot of the source.
pub fn verify(
    source: &Config, o: &Options, progress: &mut dyn FnMut(&Progress),
) -> Result<serde_json::Value> {
    let target = Target::parse(&o.target)?;
    if std::fs::metadata(&target.path).is_err() {
        return Err(Error::plain(
            "ERR_SYNCULAR_COPY_TARGET",
            format!("no SQLite file at {:?} to compare with", target.path),
        ));
    }
    let rt = runtime()?;
    let mut c = rt.block_on(pg_source::open(source))?;
    let plan = rt.block_on(pg_source::plan(&mut c))?;
    let out = verify_in(&rt, &mut c, &plan, &target, progress)?;
    rt.block_on(c.execute("COMMIT")).map_err(pg)?;
    Ok(out)
}

/// `verify` over the source's tables, the SQLite side read through a
/// storage's engine on the file.
fn verify_in(
    rt: &tokio::runtime::Runtime, c: &mut PgConnection, plan: &Plan, target: &Target,
    progress: &mut dyn FnMut(&Progress),
) -> Result<serde_json::Value> {
    let tables: Vec<Table> = plan.tables().cloned().collect();
    let engine = target.engine()?;
    let out = compare(
        rt,
        &engine,
        c,
        Some(&tables),
        Direction::FromPostgres,
        progress,
    );
    engine.close();
    out
}

/// Each partition's last commit and horizon in the snapshot: what the
/// copy holds.
async fn snapshot(c: &mut PgConnection) -> Result<serde_json::Value> {
    let rows: Vec<(Option<String>, i64, i64)> = sqlx::query_as(
        "SELECT partition, max_commit_seq, horizon_seq FROM sync_partitions ORDER BY partition COLLATE \"C\"",
    )
    .fetch_all(&mut *c)
    .await
    .map_err(pg)?;
    let partitions: serde_json::Map<String, serde_json::Value> = rows
        .into_iter()
        .map(|(p, s, h)| (p.unwrap_or_default(), json!([s, h])))
        .collect();
    Ok(json!({ "partitions": partitions }))
}

/// Every table of `plan`, in order; answers each one's rows and bytes.
fn load_all(
    rt: &tokio::runtime::Runtime, c: &mut PgConnection, load: &Load, plan: &Plan, p: &mut Progress,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Vec<serde_json::Value>> {
    let mut tables = Vec::new();
    let done = |t: &Table, (rows, bytes): (u64, u64), started: Instant| json!({ "table": t.name, "rows": rows, "bytes": bytes, "elapsedMs": started.elapsed().as_millis() as u64 });
    for t in &plan.meta {
        let started = Instant::now();
        let loaded = load_table(rt, c, load, t, p, progress)?;
        tables.push(done(t, loaded, started));
    }
    for r in &plan.rows {
        let started = Instant::now();
        load.create(r)?;
        let loaded = load_table(rt, c, load, &r.table, p, progress)?;
        load.indexes(r)?;
        tables.push(done(&r.table, loaded, started));
    }
    Ok(tables)
}

/// Streams one table out of the snapshot into its prepared `INSERT`.
fn load_table(
    rt: &tokio::runtime::Runtime, c: &mut PgConnection, load: &Load, t: &Table, p: &mut Progress,
    progress: &mut dyn FnMut(&Progress),
) -> Result<(u64, u64)> {
    p.table = t.name.clone();
    progress(p);
    let marks: Vec<String> = (1..=t.columns.len()).map(|i| format!("?{i}")).collect();
    let mut st = load
        .conn
        .prepare(&format!(
            "INSERT INTO {} ({}) VALUES ({})",
            t.quoted(),
            t.column_list(),
            marks.join(", ")
        ))
        .map_err(sq)?;
    let sql = pg_source::copy_out_sql(t);
    rt.block_on(async {
        let mut stream = c.copy_out_raw(&sql).await.map_err(pg)?;
        let mut reader = Reader::default();
        let (mut fields, mut json) = (Vec::new(), String::new());
        let (mut rows, mut bytes, mut last) = (0u64, 0u64, Instant::now());
        while let Some(chunk) = std::future::poll_fn(|cx| stream.as_mut().poll_next(cx)).await {
            let chunk = chunk.map_err(pg)?;
            bytes += chunk.len() as u64;
            p.bytes += chunk.len() as u64;
            reader.feed(&chunk);
            loop {
                match reader
                    .next(&mut fields)
                    .map_err(|why| stream_error(t, &why))?
                {
                    Step::Tuple => {}
                    Step::More | Step::End => break,
                }
                if fields.len() != t.columns.len() {
                    return Err(stream_error(
                        t,
                        &format!(
                            "{} fields where {} were expected",
                            fields.len(),
                            t.columns.len()
                        ),
                    ));
                }
                for (i, col) in t.columns.iter().enumerate() {
                    let field = fields[i].as_ref().map(|r| reader.bytes(r));
                    let v = binary::value(col.kind, &col.name, field, &mut json)
                        .map_err(|why| value_error(t, &col.name, &reader, &fields, &why))?;
                    st.raw_bind_parameter(i + 1, v).map_err(sq)?;
                }
                st.raw_execute().map_err(|e| {
                    let e = sq(e);
                    value_error(t, "", &reader, &fields, &e.to_string())
                })?;
                rows += 1;
                p.rows += 1;
            }
            if last.elapsed() >= TICK {
                last = Instant::now();
                progress(p);
            }
        }
        Ok((rows, bytes))
    })
}

fn stream_error(t: &Table, why: &str) -> Error {
    Error::plain(
        "ERR_SYNCULAR_COPY_SOURCE",
        format!("cannot read {} from the source: {why}", t.name),
    )
}

/// `ERR_SYNCULAR_COPY_VALUE`, naming the table, the column and the row's
/// key.
fn value_error(
    t: &Table, column: &str, reader: &Reader, fields: &[Option<std::ops::Range<usize>>], why: &str,
) -> Error {
    let key: Vec<String> = t
        .key
        .iter()
        .map(|&i| {
            let v = match fields.get(i).and_then(|f| f.as_ref()) {
                None => "NULL".to_owned(),
                Some(r) => match t.columns[i].kind {
                    super::tables::Kind::Text => {
                        format!("{:?}", String::from_utf8_lossy(reader.bytes(r)))
                    }
                    _ => <[u8; 8]>::try_from(reader.bytes(r))
                        .map_or_else(|_| "?".to_owned(), |b| i64::from_be_bytes(b).to_string()),
                },
            };
            format!("{} {v}", t.columns[i].name)
        })
        .collect();
    let at = if column.is_empty() {
        t.name.clone()
    } else {
        format!("{}.{column}", t.name)
    };
    Error::plain(
        "ERR_SYNCULAR_COPY_VALUE",
        format!("cannot copy {at} of the row {}: {why}", key.join(", ")),
    )
}
