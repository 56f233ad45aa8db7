//! Partition registry, client records, idempotency records, checkpoints,
//! the writer fence and the serve gate.

use super::conn::map_err;
use super::kept::{kept, Conn};
use crate::core::error::{Error, Result};
use crate::core::model::{
    Checkpoint, CheckpointDeclaration, ClientCursor, ClientRecord, RegistryEntry, ServeGate,
};
use crate::core::stored::{self, Form};
use rusqlite::{params, OptionalExtension};

// ---- registry ---------------------------------------------------------------

fn registry_from(r: &rusqlite::Row<'_>) -> rusqlite::Result<RegistryEntry> {
    Ok(RegistryEntry {
        partition: r.get(0)?,
        log_epoch: r.get(1)?,
        epoch_required: r.get::<_, i64>(2)? != 0,
        last_authenticated_at_ms: r.get(3)?,
    })
}

/// Column lists as macros, so each statement is one literal (`concat!`):
/// a `format!` per call cost about 900 instructions.
macro_rules! registry_fields {
    () => {
        "partition, log_epoch, epoch_required, last_authenticated_at_ms"
    };
}

pub fn touch_partition(
    conn: &Conn, partition: &str, at_ms: i64, initial_epoch: &str,
) -> Result<RegistryEntry> {
    if initial_epoch.is_empty() {
        return Err(Error::plain(
            "ERR_SYNCULAR_EMPTY_EPOCH",
            "initial log epoch must be non-empty",
        ));
    }
    kept!(conn, concat!("INSERT INTO sync_partition_registry (", registry_fields!(), ") VALUES (?1, ?2, 0, ?3)
         ON CONFLICT (partition) DO UPDATE SET last_authenticated_at_ms = excluded.last_authenticated_at_ms
         RETURNING ", registry_fields!()))
    .and_then(|mut st| to_end(st.query(params![partition, initial_epoch, at_ms])?, registry_from))
    .map_err(map_err)?
    .ok_or_else(|| Error::plain("ERR_SYNCULAR_NOT_PERSISTED", "partition registry write did not persist"))
}

/// The first row of a statement with RETURNING, stepped to its end: in
/// autocommit the statement commits on its last step, and a commit that
/// fails must be this call's error (a statement reset on drop would lose
/// it).
fn to_end<T>(
    mut rows: rusqlite::Rows<'_>, f: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<Option<T>> {
    let first = rows.next()?.map(f).transpose()?;
    while rows.next()?.is_some() {}
    Ok(first)
}

pub fn rotate_epoch(
    conn: &Conn, partition: &str, epoch: &str, at_ms: i64,
) -> Result<RegistryEntry> {
    if epoch.is_empty() {
        return Err(Error::plain(
            "ERR_SYNCULAR_EMPTY_EPOCH",
            "log epoch must be non-empty",
        ));
    }
    let entry = kept!(conn, concat!("INSERT INTO sync_partition_registry (", registry_fields!(), ") VALUES (?1, ?2, 1, ?3)
             ON CONFLICT (partition) DO UPDATE SET log_epoch = excluded.log_epoch, epoch_required = 1,
               last_authenticated_at_ms = excluded.last_authenticated_at_ms
             RETURNING ", registry_fields!()))
        .and_then(|mut st| st.query_row(params![partition, epoch, at_ms], registry_from))
        .map_err(map_err)?;
    kept!(conn, "DELETE FROM sync_clients WHERE partition = ?1")
        .and_then(|mut st| st.execute([partition]))
        .map_err(map_err)?;
    Ok(entry)
}

pub fn list_registry(conn: &Conn) -> Result<Vec<RegistryEntry>> {
    let mut st = kept!(
        conn,
        concat!(
            "SELECT ",
            registry_fields!(),
            " FROM sync_partition_registry ORDER BY partition"
        )
    )
    .map_err(map_err)?;
    let rows = st.query_map([], registry_from).map_err(map_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(map_err)
}

pub fn log_epoch(conn: &Conn, partition: &str) -> Result<Option<String>> {
    kept!(
        conn,
        "SELECT log_epoch FROM sync_partition_registry WHERE partition = ?1"
    )
    .and_then(|mut st| st.query_row([partition], |r| r.get(0)).optional())
    .map_err(map_err)
}

// ---- push results -----------------------------------------------------------

pub fn get_push_result(
    conn: &Conn, partition: &str, client_id: &str, commit_id: &str,
) -> Result<Option<String>> {
    kept!(conn, "SELECT result FROM sync_push_results WHERE partition = ?1 AND client_id = ?2 AND client_commit_id = ?3",
    )
    .and_then(|mut st| {
        st.query_row([partition, client_id, commit_id], |r| super::rows::json_text(r, 0))
            .optional()
    })
    .map_err(map_err)
}

/// First writer wins.
pub fn put_push_result(
    conn: &Conn, partition: &str, client_id: &str, commit_id: &str, json: &str,
) -> Result<()> {
    kept!(conn, "INSERT OR IGNORE INTO sync_push_results (partition, client_id, client_commit_id, result) VALUES (?1, ?2, ?3, ?4)",
    )
    .and_then(|mut st| st.execute([partition, client_id, commit_id, json]))
    .map_err(map_err)?;
    Ok(())
}

// ---- clients ----------------------------------------------------------------

macro_rules! client_fields {
    () => {
        "client_id, actor_id, wire_version, cursor, updated_at_ms, subscriptions"
    };
}

/// The record as stored; [`stored::client`] checks its subscriptions.
fn client_from(r: &rusqlite::Row<'_>) -> rusqlite::Result<ClientRecord> {
    Ok(ClientRecord {
        client_id: r.get(0)?,
        actor_id: r.get(1)?,
        wire_version: r.get(2)?,
        cursor: r.get(3)?,
        updated_at_ms: r.get(4)?,
        subscriptions_json: super::rows::json_text(r, 5)?,
    })
}

pub fn get_client(conn: &Conn, partition: &str, client_id: &str) -> Result<Option<ClientRecord>> {
    kept!(
        conn,
        concat!(
            "SELECT ",
            client_fields!(),
            " FROM sync_clients WHERE partition = ?1 AND client_id = ?2"
        )
    )
    .and_then(|mut st| st.query_row([partition, client_id], client_from).optional())
    .map_err(map_err)?
    .map(|c| stored::client(Form::Text, c, partition))
    .transpose()
}

pub fn list_clients(conn: &Conn, partition: &str) -> Result<Vec<ClientRecord>> {
    let mut st = kept!(
        conn,
        concat!(
            "SELECT ",
            client_fields!(),
            " FROM sync_clients WHERE partition = ?1 ORDER BY updated_at_ms DESC"
        )
    )
    .map_err(map_err)?;
    let rows = st.query_map([partition], client_from).map_err(map_err)?;
    rows.map(|c| stored::client(Form::Text, c.map_err(map_err)?, partition))
        .collect()
}

pub fn put_client(conn: &Conn, partition: &str, c: &ClientRecord) -> Result<()> {
    kept!(
        conn,
        // An upsert rewrites the row in place; OR REPLACE would delete and
        // reinsert it, rewriting the primary-key index entry as well.
        "INSERT INTO sync_clients (partition, client_id, actor_id, wire_version, cursor, subscriptions, updated_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (partition, client_id) DO UPDATE SET actor_id = excluded.actor_id,
           wire_version = excluded.wire_version, cursor = excluded.cursor,
           subscriptions = excluded.subscriptions, updated_at_ms = excluded.updated_at_ms",
    )
    .and_then(|mut st| {
        st.execute(params![
            partition,
            c.client_id,
            c.actor_id,
            c.wire_version,
            c.cursor,
            c.subscriptions_json,
            c.updated_at_ms
        ])
    })
    .map_err(map_err)?;
    Ok(())
}

pub fn list_cursors(conn: &Conn, partition: &str) -> Result<Vec<ClientCursor>> {
    let mut st = kept!(conn, "SELECT client_id, cursor, updated_at_ms FROM sync_clients WHERE partition = ?1 ORDER BY client_id")
        .map_err(map_err)?;
    let rows = st
        .query_map([partition], |r| {
            Ok(ClientCursor {
                client_id: r.get(0)?,
                cursor: r.get(1)?,
                updated_at_ms: r.get(2)?,
            })
        })
        .map_err(map_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(map_err)
}

/// Monotonic cursor advance; with `guard`, only for the matching actor under
/// the partition's current epoch. A missing record stays missing.
pub fn advance_cursor(
    conn: &Conn, partition: &str, client_id: &str, guard: Option<(&str, &str)>, cursor: i64,
    at_ms: i64,
) -> Result<()> {
    match guard {
        Some((actor_id, epoch)) => kept!(conn, "UPDATE sync_clients SET cursor = max(cursor, ?3), updated_at_ms = max(updated_at_ms, ?4)
                 WHERE partition = ?1 AND client_id = ?2 AND actor_id = ?5
                   AND EXISTS (SELECT 1 FROM sync_partition_registry r WHERE r.partition = ?1 AND r.log_epoch = ?6)",
            )
            .and_then(|mut st| st.execute(params![partition, client_id, cursor, at_ms, actor_id, epoch])),
        None => kept!(conn, "UPDATE sync_clients SET cursor = max(cursor, ?3), updated_at_ms = max(updated_at_ms, ?4)
                 WHERE partition = ?1 AND client_id = ?2",
            )
            .and_then(|mut st| st.execute(params![partition, client_id, cursor, at_ms])),
    }
    .map_err(map_err)?;
    Ok(())
}

pub fn active_cursor_floor(conn: &Conn, partition: &str, cutoff_ms: i64) -> Result<Option<i64>> {
    kept!(
        conn,
        "SELECT min(cursor) FROM sync_clients WHERE partition = ?1 AND updated_at_ms >= ?2",
    )
    .and_then(|mut st| st.query_row(params![partition, cutoff_ms], |r| r.get(0)))
    .map_err(map_err)
}

// ---- checkpoints, fence, gate -------------------------------------------------

macro_rules! checkpoint_fields {
    () => {
        "partition, name, schema_version, state, watermark, owner_epoch, observed_rows, updated_at_ms"
    };
}

/// A checkpoint row in `checkpoint_fields!` order.
pub(super) fn checkpoint_from(r: &rusqlite::Row<'_>) -> rusqlite::Result<Checkpoint> {
    Ok(Checkpoint {
        partition: r.get(0)?,
        name: r.get(1)?,
        schema_version: r.get(2)?,
        state: r.get(3)?,
        watermark: r.get(4)?,
        owner_epoch: r.get(5)?,
        observed_rows: r.get(6)?,
        updated_at_ms: r.get(7)?,
    })
}

pub fn read_checkpoints(conn: &Conn, partition: &str) -> Result<Vec<Checkpoint>> {
    let mut st = kept!(
        conn,
        concat!(
            "SELECT ",
            checkpoint_fields!(),
            " FROM sync_backfill_checkpoints WHERE partition = ?1 ORDER BY name"
        )
    )
    .map_err(map_err)?;
    let rows = st
        .query_map([partition], checkpoint_from)
        .map_err(map_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(map_err)
}

/// Inserts a `declared` row when absent and raises the writer fence.
pub fn declare_checkpoint(
    conn: &Conn, d: &CheckpointDeclaration, now_ms: i64,
) -> Result<Checkpoint> {
    kept!(conn, "INSERT INTO sync_backfill_checkpoints (partition, name, schema_version, state, watermark, owner_epoch, observed_rows, updated_at_ms)
         VALUES (?1, ?2, ?3, 'declared', 0, 0, 0, ?4) ON CONFLICT (partition, name) DO NOTHING",
    )
    .and_then(|mut st| st.execute(params![d.partition, d.name, d.schema_version, now_ms]))
    .map_err(map_err)?;
    kept!(conn, "INSERT INTO sync_writer_fence (partition, required_writer_version) VALUES (?1, ?2)
         ON CONFLICT (partition) DO UPDATE SET required_writer_version = max(required_writer_version, excluded.required_writer_version)",
    )
    .and_then(|mut st| st.execute(params![d.partition, d.schema_version]))
    .map_err(map_err)?;
    kept!(
        conn,
        concat!(
            "SELECT ",
            checkpoint_fields!(),
            " FROM sync_backfill_checkpoints WHERE partition = ?1 AND name = ?2"
        )
    )
    .and_then(|mut st| {
        st.query_row(params![d.partition, d.name], checkpoint_from)
            .optional()
    })
    .map_err(map_err)?
    .ok_or_else(|| Error::query("sync.storage.checkpoint_not_declared"))
}

/// The migration fence (0.30.4): raises the writer fence of every partition
/// in `sync_partitions` (every partition with a commit counter, as
/// upstream's release notes say) to `version`, never lowering one. Runs in the schema-bump
/// transaction, so no writer sees the new marker without the fences.
pub fn fence_existing_partitions(conn: &Conn, version: i64) -> Result<usize> {
    kept!(conn, super::sql::FENCE_EXISTING_PARTITIONS)
        .and_then(|mut st| st.execute([version]))
        .map_err(map_err)
}

/// Every incomplete checkpoint at `version`, across partitions.
pub fn pending_checkpoints(conn: &Conn, version: i64) -> Result<Vec<(String, String)>> {
    let mut st = kept!(conn, "SELECT partition, name FROM sync_backfill_checkpoints WHERE schema_version = ?1 AND state <> 'activated'",
        )
        .map_err(map_err)?;
    let rows = st
        .query_map([version], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(map_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(map_err)
}

pub fn stored_schema_version(conn: &Conn) -> Result<Option<(i64, String)>> {
    let exists: bool = kept!(
        conn,
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sync_schema_meta'",
    )
    .and_then(|mut st| st.exists([]))
    .map_err(map_err)?;
    if !exists {
        return Ok(None);
    }
    kept!(
        conn,
        "SELECT schema_version, layouts FROM sync_schema_meta WHERE id = 1"
    )
    .and_then(|mut st| st.query_row([], |r| Ok((r.get(0)?, r.get(1)?))).optional())
    .map_err(map_err)
}

pub fn read_serve_gate(conn: &Conn, partition: &str, running: i64) -> Result<ServeGate> {
    let mut st = kept!(conn, super::sql::SERVE_GATE).map_err(map_err)?;
    let mut rows = st.query(params![partition, running]).map_err(map_err)?;
    let mut gate = ServeGate {
        stored_schema_version: 0,
        log_epoch: None,
        pending: Vec::new(),
    };
    while let Some(r) = rows.next().map_err(map_err)? {
        if r.get::<_, i64>(0).map_err(map_err)? == 0 {
            gate.stored_schema_version = r.get::<_, Option<i64>>(1).map_err(map_err)?.unwrap_or(0);
            gate.log_epoch = r.get(2).map_err(map_err)?;
        } else {
            gate.pending
                .push((r.get(1).map_err(map_err)?, r.get(2).map_err(map_err)?));
        }
    }
    Ok(gate)
}

pub fn writer_fence_allows(conn: &Conn, partition: &str, version: i64) -> Result<bool> {
    let required: Option<i64> = kept!(
        conn,
        "SELECT required_writer_version FROM sync_writer_fence WHERE partition = ?1",
    )
    .and_then(|mut st| st.query_row([partition], |r| r.get(0)).optional())
    .map_err(map_err)?;
    Ok(required.is_none_or(|r| version >= r))
}
