//! What a copy moves, read from the source's SQLite catalog: the meta
//! tables present (an older file lacks some tables and columns), the row
//! tables (any table with the `_sync_*` meta columns), each column's
//! PostgreSQL type from the layout marker, and the declared indexes in
//! this storage's form (docs/copy.md, "How the target's row tables are
//! made"). No host schema is needed.

use super::sq as map_err;
use super::tables::{Kind, ROW_LEAD, ROW_TAIL};
use crate::core::error::Result;
use crate::core::meta_layout::{Table as MetaTable, SCHEMA_META, TABLES};
use crate::core::schema::{parse_layouts, quote_ident};
use rusqlite::Connection;

/// One column the copy moves.
#[derive(Debug, Clone)]
pub struct Column {
    pub name: String,
    pub kind: Kind,
    pub not_null: bool,
}

/// A row table: the DDL that makes it on the target and its indexes.
#[derive(Debug, Clone)]
pub struct RowTable {
    pub create: String,
    /// `CREATE [UNIQUE ]INDEX …` of each declared index, in our form.
    pub indexes: Vec<String>,
    /// Indexes of the source not copied (an operator's, or an expression).
    pub skipped_indexes: Vec<String>,
}

/// One table to copy and compare.
#[derive(Debug, Clone)]
pub struct Table {
    pub name: String,
    pub columns: Vec<Column>,
    /// The primary key's columns, in order; the partition leads when there
    /// is one.
    pub key: Vec<usize>,
    pub partition: Option<usize>,
    pub seq: Option<usize>,
    pub row: Option<RowTable>,
}

impl Table {
    pub fn quoted(&self) -> String {
        quote_ident(&self.name)
    }

    /// `"a", "b", …` of the columns copied.
    pub fn column_list(&self) -> String {
        self.columns
            .iter()
            .map(|c| quote_ident(&c.name))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Meta table `m` as the copy moves it: the columns of its layout that the
/// source has (`present` answers a column's NOT NULL, or `None` where the
/// source lacks it), keyed and partitioned as the layout says.
pub(super) fn meta_table(m: &MetaTable, present: impl Fn(&str) -> Option<bool>) -> Table {
    let columns: Vec<Column> = m
        .columns()
        .filter_map(|col| {
            present(col.name).map(|not_null| Column {
                name: col.name.to_owned(),
                kind: Kind::of_meta(col.ty),
                not_null,
            })
        })
        .collect();
    let pos = |n: &str| columns.iter().position(|c| c.name == n);
    Table {
        name: m.name.to_owned(),
        key: m.primary_key.iter().filter_map(|n| pos(n)).collect(),
        partition: pos("partition"),
        // What `verify` reports the largest value of.
        seq: pos("commit_seq").or_else(|| pos("max_commit_seq")),
        columns,
        row: None,
    }
}

/// `PRAGMA table_info`: (name, declared type, not null, pk position).
fn table_info(c: &Connection, table: &str) -> Result<Vec<(String, String, bool, i64)>> {
    let mut st = c
        .prepare(&format!("PRAGMA table_info({})", quote_ident(table)))
        .map_err(map_err)?;
    let rows = st
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(1)?,
                r.get::<_, Option<String>>(2)?.unwrap_or_default(),
                r.get::<_, i64>(3)? != 0,
                r.get::<_, i64>(5)?,
            ))
        })
        .map_err(map_err)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(map_err)
}

/// The tables of the source, meta tables first (in `core::meta_layout`
/// order, `sync_schema_meta` last: a target whose marker is present is a
/// finished copy), then the row tables by name.
pub fn read(c: &Connection) -> Result<Vec<Table>> {
    let mut out = Vec::new();
    let (marker, rest): (Vec<&MetaTable>, Vec<&MetaTable>) =
        TABLES.iter().partition(|t| t.name == SCHEMA_META);
    for m in rest.into_iter().chain(marker) {
        let info = table_info(c, m.name)?;
        if info.is_empty() {
            continue;
        }
        out.push(meta_table(m, |n| {
            info.iter().find(|i| i.0 == n).map(|i| i.2)
        }));
    }
    let layouts = if out.iter().any(|t| t.name == "sync_schema_meta") {
        c.query_row(
            "SELECT layouts FROM sync_schema_meta WHERE id = 1",
            [],
            |r| r.get::<_, Option<String>>(0),
        )
        .map(|l| parse_layouts(&l.unwrap_or_default()))
        .unwrap_or_default()
    } else {
        Vec::new()
    };
    let names: Vec<String> = {
        let mut st = c
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .map_err(map_err)?;
        let rows = st.query_map([], |r| r.get(0)).map_err(map_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(map_err)?
    };
    for name in names {
        let lower = name.to_ascii_lowercase();
        if lower.starts_with("sync_") || lower.starts_with("_sync") || lower.starts_with("sqlite_")
        {
            continue;
        }
        let info = table_info(c, &name)?;
        let required = ROW_LEAD.iter().chain(&ROW_TAIL[..3]);
        if !required
            .clone()
            .all(|(n, _)| info.iter().any(|i| i.0 == *n))
        {
            continue;
        }
        let layout = layouts
            .iter()
            .find(|(t, _)| *t == name)
            .map(|(_, cols)| cols.as_slice())
            .unwrap_or(&[]);
        let columns: Vec<Column> = info
            .iter()
            .map(|(n, decl, nn, _)| {
                let kind = ROW_LEAD
                    .iter()
                    .chain(ROW_TAIL)
                    .find(|(m, _)| m == n)
                    .map(|(_, k)| *k)
                    .or_else(|| {
                        layout
                            .iter()
                            .find(|l| l.name == *n)
                            .and_then(|l| Kind::of_schema_type(&l.ty))
                    })
                    .unwrap_or_else(|| Kind::of_sqlite_decl(decl));
                Column {
                    name: n.clone(),
                    kind,
                    not_null: *nn,
                }
            })
            .collect();
        let mut defs: Vec<String> = columns
            .iter()
            .map(|c| {
                format!(
                    "{} {}{}",
                    quote_ident(&c.name),
                    c.kind.pg_type(),
                    if c.not_null { " NOT NULL" } else { "" }
                )
            })
            .collect();
        // A 0.15.48 table lacks `_sync_column_versions`: the target gets it,
        // as an `ensureSchema` repair would add it (empty, so not copied).
        if !columns.iter().any(|c| c.name == "_sync_column_versions") {
            defs.push("\"_sync_column_versions\" BYTEA".to_owned());
        }
        defs.push("PRIMARY KEY (\"_sync_partition\", \"_sync_row_id\")".to_owned());
        let create = format!("CREATE TABLE {} ({})", quote_ident(&name), defs.join(", "));
        let (indexes, skipped_indexes) = indexes(c, &name)?;
        let pos = |n: &str| columns.iter().position(|c| c.name == n);
        let key = vec![
            pos("_sync_partition").unwrap_or(0),
            pos("_sync_row_id").unwrap_or(1),
        ];
        let partition = pos("_sync_partition");
        out.push(Table {
            name,
            key,
            partition,
            seq: None,
            columns,
            row: Some(RowTable {
                create,
                indexes,
                skipped_indexes,
            }),
        });
    }
    Ok(out)
}

/// The declared indexes of `table` in this storage's form, and the names
/// of the indexes not copied.
fn indexes(c: &Connection, table: &str) -> Result<(Vec<String>, Vec<String>)> {
    let list: Vec<(String, bool, String, bool)> = {
        let mut st = c
            .prepare(&format!("PRAGMA index_list({})", quote_ident(table)))
            .map_err(map_err)?;
        let rows = st
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)? != 0,
                    r.get::<_, String>(3)?,
                    r.get::<_, i64>(4)? != 0,
                ))
            })
            .map_err(map_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(map_err)?
    };
    let (mut made, mut skipped) = (Vec::new(), Vec::new());
    for (name, unique, origin, partial) in list {
        if origin != "c" {
            continue;
        }
        let cols: Vec<Option<String>> = {
            let mut st = c
                .prepare(&format!("PRAGMA index_info({})", quote_ident(&name)))
                .map_err(map_err)?;
            let rows = st.query_map([], |r| r.get(2)).map_err(map_err)?;
            rows.collect::<rusqlite::Result<_>>().map_err(map_err)?
        };
        let plain: Option<Vec<String>> = cols.into_iter().collect();
        match plain {
            Some(mut cols) if name.starts_with("sync_ix_") && !partial && !cols.is_empty() => {
                if cols[0] != "_sync_partition" {
                    cols.insert(0, "_sync_partition".to_owned());
                }
                let quoted: Vec<String> = cols.iter().map(|c| quote_ident(c)).collect();
                made.push(format!(
                    "CREATE {}INDEX IF NOT EXISTS {} ON {} ({})",
                    if unique { "UNIQUE " } else { "" },
                    quote_ident(&name),
                    quote_ident(table),
                    quoted.join(", ")
                ));
            }
            _ => skipped.push(name),
        }
    }
    Ok((made, skipped))
}
