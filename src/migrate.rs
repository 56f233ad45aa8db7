//! Engine-neutral pieces of `ensureSchema` (storage-layout §14.6): the
//! incomplete-checkpoint refusal, the stored-layout check at an unchanged
//! version, the append-only rule of a version bump, and the error shapes
//! of the physical-layout check. Each engine reads its catalog and calls
//! these.

use crate::codec::ColumnType;
use crate::error::{Error, Result};
use crate::model::CheckpointDeclaration;
use crate::schema::{parse_layouts, quote_ident, LayoutColumn, Schema, Table};

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

/// One column of a row table as the engine's catalog reports it.
pub struct PhysicalColumn {
    pub name: String,
    pub ty: String,
    pub not_null: bool,
    /// 1-based position in the primary key, 0 when not part of it.
    pub pk: i64,
}

/// Compares a row table's catalog columns with the meta columns
/// `(name, declared type, not null, pk position)` and the app columns of a
/// materialized table.
pub fn check_physical(
    t: &Table, cols: &[PhysicalColumn], meta_columns: &[(&str, &str, bool, i64)],
) -> Result<()> {
    if cols.is_empty() {
        return Err(physical_mismatch(&t.name, "missing_table", &[]));
    }
    for (name, ty, not_null, pk) in meta_columns {
        let Some(c) = cols.iter().find(|c| c.name == *name) else {
            return Err(physical_mismatch(
                &t.name,
                "missing_column",
                &[("column", name)],
            ));
        };
        if !c.ty.eq_ignore_ascii_case(ty) {
            let actual = c.ty.to_ascii_uppercase();
            return Err(physical_mismatch(
                &t.name,
                "type",
                &[("column", name), ("expected", ty), ("actual", &actual)],
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
                &[("column", name), ("expected", e), ("actual", a)],
            ));
        }
        if c.pk != *pk {
            let (e, a) = (pk.to_string(), c.pk.to_string());
            return Err(physical_mismatch(
                &t.name,
                "primary_key",
                &[("column", name), ("expected", &e), ("actual", &a)],
            ));
        }
    }
    if t.materialize {
        for c in &t.columns {
            if !cols.iter().any(|p| p.name == c.name) {
                return Err(physical_mismatch(
                    &t.name,
                    "missing_column",
                    &[("column", &c.name)],
                ));
            }
        }
    }
    Ok(())
}

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
