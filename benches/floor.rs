//! The push sequence of `bench/run.mjs`, issued directly against the
//! engine from Rust: the floor the N-API path is compared with in the
//! same run. A bench target, not part of the addon.
//!
//! `cargo bench --bench floor -- <path> <commits> <ops> [synchronous]`
//! pushes `commits` commits of `ops` upserts each on a fresh database at
//! `path`, at `synchronous` (`full`, the package's default, `normal` or
//! `off`: the measured module's own setting, so package and floor run at
//! one durability level), and prints `{"usPerCommit":N}` on stdout (with no arguments: 2000 commits of 1 op
//! in a temporary directory). `bench/run.mjs` builds this once
//! (`--no-run`) and runs the executable per measurement.
//! `tests/bench_floor.rs` includes this file to keep it compiling and working.

use std::sync::Arc;
use std::time::{Duration, Instant};
use syncular_native_storage::core::codec::{encode_row, Value};
use syncular_native_storage::core::model::{
    Change, ChangeOp, CheckpointDeclaration, NewCommit, StoredRow, Tomb,
};
use syncular_native_storage::core::schema::Schema;
use syncular_native_storage::seam::{Reads, Transaction};
use syncular_native_storage::sqlite::{Config, Location, SqliteEngine, Synchronous};
use syncular_native_storage::Result;

pub const BENCH_SCHEMA: &str = r#"{"version":1,"tables":[{"name":"tasks","columns":[{"name":"id","type":"string","nullable":false},{"name":"project_id","type":"string","nullable":false},{"name":"title","type":"string","nullable":true},{"name":"n","type":"integer","nullable":true}],"primaryKeyIndex":0,"materialize":true,"indexes":[]}]}"#;

/// The payload `bench/run.mjs` builds for row `id` in commit `n`.
pub fn payload(schema: &Schema, id: &str, n: i64) -> Result<Vec<u8>> {
    let t = schema.table("tasks")?;
    let title = format!("title {n}");
    Ok(encode_row(
        &t.defs,
        &[
            Value::Text(id),
            Value::Text("p1"),
            Value::Text(&title),
            Value::Integer(n),
        ],
    )?)
}

/// Pushes `commits` commits of `ops` upserts each on a fresh database at
/// `path` at `synchronous`; returns microseconds per commit.
pub fn direct_push(path: &str, commits: u32, ops: u32, synchronous: Synchronous) -> Result<f64> {
    let engine = Arc::new(SqliteEngine::new(Config {
        location: Location::File(path.to_owned()),
        synchronous,
        busy_timeout: Duration::from_secs(5),
        query_timeout: syncular_native_storage::core::query::DEFAULT_TIMEOUT,
        result_limits: Default::default(),
    }));
    let lease = engine.try_lock(None)?.expect("fresh database");
    engine.ensure_schema(
        lease,
        Schema::parse(BENCH_SCHEMA)?,
        &[] as &[CheckpointDeclaration],
        0,
    )?;
    engine.unlock(lease, true)?;
    let scopes = r#"{"project_id":"p1"}"#.to_owned();
    // Payloads are the host's work, not storage's: build them untimed.
    let schema = Schema::parse(BENCH_SCHEMA)?;
    let payloads: Vec<Vec<Vec<u8>>> = (0..commits)
        .map(|c| {
            (0..ops)
                .map(|o| payload(&schema, &format!("row-{o}"), i64::from(c)))
                .collect()
        })
        .collect::<Result<_>>()?;
    let start = Instant::now();
    for c in 0..commits {
        let client_commit_id = format!("direct-{c}");
        engine
            .get_push_result("bench".into(), "client".into(), client_commit_id.clone())
            .wait()?;
        let id = engine.try_lock(Some("bench"))?.expect("no other writer");
        engine.tx_lock_partition_for_push(id).wait()?;
        engine.tx_read_serve_gate(id, 1).wait()?;
        engine
            .tx_get_push_result(id, "client".into(), client_commit_id.clone())
            .wait()?;
        // As the package does: one prefetch names every row, and the
        // answers stand in for the point reads.
        let ids: Vec<String> = (0..ops).map(|o| format!("row-{o}")).collect();
        let known = engine
            .tx_prefetch_rows(id, "tasks".into(), ids.clone())
            .wait()?
            .rows;
        let mut changes = Vec::with_capacity(ops as usize);
        for o in 0..ops {
            let row_id = ids[o as usize].clone();
            let version = i64::from(c) + 1;
            let k = &known[o as usize];
            if k.row.is_none() && k.tombstone_seq != Tomb::Read(None) {
                engine
                    .tx_clear_tombstone(id, "tasks".into(), row_id.clone())
                    .wait()?;
            }
            let bytes = payloads[c as usize][o as usize].clone();
            changes.push(upsert(&engine, id, row_id, version, &scopes, bytes, o)?);
        }
        let seq = engine
            .tx_append_commit(
                id,
                NewCommit {
                    client_id: "client".into(),
                    client_commit_id: client_commit_id.clone(),
                    actor_id: "actor".into(),
                    created_at_ms: i64::from(c),
                    changes,
                },
            )
            .wait()?;
        // The same text the package stores for the bench host's result.
        let results: Vec<String> = (0..ops)
            .map(|o| format!(r#"{{"opIndex":{o},"status":"applied"}}"#))
            .collect();
        let result = format!(
            r#"{{"status":"applied","commitSeq":{seq},"recordedAtMs":{c},"cacheIdentity":"id-{client_commit_id}","results":[{}]}}"#,
            results.join(",")
        );
        engine
            .tx_put_push_result(id, "client".into(), client_commit_id.clone(), result)
            .wait()?;
        engine.unlock(id, true)?;
    }
    let per = start.elapsed().as_secs_f64() * 1e6 / f64::from(commits.max(1));
    engine.close();
    Ok(per)
}

/// The command line's positional arguments: `cargo bench` passes
/// `--bench` to every bench target, and a harness-less one sees it too.
pub fn positional() -> Vec<String> {
    std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect()
}

/// `upsertRow` of one row under lease `id`; the change the commit logs.
pub fn upsert(
    engine: &Arc<SqliteEngine>, id: u32, row_id: String, version: i64, scopes: &str,
    payload: Vec<u8>, op_index: u32,
) -> Result<Change> {
    let row = StoredRow {
        row_id: row_id.clone(),
        server_version: version,
        scopes_json: scopes.to_owned(),
        payload: payload.clone(),
        column_versions: None,
    };
    engine
        .tx_upsert_row(id, "tasks".into(), row, Some(op_index))
        .wait()?;
    Ok(Change {
        table: "tasks".into(),
        row_id,
        op: ChangeOp::Upsert,
        row_version: Some(version),
        scopes_json: scopes.to_owned(),
        payload: Some(payload),
    })
}

fn main() {
    let args = positional();
    let pos: Vec<&str> = args.iter().map(String::as_str).collect();
    // Bare `cargo bench`: one default measurement in a temporary directory.
    let scratch = std::env::temp_dir().join(format!("syncular-floor-{}", std::process::id()));
    let default_path = scratch.join("floor.sqlite");
    let (path, commits, ops, sync) = match pos[..] {
        [] => {
            std::fs::create_dir_all(&scratch).expect("temporary directory");
            (
                default_path.to_str().expect("utf-8 temp path"),
                "2000",
                "1",
                None,
            )
        }
        [path, commits, ops] => (path, commits, ops, None),
        [path, commits, ops, sync] => (path, commits, ops, Some(sync)),
        _ => {
            eprintln!("usage: floor <path> <commits> <ops> [full|normal|off]");
            std::process::exit(2);
        }
    };
    let Ok(synchronous) = Synchronous::parse(sync) else {
        eprintln!("floor: synchronous is full, normal or off");
        std::process::exit(2);
    };
    let (Ok(commits), Ok(ops)) = (commits.parse::<u32>(), ops.parse::<u32>()) else {
        eprintln!("floor: <commits> and <ops> are non-negative integers");
        std::process::exit(2);
    };
    let outcome = direct_push(path, commits, ops, synchronous);
    if pos.is_empty() {
        let _ = std::fs::remove_dir_all(&scratch);
    }
    match outcome {
        Ok(per) => println!(r#"{{"usPerCommit":{per}}}"#),
        Err(e) => {
            eprintln!("floor: {e}");
            std::process::exit(1);
        }
    }
}
