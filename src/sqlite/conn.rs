//! Opening connections, their pragmas, and mapping engine errors.

use super::sql;
use crate::error::{Error, Result};
use rusqlite::{Connection, ErrorCode, OpenFlags};
use std::time::Duration;

/// Where the database lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    Memory,
    File(String),
}

impl Location {
    /// Accepts `sqlite::memory:`, `sqlite:PATH`, `sqlite://PATH`, `file:PATH`,
    /// `:memory:` and a bare path.
    pub fn parse(url: Option<&str>) -> Result<Location> {
        let Some(url) = url else {
            return Ok(Location::Memory);
        };
        let rest = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
            .or_else(|| url.strip_prefix("file:"))
            .unwrap_or(url);
        match rest {
            "" => Err(Error::invalid(format!(
                "invalid SQLite url {url:?}: no path"
            ))),
            ":memory:" => Ok(Location::Memory),
            path => Ok(Location::File(path.to_owned())),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Synchronous {
    Off,
    Normal,
    Full,
}

impl Synchronous {
    pub fn parse(s: Option<&str>) -> Result<Synchronous> {
        match s.map(str::to_ascii_lowercase).as_deref() {
            None | Some("normal") => Ok(Synchronous::Normal),
            Some("full") => Ok(Synchronous::Full),
            Some("off") => Ok(Synchronous::Off),
            Some(other) => Err(Error::invalid(format!(
                "synchronous must be 'off', 'normal' or 'full', got {other:?}"
            ))),
        }
    }

    fn pragma(self) -> &'static str {
        match self {
            Synchronous::Off => "OFF",
            Synchronous::Normal => "NORMAL",
            Synchronous::Full => "FULL",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub location: Location,
    pub synchronous: Synchronous,
    /// How long a blocking lock wait may take before giving up.
    pub busy_timeout: Duration,
    /// How long one registered query may run (`queryTimeoutMs`).
    pub query_timeout: Duration,
}

const STATEMENT_CACHE: usize = 256;

/// Runs one fixed control statement (BEGIN IMMEDIATE, COMMIT, SAVEPOINT …)
/// from the statement cache. `execute_batch` parses its text on every call,
/// which showed in push profiles: a push issues six of these.
pub fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

fn configure(conn: &Connection) -> Result<()> {
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    super::isolation::register(conn)
}

pub fn open_writer(cfg: &Config) -> Result<Connection> {
    let conn = match &cfg.location {
        Location::Memory => Connection::open_in_memory(),
        Location::File(path) => Connection::open(path),
    }
    .map_err(map_err)?;
    configure(&conn)?;
    if let Location::File(_) = cfg.location {
        conn.busy_timeout(cfg.busy_timeout).map_err(map_err)?;
        // WAL lets readers run beside the writer; the mode persists in the
        // file, and the in-tree storage opens WAL databases unchanged.
        let mode: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .map_err(map_err)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(Error::plain(
                "ERR_SYNCULAR_OPEN",
                format!("could not switch the database to WAL (journal_mode={mode})"),
            ));
        }
    }
    conn.execute_batch(&format!("PRAGMA synchronous={}", cfg.synchronous.pragma()))
        .map_err(map_err)?;
    ensure_meta(&conn)?;
    // Lock attempts on the JS thread must fail fast; blocking waits happen
    // off-thread with the timeout set explicitly.
    conn.busy_timeout(Duration::ZERO).map_err(map_err)?;
    Ok(conn)
}

pub fn open_reader(cfg: &Config) -> Result<Connection> {
    let Location::File(path) = &cfg.location else {
        unreachable!("memory databases share the writer connection")
    };
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI,
    )
    .map_err(map_err)?;
    configure(&conn)?;
    conn.busy_timeout(cfg.busy_timeout).map_err(map_err)?;
    Ok(conn)
}

/// Creates the meta layout when anything is missing. Checking first keeps a
/// second process from queueing on the write lock just to learn that every
/// `IF NOT EXISTS` was a no-op.
fn ensure_meta(conn: &Connection) -> Result<()> {
    let present: i64 = conn
        .query_row(
            &format!(
                "SELECT count(*) FROM sqlite_master WHERE name IN ({})",
                sql::placeholders(sql::META_OBJECTS.len())
            ),
            rusqlite::params_from_iter(sql::META_OBJECTS.iter()),
            |r| r.get(0),
        )
        .map_err(map_err)?;
    let has_wire = has_column(conn, "sync_clients", "wire_version")?;
    let has_writer = has_column(conn, "sync_commits", "writer_version")?;
    if present as usize == sql::META_OBJECTS.len() && has_wire && has_writer {
        return Ok(());
    }
    conn.execute_batch("BEGIN IMMEDIATE").map_err(map_err)?;
    let run = || -> Result<()> {
        conn.execute_batch(sql::META_DDL).map_err(map_err)?;
        // Databases from older in-tree versions lack these two columns.
        if !has_column(conn, "sync_clients", "wire_version")? {
            conn.execute_batch(
                "ALTER TABLE sync_clients ADD COLUMN wire_version INTEGER NOT NULL DEFAULT 1",
            )
            .map_err(map_err)?;
        }
        if !has_column(conn, "sync_commits", "writer_version")? {
            conn.execute_batch("ALTER TABLE sync_commits ADD COLUMN writer_version INTEGER")
                .map_err(map_err)?;
        }
        conn.execute_batch(sql::WRITER_FENCE_TRIGGER)
            .map_err(map_err)?;
        Ok(())
    };
    match run() {
        Ok(()) => conn.execute_batch("COMMIT").map_err(map_err),
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

pub fn has_column(conn: &Connection, table: &str, column: &str) -> Result<bool> {
    let n: i64 = conn
        .query_row(
            "SELECT count(*) FROM pragma_table_info(?1) WHERE name = ?2",
            [table, column],
            |r| r.get(0),
        )
        .map_err(map_err)?;
    Ok(n > 0)
}

fn code_name(e: &rusqlite::ffi::Error) -> String {
    let name = match e.extended_code {
        rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE => "SQLITE_CONSTRAINT_UNIQUE",
        rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY => "SQLITE_CONSTRAINT_PRIMARYKEY",
        rusqlite::ffi::SQLITE_CONSTRAINT_NOTNULL => "SQLITE_CONSTRAINT_NOTNULL",
        rusqlite::ffi::SQLITE_CONSTRAINT_CHECK => "SQLITE_CONSTRAINT_CHECK",
        rusqlite::ffi::SQLITE_CONSTRAINT_TRIGGER => "SQLITE_CONSTRAINT_TRIGGER",
        rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY => "SQLITE_CONSTRAINT_FOREIGNKEY",
        _ => match e.code {
            ErrorCode::ConstraintViolation => "SQLITE_CONSTRAINT",
            ErrorCode::DatabaseBusy => "SQLITE_BUSY",
            ErrorCode::DatabaseLocked => "SQLITE_LOCKED",
            ErrorCode::ReadOnly => "SQLITE_READONLY",
            ErrorCode::DiskFull => "SQLITE_FULL",
            ErrorCode::CannotOpen => "SQLITE_CANTOPEN",
            ErrorCode::NotADatabase => "SQLITE_NOTADB",
            ErrorCode::DatabaseCorrupt => "SQLITE_CORRUPT",
            ErrorCode::SystemIoFailure => "SQLITE_IOERR",
            ErrorCode::TooBig => "SQLITE_TOOBIG",
            _ => "SQLITE_ERROR",
        },
    };
    name.to_owned()
}

pub fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

pub fn is_constraint(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code() == Some(ErrorCode::ConstraintViolation)
}

/// Raw engine errors keep SQLite's message (the fence trigger's text is the
/// message) and gain a `SQLITE_*` code name.
pub fn map_err(e: rusqlite::Error) -> Error {
    match &e {
        rusqlite::Error::SqliteFailure(f, msg) => Error::Engine {
            code: code_name(f),
            message: msg.clone().unwrap_or_else(|| f.to_string()),
        },
        rusqlite::Error::FromSqlConversionFailure(..) | rusqlite::Error::InvalidColumnType(..) => {
            Error::plain(
                "ERR_SYNCULAR_CORRUPT_VALUE",
                format!("unexpected stored value: {e}"),
            )
        }
        rusqlite::Error::IntegralValueOutOfRange(..) => Error::plain(
            "ERR_SYNCULAR_CORRUPT_VALUE",
            format!("unexpected numeric value: {e}"),
        ),
        _ => Error::Engine {
            code: "SQLITE_ERROR".into(),
            message: e.to_string(),
        },
    }
}
