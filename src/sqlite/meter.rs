//! The clock of the registered query running on this thread, read by the
//! storage's own SQL functions (`super::linear_fns`, `super::pattern`,
//! `super::checked_fns`) while they work.
//!
//! SQLite's progress handler runs between VM instructions, never inside
//! one, and only at the instructions that end a loop: a function call is
//! one instruction, and a row's result columns are one straight run of
//! instructions. So every function a registered query may call whose work
//! can grow with its arguments checks this meter itself: when it starts,
//! and every [`CHECK_BYTES`] of work while it runs. Past the query's
//! deadline, once the storage closes, or (on the calling thread) past the
//! run's stall limit, the function fails at once and the meter remembers
//! why; the query then stops with the matching code
//! (`super::isolation::Bounded::err`).
//!
//! Outside a registered query (the storage's own statements) no meter is
//! set and the functions never stop.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Work, in bytes read or written, between two clock reads inside one call.
pub const CHECK_BYTES: usize = 64 << 10;

/// Why a metered run was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Past `queryTimeoutMs`.
    Deadline,
    /// The storage closed.
    Closed,
    /// A run on the calling thread past its stall limit: it runs again on
    /// a worker.
    Stall,
    /// SQLite's heap grew by more than the run's working-memory budget.
    Memory,
    /// A function would have made a value over the run's value limit.
    TooBig,
    /// The run's temporary files would have held more than its budget
    /// (`super::temp_vfs`).
    Disk,
}

struct Meter {
    limits: Limits,
    /// SQLite's heap when the run started, and how far it may grow.
    heap: (i64, i64),
    deadline: Instant,
    stall: Option<Instant>,
    closed: Arc<AtomicBool>,
    /// Work since the last clock read.
    since: usize,
    stopped: Option<Stop>,
    /// What the run's temporary files may hold (`super::temp_vfs`).
    temp: Arc<super::temp_budget::Budget>,
}

thread_local! {
    static METER: RefCell<Option<Meter>> = const { RefCell::new(None) };
}

/// Clears the meter when the run ends, however it ends.
pub struct Running(());

impl Drop for Running {
    fn drop(&mut self) {
        METER.with(|m| *m.borrow_mut() = None);
    }
}

/// The value and LIKE-pattern limits the calling statement runs under.
/// The functions read them here, never from their connection (rusqlite's
/// connection handle of a function call removes the connection's hooks,
/// the authorizer and the progress handler among them, when dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub value: i32,
    pub pattern: i32,
    /// The bytes SQLite's heap may grow by during the run.
    pub memory: i64,
}

/// SQLite's defaults, which the storage's own statements run under.
const DEFAULT_LIMITS: Limits = Limits {
    value: 1_000_000_000,
    pattern: 50_000,
    memory: i64::MAX,
};

/// The bytes SQLite's heap holds now (every connection of the process:
/// another query's growth counts too, which at worst stops this one early).
fn heap() -> i64 {
    // SAFETY: a read of SQLite's own counter.
    unsafe { rusqlite::ffi::sqlite3_memory_used() }
}

/// The limits of the statement calling a function on this thread.
pub fn limits() -> Limits {
    METER.with(|m| m.borrow().as_ref().map_or(DEFAULT_LIMITS, |m| m.limits))
}

/// Lowers the value limit of the run on this thread.
pub fn limit_values(bytes: i32) {
    METER.with(|m| {
        if let Some(m) = m.borrow_mut().as_mut() {
            m.limits.value = bytes;
        }
    })
}

/// Starts the meter of a registered query run on this thread.
pub fn start(
    limits: Limits, deadline: Instant, stall: Option<Instant>, closed: &Arc<AtomicBool>,
) -> Running {
    METER.with(|m| {
        *m.borrow_mut() = Some(Meter {
            limits,
            heap: (heap(), limits.memory),
            deadline,
            stall,
            closed: closed.clone(),
            since: 0,
            stopped: None,
            temp: super::temp_budget::Budget::new(limits.memory),
        })
    });
    Running(())
}

/// Why the run on this thread was stopped by a function, if it was.
pub fn stopped() -> Option<Stop> {
    METER.with(|m| {
        let m = m.borrow();
        let m = m.as_ref()?;
        match m.stopped {
            Some(why) => Some(why),
            None if m.temp.exceeded() => Some(Stop::Disk),
            None => None,
        }
    })
}

/// The temporary-file budget of the registered query running on this
/// thread, if one is.
pub fn temp_budget() -> Option<Arc<super::temp_budget::Budget>> {
    METER.with(|m| m.borrow().as_ref().map(|m| m.temp.clone()))
}

/// The error a stopped function returns (the query's own error is made
/// from [`stopped`]).
fn stop_error(why: Stop) -> rusqlite::Error {
    rusqlite::Error::UserFunctionError(
        match why {
            Stop::Deadline => "registered query exceeded its time limit",
            Stop::Closed => "storage is closed",
            Stop::Stall => "registered query exceeded its step budget",
            Stop::Memory => "registered query exceeded its working memory",
            Stop::TooBig => "string or blob too big",
            Stop::Disk => "registered query exceeded its temporary storage",
        }
        .into(),
    )
}

/// A function of the run on this thread would have made a value over the
/// run's value limit: the run stops with that reason. `None` outside a
/// registered query, where SQLite's own answer stands.
pub fn too_big() -> Option<rusqlite::Error> {
    METER.with(|m| {
        let mut m = m.borrow_mut();
        let m = m.as_mut()?;
        m.stopped.get_or_insert(Stop::TooBig);
        Some(stop_error(Stop::TooBig))
    })
}

fn check(m: &mut Meter) -> rusqlite::Result<()> {
    if let Some(why) = m.stopped {
        return Err(stop_error(why));
    }
    m.since = 0;
    let now = Instant::now();
    let why = if m.closed.load(Ordering::Relaxed) {
        Some(Stop::Closed)
    } else if now >= m.deadline {
        Some(Stop::Deadline)
    } else if m.stall.is_some_and(|s| now >= s) {
        Some(Stop::Stall)
    } else if heap().saturating_sub(m.heap.0) > m.heap.1 {
        Some(Stop::Memory)
    } else {
        None
    };
    match why {
        Some(why) => {
            m.stopped = Some(why);
            Err(stop_error(why))
        }
        None => Ok(()),
    }
}

/// The progress handler's check of the run's working memory: true (and
/// the run stopped) once SQLite's heap has grown past its budget.
pub fn over_memory() -> bool {
    METER.with(|m| match m.borrow_mut().as_mut() {
        Some(m) if heap().saturating_sub(m.heap.0) > m.heap.1 => {
            m.stopped.get_or_insert(Stop::Memory);
            true
        }
        _ => false,
    })
}

/// A function call starts: checks the clock.
pub fn enter() -> rusqlite::Result<()> {
    METER.with(|m| match m.borrow_mut().as_mut() {
        Some(m) => check(m),
        None => Ok(()),
    })
}

/// `bytes` more work inside a call: checks the clock every [`CHECK_BYTES`].
pub fn work(bytes: usize) -> rusqlite::Result<()> {
    METER.with(|m| match m.borrow_mut().as_mut() {
        Some(m) => {
            m.since += bytes;
            if m.since >= CHECK_BYTES {
                check(m)
            } else if let Some(why) = m.stopped {
                Err(stop_error(why))
            } else {
                Ok(())
            }
        }
        None => Ok(()),
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::time::Duration;

    pub const TEST: Limits = Limits {
        value: 1 << 20,
        pattern: 256,
        memory: i64::MAX,
    };

    #[test]
    fn a_meter_stops_past_its_deadline_and_remembers_why() {
        let closed = Arc::new(AtomicBool::new(false));
        assert!(enter().is_ok(), "no meter: never stops");
        assert_eq!(limits(), DEFAULT_LIMITS);
        {
            let _run = start(
                TEST,
                Instant::now() + Duration::from_millis(20),
                None,
                &closed,
            );
            assert!(enter().is_ok());
            assert!(work(10).is_ok());
            std::thread::sleep(Duration::from_millis(30));
            // Small work between clock reads is not checked yet.
            assert!(work(10).is_ok());
            assert!(work(CHECK_BYTES).is_err());
            assert_eq!(stopped(), Some(Stop::Deadline));
            assert!(work(1).is_err(), "stays stopped");
        }
        assert_eq!(stopped(), None);
        let _run = start(
            TEST,
            Instant::now() + Duration::from_secs(60),
            Some(Instant::now()),
            &closed,
        );
        assert!(enter().is_err());
        assert_eq!(stopped(), Some(Stop::Stall));
        drop(_run);
        let _run = start(
            TEST,
            Instant::now() + Duration::from_secs(60),
            None,
            &closed,
        );
        closed.store(true, Ordering::Relaxed);
        assert!(enter().is_err());
        assert_eq!(stopped(), Some(Stop::Closed));
    }
}
