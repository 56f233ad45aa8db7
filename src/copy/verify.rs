//! `verify` (docs/copy.md): for every copied table and partition, the row
//! count, the largest sequence number and a SHA-256 over the rows in key
//! order, each value in the canonical form of `super::value`, read the same
//! way from both engines; on a difference, the first differing row by key.

use super::catalog::{self, Table};
use super::tables::Kind;
use super::target::{self, pg};
use super::value::{canon_json, canon_sqlite, Canon};
use super::{runtime, sq, table_exists, Options, Progress};
use crate::core::error::Result;
use crate::core::schema::quote_ident;
use crate::sqlite::SqliteEngine;
use serde_json::json;
use sha2::{Digest as _, Sha256};
use sqlx::{AssertSqlSafe, PgConnection, Row as _};
use std::collections::BTreeMap;
use std::time::Instant;

/// One table's partition, summed up.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Sum {
    count: u64,
    max_seq: Option<i64>,
    sha: [u8; 32],
}

/// Sums of one side: (table, partition) → sum.
type Sums = BTreeMap<(String, String), Sum>;

/// One row as both sides read it: partition, key, sequence, full row.
struct Row {
    partition: String,
    key: Vec<Canon>,
    seq: Option<i64>,
    bytes: Vec<u8>,
}

impl Row {
    fn new(t: &Table, values: Vec<Canon>) -> Row {
        let partition = match t.partition.map(|i| &values[i]) {
            Some(Canon::Bytes(b)) => String::from_utf8_lossy(b).into_owned(),
            _ => String::new(),
        };
        let seq = match t.seq.map(|i| &values[i]) {
            Some(Canon::Int(i)) => Some(*i),
            _ => None,
        };
        let mut bytes = Vec::new();
        for v in &values {
            v.write(&mut bytes);
        }
        let key = t.key.iter().map(|&i| values[i].clone()).collect();
        Row {
            partition,
            key,
            seq,
            bytes,
        }
    }
}

/// Folds rows, in key order, into per-partition sums.
struct Fold<'a> {
    table: &'a str,
    sums: &'a mut Sums,
    cur: Option<(String, Sha256, u64, Option<i64>)>,
}

impl Fold<'_> {
    fn row(&mut self, r: &Row) {
        if self.cur.as_ref().is_some_and(|c| c.0 != r.partition) {
            self.flush();
        }
        let cur = self
            .cur
            .get_or_insert_with(|| (r.partition.clone(), Sha256::new(), 0, None));
        cur.1.update((r.bytes.len() as u64).to_be_bytes());
        cur.1.update(&r.bytes);
        cur.2 += 1;
        cur.3 = cur.3.max(r.seq);
    }

    fn flush(&mut self) {
        if let Some((partition, h, count, max_seq)) = self.cur.take() {
            self.sums.insert(
                (self.table.to_owned(), partition),
                Sum {
                    count,
                    max_seq,
                    sha: h.finalize().into(),
                },
            );
        }
    }
}

fn order_sqlite(t: &Table) -> String {
    t.key
        .iter()
        .map(|&i| quote_ident(&t.columns[i].name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Reads `t` from SQLite in key order (one partition when given).
fn read_sqlite(
    c: &rusqlite::Connection, t: &Table, partition: Option<&str>, mut each: impl FnMut(Row),
) -> Result<()> {
    let filter = match (partition, t.partition) {
        (Some(_), Some(i)) => format!(" WHERE {} = ?1", quote_ident(&t.columns[i].name)),
        _ => String::new(),
    };
    let sql = format!(
        "SELECT {} FROM {}{filter} ORDER BY {}",
        t.column_list(),
        t.quoted(),
        order_sqlite(t)
    );
    let mut st = c.prepare(&sql).map_err(sq)?;
    let mut rows = match (partition, t.partition) {
        (Some(p), Some(_)) => st.query([p]),
        _ => st.query([]),
    }
    .map_err(sq)?;
    while let Some(r) = rows.next().map_err(sq)? {
        let mut values = Vec::with_capacity(t.columns.len());
        for (i, col) in t.columns.iter().enumerate() {
            values.push(canon_sqlite(col.kind, r.get_ref(i).map_err(sq)?));
        }
        each(Row::new(t, values));
    }
    Ok(())
}

/// The same read on PostgreSQL: every value cast to a type that reads
/// back in canonical form, text keys ordered as SQLite's BINARY does.
async fn read_pg(
    c: &mut PgConnection, t: &Table, partition: Option<&str>, mut each: impl FnMut(Row),
) -> Result<()> {
    let expr = |i: usize| {
        let q = quote_ident(&t.columns[i].name);
        match t.columns[i].kind {
            // Each cast to the type the value is read as, whatever the
            // column's own (a source written by another version).
            Kind::Bool => format!("{q}::int4::int8"),
            Kind::Int8 | Kind::Int4 | Kind::Int2 => format!("{q}::int8"),
            Kind::Float8 => format!("{q}::float8"),
            Kind::Text | Kind::Json | Kind::JsonOrNull => format!("{q}::text"),
            Kind::Bytea => q,
        }
    };
    let cols: Vec<String> = (0..t.columns.len()).map(expr).collect();
    let order: Vec<String> = t
        .key
        .iter()
        .map(|&i| match t.columns[i].kind {
            Kind::Text => format!("{} COLLATE \"C\"", quote_ident(&t.columns[i].name)),
            _ => quote_ident(&t.columns[i].name),
        })
        .collect();
    let filter = match (partition, t.partition) {
        (Some(_), Some(i)) => format!(" WHERE {} = $1", quote_ident(&t.columns[i].name)),
        _ => String::new(),
    };
    let sql = format!(
        "SELECT {} FROM {}{filter} ORDER BY {}",
        cols.join(", "),
        t.quoted(),
        order.join(", ")
    );
    let mut q = sqlx::query(AssertSqlSafe(sql));
    if let (Some(p), Some(_)) = (partition, t.partition) {
        q = q.bind(p.to_owned());
    }
    let mut stream = q.fetch(&mut *c);
    while let Some(r) = std::future::poll_fn(|cx| stream.as_mut().poll_next(cx)).await {
        let r = r.map_err(pg)?;
        let mut values = Vec::with_capacity(t.columns.len());
        for (i, col) in t.columns.iter().enumerate() {
            let v = match col.kind {
                Kind::Int8 | Kind::Int4 | Kind::Int2 | Kind::Bool => r
                    .try_get::<Option<i64>, _>(i)
                    .map_err(pg)?
                    .map_or(Canon::Null, Canon::Int),
                Kind::Float8 => r
                    .try_get::<Option<f64>, _>(i)
                    .map_err(pg)?
                    .map_or(Canon::Null, Canon::Real),
                Kind::Text => r
                    .try_get::<Option<String>, _>(i)
                    .map_err(pg)?
                    .map_or(Canon::Null, |s| Canon::Bytes(s.into_bytes())),
                Kind::Bytea => r
                    .try_get::<Option<Vec<u8>>, _>(i)
                    .map_err(pg)?
                    .map_or(Canon::Null, Canon::Bytes),
                Kind::Json | Kind::JsonOrNull => r
                    .try_get::<Option<String>, _>(i)
                    .map_err(pg)?
                    .map_or(Canon::Null, |s| canon_json(&s)),
            };
            values.push(v);
        }
        each(Row::new(t, values));
    }
    Ok(())
}

/// Which side is the copy's source (the labels of a difference).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// SQLite → PostgreSQL.
    ToPostgres,
    /// PostgreSQL → SQLite (`super::reverse`).
    FromPostgres,
}

/// Compares the source with the PostgreSQL database `o` names; answers
/// `{ equal, tables, partitions, rows, firstDifference }`.
pub fn verify(
    source: &SqliteEngine, o: &Options, progress: &mut dyn FnMut(&Progress),
) -> Result<serde_json::Value> {
    let rt = runtime()?;
    let cfg = target::config(o)?;
    let mut conn = rt.block_on(target::connect(&cfg))?;
    verify_on(source, &rt, &mut conn, progress)
}

/// [`verify`] reading the target on `conn` (of `rt`), which may hold a
/// snapshot taken earlier (the command's final pass: see
/// `catchup::finish_locked`).
pub fn verify_on(
    source: &SqliteEngine, rt: &tokio::runtime::Runtime, conn: &mut PgConnection,
    progress: &mut dyn FnMut(&Progress),
) -> Result<serde_json::Value> {
    compare(rt, source, conn, None, Direction::ToPostgres, progress)
}

/// The comparison of `sqlite` with the PostgreSQL schema `conn` is on
/// (in whatever transaction it holds: the copy from PostgreSQL compares
/// within its snapshot), over `plan`'s tables, or when none is given
/// those of the SQLite catalog. A table one side lacks has no rows there.
pub(super) fn compare(
    rt: &tokio::runtime::Runtime, sqlite: &SqliteEngine, conn: &mut PgConnection,
    plan: Option<&[Table]>, dir: Direction, progress: &mut dyn FnMut(&Progress),
) -> Result<serde_json::Value> {
    let mut p = Progress {
        phase: "verify",
        table: String::new(),
        rows: 0,
        rows_total: 0,
        bytes: 0,
        started: Instant::now(),
    };
    let (plan, lite) = super::on_snapshot(sqlite, |c| {
        let plan = match plan {
            Some(plan) => plan.to_vec(),
            None => catalog::read(c)?,
        };
        let mut sums = Sums::new();
        for t in &plan {
            if !table_exists(c, &t.name)? {
                continue;
            }
            p.table = t.name.clone();
            progress(&p);
            let mut f = Fold {
                table: &t.name,
                sums: &mut sums,
                cur: None,
            };
            read_sqlite(c, t, None, |r| {
                p.rows += 1;
                f.row(&r)
            })?;
            f.flush();
        }
        Ok((plan, sums))
    })?;
    let mut pgs = Sums::new();
    for t in &plan {
        if !rt.block_on(target::exists(conn, &t.name))? {
            continue;
        }
        p.table = t.name.clone();
        progress(&p);
        let mut f = Fold {
            table: &t.name,
            sums: &mut pgs,
            cur: None,
        };
        rt.block_on(read_pg(conn, t, None, |r| {
            p.rows += 1;
            f.row(&r)
        }))?;
        f.flush();
    }
    let (src, dst) = match dir {
        Direction::ToPostgres => (&lite, &pgs),
        Direction::FromPostgres => (&pgs, &lite),
    };
    // The first difference in plan order, then partition order.
    let mut first = None;
    'tables: for t in &plan {
        let parts: std::collections::BTreeSet<&String> = src
            .keys()
            .chain(dst.keys())
            .filter(|(n, _)| *n == t.name)
            .map(|(_, p)| p)
            .collect();
        for part in parts {
            let k = (t.name.clone(), part.clone());
            if src.get(&k) != dst.get(&k) {
                first = Some((t.clone(), part.clone()));
                break 'tables;
            }
        }
    }
    let partitions: Vec<serde_json::Value> = src
        .iter()
        .map(|((table, part), s)| {
            json!({
                "table": table,
                "partition": part,
                "count": s.count,
                "maxSeq": s.max_seq,
                "sha256": s.sha.iter().map(|b| format!("{b:02x}")).collect::<String>(),
            })
        })
        .collect();
    let difference = match first {
        None => serde_json::Value::Null,
        Some((t, part)) => {
            let sums = (
                src.get(&(t.name.clone(), part.clone())),
                dst.get(&(t.name.clone(), part.clone())),
            );
            first_difference(rt, sqlite, conn, &t, &part, sums, dir)?
        }
    };
    Ok(json!({
        "equal": difference.is_null(),
        "tables": plan.len(),
        "partitions": partitions,
        "rows": p.rows,
        "firstDifference": difference,
    }))
}

/// Reads both sides of one table's partition again and names the first
/// row (by key) that is missing on one side or differs.
fn first_difference(
    rt: &tokio::runtime::Runtime, sqlite: &SqliteEngine, conn: &mut PgConnection, t: &Table,
    part: &str, (a, b): (Option<&Sum>, Option<&Sum>), dir: Direction,
) -> Result<serde_json::Value> {
    // Left: the SQLite side; right: the PostgreSQL side.
    let (left_only, right_only) = match dir {
        Direction::ToPostgres => ("missing in target", "only in target"),
        Direction::FromPostgres => ("only in target", "missing in target"),
    };
    let mut left = Vec::new();
    super::on_snapshot(sqlite, |c| {
        if table_exists(c, &t.name)? {
            read_sqlite(c, t, Some(part), |r| left.push(r))?;
        }
        Ok(())
    })?;
    let mut right = Vec::new();
    if rt.block_on(target::exists(conn, &t.name))? {
        rt.block_on(read_pg(conn, t, Some(part), |r| right.push(r)))?;
    }
    let show = |key: &[Canon]| -> serde_json::Value {
        t.key
            .iter()
            .zip(key)
            .map(|(&i, v)| (t.columns[i].name.clone(), v.show()))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let (mut i, mut j) = (0, 0);
    let kind;
    let key;
    loop {
        match (left.get(i), right.get(j)) {
            (Some(l), Some(r)) if cmp_key(&l.key, &r.key) == std::cmp::Ordering::Equal => {
                if l.bytes != r.bytes {
                    kind = "differs";
                    key = show(&l.key);
                    break;
                }
                i += 1;
                j += 1;
            }
            (Some(l), Some(r)) if cmp_key(&l.key, &r.key) == std::cmp::Ordering::Less => {
                kind = left_only;
                key = show(&l.key);
                break;
            }
            (Some(_), Some(r)) | (None, Some(r)) => {
                kind = right_only;
                key = show(&r.key);
                break;
            }
            (Some(l), None) => {
                kind = left_only;
                key = show(&l.key);
                break;
            }
            (None, None) => {
                kind = "order or count";
                key = serde_json::Value::Null;
                break;
            }
        }
    }
    let sum = |s: Option<&Sum>| s.map(|s| json!({ "count": s.count, "maxSeq": s.max_seq }));
    Ok(json!({
        "table": t.name,
        "partition": part,
        "kind": kind,
        "key": key,
        "source": sum(a),
        "target": sum(b),
    }))
}

/// Key order as both sides sort: integers numerically, text by bytes.
fn cmp_key(a: &[Canon], b: &[Canon]) -> std::cmp::Ordering {
    for (x, y) in a.iter().zip(b) {
        let o = match (x, y) {
            (Canon::Int(x), Canon::Int(y)) => x.cmp(y),
            (Canon::Bytes(x), Canon::Bytes(y)) => x.cmp(y),
            (Canon::Json(x), Canon::Json(y)) => x.cmp(y),
            _ => std::cmp::Ordering::Equal,
        };
        if o != std::cmp::Ordering::Equal {
            return o;
        }
    }
    std::cmp::Ordering::Equal
}
