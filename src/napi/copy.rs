//! `storage.copyTo(url, options)` and the command's `copyStorage(from, to,
//! options)` (issue 51, docs/copy.md): the copy or the verify runs on a
//! thread of its own for as long as it takes; the Promise settles with its
//! report as JSON text, and progress reaches `onProgress` as JSON text
//! through a threadsafe function (lib/storage.js parses both).

use super::reply::Reply;
use super::storage::NativeEngine;
use crate::copy::{self, Options};
use crate::core::error::Result;
use crate::seam::Call;
use crate::sqlite::SqliteEngine;
use napi::bindgen_prelude::*;
use napi::threadsafe_function::{
    ThreadsafeFunction, ThreadsafeFunctionCallMode, UnknownReturnValue,
};
use napi_derive::napi;
use std::sync::Arc;

/// Progress reports waiting for the JS thread beyond this many are dropped
/// (a later one says more).
const QUEUE: usize = 64;

type OnProgress =
    ThreadsafeFunction<String, UnknownReturnValue, String, Status, false, true, QUEUE>;

#[napi(object)]
pub struct JsCopyOptions {
    /// The target's schema (PostgreSQL).
    pub schema: Option<String>,
    /// Compare source and target after copying.
    pub verify: Option<bool>,
    /// Only compare: copy nothing.
    pub verify_only: Option<bool>,
    /// Continue an interrupted copy from the positions the target recorded.
    pub resume: Option<bool>,
    /// `copyTo` goes on to a final pass (lib/storage.js runs it), or the
    /// command's final pass (`copyStorage`): catch up, then take the file's
    /// write lock, copy the rest and mark the file moved. Refused when
    /// copying from PostgreSQL.
    pub final_pass: Option<bool>,
    /// How long the final pass waits for the file's write lock (ms).
    pub lock_timeout_ms: Option<u32>,
}

/// Target snapshots final passes left for `copyVerifySnapshot`, by token
/// (the last token given, and the snapshots not yet taken).
type Kept = (u32, std::collections::HashMap<u32, copy::TargetSnapshot>);
static SNAPSHOTS: std::sync::LazyLock<std::sync::Mutex<Kept>> =
    std::sync::LazyLock::new(Default::default);

fn kept() -> std::sync::MutexGuard<'static, Kept> {
    SNAPSHOTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn keep_snapshot(snap: copy::TargetSnapshot) -> u32 {
    let mut k = kept();
    k.0 = k.0.wrapping_add(1).max(1);
    let token = k.0;
    k.1.insert(token, snap);
    token
}

/// What a copy call does besides copying.
#[derive(Clone, Copy)]
enum Mode {
    Copy,
    VerifyOnly,
    /// The command's final pass, waiting this long for the write lock.
    Final(std::time::Duration),
}

/// How long the command's final pass waits for the file's write lock.
const LOCK_TIMEOUT_MS: u32 = 30_000;

/// The options as the copy reads them, and what else to do.
fn read_options(to: String, options: Option<JsCopyOptions>) -> (Options, Mode) {
    let o = options.unwrap_or(JsCopyOptions {
        schema: None,
        verify: None,
        verify_only: None,
        resume: None,
        final_pass: None,
        lock_timeout_ms: None,
    });
    let mode = if o.verify_only.unwrap_or(false) {
        Mode::VerifyOnly
    } else if o.final_pass.unwrap_or(false) {
        Mode::Final(std::time::Duration::from_millis(
            o.lock_timeout_ms.unwrap_or(LOCK_TIMEOUT_MS).into(),
        ))
    } else {
        Mode::Copy
    };
    (
        Options {
            target: to,
            schema: o.schema,
            verify: o.verify.unwrap_or(false),
            resume: o.resume.unwrap_or(false),
            final_pass: o.final_pass.unwrap_or(false),
        },
        mode,
    )
}

/// What a copy thread runs.
type Job = Box<
    dyn FnOnce(&SqliteEngine, &mut dyn FnMut(&copy::Progress)) -> Result<serde_json::Value> + Send,
>;

/// Runs `job` on a thread of its own; `owned`: the source was opened for
/// this call and is closed after it.
fn start(
    source: Arc<SqliteEngine>, owned: bool, job: Job, on_progress: Option<OnProgress>,
) -> Call<String> {
    /// Closes an owned source when the job ends, a panic included.
    struct Closing(Arc<SqliteEngine>, bool);
    impl Drop for Closing {
        fn drop(&mut self) {
            if self.1 {
                self.0.close();
            }
        }
    }
    let closing = Closing(source, owned);
    spawn(Box::new(move |report| job(&closing.0, report)), on_progress)
}

/// What a copy thread runs, whatever its source.
type Run = Box<dyn FnOnce(&mut dyn FnMut(&copy::Progress)) -> Result<serde_json::Value> + Send>;

/// The copy from PostgreSQL (`source`) into the SQLite file `o.target`.
fn from_postgres(
    source: crate::postgres::Config, o: Options, verify_only: bool, on_progress: Option<OnProgress>,
) -> Call<String> {
    spawn(
        Box::new(move |report| copy::from_postgres(&source, &o, verify_only, report)),
        on_progress,
    )
}

/// Runs `run` on a thread of its own; its answer settles the call.
fn spawn(run: Run, on_progress: Option<OnProgress>) -> Call<String> {
    let (tx, rx) = tokio::sync::oneshot::channel::<Result<String>>();
    let spawned = std::thread::Builder::new()
        .name("syncular-copy".to_owned())
        .spawn(move || {
            let mut report = |p: &copy::Progress| {
                if let Some(f) = &on_progress {
                    let _ = f.call(
                        p.to_json().to_string(),
                        ThreadsafeFunctionCallMode::NonBlocking,
                    );
                }
            };
            let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&mut report)))
                .unwrap_or_else(|p| Err(super::panicked(p)))
                .map(|v| v.to_string());
            let _ = tx.send(out);
        });
    if let Err(e) = spawned {
        return Call::Now(Err(crate::Error::plain(
            "ERR_SYNCULAR_COPY_SOURCE",
            format!("could not start the copy's thread: {e}"),
        )));
    }
    crate::seam::later(async move {
        rx.await.unwrap_or_else(|_| {
            Err(crate::Error::plain(
                "ERR_SYNCULAR_COPY_SOURCE",
                "the copy's thread ended without an answer",
            ))
        })
    })
}

/// The copy, only the comparison, or the command's whole move.
fn copy_job(o: Options, mode: Mode) -> Job {
    Box::new(move |source, report| match mode {
        Mode::VerifyOnly => copy::verify(source, &o, report),
        Mode::Copy => copy::copy(source, &o, report),
        Mode::Final(wait) => copy::move_out(source, &o, wait, report),
    })
}

fn this_sqlite(e: &NativeEngine) -> Result<Arc<SqliteEngine>> {
    e.sqlite_engine().ok_or_else(|| {
        crate::copy::unsupported(
            "catch-up passes and the final pass copy a SQLite storage: the copy of a PostgreSQL storage is one snapshot",
        )
    })
}

/// Copies (or verifies) the SQLite database `from` into the PostgreSQL
/// database `to`, or the PostgreSQL database `from` into the SQLite file
/// `to`: the command's entry (bin/syncular-native-storage.mjs).
#[cfg_attr(test, allow(dead_code))]
#[napi(
    js_name = "copyStorage",
    ts_args_type = "from: string, to: string, options?: { schema?: string | null, verify?: boolean | null, verifyOnly?: boolean | null, resume?: boolean | null, finalPass?: boolean | null, lockTimeoutMs?: number | null } | null, onProgress?: ((progress: string) => void) | null",
    ts_return_type = "Promise<string>"
)]
pub fn copy_storage(
    from: String, to: String, options: Option<JsCopyOptions>, on_progress: Option<OnProgress>,
) -> Reply<String> {
    let started = crate::core::telemetry::call_started();
    let (mut o, mode) = read_options(to, options);
    let from_pg = crate::open::is_postgres_url(&from);
    let call = if from_pg {
        // `--schema` names the source's schema in this direction.
        let verify_only = matches!(mode, Mode::VerifyOnly);
        match copy::postgres_source(&from, o.schema.take()) {
            Ok(source) => from_postgres(source, o, verify_only, on_progress),
            Err(e) => Call::Now(Err(e)),
        }
    } else {
        match copy::open_source(&from) {
            Ok(source) => start(source, true, copy_job(o, mode), on_progress),
            Err(e) => Call::Now(Err(e)),
        }
    };
    let engine = if from_pg {
        crate::core::telemetry::POSTGRES
    } else {
        crate::core::telemetry::SQLITE
    };
    Reply::new(call, "copyStorage", engine, started)
}

/// The mark a move left in the SQLite file `from` (docs/copy.md, "The
/// mark in the file"): `{ moved: { target, movedAtMs } | null }`; with
/// `clear`, the mark is removed first under the file's write lock and the
/// answer says whether there was one (`cleared`).
#[cfg_attr(test, allow(dead_code))]
#[napi(
    js_name = "movedMark",
    ts_args_type = "from: string, clear: boolean",
    ts_return_type = "Promise<string>"
)]
pub fn moved_mark(from: String, clear: bool) -> Reply<String> {
    let started = crate::core::telemetry::call_started();
    let job: Job = Box::new(move |source, _| {
        let wait = std::time::Duration::from_millis(LOCK_TIMEOUT_MS.into());
        let cleared = if clear {
            Some(source.clear_moved(wait)?)
        } else {
            None
        };
        let mark = source
            .moved_mark()?
            .map(|m| serde_json::json!({ "target": m.target, "movedAtMs": m.moved_at_ms }));
        Ok(serde_json::json!({ "moved": mark, "cleared": cleared }))
    });
    let call = match copy::open_source(&from) {
        Ok(source) => start(source, true, job, None),
        Err(e) => Call::Now(Err(e)),
    };
    Reply::new(call, "movedMark", crate::core::telemetry::SQLITE, started)
}

#[napi]
impl NativeEngine {
    /// Copies (or verifies) this storage's database into the PostgreSQL
    /// database `to`, while the storage stays open.
    #[napi(
        ts_args_type = "to: string, options?: { schema?: string | null, verify?: boolean | null, verifyOnly?: boolean | null, resume?: boolean | null, finalPass?: boolean | null } | null, onProgress?: ((progress: string) => void) | null",
        ts_return_type = "Promise<string>"
    )]
    pub fn copy_to(
        &self, to: String, options: Option<JsCopyOptions>, on_progress: Option<OnProgress>,
    ) -> Reply<String> {
        if let Some(source) = self.postgres_config() {
            return self.run("copyTo", move |_| {
                let (o, mode) = read_options(to, options);
                let verify_only = matches!(mode, Mode::VerifyOnly);
                copy::check_sqlite_target(&o.target)?;
                if o.schema.is_some() {
                    return Err(crate::Error::invalid(
                        "copyTo: a PostgreSQL storage copies its own schema into SQLite; the schema option names the target schema of a copy into PostgreSQL",
                    ));
                }
                Ok(from_postgres(source, o, verify_only, on_progress))
            });
        }
        let source = this_sqlite(self);
        self.run("copyTo", move |_| {
            // The final pass of a live storage runs under its own write
            // lease (lib/storage.js), never the command's.
            let (o, mode) = match read_options(to, options) {
                (o, Mode::Final(_)) => (o, Mode::Copy),
                other => other,
            };
            Ok(start(source?, false, copy_job(o, mode), on_progress))
        })
    }

    /// One catch-up pass after `copyTo` (docs/copy.md, "Online"), from the
    /// positions the last pass reported (JSON text).
    #[napi(
        ts_args_type = "to: string, options: { schema?: string | null } | null | undefined, positions: string, onProgress?: ((progress: string) => void) | null",
        ts_return_type = "Promise<string>"
    )]
    pub fn copy_catch_up(
        &self, to: String, options: Option<JsCopyOptions>, positions: String,
        on_progress: Option<OnProgress>,
    ) -> Reply<String> {
        let source = this_sqlite(self);
        self.run("copyCatchUp", move |_| {
            let (o, _) = read_options(to, options);
            let job: Job =
                Box::new(move |source, report| copy::catch_up(source, &o, &positions, report));
            Ok(start(source?, false, job, on_progress))
        })
    }

    /// The final pass, under the write lease `lease` the JS queue granted;
    /// afterwards every write of this storage is refused
    /// (`ERR_SYNCULAR_MOVED`).
    #[napi(
        ts_args_type = "lease: number, to: string, options: { schema?: string | null } | null | undefined, positions: string",
        ts_return_type = "string | Promise<string>"
    )]
    pub fn copy_finish(
        &self, lease: u32, to: String, options: Option<JsCopyOptions>, positions: String,
    ) -> Reply<String> {
        let source = this_sqlite(self);
        self.run("copyFinish", move |_| {
            let source = source?;
            let (o, _) = read_options(to, options);
            Ok(crate::seam::blocking(move || {
                let (mut report, snap) = copy::finish(&source, lease, &o, &positions, &mut |_| {})?;
                if let Some(snap) = snap {
                    report["verifyToken"] = keep_snapshot(snap).into();
                }
                Ok(report.to_string())
            }))
        })
    }

    /// `verify` against the target as the final pass left it (the snapshot
    /// `copyFinish` answered the token of), once the final pass's lease has
    /// ended: the host may already write to the target meanwhile.
    #[napi(
        ts_args_type = "token: number, onProgress?: ((progress: string) => void) | null",
        ts_return_type = "Promise<string>"
    )]
    pub fn copy_verify_snapshot(
        &self, token: u32, on_progress: Option<OnProgress>,
    ) -> Reply<String> {
        let source = this_sqlite(self);
        self.run("copyVerifySnapshot", move |_| {
            let snap = kept().1.remove(&token).ok_or_else(|| {
                crate::Error::invalid(
                    "copyVerifySnapshot: no final pass left a snapshot of that number",
                )
            })?;
            let job: Job = Box::new(move |source, report| snap.verify(source, report));
            Ok(start(source?, false, job, on_progress))
        })
    }
}
