//! The temporary files of registered queries, counted and bounded.
//!
//! A sort, a GROUP BY, a window function or a DISTINCT that outgrows
//! SQLite's cache spills to temporary files, whose bytes the heap limits
//! (`super::meter`) do not see: a query sorting a client-chosen number of
//! wide rows could fill the disk. Every storage connection opens through
//! the VFS registered here ([`NAME`]), which is the platform's default VFS
//! with one change: a temporary file (sorter, transient table, statement
//! journal) opened while a registered query runs on the thread
//! (`super::meter::temp_budget`) counts the bytes it holds, against the
//! query's budget (its working memory: `maxResultBytes` + 64 MiB) and the
//! process's ([`super::temp_budget::PROCESS_LIMIT`]). A write past either fails with
//! SQLITE_FULL, and the query stops with `ERR_SYNCULAR_QUERY_RESULT_TOO_LARGE`
//! (`super::isolation::Bounded::err`). The database files, their journals
//! and WAL, and the storage's own temporary files (an index build's sort)
//! go straight to the default VFS, uncounted; a WAL file's writes are
//! gathered into one write a run (`super::wal_gather`).
//!
//! A counted file's size is the furthest byte written (less after a
//! truncate). Size hints and chunk sizes are not passed on, so the file
//! grows only by writes, and its methods are version 1, so SQLite never
//! maps it into memory.

use super::temp_budget::Budget;
use super::vfs_file;
use rusqlite::ffi;
use std::ffi::{c_char, c_int, c_void};
use std::sync::{Arc, OnceLock};

/// The VFS name storage connections open with.
pub const NAME: &str = "syncular";
const NAME_C: &[u8] = b"syncular\0";

/// A counted temporary file: the default VFS's file follows this header.
#[repr(C)]
struct Counted {
    base: ffi::sqlite3_file,
    budget: *const Budget,
    size: i64,
    real: ffi::sqlite3_file,
}

/// The default VFS, which this one forwards to.
struct Parent(*mut ffi::sqlite3_vfs);
// SAFETY: SQLite's VFS objects are process-wide and thread-safe; the
// pointer is never freed.
unsafe impl Send for Parent {}
unsafe impl Sync for Parent {}

static PARENT: OnceLock<Option<Parent>> = OnceLock::new();

/// Registers the VFS (once per process). Storage connections then open
/// with [`NAME`]; an error means SQLite has no default VFS to wrap.
pub fn register() -> crate::core::error::Result<()> {
    let parent = PARENT.get_or_init(|| {
        // rusqlite configures SQLite's threading mode before SQLite's first
        // initialisation, and refuses to open after anyone else's: a
        // connection of its own goes first.
        if rusqlite::Connection::open_in_memory().is_err() {
            return None;
        }
        // SAFETY: SQLite's own initialisation and lookup; the new VFS is
        // leaked, so it outlives every connection that names it.
        unsafe {
            let parent = ffi::sqlite3_vfs_find(std::ptr::null());
            if parent.is_null() {
                return None;
            }
            // The default VFS's methods, with its own app data: every
            // method but xOpen is the parent's, called as it expects.
            let mut vfs: ffi::sqlite3_vfs = *parent;
            vfs.zName = NAME_C.as_ptr().cast::<c_char>();
            vfs.pNext = std::ptr::null_mut();
            use vfs_file::Wrapper;
            let header = Counted::REAL_AT.max(super::wal_gather::Gathered::REAL_AT);
            vfs.szOsFile = header as c_int + (*parent).szOsFile;
            vfs.xOpen = Some(open);
            let leaked = Box::into_raw(Box::new(vfs));
            if ffi::sqlite3_vfs_register(leaked, 0) != ffi::SQLITE_OK {
                return None;
            }
            Some(Parent(parent))
        }
    });
    match parent {
        Some(_) => Ok(()),
        None => Err(crate::core::error::Error::plain(
            "ERR_SYNCULAR_OPEN",
            "SQLite has no default VFS to open the database with",
        )),
    }
}

fn parent() -> *mut ffi::sqlite3_vfs {
    match PARENT.get() {
        Some(Some(p)) => p.0,
        _ => std::ptr::null_mut(),
    }
}

/// The temporary files whose bytes a registered query is charged for.
const COUNTED_KINDS: c_int =
    ffi::SQLITE_OPEN_TEMP_JOURNAL | ffi::SQLITE_OPEN_SUBJOURNAL | ffi::SQLITE_OPEN_TRANSIENT_DB;

unsafe extern "C" fn open(
    _vfs: *mut ffi::sqlite3_vfs, name: ffi::sqlite3_filename, file: *mut ffi::sqlite3_file,
    flags: c_int, out_flags: *mut c_int,
) -> c_int {
    let parent = parent();
    let Some(parent_open) = parent.as_ref().and_then(|p| p.xOpen) else {
        return ffi::SQLITE_CANTOPEN;
    };
    if flags & ffi::SQLITE_OPEN_WAL != 0 {
        return super::wal_gather::open(parent, name, file, flags, out_flags, parent_open);
    }
    let budget = if flags & COUNTED_KINDS != 0 {
        super::meter::temp_budget()
    } else {
        None
    };
    let Some(budget) = budget else {
        // Not counted: the parent's file fills the whole slot, with the
        // parent's methods.
        return parent_open(parent, name, file, flags, out_flags);
    };
    let counted = file.cast::<Counted>();
    (*counted).base.pMethods = std::ptr::null();
    let rc = parent_open(parent, name, &mut (*counted).real, flags, out_flags);
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    (*counted).budget = Arc::into_raw(budget);
    (*counted).size = 0;
    (*counted).base.pMethods = &COUNTED_METHODS;
    rc
}

impl vfs_file::Wrapper for Counted {
    const REAL_AT: usize = std::mem::offset_of!(Counted, real);
}

/// The platform's methods, but for the four that count.
static COUNTED_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    xClose: Some(close),
    xWrite: Some(write),
    xTruncate: Some(truncate),
    xFileControl: Some(file_control),
    ..vfs_file::passed_on::<Counted>()
};

unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    let counted = file.cast::<Counted>();
    let budget = Arc::from_raw((*counted).budget);
    budget.give((*counted).size);
    (*counted).size = 0;
    vfs_file::close::<Counted>(file)
}

/// Grows the file's count to `end` bytes, or refuses.
unsafe fn grow(file: *mut ffi::sqlite3_file, end: i64) -> bool {
    let counted = file.cast::<Counted>();
    let more = end - (*counted).size;
    if more <= 0 {
        return true;
    }
    if !(*(*counted).budget).take(more) {
        return false;
    }
    (*counted).size = end;
    true
}

unsafe extern "C" fn write(
    file: *mut ffi::sqlite3_file, buf: *const c_void, amt: c_int, off: i64,
) -> c_int {
    if !grow(file, off.saturating_add(i64::from(amt))) {
        return ffi::SQLITE_FULL;
    }
    vfs_file::write::<Counted>(file, buf, amt, off)
}

unsafe extern "C" fn truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    let counted = file.cast::<Counted>();
    if size > (*counted).size {
        if !grow(file, size) {
            return ffi::SQLITE_FULL;
        }
    } else {
        (*(*counted).budget).give((*counted).size - size);
        (*counted).size = size;
    }
    vfs_file::truncate::<Counted>(file, size)
}

unsafe extern "C" fn file_control(
    file: *mut ffi::sqlite3_file, op: c_int, arg: *mut c_void,
) -> c_int {
    // Hints that would let the file grow without a counted write.
    if matches!(
        op,
        ffi::SQLITE_FCNTL_SIZE_HINT | ffi::SQLITE_FCNTL_CHUNK_SIZE | ffi::SQLITE_FCNTL_MMAP_SIZE
    ) {
        return ffi::SQLITE_NOTFOUND;
    }
    vfs_file::file_control::<Counted>(file, op, arg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_refuses_past_its_limit_and_gives_back() {
        let b = Budget::new(100);
        assert!(b.take(60));
        assert!(!b.take(60));
        assert!(b.exceeded());
        assert_eq!(b.used(), 60);
        b.give(60);
        assert_eq!(b.used(), 0);
    }

    /// A grouping of 300 values of 100 KB spills about 30 MB.
    const SPILL: &str =
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r WHERE n < 300) \
        SELECT count(*) FROM (SELECT printf('%.*c', 100000, 'x') || n AS g FROM r GROUP BY g)";

    #[test]
    fn only_a_metered_runs_temporary_files_are_counted_and_bounded() {
        use super::super::meter;
        register().unwrap();
        let conn = rusqlite::Connection::open_with_flags_and_vfs(
            ":memory:",
            rusqlite::OpenFlags::default(),
            NAME,
        )
        .unwrap();
        // The storage's own statements: uncounted, unbounded.
        let n: i64 = conn.query_row(SPILL, [], |r| r.get(0)).unwrap();
        assert_eq!(n, 300);
        let closed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        {
            let limits = meter::Limits {
                memory: 8 << 20,
                ..meter::tests::TEST
            };
            let _run = meter::start(limits, deadline, None, &closed);
            let e = conn
                .query_row(SPILL, [], |r| r.get::<_, i64>(0))
                .unwrap_err();
            assert_eq!(
                e.sqlite_error_code(),
                Some(rusqlite::ErrorCode::DiskFull),
                "{e}"
            );
            assert_eq!(meter::stopped(), Some(meter::Stop::Disk));
            assert!(meter::temp_budget().unwrap().used() <= 8 << 20);
        }
        {
            let limits = meter::Limits {
                memory: 64 << 20,
                ..meter::tests::TEST
            };
            let _run = meter::start(limits, deadline, None, &closed);
            let n: i64 = conn.query_row(SPILL, [], |r| r.get(0)).unwrap();
            assert_eq!(n, 300);
            assert_eq!(meter::stopped(), None);
            // The statement was reset: its files are closed and given back.
            assert_eq!(meter::temp_budget().unwrap().used(), 0);
        }
        assert_eq!(super::super::temp_budget::process_used(), 0);
    }
}
