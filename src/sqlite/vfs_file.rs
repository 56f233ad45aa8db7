//! A file of the storage's VFS that wraps the platform VFS's file: the
//! methods a wrapper passes on unchanged, written once for every wrapper
//! (`super::temp_vfs`'s counted temporary files, `super::wal_gather`'s
//! WAL files). A wrapper names where its platform file is and what must
//! happen before a method passes on, and writes only the methods it
//! changes:
//!
//! ```ignore
//! static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
//!     xWrite: Some(write),
//!     ..vfs_file::passed_on::<Mine>()
//! };
//! ```

use rusqlite::ffi;
use std::ffi::{c_int, c_void};

/// A wrapped file: an `sqlite3_file` header of the wrapper's, the
/// platform's file after it.
pub trait Wrapper {
    /// Where the platform's file begins in the wrapper's slot.
    const REAL_AT: usize;

    /// The platform's file behind `file`, and its methods.
    ///
    /// # Safety
    /// `file` opened through the wrapper, so the platform file's methods are
    /// set; they live as long as the platform VFS.
    unsafe fn real(
        file: *mut ffi::sqlite3_file,
    ) -> (*mut ffi::sqlite3_file, &'static ffi::sqlite3_io_methods) {
        let real = file
            .cast::<u8>()
            .add(Self::REAL_AT)
            .cast::<ffi::sqlite3_file>();
        (real, &*(*real).pMethods)
    }

    /// Runs before a method passes on; anything but `SQLITE_OK` is that
    /// method's answer.
    ///
    /// # Safety
    /// As [`Wrapper::real`].
    unsafe fn before(_file: *mut ffi::sqlite3_file) -> c_int {
        ffi::SQLITE_OK
    }
}

/// Version-1 methods that all pass on to the platform's file (after
/// [`Wrapper::before`]): SQLite never maps a wrapped file into memory and
/// never asks one for shared memory (the wrapped kinds have none).
pub const fn passed_on<W: Wrapper>() -> ffi::sqlite3_io_methods {
    ffi::sqlite3_io_methods {
        iVersion: 1,
        xClose: Some(close::<W>),
        xRead: Some(read::<W>),
        xWrite: Some(write::<W>),
        xTruncate: Some(truncate::<W>),
        xSync: Some(sync::<W>),
        xFileSize: Some(file_size::<W>),
        xLock: Some(lock::<W>),
        xUnlock: Some(unlock::<W>),
        xCheckReservedLock: Some(check_reserved_lock::<W>),
        xFileControl: Some(file_control::<W>),
        xSectorSize: Some(sector_size::<W>),
        xDeviceCharacteristics: Some(device_characteristics::<W>),
        xShmMap: None,
        xShmLock: None,
        xShmBarrier: None,
        xShmUnmap: None,
        xFetch: None,
        xUnfetch: None,
    }
}

/// Passes a method on: `$before`'s refusal first, then the platform
/// file's method, or `$absent` when it has none.
macro_rules! pass {
    ($file:ident, $method:ident, $absent:expr, $($arg:expr),*) => {{
        let rc = W::before($file);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        let (real, m) = W::real($file);
        m.$method.map_or($absent, |f| f(real $(, $arg)*))
    }};
}

/// Closes the platform's file (a wrapper with state of its own frees it in
/// its own `xClose`, then calls this).
///
/// # Safety
/// As SQLite's `xClose`.
pub unsafe extern "C" fn close<W: Wrapper>(file: *mut ffi::sqlite3_file) -> c_int {
    pass!(file, xClose, ffi::SQLITE_OK,)
}

/// The platform's read (a wrapper's own `xRead` may end with it).
///
/// # Safety
/// As SQLite's `xRead`.
pub unsafe extern "C" fn read<W: Wrapper>(
    file: *mut ffi::sqlite3_file, buf: *mut c_void, amt: c_int, off: i64,
) -> c_int {
    pass!(file, xRead, ffi::SQLITE_IOERR_READ, buf, amt, off)
}

/// The platform's write (a wrapper's own `xWrite` may end with it).
///
/// # Safety
/// As SQLite's `xWrite`.
pub unsafe extern "C" fn write<W: Wrapper>(
    file: *mut ffi::sqlite3_file, buf: *const c_void, amt: c_int, off: i64,
) -> c_int {
    pass!(file, xWrite, ffi::SQLITE_IOERR_WRITE, buf, amt, off)
}

/// The platform's truncate (a wrapper's own `xTruncate` may end with it).
///
/// # Safety
/// As SQLite's `xTruncate`.
pub unsafe extern "C" fn truncate<W: Wrapper>(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    pass!(file, xTruncate, ffi::SQLITE_IOERR_TRUNCATE, size)
}

unsafe extern "C" fn sync<W: Wrapper>(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    pass!(file, xSync, ffi::SQLITE_OK, flags)
}

unsafe extern "C" fn file_size<W: Wrapper>(file: *mut ffi::sqlite3_file, size: *mut i64) -> c_int {
    pass!(file, xFileSize, ffi::SQLITE_IOERR_FSTAT, size)
}

unsafe extern "C" fn lock<W: Wrapper>(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    pass!(file, xLock, ffi::SQLITE_OK, level)
}

unsafe extern "C" fn unlock<W: Wrapper>(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    pass!(file, xUnlock, ffi::SQLITE_OK, level)
}

unsafe extern "C" fn check_reserved_lock<W: Wrapper>(
    file: *mut ffi::sqlite3_file, out: *mut c_int,
) -> c_int {
    pass!(file, xCheckReservedLock, ffi::SQLITE_OK, out)
}

/// The platform's file control (a wrapper's own may end with it).
///
/// # Safety
/// As SQLite's `xFileControl`.
pub unsafe extern "C" fn file_control<W: Wrapper>(
    file: *mut ffi::sqlite3_file, op: c_int, arg: *mut c_void,
) -> c_int {
    pass!(file, xFileControl, ffi::SQLITE_NOTFOUND, op, arg)
}

unsafe extern "C" fn sector_size<W: Wrapper>(file: *mut ffi::sqlite3_file) -> c_int {
    let (real, m) = W::real(file);
    m.xSectorSize.map_or(4096, |f| f(real))
}

unsafe extern "C" fn device_characteristics<W: Wrapper>(file: *mut ffi::sqlite3_file) -> c_int {
    let (real, m) = W::real(file);
    m.xDeviceCharacteristics.map_or(0, |f| f(real))
}
