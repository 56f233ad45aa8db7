//! Row tables on PostgreSQL: point reads, upserts with their projection and
//! scope index, deletes, tombstones, blob references and scope scans. Same
//! rules as `sqlite::rows`; the scan paging is `crate::core::scan`. Stored scopes
//! are read in either JSONB form (`crate::core::stored`).

use super::error::{map_err, row_write_err};
use super::stmt::next_row;
use crate::core::codec::{self, ColumnType, Value};
use crate::core::error::{Error, Result};
use crate::core::model::StoredRow;
use crate::core::records::Records;
use crate::core::scan::ScanFold;
use crate::core::schema::{quote_ident, Table};
use crate::core::scope::{scope_pairs, ScopeFilter};
use crate::core::stored::{self, Form, Shape};
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::query::Query;
use sqlx::{AssertSqlSafe, PgConnection, Postgres, Row};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Statement text per row table, built once per loaded schema.
pub struct TableSql {
    /// The table's name, for the errors reads report.
    name: Arc<str>,
    select_row: Arc<str>,
    upsert: Arc<str>,
    delete_row: Arc<str>,
    /// The scan's page, for any number of probe values and for one.
    scan: Arc<str>,
    scan_one: Arc<str>,
    /// Rows and tombstones of many ids (`prefetchRows`).
    pub prefetch: Arc<str>,
    /// The upsert as a session's prepared statement (`tx::upsert`):
    /// its name (after the hash of its text) and its `PREPARE`.
    pub upsert_name: Arc<str>,
    pub upsert_prepare: Arc<str>,
    /// Whether its upserts may be deferred (`tx::upsert::verdict`);
    /// cleared for good when a deferred batch is refused
    /// (`tx::upsert::refused`).
    pub deferrable: AtomicBool,
}

pub const ROW_FIELDS: &str = r#""_sync_row_id", "_sync_server_version", "_sync_scopes"::text, "_sync_payload", "_sync_column_versions""#;

/// `$n` with the cast a projected column needs.
pub fn param(n: usize, ty: ColumnType) -> String {
    match ty {
        ColumnType::Json => format!("${n}::text::jsonb"),
        _ => format!("${n}"),
    }
}

pub fn pg_type(ty: ColumnType) -> &'static str {
    match ty {
        ColumnType::String | ColumnType::BlobRef => "TEXT",
        ColumnType::Json => "JSONB",
        ColumnType::Integer => "BIGINT",
        ColumnType::Float => "DOUBLE PRECISION",
        ColumnType::Boolean => "BOOLEAN",
        ColumnType::Bytes | ColumnType::Crdt => "BYTEA",
    }
}

impl TableSql {
    pub fn new(t: &Table) -> TableSql {
        let q = &t.quoted;
        let mut cols = vec![
            r#""_sync_partition""#.to_owned(),
            r#""_sync_row_id""#.to_owned(),
        ];
        let mut params = vec!["$1".to_owned(), "$2".to_owned()];
        if t.materialize {
            for c in &t.columns {
                cols.push(quote_ident(&c.name));
                params.push(param(params.len() + 1, c.def.ty));
            }
        }
        for (m, cast) in [
            (r#""_sync_server_version""#, ""),
            (r#""_sync_scopes""#, "::text::jsonb"),
            (r#""_sync_payload""#, ""),
            (r#""_sync_column_versions""#, ""),
        ] {
            cols.push(m.to_owned());
            params.push(format!("${}{cast}", params.len() + 1));
        }
        let updates: Vec<String> = cols[2..]
            .iter()
            .map(|c| format!("{c} = EXCLUDED.{c}"))
            .collect();
        // The row-scope index in the same statement (storage-layout §7.7):
        // entries not in the new map go, missing ones come. A row's entries
        // are found by `sync_row_scopes_by_row` and deleted by `ctid`: the
        // `ORDER BY` its key gives is what makes the planner take it. On a
        // young, unanalyzed table both indexes cost the same, and the
        // generic plan took the primary key (partition, tbl, var, value,
        // row_id), which reads every entry of the partition's table for
        // one row until an ANALYZE (2 ms an upsert at 20,000 entries,
        // against 0.03 ms).
        let n = params.len();
        let (tbl, vars, vals) = (n + 1, n + 2, n + 3);
        let mut types = vec!["pg_catalog.text", "pg_catalog.text"];
        if t.materialize {
            types.extend(t.columns.iter().map(|c| param_type(c.def.ty)));
        }
        types.extend([
            "pg_catalog.int8",
            "pg_catalog.text",
            "pg_catalog.bytea",
            "pg_catalog.bytea",
            "pg_catalog.text",
            "pg_catalog.text[]",
            "pg_catalog.text[]",
        ]);
        let mut sql = TableSql {
            name: t.name.as_str().into(),
            select_row: format!(
                r#"SELECT {ROW_FIELDS} FROM {q} WHERE "_sync_partition" = $1 AND "_sync_row_id" = $2"#
            )
            .into(),
            upsert: format!(
                r#"WITH w AS (INSERT INTO {q} ({}) VALUES ({}) ON CONFLICT ("_sync_partition", "_sync_row_id") DO UPDATE SET {} RETURNING 1),
p AS (SELECT * FROM unnest(${vars}::text[], ${vals}::text[]) AS p(var, value)),
o AS (SELECT ctid AS c, var, value FROM sync_row_scopes WHERE partition = $1 AND tbl = ${tbl} AND row_id = $2
      ORDER BY partition, tbl, row_id),
d AS (DELETE FROM sync_row_scopes s USING o WHERE s.ctid = o.c
      AND NOT EXISTS (SELECT 1 FROM p WHERE p.var = o.var AND p.value = o.value)),
i AS (INSERT INTO sync_row_scopes (partition, tbl, var, value, row_id)
      SELECT $1, ${tbl}, p.var, p.value, $2 FROM p ON CONFLICT DO NOTHING)
SELECT count(*) FROM w"#,
                cols.join(", "),
                params.join(", "),
                updates.join(", ")
            )
            .into(),
            delete_row: format!(
                r#"WITH d AS (DELETE FROM {q} WHERE "_sync_partition" = $1 AND "_sync_row_id" = $2),
o AS (SELECT ctid AS c FROM sync_row_scopes WHERE partition = $1 AND tbl = $3 AND row_id = $2
      ORDER BY partition, tbl, row_id),
s AS (DELETE FROM sync_row_scopes x USING o WHERE x.ctid = o.c),
b AS (DELETE FROM sync_blob_refs WHERE partition = $1 AND tbl = $3 AND row_id = $2)
SELECT 1"#
            )
            .into(),
            scan: scan_sql(&q, SCAN_ANY).into(),
            scan_one: scan_sql(&q, SCAN_ONE).into(),
            prefetch: prefetch_sql(q).into(),
            upsert_name: "".into(),
            upsert_prepare: "".into(),
            deferrable: AtomicBool::new(false),
        };
        let prepare = format!("({}) AS {}", types.join(", "), sql.upsert);
        let name = format!(
            "syncular_upsert_{:016x}",
            crate::core::schema::fnv1a64(prepare.as_bytes())
        );
        sql.upsert_prepare = format!("PREPARE {name}{prepare}").into();
        sql.upsert_name = name.into();
        sql
    }

    /// This table's statements, its upserts deferred or not.
    pub fn deferring(self, deferrable: bool) -> TableSql {
        self.deferrable.store(deferrable, Ordering::Relaxed);
        self
    }
}

/// A scan page's candidates (`c.row_id`, ordered, at most `$5`) from the
/// probe values `$6` after `$4`. `(value, row_id) > (v.value, $4)` says
/// `row_id > $4` in a form only the scope index's key can serve: without
/// statistics the planner otherwise took `sync_row_scopes_by_row` and
/// filtered the whole partition (5 ms a page instead of 1). Several values
/// are merged (DISTINCT, sorted); one value's entries are already distinct
/// and in `row_id` order in the index, so its page is read as they come.
const SCAN_ANY: &str = "SELECT DISTINCT x.row_id FROM unnest($6::text[]) AS v(value)
      CROSS JOIN LATERAL (SELECT s.row_id FROM sync_row_scopes s
        WHERE s.partition = $1 AND s.tbl = $2 AND s.var = $3 AND s.value = v.value
          AND (s.value, s.row_id) > (v.value, $4)
        ORDER BY s.row_id LIMIT $5) x
      ORDER BY x.row_id LIMIT $5";
const SCAN_ONE: &str = "SELECT s.row_id FROM sync_row_scopes s
        WHERE s.partition = $1 AND s.tbl = $2 AND s.var = $3 AND s.value = ($6::text[])[1]
          AND (s.value, s.row_id) > (($6::text[])[1], $4)
        ORDER BY s.value, s.row_id LIMIT $5";

/// The row is a primary key probe per candidate (LATERAL LIMIT 1).
fn scan_sql(q: &str, candidates: &str) -> String {
    format!(
        r#"SELECT c.row_id, t."_sync_server_version", t."_sync_scopes"::text, t."_sync_payload", t."_sync_column_versions"
FROM ({candidates}) c
LEFT JOIN LATERAL (SELECT t."_sync_server_version", t."_sync_scopes", t."_sync_payload", t."_sync_column_versions"
      FROM {q} t WHERE t."_sync_partition" = $1 AND t."_sync_row_id" = c.row_id LIMIT 1) t ON true
ORDER BY c.row_id"#
    )
}

/// Binds a decoded payload value as its projection (storage-layout §3.2):
/// typed by the column, JSON only when it parses.
pub fn bind_value<'q>(
    q: Query<'q, Postgres, PgArguments>, ty: ColumnType, v: &Value<'_>,
) -> Query<'q, Postgres, PgArguments> {
    match ty {
        ColumnType::String | ColumnType::BlobRef => q.bind(match v {
            Value::Text(s) => Some(s.to_string()),
            _ => None,
        }),
        ColumnType::Json => q.bind(match v {
            Value::Text(s) if codec::is_valid_json(s) => Some(s.to_string()),
            _ => None,
        }),
        ColumnType::Integer => q.bind(match v {
            Value::Integer(i) => Some(*i),
            Value::Boolean(b) => Some(i64::from(*b)),
            _ => None,
        }),
        ColumnType::Float => q.bind(match v {
            Value::Float(f) => Some(*f),
            Value::Integer(i) => Some(*i as f64),
            _ => None,
        }),
        ColumnType::Boolean => q.bind(match v {
            Value::Boolean(b) => Some(*b),
            Value::Integer(i) => Some(*i != 0),
            _ => None,
        }),
        ColumnType::Bytes | ColumnType::Crdt => q.bind(match v {
            Value::Bytes(b) => Some(b.to_vec()),
            _ => None,
        }),
    }
}

/// The stored row fields after the row id, from column `offset` on.
pub fn row_from_parts(r: &PgRow, row_id: String, offset: usize) -> Result<StoredRow> {
    Ok(StoredRow {
        row_id,
        server_version: r.try_get(offset).map_err(map_err)?,
        scopes_json: r.try_get(offset + 1).map_err(map_err)?,
        payload: r.try_get(offset + 2).map_err(map_err)?,
        column_versions: r.try_get(offset + 3).map_err(map_err)?,
    })
}

fn row_from(r: &PgRow, offset: usize) -> Result<StoredRow> {
    Ok(StoredRow {
        row_id: r.try_get(offset).map_err(map_err)?,
        server_version: r.try_get(offset + 1).map_err(map_err)?,
        scopes_json: r.try_get(offset + 2).map_err(map_err)?,
        payload: r.try_get(offset + 3).map_err(map_err)?,
        column_versions: r.try_get(offset + 4).map_err(map_err)?,
    })
}

pub async fn get_row(
    c: &mut PgConnection, sql: &TableSql, partition: &str, row_id: &str,
) -> Result<Option<StoredRow>> {
    let r = crate::postgres::stmt::query(AssertSqlSafe(sql.select_row.clone()))
        .bind(partition)
        .bind(row_id)
        .fetch_optional(&mut *c)
        .await
        .map_err(map_err)?;
    r.map(|r| stored::row(Form::Jsonb, row_from(&r, 0)?, &sql.name, partition))
        .transpose()
}

/// Writes the full stored row, its projection and its row-scope index
/// entries (re-indexed only when the scope pairs changed).
pub async fn upsert_row(
    c: &mut PgConnection, table: &Table, sql: &TableSql, partition: &str, row: &StoredRow,
    op_index: Option<u32>,
) -> Result<()> {
    let pairs = scope_pairs(&row.scopes_json)?;
    let values = if table.materialize {
        codec::decode_row(&table.defs, &row.payload)?
    } else {
        Vec::new()
    };
    let (vars, vals): (Vec<&str>, Vec<&str>) =
        pairs.iter().map(|(a, b)| (a.as_str(), b.as_str())).unzip();
    let mut q = crate::postgres::stmt::query(AssertSqlSafe(sql.upsert.clone()))
        .bind(partition)
        .bind(&row.row_id);
    for (col, v) in table.columns.iter().zip(&values) {
        q = bind_value(q, col.def.ty, v);
    }
    q.bind(row.server_version)
        .bind(&row.scopes_json)
        .bind(&row.payload)
        .bind(&row.column_versions)
        .bind(&table.name)
        .bind(vars)
        .bind(vals)
        .execute(&mut *c)
        .await
        .map_err(|e| row_write_err(e, op_index))?;
    Ok(())
}

const DELETE_TOMBSTONE: &str =
    "DELETE FROM sync_tombstones WHERE partition = $1 AND tbl = $2 AND row_id = $3";
const DELETE_BLOB_REFS: &str =
    "DELETE FROM sync_blob_refs WHERE partition = $1 AND tbl = $2 AND row_id = $3";

async fn delete_row_keyed(
    c: &mut PgConnection, stmt: &'static str, partition: &str, table: &str, row_id: &str,
) -> Result<()> {
    crate::postgres::stmt::query(stmt)
        .bind(partition)
        .bind(table)
        .bind(row_id)
        .execute(&mut *c)
        .await
        .map_err(map_err)?;
    Ok(())
}

/// Removes the row, its scope entries and its blob references, in one
/// statement.
pub async fn delete_row(
    c: &mut PgConnection, table: &Table, sql: &TableSql, partition: &str, row_id: &str,
) -> Result<()> {
    crate::postgres::stmt::query(AssertSqlSafe(sql.delete_row.clone()))
        .bind(partition)
        .bind(row_id)
        .bind(&table.name)
        .execute(&mut *c)
        .await
        .map_err(|e| row_write_err(e, None))?;
    Ok(())
}

pub async fn get_tombstone_seq(
    c: &mut PgConnection, partition: &str, table: &str, row_id: &str,
) -> Result<Option<i64>> {
    crate::postgres::stmt::query_scalar(
        "SELECT commit_seq FROM sync_tombstones WHERE partition = $1 AND tbl = $2 AND row_id = $3",
    )
    .bind(partition)
    .bind(table)
    .bind(row_id)
    .fetch_optional(&mut *c)
    .await
    .map_err(map_err)
}

pub async fn clear_tombstone(
    c: &mut PgConnection, partition: &str, table: &str, row_id: &str,
) -> Result<()> {
    delete_row_keyed(c, DELETE_TOMBSTONE, partition, table, row_id).await
}

pub async fn set_blob_refs(
    c: &mut PgConnection, partition: &str, table: &str, row_id: &str, blob_ids: &[String],
) -> Result<()> {
    delete_row_keyed(c, DELETE_BLOB_REFS, partition, table, row_id).await?;
    if blob_ids.is_empty() {
        return Ok(());
    }
    crate::postgres::stmt::query(
        "INSERT INTO sync_blob_refs (partition, tbl, row_id, blob_id)
         SELECT $1, $2, $3, b FROM unnest($4::text[]) AS b ON CONFLICT DO NOTHING",
    )
    .bind(partition)
    .bind(table)
    .bind(row_id)
    .bind(blob_ids)
    .execute(&mut *c)
    .await
    .map_err(map_err)?;
    Ok(())
}

/// One page of a scope scan (storage-layout §7.5), paged by `crate::core::scan`.
pub async fn scan_rows(
    c: &mut PgConnection, table: &Table, sql: &TableSql, partition: &str, filter: &ScopeFilter,
    after_row_id: &str, limit: i64,
) -> Result<Records> {
    let Some((var, values)) = filter.probe() else {
        return Err(Error::query("sync.storage.scan_requires_scope"));
    };
    if values.is_empty() || limit <= 0 {
        return Ok(Records::none());
    }
    let mut fold = ScanFold::new(filter, &table.name, partition, after_row_id, limit);
    loop {
        let text = if values.len() == 1 {
            &sql.scan_one
        } else {
            &sql.scan
        };
        let query = crate::postgres::stmt::query(AssertSqlSafe(text.clone()))
            .bind(partition)
            .bind(&table.name)
            .bind(var)
            .bind(fold.after.clone())
            .bind(fold.batch())
            .bind(values);
        let mut rows = query.fetch(&mut *c);
        while let Some(r) = next_row(&mut rows).await? {
            let row_id: &str = r.try_get(0).map_err(map_err)?;
            let payload: Option<&[u8]> = r.try_get(3).map_err(map_err)?;
            // Every stored row's scopes are checked, matched or not.
            let scopes = match payload {
                Some(_) => Some(
                    stored::read(Form::Jsonb, r.try_get(2).map_err(map_err)?, Shape::Object)
                        .ok_or_else(|| stored::row_corrupt(&table.name, partition, row_id))?,
                ),
                None => None,
            };
            let more = fold.offer(row_id, scopes.as_deref(), || {
                Ok((
                    r.try_get(1).map_err(map_err)?,
                    payload.unwrap_or_default(),
                    r.try_get(4).map_err(map_err)?,
                ))
            })?;
            if !more {
                return Ok(fold.finish());
            }
        }
        if !fold.next_page() {
            return Ok(fold.finish());
        }
    }
}

/// A schema with the statement text of each of its tables.
pub type Loaded = crate::core::schema::Loaded<TableSql>;

/// Rows and tombstones of `ids` in one statement.
const PREFETCH: &str = "SELECT k.id, t.\"_sync_row_id\" IS NOT NULL, t.\"_sync_server_version\", t.\"_sync_scopes\"::text, \
t.\"_sync_payload\", t.\"_sync_column_versions\", ts.commit_seq \
FROM unnest($2::text[]) AS k(id) \
LEFT JOIN {table} t ON t.\"_sync_partition\" = $1 AND t.\"_sync_row_id\" = k.id \
LEFT JOIN sync_tombstones ts ON ts.partition = $1 AND ts.tbl = $3 AND ts.row_id = k.id";

pub fn prefetch_sql(quoted_table: &str) -> String {
    PREFETCH.replace("{table}", quoted_table)
}

/// The prepared statement's parameter type for a column.
/// Named in `pg_catalog`: an operator's `search_path` may put a schema
/// holding a domain of the same name first.
pub fn param_type(ty: ColumnType) -> &'static str {
    match ty {
        ColumnType::String | ColumnType::BlobRef | ColumnType::Json => "pg_catalog.text",
        ColumnType::Integer => "pg_catalog.int8",
        ColumnType::Float => "pg_catalog.float8",
        ColumnType::Boolean => "pg_catalog.bool",
        ColumnType::Bytes | ColumnType::Crdt => "pg_catalog.bytea",
    }
}
