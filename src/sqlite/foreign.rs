//! Another SQLite library in this process on the storage's file (bun:sqlite,
//! node:sqlite, better-sqlite3: each links its own copy of SQLite).
//!
//! SQLite locks a file with POSIX advisory locks, which belong to the
//! process: two copies of SQLite in one process neither see each other's
//! locks nor survive each other's `close()` (closing any descriptor of a
//! file drops every lock the process holds on it; sqlite.org, "How To
//! Corrupt An SQLite Database File", 2.2.1). One copy keeps a table of its
//! open files to work around that; two copies cannot. So when another copy
//! has the file open, the storage refuses to write, naming the fix
//! (`storage.db`), rather than corrupt it.
//!
//! What is seen (Linux, from `/proc/self`):
//! - before this storage opens the file, when no connection of ours has it
//!   open: any descriptor of this process on the file, its `-wal` or its
//!   `-shm` (`/proc/self/fd`; the open refuses, and the next call looks
//!   again);
//! - afterwards: a second mapping of the `-shm` file's start
//!   (`/proc/self/maps`). All connections of one SQLite copy share one
//!   mapping of the WAL index per file; another copy maps its own with its
//!   first statement. A thread of the storage looks every [`INTERVAL`]; the
//!   first write looks itself, and while a refusal stands every write looks
//!   again, so the storage writes again as soon as the other copy has
//!   closed. Reading the maps costs about as much as a few dozen
//!   descriptors would, however many sockets the process has open.
//!
//! What is not seen: another copy that has opened the file but run nothing
//! yet, after this storage opened (its close still drops our locks); a
//! copy that keeps the WAL index in heap memory (`locking_mode=EXCLUSIVE`);
//! writes of another copy between its first statement and our next look
//! (up to [`INTERVAL`]); another process (whose locks do work); platforms
//! without `/proc`.

use super::standin::StandIn;
use crate::core::error::{Error, Result};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often the storage's thread looks for a second mapping of `-shm`:
/// every [`INTERVAL`], or less often if one look takes more than 1/[`SHARE`]
/// of that.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub const INTERVAL: Duration = Duration::from_millis(100);
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
const SHARE: u32 = 50;

/// The code of the refusal.
pub const CODE: &str = "ERR_SYNCULAR_FOREIGN_SQLITE";

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct FileId {
    dev: u64,
    ino: u64,
}

/// Files the storages of this process have open, by identity: how many
/// storages have each open, and the file's stand-in shared lock (see
/// `standin`).
static OPEN: Mutex<Option<HashMap<FileId, Entry>>> = Mutex::new(None);

#[derive(Default)]
struct Entry {
    storages: usize,
    standin: Option<StandIn>,
}

fn with_open<T>(f: impl FnOnce(&mut HashMap<FileId, Entry>) -> T) -> T {
    let mut g = OPEN.lock().unwrap_or_else(|p| p.into_inner());
    f(g.get_or_insert_with(HashMap::new))
}

fn refusal(path: &str, seen: &str) -> Error {
    Error::plain(
        CODE,
        format!(
            "another SQLite library in this process has {path} open ({seen}). Two copies of \
             SQLite on one file lose each other's locks and corrupt it, so this storage does not \
             write to it. Open the segment, blob and lease stores on the storage's own \
             connection instead: new SqliteSegmentStore(storage.db), new \
             SqliteBlobStore(storage.db), new SqliteLeaseStore(storage.db)"
        ),
    )
}

/// Counts the file as open by this process's storages while held, and
/// keeps its stand-in shared lock.
pub struct Registration(Option<FileId>);

impl Registration {
    /// For a database with no file of its own (a memory database).
    pub fn none() -> Registration {
        Registration(None)
    }

    /// Before the storage's first connection to `path` opens: refuses when
    /// some other code in this process has the file open.
    pub fn before_open(path: &str) -> Result<Registration> {
        with_open(|open| {
            let Some(id) = imp::file_id(path) else {
                // No file yet: nobody can have it open.
                return Ok(Registration(None));
            };
            if !open.contains_key(&id) {
                let mut ids = vec![id];
                ids.extend(imp::file_id(&format!("{path}-wal")));
                ids.extend(imp::file_id(&format!("{path}-shm")));
                let fds = imp::descriptors_on(&ids);
                if !fds.is_empty() {
                    return Err(refusal(path, &describe(&fds)));
                }
            }
            open.entry(id).or_default().storages += 1;
            Ok(Registration(Some(id)))
        })
    }

    /// The storage's first connection opened `path` (creating it, perhaps,
    /// and holding SQLite's SHARED lock from now on): the stand-in lock is
    /// taken, or taken again, here.
    pub fn opened(&mut self, path: &str) {
        with_open(|open| {
            if self.0.is_none() {
                let Some(id) = imp::file_id(path) else {
                    return;
                };
                open.entry(id).or_default().storages += 1;
                self.0 = Some(id);
            }
            let Some(entry) = self.0.and_then(|id| open.get_mut(&id)) else {
                return;
            };
            match &mut entry.standin {
                Some(s) => {
                    s.retake();
                }
                None => entry.standin = StandIn::take(path),
            }
        })
    }

    /// Before this storage's connections close: when it is the last storage
    /// of this process on the file, the stand-in lock goes (its descriptor
    /// stays open until [`Drop`]), so the last connection can checkpoint and
    /// remove the WAL.
    pub fn closing(&self) {
        with_open(|open| {
            if let Some(entry) = self.0.and_then(|id| open.get_mut(&id)) {
                if entry.storages == 1 {
                    if let Some(s) = &mut entry.standin {
                        s.release();
                    }
                }
            }
        })
    }
}

/// After the storage's connections closed: the last storage's drop closes
/// the stand-in's descriptor (no connection of ours has locks left to drop).
impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(id) = self.0.take() {
            with_open(|open| {
                if let Some(entry) = open.get_mut(&id) {
                    entry.storages -= 1;
                    if entry.storages == 0 {
                        open.remove(&id);
                    }
                }
            });
        }
    }
}

fn describe(fds: &[(i32, String)]) -> String {
    let list: Vec<String> = fds.iter().map(|(fd, p)| format!("fd {fd}: {p}")).collect();
    list.join(", ")
}

/// The `-shm` check of an open storage (see the module comment).
pub struct Watch {
    path: String,
    /// The last verdict: `Some(what was seen)` while another copy is seen.
    seen: Arc<Mutex<Option<String>>>,
    /// The first write looks for itself.
    looked: bool,
    _thread: Option<imp::Looker>,
}

impl Watch {
    pub fn start(path: &str) -> Watch {
        let seen = Arc::new(Mutex::new(None));
        Watch {
            path: path.to_owned(),
            _thread: imp::Looker::start(path, seen.clone()),
            seen,
            looked: false,
        }
    }

    /// Before a write: `Err` while another SQLite library has the file open.
    pub fn check(&mut self) -> Result<()> {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if !self.looked || seen.is_some() {
            *seen = imp::second_mapping(&self.path);
            self.looked = true;
        }
        match seen.as_deref() {
            None => Ok(()),
            Some(what) => Err(refusal(&self.path, what)),
        }
    }
}

#[cfg(target_os = "linux")]
mod imp {
    use crate::sqlite::foreign::FileId;
    use std::os::unix::fs::MetadataExt;
    use std::sync::mpsc::{sync_channel, RecvTimeoutError, SyncSender};
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    /// Never opens the file (`stat` only): opening and closing a
    /// descriptor of it would drop the process's locks on it.
    pub fn file_id(path: &str) -> Option<FileId> {
        std::fs::metadata(path).ok().map(|m| FileId {
            dev: m.dev(),
            ino: m.ino(),
        })
    }

    /// This process's descriptors on any of `ids`, with the path each
    /// names.
    pub fn descriptors_on(ids: &[FileId]) -> Vec<(i32, String)> {
        let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for entry in dir.flatten() {
            let Some(fd) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            // `stat` through the link: the file the descriptor is open on
            // (a descriptor closed meanwhile fails, and is skipped).
            let Ok(m) = std::fs::metadata(entry.path()) else {
                continue;
            };
            if ids.contains(&FileId {
                dev: m.dev(),
                ino: m.ino(),
            }) {
                let target = std::fs::read_link(entry.path())
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or_default();
                out.push((fd, target));
            }
        }
        out
    }

    /// `Some(description)` when this process maps the start of `path`'s
    /// `-shm` file more than once, or maps the `-shm` file of another name
    /// of the same database file (a hard link, or a bind mount: SQLite names
    /// its WAL and index after the name it opened, so a copy that opened
    /// another name keeps files of its own beside it, and is found by the
    /// database file's identity, not by its path).
    pub fn second_mapping(path: &str) -> Option<String> {
        let id = file_id(&format!("{path}-shm"))?;
        let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
        let n = mappings_at_start(&maps, id);
        if n > 1 {
            return Some(format!(
                "{n} mappings of its -shm file, where one copy of SQLite keeps one"
            ));
        }
        let db = file_id(path)?;
        other_name(&maps, id, db).map(|other| {
            format!(
                "{other}, the -shm file of another name of the same database file (a hard link)"
            )
        })
    }

    /// The first `-shm` file mapped from offset 0, other than `ours`, whose
    /// database file (its path without `-shm`) is `db`.
    fn other_name(maps: &str, ours: FileId, db: FileId) -> Option<String> {
        maps.lines().find_map(|line| {
            let mut f = line.split_ascii_whitespace();
            let offset = f.nth(2)?;
            let shm = f.nth(2)?;
            if u64::from_str_radix(offset, 16) != Ok(0) || f.next().is_some() {
                return None;
            }
            let base = shm.strip_suffix("-shm")?;
            let id = file_id(shm)?;
            (id != ours && file_id(base) == Some(db)).then(|| shm.to_owned())
        })
    }

    /// How many lines of a `/proc/PID/maps` text map file `id` from offset
    /// 0 (`address perms offset major:minor inode path`).
    pub fn mappings_at_start(maps: &str, id: FileId) -> usize {
        // The kernel's encoding of st_dev (glibc's gnu_dev_major/minor).
        let major = ((id.dev >> 8) & 0xfff) | ((id.dev >> 32) & !0xfff);
        let minor = (id.dev & 0xff) | ((id.dev >> 12) & !0xff);
        maps.lines()
            .filter(|line| {
                let mut f = line.split_ascii_whitespace().skip(2);
                let (Some(offset), Some(dev), Some(ino)) = (f.next(), f.next(), f.next()) else {
                    return false;
                };
                let Some((maj, min)) = dev.split_once(':') else {
                    return false;
                };
                u64::from_str_radix(offset, 16) == Ok(0)
                    && u64::from_str_radix(maj, 16) == Ok(major)
                    && u64::from_str_radix(min, 16) == Ok(minor)
                    && ino.parse::<u64>() == Ok(id.ino)
            })
            .count()
    }

    /// The storage's thread that looks (see `INTERVAL`); it ends when
    /// dropped.
    pub struct Looker {
        stop: Option<SyncSender<()>>,
        thread: Option<std::thread::JoinHandle<()>>,
    }

    impl Looker {
        pub fn start(path: &str, seen: Arc<Mutex<Option<String>>>) -> Option<Looker> {
            let (stop, stopped) = sync_channel::<()>(0);
            let path = path.to_owned();
            let thread = std::thread::Builder::new()
                .name("syncular-fdwatch".into())
                .spawn(move || {
                    let mut pause = crate::sqlite::foreign::INTERVAL;
                    loop {
                        match stopped.recv_timeout(pause) {
                            Err(RecvTimeoutError::Timeout) => {
                                let t = Instant::now();
                                let verdict = second_mapping(&path);
                                *seen.lock().unwrap_or_else(|p| p.into_inner()) = verdict;
                                pause = crate::sqlite::foreign::INTERVAL
                                    .max(t.elapsed() * crate::sqlite::foreign::SHARE);
                            }
                            _ => return,
                        }
                    }
                })
                // No thread: the first write and every refused one still look.
                .ok()?;
            Some(Looker {
                stop: Some(stop),
                thread: Some(thread),
            })
        }
    }

    impl Drop for Looker {
        fn drop(&mut self) {
            self.stop.take();
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use crate::sqlite::foreign::FileId;
    use std::sync::{Arc, Mutex};

    pub fn file_id(_path: &str) -> Option<FileId> {
        None
    }

    pub fn descriptors_on(_ids: &[FileId]) -> Vec<(i32, String)> {
        Vec::new()
    }

    pub fn second_mapping(_path: &str) -> Option<String> {
        None
    }

    pub struct Looker;

    impl Looker {
        pub fn start(_path: &str, _seen: Arc<Mutex<Option<String>>>) -> Option<Looker> {
            None
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn temp(name: &str) -> (std::path::PathBuf, String) {
        let dir = std::env::temp_dir().join(format!(
            "syncular-foreign-{}-{name}-{:?}",
            std::process::id(),
            std::time::SystemTime::now()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("db").to_string_lossy().into_owned();
        std::fs::write(&path, b"").unwrap();
        (dir, path)
    }

    fn code(r: Result<Registration>) -> Option<&'static str> {
        match r {
            Err(Error::Plain { code, .. }) => Some(code),
            Err(e) => panic!("{e:?}"),
            Ok(_) => None,
        }
    }

    #[test]
    fn a_descriptor_on_the_file_refuses_an_open_unless_a_storage_of_ours_has_it() {
        let (dir, path) = temp("open");
        assert_eq!(code(Registration::before_open(&path)), None);
        let fd = std::fs::File::open(&path).unwrap();
        assert_eq!(code(Registration::before_open(&path)), Some(CODE));
        drop(fd);
        let ours = Registration::before_open(&path).unwrap();
        // Ours open: its own descriptors are not another library's.
        let fd = std::fs::File::open(&path).unwrap();
        assert_eq!(code(Registration::before_open(&path)), None);
        drop(ours);
        assert_eq!(code(Registration::before_open(&path)), Some(CODE));
        drop(fd);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn mappings_of_the_shm_file_start_are_counted_from_the_maps() {
        // st_dev 0x10302: major 0x103, minor 0x02.
        let id = FileId {
            dev: 0x10302,
            ino: 4242,
        };
        let maps = "\
7f00-7f08 rw-s 00000000 103:02 4242 /data/app.db-shm
7f08-7f10 rw-s 00008000 103:02 4242 /data/app.db-shm
7f10-7f18 rw-s 00000000 103:02 4243 /data/other.db-shm
7f18-7f20 rw-s 00000000 103:03 4242 /mnt/app.db-shm
7f20-7f28 r--p 00000000 00:00 0
";
        assert_eq!(imp::mappings_at_start(maps, id), 1);
        let two = format!("{maps}7f30-7f38 rw-s 00000000 103:02 4242 /data/app.db-shm (deleted)\n");
        assert_eq!(imp::mappings_at_start(&two, id), 2);
        // The real kernel's encoding: this test binary maps its own start.
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let exe = imp::file_id(&exe.to_string_lossy()).unwrap();
        let own = std::fs::read_to_string("/proc/self/maps").unwrap();
        assert!(imp::mappings_at_start(&own, exe) >= 1, "{own}");
    }

    #[test]
    fn a_watch_with_no_second_copy_lets_writes_through() {
        let (dir, path) = temp("watch");
        std::fs::write(format!("{path}-shm"), b"").unwrap();
        let mut w = Watch::start(&path);
        assert!(w.check().is_ok());
        std::thread::sleep(INTERVAL * 2);
        assert!(w.check().is_ok());
        drop(w);
        let _ = std::fs::remove_dir_all(dir);
    }

    /// `cargo test -- --ignored --nocapture scan_cost`: what one look costs.
    #[test]
    #[ignore]
    fn scan_cost() {
        let (dir, path) = temp("cost");
        std::fs::write(format!("{path}-shm"), b"").unwrap();
        let mut held = Vec::new();
        for extra in [0usize, 100, 1000, 10_000] {
            while held.len() < extra {
                held.push(std::fs::File::open("/dev/null").unwrap());
            }
            let t = std::time::Instant::now();
            for _ in 0..10 {
                imp::descriptors_on(&[imp::file_id(&path).unwrap()]);
            }
            let fds = t.elapsed() / 10;
            let t = std::time::Instant::now();
            for _ in 0..10 {
                imp::second_mapping(&path);
            }
            println!(
                "{extra} extra descriptors: {fds:?} a look at them, {:?} at the maps",
                t.elapsed() / 10
            );
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}
