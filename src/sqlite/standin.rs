//! A shared lock on the database file that the host cannot drop by accident.
//!
//! SQLite's locks on Unix are POSIX advisory locks, which belong to the
//! process: when any code in the process closes *any* descriptor of the file
//! (`fs.copyFileSync(dbPath, …)`, `fs.readFileSync`, a hash of the file for a
//! report), the kernel drops every lock the process holds on it. SQLite's
//! connections still believe they hold their SHARED lock, so they never take
//! it again. If another process (the `sqlite3` shell, a second host, the
//! in-tree storage) then closes its last connection on the file, it finds no
//! other reader, checkpoints, and deletes the WAL under the storage's open
//! connections: their next read fails with `SQLITE_IOERR_SHORT_READ`, and
//! their next commits land in a WAL that no longer has a name.
//!
//! The stand-in: while a storage of this process has the file open, one
//! descriptor of our own holds an *open file description* lock (Linux
//! `F_OFD_SETLK`) in read mode on the byte range of SQLite's SHARED lock
//! (`SHARED_FIRST`, 510 bytes from 0x40000002, as the Unix VFS takes it).
//! OFD locks belong to the descriptor, not the process, so closing another
//! descriptor leaves it in place, and on Linux they conflict with the POSIX
//! write lock another process needs for EXCLUSIVE. That process's close
//! then finds a reader and leaves the WAL alone, as it would had the host
//! never closed anything. Readers and writers of other processes are not
//! hindered: in WAL mode they take only read locks on that range.
//!
//! The lock is released (the descriptor stays open) before the process's
//! last connection to the file closes, so that connection can still
//! checkpoint and remove the WAL, and the descriptor is closed only after
//! it: closing it earlier would itself drop SQLite's locks.
//!
//! Elsewhere (macOS, BSDs: no OFD locks; Windows: locks belong to handles
//! already) there is no stand-in. Where the kernel or file system refuses
//! the lock (an old kernel, some network file systems), the storage goes on
//! without one and says so at `warn`.

/// The offset and length of SQLite's SHARED lock range (Unix VFS:
/// `SHARED_FIRST = PENDING_BYTE + 2`, `SHARED_SIZE = 510`).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
const SHARED_FIRST: i64 = 0x4000_0002;
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
const SHARED_SIZE: i64 = 510;

/// The descriptor and whether it holds the lock now.
pub struct StandIn {
    #[cfg(target_os = "linux")]
    file: std::fs::File,
    held: bool,
}

impl StandIn {
    /// Opens a descriptor of `path` and takes the lock; `None` (said at
    /// `warn`) where either fails.
    pub fn take(path: &str) -> Option<StandIn> {
        imp::open(path).and_then(|mut s| s.retake().then_some(s))
    }

    /// Takes the lock again after [`release`](Self::release); `false` (said
    /// at `warn`) where the kernel refuses.
    pub fn retake(&mut self) -> bool {
        if !self.held {
            self.held = imp::set(self, true);
        }
        self.held
    }

    /// Releases the lock, keeping the descriptor open.
    pub fn release(&mut self) {
        if self.held {
            imp::set(self, false);
            self.held = false;
        }
    }
}

#[cfg(target_os = "linux")]
mod imp {
    use crate::sqlite::standin::{StandIn, SHARED_FIRST, SHARED_SIZE};
    use std::os::fd::AsRawFd;

    pub fn open(path: &str) -> Option<StandIn> {
        // Read-only: a read lock needs no more (std opens with O_CLOEXEC).
        match std::fs::File::open(path) {
            Ok(file) => Some(StandIn { file, held: false }),
            Err(e) => {
                tracing::warn!(path, error = %e, "no stand-in shared lock: the file did not open");
                None
            }
        }
    }

    /// Sets (`on`) or clears the lock; whether that succeeded.
    pub fn set(s: &StandIn, on: bool) -> bool {
        // SAFETY: an all-zero `flock` is a valid value (plain integers).
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = if on { libc::F_RDLCK } else { libc::F_UNLCK } as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        fl.l_start = SHARED_FIRST as libc::off_t;
        fl.l_len = SHARED_SIZE as libc::off_t;
        // l_pid must be 0 for OFD locks (it is, zeroed).
        // SAFETY: the descriptor is open (owned by `s.file`) and `fl` is a
        // valid `flock` that outlives the call.
        let rc = unsafe { libc::fcntl(s.file.as_raw_fd(), libc::F_OFD_SETLK, &mut fl) };
        if rc == 0 {
            return true;
        }
        let e = std::io::Error::last_os_error();
        tracing::warn!(
            error = %e,
            on,
            "no stand-in shared lock: the kernel refused the open file description lock"
        );
        false
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use crate::sqlite::standin::StandIn;

    pub fn open(_path: &str) -> Option<StandIn> {
        None
    }

    pub fn set(_s: &StandIn, _on: bool) -> bool {
        false
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// What a second descriptor's write lock on the SHARED range would meet:
    /// `F_UNLCK` when nothing conflicts (`F_OFD_GETLK`, another owner).
    fn conflict(path: &std::path::Path) -> libc::c_short {
        let other = std::fs::File::open(path).unwrap();
        // SAFETY: as in `imp::set`; `other` is open for the call.
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = libc::F_WRLCK as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        fl.l_start = SHARED_FIRST as libc::off_t;
        fl.l_len = SHARED_SIZE as libc::off_t;
        let rc = unsafe { libc::fcntl(other.as_raw_fd(), libc::F_OFD_GETLK, &mut fl) };
        assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
        fl.l_type
    }

    #[test]
    fn holds_a_read_lock_on_the_shared_range_until_released() {
        let dir = std::env::temp_dir().join(format!("syncular-standin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.db");
        std::fs::write(&path, b"").unwrap();
        let mut s = StandIn::take(path.to_str().unwrap()).expect("the lock is taken");
        assert_eq!(conflict(&path), libc::F_RDLCK as libc::c_short);
        // Closing another descriptor of the file (as `conflict` just did)
        // leaves it in place.
        assert_eq!(conflict(&path), libc::F_RDLCK as libc::c_short);
        s.release();
        assert_eq!(conflict(&path), libc::F_UNLCK as libc::c_short);
        assert!(s.retake());
        assert_eq!(conflict(&path), libc::F_RDLCK as libc::c_short);
        drop(s);
        assert_eq!(conflict(&path), libc::F_UNLCK as libc::c_short);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_missing_file_gives_none() {
        assert!(StandIn::take("/nonexistent-syncular-dir/a.db").is_none());
    }
}
