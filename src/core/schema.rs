//! The host's compiled schema, as far as storage needs it, and the names
//! derived from it (quoted identifiers, physical index names, the layout
//! marker). The JS shim flattens `CompiledSchema` (Maps and Sets) into JSON
//! before it crosses; this module parses and validates that form.

use crate::core::codec::{ColumnDef, ColumnType};
use crate::core::error::{Error, Result};
use serde_json::Value as Json;
use std::collections::HashMap;

#[derive(Debug, Clone)]
pub struct Column {
    pub name: String,
    pub def: ColumnDef,
}

#[derive(Debug, Clone)]
pub struct Index {
    pub name: String,
    pub columns: Vec<String>,
    pub unique: bool,
}

#[derive(Debug, Clone)]
pub struct Table {
    pub name: String,
    pub columns: Vec<Column>,
    pub defs: Vec<ColumnDef>,
    pub primary_key_index: usize,
    pub materialize: bool,
    pub indexes: Vec<Index>,
    /// `"name"` with embedded quotes doubled.
    pub quoted: String,
}

#[derive(Debug, Clone)]
pub struct Schema {
    pub version: i64,
    pub tables: Vec<Table>,
    by_name: HashMap<String, usize>,
    /// The layout marker exactly as the host's `layoutsOf` renders it.
    pub layouts: String,
}

/// One column as recorded in the stored layout marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutColumn {
    pub name: String,
    pub ty: String,
    pub nullable: bool,
}

/// Table name → columns, in marker order.
pub type Layouts = Vec<(String, Vec<LayoutColumn>)>;

pub fn quote_ident(name: &str) -> String {
    let mut s = String::with_capacity(name.len() + 2);
    s.push('"');
    for c in name.chars() {
        if c == '"' {
            s.push('"');
        }
        s.push(c);
    }
    s.push('"');
    s
}

/// FNV-1a 64 over the UTF-8 bytes, as the in-tree storages name long indexes.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

pub fn physical_index_name(declared: &str) -> String {
    let direct = format!("sync_ix_{declared}");
    if direct.len() <= 63 {
        direct
    } else {
        format!("sync_ix_{:016x}", fnv1a64(declared.as_bytes()))
    }
}

fn field<'a>(o: &'a Json, key: &str, ctx: &str) -> Result<&'a Json> {
    o.get(key)
        .ok_or_else(|| Error::invalid(format!("schema: {ctx} is missing `{key}`")))
}

fn str_field(o: &Json, key: &str, ctx: &str) -> Result<String> {
    field(o, key, ctx)?
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| Error::invalid(format!("schema: {ctx}.{key} must be a string")))
}

fn check_name(name: &str, what: &str) -> Result<()> {
    let lower = name.to_ascii_lowercase();
    if name.is_empty()
        || name.len() > 63
        || lower.starts_with("sync_")
        || lower.starts_with("_sync")
    {
        return Err(Error::invalid(format!(
            "schema: invalid {what} name {name:?} (1..63 bytes, not starting with sync_ or _sync)"
        )));
    }
    Ok(())
}

impl Table {
    pub fn column_position(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    fn parse(t: &Json) -> Result<Table> {
        let name = str_field(t, "name", "table")?;
        check_name(&name, "table")?;
        let ctx = format!("table {name:?}");
        let cols = field(t, "columns", &ctx)?
            .as_array()
            .ok_or_else(|| Error::invalid(format!("schema: {ctx}.columns must be an array")))?;
        let mut columns = Vec::with_capacity(cols.len());
        for c in cols {
            let cname = str_field(c, "name", &ctx)?;
            check_name(&cname, "column")?;
            let ty = str_field(c, "type", &ctx)?;
            let ty = ColumnType::parse(&ty).ok_or_else(|| {
                Error::invalid(format!(
                    "schema: {ctx} column {cname:?} has unsupported type {ty:?}"
                ))
            })?;
            let nullable = c.get("nullable").and_then(Json::as_bool).unwrap_or(false);
            if columns.iter().any(|x: &Column| x.name == cname) {
                return Err(Error::invalid(format!(
                    "schema: {ctx} repeats column {cname:?}"
                )));
            }
            columns.push(Column {
                name: cname,
                def: ColumnDef { ty, nullable },
            });
        }
        let pk = t.get("primaryKeyIndex").and_then(Json::as_u64).unwrap_or(0) as usize;
        if pk >= columns.len() {
            return Err(Error::invalid(format!(
                "schema: {ctx}.primaryKeyIndex out of range"
            )));
        }
        let materialize = t.get("materialize").and_then(Json::as_bool).unwrap_or(true);
        let mut indexes = Vec::new();
        if let Some(list) = t.get("indexes").and_then(Json::as_array) {
            for ix in list {
                let iname = str_field(ix, "name", &ctx)?;
                if iname.is_empty() {
                    return Err(Error::invalid(format!(
                        "schema: {ctx} has an index without a name"
                    )));
                }
                let icols = field(ix, "columns", &ctx)?
                    .as_array()
                    .ok_or_else(|| {
                        Error::invalid(format!("schema: {ctx} index columns must be an array"))
                    })?
                    .iter()
                    .map(|c| {
                        let c = c.as_str().unwrap_or_default().to_owned();
                        if columns.iter().any(|x| x.name == c) {
                            Ok(c)
                        } else {
                            Err(Error::invalid(format!(
                                "schema: {ctx} index {iname:?} references an unknown column {c:?}"
                            )))
                        }
                    })
                    .collect::<Result<Vec<_>>>()?;
                if icols.is_empty() {
                    return Err(Error::invalid(format!(
                        "schema: {ctx} index {iname:?} has no columns"
                    )));
                }
                let unique = ix.get("unique").and_then(Json::as_bool).unwrap_or(false);
                indexes.push(Index {
                    name: iname,
                    columns: icols,
                    unique,
                });
            }
        }
        let defs = columns.iter().map(|c| c.def).collect();
        Ok(Table {
            quoted: quote_ident(&name),
            name,
            columns,
            defs,
            primary_key_index: pk,
            materialize,
            indexes,
        })
    }

    pub fn layout(&self) -> Vec<LayoutColumn> {
        self.columns
            .iter()
            .map(|c| LayoutColumn {
                name: c.name.clone(),
                ty: c.def.ty.as_str().to_owned(),
                nullable: c.def.nullable,
            })
            .collect()
    }
}

impl Schema {
    /// No tables: every row call fails with `unknown table`.
    pub fn empty() -> Schema {
        Schema {
            version: 0,
            tables: Vec::new(),
            by_name: HashMap::new(),
            layouts: "{}".into(),
        }
    }

    pub fn index_of(&self, name: &str) -> Result<usize> {
        self.by_name
            .get(name)
            .copied()
            .ok_or_else(|| Error::unknown_table(name))
    }

    /// Parses the shim's flattened schema JSON.
    pub fn parse(text: &str) -> Result<Schema> {
        let v: Json =
            serde_json::from_str(text).map_err(|e| Error::invalid(format!("schema: {e}")))?;
        let version = v
            .get("version")
            .and_then(Json::as_f64)
            .filter(|x| x.fract() == 0.0 && *x >= 0.0 && *x <= 9_007_199_254_740_991.0)
            .ok_or_else(|| Error::invalid("schema.version must be a non-negative safe integer"))?
            as i64;
        let list = v
            .get("tables")
            .and_then(Json::as_array)
            .ok_or_else(|| Error::invalid("schema.tables must be a Map or array of tables"))?;
        let mut tables = Vec::with_capacity(list.len());
        let mut by_name = HashMap::new();
        for t in list {
            let table = Table::parse(t)?;
            if by_name.insert(table.name.clone(), tables.len()).is_some() {
                return Err(Error::invalid(format!(
                    "schema: table {:?} declared twice",
                    table.name
                )));
            }
            tables.push(table);
        }
        let layouts = match v.get("layouts").and_then(Json::as_str) {
            Some(s) => s.to_owned(),
            None => render_layouts(&tables),
        };
        Ok(Schema {
            version,
            tables,
            by_name,
            layouts,
        })
    }

    pub fn table(&self, name: &str) -> Result<&Table> {
        self.by_name
            .get(name)
            .map(|i| &self.tables[*i])
            .ok_or_else(|| Error::unknown_table(name))
    }

    pub fn has_table(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }
}

/// Renders the marker as `JSON.stringify` would (used when the shim did not
/// pass the host's own rendering).
pub fn render_layouts(tables: &[Table]) -> String {
    let mut o = serde_json::Map::new();
    for t in tables {
        let cols: Vec<Json> = t
            .columns
            .iter()
            .map(|c| {
                let mut m = serde_json::Map::new();
                m.insert("name".into(), c.name.clone().into());
                m.insert("type".into(), c.def.ty.as_str().into());
                m.insert("nullable".into(), c.def.nullable.into());
                Json::Object(m)
            })
            .collect();
        o.insert(t.name.clone(), Json::Array(cols));
    }
    Json::Object(o).to_string()
}

/// Parses a stored marker. Unreadable markers read as empty: the caller
/// then treats every table as new, which is what the in-tree storages do.
pub fn parse_layouts(text: &str) -> Layouts {
    let Ok(Json::Object(o)) = serde_json::from_str::<Json>(text) else {
        return Vec::new();
    };
    o.into_iter()
        .map(|(table, cols)| {
            let cols = cols
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|c| LayoutColumn {
                            name: c
                                .get("name")
                                .and_then(Json::as_str)
                                .unwrap_or_default()
                                .to_owned(),
                            ty: c
                                .get("type")
                                .and_then(Json::as_str)
                                .unwrap_or_default()
                                .to_owned(),
                            nullable: c.get("nullable").and_then(Json::as_bool).unwrap_or(false),
                        })
                        .collect()
                })
                .unwrap_or_default();
            (table, cols)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_index_names_hash() {
        assert_eq!(physical_index_name("by_title"), "sync_ix_by_title");
        let long = "x".repeat(60);
        let n = physical_index_name(&long);
        assert_eq!(n.len(), "sync_ix_".len() + 16);
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
    }

    #[test]
    fn quotes_identifiers() {
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
    }

    #[test]
    fn parses_and_renders() {
        let s = Schema::parse(r#"{"version":2,"tables":[{"name":"tasks","columns":[{"name":"id","type":"string","nullable":false},{"name":"n","type":"integer","nullable":true}],"primaryKeyIndex":0,"materialize":true,"indexes":[{"name":"by_n","columns":["n"],"unique":true}]}]}"#).unwrap();
        assert_eq!(
            s.layouts,
            r#"{"tasks":[{"name":"id","type":"string","nullable":false},{"name":"n","type":"integer","nullable":true}]}"#
        );
        assert!(s.table("nope").is_err());
        assert!(
            Schema::parse(r#"{"version":1,"tables":[{"name":"sync_x","columns":[]}]}"#).is_err()
        );
    }
}

/// A schema with what an engine derived from each of its tables (the
/// statement text), in table order.
pub struct Loaded<S> {
    pub schema: Schema,
    pub sql: Vec<S>,
}

impl<S> Loaded<S> {
    pub fn new(schema: Schema, derive: impl Fn(&Table) -> S) -> Self {
        let sql = schema.tables.iter().map(derive).collect();
        Loaded { schema, sql }
    }
}

/// The schema a storage last ensured; empty before `ensureSchema`.
/// Readers take a snapshot (`get`), so a concurrent ensure never changes
/// the statements a running call uses.
pub struct Ensured<S> {
    slot: std::sync::RwLock<Option<std::sync::Arc<Loaded<S>>>>,
}

impl<S> Default for Ensured<S> {
    fn default() -> Self {
        Ensured {
            slot: std::sync::RwLock::new(None),
        }
    }
}

impl<S> Ensured<S> {
    /// The ensured schema, or none before `ensureSchema`.
    pub fn current(&self) -> Option<std::sync::Arc<Loaded<S>>> {
        self.slot.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn get(&self) -> std::sync::Arc<Loaded<S>> {
        let slot = self.slot.read().unwrap_or_else(|p| p.into_inner());
        slot.clone().unwrap_or_else(|| {
            std::sync::Arc::new(Loaded {
                schema: Schema::empty(),
                sql: Vec::new(),
            })
        })
    }

    pub fn set(&self, schema: Schema, derive: impl Fn(&Table) -> S) {
        let loaded = std::sync::Arc::new(Loaded::new(schema, derive));
        *self.slot.write().unwrap_or_else(|p| p.into_inner()) = Some(loaded);
    }

    /// The schema version commits are written as (0 before `ensureSchema`).
    pub fn version(&self) -> i64 {
        let slot = self.slot.read().unwrap_or_else(|p| p.into_inner());
        slot.as_ref().map_or(0, |l| l.schema.version)
    }
}
