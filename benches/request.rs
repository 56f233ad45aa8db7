//! The storage work of whole host push requests, issued directly against
//! the engine from Rust: the floor of ours' storage share of a push request
//! (issue 50), with no N-API, no JS and no handler. A bench target, not
//! part of the addon.
//!
//! One request makes the calls upstream's handler makes for a push of one
//! commit (logged through a Proxy, bench/README.md "The SQLite floor of a
//! push request"), in its order:
//!
//! ```text
//! touchPartition                      storage-level write (autocommit)
//! getClientRecord, getPushResult      reads (autocommit)
//! begin                               BEGIN IMMEDIATE
//!   lockPartitionForPush, getPushResult
//!   getRow, upsertRow                 per op
//!   appendCommit, putPushResult
//! commit                              COMMIT
//! getClientRecord                     read
//! putClientRecord                     storage-level write (autocommit)
//! ```
//!
//! `cargo bench --bench request -- <dir> <shape> <ops> [synchronous] [variant]`
//!
//! - `shape` `warm:R`: one storage, R rounds of 500 requests, each round
//!   into a partition of its own (alternate.mjs's push1/push10);
//!   `fresh:F`: F new files, each opened, 20 warm-up requests, then 400
//!   timed (alternate.mjs's fresh1).
//! - `variant` `host` (default): the calls as the host makes them;
//!   `fold-touch`: the touch runs inside the push's transaction instead of
//!   a transaction of its own; `one-tx`: the touch and the client record
//!   both inside it (each variant drops a transaction the host's order
//!   requires; they measure what a transaction costs SQLite, nothing more);
//!   `no-lock`: no lockPartitionForPush, so no candidate savepoint (what
//!   the savepoint's page copies cost).
//!
//! Prints one JSON line per round: `{"round":…,"cpuUs":…,"userUs":…,
//! "sysUs":…,"wallUs":…}`, CPU of the calling thread (getrusage
//! RUSAGE_THREAD) and wall time, µs per timed request. With no arguments:
//! `warm:2` of 1 op at `normal` in a temporary directory.
//! `tests/bench_floor.rs` includes this file to keep it compiling and
//! working.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use syncular_native_storage::core::model::{CheckpointDeclaration, ClientRecord, NewCommit};
use syncular_native_storage::core::schema::Schema;
use syncular_native_storage::seam::{Clients, Lifecycle, Log, Reads, Transaction};
use syncular_native_storage::sqlite::{Config, Location, SqliteEngine, Synchronous};
use syncular_native_storage::Result;

// The floor bench's schema, payloads and arguments (its `main` is that
// binary's).
#[path = "floor.rs"]
#[allow(dead_code)]
mod floor;
use floor::BENCH_SCHEMA as SCHEMA;

const CLIENT: &str = "bench-client";
const SCOPES: &str = r#"{"project_id":"p1"}"#;
/// Requests a warm round makes (alternate.mjs's push figures).
const PER_ROUND: u32 = 500;
/// A fresh file's warm-up and timed requests (alternate.mjs's fresh1).
const FRESH_WARM: u32 = 20;
const FRESH_TIMED: u32 = 400;

/// Which transactions a request makes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Variant {
    /// As the host makes them: touch, push and client record each commit.
    Host,
    /// The touch inside the push's transaction.
    FoldTouch,
    /// The touch and the client record inside the push's transaction.
    OneTx,
    /// As `Host` without lockPartitionForPush (no candidate savepoint).
    NoLock,
}

impl Variant {
    pub fn parse(s: &str) -> Option<Variant> {
        match s {
            "host" => Some(Variant::Host),
            "fold-touch" => Some(Variant::FoldTouch),
            "one-tx" => Some(Variant::OneTx),
            "no-lock" => Some(Variant::NoLock),
            _ => None,
        }
    }
}

/// The calling thread's CPU, user and system, in µs.
fn thread_cpu() -> (f64, f64) {
    // SAFETY: getrusage writes the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) };
    let us = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
    (us(u.ru_utime), us(u.ru_stime))
}

/// One measured stretch: µs per request.
#[derive(Clone, Copy, Debug)]
pub struct Round {
    pub user_us: f64,
    pub sys_us: f64,
    pub wall_us: f64,
}

impl Round {
    pub fn cpu_us(&self) -> f64 {
        self.user_us + self.sys_us
    }
}

struct Clock {
    cpu: (f64, f64),
    wall: Instant,
}

impl Clock {
    fn start() -> Clock {
        Clock {
            cpu: thread_cpu(),
            wall: Instant::now(),
        }
    }

    fn per(self, n: u32) -> Round {
        let (u, s) = thread_cpu();
        let n = f64::from(n.max(1));
        Round {
            user_us: (u - self.cpu.0) / n,
            sys_us: (s - self.cpu.1) / n,
            wall_us: self.wall.elapsed().as_secs_f64() * 1e6 / n,
        }
    }
}

/// An engine on `path`, its schema ensured, as a host's first request
/// leaves it.
fn open(path: &Path, synchronous: Synchronous) -> Result<Arc<SqliteEngine>> {
    let engine = Arc::new(SqliteEngine::new(Config {
        location: Location::File(path.to_str().expect("utf-8 path").to_owned()),
        synchronous,
        busy_timeout: Duration::from_secs(5),
        query_timeout: syncular_native_storage::core::query::DEFAULT_TIMEOUT,
        result_limits: Default::default(),
    }));
    let lease = engine.begin(None).wait()?;
    Lifecycle::ensure_schema(
        &engine,
        lease,
        Schema::parse(SCHEMA)?,
        Vec::<CheckpointDeclaration>::new(),
        0,
    )
    .wait()?;
    engine.unlock(lease, true).wait()?;
    Ok(engine)
}

/// A client of one partition sending push requests of `ops` upserts of the
/// same rows (`row-0` …), as `bench/lib/server.mjs`'s pushSequential does.
struct Pusher {
    engine: Arc<SqliteEngine>,
    partition: String,
    ops: u32,
    variant: Variant,
    schema: Schema,
    row_ids: Vec<String>,
}

impl Pusher {
    /// The host's context set-up: the partition touched with its epoch.
    fn new(
        engine: Arc<SqliteEngine>, partition: &str, ops: u32, variant: Variant,
    ) -> Result<Pusher> {
        engine
            .touch_partition(0, partition.into(), 1, "bench-log-epoch".into())
            .wait()?;
        Ok(Pusher {
            engine,
            partition: partition.to_owned(),
            ops,
            variant,
            schema: Schema::parse(SCHEMA)?,
            row_ids: (0..ops).map(|o| format!("row-{o}")).collect(),
        })
    }

    /// The payloads of commit `n` (the host's work, built untimed).
    fn payloads(&self, n: i64) -> Result<Vec<Vec<u8>>> {
        self.row_ids
            .iter()
            .map(|id| floor::payload(&self.schema, id, n))
            .collect()
    }

    fn touch(&self, lease: u32, at_ms: i64) -> Result<()> {
        // The host passes a new random epoch each request (used only when
        // the partition is new).
        self.engine
            .touch_partition(
                lease,
                self.partition.clone(),
                at_ms,
                "4f7c2a9e-0b1d-4c3e-8a5f-6d2e1b0c9a87".into(),
            )
            .wait()?;
        Ok(())
    }

    fn put_client(&self, lease: u32, at_ms: i64) -> Result<()> {
        let record = ClientRecord {
            client_id: CLIENT.into(),
            actor_id: "bench-actor".into(),
            wire_version: 2,
            cursor: -1,
            updated_at_ms: at_ms,
            subscriptions_json: "[]".into(),
        };
        self.engine
            .put_client_record(lease, self.partition.clone(), record)
            .wait()
    }

    /// One push request's storage calls; `payloads` are commit `n`'s.
    fn request(&self, tag: &str, n: i64, payloads: Vec<Vec<u8>>) -> Result<()> {
        let e = &self.engine;
        let p = &self.partition;
        let commit_id = format!("seq-{tag}{}-{n}", self.ops);
        let at_ms = 1_796_000_000_000 + n;
        let own_touch = matches!(self.variant, Variant::Host | Variant::NoLock);
        if own_touch {
            self.touch(0, at_ms)?;
        }
        e.get_client_record(p.clone(), CLIENT.into()).wait()?;
        e.get_push_result(p.clone(), CLIENT.into(), commit_id.clone())
            .wait()?;
        let id = e.begin(Some(p.clone())).wait()?;
        if !own_touch {
            self.touch(id, at_ms)?;
        }
        if self.variant != Variant::NoLock {
            e.tx_lock_partition_for_push(id).wait()?;
        }
        e.tx_get_push_result(id, CLIENT.into(), commit_id.clone())
            .wait()?;
        let mut changes = Vec::with_capacity(payloads.len());
        for (o, payload) in payloads.into_iter().enumerate() {
            let row_id = self.row_ids[o].clone();
            let version = e
                .tx_get_row(id, "tasks".into(), row_id.clone())
                .wait()?
                .map_or(1, |r| r.server_version + 1);
            changes.push(floor::upsert(
                e, id, row_id, version, SCOPES, payload, o as u32,
            )?);
        }
        let seq = e
            .tx_append_commit(
                id,
                NewCommit {
                    client_id: CLIENT.into(),
                    client_commit_id: commit_id.clone(),
                    actor_id: "bench-actor".into(),
                    created_at_ms: at_ms,
                    changes,
                },
            )
            .wait()?;
        // The text the package stores for the handler's result.
        let results: Vec<String> = (0..self.ops)
            .map(|o| format!(r#"{{"opIndex":{o},"status":"applied"}}"#))
            .collect();
        let result = format!(
            r#"{{"status":"applied","commitSeq":{seq},"results":[{}],"recordedAtMs":{at_ms},"cacheIdentity":"c-{commit_id}"}}"#,
            results.join(",")
        );
        e.tx_put_push_result(id, CLIENT.into(), commit_id, result)
            .wait()?;
        if self.variant == Variant::OneTx {
            self.put_client(id, at_ms)?;
        }
        e.unlock(id, true).wait()?;
        e.get_client_record(p.clone(), CLIENT.into()).wait()?;
        if self.variant != Variant::OneTx {
            self.put_client(0, at_ms)?;
        }
        Ok(())
    }

    /// `count` requests, commits `0..count` tagged `tag`; µs per request.
    fn run(&self, tag: &str, count: u32) -> Result<Round> {
        let payloads: Vec<Vec<Vec<u8>>> = (0..count)
            .map(|c| self.payloads(i64::from(c)))
            .collect::<Result<_>>()?;
        let clock = Clock::start();
        for (c, p) in payloads.into_iter().enumerate() {
            self.request(tag, c as i64, p)?;
        }
        Ok(clock.per(count))
    }
}

/// How the requests are laid out over storages and files.
#[derive(Clone, Copy, Debug)]
pub enum Shape {
    /// One storage, this many rounds of 500 requests, a partition each.
    Warm(u32),
    /// This many new files: 20 warm-up requests, then 400 timed.
    Fresh(u32),
}

impl Shape {
    pub fn parse(s: &str) -> Option<Shape> {
        let (kind, n) = s.split_once(':')?;
        let n: u32 = n.parse().ok()?;
        match kind {
            "warm" => Some(Shape::Warm(n)),
            "fresh" => Some(Shape::Fresh(n)),
            _ => None,
        }
    }
}

/// The rounds of `shape` in `dir` (files are made there and removed).
pub fn measure(
    dir: &Path, shape: Shape, ops: u32, synchronous: Synchronous, variant: Variant,
    mut each: impl FnMut(usize, Round),
) -> Result<Vec<Round>> {
    let mut rounds = Vec::new();
    match shape {
        Shape::Warm(n) => {
            let path = dir.join("warm.sqlite");
            let engine = open(&path, synchronous)?;
            for r in 0..n {
                let pusher = Pusher::new(engine.clone(), &format!("push-{r}"), ops, variant)?;
                let round = pusher.run("", PER_ROUND)?;
                each(r as usize, round);
                rounds.push(round);
            }
            SqliteEngine::close(&engine);
        }
        Shape::Fresh(n) => {
            for r in 0..n {
                let path = dir.join(format!("fresh-{r}.sqlite"));
                let engine = open(&path, synchronous)?;
                let pusher = Pusher::new(engine.clone(), &format!("fresh-{r}"), ops, variant)?;
                pusher.run("warm-", FRESH_WARM)?;
                let round = pusher.run("", FRESH_TIMED)?;
                SqliteEngine::close(&engine);
                for suffix in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
                }
                each(r as usize, round);
                rounds.push(round);
            }
        }
    }
    Ok(rounds)
}

fn main() {
    let args = floor::positional();
    let pos: Vec<&str> = args.iter().map(String::as_str).collect();
    let scratch = std::env::temp_dir().join(format!("syncular-request-{}", std::process::id()));
    let default_dir = scratch.to_str().expect("utf-8 temp path").to_owned();
    let (dir, shape, ops, sync, variant) = match pos[..] {
        [] => (default_dir.as_str(), "warm:2", "1", None, "host"),
        [d, s, o] => (d, s, o, None, "host"),
        [d, s, o, y] => (d, s, o, Some(y), "host"),
        [d, s, o, y, v] => (d, s, o, Some(y), v),
        _ => usage(),
    };
    let (Some(shape), Ok(ops), Ok(sync), Some(variant)) = (
        Shape::parse(shape),
        ops.parse::<u32>(),
        Synchronous::parse(sync.or(Some("normal"))),
        Variant::parse(variant),
    ) else {
        usage()
    };
    std::fs::create_dir_all(dir).expect("directory");
    let outcome = measure(Path::new(dir), shape, ops, sync, variant, |r, x| {
        println!(
            r#"{{"round":{r},"cpuUs":{:.2},"userUs":{:.2},"sysUs":{:.2},"wallUs":{:.2}}}"#,
            x.cpu_us(),
            x.user_us,
            x.sys_us,
            x.wall_us
        );
    });
    if pos.is_empty() {
        let _ = std::fs::remove_dir_all(&scratch);
    }
    if let Err(e) = outcome {
        eprintln!("request: {e}");
        std::process::exit(1);
    }
}

fn usage() -> ! {
    eprintln!(
        "usage: request <dir> <warm:R|fresh:F> <ops> [full|normal|off] [host|fold-touch|one-tx|no-lock]"
    );
    std::process::exit(2);
}
