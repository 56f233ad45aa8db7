//! Row upserts answered without a round trip and sent with the
//! transaction's next statement (issue 27), like the commit append
//! (`append`): a push of n operations then costs its lock batch, its
//! prefetch and one batch for every write and `COMMIT`, instead of n more
//! round trips inside the partition lock.
//!
//! A deferred upsert is a prepared statement per table (`TableSql::
//! upsert_prepare`, named after the hash of its text) `EXECUTE`d with
//! literal arguments. The lock batch reads which of them the connection has
//! (`lock_reads::prepared_upserts`); the first deferred upsert of a table
//! whose statement the connection lacks carries the `PREPARE` too.
//!
//! `upsertRow` is deferred only where the write cannot fail at the server
//! for a reason the host must see at that member: a constraint violation,
//! which the host turns into a rejection of the operation.
//! - The table was found clean by [`CHECK`] at `ensureSchema`: no index
//!   that is unique or an exclusion index but the primary key (the upsert
//!   names its conflict target), no other constraint on it or referencing
//!   it, no trigger, no rule, no row-level security, every column one the
//!   upsert writes, of the type it binds, and NOT NULL only where a value
//!   is always written (the decoder refuses a NULL in a non-nullable
//!   column before anything is sent). `sync_row_scopes` must be clean too.
//!   A constraint an operator adds later counts from the next
//!   `ensureSchema` (every host start runs one); until then a violation
//!   would fail the transaction at its next batch instead.
//! - The transaction's lock batch ran the prepared statements (a push after
//!   `lockPartitionForPush`), and no append or push result is pending (the
//!   batch keeps the host's order).
//! - No value can fail a type's input where the eager upsert would report
//!   it at once (a SQLSTATE class 22 error becomes a decode error, which
//!   the host also turns into a rejection): the database is UTF8 (so every
//!   character converts), no value holds a NUL, the scopes hold no `\u`
//!   escape (`jsonb` refuses `\u0000` and lone surrogates) and no JSON
//!   column has a value (`jsonb` refuses some texts JSON allows).
//! - The row's text is small ([`MAX_ROW`]), and so are the row id and the
//!   scope values, and any value where a user index holds it (a btree
//!   entry has a size limit). The pending batch stays under [`MAX_PENDING`].
//!
//! Decoding errors are found before anything is deferred, as before.
//! Other server errors (the connection lost, a statement timeout) fail the
//! member that sends the batch: the next statement or `commit`; the
//! transaction then rolls back either way.

use crate::core::codec::{self, ColumnType, Value};
use crate::core::error::{Error, Result};
use crate::core::model::StoredRow;
use crate::core::schema::{Schema, Table};
use crate::core::scope::scope_pairs;
use crate::postgres::error::map_err;
use crate::postgres::quote::{bytea, lit, texts};
use crate::postgres::rows::{pg_type, TableSql};
use sqlx::{PgConnection, Row};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The largest row deferred, by the length of its `EXECUTE` text.
pub const MAX_ROW: usize = 16 * 1024;
/// The most text the pending upserts may hold; past it they are sent.
pub const MAX_PENDING: usize = 256 * 1024;
/// Row ids and scope values longer than this are written at once (a btree
/// entry holds at most about 2.7 KB).
const MAX_KEY: usize = 1000;

/// One upsert not sent yet: its `EXECUTE` (after its `PREPARE` when
/// `prepares` names the statement).
pub struct PendingRow {
    pub text: String,
    pub prepares: Option<Arc<str>>,
}

/// Per table: whether it is clean, the physical columns' names, types
/// (`format_type`), NOT NULL and generated flags. `$1` holds the quoted
/// table names, resolved in the storage's schema.
pub const CHECK: &str = "SELECT t.name, \
 c.relkind = 'r' AND NOT c.relrowsecurity AND pg_catalog.current_setting('server_encoding') = 'UTF8' \
 AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_index i WHERE i.indrelid = c.oid AND (i.indisunique OR i.indisexclusion) AND NOT i.indisprimary) \
 AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint k WHERE (k.conrelid = c.oid AND k.contype NOT IN ('p', 'n')) OR k.confrelid = c.oid) \
 AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger g WHERE g.tgrelid = c.oid) \
 AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_rewrite r WHERE r.ev_class = c.oid), \
 ARRAY(SELECT a.attname::text FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum), \
 ARRAY(SELECT pg_catalog.format_type(a.atttypid, a.atttypmod) FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum), \
 ARRAY(SELECT a.attnotnull OR a.attgenerated <> '' OR a.attidentity <> '' FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum) \
 FROM unnest($1::text[]) AS t(name) JOIN pg_catalog.pg_class c ON c.oid = pg_catalog.to_regclass(t.name)";

/// One table as [`CHECK`] found it.
pub struct Found {
    pub clean: bool,
    pub columns: Vec<String>,
    pub types: Vec<String>,
    /// NOT NULL, generated or identity.
    pub strict: Vec<bool>,
}

/// Per table of `schema`, whether its upserts may be deferred.
pub async fn check(c: &mut PgConnection, schema: &Schema) -> Result<Vec<bool>> {
    let mut names: Vec<&str> = schema.tables.iter().map(|t| t.quoted.as_str()).collect();
    names.push("sync_row_scopes");
    let rows = crate::postgres::stmt::query(CHECK)
        .bind(&names)
        .fetch_all(&mut *c)
        .await
        .map_err(map_err)?;
    let mut found: HashMap<String, Found> = HashMap::new();
    for r in &rows {
        found.insert(
            r.try_get(0).map_err(map_err)?,
            Found {
                clean: r
                    .try_get::<Option<bool>, _>(1)
                    .map_err(map_err)?
                    .unwrap_or(false),
                columns: r.try_get(2).map_err(map_err)?,
                types: r.try_get(3).map_err(map_err)?,
                strict: r.try_get(4).map_err(map_err)?,
            },
        );
    }
    let scopes_clean = found.get("sync_row_scopes").is_some_and(|f| f.clean);
    Ok(schema
        .tables
        .iter()
        .map(|t| verdict(t, found.get(&t.quoted), scopes_clean))
        .collect())
}

/// The columns the upsert writes, with their type as the table's
/// `CREATE` names it (`rows::pg_type`; `format_type` gives the same names
/// in lower case) and whether a value is always written.
fn written(t: &Table) -> Vec<(&str, &'static str, bool)> {
    let mut out = vec![
        ("_sync_partition", "TEXT", true),
        ("_sync_row_id", "TEXT", true),
    ];
    if t.materialize {
        for c in &t.columns {
            out.push((c.name.as_str(), pg_type(c.def.ty), !c.def.nullable));
        }
    }
    out.extend([
        ("_sync_server_version", "BIGINT", true),
        ("_sync_scopes", "JSONB", true),
        ("_sync_payload", "BYTEA", true),
        ("_sync_column_versions", "BYTEA", false),
    ]);
    out
}

/// Whether `t`'s upsert may be deferred, given what [`CHECK`] found of it
/// and of `sync_row_scopes`.
pub fn verdict(t: &Table, found: Option<&Found>, scopes_clean: bool) -> bool {
    let Some(f) = found else { return false };
    if !f.clean
        || !scopes_clean
        || f.columns.len() != f.types.len()
        || f.columns.len() != f.strict.len()
    {
        return false;
    }
    let want = written(t);
    if want.len() != f.columns.len() {
        return false;
    }
    f.columns
        .iter()
        .zip(&f.types)
        .zip(&f.strict)
        .all(|((name, ty), strict)| {
            want.iter().any(|(n, wt, always)| {
                n == name && wt.eq_ignore_ascii_case(ty) && (!strict || *always)
            })
        })
}

/// A column value as the literal `rows::bind_value` would bind (`None`:
/// it cannot be deferred).
fn value(ty: ColumnType, v: &Value<'_>) -> Option<String> {
    const NULL: &str = "NULL";
    Some(match ty {
        ColumnType::String | ColumnType::BlobRef => match v {
            Value::Text(s) => lit(s)?,
            _ => NULL.to_owned(),
        },
        ColumnType::Json => match v {
            Value::Text(s) if codec::is_valid_json(s) => return None,
            _ => NULL.to_owned(),
        },
        ColumnType::Integer => match v {
            Value::Integer(i) => i.to_string(),
            Value::Boolean(b) => i64::from(*b).to_string(),
            _ => NULL.to_owned(),
        },
        ColumnType::Float => match v {
            Value::Float(f) => float(*f)?,
            Value::Integer(i) => float(*i as f64)?,
            _ => NULL.to_owned(),
        },
        ColumnType::Boolean => match v {
            Value::Boolean(b) => b.to_string(),
            Value::Integer(i) => (*i != 0).to_string(),
            _ => NULL.to_owned(),
        },
        ColumnType::Bytes | ColumnType::Crdt => match v {
            Value::Bytes(b) => bytea(Some(b)),
            _ => NULL.to_owned(),
        },
    })
}

/// An exact `float8` literal: Rust prints the shortest digits that read
/// back as the same value, and PostgreSQL reads them correctly rounded.
/// `None` for a NaN other than the canonical one: a literal `'NaN'` stores
/// the canonical bits, where the eager path's binary bind keeps the pushed
/// ones, so such a row is written at once.
fn float(f: f64) -> Option<String> {
    const CANONICAL_NAN: u64 = 0x7ff8_0000_0000_0000;
    Some(if f.is_nan() {
        if f.to_bits() != CANONICAL_NAN {
            return None;
        }
        "'NaN'::pg_catalog.float8".to_owned()
    } else if f.is_infinite() {
        if f > 0.0 {
            "'Infinity'::pg_catalog.float8"
        } else {
            "'-Infinity'::pg_catalog.float8"
        }
        .to_owned()
    } else {
        format!("'{f:?}'::pg_catalog.float8")
    })
}

/// The `EXECUTE` of `sql`'s upsert for `row`. `Err`: the payload or the
/// scopes do not decode (as the eager upsert reports); `Ok(None)`: the row
/// cannot be deferred.
pub fn execute_text(
    t: &Table, sql: &TableSql, partition: &str, row: &StoredRow,
) -> Result<Option<String>> {
    // Hex doubles the bytes: a row past the limit is not worth decoding
    // here (nor, on the caller's thread, encoding), the eager path does.
    let bytes = row.payload.len() + row.column_versions.as_ref().map_or(0, Vec::len);
    if bytes * 2 + row.scopes_json.len() + row.row_id.len() > MAX_ROW {
        return Ok(None);
    }
    // What can be told without decoding is told first: the eager path
    // decodes (and reports) the rows it gets.
    if row.scopes_json.contains("\\u") || row.row_id.len() + partition.len() > MAX_KEY {
        return Ok(None);
    }
    let pairs = scope_pairs(&row.scopes_json)?;
    if pairs.iter().any(|(k, v)| k.len() + v.len() > MAX_KEY) {
        return Ok(None);
    }
    let values = if t.materialize {
        codec::decode_row(&t.defs, &row.payload)?
    } else {
        Vec::new()
    };
    let Some(args) = arguments(t, partition, row, &pairs, &values) else {
        return Ok(None);
    };
    let text = format!("EXECUTE {}({})", sql.upsert_name, args.join(", "));
    Ok((text.len() <= MAX_ROW).then_some(text))
}

/// The upsert's arguments as literals, in `TableSql::upsert`'s order.
fn arguments(
    t: &Table, partition: &str, row: &StoredRow, pairs: &[(String, String)], values: &[Value<'_>],
) -> Option<Vec<String>> {
    // A user index holds these values: long ones go the eager way.
    let keyed = !t.indexes.is_empty();
    let mut args = vec![lit(partition)?, lit(&row.row_id)?];
    for (col, v) in t.columns.iter().zip(values) {
        let long = match v {
            Value::Text(s) => s.len() > MAX_KEY,
            Value::Bytes(b) => b.len() > MAX_KEY,
            _ => false,
        };
        if keyed && long {
            return None;
        }
        args.push(value(col.def.ty, v)?);
    }
    let (vars, vals): (Vec<&str>, Vec<&str>) =
        pairs.iter().map(|(a, b)| (a.as_str(), b.as_str())).unzip();
    args.extend([
        row.server_version.to_string(),
        lit(&row.scopes_json)?,
        bytea(Some(&row.payload)),
        bytea(row.column_versions.as_deref()),
        lit(&t.name)?,
        texts(&vars)?,
        texts(&vals)?,
    ]);
    Some(args)
}

/// After a batch that carried deferred upserts failed with `e`: a value
/// or constraint error (SQLSTATE class 22 or 23) means the tables changed
/// since `ensureSchema` checked them (an operator's constraint or
/// trigger), so this storage writes every upsert at once from now on, and
/// the host sees the next such refusal at `upsertRow` again.
pub fn refused(tables: &[TableSql], e: &Error) {
    let Error::Engine { code, .. } = e.primary() else {
        return;
    };
    if !(code.starts_with("22") || code.starts_with("23")) {
        return;
    }
    for sql in tables {
        sql.deferrable.store(false, Ordering::Relaxed);
    }
    tracing::warn!(
        target: crate::core::telemetry::target::TX,
        sqlstate = %code,
        "a batch of deferred upserts was refused; upserts are written at once from now on"
    );
}

/// What `TxState::defer_upsert` did.
#[derive(Debug, PartialEq, Eq)]
pub enum Deferral {
    /// Write it now.
    No,
    /// Kept for the next batch.
    Kept,
    /// Kept, and the pending batch is full: send it now.
    Flush,
    /// Not kept: it would fill the batch, and the caller cannot send it.
    Full,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tasks() -> Table {
        let s = Schema::parse(r#"{"version":1,"tables":[{"name":"tasks","columns":[{"name":"id","type":"string","nullable":false},{"name":"n","type":"integer","nullable":true}],"primaryKeyIndex":0,"materialize":true,"indexes":[]}]}"#).unwrap();
        s.tables[0].clone()
    }

    /// The table as the upsert writes it, every column as [`CHECK`] reports it.
    fn found(t: &Table) -> Found {
        let w = written(t);
        Found {
            clean: true,
            columns: w.iter().map(|c| c.0.to_owned()).collect(),
            types: w.iter().map(|c| c.1.to_owned()).collect(),
            strict: w.iter().map(|c| c.2).collect(),
        }
    }

    #[test]
    fn defers_only_a_table_exactly_as_the_upsert_writes_it() {
        let t = tasks();
        assert!(verdict(&t, Some(&found(&t)), true));
        assert!(!verdict(&t, None, true), "not found");
        assert!(
            !verdict(&t, Some(&found(&t)), false),
            "sync_row_scopes not clean"
        );
        let mut f = found(&t);
        f.clean = false;
        assert!(
            !verdict(&t, Some(&f), true),
            "a constraint, trigger, rule or policy"
        );
        let mut f = found(&t);
        f.columns.push("extra".into());
        f.types.push("text".into());
        f.strict.push(false);
        assert!(
            !verdict(&t, Some(&f), true),
            "a column the upsert does not write"
        );
        let mut f = found(&t);
        f.types[3] = "integer".into();
        assert!(!verdict(&t, Some(&f), true), "n is int4, not bigint");
        let mut f = found(&t);
        f.strict[3] = true;
        assert!(
            !verdict(&t, Some(&f), true),
            "NOT NULL on a nullable column"
        );
        let mut f = found(&t);
        f.strict[2] = false;
        assert!(
            verdict(&t, Some(&f), true),
            "a non-nullable column without NOT NULL"
        );
    }

    #[test]
    fn floats_are_exact_literals() {
        let f = |x: f64| float(x).unwrap();
        assert_eq!(f(0.1), "'0.1'::pg_catalog.float8");
        assert_eq!(f(-0.0), "'-0.0'::pg_catalog.float8");
        assert_eq!(f(5e-324), "'5e-324'::pg_catalog.float8");
        assert_eq!(f(1e300), "'1e300'::pg_catalog.float8");
        assert_eq!(f(f64::NAN), "'NaN'::pg_catalog.float8");
        assert_eq!(f(f64::NEG_INFINITY), "'-Infinity'::pg_catalog.float8");
        for x in [0.1, 1.0 / 3.0, f64::MAX, f64::MIN_POSITIVE, 123456789.125] {
            let text = f(x);
            let digits = &text[1..text.len() - "'::pg_catalog.float8".len()];
            assert_eq!(digits.parse::<f64>().unwrap().to_bits(), x.to_bits());
        }
        // A NaN with a payload of its own keeps its bits only on the eager path.
        assert_eq!(float(f64::from_bits(0x7ff8_0000_0000_0001)), None);
        assert_eq!(float(f64::from_bits(0xfff8_0000_0000_0000)), None);
    }

    #[test]
    fn a_large_row_is_written_at_once_before_it_is_decoded() {
        let t = tasks();
        let sql = TableSql::new(&t);
        let row = |payload: Vec<u8>| StoredRow {
            row_id: "r".into(),
            server_version: 1,
            scopes_json: "{}".into(),
            payload,
            column_versions: None,
        };
        // Not a valid payload: past the size limit it is not even decoded.
        assert!(matches!(
            execute_text(&t, &sql, "p", &row(vec![7; MAX_ROW])),
            Ok(None)
        ));
        assert!(execute_text(&t, &sql, "p", &row(vec![7; 10])).is_err());
    }

    #[test]
    fn a_nul_or_a_json_value_is_not_deferred() {
        assert_eq!(
            value(ColumnType::String, &Value::Text("a'b")),
            Some("E'a''b'".into())
        );
        assert_eq!(value(ColumnType::String, &Value::Text("a\0b")), None);
        assert_eq!(value(ColumnType::Json, &Value::Text("{}")), None);
        assert_eq!(
            value(ColumnType::Json, &Value::Text("not json")),
            Some("NULL".into())
        );
        assert_eq!(
            value(ColumnType::Integer, &Value::Boolean(true)),
            Some("1".into())
        );
        assert_eq!(
            value(ColumnType::Boolean, &Value::Integer(2)),
            Some("true".into())
        );
        assert_eq!(value(ColumnType::Bytes, &Value::Null), Some("NULL".into()));
    }
}
