//! Operations members (`docs/operations.md`): versions, the round trip of
//! `ping`, the engine's numbers for `stats`, and `backup`.

use super::reply::Reply;
use super::storage::NativeEngine;
use crate::seam::EngineStats;
use napi_derive::napi;

#[napi(object)]
pub struct AddonVersions {
    /// The crate's version.
    pub addon: String,
    /// `release` or `debug`.
    pub profile: String,
    /// The SQLite library compiled into the addon.
    pub sqlite: String,
}

/// What this build of the addon is made of.
// Test builds leave out napi's registration, which is its only caller.
#[cfg_attr(test, allow(dead_code))]
#[napi(js_name = "addonVersions")]
pub fn addon_versions() -> AddonVersions {
    AddonVersions {
        addon: env!("CARGO_PKG_VERSION").to_owned(),
        profile: if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
        .to_owned(),
        sqlite: rusqlite::version().to_owned(),
    }
}

/// `EngineStats` as JS numbers; absent where the engine has no such thing.
#[napi(object)]
pub struct JsEngineStats {
    pub lock_waits: f64,
    pub lock_wait_ms: f64,
    pub pool_waits: f64,
    pub pool_wait_ms: f64,
    pub pool_size: Option<u32>,
    pub pool_idle: Option<u32>,
    pub pool_waiting: Option<u32>,
    pub wal_bytes: Option<f64>,
    pub checkpoint_lag_frames: Option<f64>,
    pub checkpoints: Option<f64>,
}

impl From<EngineStats> for JsEngineStats {
    fn from(s: EngineStats) -> Self {
        JsEngineStats {
            lock_waits: s.lock_waits as f64,
            lock_wait_ms: s.lock_wait_micros as f64 / 1000.0,
            pool_waits: s.pool_waits as f64,
            pool_wait_ms: s.pool_wait_micros as f64 / 1000.0,
            pool_size: s.pool_size,
            pool_idle: s.pool_idle,
            pool_waiting: s.pool_waiting,
            wal_bytes: s.wal_bytes.map(|v| v as f64),
            checkpoint_lag_frames: s.checkpoint_lag_frames.map(|v| v as f64),
            checkpoints: s.checkpoints.map(|v| v as f64),
        }
    }
}

#[napi]
impl NativeEngine {
    /// One round trip; answers the server's (SQLite: the library's) version.
    #[napi(ts_return_type = "string | Promise<string>")]
    pub fn ping(&self) -> Reply<String> {
        self.run("ping", |e| Ok(e.ping()))
    }

    /// The engine's counters and gauges, read at once.
    #[napi]
    pub fn engine_stats(&self) -> napi::Result<JsEngineStats> {
        super::guard(|| Ok(self.with_engine(|e| e.stats()).into()))
    }

    /// An online copy of the embedded database into a new file.
    #[napi(ts_return_type = "void | Promise<void>")]
    pub fn backup(&self, path: String) -> Reply<()> {
        self.run("backup", |e| Ok(e.backup(path)))
    }
}
