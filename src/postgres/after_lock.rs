//! What the host asks right after it takes the partition lock, read in the
//! lock's own round trip (issue 27).
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
//! goes through [`TxState::ready`], which drops them. Push results of a
//! partition are written only by transactions holding its lock, so one read
//! under the lock cannot change before this transaction writes one. The
//! gate's rows are not written under the partition lock; an answer from the
//! batch is what a read sent a few microseconds earlier would have seen.

use super::prefetch::lit;
use super::TxState;
use crate::model::ServeGate;
use crate::stored::{self, Form, Shape};
use sqlx::postgres::PgRow;
use sqlx::{Column, Row};
use std::collections::{HashMap, VecDeque};
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

/// The statements appended to the lock batch, and the keys they ask
/// about. Each is a plain index lookup (or a scan of the few pending
/// checkpoints), so planning them costs little; one statement joining
/// them measured about 0.3 ms of planning. Every column is named, so each
/// row says which statement it came from.
pub fn batch_tail(keys: &PushKeys, partition: &str) -> Option<(String, Vec<(String, String)>)> {
    let p = lit(partition)?;
    let mut text = format!(
        "SELECT schema_version::text AS gate_schema_version FROM sync_schema_meta WHERE id = 1; \
         SELECT log_epoch AS gate_log_epoch FROM sync_partition_registry WHERE partition = {p}; \
         SELECT partition AS gate_partition, name, schema_version::text FROM sync_backfill_checkpoints \
         WHERE state <> 'activated'"
    );
    let mut asked = Vec::new();
    for (client, commit) in keys.of(partition) {
        if let (Some(c), Some(k)) = (lit(&client), lit(&commit)) {
            text.push_str(&format!(
                "; SELECT client_id AS result_client_id, client_commit_id, result::text \
                 FROM sync_push_results WHERE partition = {p} AND client_id = {c} AND client_commit_id = {k}"
            ));
            asked.push((client, commit));
        }
    }
    Some((text, asked))
}

/// Reads the tail's rows out of a lock batch's.
pub fn read(rows: &[PgRow], asked: Vec<(String, String)>) -> Option<AfterLock> {
    let mut gate = Gate(0, None, Vec::new());
    let mut results: HashMap<_, _> = asked.into_iter().map(|k| (k, None)).collect();
    for r in rows {
        let Some(first) = r.columns().first() else {
            continue;
        };
        match first.name() {
            "gate_schema_version" => {
                let v: Option<String> = r.try_get(0).ok()?;
                gate.0 = v.and_then(|s| s.parse().ok()).unwrap_or(0);
            }
            "gate_log_epoch" => gate.1 = r.try_get(0).ok()?,
            "gate_partition" => {
                let version: Option<String> = r.try_get(2).ok()?;
                gate.2.push((
                    r.try_get(0).ok()?,
                    r.try_get(1).ok()?,
                    version?.parse().ok()?,
                ));
            }
            "result_client_id" => {
                let key = (r.try_get(0).ok()?, r.try_get(1).ok()?);
                let text: Option<String> = r.try_get(2).ok()?;
                results.insert(
                    key,
                    text.and_then(|t| stored::read(Form::Jsonb, t, Shape::Any)),
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

impl TxState {
    /// The serve gate read in the lock batch, when nothing was sent since.
    pub fn gate_after_lock(&mut self, running: i64) -> Option<ServeGate> {
        let Gate(stored_schema_version, log_epoch, pending) =
            self.after_lock.as_mut()?.gate.take()?;
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

    /// A push result read in the lock batch, when nothing was sent since:
    /// `Some(answer)` for a client commit it asked about.
    pub fn push_result_after_lock(
        &mut self, client_id: &str, commit_id: &str,
    ) -> Option<Option<String>> {
        let after = self.after_lock.as_mut()?;
        after
            .results
            .remove(&(client_id.to_owned(), commit_id.to_owned()))
    }
}
