//! Admin console and blob reads on PostgreSQL (storage-layout §17). The
//! records are `sqlite::admin`'s; multi-statement reads share one
//! REPEATABLE READ snapshot.

use super::error::map_err;
use super::handle::PgEngine;
use super::run::{read, snapshot};
use crate::core::error::Result;
use crate::core::model::admin::{BlobReferencingRow, CommitMetadata, ScopeActivity};
use crate::core::schema::quote_ident;
use crate::core::stored::{self, Form, Shape};
use crate::postgres::handle::pg;
use crate::seam::{Admin, Call};
use sqlx::{AssertSqlSafe, PgConnection, Row};
use std::sync::Arc;

/// Changes per (commit, table) of the listed commits, ordered by table.
const CHANGES_PER_TABLE: &str = "SELECT commit_seq, tbl, count(*) FROM sync_changes \
WHERE partition = $1 AND commit_seq = ANY($2) GROUP BY commit_seq, tbl ORDER BY commit_seq, tbl";

const SCOPE_ACTIVITY: &str = "SELECT s.commit_seq, s.tbl, c.created_at_ms, c.actor_id, \
(SELECT count(*) FROM sync_changes ch WHERE ch.partition = s.partition AND ch.commit_seq = s.commit_seq AND ch.tbl = s.tbl) \
FROM (SELECT DISTINCT partition, commit_seq, tbl FROM sync_change_scopes \
WHERE partition = $1 AND var = $2 AND value = $3 ORDER BY commit_seq DESC, tbl LIMIT $4) s \
JOIN sync_commits c ON c.partition = s.partition AND c.commit_seq = s.commit_seq \
ORDER BY s.commit_seq DESC, s.tbl";

/// A negative limit means no limit, as on SQLite.
fn limit_of(limit: i64) -> Option<i64> {
    (limit >= 0).then_some(limit)
}

pub async fn list_commit_metadata(
    c: &mut PgConnection, partition: &str, after_seq: i64, limit: i64, table: Option<&str>,
) -> Result<Vec<CommitMetadata>> {
    let touching = if table.is_some() {
        " AND EXISTS (SELECT 1 FROM sync_changes ch WHERE ch.partition = c.partition \
AND ch.commit_seq = c.commit_seq AND ch.tbl = $4)"
    } else {
        ""
    };
    let mut q = crate::postgres::stmt::query(AssertSqlSafe(format!(
        "SELECT c.commit_seq, c.client_id, c.client_commit_id, c.actor_id, c.created_at_ms \
FROM sync_commits c WHERE c.partition = $1 AND c.commit_seq > $2{touching} \
ORDER BY c.commit_seq DESC LIMIT $3"
    )))
    .bind(partition)
    .bind(after_seq)
    .bind(limit_of(limit));
    if let Some(t) = table {
        q = q.bind(t);
    }
    let rows = q.fetch_all(&mut *c).await.map_err(map_err)?;
    let mut commits = rows
        .iter()
        .map(|r| {
            Ok(CommitMetadata {
                commit_seq: r.try_get(0).map_err(map_err)?,
                client_id: r.try_get(1).map_err(map_err)?,
                client_commit_id: r.try_get(2).map_err(map_err)?,
                actor_id: r.try_get(3).map_err(map_err)?,
                created_at_ms: r.try_get(4).map_err(map_err)?,
                change_count: 0,
                tables: Vec::new(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    if commits.is_empty() {
        return Ok(commits);
    }
    let seqs: Vec<i64> = commits.iter().map(|m| m.commit_seq).collect();
    let per_table = crate::postgres::stmt::query(CHANGES_PER_TABLE)
        .bind(partition)
        .bind(&seqs)
        .fetch_all(&mut *c)
        .await
        .map_err(map_err)?;
    let at: std::collections::HashMap<i64, usize> =
        seqs.iter().enumerate().map(|(i, s)| (*s, i)).collect();
    for r in &per_table {
        let seq: i64 = r.try_get(0).map_err(map_err)?;
        if let Some(&i) = at.get(&seq) {
            commits[i].tables.push(r.try_get(1).map_err(map_err)?);
            commits[i].change_count += r.try_get::<i64, _>(2).map_err(map_err)?;
        }
    }
    Ok(commits)
}

pub async fn scope_activity(
    c: &mut PgConnection, partition: &str, variable: &str, value: &str, limit: i64,
) -> Result<Vec<ScopeActivity>> {
    let rows = crate::postgres::stmt::query(SCOPE_ACTIVITY)
        .bind(partition)
        .bind(variable)
        .bind(value)
        .bind(limit_of(limit))
        .fetch_all(&mut *c)
        .await
        .map_err(map_err)?;
    rows.iter()
        .map(|r| {
            Ok(ScopeActivity {
                commit_seq: r.try_get(0).map_err(map_err)?,
                table: r.try_get(1).map_err(map_err)?,
                created_at_ms: r.try_get(2).map_err(map_err)?,
                actor_id: r.try_get(3).map_err(map_err)?,
                change_count: r.try_get(4).map_err(map_err)?,
            })
        })
        .collect()
}

/// `(serverVersion, scopes JSON)` without reading the payload; the scopes
/// in either JSONB form (`crate::core::stored`).
pub async fn row_scopes(
    c: &mut PgConnection, table: &str, partition: &str, row_id: &str,
) -> Result<Option<(i64, String)>> {
    let r = crate::postgres::stmt::query(AssertSqlSafe(format!(
        r#"SELECT "_sync_server_version", "_sync_scopes"::text FROM {} WHERE "_sync_partition" = $1 AND "_sync_row_id" = $2"#,
        quote_ident(table)
    )))
    .bind(partition)
    .bind(row_id)
    .fetch_optional(&mut *c)
    .await
    .map_err(map_err)?;
    r.map(|r| {
        let scopes = stored::read(Form::Jsonb, r.try_get(1).map_err(map_err)?, Shape::Object)
            .ok_or_else(|| stored::row_corrupt(table, partition, row_id))?;
        Ok((r.try_get(0).map_err(map_err)?, scopes))
    })
    .transpose()
}

impl PgEngine {
    pub async fn list_commit_metadata(
        &self, partition: &str, after_seq: i64, limit: i64, table: Option<&str>,
    ) -> Result<Vec<CommitMetadata>> {
        snapshot!(self, |c| list_commit_metadata(
            c, partition, after_seq, limit, table
        )
        .await)
    }
}

impl Admin for Arc<PgEngine> {
    fn list_commit_metadata(
        &self, p: String, after_seq: i64, limit: i64, table: Option<String>,
    ) -> Call<Vec<CommitMetadata>> {
        pg!(self, |e| e
            .list_commit_metadata(&p, after_seq, limit, table.as_deref())
            .await)
    }

    fn scope_activity(
        &self, partition: String, variable: String, value: String, limit: i64,
    ) -> Call<Vec<ScopeActivity>> {
        pg!(self, |this| {
            read!(this, |c| scope_activity(
                c, &partition, &variable, &value, limit
            )
            .await)
        })
    }

    /// Unknown tables fail with the unknown-table error.
    fn get_row_scopes(
        &self, partition: String, table: String, row_id: String,
    ) -> Call<Option<(i64, String)>> {
        pg!(self, |this| {
            let (loaded, i) = this.table(&table)?;
            let name = &loaded.schema.tables[i].name;
            read!(this, |c| row_scopes(c, name, &partition, &row_id).await)
        })
    }

    /// Live rows referencing `blob_id`, with their stored scopes; references
    /// to tables outside the loaded schema or to missing rows are skipped.
    fn list_rows_referencing_blob(
        &self, partition: String, blob_id: String,
    ) -> Call<Vec<BlobReferencingRow>> {
        pg!(self, |this| {
            let loaded = this.loaded();
            snapshot!(this, |c| {
                let refs = crate::postgres::stmt::query(
                    "SELECT tbl, row_id FROM sync_blob_refs WHERE partition = $1 AND blob_id = $2",
                )
                .bind(&partition)
                .bind(&blob_id)
                .fetch_all(&mut *c)
                .await
                .map_err(map_err)?;
                let mut out = Vec::new();
                for r in &refs {
                    let table: String = r.try_get(0).map_err(map_err)?;
                    let row_id: String = r.try_get(1).map_err(map_err)?;
                    if loaded.schema.index_of(&table).is_err() {
                        continue;
                    }
                    if let Some((_, scopes_json)) =
                        row_scopes(c, &table, &partition, &row_id).await?
                    {
                        out.push(BlobReferencingRow {
                            table,
                            row_id,
                            scopes_json,
                        });
                    }
                }
                Ok(out)
            })
        })
    }

    fn list_referenced_blob_ids(&self, partition: String) -> Call<Vec<String>> {
        pg!(self, |this| {
            read!(this, |c| {
                crate::postgres::stmt::query_scalar(
            "SELECT DISTINCT blob_id FROM sync_blob_refs WHERE partition = $1 ORDER BY blob_id"
        )
        .bind(&partition)
        .fetch_all(&mut *c)
        .await
        .map_err(map_err)
            })
        })
    }
}
