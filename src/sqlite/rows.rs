//! Row tables: point reads, upserts with their projection and scope index,
//! deletes, tombstones, blob references and scope scans. Every function
//! takes the connection it runs on, so the same code serves a transaction
//! (staged writes visible) and a committed-state reader. Stored scopes are
//! read as JSON objects (`crate::core::stored`); anything else is corrupt.

use super::budget::Budget;
use super::conn::{is_constraint, map_err};
use super::kept::{kept, Conn, RowStmt};
use super::sql::placeholders;
use crate::core::codec::{self, Value};
use crate::core::error::{Error, Result};
use crate::core::model::StoredRow;
use crate::core::records::Records;
use crate::core::schema::{quote_ident, Table};
use crate::core::scope::{scope_pairs, ScopeFilter};
use crate::core::stored::{self, Form};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{params, OptionalExtension, ToSql};

/// A schema with the statement text of each of its tables.
pub type Loaded = crate::core::schema::Loaded<TableSql>;

/// Statement text per row table, built once per loaded schema.
pub struct TableSql {
    /// The table's name, for the errors reads report.
    name: String,
    /// The table's position in its schema: its statements' slots on a
    /// connection (`kept`).
    position: usize,
    select_row: String,
    select_scopes: String,
    upsert: String,
    delete_row: String,
    /// `SELECT` list + `FROM` for scans, ahead of the candidate join.
    table_quoted: String,
}

pub const ROW_FIELDS: &str = r#""_sync_row_id", "_sync_server_version", "_sync_scopes", "_sync_payload", "_sync_column_versions""#;

impl TableSql {
    /// [`TableSql::new`] for each table of a schema in order (as
    /// `Loaded::new` derives them), numbered by position.
    pub fn numbered() -> impl Fn(&Table) -> TableSql {
        let next = std::cell::Cell::new(0);
        move |t| TableSql::new(t, next.replace(next.get() + 1))
    }

    /// `position`: the table's in its schema (any number is correct; one
    /// per table keeps each table's statements prepared).
    pub fn new(t: &Table, position: usize) -> TableSql {
        let q = &t.quoted;
        let app_cols: Vec<String> = if t.materialize {
            t.columns.iter().map(|c| quote_ident(&c.name)).collect()
        } else {
            Vec::new()
        };
        let mut cols = vec![
            r#""_sync_partition""#.to_owned(),
            r#""_sync_row_id""#.to_owned(),
        ];
        cols.extend(app_cols.iter().cloned());
        for m in [
            r#""_sync_server_version""#,
            r#""_sync_scopes""#,
            r#""_sync_payload""#,
            r#""_sync_column_versions""#,
        ] {
            cols.push(m.to_owned());
        }
        let updates: Vec<String> = cols[2..]
            .iter()
            .map(|c| format!("{c} = excluded.{c}"))
            .collect();
        TableSql {
            name: t.name.clone(),
            position,
            select_row: format!(
                r#"SELECT {ROW_FIELDS} FROM {q} WHERE "_sync_partition" = ?1 AND "_sync_row_id" = ?2"#
            ),
            select_scopes: format!(
                r#"SELECT "_sync_scopes" FROM {q} WHERE "_sync_partition" = ?1 AND "_sync_row_id" = ?2"#
            ),
            upsert: format!(
                r#"INSERT INTO {q} ({}) VALUES ({}) ON CONFLICT ("_sync_partition", "_sync_row_id") DO UPDATE SET {}"#,
                cols.join(", "),
                placeholders(cols.len()),
                updates.join(", ")
            ),
            delete_row: format!(
                r#"DELETE FROM {q} WHERE "_sync_partition" = ?1 AND "_sync_row_id" = ?2"#
            ),
            table_quoted: q.clone(),
        }
    }
}

/// A decoded payload value bound as its projection (storage-layout §3.2).
pub struct Projected<'a>(pub &'a Value<'a>);

impl ToSql for Projected<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self.0 {
            Value::Null => ValueRef::Null,
            Value::Text(s) => ValueRef::Text(s.as_bytes()),
            Value::Integer(i) => ValueRef::Integer(*i),
            Value::Float(f) => ValueRef::Real(*f),
            Value::Boolean(b) => ValueRef::Integer(i64::from(*b)),
            Value::Bytes(b) => ValueRef::Blob(b),
        }))
    }
}

/// A JSON column's text. A value that is not TEXT (a BLOB, or NULL in a
/// NOT NULL column) reads as `""`, which no `stored::Shape` accepts, so it
/// is reported as corrupt where it is checked.
pub fn json_text(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<String> {
    Ok(match r.get_ref(i)? {
        ValueRef::Text(t) => String::from_utf8(t.to_vec()).unwrap_or_default(),
        _ => String::new(),
    })
}

/// [`json_text`] of a nullable column: NULL is `None`.
pub fn json_text_opt(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Option<String>> {
    match r.get_ref(i)? {
        ValueRef::Null => Ok(None),
        _ => json_text(r, i).map(Some),
    }
}

/// The row as stored; [`stored::row`] checks its scopes.
fn row_from(r: &rusqlite::Row<'_>, offset: usize) -> rusqlite::Result<StoredRow> {
    Ok(StoredRow {
        row_id: r.get(offset)?,
        server_version: r.get(offset + 1)?,
        scopes_json: json_text(r, offset + 2)?,
        payload: r.get(offset + 3)?,
        column_versions: r.get(offset + 4)?,
    })
}

pub fn get_row(
    conn: &Conn, sql: &TableSql, partition: &str, row_id: &str,
) -> Result<Option<StoredRow>> {
    let mut st = conn
        .kept_row(sql.position, RowStmt::Select, &sql.select_row)
        .map_err(map_err)?;
    st.query_row(params![partition, row_id], |r| row_from(r, 0))
        .optional()
        .map_err(map_err)?
        .map(|row| stored::row(Form::Text, row, &sql.name, partition))
        .transpose()
}

/// The stored scope text as it is (unchecked: the upsert compares it).
pub fn get_row_scopes(
    conn: &Conn, sql: &TableSql, partition: &str, row_id: &str,
) -> Result<Option<String>> {
    let mut st = conn
        .kept_row(sql.position, RowStmt::SelectScopes, &sql.select_scopes)
        .map_err(map_err)?;
    st.query_row(params![partition, row_id], |r| json_text(r, 0))
        .optional()
        .map_err(map_err)
}

/// Writes the full stored row, its projection and its row-scope index
/// entries. A failing projection insert writes nothing.
pub fn upsert_row(
    conn: &Conn, table: &Table, sql: &TableSql, partition: &str, row: &StoredRow,
    op_index: Option<u32>,
) -> Result<()> {
    let new_pairs = scope_pairs(&row.scopes_json)?;
    let values = if table.materialize {
        codec::decode_row(&table.defs, &row.payload)?
    } else {
        Vec::new()
    };
    let old_scopes = get_row_scopes(conn, sql, partition, &row.row_id)?;

    let projected: Vec<Projected<'_>> = values.iter().map(Projected).collect();
    let mut binds: Vec<&dyn ToSql> = Vec::with_capacity(projected.len() + 6);
    binds.push(&partition);
    binds.push(&row.row_id);
    for p in &projected {
        binds.push(p);
    }
    binds.push(&row.server_version);
    binds.push(&row.scopes_json);
    binds.push(&row.payload);
    binds.push(&row.column_versions);
    let mut st = conn
        .kept_row(sql.position, RowStmt::Upsert, &sql.upsert)
        .map_err(map_err)?;
    if let Err(e) = st.execute(&*binds) {
        return Err(if is_constraint(&e) {
            Error::Constraint {
                op_index,
                cause: e.to_string(),
            }
        } else {
            map_err(e)
        });
    }
    if old_scopes.as_deref() != Some(row.scopes_json.as_str()) {
        if old_scopes.is_some() {
            delete_row_keyed(conn, Keyed::RowScopes, partition, &table.name, &row.row_id)?;
        }
        insert_row_scope_entries(conn, partition, &table.name, &row.row_id, &new_pairs)?;
    }
    Ok(())
}

/// Deletes one row's entries from a meta table keyed by
/// (partition, tbl, row_id): row scopes, tombstones, blob references.
/// Each has its statement as a literal (a `format!` per call cost about
/// 900 instructions).
fn delete_row_keyed(
    conn: &Conn, meta_table: Keyed, partition: &str, table: &str, row_id: &str,
) -> Result<()> {
    macro_rules! delete_from {
        ($t:literal) => {
            concat!(
                "DELETE FROM ",
                $t,
                " WHERE partition = ?1 AND tbl = ?2 AND row_id = ?3"
            )
        };
    }
    match meta_table {
        Keyed::RowScopes => kept!(conn, delete_from!("sync_row_scopes")),
        Keyed::Tombstones => kept!(conn, delete_from!("sync_tombstones")),
        Keyed::BlobRefs => kept!(conn, delete_from!("sync_blob_refs")),
    }
    .and_then(|mut st| st.execute(params![partition, table, row_id]))
    .map_err(map_err)?;
    Ok(())
}

/// The meta tables keyed by (partition, tbl, row_id).
#[derive(Clone, Copy)]
enum Keyed {
    RowScopes,
    Tombstones,
    BlobRefs,
}

fn insert_row_scope_entries(
    conn: &Conn, partition: &str, table: &str, row_id: &str, pairs: &[(String, String)],
) -> Result<()> {
    if pairs.is_empty() {
        return Ok(());
    }
    let mut st = kept!(conn, "INSERT OR IGNORE INTO sync_row_scopes (partition, tbl, var, value, row_id) VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .map_err(map_err)?;
    for (var, value) in pairs {
        st.execute(params![partition, table, var, value, row_id])
            .map_err(map_err)?;
    }
    Ok(())
}

/// Removes the row, its scope entries and its blob references; the
/// tombstone comes from `appendCommit`.
pub fn delete_row(
    conn: &Conn, table: &Table, sql: &TableSql, partition: &str, row_id: &str,
) -> Result<()> {
    delete_row_keyed(conn, Keyed::RowScopes, partition, &table.name, row_id)?;
    let mut st = conn
        .kept_row(sql.position, RowStmt::Delete, &sql.delete_row)
        .map_err(map_err)?;
    st.execute(params![partition, row_id]).map_err(|e| {
        if is_constraint(&e) {
            Error::Constraint {
                op_index: None,
                cause: e.to_string(),
            }
        } else {
            map_err(e)
        }
    })?;
    delete_row_keyed(conn, Keyed::BlobRefs, partition, &table.name, row_id)
}

pub fn get_tombstone_seq(
    conn: &Conn, partition: &str, table: &str, row_id: &str,
) -> Result<Option<i64>> {
    kept!(
        conn,
        "SELECT commit_seq FROM sync_tombstones WHERE partition = ?1 AND tbl = ?2 AND row_id = ?3",
    )
    .and_then(|mut st| {
        st.query_row(params![partition, table, row_id], |r| r.get(0))
            .optional()
    })
    .map_err(map_err)
}

pub fn clear_tombstone(conn: &Conn, partition: &str, table: &str, row_id: &str) -> Result<()> {
    delete_row_keyed(conn, Keyed::Tombstones, partition, table, row_id)
}

pub fn set_blob_refs(
    conn: &Conn, partition: &str, table: &str, row_id: &str, blob_ids: &[String],
) -> Result<()> {
    delete_row_keyed(conn, Keyed::BlobRefs, partition, table, row_id)?;
    let mut st = kept!(conn, "INSERT OR IGNORE INTO sync_blob_refs (partition, tbl, row_id, blob_id) VALUES (?1, ?2, ?3, ?4)")
        .map_err(map_err)?;
    for id in blob_ids {
        st.execute(params![partition, table, row_id, id])
            .map_err(map_err)?;
    }
    Ok(())
}

/// One page of a scope scan (storage-layout §7.5): candidates from the
/// row-scope index on the first filter variable, verified against the
/// whole filter, ordered by the database's TEXT order of `row_id`.
pub fn scan_rows(
    conn: &Conn, table: &Table, sql: &TableSql, partition: &str, filter: &ScopeFilter,
    after_row_id: &str, limit: i64,
) -> Result<Records> {
    scan_rows_within(
        conn,
        table,
        sql,
        partition,
        filter,
        after_row_id,
        limit,
        Budget::unbounded(),
    )
}

/// [`scan_rows`], failing with `OVER_BUDGET` once it would step
/// more rows, or copy more payload bytes, than `budget` allows.
#[allow(clippy::too_many_arguments)]
pub fn scan_rows_within(
    conn: &Conn, table: &Table, sql: &TableSql, partition: &str, filter: &ScopeFilter,
    after_row_id: &str, limit: i64, mut budget: Budget,
) -> Result<Records> {
    let Some((var, values)) = filter.probe() else {
        return Err(Error::query("sync.storage.scan_requires_scope"));
    };
    if values.is_empty() || limit <= 0 {
        return Ok(Records::none());
    }
    let batch = limit.max(64);
    // One value (the common case): the scope index delivers row ids in
    // order and distinct, so a plain join needs no sort. Several values:
    // DISTINCT candidates, and the page is ordered here rather than by a
    // SQL sort that would copy every payload through a temporary b-tree.
    let single = values.len() == 1;
    let set = super::sql::ValueSet::new(values);
    let text = if single {
        format!(
            r#"SELECT s.row_id, t."_sync_server_version", t."_sync_scopes", t."_sync_payload", t."_sync_column_versions"
FROM sync_row_scopes s
LEFT JOIN {} t ON t."_sync_partition" = ?1 AND t."_sync_row_id" = s.row_id
WHERE s.partition = ?1 AND s.tbl = ?2 AND s.var = ?3 AND s.row_id > ?4 AND s.value = ?6
ORDER BY s.row_id LIMIT ?5"#,
            sql.table_quoted
        )
    } else {
        format!(
            r#"SELECT c.row_id, t."_sync_server_version", t."_sync_scopes", t."_sync_payload", t."_sync_column_versions"
FROM (SELECT DISTINCT row_id FROM sync_row_scopes
      WHERE partition = ?1 AND tbl = ?2 AND var = ?3 AND row_id > ?4 AND value IN ({})
      ORDER BY row_id LIMIT ?5) c
LEFT JOIN {} t ON t."_sync_partition" = ?1 AND t."_sync_row_id" = c.row_id"#,
            set.sql(6),
            sql.table_quoted
        )
    };
    let mut fold =
        crate::core::scan::ScanFold::new(filter, &table.name, partition, after_row_id, limit);
    if single
        && merged(
            conn,
            sql,
            partition,
            (&table.name, var, &values[0]),
            &mut fold,
            &mut budget,
        )?
    {
        return Ok(fold.finish());
    }
    let mut st = conn.prepare_cached(&text).map_err(map_err)?;
    let mut after = String::new();
    loop {
        after.clone_from(&fold.after);
        let mut binds: Vec<&dyn ToSql> = vec![&partition, &table.name, &var, &after, &batch];
        set.bind(&mut binds);
        let mut rows = st.query(&*binds).map_err(map_err)?;
        if single {
            // In order already: fold while stepping, and build only the
            // rows that pass the filter.
            while let Some(r) = rows.next().map_err(map_err)? {
                budget.step()?;
                let row_id = text_ref(r, 0)?;
                // Not TEXT (or not UTF-8): "", which the filter reports.
                let scopes = match r.get_ref(3).map_err(map_err)? {
                    ValueRef::Null => None,
                    _ => Some(text_ref(r, 2).unwrap_or("")),
                };
                if !fold.offer(row_id, scopes, || rest_of(r, &mut budget))? {
                    return Ok(fold.finish());
                }
            }
        } else {
            let mut page: Vec<(String, Option<StoredRow>)> = Vec::new();
            while let Some(r) = rows.next().map_err(map_err)? {
                budget.step()?;
                let row_id: String = r.get(0).map_err(map_err)?;
                let payload: Option<Vec<u8>> = r.get(3).map_err(map_err)?;
                budget.copy(payload.as_ref().map_or(0, Vec::len))?;
                let row = match payload {
                    Some(payload) => Some(StoredRow {
                        row_id: row_id.clone(),
                        server_version: r.get(1).map_err(map_err)?,
                        scopes_json: json_text(r, 2).map_err(map_err)?,
                        payload,
                        column_versions: r.get(4).map_err(map_err)?,
                    }),
                    None => None,
                };
                page.push((row_id, row));
            }
            // SQLite's BINARY collation is byte order, which is str order.
            page.sort_by(|a, b| a.0.cmp(&b.0));
            for (row_id, row) in page {
                if !fold.add(row_id, row)? {
                    return Ok(fold.finish());
                }
            }
        }
        drop(rows);
        if !fold.next_page() {
            return Ok(fold.finish());
        }
    }
}

/// Table rows a merged scan may step past beyond one per candidate before
/// it judges the table sparse in the scope and hands over to the join.
const MERGE_SLACK: i64 = 32;

/// A one-value scan as two walks in `row_id` order merged here: the scope
/// index's candidates and the row table's rows after the cursor. Stepping
/// to the table's next row costs a fraction of the join's seek of each
/// candidate in the table's key index (memcmp-heavy descents of
/// `(partition, row_id)`, the most of a bootstrap page's SQLite time). A
/// table whose rows mostly lie outside the scope would be walked in vain,
/// so once the walk has stepped past more than one row per candidate (plus
/// [`MERGE_SLACK`]), or meets a row id that is not text, it stops with
/// `false` and the join goes on from the fold's cursor (the candidate at
/// hand not yet offered). `true`: the scan is complete in `fold`.
fn merged(
    conn: &Conn, sql: &TableSql, partition: &str, (table, var, value): (&str, &str, &str),
    fold: &mut crate::core::scan::ScanFold<'_>, budget: &mut Budget,
) -> Result<bool> {
    let mut cands = kept!(
        conn,
        "SELECT row_id FROM sync_row_scopes
         WHERE partition = ?1 AND tbl = ?2 AND var = ?3 AND value = ?4 AND row_id > ?5
         ORDER BY row_id",
    )
    .map_err(map_err)?;
    let text = format!(
        r#"SELECT {ROW_FIELDS} FROM {} WHERE "_sync_partition" = ?1 AND "_sync_row_id" > ?2 ORDER BY "_sync_row_id""#,
        sql.table_quoted
    );
    let mut walk = conn.prepare_cached(&text).map_err(map_err)?;
    let after = fold.after.clone();
    let mut c = cands
        .query(params![partition, table, var, value, &after])
        .map_err(map_err)?;
    let mut t = walk.query(params![partition, &after]).map_err(map_err)?;
    let mut row = t.next().map_err(map_err)?;
    let (mut candidates, mut passed) = (0i64, 0i64);
    while let Some(cr) = c.next().map_err(map_err)? {
        budget.step()?;
        candidates += 1;
        let id = text_ref(cr, 0)?;
        // The table's walk up to the candidate.
        let hit = loop {
            let Some(r) = row else { break None };
            let Ok(at) = r.get_ref(0).map_err(map_err)?.as_str() else {
                return Ok(false);
            };
            match at.cmp(id) {
                std::cmp::Ordering::Less => {
                    passed += 1;
                    if passed > candidates + MERGE_SLACK {
                        return Ok(false);
                    }
                    budget.step()?;
                    row = t.next().map_err(map_err)?;
                }
                std::cmp::Ordering::Equal => break Some(r),
                std::cmp::Ordering::Greater => break None,
            }
        };
        // As the join reads it: no row (or no payload), no scopes.
        let scopes = match hit {
            Some(r) => match r.get_ref(3).map_err(map_err)? {
                ValueRef::Null => None,
                _ => Some(text_ref(r, 2).unwrap_or("")),
            },
            None => None,
        };
        let more = fold.offer(id, scopes, || {
            rest_of(hit.expect("scopes come from a hit"), budget)
        })?;
        if !more {
            return Ok(true);
        }
        if hit.is_some() {
            row = t.next().map_err(map_err)?;
        }
    }
    Ok(true)
}

/// Whether at most `cap` candidate rows of a one-value scan follow
/// `after_row_id`: an index-only walk of at most `cap + 1` entries, the
/// bound a scan is judged by before it runs on the calling thread.
pub fn few_candidates(
    conn: &Conn, table: &str, partition: &str, filter: &ScopeFilter, after_row_id: &str, cap: i64,
) -> Result<bool> {
    let Some((var, [value])) = filter.probe() else {
        return Ok(false);
    };
    let mut st = kept!(
        conn,
        "SELECT count(*) FROM (SELECT 1 FROM sync_row_scopes
             WHERE partition = ?1 AND tbl = ?2 AND var = ?3 AND value = ?4 AND row_id > ?5
             LIMIT ?6)",
    )
    .map_err(map_err)?;
    let n: i64 = st
        .query_row(
            params![partition, table, var, value, after_row_id, cap + 1],
            |r| r.get(0),
        )
        .map_err(map_err)?;
    Ok(n <= cap)
}

/// A matched row's `serverVersion`, payload and column versions, borrowed
/// from the row being stepped (columns 1, 3 and 4), as `Row::get` would
/// read them into owned values (a payload that is not a BLOB is corrupt).
fn rest_of<'r>(
    r: &'r rusqlite::Row<'_>, budget: &mut Budget,
) -> Result<crate::core::scan::RowRest<'r>> {
    let blob = |i: usize, null: bool| -> Result<Option<&'r [u8]>> {
        let v = r.get_ref(i).map_err(map_err)?;
        match v {
            ValueRef::Blob(b) => Ok(Some(b)),
            ValueRef::Null if null => Ok(None),
            _ => {
                let stmt: &rusqlite::Statement<'_> = r.as_ref();
                let name = stmt.column_name(i).unwrap_or_default().to_owned();
                Err(map_err(rusqlite::Error::InvalidColumnType(
                    i,
                    name,
                    v.data_type(),
                )))
            }
        }
    };
    let payload = blob(3, false)?.unwrap_or_default();
    budget.copy(payload.len())?;
    Ok((r.get(1).map_err(map_err)?, payload, blob(4, true)?))
}

/// A row read by [`ROW_FIELDS`] (an index lookup's), packed into `fold`
/// borrowed from the row being stepped. Stored scopes that are not TEXT
/// (or not UTF-8) read as `""`, which `fold` reports as corrupt.
pub fn fold_row(r: &rusqlite::Row<'_>, fold: &mut crate::core::scan::IndexFold<'_>) -> Result<()> {
    let row_id = text_ref(r, 0)?;
    let scopes = text_ref(r, 2).unwrap_or("");
    fold.add(row_id, scopes, rest_of(r, &mut Budget::unbounded())?)
}

/// A TEXT column borrowed from the current row.
fn text_ref<'r>(r: &'r rusqlite::Row<'_>, i: usize) -> Result<&'r str> {
    r.get_ref(i)
        .and_then(|v| {
            v.as_str().map_err(|e| {
                rusqlite::Error::FromSqlConversionFailure(i, v.data_type(), Box::new(e))
            })
        })
        .map_err(map_err)
}
