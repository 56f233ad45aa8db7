//! A transaction's WAL frames written with one system call, not two a frame.
//!
//! SQLite appends each WAL frame as two writes, its 24-byte header and its
//! page, so a push transaction touching 14 pages makes 28 `pwrite` calls;
//! on ext4 each costs a few µs of kernel time (the inode lock, the time
//! stamps, the page cache walk), which was a fifth of a host push's CPU.
//! The WAL file of a storage connection (opened through `super::temp_vfs`'s
//! VFS) gathers writes that append to one another in a buffer and hands the
//! run to the platform's VFS as one write.
//!
//! When the run reaches the file is what makes this safe, and it rests on how
//! `walFrames` (sqlite3.c) commits: it writes every frame of the
//! transaction, the commit frame last (its header holds the database size,
//! which no other frame's does), then publishes the new WAL end in the
//! shared-memory index, with no call on the WAL file in between. So:
//! - the write that completes the commit frame (its page, right after a
//!   header with a database size) sends the whole run before it returns,
//!   and returns the run's result: a failure (a full disk) fails the commit
//!   before anything is published, as an unbuffered write would;
//! - every other method (read, sync, truncate, size, lock, file control,
//!   close) sends the run first, so SQLite, a checkpoint or another handle
//!   never reads a frame that is only in the buffer, and a sync covers it;
//! - a write that does not continue the run sends the run first, then
//!   starts a new one, except a header rewritten after reading its frame
//!   (`walRewriteChecksums`, after a frame was overwritten in place), which
//!   goes straight through: nothing would follow it to send it;
//! - a run never holds more than [`MAX_RUN`] bytes (what the platform's
//!   VFS writes in one call).
//!
//! Frames written by a spill (a transaction larger than the page cache) may
//! wait in the buffer; no reader looks at them before the commit publishes
//! them, and the commit's own write sends them first. What a killed process
//! loses is a transaction it had not committed.

use super::vfs_file;
use rusqlite::ffi;
use std::ffi::{c_int, c_void};

/// The largest run kept before it is sent: the unix VFS writes at most
/// 128 KiB - 1 bytes a call (`seekAndWriteFd` masks the count with
/// 0x1ffff), so a longer run would be cut short and fail as a full disk.
const MAX_RUN: usize = 0x1ffff;
/// A frame header's size.
const HEADER: c_int = 24;

/// A WAL file: the platform's file follows this header.
#[repr(C)]
pub struct Gathered {
    base: ffi::sqlite3_file,
    run: *mut Run,
    real: ffi::sqlite3_file,
}

/// The writes not sent yet: bytes from `at`.
struct Run {
    bytes: Vec<u8>,
    at: i64,
    /// Where the last commit frame's header was written (buffered or not).
    commit_header: i64,
    /// Where the last read began, to know a rewritten header.
    last_read: i64,
}

/// Opens the WAL file `name` through `open` (the platform VFS's) into
/// `file`, a slot of [`Gathered`]'s size plus the platform file's.
///
/// # Safety
/// As SQLite's `xOpen`: `file` is a slot of the VFS's `szOsFile` bytes.
pub unsafe fn open(
    parent: *mut ffi::sqlite3_vfs, name: ffi::sqlite3_filename, file: *mut ffi::sqlite3_file,
    flags: c_int, out_flags: *mut c_int,
    parent_open: unsafe extern "C" fn(
        *mut ffi::sqlite3_vfs,
        ffi::sqlite3_filename,
        *mut ffi::sqlite3_file,
        c_int,
        *mut c_int,
    ) -> c_int,
) -> c_int {
    let g = file.cast::<Gathered>();
    (*g).base.pMethods = std::ptr::null();
    let rc = parent_open(parent, name, &mut (*g).real, flags, out_flags);
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    (*g).run = Box::into_raw(Box::new(Run {
        bytes: Vec::new(),
        at: 0,
        commit_header: -1,
        last_read: -1,
    }));
    (*g).base.pMethods = &METHODS;
    rc
}

impl vfs_file::Wrapper for Gathered {
    const REAL_AT: usize = std::mem::offset_of!(Gathered, real);

    /// Every method the platform's file answers sees the run sent first.
    unsafe fn before(file: *mut ffi::sqlite3_file) -> c_int {
        let (run, real, m) = parts(file);
        send(run, real, m)
    }
}

unsafe fn parts(
    file: *mut ffi::sqlite3_file,
) -> (
    &'static mut Run,
    *mut ffi::sqlite3_file,
    &'static ffi::sqlite3_io_methods,
) {
    let (real, m) = <Gathered as vfs_file::Wrapper>::real(file);
    // SAFETY (caller): the file opened, so its run is set and lives until
    // close.
    (&mut *(*file.cast::<Gathered>()).run, real, m)
}

/// Sends the run, if any; the platform write's result.
unsafe fn send(run: &mut Run, real: *mut ffi::sqlite3_file, m: &ffi::sqlite3_io_methods) -> c_int {
    if run.bytes.is_empty() {
        return ffi::SQLITE_OK;
    }
    #[cfg(test)]
    tests::SENT.with(|n| n.set(n.get() + 1));
    let rc = match m.xWrite {
        Some(w) => w(
            real,
            run.bytes.as_ptr().cast::<c_void>(),
            run.bytes.len() as c_int,
            run.at,
        ),
        None => ffi::SQLITE_IOERR_WRITE,
    };
    run.bytes.clear();
    rc
}

unsafe extern "C" fn write(
    file: *mut ffi::sqlite3_file, buf: *const c_void, amt: c_int, off: i64,
) -> c_int {
    let (run, real, m) = parts(file);
    let bytes = std::slice::from_raw_parts(buf.cast::<u8>(), amt.max(0) as usize);
    let header = amt == HEADER;
    // Only the write right after a read can rewrite what was read.
    let rewrite = header && off == std::mem::replace(&mut run.last_read, -1);
    if rewrite {
        // A header rewritten over a frame just read: straight through
        // (after the run, which `vfs_file::write` sends first).
        #[cfg(test)]
        tests::SENT.with(|n| n.set(n.get() + 1));
        return vfs_file::write::<Gathered>(file, buf, amt, off);
    }
    let continues = !run.bytes.is_empty() && off == run.at + run.bytes.len() as i64;
    if !continues || run.bytes.len() + bytes.len() > MAX_RUN {
        let rc = send(run, real, m);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        run.at = off;
    }
    run.bytes.extend_from_slice(bytes);
    if header {
        // The database size (bytes 4..8) is set on a commit frame only.
        if bytes[4..8] != [0, 0, 0, 0] {
            run.commit_header = off;
        }
        return ffi::SQLITE_OK;
    }
    if off == run.commit_header + i64::from(HEADER) {
        // The commit frame is whole: everything goes before SQLite
        // publishes it.
        run.commit_header = -1;
        return send(run, real, m);
    }
    ffi::SQLITE_OK
}

unsafe extern "C" fn read(
    file: *mut ffi::sqlite3_file, buf: *mut c_void, amt: c_int, off: i64,
) -> c_int {
    (*(*file.cast::<Gathered>()).run).last_read = off;
    vfs_file::read::<Gathered>(file, buf, amt, off)
}

unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    let g = file.cast::<Gathered>();
    let (run, real, m) = parts(file);
    let sent = send(run, real, m);
    drop(Box::from_raw((*g).run));
    (*g).run = std::ptr::null_mut();
    let closed = m.xClose.map_or(ffi::SQLITE_OK, |f| f(real));
    if sent != ffi::SQLITE_OK {
        sent
    } else {
        closed
    }
}

/// The platform's methods, after the run is sent, but for the three that
/// keep the run.
static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    xClose: Some(close),
    xRead: Some(read),
    xWrite: Some(write),
    ..vfs_file::passed_on::<Gathered>()
};

#[cfg(test)]
#[path = "wal_gather_tests.rs"]
mod tests;
