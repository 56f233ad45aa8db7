//! The push sequence of `bench/run.mjs`, issued directly against the
//! engine from Rust: the floor the N-API path is compared with in the
//! same run. Not used by the storage itself.

use crate::codec::{encode_row, Value};
use crate::error::Result;
use crate::model::{Change, ChangeOp, CheckpointDeclaration, NewCommit, StoredRow, Tomb};
use crate::schema::Schema;
use crate::sqlite::{Config, Location, SqliteEngine, Synchronous};
use std::time::{Duration, Instant};

pub const BENCH_SCHEMA: &str = r#"{"version":1,"tables":[{"name":"tasks","columns":[{"name":"id","type":"string","nullable":false},{"name":"project_id","type":"string","nullable":false},{"name":"title","type":"string","nullable":true},{"name":"n","type":"integer","nullable":true}],"primaryKeyIndex":0,"materialize":true,"indexes":[]}]}"#;

/// The payload `bench/run.mjs` builds for row `id` in commit `n`.
fn payload(schema: &Schema, id: &str, n: i64) -> Result<Vec<u8>> {
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
/// `path`; returns microseconds per commit.
pub fn direct_push(path: &str, commits: u32, ops: u32) -> Result<f64> {
    let engine = SqliteEngine::new(Config {
        location: Location::File(path.to_owned()),
        synchronous: Synchronous::Normal,
        busy_timeout: Duration::from_secs(5),
        query_timeout: crate::query::DEFAULT_TIMEOUT,
    });
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
        engine.get_push_result("bench", "client", &client_commit_id)?;
        let id = engine.try_lock(Some("bench"))?.expect("no other writer");
        engine.tx_lock_partition_for_push(id)?;
        engine.tx_read_serve_gate(id, 1)?;
        engine.tx_get_push_result(id, "client", &client_commit_id)?;
        // As the package does: one prefetch names every row, and the
        // answers stand in for the point reads.
        let ids: Vec<String> = (0..ops).map(|o| format!("row-{o}")).collect();
        let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let known = engine.tx_prefetch_rows(id, "tasks", &id_refs)?;
        let mut changes = Vec::with_capacity(ops as usize);
        for o in 0..ops {
            let row_id = ids[o as usize].clone();
            let version = i64::from(c) + 1;
            let k = &known[o as usize];
            if k.row.is_none() && k.tombstone_seq != Tomb::Read(None) {
                engine.tx_clear_tombstone(id, "tasks", &row_id)?;
            }
            let bytes = payloads[c as usize][o as usize].clone();
            let row = StoredRow {
                row_id: row_id.clone(),
                server_version: version,
                scopes_json: scopes.clone(),
                payload: bytes.clone(),
                column_versions: None,
            };
            engine.tx_upsert_row(id, "tasks", &row, Some(o))?;
            changes.push(Change {
                table: "tasks".into(),
                row_id,
                op: ChangeOp::Upsert,
                row_version: Some(version),
                scopes_json: scopes.clone(),
                payload: Some(bytes),
            });
        }
        let seq = engine.tx_append_commit(
            id,
            &NewCommit {
                client_id: "client".into(),
                client_commit_id: client_commit_id.clone(),
                actor_id: "actor".into(),
                created_at_ms: i64::from(c),
                changes,
            },
        )?;
        // The same text the package stores for the bench host's result.
        let results: Vec<String> = (0..ops)
            .map(|o| format!(r#"{{"opIndex":{o},"status":"applied"}}"#))
            .collect();
        let result = format!(
            r#"{{"status":"applied","commitSeq":{seq},"recordedAtMs":{c},"cacheIdentity":"id-{client_commit_id}","results":[{}]}}"#,
            results.join(",")
        );
        engine.tx_put_push_result(id, "client", &client_commit_id, &result)?;
        engine.unlock(id, true)?;
    }
    let per = start.elapsed().as_secs_f64() * 1e6 / f64::from(commits.max(1));
    engine.close();
    Ok(per)
}
