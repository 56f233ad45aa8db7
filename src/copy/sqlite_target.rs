//! The SQLite side of the copy from PostgreSQL (docs/copy.md, "PostgreSQL
//! → SQLite"): the target file a url names, its refusal when it holds
//! sync data, its meta layout made by the SQLite engine's own first open,
//! and the connection the bulk load runs on: one transaction in rollback-
//! journal mode (new pages are not journaled, so the load writes each page
//! once, and an interrupted load leaves the file as the engine made it),
//! WAL again after it, as every storage keeps the file.

use super::pg_source::{Plan, RowTable};
use super::sq;
use crate::core::error::{Error, Result};
use crate::core::meta_layout::TABLES;
use crate::core::migrate;
use crate::core::schema::quote_ident;
use crate::sqlite::{Location, SqliteEngine};
use rusqlite::{Connection, OpenFlags};
use std::sync::Arc;

/// The SQLite file a copy writes, and the engine that makes its layout.
pub struct Target {
    pub path: String,
    pub url: String,
}

impl Target {
    /// The file `url` names. Refuses a PostgreSQL url (copying PostgreSQL
    /// to PostgreSQL is not supported) and a memory database.
    pub fn parse(url: &str) -> Result<Target> {
        if crate::open::is_postgres_url(url) {
            return Err(super::unsupported(
                "copying from PostgreSQL to PostgreSQL is not supported: the target of a copy from PostgreSQL is a SQLite file (sqlite:./backup.db)",
            ));
        }
        // The url's scheme checked as a storage's would be.
        drop(Self::engine_at(url)?);
        match Location::parse(Some(url))? {
            Location::File(path) => Ok(Target {
                path,
                url: url.to_owned(),
            }),
            Location::Memory => Err(super::unsupported(
                "the target of a copy must be a file: a memory database would end with the copy",
            )),
        }
    }

    /// A storage's engine on the file; nothing opens until it is used.
    pub fn engine(&self) -> Result<Arc<SqliteEngine>> {
        Self::engine_at(&self.url)
    }

    fn engine_at(url: &str) -> Result<Arc<SqliteEngine>> {
        crate::open::open(crate::open::Options {
            url: Some(url.to_owned()),
            ..Default::default()
        })?
        .sqlite
        .ok_or_else(|| {
            super::unsupported("the target of a copy from PostgreSQL must be a SQLite file")
        })
    }

    /// Refuses a file that holds sync data (`ERR_SYNCULAR_COPY_TARGET_NOT_EMPTY`):
    /// a row in a meta table, or a table named like a row table of the
    /// source. A missing file, or one a storage opened and never wrote, is
    /// empty.
    pub fn refuse_non_empty(&self, plan: &Plan) -> Result<()> {
        if std::fs::metadata(&self.path).is_err() {
            return Ok(());
        }
        let c = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(sq)?;
        c.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(sq)?;
        let exists = |name: &str| super::table_exists(&c, name);
        let refuse = |what: String| {
            Err(Error::plain(
                "ERR_SYNCULAR_COPY_TARGET_NOT_EMPTY",
                format!(
                    "the target already holds sync data ({what}): copy into a new or empty SQLite file, or compare the two with verify"
                ),
            ))
        };
        for t in TABLES {
            if exists(t.name)? {
                let holds: bool = c
                    .query_row(
                        &format!("SELECT EXISTS (SELECT 1 FROM {})", t.name),
                        [],
                        |r| r.get(0),
                    )
                    .map_err(sq)?;
                if holds {
                    return refuse(format!("rows in {}", t.name));
                }
            }
        }
        for r in &plan.rows {
            if exists(&r.table.name)? {
                return refuse(format!(
                    "a table named {:?} (a row table of the source)",
                    r.table.name
                ));
            }
        }
        Ok(())
    }

    /// Makes the meta layout as a host's first use does: the engine's
    /// first open switches the file to WAL and creates the meta tables,
    /// their indexes and the writer fence; then it closes.
    pub fn make_meta(&self) -> Result<()> {
        let engine = self.engine()?;
        let made = engine.ping();
        engine.close();
        made.map(drop)
    }

    /// The load's connection, in its one transaction: rollback journal
    /// (synced before an original page is overwritten, which is rare: the
    /// load appends), a larger page cache; the writer fence's
    /// trigger dropped (the copied history is not new writes) and made
    /// again by [`Load::commit`].
    pub fn load(&self) -> Result<Load> {
        let conn = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(sq)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(sq)?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode=DELETE", [], |r| r.get(0))
            .map_err(sq)?;
        if !mode.eq_ignore_ascii_case("delete") {
            return Err(Error::plain(
                "ERR_SYNCULAR_COPY_TARGET",
                format!("the target is in use by another connection (journal_mode stayed {mode}): close it and copy again"),
            ));
        }
        let load = Load { conn };
        load.conn
            .execute_batch(
                "PRAGMA synchronous=NORMAL; PRAGMA cache_size=-65536; BEGIN IMMEDIATE; \
                 DROP TRIGGER IF EXISTS sync_commits_writer_fence",
            )
            .map_err(|e| load.fail(sq(e)))?;
        Ok(load)
    }
}

/// The bulk load's connection (see [`Target::load`]).
pub struct Load {
    pub conn: Connection,
}

impl Load {
    /// Makes a row table as the SQLite engine makes it: the engine's
    /// `CREATE TABLE` when the source's columns are in the order it
    /// writes them (meta columns around the app columns), otherwise the
    /// same types in the source's order (a table a migration added columns
    /// to, at its end); then its declared indexes, after its rows
    /// ([`Load::indexes`]).
    pub fn create(&self, r: &RowTable) -> Result<()> {
        self.conn
            .execute_batch(&create_sql(r))
            .map_err(|e| self.fail(sq(e)))
    }

    /// The declared indexes of `r`, as `ensureSchema` makes them.
    pub fn indexes(&self, r: &RowTable) -> Result<()> {
        for (_, create, _) in migrate::index_ddl(&r.schema) {
            self.conn
                .execute_batch(&create)
                .map_err(|e| self.fail(sq(e)))?;
        }
        Ok(())
    }

    /// Commits the load (synced: `synchronous=NORMAL` syncs the file at a
    /// commit in this mode), then gives the file back its WAL mode.
    pub fn commit(self) -> Result<()> {
        let fence = crate::sqlite::sql::WRITER_FENCE_TRIGGER;
        self.conn
            .execute_batch(&format!("{fence}; COMMIT"))
            .map_err(|e| self.fail(sq(e)))?;
        self.wal()
    }

    fn wal(&self) -> Result<()> {
        let mode: String = self
            .conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .map_err(sq)?;
        if mode.eq_ignore_ascii_case("wal") {
            Ok(())
        } else {
            Err(Error::plain(
                "ERR_SYNCULAR_COPY_TARGET",
                format!("could not switch the target back to WAL (journal_mode={mode})"),
            ))
        }
    }

    /// `e`, after rolling the load back and giving the file its WAL mode
    /// back (it is then as the engine's first open left it).
    pub fn fail(&self, e: Error) -> Error {
        if !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        let _ = self.wal();
        e
    }
}

/// The row table's `CREATE TABLE` (see [`Load::create`]).
fn create_sql(r: &RowTable) -> String {
    let names: Vec<&str> = r.physical.iter().map(|p| p.0.as_str()).collect();
    let app: Vec<&str> = r.schema.columns.iter().map(|c| c.name.as_str()).collect();
    let mut canonical = vec!["_sync_partition", "_sync_row_id"];
    canonical.extend(&app);
    canonical.extend([
        "_sync_server_version",
        "_sync_scopes",
        "_sync_payload",
        "_sync_column_versions",
    ]);
    let meta_not_null = r
        .physical
        .iter()
        .filter(|p| p.0.starts_with("_sync_"))
        .all(|p| p.2 == (p.0 != "_sync_column_versions"));
    if names == canonical && meta_not_null {
        return migrate::create_table_sql(&r.schema, &crate::sqlite::ROW_TABLE_TYPES);
    }
    let mut defs: Vec<String> = r
        .physical
        .iter()
        .map(|(n, ty, nn)| {
            format!(
                "{} {ty}{}",
                quote_ident(n),
                if *nn { " NOT NULL" } else { "" }
            )
        })
        .collect();
    defs.push("PRIMARY KEY (\"_sync_partition\", \"_sync_row_id\")".to_owned());
    format!(
        "CREATE TABLE IF NOT EXISTS {} ({})",
        r.schema.quoted,
        defs.join(", ")
    )
}
