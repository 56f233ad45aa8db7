//! What the host asks right after it takes the partition lock, read in the
//! lock's own round trip (issue 27), and the statements each connection
//! prepares for that batch.
//!
//! A push goes: `getPushResult` (storage level), `begin`,
//! `lockPartitionForPush`, `readServeGate`, then `tx.getPushResult` for the
//! same client commit. The lock batch therefore also reads:
//! - the serve gate, with every pending checkpoint of every schema version
//!   (the running version is only known when the host asks);
//! - the stored push results of the client commits this engine was asked
//!   about at storage level for the partition in the last [`FRESH`] and
//!   has not seen pushed yet (at most [`KEYS_PER_PARTITION`] of them).
//!   The host asks microseconds before it begins; a key a push never
//!   followed (a push refused before `begin`, or made by another process)
//!   ages out instead of riding on every later lock batch.
//!
//! Both are read after the row lock is granted, in the same transaction,
//! so they are what a statement sent at that point reads. The answers are
//! used only until the transaction sends anything else: every other member
//! goes through `TxState::ready`, which drops them. Push results of a
//! partition are written only by transactions holding its lock, so one read
//! under the lock cannot change before this transaction writes one. The
//! gate's rows are not written under the partition lock; an answer from the
//! batch is what a read sent a few microseconds earlier would have seen.

use crate::core::model::ServeGate;
use crate::core::stored::{self, Form, Shape};
use crate::postgres::log::APPEND_COMMIT;
use crate::postgres::quote::lit;
use sqlx::postgres::PgRow;
use sqlx::{Column, Row};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Client commits remembered per partition.
pub const KEYS_PER_PARTITION: usize = 16;
/// How long a client commit asked about is worth reading in a lock batch.
pub const FRESH: Duration = Duration::from_secs(1);
/// Partitions remembered; past this the map starts again empty.
const PARTITIONS: usize = 4096;

/// The client commits asked about at storage level and not yet pushed.
#[derive(Default)]
pub struct PushKeys(Mutex<HashMap<String, VecDeque<(String, String, Instant)>>>);

impl PushKeys {
    fn map(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, VecDeque<(String, String, Instant)>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A storage-level `getPushResult` found nothing: a push may follow.
    pub fn asked(&self, partition: &str, client_id: &str, commit_id: &str) {
        let mut map = self.map();
        if map.len() >= PARTITIONS && !map.contains_key(partition) {
            map.clear();
        }
        let keys = map.entry(partition.to_owned()).or_default();
        keys.retain(|(c, k, _)| !(c == client_id && k == commit_id));
        if keys.len() >= KEYS_PER_PARTITION {
            keys.pop_front();
        }
        keys.push_back((client_id.to_owned(), commit_id.to_owned(), Instant::now()));
    }

    /// The transaction asked for this one under the lock: forget it.
    pub fn answered(&self, partition: &str, client_id: &str, commit_id: &str) {
        let mut map = self.map();
        if let Some(keys) = map.get_mut(partition) {
            keys.retain(|(c, k, _)| !(c == client_id && k == commit_id));
            if keys.is_empty() {
                map.remove(partition);
            }
        }
    }

    /// The partition's keys asked within [`FRESH`]; older ones are dropped.
    fn of(&self, partition: &str) -> Vec<(String, String)> {
        let mut map = self.map();
        let Some(keys) = map.get_mut(partition) else {
            return Vec::new();
        };
        keys.retain(|(_, _, at)| at.elapsed() < FRESH);
        let fresh: Vec<_> = keys
            .iter()
            .map(|(c, k, _)| (c.clone(), k.clone()))
            .collect();
        if keys.is_empty() {
            map.remove(partition);
        }
        fresh
    }
}

/// The answers read in the lock batch.
pub struct AfterLock {
    /// Taken by the first `readServeGate`.
    gate: Option<Gate>,
    /// The asked client commits, with the stored result where there is one.
    results: HashMap<(String, String), Option<String>>,
}

/// The stored schema version, the partition's log epoch, and every
/// pending checkpoint (partition, name, schema version).
struct Gate(i64, Option<String>, Vec<(String, String, i64)>);

/// What the lock batch read that `append` relies on: the counter row's
/// `max_commit_seq` and the partition's writer fence (`None`: no fence
/// row). Both hold until the transaction itself appends: the counter row
/// is locked, and a fence raised meanwhile still fails the append
/// (storage-layout §4.2), only later.
#[derive(Clone, Copy)]
pub struct Locked {
    pub max_commit_seq: i64,
    pub fence: Option<i64>,
}

/// The statements each connection prepares for the lock batch: the serve
/// gate, and the push results of a list of client commits.
pub const GATE: &str = "syncular_after_lock_gate_v3";
pub const RESULTS: &str = "syncular_after_lock_results_v2";
/// The partition's counter row lock itself (the batch's first statement).
pub const LOCK: &str = "syncular_lock_partition_v1";
/// The push result the transaction records, sent with `COMMIT`
/// (`batch::put_and_commit`). Prepared before [`LOCK`], so a transaction
/// whose lock batch executed [`LOCK`] has it too.
pub const PUT: &str = "syncular_put_push_result_v1";
/// The commit append (`log::APPEND_COMMIT`), executed with literal
/// arguments in a later batch (`append`). Prepared before [`LOCK`] too.
pub const APPEND: &str = "syncular_append_commit_v1";
/// Its parameter types, in `log::APPEND_COMMIT`'s order.
const APPEND_TYPES: &str = "text, text, text, text, int8, int8, int4[], text[], text[], int2[], \
int8[], text[], bytea[], text[], text[], text[], text[], text[], int8";
/// The push-result insert's head; its values follow.
pub const PUT_INTO: &str =
    "INSERT INTO sync_push_results (partition, client_id, client_commit_id, result) VALUES";

/// The counter row lock, with the partition given as `p`.
pub fn select_lock(p: &str) -> String {
    format!("SELECT max_commit_seq FROM sync_partitions WHERE partition = {p} FOR UPDATE")
}

/// The serve gate's reads, with the partition given as `p`: a placeholder
/// when prepared, a literal when sent whole. Every row says what it is in
/// its first column and has the same columns, all cast to text, so the
/// prepared statement's result type stays the same whatever a later layout
/// makes of the columns. The prepared form also reads the partition's
/// writer fence (`f`), for `append`, and the upsert statements the
/// session has prepared (`u`), for `upsert`.
fn select_gate(p: &str, fence: bool) -> String {
    let fence = if fence {
        format!(
            " UNION ALL SELECT 'f', required_writer_version::text, NULL, NULL FROM sync_writer_fence \
             WHERE partition = {p} \
             UNION ALL SELECT 'u', name::text, NULL, NULL FROM pg_catalog.pg_prepared_statements \
             WHERE pg_catalog.left(name, 16) = 'syncular_upsert_'"
        )
    } else {
        String::new()
    };
    format!(
        "SELECT 'v'::text AS after_lock, schema_version::text AS a, NULL::text AS b, NULL::text AS c \
         FROM sync_schema_meta WHERE id = 1 \
         UNION ALL SELECT 'e', log_epoch::text, NULL, NULL FROM sync_partition_registry WHERE partition = {p} \
         UNION ALL SELECT 'k', partition::text, name::text, schema_version::text FROM sync_backfill_checkpoints \
         WHERE state <> 'activated'{fence}"
    )
}

/// The stored push results of the client commits `clients[i]`,
/// `commits[i]` (two `text[]` of one length), as [`select_gate`] gives
/// rows: one row a client commit, its result NULL when none is stored (the
/// column is NOT NULL). One statement for all of them, where a statement a
/// commit cost 16 pushers on one partition about 8 more statements a push
/// (each lock batch asks for the commits of the pushes queued behind it).
/// Each commit is looked up by the whole primary key in a subquery of its
/// own, so the plan is one index probe a commit whatever the planner
/// thinks of the table: a join of the list with the table may plan as a
/// scan of the partition's every result.
fn select_results(p: &str, clients: &str, commits: &str) -> String {
    format!(
        "SELECT 'r'::text AS after_lock, k.client_id AS a, k.client_commit_id AS b, \
         (SELECT r.result::text FROM sync_push_results r WHERE r.partition = {p} \
         AND r.client_id = k.client_id AND r.client_commit_id = k.client_commit_id) AS c \
         FROM ROWS FROM (pg_catalog.unnest({clients}::text[]), pg_catalog.unnest({commits}::text[])) \
         AS k(client_id, client_commit_id)"
    )
}

/// Prepares [`GATE`], [`RESULTS`], [`PUT`], [`APPEND`] and [`LOCK`] on a connection that lacks them and
/// whose tables are there (at connect, and once the meta layout is made).
/// It does not fail where a `DO` block can run: a connection without the
/// statements sends the reads whole. Planning them on every lock batch
/// cost about 0.1 ms of it; prepared, PostgreSQL keeps one generic plan
/// for each (their custom plans cost the same), planned in 5 µs.
pub fn prepare() -> String {
    let one = |name: &str, params: &str, text: String| {
        format!(
            "IF NOT EXISTS (SELECT 1 FROM pg_prepared_statements WHERE name = '{name}') THEN \
             EXECUTE $prepare$PREPARE {name}({params}) AS {text}$prepare$; END IF;"
        )
    };
    format!(
        "DO $syncular$ BEGIN \
         IF to_regclass('sync_schema_meta') IS NOT NULL AND to_regclass('sync_partition_registry') IS NOT NULL \
         AND to_regclass('sync_backfill_checkpoints') IS NOT NULL AND to_regclass('sync_push_results') IS NOT NULL \
         AND to_regclass('sync_partitions') IS NOT NULL AND to_regclass('sync_writer_fence') IS NOT NULL \
         AND to_regclass('sync_commits') IS NOT NULL AND to_regclass('sync_changes') IS NOT NULL \
         AND to_regclass('sync_change_scopes') IS NOT NULL AND to_regclass('sync_tombstones') IS NOT NULL THEN \
         {} {} {} {} {} \
         END IF; \
         EXCEPTION WHEN OTHERS THEN NULL; \
         END $syncular$",
        one(GATE, "text", select_gate("$1", true)),
        one(RESULTS, "text, text[], text[]", select_results("$1", "$2", "$3")),
        one(
            PUT,
            "text, text, text, jsonb",
            format!("{PUT_INTO} ($1, $2, $3, $4) ON CONFLICT DO NOTHING"),
        ),
        one(APPEND, APPEND_TYPES, APPEND_COMMIT.to_owned()),
        one(LOCK, "text", select_lock("$1")),
    )
}

/// The statements appended to the lock batch (the prepared ones when
/// `prepared`), and the keys they ask about.
pub fn batch_tail(
    keys: &PushKeys, partition: &str, prepared: bool,
) -> Option<(String, Vec<(String, String)>)> {
    let p = lit(partition)?;
    let mut text = if prepared {
        format!("EXECUTE {GATE}({p})")
    } else {
        select_gate(&p, false)
    };
    let mut asked = Vec::new();
    let (mut clients, mut commits) = (Vec::new(), Vec::new());
    for (client, commit) in keys.of(partition) {
        if let (Some(c), Some(k)) = (lit(&client), lit(&commit)) {
            clients.push(c);
            commits.push(k);
            asked.push((client, commit));
        }
    }
    if !asked.is_empty() {
        let (c, k) = (
            format!("ARRAY[{}]", clients.join(", ")),
            format!("ARRAY[{}]", commits.join(", ")),
        );
        text.push_str("; ");
        if prepared {
            text.push_str(&format!("EXECUTE {RESULTS}({p}, {c}, {k})"));
        } else {
            text.push_str(&select_results(&p, &c, &k));
        }
    }
    Some((text, asked))
}

/// The counter row and the fence out of a prepared lock batch's rows
/// (`None` when either cannot be read: nothing is then deferred).
pub fn locked(rows: &[PgRow]) -> Option<Locked> {
    let mut max_commit_seq = None;
    let mut fence = None;
    for r in rows {
        match r.columns().first().map(|c| c.name()) {
            Some("max_commit_seq") => max_commit_seq = Some(r.try_get::<i64, _>(0).ok()?),
            Some("after_lock") if r.try_get::<String, _>(0).ok()? == "f" => {
                fence = Some(r.try_get::<Option<String>, _>(1).ok()??.parse().ok()?);
            }
            _ => {}
        }
    }
    Some(Locked {
        max_commit_seq: max_commit_seq?,
        fence,
    })
}

/// The upsert statements a prepared lock batch found on its connection.
pub fn prepared_upserts(rows: &[PgRow]) -> HashSet<Arc<str>> {
    rows.iter()
        .filter(|r| r.columns().first().map(|c| c.name()) == Some("after_lock"))
        .filter(|r| r.try_get::<String, _>(0).is_ok_and(|k| k == "u"))
        .filter_map(|r| r.try_get::<Option<String>, _>(1).ok().flatten())
        .map(Arc::from)
        .collect()
}

/// Reads the tail's rows out of a lock batch's.
pub fn read(rows: &[PgRow], asked: Vec<(String, String)>) -> Option<AfterLock> {
    let mut gate = Gate(0, None, Vec::new());
    let mut results: HashMap<_, _> = asked.into_iter().map(|k| (k, None)).collect();
    for r in rows {
        if r.columns().first().map(|c| c.name()) != Some("after_lock") {
            continue;
        }
        let kind: String = r.try_get(0).ok()?;
        let a: Option<String> = r.try_get(1).ok()?;
        let b: Option<String> = r.try_get(2).ok()?;
        let c: Option<String> = r.try_get(3).ok()?;
        match kind.as_str() {
            "v" => gate.0 = a.and_then(|s| s.parse().ok()).unwrap_or(0),
            "e" => gate.1 = a,
            "k" => gate.2.push((a?, b?, c?.parse().ok()?)),
            "r" => {
                results.insert(
                    (a?, b?),
                    c.and_then(|t| stored::read(Form::Jsonb, t, Shape::Any)),
                );
            }
            _ => {}
        }
    }
    Some(AfterLock {
        gate: Some(gate),
        results,
    })
}

impl AfterLock {
    /// The serve gate, for the first `readServeGate` (`running` the
    /// host's schema version).
    pub fn take_gate(&mut self, running: i64) -> Option<ServeGate> {
        let Gate(stored_schema_version, log_epoch, pending) = self.gate.take()?;
        // As the statement binds it (`meta::read_serve_gate`).
        let running = i64::from(i32::try_from(running).unwrap_or(i32::MAX));
        Some(ServeGate {
            stored_schema_version,
            log_epoch,
            pending: pending
                .into_iter()
                .filter(|(_, _, v)| *v == running)
                .map(|(p, n, _)| (p, n))
                .collect(),
        })
    }

    /// `Some(answer)` for a client commit the batch asked about.
    pub fn take_result(&mut self, client_id: &str, commit_id: &str) -> Option<Option<String>> {
        self.results
            .remove(&(client_id.to_owned(), commit_id.to_owned()))
    }
}
