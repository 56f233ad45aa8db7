//! The PostgreSQL side of the copy into SQLite (docs/copy.md, "PostgreSQL
//! → SQLite"): a connection of the copy's own in one `REPEATABLE READ READ
//! ONLY` transaction, which is the snapshot every read runs in, and what
//! the source holds, from its catalog: meta tables, row tables with each
//! column's type, the declared indexes. No host schema is needed.

use super::catalog::{Column, Table};
use super::tables::{Kind, ROW_LEAD, ROW_TAIL};
use super::target::pg;
use crate::core::codec::{ColumnDef, ColumnType};
use crate::core::error::{Error, Result};
use crate::core::meta_layout::{SCHEMA_META, TABLES};
use crate::core::schema::{self, parse_layouts, quote_ident, Index};
use crate::postgres::Config;
use sqlx::postgres::PgConnectOptions;
use sqlx::{AssertSqlSafe, Connection, Executor, PgConnection, Row as _};
use std::str::FromStr;

/// A row table of the source: the copy's view of it, and the table as
/// the SQLite engine's DDL takes it (`core::schema::Table`).
#[derive(Debug, Clone)]
pub struct RowTable {
    pub table: Table,
    pub schema: schema::Table,
    /// Each column's SQLite declared type and NOT NULL, in the source's
    /// order (`_sync_column_versions` added when the source lacks it).
    pub physical: Vec<(String, &'static str, bool)>,
    /// Indexes of the source not copied (an operator's, partial, or over
    /// an expression).
    pub skipped_indexes: Vec<String>,
}

/// What the source holds.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Meta tables, `sync_schema_meta` last.
    pub meta: Vec<Table>,
    pub rows: Vec<RowTable>,
    /// Tables named `sync_…` that are not ours (upstream's own stores,
    /// `sync_native_*` bookkeeping): not copied.
    pub not_copied: Vec<String>,
}

impl Plan {
    /// Every table the copy moves, in order: meta tables, then row tables.
    pub fn tables(&self) -> impl Iterator<Item = &Table> {
        self.meta.iter().chain(self.rows.iter().map(|r| &r.table))
    }
}

/// `ERR_SYNCULAR_COPY_SOURCE`.
pub fn source_error(message: impl Into<String>) -> Error {
    Error::plain("ERR_SYNCULAR_COPY_SOURCE", message)
}

/// Connects and opens the snapshot: one `REPEATABLE READ READ ONLY`
/// transaction, its search path on the storage's schema (`SET LOCAL`, so
/// a transaction pooler in between keeps it).
pub async fn open(cfg: &Config) -> Result<PgConnection> {
    let opts = PgConnectOptions::from_str(&cfg.url)
        .map_err(pg)?
        .application_name("syncular-native-storage copy");
    let mut c = PgConnection::connect_with(&opts).await.map_err(pg)?;
    c.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .await
        .map_err(pg)?;
    if let Some(s) = &cfg.schema {
        c.execute(AssertSqlSafe(format!(
            "SET LOCAL search_path TO {}",
            quote_ident(s)
        )))
        .await
        .map_err(pg)?;
    }
    Ok(c)
}

/// (name, type name, not null) of each live column of `table`, in order.
async fn columns(c: &mut PgConnection, table: &str) -> Result<Vec<(String, String, bool)>> {
    let rows = sqlx::query(
        "SELECT a.attname::text, t.typname::text, a.attnotnull FROM pg_attribute a \
         JOIN pg_type t ON t.oid = a.atttypid \
         WHERE a.attrelid = (SELECT k.oid FROM pg_class k JOIN pg_namespace n ON n.oid = k.relnamespace \
           WHERE n.nspname = current_schema() AND k.relname = $1) \
         AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
    )
    .bind(table)
    .fetch_all(&mut *c)
    .await
    .map_err(pg)?;
    rows.iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
        .collect::<std::result::Result<_, sqlx::Error>>()
        .map_err(pg)
}

/// The copy's kind of a column of PostgreSQL type `typname`.
fn kind_of_pg(typname: &str, meta: bool) -> Kind {
    match typname {
        "int8" => Kind::Int8,
        "int4" => Kind::Int4,
        "int2" => Kind::Int2,
        "bool" => Kind::Bool,
        "float8" | "float4" | "numeric" => Kind::Float8,
        "jsonb" | "json" if meta => Kind::Json,
        "jsonb" | "json" => Kind::JsonOrNull,
        "bytea" => Kind::Bytea,
        _ => Kind::Text,
    }
}

/// The schema type of an app column the layout marker does not list.
fn schema_type_of_pg(typname: &str) -> ColumnType {
    match kind_of_pg(typname, false) {
        Kind::Int8 | Kind::Int4 | Kind::Int2 => ColumnType::Integer,
        Kind::Bool => ColumnType::Boolean,
        Kind::Float8 => ColumnType::Float,
        Kind::Json | Kind::JsonOrNull => ColumnType::Json,
        Kind::Bytea => ColumnType::Bytes,
        Kind::Text => ColumnType::String,
    }
}

/// Reads what the source holds. Refuses (`ERR_SYNCULAR_COPY_SOURCE`) a
/// schema without the meta tables: the wrong schema, or not a storage's.
pub async fn plan(c: &mut PgConnection) -> Result<Plan> {
    let here: Option<String> = sqlx::query_scalar("SELECT current_schema()::text")
        .fetch_one(&mut *c)
        .await
        .map_err(pg)?;
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT k.relname::text FROM pg_class k JOIN pg_namespace n ON n.oid = k.relnamespace \
         WHERE n.nspname = current_schema() AND k.relkind IN ('r', 'p') AND NOT k.relispartition \
         ORDER BY k.relname COLLATE \"C\"",
    )
    .fetch_all(&mut *c)
    .await
    .map_err(pg)?;
    if !names.iter().any(|n| n == "sync_commits") {
        return Err(source_error(format!(
            "the source holds no sync data: no sync_commits table in schema {} (name the storage's schema with --schema, or the schema option)",
            here.as_deref().map_or("(none: the search path names no existing schema)".to_owned(), |s| format!("{s:?}"))
        )));
    }
    let mut meta = Vec::new();
    let mut ordered: Vec<_> = TABLES.iter().filter(|t| t.name != SCHEMA_META).collect();
    ordered.extend(TABLES.iter().filter(|t| t.name == SCHEMA_META));
    for m in ordered {
        if !names.iter().any(|n| n == m.name) {
            continue;
        }
        let info = columns(c, m.name).await?;
        meta.push(super::catalog::meta_table(m, |n| {
            info.iter().find(|i| i.0 == n).map(|i| i.2)
        }));
    }
    let layouts = if names.iter().any(|n| n == SCHEMA_META) {
        let text: Option<String> =
            sqlx::query_scalar("SELECT layouts FROM sync_schema_meta WHERE id = 1")
                .fetch_optional(&mut *c)
                .await
                .map_err(pg)?
                .flatten();
        parse_layouts(&text.unwrap_or_default())
    } else {
        Vec::new()
    };
    let (mut rows, mut not_copied) = (Vec::new(), Vec::new());
    for name in &names {
        let lower = name.to_ascii_lowercase();
        if lower.starts_with("sync_") || lower.starts_with("_sync") {
            if !TABLES.iter().any(|t| t.name == name) {
                not_copied.push(name.clone());
            }
            continue;
        }
        let info = columns(c, name).await?;
        let required = ROW_LEAD.iter().chain(&ROW_TAIL[..3]);
        if !required
            .clone()
            .all(|(n, _)| info.iter().any(|i| i.0 == *n))
        {
            not_copied.push(name.clone());
            continue;
        }
        let layout = layouts
            .iter()
            .find(|(t, _)| t == name)
            .map(|(_, cols)| cols.as_slice())
            .unwrap_or(&[]);
        rows.push(row_table(c, name, &info, layout).await?);
    }
    Ok(Plan {
        meta,
        rows,
        not_copied,
    })
}

/// One row table: kinds from the marker (or the PostgreSQL type), the
/// SQLite engine's types, the declared indexes.
async fn row_table(
    c: &mut PgConnection, name: &str, info: &[(String, String, bool)],
    layout: &[schema::LayoutColumn],
) -> Result<RowTable> {
    let meta_kind = |n: &str| {
        ROW_LEAD
            .iter()
            .chain(ROW_TAIL)
            .find(|(m, _)| *m == n)
            .map(|(_, k)| *k)
    };
    let types = &crate::sqlite::ROW_TABLE_TYPES;
    let (mut columns, mut app, mut physical) = (Vec::new(), Vec::new(), Vec::new());
    for (n, typname, not_null) in info {
        let listed = layout.iter().find(|l| l.name == *n);
        let (kind, decl) = match meta_kind(n) {
            Some(k) => (
                k,
                match n.as_str() {
                    "_sync_partition" | "_sync_row_id" => "TEXT",
                    "_sync_server_version" => types.version,
                    "_sync_scopes" => types.scopes,
                    _ => types.bytes,
                },
            ),
            None => {
                let ty = listed
                    .and_then(|l| ColumnType::parse(&l.ty))
                    .unwrap_or_else(|| schema_type_of_pg(typname));
                app.push(schema::Column {
                    name: n.clone(),
                    def: ColumnDef::new(ty, !not_null),
                });
                let kind = listed
                    .and_then(|l| Kind::of_schema_type(&l.ty))
                    .unwrap_or_else(|| kind_of_pg(typname, false));
                (kind, (types.app)(ty))
            }
        };
        columns.push(Column {
            name: n.clone(),
            kind,
            not_null: *not_null,
        });
        physical.push((n.clone(), decl, *not_null));
    }
    if !physical.iter().any(|p| p.0 == "_sync_column_versions") {
        physical.push(("_sync_column_versions".to_owned(), types.bytes, false));
    }
    let (indexes, skipped_indexes) = indexes(c, name).await?;
    let pos = |n: &str| columns.iter().position(|c| c.name == n);
    let table = Table {
        name: name.to_owned(),
        key: vec![
            pos("_sync_partition").unwrap_or(0),
            pos("_sync_row_id").unwrap_or(1),
        ],
        partition: pos("_sync_partition"),
        seq: None,
        columns,
        row: None,
    };
    let schema = schema::Table {
        name: name.to_owned(),
        defs: app.iter().map(|c| c.def).collect(),
        materialize: !app.is_empty(),
        columns: app,
        primary_key_index: 0,
        indexes,
        quoted: quote_ident(name),
    };
    Ok(RowTable {
        table,
        schema,
        physical,
        skipped_indexes,
    })
}

/// The declared indexes of `table` (`sync_ix_…`, plain columns, no
/// predicate) as the schema declares them, so `core::migrate::index_ddl`
/// makes each as the SQLite engine does; and the names of the others.
async fn indexes(c: &mut PgConnection, table: &str) -> Result<(Vec<Index>, Vec<String>)> {
    let rows = sqlx::query(
        "SELECT i.relname::text, x.indisunique, x.indisprimary, \
           (x.indpred IS NOT NULL OR x.indexprs IS NOT NULL OR x.indnkeyatts <> x.indnatts), \
           ARRAY(SELECT a.attname::text FROM unnest(x.indkey::int2[]) WITH ORDINALITY k(num, ord) \
             JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.num ORDER BY k.ord) \
         FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid \
         WHERE x.indrelid = (SELECT k.oid FROM pg_class k JOIN pg_namespace n ON n.oid = k.relnamespace \
           WHERE n.nspname = current_schema() AND k.relname = $1) \
         ORDER BY i.relname COLLATE \"C\"",
    )
    .bind(table)
    .fetch_all(&mut *c)
    .await
    .map_err(pg)?;
    let (mut made, mut skipped) = (Vec::new(), Vec::new());
    for r in rows {
        let name: String = r.try_get(0).map_err(pg)?;
        let unique: bool = r.try_get(1).map_err(pg)?;
        let primary: bool = r.try_get(2).map_err(pg)?;
        let partial: bool = r.try_get(3).map_err(pg)?;
        let mut cols: Vec<String> = r.try_get(4).map_err(pg)?;
        if primary {
            continue;
        }
        match name.strip_prefix("sync_ix_") {
            // The physical name is `sync_ix_` and the declared name, or a
            // hash of a long one; either way, `sync_ix_` and the rest is
            // the name `index_ddl` gives back.
            Some(declared) if !partial && !cols.is_empty() => {
                if cols[0] == "_sync_partition" {
                    cols.remove(0);
                }
                made.push(Index {
                    name: declared.to_owned(),
                    columns: cols,
                    unique,
                });
            }
            _ => skipped.push(name),
        }
    }
    Ok((made, skipped))
}

/// The total rows of the snapshot, for progress and the time left.
pub async fn count(c: &mut PgConnection, plan: &Plan) -> Result<u64> {
    let mut n = 0u64;
    for t in plan.tables() {
        let k: i64 = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT count(*) FROM {}",
            t.quoted()
        )))
        .fetch_one(&mut *c)
        .await
        .map_err(pg)?;
        n += k as u64;
    }
    Ok(n)
}

/// `COPY (SELECT …) TO STDOUT (FORMAT binary)` of `t`, every column cast
/// to the type its kind reads from the stream (`super::binary`), in key
/// order (the SQLite side then appends to each b-tree).
pub fn copy_out_sql(t: &Table) -> String {
    let cols: Vec<String> = t
        .columns
        .iter()
        .map(|c| {
            let q = quote_ident(&c.name);
            match c.kind {
                Kind::Int8 | Kind::Int4 | Kind::Int2 => format!("{q}::int8"),
                Kind::Bool => format!("{q}::bool"),
                Kind::Float8 => format!("{q}::float8"),
                Kind::Text | Kind::Json | Kind::JsonOrNull => format!("{q}::text"),
                Kind::Bytea => format!("{q}::bytea"),
            }
        })
        .collect();
    let order: Vec<String> = t
        .key
        .iter()
        .map(|&i| quote_ident(&t.columns[i].name))
        .collect();
    let order = if order.is_empty() {
        String::new()
    } else {
        format!(" ORDER BY {}", order.join(", "))
    };
    format!(
        "COPY (SELECT {} FROM {}{order}) TO STDOUT (FORMAT binary)",
        cols.join(", "),
        t.quoted(),
    )
}
