//! Engine-neutral pieces of `ensureSchema` (storage-layout §14.6): the
//! incomplete-checkpoint refusal, the stored-layout check at an unchanged
//! version, the append-only rule of a version bump, and the error shapes
//! of the physical-layout check. Each engine reads its catalog and calls
//! these.

use crate::core::codec::{ColumnDef, ColumnType};
use crate::core::error::{Error, Result};
use crate::core::model::CheckpointDeclaration;
use crate::core::schema::{
    parse_layouts, physical_index_name, quote_ident, Column, LayoutColumn, Schema, Table,
};

/// Refuses when an incomplete checkpoint at the running version is not
/// redeclared by this call.
pub fn refuse_incomplete(
    pending: Vec<(String, String)>, declared: &[CheckpointDeclaration],
) -> Result<()> {
    for (partition, name) in pending {
        if !declared
            .iter()
            .any(|d| d.partition == partition && d.name == name)
        {
            return Err(Error::query_with(
                "sync.storage.checkpoint_incomplete",
                &[("partition", &partition), ("name", &name)],
            ));
        }
    }
    Ok(())
}

/// What `ensureSchema` does, decided once for both engines from the
/// version and layouts the database records.
#[derive(Debug)]
pub enum Plan {
    /// The database is at the running version and its recorded layouts
    /// match the schema: complete the physical layout in place (repairs).
    Current,
    /// A new database (`from` None) or an older version: migrate the row
    /// tables from the recorded layouts, record the version, fence the
    /// partitions and declare the checkpoints.
    Migrate {
        from: Option<i64>,
        old: Vec<(String, Vec<LayoutColumn>)>,
    },
}

/// Decides [`Plan`]: a database a newer version migrated is refused
/// (`ERR_SYNCULAR_SCHEMA_NEWER`), and one at the running version whose
/// recorded layouts differ from the schema's is refused by
/// [`check_stored_layout`].
pub fn plan(schema: &Schema, stored: Option<(i64, String)>) -> Result<Plan> {
    match stored {
        Some((v, _)) if v > schema.version => Err(Error::plain(
            "ERR_SYNCULAR_SCHEMA_NEWER",
            format!(
                "stored schema version {v} is newer than the running schema version {}: refusing to run an older server against a migrated database",
                schema.version
            ),
        )),
        Some((v, layouts)) if v == schema.version => {
            check_stored_layout(schema, &layouts)?;
            Ok(Plan::Current)
        }
        other => Ok(Plan::Migrate {
            from: other.as_ref().map(|(v, _)| *v),
            old: other.map(|(_, l)| parse_layouts(&l)).unwrap_or_default(),
        }),
    }
}

pub fn check_stored_layout(schema: &Schema, stored_text: &str) -> Result<()> {
    let stored = parse_layouts(stored_text);
    for t in &schema.tables {
        let want = t.layout();
        let have: &[LayoutColumn] = stored
            .iter()
            .find(|(n, _)| *n == t.name)
            .map_or(&[], |(_, c)| c);
        if want.as_slice() != have {
            let at = want
                .iter()
                .zip(have)
                .position(|(a, b)| a != b)
                .unwrap_or(want.len().min(have.len()));
            let column = want
                .get(at)
                .or(have.get(at))
                .map_or("", |c| c.name.as_str());
            return Err(Error::query_with(
                "sync.storage.stored_layout_mismatch",
                &[("table", &t.name), ("column", column)],
            ));
        }
    }
    for (name, _) in &stored {
        if !schema.has_table(name) {
            return Err(Error::query_with(
                "sync.storage.stored_layout_mismatch",
                &[("table", name)],
            ));
        }
    }
    Ok(())
}

pub fn physical_mismatch(table: &str, reason: &str, extra: &[(&str, &str)]) -> Error {
    let mut d = vec![("table", table), ("reason", reason)];
    d.extend_from_slice(extra);
    Error::query_with("sync.storage.physical_layout_mismatch", &d)
}

pub fn refuse_migration(table: &str, why: String) -> Error {
    Error::plain(
        "ERR_SYNCULAR_MIGRATION_REFUSED",
        format!("table \"{table}\": {why}; only appending nullable columns is supported"),
    )
}

/// The stored layout must be a prefix of the new one; added columns must be
/// nullable. Returns whether columns were added.
pub fn check_append_only(t: &Table, old: &[LayoutColumn]) -> Result<bool> {
    let new = t.layout();
    for (i, o) in old.iter().enumerate() {
        match new.get(i) {
            None => {
                return Err(refuse_migration(
                    &t.name,
                    format!("the schema removed columns (\"{}\")", o.name),
                ))
            }
            Some(n) if n != o => {
                return Err(refuse_migration(
                    &t.name,
                    format!("column {i} (\"{}\") changed", o.name),
                ));
            }
            _ => {}
        }
    }
    for n in &new[old.len()..] {
        if !n.nullable {
            return Err(refuse_migration(
                &t.name,
                format!("added column \"{}\" must be nullable, since existing rows have no value for it", n.name),
            ));
        }
    }
    Ok(new.len() > old.len())
}

/// What a migration does to one row table that already exists, decided
/// once for both dialects; each engine runs it in its own SQL (`ALTER
/// TABLE … ADD COLUMN` with its type map, then the row rewrite).
pub struct TableChange<'a> {
    /// Projection columns a materialized table lacks.
    pub add_columns: Vec<&'a Column>,
    /// `_sync_column_versions` is missing (a table an older version wrote).
    pub add_column_versions: bool,
    /// The stored rows must be rewritten: `Some(defs)` re-encodes payloads
    /// written with the old layout's column definitions (the layout grew);
    /// `Some(None)` only fills the added projection columns.
    pub rewrite: Option<Option<Vec<ColumnDef>>>,
}

/// The change `t` needs, given its stored layout (`old`, when the marker
/// has one) and the columns the table has now; refuses a layout change
/// that is not an append of nullable columns.
pub fn table_change<'a>(
    t: &'a Table, old: Option<&[LayoutColumn]>, physical: &[PhysicalColumn],
) -> Result<TableChange<'a>> {
    let grew = match old {
        Some(cols) => check_append_only(t, cols)?,
        None => false,
    };
    let has = |name: &str| physical.iter().any(|p| p.name == name);
    let add_columns: Vec<&Column> = if t.materialize {
        t.columns.iter().filter(|c| !has(&c.name)).collect()
    } else {
        Vec::new()
    };
    let old_defs = match (grew, old) {
        (true, Some(cols)) => Some(
            cols.iter()
                .map(|c| ColumnDef {
                    ty: ColumnType::parse(&c.ty).unwrap_or(ColumnType::Bytes),
                    nullable: c.nullable,
                })
                .collect(),
        ),
        _ => None,
    };
    let rewrite = (old_defs.is_some() || !add_columns.is_empty()).then_some(old_defs);
    Ok(TableChange {
        add_columns,
        add_column_versions: !has("_sync_column_versions"),
        rewrite,
    })
}

/// The row rewrite's UPDATE of one row: the re-encoded payload, then the
/// projection columns of a materialized table, keyed by partition and row
/// id. `param(n, ty)` is the dialect's n-th placeholder (1-based: 1 and 2
/// the key, 3 the payload, 4 on the columns).
pub fn rewrite_update_sql(t: &Table, param: impl Fn(usize, ColumnType) -> String) -> String {
    let mut sets = vec![format!(
        "\"_sync_payload\" = {}",
        param(3, ColumnType::Bytes)
    )];
    if t.materialize {
        for (i, col) in t.columns.iter().enumerate() {
            sets.push(format!(
                "{} = {}",
                quote_ident(&col.name),
                param(i + 4, col.def.ty)
            ));
        }
    }
    format!(
        "UPDATE {} SET {} WHERE \"_sync_partition\" = {} AND \"_sync_row_id\" = {}",
        t.quoted,
        sets.join(", "),
        param(1, ColumnType::String),
        param(2, ColumnType::String)
    )
}

/// One column of a row table as the engine's catalog reports it.
pub struct PhysicalColumn {
    pub name: String,
    pub ty: String,
    pub not_null: bool,
    /// 1-based position in the primary key, 0 when not part of it.
    pub pk: i64,
}

/// What a start at an unchanged schema version repairs in place on a row
/// table: the differences where our layout only adds to the one an older
/// in-tree storage wrote (0.15.48 had no `_sync_column_versions`, and its
/// user indexes did not lead with `_sync_partition`). Each is safe for the
/// in-tree storage that wrote the file: it never names the added column,
/// and an index is only a faster path to the same rows.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Repairs {
    pub add_column_versions: bool,
    /// Declared indexes to (re)create in our form, dropping any index of
    /// the same physical name first.
    pub indexes: Vec<IndexDdl>,
}

impl Repairs {
    pub fn is_empty(&self) -> bool {
        !self.add_column_versions && self.indexes.is_empty()
    }
}

/// One user index as the catalog reports it: physical column names in
/// order, and whether it is unique.
#[derive(Debug, PartialEq, Eq)]
pub struct PhysicalIndex {
    pub columns: Vec<String>,
    pub unique: bool,
}

/// Where a layout repair records each declared index it replaced, with
/// the statement that created the index it found (the older version's
/// form, for instance a 0.15.48 `unique` index spanning partitions), so
/// `restoreLayout()` can give that form back when the host swaps back
/// (README, swap runbook). Made only when a repair replaces an index; the
/// in-tree storages never name it.
pub const REPLACED_INDEXES_DDL: &str = "CREATE TABLE IF NOT EXISTS sync_native_replaced_indexes (\
    index_name TEXT PRIMARY KEY, table_name TEXT NOT NULL, original_sql TEXT NOT NULL)";
/// Records one replaced index (the first record of a name stays: it is
/// the form the older version created).
pub const RECORD_REPLACED_INDEX: &str = "INSERT INTO sync_native_replaced_indexes \
    (index_name, table_name, original_sql) VALUES ($1, $2, $3) ON CONFLICT (index_name) DO NOTHING";
/// The recorded indexes, in name order.
pub const REPLACED_INDEXES: &str =
    "SELECT index_name, table_name, original_sql FROM sync_native_replaced_indexes ORDER BY index_name";
pub const DROP_REPLACED_INDEXES: &str = "DROP TABLE sync_native_replaced_indexes";

/// The refusal of `restoreLayout()` when rows written since the repair
/// violate an index's original form.
pub fn restore_conflict(
    index: &str, table: &str, original: &str, cause: &str,
) -> crate::core::error::Error {
    crate::core::error::Error::plain(
        "ERR_SYNCULAR_RESTORE_CONFLICT",
        format!(
            "restoreLayout: index {index} on {table} cannot be given back its original form ({original}): rows written since violate it ({cause}); nothing was changed. Remove the rows that hold the same value in two partitions, or swap back without restoring it"
        ),
    )
}

#[derive(Debug, PartialEq, Eq)]
pub struct IndexDdl {
    /// The physical name (`sync_ix_…`).
    pub name: String,
    /// The physical name, quoted.
    pub quoted_name: String,
    /// Whether an index of that name exists and must be dropped first.
    pub replace: bool,
    /// `CREATE [UNIQUE ]INDEX IF NOT EXISTS …` in our form.
    pub create: String,
}

/// `CREATE [UNIQUE ]INDEX` for each declared index of a materialized
/// table, with `_sync_partition` first (uniqueness is per partition). The
/// DDL is the same on both engines.
pub fn index_ddl(t: &Table) -> Vec<(String, String, PhysicalIndex)> {
    if !t.materialize {
        return Vec::new();
    }
    t.indexes
        .iter()
        .map(|ix| {
            let physical = physical_index_name(&ix.name);
            let mut columns = vec!["_sync_partition".to_owned()];
            columns.extend(ix.columns.iter().cloned());
            let quoted_cols: Vec<String> = columns.iter().map(|c| quote_ident(c)).collect();
            let create = format!(
                "CREATE {}INDEX IF NOT EXISTS {} ON {} ({})",
                if ix.unique { "UNIQUE " } else { "" },
                quote_ident(&physical),
                t.quoted,
                quoted_cols.join(", ")
            );
            (
                physical,
                create,
                PhysicalIndex {
                    columns,
                    unique: ix.unique,
                },
            )
        })
        .collect()
}

/// Compares a row table's catalog columns and user indexes with the meta
/// columns `(name, declared type, not null, pk position)`, the app columns
/// of a materialized table and its declared indexes. Returns what may be
/// repaired in place; anything else is a coded refusal naming the table,
/// the column and the fix. `index_of` reads one index by physical name.
pub fn check_physical(
    t: &Table, cols: &[PhysicalColumn], meta_columns: &[(&str, &str, bool, i64)],
    mut index_of: impl FnMut(&str) -> Result<Option<PhysicalIndex>>,
) -> Result<Repairs> {
    if cols.is_empty() {
        return Err(physical_mismatch(
            &t.name,
            "missing_table",
            &[("fix", "restore the table from a backup, or bump the schema version so ensureSchema creates it")],
        ));
    }
    let mut repairs = Repairs::default();
    for (name, ty, not_null, pk) in meta_columns {
        let Some(c) = cols.iter().find(|c| c.name == *name) else {
            if *name == "_sync_column_versions" {
                repairs.add_column_versions = true;
                continue;
            }
            return Err(physical_mismatch(
                &t.name,
                "missing_column",
                &[("column", name), ("fix", FIX_META)],
            ));
        };
        if !c.ty.eq_ignore_ascii_case(ty) {
            let actual = c.ty.to_ascii_uppercase();
            return Err(physical_mismatch(
                &t.name,
                "type",
                &[
                    ("column", name),
                    ("expected", ty),
                    ("actual", &actual),
                    ("fix", FIX_META),
                ],
            ));
        }
        if c.not_null != *not_null {
            let (e, a) = if *not_null {
                ("NOT NULL", "NULL")
            } else {
                ("NULL", "NOT NULL")
            };
            return Err(physical_mismatch(
                &t.name,
                "nullability",
                &[
                    ("column", name),
                    ("expected", e),
                    ("actual", a),
                    ("fix", FIX_META),
                ],
            ));
        }
        if c.pk != *pk {
            let (e, a) = (pk.to_string(), c.pk.to_string());
            return Err(physical_mismatch(
                &t.name,
                "primary_key",
                &[
                    ("column", name),
                    ("expected", &e),
                    ("actual", &a),
                    ("fix", FIX_META),
                ],
            ));
        }
    }
    if t.materialize {
        for c in &t.columns {
            if !cols.iter().any(|p| p.name == c.name) {
                return Err(physical_mismatch(
                    &t.name,
                    "missing_column",
                    &[("column", &c.name), ("fix", FIX_APP)],
                ));
            }
        }
    }
    for (physical, create, want) in index_ddl(t) {
        let have = index_of(&physical)?;
        if have.as_ref() != Some(&want) {
            repairs.indexes.push(IndexDdl {
                name: physical.clone(),
                quoted_name: quote_ident(&physical),
                replace: have.is_some(),
                create,
            });
        }
    }
    Ok(repairs)
}

const FIX_META: &str = "a storage meta column differs from the in-tree layout at this schema version; \
     restore the table from a backup of the storage that wrote it, or recreate it through a schema-version bump";
const FIX_APP: &str = "the table lacks a column the schema declares at this schema version: \
     bump the schema version (ensureSchema adds the column and back-fills it), or add it with ALTER TABLE";

/// The column types a dialect gives a row table (storage-layout §3.1,
/// §3.2); the table's shape is the same on every engine.
pub struct RowTableTypes {
    /// Type of an app column.
    pub app: fn(ColumnType) -> &'static str,
    /// `_sync_server_version`.
    pub version: &'static str,
    /// `_sync_scopes`.
    pub scopes: &'static str,
    /// `_sync_payload` and `_sync_column_versions`.
    pub bytes: &'static str,
}

/// `CREATE TABLE IF NOT EXISTS` for one row table: the meta columns around
/// the projection (app columns only when materialized; NOT NULL only for
/// non-nullable ones, on this fresh create).
pub fn create_table_sql(t: &Table, ty: &RowTableTypes) -> String {
    let mut cols = vec![
        "\"_sync_partition\" TEXT NOT NULL".to_owned(),
        "\"_sync_row_id\" TEXT NOT NULL".to_owned(),
    ];
    if t.materialize {
        for c in &t.columns {
            let nn = if c.def.nullable { "" } else { " NOT NULL" };
            cols.push(format!(
                "{} {}{nn}",
                quote_ident(&c.name),
                (ty.app)(c.def.ty)
            ));
        }
    }
    cols.push(format!("\"_sync_server_version\" {} NOT NULL", ty.version));
    cols.push(format!("\"_sync_scopes\" {} NOT NULL", ty.scopes));
    cols.push(format!("\"_sync_payload\" {} NOT NULL", ty.bytes));
    cols.push(format!("\"_sync_column_versions\" {}", ty.bytes));
    cols.push("PRIMARY KEY (\"_sync_partition\", \"_sync_row_id\")".to_owned());
    format!(
        "CREATE TABLE IF NOT EXISTS {} ({})",
        t.quoted,
        cols.join(", ")
    )
}
