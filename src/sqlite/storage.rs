//! `SqliteEngine`, the handle every area's members hang on: its
//! configuration, and the connections (writer, readers, checkpoint thread)
//! it opens on first use and releases on `close` or when collected.

use super::checkpointer;
use super::conn::{self, Config, Location, Synchronous};
use super::foreign;
use super::mutex::lock;
use super::rewrites::RewriteCache;
use super::rows;
use super::rows::{Loaded, TableSql};
use super::scratch;
use super::shared;
use super::writer::{Db, Writer};
use crate::core::error::{Error, Result};
use crate::core::schema::Schema;
use crate::core::telemetry;
use std::sync::{Arc, Mutex};

pub struct SqliteEngine {
    pub(super) cfg: Config,
    pub(super) db: Mutex<Option<Arc<Db>>>,
    pub(super) loaded: crate::core::schema::Ensured<TableSql>,
    /// Shared with running queries' progress handlers, which stop at once
    /// when the storage closes.
    pub(super) closed: Arc<std::sync::atomic::AtomicBool>,
    /// Whose exit removes a memory database's directory (see `scratch`).
    pub(super) scratch_owner: u64,
    /// Registered queries' rewrites (see `RewriteCache`).
    pub(super) rewrites: RewriteCache,
    /// Waits for the write lock held by another process.
    pub(super) waits: telemetry::Waits,
    /// Where the database moved (`crate::copy`'s final pass): set, every
    /// later write lease is refused with `ERR_SYNCULAR_MOVED`.
    pub(super) moved: std::sync::OnceLock<String>,
}

impl SqliteEngine {
    pub fn new(cfg: Config) -> SqliteEngine {
        SqliteEngine {
            cfg,
            db: Mutex::new(None),
            loaded: Default::default(),
            closed: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            scratch_owner: scratch::this_thread(),
            rewrites: Default::default(),
            waits: Default::default(),
            moved: std::sync::OnceLock::new(),
        }
    }

    pub(super) fn db(&self) -> Result<Arc<Db>> {
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(Error::plain("ERR_SYNCULAR_CLOSED", "storage is closed"));
        }
        let mut slot = lock(&self.db);
        if let Some(db) = slot.as_ref() {
            return Ok(db.clone());
        }
        let (cfg, scratch) = match &self.cfg.location {
            Location::File(_) => (self.cfg.clone(), None),
            Location::Memory => {
                let s = scratch::Scratch::new(self.scratch_owner)?;
                let cfg = Config {
                    location: Location::File(s.db_path()),
                    // Gone with the process anyway: flushing buys nothing.
                    synchronous: Synchronous::Off,
                    ..self.cfg.clone()
                };
                (cfg, Some(s))
            }
        };
        // Before any connection of ours opens: closing one would drop the
        // locks of another SQLite library that has the file open.
        let mut open = match (&cfg.location, &scratch) {
            (Location::File(path), None) => foreign::Registration::before_open(path)?,
            _ => foreign::Registration::none(),
        };
        let writer = conn::open_writer(&cfg)?;
        let progress = matches!((&cfg.location, &scratch), (Location::File(_), None))
            .then(Arc::<checkpointer::Progress>::default);
        let (checkpointer, foreign) = match (&cfg.location, &progress) {
            (Location::File(path), Some(progress)) => {
                open.opened(path);
                (
                    Some(checkpointer::Checkpointer::start(
                        path,
                        progress.clone(),
                        &writer,
                    )?),
                    Some(foreign::Watch::start(path)),
                )
            }
            // A memory database keeps SQLite's own checkpoints: nothing of
            // it needs to reach a disk, and no thread outlives it.
            _ => (None, None),
        };
        let db = Arc::new(Db {
            writer: Mutex::new(Writer {
                conn: writer,
                lease: None,
                next_id: 1,
                held: 0,
                lost: false,
                checkpointer,
                staged: Vec::new(),
                busy_timeout: cfg.busy_timeout,
                foreign,
            }),
            readers: Mutex::new(Vec::new()),
            cfg,
            registration: open,
            progress,
            _scratch: scratch,
        });
        *slot = Some(db.clone());
        Ok(db)
    }

    /// Releases every connection; later calls fail with `storage is closed`.
    pub fn close(&self) {
        self.closed
            .store(true, std::sync::atomic::Ordering::Release);
        if let Some(db) = lock(&self.db).take() {
            let mut w = lock(&db.writer);
            // A group's held commits were never acknowledged: they go too.
            // The `db` writes among them were: they run again.
            if w.lease.take().is_some() || w.held > 0 {
                let _ = conn::exec(&w.conn, "ROLLBACK");
            }
            w.held = 0;
            shared::replay_fresh(&mut w);
            // Its connection closes now, before the writer's (see checkpointer).
            if let Some(c) = w.checkpointer.take() {
                c.stop(&w.conn);
            }
            lock(&db.readers).clear();
        }
    }

    /// The schema this storage last ensured, with its statement text.
    pub fn loaded(&self) -> Arc<Loaded> {
        self.loaded.get()
    }

    pub(super) fn set_loaded(&self, schema: Schema) {
        self.loaded.set(schema, TableSql::numbered());
    }

    /// The schema version this storage writes commits as (0 before
    /// `ensureSchema`).
    pub fn writer_version(&self) -> i64 {
        self.loaded.version()
    }

    /// True while a file database is not open yet: its first open switches
    /// the file to WAL, which waits (as the busy timeout allows) for other
    /// processes' readers to let go of it, and completes the meta layout.
    pub fn unopened_file(&self) -> bool {
        matches!(self.cfg.location, Location::File(_))
            && !self.closed.load(std::sync::atomic::Ordering::Acquire)
            && lock(&self.db).is_none()
    }
}

/// Dropped without `close` (collected): `db` writes staged in a
/// transaction that never committed run again first.
impl Drop for Db {
    fn drop(&mut self) {
        let w = self.writer.get_mut().unwrap_or_else(|p| p.into_inner());
        if !w.staged.is_empty() {
            let _ = conn::exec(&w.conn, "ROLLBACK");
            shared::replay_fresh(w);
        }
        if let Some(c) = w.checkpointer.take() {
            c.stop(&w.conn);
        }
        // The connections close next (the fields below, in order).
        self.registration.closing();
    }
}

impl SqliteEngine {
    pub(super) fn table_sql<T>(
        &self, table: &str,
        f: impl FnOnce(&crate::core::schema::Table, &rows::TableSql) -> Result<T>,
    ) -> Result<T> {
        let loaded = self.loaded();
        let i = loaded.schema.index_of(table)?;
        f(&loaded.schema.tables[i], &loaded.sql[i])
    }
}
