//! Partition registry, client records, idempotency records, checkpoints,
//! the writer fence and the serve gate, on PostgreSQL. JSONB columns are
//! bound as text with a cast and read back as text.

use super::error::map_err;
use crate::core::error::{Error, Result};
use crate::core::model::{
    Checkpoint, CheckpointDeclaration, ClientCursor, ClientRecord, RegistryEntry, ServeGate,
};
use crate::core::stored::{self, Form, Shape};
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};

// ---- registry ---------------------------------------------------------------

fn registry_from(r: &PgRow) -> Result<RegistryEntry> {
    Ok(RegistryEntry {
        partition: r.try_get(0).map_err(map_err)?,
        log_epoch: r.try_get(1).map_err(map_err)?,
        epoch_required: r.try_get(2).map_err(map_err)?,
        last_authenticated_at_ms: r.try_get(3).map_err(map_err)?,
    })
}

fn empty_epoch(what: &str) -> Error {
    Error::plain(
        "ERR_SYNCULAR_EMPTY_EPOCH",
        format!("{what} must be non-empty"),
    )
}

pub async fn touch_partition(
    c: &mut PgConnection, partition: &str, at_ms: i64, initial_epoch: &str,
) -> Result<RegistryEntry> {
    if initial_epoch.is_empty() {
        return Err(empty_epoch("initial log epoch"));
    }
    let r = crate::postgres::stmt::query(
        "INSERT INTO sync_partition_registry (partition, log_epoch, epoch_required, last_authenticated_at_ms)
         VALUES ($1, $2, FALSE, $3)
         ON CONFLICT (partition) DO UPDATE SET last_authenticated_at_ms = EXCLUDED.last_authenticated_at_ms
         RETURNING partition, log_epoch, epoch_required, last_authenticated_at_ms",
    )
    .bind(partition)
    .bind(initial_epoch)
    .bind(at_ms)
    .fetch_one(&mut *c)
    .await
    .map_err(map_err)?;
    registry_from(&r)
}

/// Under the partition row lock, as the in-tree storage.
pub async fn rotate_epoch(
    c: &mut PgConnection, partition: &str, epoch: &str, at_ms: i64,
) -> Result<RegistryEntry> {
    if epoch.is_empty() {
        return Err(empty_epoch("log epoch"));
    }
    super::log::lock_partition(c, partition).await?;
    let r = crate::postgres::stmt::query(
        "INSERT INTO sync_partition_registry (partition, log_epoch, epoch_required, last_authenticated_at_ms)
         VALUES ($1, $2, TRUE, $3)
         ON CONFLICT (partition) DO UPDATE SET log_epoch = EXCLUDED.log_epoch, epoch_required = TRUE,
           last_authenticated_at_ms = EXCLUDED.last_authenticated_at_ms
         RETURNING partition, log_epoch, epoch_required, last_authenticated_at_ms",
    )
    .bind(partition)
    .bind(epoch)
    .bind(at_ms)
    .fetch_one(&mut *c)
    .await
    .map_err(map_err)?;
    crate::postgres::stmt::query("DELETE FROM sync_clients WHERE partition = $1")
        .bind(partition)
        .execute(&mut *c)
        .await
        .map_err(map_err)?;
    registry_from(&r)
}

pub async fn list_registry(c: &mut PgConnection) -> Result<Vec<RegistryEntry>> {
    let rows = crate::postgres::stmt::query(
        "SELECT partition, log_epoch, epoch_required, last_authenticated_at_ms
         FROM sync_partition_registry ORDER BY partition",
    )
    .fetch_all(&mut *c)
    .await
    .map_err(map_err)?;
    rows.iter().map(registry_from).collect()
}

pub async fn log_epoch(c: &mut PgConnection, partition: &str) -> Result<Option<String>> {
    crate::postgres::stmt::query_scalar(
        "SELECT log_epoch FROM sync_partition_registry WHERE partition = $1",
    )
    .bind(partition)
    .fetch_optional(&mut *c)
    .await
    .map_err(map_err)
}

// ---- push results -----------------------------------------------------------

/// The stored result's JSON text, the Bun.SQL string form unwrapped; what
/// the host cannot read is its `sync.idempotency_cache_miss`, as in-tree.
pub async fn get_push_result(
    c: &mut PgConnection, partition: &str, client_id: &str, commit_id: &str,
) -> Result<Option<String>> {
    let text: Option<String> = crate::postgres::stmt::query_scalar(
        "SELECT result::text FROM sync_push_results WHERE partition = $1 AND client_id = $2 AND client_commit_id = $3",
    )
    .bind(partition)
    .bind(client_id)
    .bind(commit_id)
    .fetch_optional(&mut *c)
    .await
    .map_err(map_err)?;
    Ok(text.and_then(|t| stored::read(Form::Jsonb, t, Shape::Any)))
}

/// First writer wins.
pub async fn put_push_result(
    c: &mut PgConnection, partition: &str, client_id: &str, commit_id: &str, json: &str,
) -> Result<()> {
    crate::postgres::stmt::query(
        "INSERT INTO sync_push_results (partition, client_id, client_commit_id, result)
         VALUES ($1, $2, $3, $4::text::jsonb) ON CONFLICT DO NOTHING",
    )
    .bind(partition)
    .bind(client_id)
    .bind(commit_id)
    .bind(json)
    .execute(&mut *c)
    .await
    .map_err(map_err)?;
    Ok(())
}

// ---- clients ----------------------------------------------------------------

/// A client record, its subscriptions in either JSONB form.
fn client_from(r: &PgRow, partition: &str) -> Result<ClientRecord> {
    let raw = ClientRecord {
        client_id: r.try_get(0).map_err(map_err)?,
        actor_id: r.try_get(1).map_err(map_err)?,
        wire_version: i64::from(r.try_get::<i32, _>(2).map_err(map_err)?),
        cursor: r.try_get(3).map_err(map_err)?,
        updated_at_ms: r.try_get(4).map_err(map_err)?,
        subscriptions_json: r.try_get(5).map_err(map_err)?,
    };
    stored::client(Form::Jsonb, raw, partition)
}

pub async fn get_client(
    c: &mut PgConnection, partition: &str, client_id: &str,
) -> Result<Option<ClientRecord>> {
    let r = crate::postgres::stmt::query(
        "SELECT client_id, actor_id, wire_version, cursor, updated_at_ms, subscriptions::text
         FROM sync_clients WHERE partition = $1 AND client_id = $2",
    )
    .bind(partition)
    .bind(client_id)
    .fetch_optional(&mut *c)
    .await
    .map_err(map_err)?;
    r.as_ref().map(|r| client_from(r, partition)).transpose()
}

pub async fn list_clients(c: &mut PgConnection, partition: &str) -> Result<Vec<ClientRecord>> {
    let rows = crate::postgres::stmt::query(
        "SELECT client_id, actor_id, wire_version, cursor, updated_at_ms, subscriptions::text
         FROM sync_clients WHERE partition = $1 ORDER BY updated_at_ms DESC",
    )
    .bind(partition)
    .fetch_all(&mut *c)
    .await
    .map_err(map_err)?;
    rows.iter().map(|r| client_from(r, partition)).collect()
}

pub async fn put_client(c: &mut PgConnection, partition: &str, r: &ClientRecord) -> Result<()> {
    let wire =
        i32::try_from(r.wire_version).map_err(|_| Error::invalid("wireVersion out of range"))?;
    crate::postgres::stmt::query(
        "INSERT INTO sync_clients (partition, client_id, actor_id, wire_version, cursor, subscriptions, updated_at_ms)
         VALUES ($1, $2, $3, $4, $5, $6::text::jsonb, $7)
         ON CONFLICT (partition, client_id) DO UPDATE SET actor_id = EXCLUDED.actor_id,
           wire_version = EXCLUDED.wire_version, cursor = EXCLUDED.cursor,
           subscriptions = EXCLUDED.subscriptions, updated_at_ms = EXCLUDED.updated_at_ms",
    )
    .bind(partition)
    .bind(&r.client_id)
    .bind(&r.actor_id)
    .bind(wire)
    .bind(r.cursor)
    .bind(&r.subscriptions_json)
    .bind(r.updated_at_ms)
    .execute(&mut *c)
    .await
    .map_err(map_err)?;
    Ok(())
}

pub async fn list_cursors(c: &mut PgConnection, partition: &str) -> Result<Vec<ClientCursor>> {
    let rows = crate::postgres::stmt::query(
        "SELECT client_id, cursor, updated_at_ms FROM sync_clients WHERE partition = $1 ORDER BY client_id",
    )
    .bind(partition)
    .fetch_all(&mut *c)
    .await
    .map_err(map_err)?;
    rows.iter()
        .map(|r| {
            Ok(ClientCursor {
                client_id: r.try_get(0).map_err(map_err)?,
                cursor: r.try_get(1).map_err(map_err)?,
                updated_at_ms: r.try_get(2).map_err(map_err)?,
            })
        })
        .collect()
}

pub async fn advance_cursor(
    c: &mut PgConnection, partition: &str, client_id: &str, guard: Option<(&str, &str)>,
    cursor: i64, at_ms: i64,
) -> Result<()> {
    match guard {
        Some((actor_id, epoch)) => crate::postgres::stmt::query(
            "UPDATE sync_clients SET cursor = GREATEST(cursor, $3), updated_at_ms = GREATEST(updated_at_ms, $4)
             WHERE partition = $1 AND client_id = $2 AND actor_id = $5
               AND EXISTS (SELECT 1 FROM sync_partition_registry r WHERE r.partition = $1 AND r.log_epoch = $6)",
        )
        .bind(partition)
        .bind(client_id)
        .bind(cursor)
        .bind(at_ms)
        .bind(actor_id)
        .bind(epoch)
        .execute(&mut *c)
        .await,
        None => crate::postgres::stmt::query(
            "UPDATE sync_clients SET cursor = GREATEST(cursor, $3), updated_at_ms = GREATEST(updated_at_ms, $4)
             WHERE partition = $1 AND client_id = $2",
        )
        .bind(partition)
        .bind(client_id)
        .bind(cursor)
        .bind(at_ms)
        .execute(&mut *c)
        .await,
    }
    .map_err(map_err)?;
    Ok(())
}

pub async fn active_cursor_floor(
    c: &mut PgConnection, partition: &str, cutoff_ms: i64,
) -> Result<Option<i64>> {
    crate::postgres::stmt::query_scalar(
        "SELECT min(cursor) FROM sync_clients WHERE partition = $1 AND updated_at_ms >= $2",
    )
    .bind(partition)
    .bind(cutoff_ms)
    .fetch_one(&mut *c)
    .await
    .map_err(map_err)
}

// ---- checkpoints, fence, gate -------------------------------------------------

const CHECKPOINT_FIELDS: &str =
    "partition, name, schema_version, state, watermark, owner_epoch, observed_rows, updated_at_ms";

/// A checkpoint row, its columns in [`CHECKPOINT_FIELDS`] order.
pub(super) fn checkpoint_from(r: &PgRow) -> Result<Checkpoint> {
    Ok(Checkpoint {
        partition: r.try_get(0).map_err(map_err)?,
        name: r.try_get(1).map_err(map_err)?,
        schema_version: i64::from(r.try_get::<i32, _>(2).map_err(map_err)?),
        state: r.try_get(3).map_err(map_err)?,
        watermark: r.try_get(4).map_err(map_err)?,
        owner_epoch: r.try_get(5).map_err(map_err)?,
        observed_rows: r.try_get(6).map_err(map_err)?,
        updated_at_ms: r.try_get(7).map_err(map_err)?,
    })
}

pub async fn read_checkpoints(c: &mut PgConnection, partition: &str) -> Result<Vec<Checkpoint>> {
    let rows = crate::postgres::stmt::query(sqlx::AssertSqlSafe(format!(
        "SELECT {CHECKPOINT_FIELDS} FROM sync_backfill_checkpoints WHERE partition = $1 ORDER BY name"
    )))
    .bind(partition)
    .fetch_all(&mut *c)
    .await
    .map_err(map_err)?;
    rows.iter().map(checkpoint_from).collect()
}

/// A schema version as its `INTEGER` column binds it.
pub(super) fn version_i32(v: i64) -> Result<i32> {
    i32::try_from(v).map_err(|_| Error::invalid("schemaVersion out of range"))
}

/// The migration fence (0.30.4): raises the writer fence of every partition
/// in `sync_partitions` to `version`, never lowering one, inside the
/// schema-bump transaction.
pub async fn fence_existing_partitions(c: &mut PgConnection, version: i64) -> Result<()> {
    crate::postgres::stmt::query(super::sql::FENCE_EXISTING_PARTITIONS)
        .bind(version_i32(version)?)
        .execute(&mut *c)
        .await
        .map_err(map_err)?;
    Ok(())
}

/// Inserts a `declared` row when absent and raises the writer fence.
pub async fn declare_checkpoint(
    c: &mut PgConnection, d: &CheckpointDeclaration, now_ms: i64,
) -> Result<Checkpoint> {
    let v = version_i32(d.schema_version)?;
    crate::postgres::stmt::query(
        "INSERT INTO sync_backfill_checkpoints (partition, name, schema_version, state, watermark, owner_epoch, observed_rows, updated_at_ms)
         VALUES ($1, $2, $3, 'declared', 0, 0, 0, $4) ON CONFLICT (partition, name) DO NOTHING",
    )
    .bind(&d.partition)
    .bind(&d.name)
    .bind(v)
    .bind(now_ms)
    .execute(&mut *c)
    .await
    .map_err(map_err)?;
    crate::postgres::stmt::query(
        "INSERT INTO sync_writer_fence (partition, required_writer_version) VALUES ($1, $2)
         ON CONFLICT (partition) DO UPDATE SET required_writer_version =
           GREATEST(sync_writer_fence.required_writer_version, EXCLUDED.required_writer_version)",
    )
    .bind(&d.partition)
    .bind(v)
    .execute(&mut *c)
    .await
    .map_err(map_err)?;
    let r = crate::postgres::stmt::query(sqlx::AssertSqlSafe(format!(
        "SELECT {CHECKPOINT_FIELDS} FROM sync_backfill_checkpoints WHERE partition = $1 AND name = $2"
    )))
    .bind(&d.partition)
    .bind(&d.name)
    .fetch_optional(&mut *c)
    .await
    .map_err(map_err)?
    .ok_or_else(|| Error::query("sync.storage.checkpoint_not_declared"))?;
    checkpoint_from(&r)
}

/// Every incomplete checkpoint at `version`, across partitions.
pub async fn pending_checkpoints(
    c: &mut PgConnection, version: i64,
) -> Result<Vec<(String, String)>> {
    let Ok(v) = i32::try_from(version) else {
        return Ok(Vec::new());
    };
    let rows = crate::postgres::stmt::query(
        "SELECT partition, name FROM sync_backfill_checkpoints WHERE schema_version = $1 AND state <> 'activated'",
    )
    .bind(v)
    .fetch_all(&mut *c)
    .await
    .map_err(map_err)?;
    rows.iter()
        .map(|r| {
            Ok((
                r.try_get(0).map_err(map_err)?,
                r.try_get(1).map_err(map_err)?,
            ))
        })
        .collect()
}

pub async fn stored_schema_version(c: &mut PgConnection) -> Result<Option<(i64, String)>> {
    let r = crate::postgres::stmt::query(
        "SELECT schema_version, layouts FROM sync_schema_meta WHERE id = 1",
    )
    .fetch_optional(&mut *c)
    .await
    .map_err(map_err)?;
    r.map(|r| {
        Ok((
            r.try_get(0).map_err(map_err)?,
            r.try_get(1).map_err(map_err)?,
        ))
    })
    .transpose()
}

pub async fn read_serve_gate(
    c: &mut PgConnection, partition: &str, running: i64,
) -> Result<ServeGate> {
    let running = i32::try_from(running).unwrap_or(i32::MAX);
    let rows = crate::postgres::stmt::query(super::sql::SERVE_GATE)
        .bind(partition)
        .bind(running)
        .fetch_all(&mut *c)
        .await
        .map_err(map_err)?;
    serve_gate_of(&rows)
}

/// [`sql::SERVE_GATE`](super::sql::SERVE_GATE) written out for a
/// simple-protocol batch: the partition as the literal `p`, the running
/// version clamped as [`read_serve_gate`] binds it.
pub fn serve_gate_sql(p: &str, running: i64) -> String {
    let running = i32::try_from(running).unwrap_or(i32::MAX);
    // $2 first: the literal put in for $1 may itself hold "$2".
    super::sql::SERVE_GATE
        .replacen("$2", &running.to_string(), 1)
        .replacen("$1", p, 1)
}

/// The serve gate from [`sql::SERVE_GATE`](super::sql::SERVE_GATE)'s rows
/// (binary or text).
pub fn serve_gate_of(rows: &[sqlx::postgres::PgRow]) -> Result<ServeGate> {
    let mut gate = ServeGate {
        stored_schema_version: 0,
        log_epoch: None,
        pending: Vec::new(),
    };
    for r in rows {
        let a: Option<String> = r.try_get(1).map_err(map_err)?;
        let b: Option<String> = r.try_get(2).map_err(map_err)?;
        if r.try_get::<i32, _>(0).map_err(map_err)? == 0 {
            gate.stored_schema_version = a.and_then(|s| s.parse().ok()).unwrap_or(0);
            gate.log_epoch = b;
        } else {
            gate.pending
                .push((a.unwrap_or_default(), b.unwrap_or_default()));
        }
    }
    Ok(gate)
}

pub async fn writer_fence_allows(
    c: &mut PgConnection, partition: &str, version: i64,
) -> Result<bool> {
    let required: Option<i32> = crate::postgres::stmt::query_scalar(
        "SELECT required_writer_version FROM sync_writer_fence WHERE partition = $1",
    )
    .bind(partition)
    .fetch_optional(&mut *c)
    .await
    .map_err(map_err)?;
    Ok(required.is_none_or(|r| version >= i64::from(r)))
}
