//! `ensureSchema` on SQLite (storage-layout §14.6): the incomplete
//! checkpoint refusal, same-version layout checks, and the schema-version
//! bump (retire tables, DDL, payload rewrites, marker, the migration fence
//! on every existing partition, declarations), all
//! under one write lease so it commits or rolls back as a whole.

use super::conn::{map_err, table_exists};
use super::kept::Conn;
use super::meta;
use super::rows::Projected;
use super::sql;
use crate::core::codec::{self, ColumnType, Value};
use crate::core::error::Result;
use crate::core::migrate::{self, PhysicalColumn, PhysicalIndex};
use crate::core::model::CheckpointDeclaration;
use crate::core::schema::{quote_ident, LayoutColumn, Schema, Table};
use rusqlite::{params, Connection, OptionalExtension, ToSql};

pub fn sqlite_type(ty: ColumnType) -> &'static str {
    match ty {
        ColumnType::String | ColumnType::BlobRef | ColumnType::Json => "TEXT",
        ColumnType::Integer | ColumnType::Boolean => "INTEGER",
        ColumnType::Float => "REAL",
        ColumnType::Bytes | ColumnType::Crdt => "BLOB",
    }
}

/// (name, declared type, not null, pk position) of the meta columns.
const META_COLUMNS: &[(&str, &str, bool, i64)] = &[
    ("_sync_partition", "TEXT", true, 1),
    ("_sync_row_id", "TEXT", true, 2),
    ("_sync_server_version", "INTEGER", true, 0),
    ("_sync_scopes", "TEXT", true, 0),
    ("_sync_payload", "BLOB", true, 0),
    ("_sync_column_versions", "BLOB", false, 0),
];

fn physical_columns(conn: &Connection, table: &str) -> Result<Vec<PhysicalColumn>> {
    let mut st = conn
        .prepare("SELECT name, type, \"notnull\", pk FROM pragma_table_info(?1)")
        .map_err(map_err)?;
    let rows = st
        .query_map([table], |r| {
            Ok(PhysicalColumn {
                name: r.get(0)?,
                ty: r.get(1)?,
                not_null: r.get::<_, i64>(2)? != 0,
                pk: r.get(3)?,
            })
        })
        .map_err(map_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(map_err)
}

pub fn check_incomplete_checkpoints(
    conn: &Conn, version: i64, declared: &[CheckpointDeclaration],
) -> Result<()> {
    migrate::refuse_incomplete(meta::pending_checkpoints(conn, version)?, declared)
}

/// What `ensureSchema` did, for callers and tests.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Unchanged,
    /// Same version; the layout an older in-tree storage wrote was
    /// completed in place (`migrate::Repairs`).
    Repaired,
    Migrated {
        from: Option<i64>,
    },
}

pub fn ensure_schema(
    conn: &Conn, schema: &Schema, declarations: &[CheckpointDeclaration], now_ms: i64,
) -> Result<Outcome> {
    check_incomplete_checkpoints(conn, schema.version, declarations)?;
    conn.execute_batch(sql::schema_meta_ddl())
        .map_err(map_err)?;
    // Left by the open when the file already held row scope entries.
    let built_by_row = ensure_row_scopes_by_row(conn)?;
    match migrate::plan(schema, meta::stored_schema_version(conn)?)? {
        migrate::Plan::Current => {
            let mut repaired = false;
            for t in &schema.tables {
                let repairs = check_physical(conn, t)?;
                repaired |= !repairs.is_empty();
                apply_repairs(conn, t, &repairs)?;
            }
            Ok(if repaired || built_by_row {
                Outcome::Repaired
            } else {
                Outcome::Unchanged
            })
        }
        migrate::Plan::Migrate { from, old } => {
            migrate(conn, schema, &old)?;
            conn.prepare_cached(
                "INSERT INTO sync_schema_meta (id, schema_version, layouts) VALUES (1, ?1, ?2)
                 ON CONFLICT (id) DO UPDATE SET schema_version = excluded.schema_version, layouts = excluded.layouts",
            )
            .and_then(|mut st| st.execute(params![schema.version, schema.layouts]))
            .map_err(map_err)?;
            meta::fence_existing_partitions(conn, schema.version)?;
            for d in declarations {
                meta::declare_checkpoint(conn, d, now_ms)?;
            }
            Ok(Outcome::Migrated { from })
        }
    }
}

/// Builds `sync_row_scopes_by_row` when it is missing (see
/// `sql::row_scopes_by_row_ddl`); true when it did.
fn ensure_row_scopes_by_row(conn: &Connection) -> Result<bool> {
    let present: bool = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?1)",
            [sql::ROW_SCOPES_BY_ROW],
            |r| r.get(0),
        )
        .map_err(map_err)?;
    if present {
        return Ok(false);
    }
    conn.execute_batch(sql::row_scopes_by_row_ddl())
        .map_err(map_err)?;
    Ok(true)
}

fn check_physical(conn: &Connection, t: &Table) -> Result<migrate::Repairs> {
    migrate::check_physical(t, &physical_columns(conn, &t.name)?, META_COLUMNS, |name| {
        physical_index(conn, &t.name, name)
    })
}

/// The columns and uniqueness of the index `name` on `table`, if it exists.
fn physical_index(conn: &Connection, table: &str, name: &str) -> Result<Option<PhysicalIndex>> {
    let unique: Option<i64> = conn
        .prepare_cached("SELECT \"unique\" FROM pragma_index_list(?1) WHERE name = ?2")
        .and_then(|mut st| {
            let mut rows = st.query(params![table, name])?;
            rows.next()?.map(|r| r.get(0)).transpose()
        })
        .map_err(map_err)?;
    let Some(unique) = unique else {
        return Ok(None);
    };
    let mut st = conn
        .prepare_cached("SELECT name FROM pragma_index_info(?1) ORDER BY seqno")
        .map_err(map_err)?;
    let columns = st
        .query_map([name], |r| r.get::<_, Option<String>>(0))
        .map_err(map_err)?
        .map(|c| c.map(Option::unwrap_or_default))
        .collect::<rusqlite::Result<_>>()
        .map_err(map_err)?;
    Ok(Some(PhysicalIndex {
        columns,
        unique: unique != 0,
    }))
}

/// Completes a same-version layout in the open write transaction.
fn apply_repairs(conn: &Connection, t: &Table, repairs: &migrate::Repairs) -> Result<()> {
    if repairs.add_column_versions {
        conn.execute_batch(&format!(
            "ALTER TABLE {} ADD COLUMN \"_sync_column_versions\" BLOB",
            t.quoted
        ))
        .map_err(map_err)?;
    }
    for ix in &repairs.indexes {
        if ix.replace {
            record_replaced(conn, &t.name, &ix.name)?;
            conn.execute_batch(&format!("DROP INDEX IF EXISTS {}", ix.quoted_name))
                .map_err(map_err)?;
        }
        conn.execute_batch(&ix.create).map_err(map_err)?;
    }
    Ok(())
}

/// Records the statement that made index `name` before the repair
/// replaces it (`migrate::REPLACED_INDEXES_DDL`).
fn record_replaced(conn: &Connection, table: &str, name: &str) -> Result<()> {
    let original: Option<String> = conn
        .query_row(
            "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?1",
            [name],
            |r| r.get(0),
        )
        .optional()
        .map_err(map_err)?
        .flatten();
    let Some(original) = original else {
        return Ok(());
    };
    conn.execute_batch(migrate::REPLACED_INDEXES_DDL)
        .map_err(map_err)?;
    conn.execute(
        migrate::RECORD_REPLACED_INDEX,
        params![name, table, original],
    )
    .map_err(map_err)?;
    Ok(())
}

/// `restoreLayout()`: gives every index a repair replaced the form it had
/// (its recorded statement), in the open write transaction, then drops the
/// record; the names restored. Refused, with nothing changed once the
/// caller rolls back, when rows written since violate an original form.
pub fn restore_layout(conn: &Connection) -> Result<Vec<String>> {
    let recorded: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'sync_native_replaced_indexes'",
            [],
            |r| r.get(0),
        )
        .map_err(map_err)?;
    if recorded == 0 {
        return Ok(Vec::new());
    }
    let rows: Vec<(String, String, String)> = {
        let mut st = conn.prepare(migrate::REPLACED_INDEXES).map_err(map_err)?;
        let rows = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .map_err(map_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(map_err)?
    };
    let mut restored = Vec::new();
    for (name, table, original) in rows {
        if physical_columns(conn, &table)?.is_empty() {
            // The table is gone (retired since): nothing to give back.
            continue;
        }
        conn.execute_batch(&format!("DROP INDEX IF EXISTS {}", quote_ident(&name)))
            .map_err(map_err)?;
        if let Err(e) = conn.execute_batch(&original) {
            return Err(match e.sqlite_error_code() {
                Some(rusqlite::ErrorCode::ConstraintViolation) => {
                    migrate::restore_conflict(&name, &table, &original, &e.to_string())
                }
                _ => map_err(e),
            });
        }
        restored.push(name);
    }
    conn.execute_batch(migrate::DROP_REPLACED_INDEXES)
        .map_err(map_err)?;
    Ok(restored)
}

fn migrate(conn: &Connection, schema: &Schema, old: &[(String, Vec<LayoutColumn>)]) -> Result<()> {
    let mut retired: Vec<&str> = old
        .iter()
        .map(|(n, _)| n.as_str())
        .filter(|n| !schema.has_table(n))
        .collect();
    retired.sort_unstable();
    for name in retired {
        conn.execute("DELETE FROM sync_row_scopes WHERE tbl = ?1", [name])
            .map_err(map_err)?;
        conn.execute("DELETE FROM sync_blob_refs WHERE tbl = ?1", [name])
            .map_err(map_err)?;
        conn.execute_batch(&format!("DROP TABLE IF EXISTS {}", quote_ident(name)))
            .map_err(map_err)?;
    }

    struct Plan<'a> {
        table: &'a Table,
        old_defs: Option<Vec<codec::ColumnDef>>,
    }
    let mut plans = Vec::new();
    // Index drops first, then creates, as the in-tree storage orders them.
    for t in &schema.tables {
        if table_exists(conn, &t.name)? {
            drop_managed_indexes(conn, t)?;
        }
    }
    for t in &schema.tables {
        let old_layout = old
            .iter()
            .find(|(n, _)| *n == t.name)
            .map(|(_, c)| c.as_slice());
        if !table_exists(conn, &t.name)? {
            create_table(conn, t)?;
            create_indexes(conn, t)?;
            continue;
        }
        let physical = physical_columns(conn, &t.name)?;
        let change = migrate::table_change(t, old_layout, &physical)?;
        for c in &change.add_columns {
            conn.execute_batch(&format!(
                "ALTER TABLE {} ADD COLUMN {} {}",
                t.quoted,
                quote_ident(&c.name),
                sqlite_type(c.def.ty)
            ))
            .map_err(map_err)?;
        }
        if change.add_column_versions {
            conn.execute_batch(&format!(
                "ALTER TABLE {} ADD COLUMN \"_sync_column_versions\" BLOB",
                t.quoted
            ))
            .map_err(map_err)?;
        }
        create_indexes(conn, t)?;
        if let Some(old_defs) = change.rewrite {
            plans.push(Plan { table: t, old_defs });
        }
    }
    for p in plans {
        rewrite_rows(conn, p.table, p.old_defs.as_deref())?;
    }
    Ok(())
}

/// The row tables' column types on SQLite (also the copy's, `crate::copy`).
pub const ROW_TABLE_TYPES: crate::core::migrate::RowTableTypes =
    crate::core::migrate::RowTableTypes {
        app: sqlite_type,
        version: "INTEGER",
        scopes: "TEXT",
        bytes: "BLOB",
    };

fn create_table(conn: &Connection, t: &Table) -> Result<()> {
    conn.execute_batch(&crate::core::migrate::create_table_sql(t, &ROW_TABLE_TYPES))
        .map_err(map_err)
}

fn drop_managed_indexes(conn: &Connection, t: &Table) -> Result<()> {
    let names: Vec<String> = {
        let mut st = conn
            .prepare("SELECT name FROM pragma_index_list(?1) WHERE origin = 'c'")
            .map_err(map_err)?;
        let rows = st.query_map([&t.name], |r| r.get(0)).map_err(map_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(map_err)?
    };
    for n in names {
        if n.starts_with("sync_ix_") || t.indexes.iter().any(|i| i.name == n) {
            conn.execute_batch(&format!("DROP INDEX IF EXISTS {}", quote_ident(&n)))
                .map_err(map_err)?;
        }
    }
    Ok(())
}

fn create_indexes(conn: &Connection, t: &Table) -> Result<()> {
    for (_, create, _) in migrate::index_ddl(t) {
        conn.execute_batch(&create).map_err(map_err)?;
    }
    Ok(())
}

const REWRITE_BATCH: i64 = 500;

/// Re-encodes payloads written under a shorter layout and, for
/// materialized tables, re-derives the projection, 500 rows at a time.
fn rewrite_rows(conn: &Connection, t: &Table, old_defs: Option<&[codec::ColumnDef]>) -> Result<()> {
    let select = format!(
        "SELECT \"_sync_partition\", \"_sync_row_id\", \"_sync_payload\" FROM {} \
         WHERE ?4 OR (\"_sync_partition\", \"_sync_row_id\") > (?1, ?2) \
         ORDER BY \"_sync_partition\", \"_sync_row_id\" LIMIT ?3",
        t.quoted
    );
    let update = migrate::rewrite_update_sql(t, |n, _| format!("?{n}"));
    let mut after = (String::new(), String::new());
    let mut first = true;
    loop {
        let batch: Vec<(String, String, Vec<u8>)> = {
            let mut st = conn.prepare_cached(&select).map_err(map_err)?;
            let rows = st
                .query_map(params![after.0, after.1, REWRITE_BATCH, first], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })
                .map_err(map_err)?;
            rows.collect::<rusqlite::Result<_>>().map_err(map_err)?
        };
        first = false;
        let n = batch.len() as i64;
        let mut update_st = conn.prepare_cached(&update).map_err(map_err)?;
        for (partition, row_id, payload) in batch {
            let payload = match old_defs {
                Some(old) => codec::reencode_with_added_nulls(old, &t.defs, &payload)?,
                None => payload,
            };
            let values: Vec<Value<'_>> = if t.materialize {
                codec::decode_row(&t.defs, &payload)?
            } else {
                Vec::new()
            };
            let projected: Vec<Projected<'_>> = values.iter().map(Projected).collect();
            let mut binds: Vec<&dyn ToSql> = vec![&partition, &row_id, &payload];
            for p in &projected {
                binds.push(p);
            }
            update_st.execute(&*binds).map_err(map_err)?;
            drop(binds);
            after = (partition, row_id);
        }
        if n < REWRITE_BATCH {
            return Ok(());
        }
    }
}
