//! Registered authoritative queries (storage-layout §13) and index lookups
//! (§7.6) on SQLite. The rewrite itself is engine-neutral (`crate::query`);
//! this file executes it.
//!
//! Defence in depth: a prepared registered query compiles under an
//! authorizer that allows only SELECT, reads and function calls, denies
//! every read of an internal table (`sync_*`, `sqlite_*`), of an app table
//! the request does not declare, and of an app table's `_sync_*` columns
//! other than the `_sync_partition` filter; the statement must also report
//! itself read-only.

use super::conn::map_err;
use super::{log, meta, rows, Loaded, SqliteEngine};
use crate::error::{Error, Result};
use crate::model::{ServeGate, StoredRow};
use crate::query::{self, Bind, Prepared, Request, Value};
use crate::schema::{quote_ident, Table};
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::types::{ToSqlOutput, Value as SqlValue, ValueRef};
use rusqlite::{Connection, ToSql};
use std::sync::Arc;

/// Rows of a registered query, with the snapshot's cursor.
#[derive(Debug)]
pub struct QueryOutput {
    /// The serve gate read first in the same snapshot, when asked for.
    pub gate: Option<ServeGate>,
    /// When the gate was asked for and the query failed: the failure, left
    /// for the caller to report unless the gate refuses first.
    pub error: Option<Error>,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<SqlValue>>,
    pub max_commit_seq: i64,
}

struct Bound<'a>(&'a Value);

impl ToSql for Bound<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self.0 {
            Value::Null | Value::Undefined => ValueRef::Null,
            Value::Integer(i) => ValueRef::Integer(*i),
            Value::Real(f) => ValueRef::Real(*f),
            Value::Text(s) => ValueRef::Text(s.as_bytes()),
            Value::Blob(b) => ValueRef::Blob(b),
        }))
    }
}

/// Clears the authorizer when the query is done, whatever happened.
struct AuthorizerGuard<'c>(&'c Connection);

impl Drop for AuthorizerGuard<'_> {
    fn drop(&mut self) {
        self.0
            .authorizer(None::<fn(AuthContext<'_>) -> Authorization>);
    }
}

fn install_authorizer<'c>(
    conn: &'c Connection,
    loaded: &Loaded,
    declared: &[String],
) -> AuthorizerGuard<'c> {
    let schema_tables: Vec<String> = loaded
        .schema
        .tables
        .iter()
        .map(|t| t.name.to_ascii_lowercase())
        .collect();
    let declared: Vec<String> = declared.iter().map(|t| t.to_ascii_lowercase()).collect();
    conn.authorizer(Some(move |ctx: AuthContext<'_>| match ctx.action {
        AuthAction::Select | AuthAction::Recursive | AuthAction::Function { .. } => {
            Authorization::Allow
        }
        AuthAction::Read {
            table_name,
            column_name,
        } => {
            let table = table_name.to_ascii_lowercase();
            if table.starts_with("sync_") || table.starts_with("sqlite_") {
                return Authorization::Deny;
            }
            if schema_tables.contains(&table) {
                let column = column_name.to_ascii_lowercase();
                let meta = column.starts_with("_sync") && column != "_sync_partition";
                if !declared.contains(&table) || meta {
                    return Authorization::Deny;
                }
            }
            Authorization::Allow
        }
        _ => Authorization::Deny,
    }));
    AuthorizerGuard(conn)
}

fn refused(msg: &str) -> Error {
    Error::plain(query::REFUSED, msg)
}

/// Runs a prepared query on `conn` and collects its rows.
fn execute(
    conn: &Connection,
    loaded: &Loaded,
    prepared: &Prepared,
    params: &[Value],
    partition: &str,
) -> Result<(Vec<String>, Vec<Vec<SqlValue>>)> {
    let _auth = install_authorizer(conn, loaded, &prepared.tables);
    let mut st = conn.prepare(&prepared.sql).map_err(|e| match &e {
        rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::AuthorizationForStatementDenied => {
            refused("registered query reads something it may not (an internal table, an undeclared table or a _sync_* column), or is not a plain SELECT")
        }
        rusqlite::Error::MultipleStatement => refused(query::MSG_ONE_SELECT),
        _ => map_err(e),
    })?;
    if !st.readonly() {
        return Err(refused("registered query must be one read-only SELECT"));
    }
    if st.parameter_count() != prepared.binds.len() {
        return Err(Error::plain(query::PLAN_ERROR, query::MSG_BINDS));
    }
    let partition_value = Value::Text(partition.to_owned());
    for (i, b) in prepared.binds.iter().enumerate() {
        let v = match b {
            Bind::Partition => &partition_value,
            Bind::Param(p) => &params[*p],
        };
        st.raw_bind_parameter(i + 1, Bound(v)).map_err(map_err)?;
    }
    let columns: Vec<String> = st.column_names().into_iter().map(str::to_owned).collect();
    let n = columns.len();
    let mut out = Vec::new();
    let mut rows = st.raw_query();
    while let Some(r) = rows.next().map_err(map_err)? {
        let mut row = Vec::with_capacity(n);
        for i in 0..n {
            row.push(SqlValue::from(r.get_ref(i).map_err(map_err)?));
        }
        out.push(row);
    }
    Ok((columns, out))
}

// ---- index lookups (§7.6) ---------------------------------------------------------

const INDEX_ROW_FIELDS: &str = r#""_sync_row_id", "_sync_server_version", "_sync_scopes", "_sync_payload", "_sync_column_versions""#;

/// Validates an index lookup (codes in the §7.6 order) and runs it.
/// `values` is `None` when the caller's `values` is not an array.
#[allow(clippy::too_many_arguments)]
pub fn scan_rows_by_index(
    conn: &Connection,
    table: &Table,
    partition: &str,
    index: &str,
    values: Option<&[Value]>,
    after_row_id: &str,
    limit: f64,
) -> Result<Vec<StoredRow>> {
    let (ix, values, limit) = crate::scan::check_index_lookup(table, index, values, limit)?;
    let mut text = format!(
        r#"SELECT {INDEX_ROW_FIELDS} FROM {} WHERE "_sync_partition" = ?"#,
        table.quoted
    );
    let mut binds: Vec<Bound<'_>> = Vec::with_capacity(values.len());
    for (column, v) in ix.columns.iter().zip(values) {
        if matches!(v, Value::Null | Value::Undefined) {
            text.push_str(&format!(" AND {} IS NULL", quote_ident(column)));
        } else {
            text.push_str(&format!(" AND {} = ?", quote_ident(column)));
            binds.push(Bound(v));
        }
    }
    text.push_str(r#" AND "_sync_row_id" > ? ORDER BY "_sync_row_id" LIMIT ?"#);
    let mut all: Vec<&dyn ToSql> = Vec::with_capacity(binds.len() + 3);
    all.push(&partition);
    for b in &binds {
        all.push(b);
    }
    all.push(&after_row_id);
    all.push(&limit);
    let mut st = conn.prepare_cached(&text).map_err(map_err)?;
    let rows = st
        .query_map(&*all, |r| rows::row_from(r, 0))
        .map_err(map_err)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(map_err)
}

impl SqliteEngine {
    /// The loaded schema; registered queries refuse to run before
    /// `ensureSchema`.
    fn registered_schema(&self) -> Result<Arc<Loaded>> {
        query::ensured(&self.loaded)
    }

    fn prepare_query(
        &self,
        req: &Request,
        params: &[Value],
        declared: &[String],
    ) -> Result<(Arc<Loaded>, Prepared)> {
        let loaded = self.registered_schema()?;
        let prepared = query::prepare(req, params, declared, &loaded.schema)?;
        Ok((loaded, prepared))
    }

    /// Storage-level `queryAuthoritative`: one read snapshot holding the
    /// serve gate (when `gate_running` is given), the rows, and
    /// `max_commit_seq`.
    pub fn query_authoritative(
        &self,
        partition: &str,
        req: &Request,
        params: &[Value],
        declared: &[String],
        gate_running: Option<i64>,
    ) -> Result<QueryOutput> {
        let (loaded, prepared) = self.prepare_query(req, params, declared)?;
        self.read_snapshot(|c| {
            let gate = gate_running
                .map(|running| meta::read_serve_gate(c, partition, running))
                .transpose()?;
            let (columns, rows, error) = match execute(c, &loaded, &prepared, params, partition) {
                Ok((columns, rows)) => (columns, rows, None),
                Err(e) if gate.is_some() => (Vec::new(), Vec::new(), Some(e)),
                Err(e) => return Err(e),
            };
            let max_commit_seq = log::max_commit_seq(c, partition)?;
            Ok(QueryOutput {
                gate,
                error,
                columns,
                rows,
                max_commit_seq,
            })
        })
    }

    /// `tx.queryAuthoritative`: on the transaction's connection, staged
    /// writes visible, no gate.
    pub fn tx_query_authoritative(
        &self,
        id: u32,
        req: &Request,
        params: &[Value],
        declared: &[String],
    ) -> Result<QueryOutput> {
        let (loaded, prepared) = self.prepare_query(req, params, declared)?;
        self.with_tx(id, |h, p| {
            let (columns, rows) = execute(h.conn, &loaded, &prepared, params, p)?;
            Ok(QueryOutput {
                gate: None,
                error: None,
                columns,
                rows,
                max_commit_seq: log::max_commit_seq(h.conn, p)?,
            })
        })
    }

    pub fn scan_rows_by_index(
        &self,
        partition: &str,
        table: &str,
        index: &str,
        values: Option<&[Value]>,
        after_row_id: &str,
        limit: f64,
    ) -> Result<Vec<StoredRow>> {
        self.table_sql(table, |t, _| {
            self.read(|c| scan_rows_by_index(c, t, partition, index, values, after_row_id, limit))
        })
    }

    pub fn tx_scan_rows_by_index(
        &self,
        id: u32,
        table: &str,
        index: &str,
        values: Option<&[Value]>,
        after_row_id: &str,
        limit: f64,
    ) -> Result<Vec<StoredRow>> {
        self.table_sql(table, |t, _| {
            self.with_tx(id, |h, p| {
                scan_rows_by_index(h.conn, t, p, index, values, after_row_id, limit)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Schema;

    fn setup() -> (Connection, Loaded) {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            r#"CREATE TABLE tasks("_sync_partition" TEXT, "_sync_row_id" TEXT, id TEXT, title TEXT, "_sync_payload" BLOB);
               INSERT INTO tasks VALUES ('p1', 'r1', 'r1', 'mine', x'00'), ('p2', 'r2', 'r2', 'theirs', x'00');
               CREATE TABLE sync_commits(partition TEXT, commit_seq INTEGER);"#,
        )
        .unwrap();
        let schema = Schema::parse(
            r#"{"version":1,"tables":[{"name":"tasks","columns":[{"name":"id","type":"string","nullable":false},
               {"name":"title","type":"string","nullable":false}],"primaryKeyIndex":0,"materialize":true,"indexes":[]}]}"#,
        )
        .unwrap();
        (conn, Loaded::new(schema))
    }

    /// Runs SQL that skipped the rewrite, as if the rewrite had a hole.
    fn raw(
        conn: &Connection,
        loaded: &Loaded,
        sql: &str,
        tables: &[&str],
    ) -> Result<Vec<Vec<SqlValue>>> {
        let prepared = Prepared {
            sql: sql.into(),
            binds: vec![],
            tables: tables.iter().map(|t| t.to_string()).collect(),
        };
        execute(conn, loaded, &prepared, &[], "p1").map(|(_, rows)| rows)
    }

    fn is_refused(r: Result<Vec<Vec<SqlValue>>>) -> bool {
        matches!(r, Err(Error::Plain { code, .. }) if code == query::REFUSED)
    }

    #[test]
    fn authorizer_denies_what_the_rewrite_must_never_produce() {
        let (conn, loaded) = setup();
        assert!(is_refused(raw(
            &conn,
            &loaded,
            "SELECT * FROM sync_commits",
            &[]
        )));
        assert!(is_refused(raw(
            &conn,
            &loaded,
            "SELECT name FROM sqlite_master",
            &[]
        )));
        assert!(is_refused(raw(&conn, &loaded, "SELECT id FROM tasks", &[])));
        assert!(is_refused(raw(
            &conn,
            &loaded,
            "SELECT \"_sync_payload\" FROM tasks",
            &["tasks"]
        )));
        assert!(is_refused(raw(
            &conn,
            &loaded,
            "DELETE FROM tasks",
            &["tasks"]
        )));
        assert!(is_refused(raw(
            &conn,
            &loaded,
            "PRAGMA user_version = 3",
            &[]
        )));
        assert!(is_refused(raw(&conn, &loaded, "SELECT 1; SELECT 2", &[])));
        // The rewritten shape passes, and the authorizer is gone afterwards.
        let rows = raw(
            &conn,
            &loaded,
            r#"SELECT title FROM (SELECT "id", "title" FROM "tasks" WHERE "_sync_partition" = 'p1') AS "tasks""#,
            &["tasks"],
        )
        .unwrap();
        assert_eq!(rows, vec![vec![SqlValue::Text("mine".into())]]);
        conn.execute_batch("DELETE FROM sync_commits").unwrap();
    }
}
