//! Opening connections, their pragmas, and mapping engine errors.

use super::kept::Conn;
use super::sql;
use crate::core::error::{Error, Result};
use crate::core::meta_layout;
use rusqlite::config::DbConfig;
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
            // The in-tree storage runs with SQLite's default, FULL: a swap
            // must not weaken durability unasked.
            None | Some("full") => Ok(Synchronous::Full),
            Some("normal") => Ok(Synchronous::Normal),
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
    /// The size bounds of one registered query's result.
    pub result_limits: crate::core::query::result::Limits,
}

#[cfg(test)]
impl Config {
    /// The tests' engine: at `location`, `synchronous=NORMAL`, waits of up
    /// to a second, default query bounds.
    pub fn for_tests(location: Location) -> Config {
        Config {
            location,
            synchronous: Synchronous::Normal,
            busy_timeout: Duration::from_secs(1),
            query_timeout: crate::core::query::DEFAULT_TIMEOUT,
            result_limits: Default::default(),
        }
    }
}

const STATEMENT_CACHE: usize = 256;

/// Runs one fixed control statement (BEGIN IMMEDIATE, COMMIT, SAVEPOINT …)
/// kept prepared on the connection (`kept`). `execute_batch` parses its
/// text on every call, which showed in push profiles: a push issues six
/// of these.
pub fn exec(conn: &Conn, sql: &'static str) -> rusqlite::Result<()> {
    conn.kept_literal(sql)?.execute([]).map(|_| ())
}

/// `busy_timeout` with a busy handler of our own: the same waits as
/// SQLite's default handler (`sqliteDefaultBusyCallback`: 1, 2, 5, 10, 15,
/// 20, 25, 25, 25, 50, 50, then 100 ms, the last one cut to end at the
/// timeout), plus a `syncular::busy` warning per retry (rate-limited, see
/// `telemetry::busy_retry`). Zero clears the handler, as `busy_timeout`
/// does. The timeout travels in the handler's argument pointer, so nothing
/// has to outlive the connection. A timeout beyond `i32::MAX` ms is capped
/// there (`busy_timeout` panics).
pub fn set_busy_timeout(conn: &Connection, timeout: Duration) -> Result<()> {
    let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    if ms <= 0 {
        return conn.busy_timeout(Duration::ZERO).map_err(map_err);
    }
    // SAFETY: the handle is this open connection's; the argument is a plain
    // integer, never dereferenced.
    let rc = unsafe {
        rusqlite::ffi::sqlite3_busy_handler(
            conn.handle(),
            Some(busy_wait),
            ms as usize as *mut std::ffi::c_void,
        )
    };
    if rc == rusqlite::ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(map_err(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rc),
            None,
        )))
    }
}

/// SQLite's default busy wait (see [`set_busy_timeout`]); `arg` is the
/// timeout in ms, `count` the number of earlier calls for this lock.
unsafe extern "C" fn busy_wait(
    arg: *mut std::ffi::c_void, count: std::ffi::c_int,
) -> std::ffi::c_int {
    const DELAYS: [i32; 12] = [1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100];
    const TOTALS: [i32; 12] = [0, 1, 3, 8, 18, 33, 53, 78, 103, 128, 178, 228];
    let timeout = arg as usize as i32;
    let count = count.max(0);
    let (mut delay, prior) = match usize::try_from(count).ok().filter(|&c| c < DELAYS.len()) {
        Some(c) => (DELAYS[c], TOTALS[c]),
        None => (
            100,
            228_i32.saturating_add(100_i32.saturating_mul(count - 11)),
        ),
    };
    let mut retry = true;
    if prior.saturating_add(delay) > timeout {
        delay = timeout - prior;
        retry = delay > 0;
    }
    // Never unwind into SQLite.
    let _ = std::panic::catch_unwind(|| {
        crate::core::telemetry::busy_retry(
            crate::core::telemetry::SQLITE,
            "statement",
            count as u32 + 1,
            Duration::from_millis(prior.max(0) as u64),
            !retry,
        )
    });
    if !retry {
        return 0;
    }
    std::thread::sleep(Duration::from_millis(delay as u64));
    1
}

fn configure(conn: &mut Connection) -> Result<()> {
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    // Plans that do not depend on bound values. Without this, SQLite 3.50
    // marks a statement whose `LIMIT ?` it planned with as expired on every
    // rebind, so each window page, scan page and registered query (the host
    // appends `LIMIT ?`) compiled its statement again: about 0.3M
    // instructions a call, measured with callgrind. On the writer too:
    // windows and pages read on the calling thread run there when it is
    // idle.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
        .map_err(map_err)?;
    super::isolation::register(conn)
}

pub fn open_writer(cfg: &Config) -> Result<Conn> {
    match &cfg.location {
        Location::File(path) => open_writer_at(cfg).map_err(|e| open_failed(e, path)),
        Location::Memory => open_writer_at(cfg),
    }
    .map(Conn::new)
}

fn open_writer_at(cfg: &Config) -> Result<Connection> {
    // Through the storage's VFS, which bounds registered queries'
    // temporary files (`super::temp_vfs`).
    super::temp_vfs::register()?;
    let path = match &cfg.location {
        Location::Memory => ":memory:",
        Location::File(path) => path.as_str(),
    };
    let mut conn =
        Connection::open_with_flags_and_vfs(path, OpenFlags::default(), super::temp_vfs::NAME)
            .map_err(map_err)?;
    // SQLite falls back to read-only when the file cannot be written; the
    // writer would then fail on its first write instead of here.
    if conn.is_readonly(rusqlite::MAIN_DB).map_err(map_err)? {
        return Err(Error::Engine {
            code: "SQLITE_READONLY".into(),
            message: "the database opened read-only".into(),
        });
    }
    configure(&mut conn)?;
    if let Location::File(_) = cfg.location {
        set_busy_timeout(&conn, cfg.busy_timeout)?;
        let mode: String = retry_busy(cfg.busy_timeout, || {
            conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))
        })
        .map_err(map_err)?;
        if !mode.eq_ignore_ascii_case("wal") {
            // The switch below holds the file's exclusive lock through a
            // commit that syncs the file: every page of it the OS still
            // holds unwritten (a file just copied, restored or generated)
            // is written out then, with every reader of the file locked out
            // (230 ms at 200k commits, issue 48). Written out first,
            // without a lock, the switch holds it for its own page only.
            sync_main_file(&conn);
        }
        // WAL lets readers run beside the writer; the mode persists in the
        // file, and the in-tree storage opens WAL databases unchanged.
        // Two processes creating the file at once can meet in the switch
        // itself: each holds SHARED and wants to write page 1, and SQLite
        // answers one of them SQLITE_BUSY at once, without the busy handler
        // (it would wait for the other forever). The other finishes within
        // milliseconds, so the switch is tried again, within busy_timeout.
        let mode: String = retry_busy(cfg.busy_timeout, || {
            conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
        })
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

/// Writes out the main database file's pages the OS still caches, through
/// SQLite's own descriptor of it (closing a descriptor of our own would
/// drop this process's POSIX locks on the file, docs/shared-file.md). Takes
/// no lock; a failure only loses the head start.
fn sync_main_file(conn: &Connection) {
    use rusqlite::ffi;
    let mut file: *mut ffi::sqlite3_file = std::ptr::null_mut();
    // SAFETY: the handle is open for the call; FILE_POINTER writes the
    // main database's sqlite3_file (owned by the connection, open while it
    // is) into `file`; its xSync takes that file and sync flags.
    unsafe {
        let rc = ffi::sqlite3_file_control(
            conn.handle(),
            c"main".as_ptr(),
            ffi::SQLITE_FCNTL_FILE_POINTER,
            (&mut file as *mut *mut ffi::sqlite3_file).cast(),
        );
        if rc != ffi::SQLITE_OK || file.is_null() || (*file).pMethods.is_null() {
            return;
        }
        if let Some(sync) = (*(*file).pMethods).xSync {
            let _ = sync(file, ffi::SQLITE_SYNC_NORMAL);
        }
    }
}

/// Runs `f` again while it fails with SQLITE_BUSY or SQLITE_LOCKED, for up
/// to `timeout`, pausing 1 ms, then up to 20 ms, between tries.
pub(super) fn retry_busy<T>(
    timeout: Duration, mut f: impl FnMut() -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    let deadline = std::time::Instant::now() + timeout;
    let mut pause = Duration::from_millis(1);
    loop {
        match f() {
            Err(e) if is_busy(&e) && std::time::Instant::now() < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            out => return out,
        }
    }
}

pub fn open_reader(cfg: &Config) -> Result<Conn> {
    let Location::File(path) = &cfg.location else {
        unreachable!("memory databases share the writer connection")
    };
    open_reader_at(cfg, path)
        .map_err(|e| open_failed(e, path))
        .map(Conn::new)
}

fn open_reader_at(cfg: &Config, path: &str) -> Result<Connection> {
    super::temp_vfs::register()?;
    let mut conn = Connection::open_with_flags_and_vfs(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI,
        super::temp_vfs::NAME,
    )
    .map_err(map_err)?;
    configure(&mut conn)?;
    set_busy_timeout(&conn, cfg.busy_timeout)?;
    Ok(conn)
}

/// Creates the meta layout when anything is missing. Checking first keeps a
/// second process from queueing on the write lock just to learn that every
/// `IF NOT EXISTS` was a no-op.
fn ensure_meta(conn: &Connection) -> Result<()> {
    let objects = sql::meta_objects();
    let present: i64 = conn
        .query_row(
            &format!(
                "SELECT count(*) FROM sqlite_master WHERE name IN ({})",
                sql::placeholders(objects.len())
            ),
            rusqlite::params_from_iter(objects.iter()),
            |r| r.get(0),
        )
        .map_err(map_err)?;
    let mut late_present = true;
    for (t, c) in meta_layout::late_columns() {
        late_present &= has_column(conn, t.name, c.name)?;
    }
    if present as usize == objects.len() && late_present {
        return Ok(());
    }
    conn.execute_batch("BEGIN IMMEDIATE").map_err(map_err)?;
    let run = || -> Result<()> {
        conn.execute_batch(sql::meta_ddl()).map_err(map_err)?;
        // Databases from older in-tree versions lack the late columns.
        for (t, c) in meta_layout::late_columns() {
            if !has_column(conn, t.name, c.name)? {
                conn.execute_batch(&sql::add_column(t, c))
                    .map_err(map_err)?;
            }
        }
        conn.execute_batch(sql::WRITER_FENCE_TRIGGER)
            .map_err(map_err)?;
        // On a new file at once; over existing entries by ensureSchema
        // (`sql::row_scopes_by_row_ddl`).
        let empty: bool = conn
            .query_row(
                "SELECT NOT EXISTS (SELECT 1 FROM sync_row_scopes)",
                [],
                |r| r.get(0),
            )
            .map_err(map_err)?;
        if empty {
            conn.execute_batch(sql::row_scopes_by_row_ddl())
                .map_err(map_err)?;
        }
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

/// ROLLBACK after `e` failed. A ROLLBACK that fails too is attached to `e`
/// (0.30.7), never put in its place. Nothing to roll back when SQLite has
/// already ended the transaction (some errors do).
pub fn rollback_after(conn: &Conn, e: Error) -> Error {
    if conn.is_autocommit() {
        return e;
    }
    match exec(conn, "ROLLBACK") {
        Ok(()) => e,
        Err(rb) => e.with_rollback_failure(map_err(rb)),
    }
}

/// See `SqliteEngine::arm_faults`. Replaces the connection's authorizer
/// with one that refuses the armed statements and otherwise answers as
/// the registered-query authorizer ([`super::isolation::register`]) does.
/// Setting an authorizer expires the prepared statements, so the cached
/// COMMIT/ROLLBACK are prepared again and meet it.
pub fn arm_faults(conn: &mut Connection, commit: bool, rollback: bool) -> Result<()> {
    use rusqlite::hooks::{AuthAction, AuthContext, Authorization, TransactionOperation};
    let mut commit = commit;
    let mut rollback = rollback;
    conn.authorizer(Some(move |ctx: AuthContext<'_>| match ctx.action {
        AuthAction::Transaction {
            operation: TransactionOperation::Unknown, // COMMIT (rusqlite names only BEGIN, RELEASE, ROLLBACK)
        } if commit => {
            commit = false;
            Authorization::Deny
        }
        AuthAction::Transaction {
            operation: TransactionOperation::Rollback,
        } if rollback => {
            rollback = false;
            Authorization::Deny
        }
        _ => super::isolation::bound_verdict(&ctx),
    }))
    .map_err(map_err)
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

/// SQLite's result codes by name, extended ones included.
macro_rules! result_codes {
    ($($name:ident)*) => {
        &[$((rusqlite::ffi::$name, stringify!($name))),*]
    };
}

static RESULT_CODES: &[(std::ffi::c_int, &str)] = result_codes!(
    SQLITE_ERROR SQLITE_INTERNAL SQLITE_PERM SQLITE_ABORT SQLITE_BUSY SQLITE_LOCKED SQLITE_NOMEM
    SQLITE_READONLY SQLITE_INTERRUPT SQLITE_IOERR SQLITE_CORRUPT SQLITE_NOTFOUND SQLITE_FULL
    SQLITE_CANTOPEN SQLITE_PROTOCOL SQLITE_EMPTY SQLITE_SCHEMA SQLITE_TOOBIG SQLITE_CONSTRAINT
    SQLITE_MISMATCH SQLITE_MISUSE SQLITE_NOLFS SQLITE_AUTH SQLITE_FORMAT SQLITE_RANGE
    SQLITE_NOTADB SQLITE_NOTICE SQLITE_WARNING SQLITE_ERROR_MISSING_COLLSEQ SQLITE_ERROR_RETRY
    SQLITE_ERROR_SNAPSHOT SQLITE_IOERR_READ SQLITE_IOERR_SHORT_READ SQLITE_IOERR_WRITE
    SQLITE_IOERR_FSYNC SQLITE_IOERR_DIR_FSYNC SQLITE_IOERR_TRUNCATE SQLITE_IOERR_FSTAT
    SQLITE_IOERR_UNLOCK SQLITE_IOERR_RDLOCK SQLITE_IOERR_DELETE SQLITE_IOERR_BLOCKED
    SQLITE_IOERR_NOMEM SQLITE_IOERR_ACCESS SQLITE_IOERR_CHECKRESERVEDLOCK SQLITE_IOERR_LOCK
    SQLITE_IOERR_CLOSE SQLITE_IOERR_DIR_CLOSE SQLITE_IOERR_SHMOPEN SQLITE_IOERR_SHMSIZE
    SQLITE_IOERR_SHMLOCK SQLITE_IOERR_SHMMAP SQLITE_IOERR_SEEK SQLITE_IOERR_DELETE_NOENT
    SQLITE_IOERR_MMAP SQLITE_IOERR_GETTEMPPATH SQLITE_IOERR_CONVPATH SQLITE_IOERR_VNODE
    SQLITE_IOERR_AUTH SQLITE_IOERR_BEGIN_ATOMIC SQLITE_IOERR_COMMIT_ATOMIC
    SQLITE_IOERR_ROLLBACK_ATOMIC SQLITE_IOERR_DATA SQLITE_IOERR_CORRUPTFS SQLITE_IOERR_IN_PAGE
    SQLITE_LOCKED_SHAREDCACHE SQLITE_LOCKED_VTAB SQLITE_BUSY_RECOVERY SQLITE_BUSY_SNAPSHOT
    SQLITE_BUSY_TIMEOUT SQLITE_CANTOPEN_NOTEMPDIR SQLITE_CANTOPEN_ISDIR SQLITE_CANTOPEN_FULLPATH
    SQLITE_CANTOPEN_CONVPATH SQLITE_CANTOPEN_DIRTYWAL SQLITE_CANTOPEN_SYMLINK
    SQLITE_CORRUPT_VTAB SQLITE_CORRUPT_SEQUENCE SQLITE_CORRUPT_INDEX SQLITE_READONLY_RECOVERY
    SQLITE_READONLY_CANTLOCK SQLITE_READONLY_ROLLBACK SQLITE_READONLY_DBMOVED
    SQLITE_READONLY_CANTINIT SQLITE_READONLY_DIRECTORY SQLITE_ABORT_ROLLBACK
    SQLITE_CONSTRAINT_CHECK SQLITE_CONSTRAINT_COMMITHOOK SQLITE_CONSTRAINT_FOREIGNKEY
    SQLITE_CONSTRAINT_FUNCTION SQLITE_CONSTRAINT_NOTNULL SQLITE_CONSTRAINT_PRIMARYKEY
    SQLITE_CONSTRAINT_TRIGGER SQLITE_CONSTRAINT_UNIQUE SQLITE_CONSTRAINT_VTAB
    SQLITE_CONSTRAINT_ROWID SQLITE_CONSTRAINT_PINNED SQLITE_CONSTRAINT_DATATYPE
    SQLITE_NOTICE_RECOVER_WAL SQLITE_NOTICE_RECOVER_ROLLBACK SQLITE_NOTICE_RBU
    SQLITE_WARNING_AUTOINDEX SQLITE_AUTH_USER
);

/// The name of SQLite's exact (extended) result code, as its documentation
/// spells it; the primary code's name when the extended one is unknown.
fn code_name(e: &rusqlite::ffi::Error) -> String {
    let named = |code: std::ffi::c_int| {
        RESULT_CODES
            .iter()
            .find(|(c, _)| *c == code)
            .map(|(_, n)| *n)
    };
    named(e.extended_code)
        .or_else(|| named(e.extended_code & 0xff))
        .map_or_else(
            || format!("SQLITE_ERROR_{}", e.extended_code),
            str::to_owned,
        )
}

/// An error opening the database at `path`, naming the path and, where
/// the file system tells, the reason; SQLite's code is kept.
pub fn open_failed(e: Error, path: &str) -> Error {
    match e {
        Error::Engine { code, message } => {
            // A busy or locked file has no file-system reason to find; the
            // probe would open and close the file, which drops the locks
            // other storages of this process hold on it.
            let locked = code.starts_with("SQLITE_BUSY") || code.starts_with("SQLITE_LOCKED");
            let reason = if locked { None } else { open_reason(path) };
            let reason = reason.map_or(String::new(), |r| format!(" ({r})"));
            Error::Engine {
                code,
                message: format!("cannot open the SQLite database {path:?}: {message}{reason}"),
            }
        }
        other => other,
    }
}

fn open_reason(path: &str) -> Option<String> {
    use std::path::Path;
    let file = Path::new(path);
    let dir = match file.parent() {
        Some(d) if d.as_os_str().is_empty() => Path::new("."),
        Some(d) => d,
        None => Path::new("."),
    };
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Some(format!("the directory {dir:?} does not exist"))
        }
        Err(e) if e.raw_os_error() == Some(20) => {
            // ENOTDIR: a component of the directory is a file.
            return Some(format!("{dir:?} is not a directory"));
        }
        Err(e) => return Some(format!("the directory {dir:?} cannot be read: {e}")),
        Ok(m) if !m.is_dir() => return Some(format!("{dir:?} is not a directory")),
        Ok(_) => {}
    }
    match std::fs::metadata(file) {
        Ok(m) if m.is_dir() => Some(format!("{path:?} is a directory")),
        Ok(_) => match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(file)
        {
            Err(e) => Some(format!("the file is read-only to this process: {e}")),
            Ok(_) => None,
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let probe = tempfile_probe(dir);
            probe.map(|e| format!("the directory {dir:?} is not writable: {e}"))
        }
        Err(e) => Some(format!("the file cannot be read: {e}")),
    }
}

/// Whether a file can be created in `dir`: the error if not. The probe
/// file is removed at once.
fn tempfile_probe(dir: &std::path::Path) -> Option<std::io::Error> {
    let probe = dir.join(format!(".syncular-probe-{}", std::process::id()));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            None
        }
        Err(e) => Some(e),
    }
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

/// The text a moved file's triggers abort with starts so (`moved::mark`).
const MOVED_PREFIX: &str = "ERR_SYNCULAR_MOVED: ";

/// Whether the database on `c` has the table `name`.
pub fn table_exists(c: &Connection, name: &str) -> Result<bool> {
    c.prepare_cached("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1")
        .and_then(|mut st| st.exists([name]))
        .map_err(map_err)
}

/// Raw engine errors keep SQLite's message (the fence trigger's text is the
/// message) and gain a `SQLITE_*` code name.
pub fn map_err(e: rusqlite::Error) -> Error {
    match &e {
        // The mark of a move (`moved`): its triggers' abort names the code.
        rusqlite::Error::SqliteFailure(f, Some(msg))
            if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_TRIGGER
                && msg.starts_with(MOVED_PREFIX) =>
        {
            Error::plain("ERR_SYNCULAR_MOVED", &msg[MOVED_PREFIX.len()..])
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn result_codes_keep_their_exact_names() {
        use rusqlite::ffi::*;
        let name = |code| code_name(&rusqlite::ffi::Error::new(code));
        for (code, expected) in [
            (SQLITE_PROTOCOL, "SQLITE_PROTOCOL"),
            (SQLITE_SCHEMA, "SQLITE_SCHEMA"),
            (SQLITE_IOERR_WRITE, "SQLITE_IOERR_WRITE"),
            (SQLITE_BUSY_SNAPSHOT, "SQLITE_BUSY_SNAPSHOT"),
            (SQLITE_CANTOPEN_ISDIR, "SQLITE_CANTOPEN_ISDIR"),
            (SQLITE_READONLY_DBMOVED, "SQLITE_READONLY_DBMOVED"),
            (SQLITE_CONSTRAINT_UNIQUE, "SQLITE_CONSTRAINT_UNIQUE"),
            // An extended code this build does not know: its primary code's name.
            (SQLITE_IOERR | (99 << 8), "SQLITE_IOERR"),
        ] {
            assert_eq!(name(code), expected);
        }
    }

    /// The build sets `SQLITE_DEFAULT_PCACHE_INITSZ=0` (`.cargo/config.toml`):
    /// without it every statement with RETURNING allocates and frees an
    /// 87 KB page-cache block.
    #[test]
    fn page_cache_starts_empty() {
        let c = rusqlite::Connection::open_in_memory().unwrap();
        let used: bool = c
            .query_row(
                "SELECT sqlite_compileoption_used('DEFAULT_PCACHE_INITSZ=0')",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(
            used,
            "SQLite was built without SQLITE_DEFAULT_PCACHE_INITSZ=0"
        );
    }

    fn temp_db(name: &str) -> (std::path::PathBuf, String) {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let dir = std::env::temp_dir().join(format!(
            "syncular-busy-{}-{name}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("db").to_string_lossy().into_owned();
        (dir, file)
    }

    /// The busy handler waits like `busy_timeout`: about the timeout, then
    /// SQLITE_BUSY; zero fails at once.
    #[test]
    fn busy_handler_keeps_timeout_semantics() {
        let (dir, file) = temp_db("timeout");
        let holder = Connection::open(&file).unwrap();
        holder
            .execute_batch("CREATE TABLE t(x); BEGIN EXCLUSIVE; INSERT INTO t VALUES (1);")
            .unwrap();
        let other = Connection::open(&file).unwrap();

        set_busy_timeout(&other, Duration::from_millis(300)).unwrap();
        let t = Instant::now();
        let e = other
            .query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))
            .unwrap_err();
        let took = t.elapsed();
        assert!(is_busy(&e), "{e}");
        assert!(
            took >= Duration::from_millis(290) && took < Duration::from_millis(1500),
            "{took:?}"
        );

        set_busy_timeout(&other, Duration::ZERO).unwrap();
        let t = Instant::now();
        let e = other
            .query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0))
            .unwrap_err();
        assert!(is_busy(&e), "{e}");
        assert!(t.elapsed() < Duration::from_millis(50));

        // Released before the timeout: the statement goes through.
        set_busy_timeout(&other, Duration::from_secs(5)).unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            holder.execute_batch("COMMIT").unwrap();
        });
        let n: i64 = other
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1);
        release.join().unwrap();
        drop(other);
        let _ = std::fs::remove_dir_all(dir);
    }
}
