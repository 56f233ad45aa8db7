//! Opens the engine a host's options name: the one place above the seam
//! that knows every engine.
//!
//! [`crate::seam`] defines the seam and names no engine; each engine
//! implements it beside its own code; this module validates the options,
//! picks the engine by url and returns it as a `dyn Engine`, with the SQLite
//! engine also by its own type for `storage.db`. Only the binding calls it.

use crate::core::error::Result;
use crate::seam::Engine;
use std::sync::Arc;

/// What a host may configure, engine-neutral; each engine reads its part.
#[derive(Debug, Default)]
pub struct Options {
    /// `postgres://…` selects PostgreSQL; anything else (or none) SQLite.
    pub url: Option<String>,
    pub synchronous: Option<String>,
    pub busy_timeout_ms: Option<i64>,
    pub query_timeout: Option<std::time::Duration>,
    /// `maxResultRows` and `maxResultBytes` of registered queries.
    pub max_result_rows: Option<u64>,
    pub max_result_bytes: Option<u64>,
    pub max_connections: Option<u32>,
    pub schema: Option<String>,
    /// PostgreSQL: how long a call may wait for a connection.
    pub connect_timeout: Option<std::time::Duration>,
    /// PostgreSQL: `none`, `session` or `transaction` (a pooler in between).
    pub pooling: Option<String>,
}

pub fn is_postgres_url(url: &str) -> bool {
    let lower = url.get(..11).unwrap_or(url).to_ascii_lowercase();
    lower.starts_with("postgres:") || lower.starts_with("postgresql:")
}

/// The scheme of `url` (`mysql` of `mysql:oops.db`), if it has one: two or
/// more letters, digits, `+`, `-` or `.` starting with a letter, then `:`.
/// A one-letter "scheme" is a Windows drive (`C:\\data\\sync.db`).
fn url_scheme(url: &str) -> Option<&str> {
    let (scheme, _) = url.split_once(':')?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (scheme.len() >= 2
        && first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(scheme)
}

/// Refuses a url whose scheme names no engine (`mysql:`, `postgress://`,
/// `https://`), which would otherwise open a SQLite file of that name.
fn check_scheme(url: &str) -> Result<()> {
    match url_scheme(url) {
        Some(s) if !["sqlite", "file"].iter().any(|k| s.eq_ignore_ascii_case(k)) => {
            Err(crate::Error::invalid(format!(
                "unknown url scheme {s:?} in {url:?}: accepted are sqlite:PATH, sqlite::memory:, file:PATH, postgres://… and postgresql://…, or a plain file path"
            )))
        }
        _ => Ok(()),
    }
}

/// An engine opened by [`open`].
pub struct Opened {
    pub engine: Box<dyn Engine>,
    /// The same engine by its own type when it is SQLite, for `storage.db`
    /// (raw SQL on the storage's connection).
    pub sqlite: Option<Arc<crate::sqlite::SqliteEngine>>,
    /// The configuration when it is PostgreSQL, for `copyTo` (which
    /// reads the storage's schema on a connection of its own).
    pub postgres: Option<crate::postgres::Config>,
}

/// Validates the options and returns the engine they name. Nothing
/// connects yet: the database opens on first use.
pub fn open(o: Options) -> Result<Opened> {
    let query_timeout = o
        .query_timeout
        .unwrap_or(crate::core::query::DEFAULT_TIMEOUT);
    let defaults = crate::core::query::result::Limits::default();
    let result_limits = crate::core::query::result::Limits {
        rows: o.max_result_rows.unwrap_or(defaults.rows),
        bytes: o.max_result_bytes.unwrap_or(defaults.bytes),
    };
    match o.url {
        Some(url) if is_postgres_url(&url) => {
            use crate::postgres::{Config, PgEngine};
            let pooling = o
                .pooling
                .as_deref()
                .map(crate::postgres::Pooling::parse)
                .transpose()?;
            let mut cfg = Config::parse(&url, o.max_connections, o.schema, pooling)?;
            cfg.query_timeout = query_timeout;
            cfg.result_limits = result_limits;
            if let Some(t) = o.connect_timeout {
                cfg.connect_timeout = t;
            }
            Ok(Opened {
                engine: Box::new(Arc::new(PgEngine::new(cfg.clone()))),
                sqlite: None,
                postgres: Some(cfg),
            })
        }
        url => {
            use crate::sqlite::{Config, Location, SqliteEngine, Synchronous};
            if let Some(u) = url.as_deref() {
                check_scheme(u)?;
            }
            let cfg = Config {
                location: Location::parse(url.as_deref())?,
                synchronous: Synchronous::parse(o.synchronous.as_deref())?,
                busy_timeout: std::time::Duration::from_millis(
                    o.busy_timeout_ms.unwrap_or(30_000).max(0) as u64,
                ),
                query_timeout,
                result_limits,
            };
            let engine = Arc::new(SqliteEngine::new(cfg));
            Ok(Opened {
                engine: Box::new(engine.clone()),
                sqlite: Some(engine),
                postgres: None,
            })
        }
    }
}
