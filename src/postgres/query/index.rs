//! Index lookups (storage-layout §7.6): `scanRowsByIndex` as one statement
//! over a declared index, each value cast to its column's type.

use super::cells::bind_value;
use crate::core::codec::ColumnType;
use crate::core::error::Result;
use crate::core::query::Value;
use crate::core::records::Records;
use crate::core::scan::IndexFold;
use crate::core::schema::{quote_ident, Table};
use crate::core::stored::Form;
use crate::postgres::error::map_err;
use crate::postgres::handle::PgEngine;
use crate::postgres::rows;
use crate::postgres::run::{read, with_tx};
use crate::postgres::stmt::next_row;
use sqlx::{AssertSqlSafe, PgConnection, Row};

/// One index value as bound: booleans from numbers, JSON as text.
enum IndexBind<'v> {
    Bool(bool),
    Text(String),
    Value(&'v Value),
}

/// The comparison with placeholder `$n` for one index value, cast to its
/// column's type, and what to bind. A `json` column holds either the value
/// or, written by a Bun.SQL host, a jsonb string of its text
/// (docs/legacy-forms.md): both match, in one index condition.
fn index_bind(n: usize, ty: Option<ColumnType>, v: &Value) -> (String, IndexBind<'_>) {
    match (ty, v) {
        (Some(ColumnType::Boolean), Value::Integer(i)) => {
            (format!("= ${n}"), IndexBind::Bool(*i != 0))
        }
        (Some(ColumnType::Json), v) => {
            let text = match v {
                Value::Text(s) => s.clone(),
                Value::Integer(i) => i.to_string(),
                Value::Real(f) => f.to_string(),
                _ => String::new(),
            };
            (
                format!("IN (${n}::text::jsonb, to_jsonb(${n}::text))"),
                IndexBind::Text(text),
            )
        }
        (Some(ty), v) => (
            format!("= ${n}::{}", rows::pg_type(ty)),
            IndexBind::Value(v),
        ),
        (None, v) => (format!("= ${n}"), IndexBind::Value(v)),
    }
}

/// Validates an index lookup (codes in the §7.6 order) and runs it, its
/// rows packed as they arrive (`crate::core::scan::IndexFold`).
#[allow(clippy::too_many_arguments)]
pub async fn scan_rows_by_index(
    c: &mut PgConnection, table: &Table, partition: &str, index: &str, values: Option<&[Value]>,
    after_row_id: &str, limit: f64,
) -> Result<Records> {
    let (ix, values, limit) = crate::core::scan::check_index_lookup(table, index, values, limit)?;
    let mut text = format!(
        r#"SELECT {} FROM {} WHERE "_sync_partition" = $1"#,
        rows::ROW_FIELDS,
        table.quoted
    );
    let mut binds = Vec::with_capacity(values.len());
    for (column, v) in ix.columns.iter().zip(values) {
        if matches!(v, Value::Null | Value::Undefined) {
            text.push_str(&format!(" AND {} IS NULL", quote_ident(column)));
        } else {
            let ty = table
                .columns
                .iter()
                .find(|c| &c.name == column)
                .map(|c| c.def.ty);
            let (compare, bind) = index_bind(binds.len() + 2, ty, v);
            binds.push(bind);
            text.push_str(&format!(" AND {} {compare}", quote_ident(column)));
        }
    }
    let n = binds.len() + 1;
    text.push_str(&format!(
        r#" AND "_sync_row_id" > ${} ORDER BY "_sync_row_id" LIMIT ${}"#,
        n + 1,
        n + 2
    ));
    let mut q = crate::postgres::stmt::query(AssertSqlSafe(text)).bind(partition);
    for b in binds {
        q = match b {
            IndexBind::Bool(v) => q.bind(v),
            IndexBind::Text(v) => q.bind(v),
            IndexBind::Value(v) => bind_value(q, v.clone()),
        };
    }
    let mut fold = IndexFold::new(Form::Jsonb, &table.name, partition, limit);
    let mut stream = q.bind(after_row_id).bind(limit).fetch(&mut *c);
    while let Some(r) = next_row(&mut stream).await? {
        // Read in the order a stored row is; `fold` checks the scopes.
        let row_id: &str = r.try_get(0).map_err(map_err)?;
        let server_version: i64 = r.try_get(1).map_err(map_err)?;
        let scopes: &str = r.try_get(2).map_err(map_err)?;
        let payload: &[u8] = r.try_get(3).map_err(map_err)?;
        let column_versions: Option<&[u8]> = r.try_get(4).map_err(map_err)?;
        fold.add(row_id, scopes, (server_version, payload, column_versions))?;
    }
    Ok(fold.finish())
}

impl PgEngine {
    pub async fn scan_rows_by_index(
        &self, partition: &str, table: &str, index: &str, values: Option<&[Value]>,
        after_row_id: &str, limit: f64,
    ) -> Result<Records> {
        let (loaded, i) = self.table(table)?;
        let t = &loaded.schema.tables[i];
        read!(self, |c| scan_rows_by_index(
            c,
            t,
            partition,
            index,
            values,
            after_row_id,
            limit
        )
        .await)
    }

    pub async fn tx_scan_rows_by_index(
        &self, id: u32, table: &str, index: &str, values: Option<&[Value]>, after_row_id: &str,
        limit: f64,
    ) -> Result<Records> {
        let (loaded, i) = self.table(table)?;
        let t = &loaded.schema.tables[i];
        with_tx!(self, id, |_st, c, p| scan_rows_by_index(
            c,
            t,
            &p,
            index,
            values,
            after_row_id,
            limit
        )
        .await)
    }
}
