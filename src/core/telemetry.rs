//! Diagnostics through `tracing`: storage calls with their duration, slow
//! statements, lock and pool waits, busy retries.
//!
//! Off unless asked for. `SYNCULAR_NATIVE_LOG` (env-filter directives, e.g.
//! `debug` or `syncular=warn,syncular::call=debug`) sends events to stderr;
//! [`set_sink`] hands them to a callback instead (the N-API binding passes
//! a JS logger). One global subscriber, installed on first need, routes each
//! event through two per-layer filters read from [`STATE`], so a sink can
//! come and go at any time; every change rebuilds tracing's callsite cache,
//! so with nothing enabled each check below is one relaxed atomic load
//! (tracing's global max level is `OFF`), with no allocation and no clock
//! read.
//!
//! | target           | level | fields                                              |
//! |------------------|-------|-----------------------------------------------------|
//! | `syncular::call` | debug | `member`, `engine`, `micros`                        |
//! | `syncular::slow` | warn  | `engine`, `kind`, `site`, [`sql`], `micros`         |
//! | `syncular::lock` | warn  | `engine`, [`partition`], `micros`                   |
//! | `syncular::pool` | warn  | `engine`, `micros`, `size`, `idle`                  |
//! | `syncular::busy` | warn  | `engine`, `op`, `retries`, `waited_ms`, `gave_up`   |
//! | `syncular::tx`   | warn  | `engine`, `partition`, `age_ms`, `last_member`, `rolled_back` |
//!
//! `slow`, `lock` and `pool` warn above `SYNCULAR_NATIVE_SLOW_MS` (default
//! 100, read once); `busy` warns at retries 1, 2, 4, 8, … and when the wait
//! gives up.
//!
//! Nothing here knows about JS: the binding calls [`call_started`] /
//! [`call_finished`] around each member and [`set_sink`] for a JS logger.

use crate::core::error::{Error, Result};
use std::fmt::Write as _;
use std::io::Write as _;
use std::panic::Location;
use std::sync::{Arc, Once, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};
use tracing::level_filters::LevelFilter;
use tracing::subscriber::Interest;
use tracing::{span, Level, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Filter, Layer, SubscriberExt as _};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

/// The environment variable holding the stderr filter.
pub const LOG_ENV: &str = "SYNCULAR_NATIVE_LOG";
/// The environment variable holding the slow threshold, in milliseconds.
pub const SLOW_ENV: &str = "SYNCULAR_NATIVE_SLOW_MS";
/// The slow threshold when `SYNCULAR_NATIVE_SLOW_MS` is unset or invalid.
pub const DEFAULT_SLOW: Duration = Duration::from_millis(100);
/// A sink's filter when none is given and `SYNCULAR_NATIVE_LOG` is unset.
pub const DEFAULT_SINK_FILTER: &str = "warn";

/// The event targets.
pub mod target {
    pub const CALL: &str = "syncular::call";
    pub const SLOW: &str = "syncular::slow";
    pub const LOCK: &str = "syncular::lock";
    pub const POOL: &str = "syncular::pool";
    pub const BUSY: &str = "syncular::busy";
    pub const TX: &str = "syncular::tx";
}

/// The engines, as the `engine` field names them.
pub const SQLITE: &str = "sqlite";
pub const POSTGRES: &str = "postgres";

// ---- state ------------------------------------------------------------------

/// One event as a sink receives it.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRecord {
    /// `error`, `warn`, `info`, `debug` or `trace`.
    pub level: &'static str,
    pub target: String,
    pub message: String,
    /// The event's other fields, in order: strings, numbers and booleans
    /// as such, anything else as its `Debug` text.
    pub fields: serde_json::Map<String, serde_json::Value>,
}

/// Receives events; called on the thread that emitted them, so it must not
/// block (the binding's sink queues to the JS thread).
pub type SinkFn = Box<dyn Fn(LogRecord) + Send + Sync>;

struct Sink {
    deliver: SinkFn,
    filter: EnvFilter,
}

struct State {
    /// `SYNCULAR_NATIVE_LOG`, parsed; used while no sink is set.
    stderr: Option<EnvFilter>,
    sink: Option<Arc<Sink>>,
}

static STATE: RwLock<State> = RwLock::new(State {
    stderr: None,
    sink: None,
});

// Poisoning cannot leave `State` half-written (each write is one
// assignment); keep serving.
fn read_state() -> RwLockReadGuard<'static, State> {
    STATE.read().unwrap_or_else(|p| p.into_inner())
}

fn write_state() -> RwLockWriteGuard<'static, State> {
    STATE.write().unwrap_or_else(|p| p.into_inner())
}

/// Parses env-filter directives (`debug`, `syncular=warn,syncular::call=debug`).
pub fn parse_filter(spec: &str) -> std::result::Result<EnvFilter, String> {
    EnvFilter::builder()
        .with_default_directive(LevelFilter::OFF.into())
        .parse(spec.trim())
        .map_err(|e| e.to_string())
}

/// `SYNCULAR_NATIVE_LOG` when set and not blank.
fn env_spec() -> Option<String> {
    std::env::var(LOG_ENV).ok().filter(|s| !s.trim().is_empty())
}

/// Installs the global subscriber once. `false` when another one was
/// installed first (events then go to that one).
fn install() -> bool {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    *INSTALLED.get_or_init(|| {
        let subscriber = tracing_subscriber::registry()
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_ansi(false)
                    .with_filter(Route::Stderr),
            )
            .with(SinkLayer.with_filter(Route::Sink));
        tracing::subscriber::set_global_default(subscriber).is_ok()
    })
}

/// Reads `SYNCULAR_NATIVE_LOG` and, when it is set, starts logging to
/// stderr. Idempotent; never panics. An invalid filter is reported in one
/// stderr line and leaves logging off.
pub fn init() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let Some(spec) = env_spec() else { return };
        match parse_filter(&spec) {
            Ok(filter) => {
                write_state().stderr = Some(filter);
                install();
                tracing::callsite::rebuild_interest_cache();
            }
            Err(e) => {
                let _ = writeln!(
                    std::io::stderr(),
                    "syncular-native-storage: {LOG_ENV}={spec:?} is not a valid filter ({e}); logging stays off"
                );
            }
        }
    });
}

/// Sends events to `sink` instead of stderr (`None`: back to stderr, or
/// off). The sink's filter is `filter`, else `SYNCULAR_NATIVE_LOG` when
/// that is valid, else [`DEFAULT_SINK_FILTER`]. One sink per process: a
/// later call replaces it. An invalid `filter` is an
/// `ERR_SYNCULAR_INVALID_ARGUMENT` error and changes nothing.
pub fn set_sink(sink: Option<SinkFn>, filter: Option<&str>) -> Result<()> {
    init();
    let next = match sink {
        None => None,
        Some(deliver) => {
            let filter = match filter.filter(|s| !s.trim().is_empty()) {
                Some(spec) => parse_filter(spec)
                    .map_err(|e| Error::invalid(format!("invalid log filter {spec:?}: {e}")))?,
                None => env_spec()
                    .and_then(|s| parse_filter(&s).ok())
                    .unwrap_or_else(|| {
                        parse_filter(DEFAULT_SINK_FILTER).expect("default filter parses")
                    }),
            };
            Some(Arc::new(Sink { deliver, filter }))
        }
    };
    let on = next.is_some();
    let previous = std::mem::replace(&mut write_state().sink, next);
    // Dropped outside the lock: a binding's sink may release JS resources.
    drop(previous);
    if on {
        install();
    }
    tracing::callsite::rebuild_interest_cache();
    Ok(())
}

/// Which output a per-layer filter guards. Both read [`STATE`], so the
/// subscriber never needs replacing.
#[derive(Clone, Copy)]
enum Route {
    Stderr,
    Sink,
}

impl Route {
    fn with<R>(self, f: impl FnOnce(Option<&EnvFilter>) -> R) -> R {
        let st = read_state();
        let filter = match self {
            // A sink replaces stderr.
            Route::Stderr if st.sink.is_none() => st.stderr.as_ref(),
            Route::Stderr => None,
            Route::Sink => st.sink.as_deref().map(|s| &s.filter),
        };
        f(filter)
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Filter<S> for Route {
    fn enabled(&self, meta: &Metadata<'_>, cx: &Context<'_, S>) -> bool {
        self.with(|f| f.is_some_and(|f| <EnvFilter as Filter<S>>::enabled(f, meta, cx)))
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        self.with(|f| {
            f.map_or(Interest::never(), |f| {
                <EnvFilter as Filter<S>>::callsite_enabled(f, meta)
            })
        })
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        self.with(|f| {
            f.map_or(
                Some(LevelFilter::OFF),
                <EnvFilter as Filter<S>>::max_level_hint,
            )
        })
    }

    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, cx: Context<'_, S>) {
        self.with(|f| f.map(|f| <EnvFilter as Filter<S>>::on_new_span(f, attrs, id, cx)));
    }

    fn on_record(&self, id: &span::Id, values: &span::Record<'_>, cx: Context<'_, S>) {
        self.with(|f| f.map(|f| <EnvFilter as Filter<S>>::on_record(f, id, values, cx)));
    }

    fn on_enter(&self, id: &span::Id, cx: Context<'_, S>) {
        self.with(|f| f.map(|f| <EnvFilter as Filter<S>>::on_enter(f, id, cx)));
    }

    fn on_exit(&self, id: &span::Id, cx: Context<'_, S>) {
        self.with(|f| f.map(|f| <EnvFilter as Filter<S>>::on_exit(f, id, cx)));
    }

    fn on_close(&self, id: span::Id, cx: Context<'_, S>) {
        self.with(|f| f.map(|f| <EnvFilter as Filter<S>>::on_close(f, id, cx)));
    }
}

/// Hands each event that passed [`Route::Sink`] to the sink.
struct SinkLayer;

impl<S: Subscriber> Layer<S> for SinkLayer {
    fn on_event(&self, event: &tracing::Event<'_>, _cx: Context<'_, S>) {
        let Some(sink) = read_state().sink.clone() else {
            return;
        };
        (sink.deliver)(LogRecord::of(event));
    }
}

impl LogRecord {
    fn of(event: &tracing::Event<'_>) -> LogRecord {
        let meta = event.metadata();
        let mut record = LogRecord {
            level: level_name(*meta.level()),
            target: meta.target().to_owned(),
            message: String::new(),
            fields: serde_json::Map::new(),
        };
        event.record(&mut Visit(&mut record));
        record
    }
}

fn level_name(level: Level) -> &'static str {
    match level {
        Level::ERROR => "error",
        Level::WARN => "warn",
        Level::INFO => "info",
        Level::DEBUG => "debug",
        Level::TRACE => "trace",
    }
}

struct Visit<'a>(&'a mut LogRecord);

impl Visit<'_> {
    fn put(&mut self, field: &tracing::field::Field, value: serde_json::Value) {
        if field.name() == "message" {
            match value {
                serde_json::Value::String(s) => self.0.message = s,
                other => self.0.message = other.to_string(),
            }
        } else {
            self.0.fields.insert(field.name().to_owned(), value);
        }
    }
}

impl tracing::field::Visit for Visit<'_> {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.put(field, value.into());
    }
    fn record_i64(&mut self, field: &tracing::field::Field, value: i64) {
        self.put(field, value.into());
    }
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        self.put(field, value.into());
    }
    fn record_f64(&mut self, field: &tracing::field::Field, value: f64) {
        self.put(field, value.into());
    }
    fn record_bool(&mut self, field: &tracing::field::Field, value: bool) {
        self.put(field, value.into());
    }
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let mut text = String::new();
        let _ = write!(text, "{value:?}");
        self.put(field, text.into());
    }
}

// ---- thresholds -------------------------------------------------------------

fn parse_slow(v: Option<&str>) -> Duration {
    v.and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
        .unwrap_or(DEFAULT_SLOW)
}

/// `SYNCULAR_NATIVE_SLOW_MS` (default 100 ms), read once. Statements and
/// waits taking longer warn.
pub fn slow_threshold() -> Duration {
    static SLOW: OnceLock<Duration> = OnceLock::new();
    *SLOW.get_or_init(|| parse_slow(std::env::var(SLOW_ENV).ok().as_deref()))
}

fn micros(d: Duration) -> u64 {
    d.as_micros().try_into().unwrap_or(u64::MAX)
}

/// Text prefix of a statement for an event: the first 160 bytes (cut at a
/// character boundary).
fn prefix(sql: &str) -> &str {
    let mut end = sql.len().min(160);
    while !sql.is_char_boundary(end) {
        end -= 1;
    }
    &sql[..end]
}

// ---- storage calls ------------------------------------------------------------

/// `Some(now)` only when a call event would be recorded (debug enabled for
/// `syncular::call`); else `None`, at the cost of a cached check.
#[inline]
pub fn call_started() -> Option<Instant> {
    if tracing::enabled!(target: target::CALL, Level::DEBUG) {
        Some(Instant::now())
    } else {
        None
    }
}

/// Records a storage call started by [`call_started`]: `member` is the
/// storage member's JS name, `engine` [`SQLITE`] or [`POSTGRES`].
#[inline]
pub fn call_finished(start: Option<Instant>, member: &'static str, engine: &'static str) {
    if let Some(start) = start {
        let micros = micros(start.elapsed());
        tracing::debug!(target: target::CALL, member, engine, micros, "storage call");
    }
}

// ---- engine events --------------------------------------------------------------

/// Whether slow-statement warnings are on (cached check).
#[inline]
pub fn slow_enabled() -> bool {
    tracing::enabled!(target: target::SLOW, Level::WARN)
}

/// Whether lock-wait warnings are on (cached check).
#[inline]
pub fn lock_enabled() -> bool {
    tracing::enabled!(target: target::LOCK, Level::WARN)
}

/// Whether pool-wait warnings are on (cached check).
#[inline]
pub fn pool_enabled() -> bool {
    tracing::enabled!(target: target::POOL, Level::WARN)
}

/// Times a unit of engine work (one member's statements, a COMMIT, a
/// registered query) and warns on `syncular::slow` when it ran longer than
/// [`slow_threshold`], when dropped. Reads the clock only when the warning
/// is enabled.
#[must_use = "the guard reports when dropped"]
pub struct Slow<'a> {
    start: Option<Instant>,
    engine: &'static str,
    kind: &'static str,
    site: Site,
    sql: Option<&'a str>,
}

/// Where the timed work was issued.
#[derive(Clone, Copy)]
pub enum Site {
    Caller(&'static Location<'static>),
    Text(&'static str),
}

impl Site {
    /// The calling line (of the outermost `#[track_caller]` function).
    #[track_caller]
    #[inline]
    pub fn caller() -> Site {
        Site::Caller(Location::caller())
    }
}

impl std::fmt::Display for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Site::Caller(l) => write!(f, "{}:{}", l.file(), l.line()),
            Site::Text(t) => f.write_str(t),
        }
    }
}

impl<'a> Slow<'a> {
    #[inline]
    pub fn start(engine: &'static str, kind: &'static str, site: Site) -> Slow<'a> {
        Slow {
            start: slow_enabled().then(Instant::now),
            engine,
            kind,
            site,
            sql: None,
        }
    }

    /// The statement text (its prefix goes into the event).
    #[inline]
    pub fn sql(mut self, sql: &'a str) -> Slow<'a> {
        self.sql = Some(sql);
        self
    }
}

impl Drop for Slow<'_> {
    fn drop(&mut self) {
        let Some(start) = self.start else { return };
        let took = start.elapsed();
        if took <= slow_threshold() {
            return;
        }
        let (engine, kind, site, micros) = (self.engine, self.kind, self.site, micros(took));
        match self.sql {
            Some(sql) => tracing::warn!(
                target: target::SLOW,
                engine, kind, %site, sql = prefix(sql), micros,
                "slow statement"
            ),
            None => tracing::warn!(
                target: target::SLOW,
                engine, kind, %site, micros,
                "slow statement"
            ),
        }
    }
}

/// Start of a write-lock wait: `Some` only when lock warnings are enabled.
#[inline]
pub fn lock_wait_started() -> Option<Instant> {
    lock_enabled().then(Instant::now)
}

/// Warns on `syncular::lock` when the wait since `start` exceeded the
/// threshold. `partition` is `None` for a storage-level SQLite write.
pub fn lock_waited(start: Option<Instant>, engine: &'static str, partition: Option<&str>) {
    let Some(start) = start else { return };
    let took = start.elapsed();
    if took <= slow_threshold() {
        return;
    }
    let micros = micros(took);
    match partition {
        Some(partition) => tracing::warn!(
            target: target::LOCK,
            engine, partition, micros,
            "write lock wait"
        ),
        None => tracing::warn!(target: target::LOCK, engine, micros, "write lock wait"),
    }
}

/// Warns on `syncular::tx` about a transaction left open: `age_ms` since
/// its begin, the last member it called, and whether it is being rolled
/// back for exceeding the storage's limit.
pub fn transaction_open(
    engine: &'static str, partition: &str, age_ms: u64, last_member: &str, rolled_back: bool,
) {
    tracing::warn!(
        target: target::TX,
        engine, partition, age_ms, last_member, rolled_back,
        "transaction open"
    );
}

/// Start of a pool acquire: `Some` only when pool warnings are enabled.
#[inline]
pub fn pool_wait_started() -> Option<Instant> {
    pool_enabled().then(Instant::now)
}

/// Warns on `syncular::pool` when acquiring a connection took longer than
/// the threshold; `size` and `idle` describe the pool afterwards.
pub fn pool_waited(start: Option<Instant>, engine: &'static str, size: u32, idle: usize) {
    let Some(start) = start else { return };
    let took = start.elapsed();
    if took <= slow_threshold() {
        return;
    }
    let micros = micros(took);
    tracing::warn!(
        target: target::POOL,
        engine, micros, size, idle,
        "pool acquire wait"
    );
}

/// A busy retry: `retries` attempts failed so far (≥ 1), after `waited`.
/// Warns at retries 1, 2, 4, 8, … and when the wait gives up.
pub fn busy_retry(
    engine: &'static str, op: &'static str, retries: u32, waited: Duration, gave_up: bool,
) {
    if !(gave_up || retries.is_power_of_two()) {
        return;
    }
    let waited_ms: u64 = waited.as_millis().try_into().unwrap_or(u64::MAX);
    tracing::warn!(
        target: target::BUSY,
        engine, op, retries, waited_ms, gave_up,
        "database busy, retrying"
    );
}

/// Lock waits of one storage, counted whether or not anything logs: a
/// clock read and two relaxed adds, on paths that wait anyway.
#[derive(Debug, Default)]
pub struct Waits {
    count: std::sync::atomic::AtomicU64,
    micros: std::sync::atomic::AtomicU64,
}

impl Waits {
    pub fn record(&self, waited: Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        self.count.fetch_add(1, Relaxed);
        self.micros
            .fetch_add(waited.as_micros().min(u64::MAX as u128) as u64, Relaxed);
    }

    /// `(count, total microseconds)`.
    pub fn read(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.count.load(Relaxed), self.micros.load(Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// The subscriber and its state are process-wide: tests touching them
    /// take turns.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn serial() -> std::sync::MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|p| p.into_inner())
    }

    #[test]
    fn filters_parse() {
        for ok in [
            "debug",
            "warn",
            "syncular=warn,syncular::call=debug",
            "syncular::slow=warn",
            "off",
            "  info ",
        ] {
            assert!(parse_filter(ok).is_ok(), "{ok}");
        }
        for bad in ["syncular=loud", "=debug=", "a=b=c"] {
            assert!(parse_filter(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn slow_threshold_parses() {
        assert_eq!(parse_slow(None), DEFAULT_SLOW);
        assert_eq!(parse_slow(Some("0")), Duration::ZERO);
        assert_eq!(parse_slow(Some(" 250 ")), Duration::from_millis(250));
        assert_eq!(parse_slow(Some("0.5")), Duration::from_micros(500));
        for bad in ["", "x", "-1", "NaN", "inf"] {
            assert_eq!(parse_slow(Some(bad)), DEFAULT_SLOW, "{bad}");
        }
    }

    #[test]
    fn prefix_cuts_at_char_boundary() {
        let s = "é".repeat(100);
        let p = prefix(&s);
        assert!(p.len() <= 160 && p.len() >= 158);
        assert_eq!(prefix("SELECT 1"), "SELECT 1");
    }

    /// The whole life cycle, in one test because the state is global:
    /// nothing enabled → no clock reads; a sink turns events on, with its
    /// filter; removing it turns them off again.
    #[test]
    fn sink_life_cycle() {
        let _g = serial();
        if env_spec().is_some() {
            // Run with SYNCULAR_NATIVE_LOG set: stderr logging is on.
            return;
        }
        init();
        assert!(call_started().is_none(), "disabled path must return None");
        assert!(!slow_enabled() && !lock_enabled() && !pool_enabled());
        assert_eq!(LevelFilter::current(), LevelFilter::OFF);

        let got: Arc<Mutex<Vec<LogRecord>>> = Arc::default();
        let into = got.clone();
        set_sink(
            Some(Box::new(move |r| into.lock().unwrap().push(r))),
            Some("syncular::call=debug,syncular::slow=warn"),
        )
        .unwrap();
        // Debug for calls, and an invalid filter later changes nothing.
        let start = call_started();
        assert!(start.is_some());
        call_finished(start, "getMaxCommitSeq", SQLITE);
        assert!(slow_enabled());
        assert!(!lock_enabled(), "lock not in the filter");
        {
            let _s = Slow::start(SQLITE, "read", Site::Text("here")).sql("SELECT 1");
            std::thread::sleep(slow_threshold() + Duration::from_millis(5));
        }
        assert!(set_sink(Some(Box::new(|_| {})), Some("syncular=loud")).is_err());
        assert!(call_started().is_some(), "a refused filter keeps the sink");

        let records = got.lock().unwrap().clone();
        assert_eq!(records.len(), 2, "{records:?}");
        assert_eq!(records[0].level, "debug");
        assert_eq!(records[0].target, target::CALL);
        assert_eq!(records[0].message, "storage call");
        assert_eq!(records[0].fields["member"], "getMaxCommitSeq");
        assert_eq!(records[0].fields["engine"], "sqlite");
        assert!(records[0].fields["micros"].is_u64());
        assert_eq!(records[1].level, "warn");
        assert_eq!(records[1].target, target::SLOW);
        assert_eq!(records[1].fields["kind"], "read");
        assert_eq!(records[1].fields["site"], "here");
        assert_eq!(records[1].fields["sql"], "SELECT 1");

        // The default sink filter is `warn`: no call events.
        set_sink(Some(Box::new(|_| {})), None).unwrap();
        assert!(call_started().is_none());
        assert!(slow_enabled() && lock_enabled() && pool_enabled());

        set_sink(None, None).unwrap();
        assert!(call_started().is_none());
        assert!(!slow_enabled() && !lock_enabled() && !pool_enabled());
        assert_eq!(LevelFilter::current(), LevelFilter::OFF);
    }
}
