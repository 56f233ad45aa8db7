//! `ensureSchema` on PostgreSQL (storage-layout §14.6), with the checks and
//! the append-only rule of `crate::core::migrate`: one storage-level transaction,
//! so the bump commits or rolls back as a whole. A bump first takes
//! `LOCK TABLE sync_partitions IN EXCLUSIVE MODE`, as the in-tree storage.

use super::error::map_err;
use super::meta;
use super::rows::{bind_value, pg_type};
use crate::core::codec::{self};
use crate::core::error::Result;
use crate::core::migrate::{self, PhysicalColumn, PhysicalIndex};
use crate::core::model::CheckpointDeclaration;
use crate::core::schema::{quote_ident, LayoutColumn, Schema, Table};
use sqlx::{AssertSqlSafe, Executor, PgConnection, Row};

/// (name, type as `format_type` prints it, not null, pk position).
const META_COLUMNS: &[(&str, &str, bool, i64)] = &[
    ("_sync_partition", "text", true, 1),
    ("_sync_row_id", "text", true, 2),
    ("_sync_server_version", "bigint", true, 0),
    ("_sync_scopes", "jsonb", true, 0),
    ("_sync_payload", "bytea", true, 0),
    ("_sync_column_versions", "bytea", false, 0),
];

async fn physical_columns(c: &mut PgConnection, table: &str) -> Result<Vec<PhysicalColumn>> {
    let rows = crate::postgres::stmt::query(
        "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), a.attnotnull,
                coalesce((SELECT k.n FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k(att, n) WHERE k.att = a.attnum), 0)::bigint
         FROM pg_attribute a
         JOIN pg_class t ON t.oid = a.attrelid
         JOIN pg_namespace n ON n.oid = t.relnamespace
         LEFT JOIN pg_index i ON i.indrelid = t.oid AND i.indisprimary
         WHERE n.nspname = current_schema() AND t.relname = $1 AND t.relkind = 'r'
           AND a.attnum > 0 AND NOT a.attisdropped
         ORDER BY a.attnum",
    )
    .bind(table)
    .fetch_all(&mut *c)
    .await
    .map_err(map_err)?;
    rows.iter()
        .map(|r| {
            Ok(PhysicalColumn {
                name: r.try_get(0).map_err(map_err)?,
                ty: r.try_get(1).map_err(map_err)?,
                not_null: r.try_get(2).map_err(map_err)?,
                pk: r.try_get(3).map_err(map_err)?,
            })
        })
        .collect()
}

async fn check_physical(c: &mut PgConnection, t: &Table) -> Result<migrate::Repairs> {
    let cols = physical_columns(c, &t.name).await?;
    let mut indexes = Vec::new();
    for (physical, _, _) in migrate::index_ddl(t) {
        indexes.push((
            physical.clone(),
            physical_index(c, &t.name, &physical).await?,
        ));
    }
    migrate::check_physical(t, &cols, META_COLUMNS, |name| {
        Ok(indexes
            .iter_mut()
            .find(|(n, _)| n == name)
            .and_then(|(_, ix)| ix.take()))
    })
}

/// The columns and uniqueness of the index `name` on `table` in the
/// storage's schema, if it exists.
async fn physical_index(
    c: &mut PgConnection, table: &str, name: &str,
) -> Result<Option<PhysicalIndex>> {
    let row = crate::postgres::stmt::query(
        "SELECT i.indisunique,
                array(SELECT coalesce(a.attname::text, '')
                      FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k(att, n)
                      LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.att
                      ORDER BY k.n)
         FROM pg_index i
         JOIN pg_class ic ON ic.oid = i.indexrelid
         JOIN pg_class tc ON tc.oid = i.indrelid
         JOIN pg_namespace n ON n.oid = tc.relnamespace
         WHERE n.nspname = current_schema() AND tc.relname = $1 AND ic.relname = $2",
    )
    .bind(table)
    .bind(name)
    .fetch_optional(&mut *c)
    .await
    .map_err(map_err)?;
    row.map(|r| {
        Ok(PhysicalIndex {
            unique: r.try_get(0).map_err(map_err)?,
            columns: r.try_get(1).map_err(map_err)?,
        })
    })
    .transpose()
}

/// Completes a same-version layout inside the open transaction.
async fn apply_repairs(c: &mut PgConnection, t: &Table, repairs: &migrate::Repairs) -> Result<()> {
    if repairs.add_column_versions {
        run(
            c,
            format!(
                "ALTER TABLE {} ADD COLUMN IF NOT EXISTS \"_sync_column_versions\" BYTEA",
                t.quoted
            ),
        )
        .await?;
    }
    for ix in &repairs.indexes {
        if ix.replace {
            record_replaced(c, &t.name, &ix.name).await?;
            run(c, format!("DROP INDEX IF EXISTS {}", ix.quoted_name)).await?;
        }
        run(c, ix.create.clone()).await?;
    }
    Ok(())
}

/// Records the statement that made index `name` before the repair
/// replaces it (`migrate::REPLACED_INDEXES_DDL`).
async fn record_replaced(c: &mut PgConnection, table: &str, name: &str) -> Result<()> {
    let original: Option<String> = crate::postgres::stmt::query_scalar(
        "SELECT pg_get_indexdef(i.oid) FROM pg_class i JOIN pg_namespace n ON n.oid = i.relnamespace
         WHERE n.nspname = current_schema() AND i.relname = $1 AND i.relkind = 'i'",
    )
    .bind(name)
    .fetch_optional(&mut *c)
    .await
    .map_err(map_err)?;
    let Some(original) = original else {
        return Ok(());
    };
    run(c, migrate::REPLACED_INDEXES_DDL.to_owned()).await?;
    crate::postgres::stmt::query(migrate::RECORD_REPLACED_INDEX)
        .bind(name)
        .bind(table)
        .bind(original)
        .execute(&mut *c)
        .await
        .map_err(map_err)?;
    Ok(())
}

/// `restoreLayout()`: gives every index a repair replaced the form it had
/// (its recorded statement), in the open transaction, then drops the
/// record; the names restored. Refused, and rolled back by the caller,
/// when rows written since violate an original form.
pub async fn restore_layout(c: &mut PgConnection) -> Result<Vec<String>> {
    if !table_exists(c, "sync_native_replaced_indexes").await? {
        return Ok(Vec::new());
    }
    let rows: Vec<(String, String, String)> =
        crate::postgres::stmt::query(migrate::REPLACED_INDEXES)
            .fetch_all(&mut *c)
            .await
            .map_err(map_err)?
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
            .collect::<std::result::Result<_, sqlx::Error>>()
            .map_err(map_err)?;
    let mut restored = Vec::new();
    for (name, table, original) in rows {
        if !table_exists(c, &table).await? {
            continue;
        }
        run(c, format!("DROP INDEX IF EXISTS {}", quote_ident(&name))).await?;
        if let Err(e) = c.execute(AssertSqlSafe(original.clone())).await {
            let unique =
                matches!(&e, sqlx::Error::Database(d) if d.code().as_deref() == Some("23505"));
            return Err(if unique {
                migrate::restore_conflict(&name, &table, &original, &e.to_string())
            } else {
                map_err(e)
            });
        }
        restored.push(name);
    }
    run(c, migrate::DROP_REPLACED_INDEXES.to_owned()).await?;
    Ok(restored)
}

async fn table_exists(c: &mut PgConnection, table: &str) -> Result<bool> {
    let n: i64 = crate::postgres::stmt::query_scalar(
        "SELECT count(*) FROM pg_class t JOIN pg_namespace n ON n.oid = t.relnamespace
         WHERE n.nspname = current_schema() AND t.relname = $1 AND t.relkind = 'r'",
    )
    .bind(table)
    .fetch_one(&mut *c)
    .await
    .map_err(map_err)?;
    Ok(n > 0)
}

async fn run(c: &mut PgConnection, sql: String) -> Result<()> {
    c.execute(AssertSqlSafe(sql)).await.map_err(map_err)?;
    Ok(())
}

pub async fn ensure_schema(
    c: &mut PgConnection, schema: &Schema, declarations: &[CheckpointDeclaration], now_ms: i64,
) -> Result<bool> {
    migrate::refuse_incomplete(
        meta::pending_checkpoints(c, schema.version).await?,
        declarations,
    )?;
    let mut stored = meta::stored_schema_version(c).await?;
    if stored.as_ref().is_none_or(|(v, _)| *v < schema.version) {
        c.execute("LOCK TABLE sync_partitions IN EXCLUSIVE MODE")
            .await
            .map_err(map_err)?;
        stored = meta::stored_schema_version(c).await?;
    }
    match migrate::plan(schema, stored)? {
        migrate::Plan::Current => {
            let mut locked = false;
            for t in &schema.tables {
                let mut repairs = check_physical(c, t).await?;
                if !repairs.is_empty() && !locked {
                    // Another process may be completing the same layout:
                    // serialize as a bump does, then look again.
                    c.execute("LOCK TABLE sync_partitions IN EXCLUSIVE MODE")
                        .await
                        .map_err(map_err)?;
                    locked = true;
                    repairs = check_physical(c, t).await?;
                }
                apply_repairs(c, t, &repairs).await?;
            }
            Ok(false)
        }
        migrate::Plan::Migrate { old, .. } => {
            migrate_tables(c, schema, &old).await?;
            crate::postgres::stmt::query(
                "INSERT INTO sync_schema_meta (id, schema_version, layouts) VALUES (1, $1, $2)
                 ON CONFLICT (id) DO UPDATE SET schema_version = EXCLUDED.schema_version, layouts = EXCLUDED.layouts",
            )
            .bind(schema.version)
            .bind(&schema.layouts)
            .execute(&mut *c)
            .await
            .map_err(map_err)?;
            meta::fence_existing_partitions(c, schema.version).await?;
            for d in declarations {
                meta::declare_checkpoint(c, d, now_ms).await?;
            }
            Ok(true)
        }
    }
}

async fn migrate_tables(
    c: &mut PgConnection, schema: &Schema, old: &[(String, Vec<LayoutColumn>)],
) -> Result<()> {
    let mut retired: Vec<&str> = old
        .iter()
        .map(|(n, _)| n.as_str())
        .filter(|n| !schema.has_table(n))
        .collect();
    retired.sort_unstable();
    for name in retired {
        for stmt in [
            "DELETE FROM sync_row_scopes WHERE tbl = $1",
            "DELETE FROM sync_blob_refs WHERE tbl = $1",
        ] {
            crate::postgres::stmt::query(stmt)
                .bind(name)
                .execute(&mut *c)
                .await
                .map_err(map_err)?;
        }
        // CASCADE: the registered-query views other sessions of this
        // storage hold on the table (temporary, `pg_temp_N`) go with it;
        // a session that still needs a view recreates it.
        run(
            c,
            format!("DROP TABLE IF EXISTS {} CASCADE", quote_ident(name)),
        )
        .await?;
    }
    // Index drops first, then creates, as the in-tree storage orders them.
    for t in &schema.tables {
        if table_exists(c, &t.name).await? {
            drop_managed_indexes(c, t).await?;
        }
    }
    let mut plans: Vec<(&Table, Option<Vec<codec::ColumnDef>>)> = Vec::new();
    for t in &schema.tables {
        let old_layout = old
            .iter()
            .find(|(n, _)| *n == t.name)
            .map(|(_, cols)| cols.as_slice());
        if !table_exists(c, &t.name).await? {
            create_table(c, t).await?;
            create_indexes(c, t).await?;
            continue;
        }
        let physical = physical_columns(c, &t.name).await?;
        let change = migrate::table_change(t, old_layout, &physical)?;
        for col in &change.add_columns {
            run(
                c,
                format!(
                    "ALTER TABLE {} ADD COLUMN {} {}",
                    t.quoted,
                    quote_ident(&col.name),
                    pg_type(col.def.ty)
                ),
            )
            .await?;
        }
        if change.add_column_versions {
            run(
                c,
                format!(
                    "ALTER TABLE {} ADD COLUMN \"_sync_column_versions\" BYTEA",
                    t.quoted
                ),
            )
            .await?;
        }
        create_indexes(c, t).await?;
        if let Some(old_defs) = change.rewrite {
            plans.push((t, old_defs));
        }
    }
    for (t, old_defs) in plans {
        rewrite_rows(c, t, old_defs.as_deref()).await?;
    }
    Ok(())
}

const ROW_TABLE_TYPES: crate::core::migrate::RowTableTypes = crate::core::migrate::RowTableTypes {
    app: pg_type,
    version: "BIGINT",
    scopes: "JSONB",
    bytes: "BYTEA",
};

async fn create_table(c: &mut PgConnection, t: &Table) -> Result<()> {
    run(
        c,
        crate::core::migrate::create_table_sql(t, &ROW_TABLE_TYPES),
    )
    .await
}

async fn drop_managed_indexes(c: &mut PgConnection, t: &Table) -> Result<()> {
    let names: Vec<String> = crate::postgres::stmt::query_scalar(
        "SELECT ic.relname::text FROM pg_index i
         JOIN pg_class ic ON ic.oid = i.indexrelid
         JOIN pg_class tc ON tc.oid = i.indrelid
         JOIN pg_namespace n ON n.oid = tc.relnamespace
         WHERE n.nspname = current_schema() AND tc.relname = $1 AND NOT i.indisprimary
           AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)",
    )
    .bind(&t.name)
    .fetch_all(&mut *c)
    .await
    .map_err(map_err)?;
    for n in names {
        if n.starts_with("sync_ix_") || t.indexes.iter().any(|i| i.name == n) {
            run(c, format!("DROP INDEX IF EXISTS {}", quote_ident(&n))).await?;
        }
    }
    Ok(())
}

async fn create_indexes(c: &mut PgConnection, t: &Table) -> Result<()> {
    for (_, create, _) in migrate::index_ddl(t) {
        run(c, create).await?;
    }
    Ok(())
}

const REWRITE_BATCH: i64 = 500;

/// Re-encodes payloads written under a shorter layout and re-derives the
/// projection, 500 rows at a time.
async fn rewrite_rows(
    c: &mut PgConnection, t: &Table, old_defs: Option<&[codec::ColumnDef]>,
) -> Result<()> {
    let select = format!(
        "SELECT \"_sync_partition\", \"_sync_row_id\", \"_sync_payload\" FROM {} \
         WHERE $4 OR (\"_sync_partition\", \"_sync_row_id\") > ($1, $2) \
         ORDER BY \"_sync_partition\", \"_sync_row_id\" LIMIT $3",
        t.quoted
    );
    let update = migrate::rewrite_update_sql(t, super::rows::param);
    let mut after = (String::new(), String::new());
    let mut first = true;
    loop {
        let batch = crate::postgres::stmt::query(AssertSqlSafe(select.clone()))
            .bind(&after.0)
            .bind(&after.1)
            .bind(REWRITE_BATCH)
            .bind(first)
            .fetch_all(&mut *c)
            .await
            .map_err(map_err)?;
        first = false;
        let n = batch.len() as i64;
        for r in &batch {
            let partition: String = r.try_get(0).map_err(map_err)?;
            let row_id: String = r.try_get(1).map_err(map_err)?;
            let payload: Vec<u8> = r.try_get(2).map_err(map_err)?;
            let payload = match old_defs {
                Some(old) => codec::reencode_with_added_nulls(old, &t.defs, &payload)?,
                None => payload,
            };
            let values = if t.materialize {
                codec::decode_row(&t.defs, &payload)?
            } else {
                Vec::new()
            };
            let mut q = crate::postgres::stmt::query(AssertSqlSafe(update.clone()))
                .bind(&partition)
                .bind(&row_id)
                .bind(payload.clone());
            for (col, v) in t.columns.iter().zip(&values) {
                q = bind_value(q, col.def.ty, v);
            }
            q.execute(&mut *c).await.map_err(map_err)?;
            after = (partition, row_id);
        }
        if n < REWRITE_BATCH {
            return Ok(());
        }
    }
}
