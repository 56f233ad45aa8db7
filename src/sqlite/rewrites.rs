//! The rewrites of registered queries, cached per request text and
//! schema, and where each runs (the calling thread or the pool) from what
//! its earlier runs showed.

use super::budget::is_over_budget;
use super::isolation;
use super::mutex::lock;
use super::rows::Loaded;
use crate::core::error::{Error, Result};
use crate::core::query::{self, Bind, Prepared, Request, Target, Value};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;

/// Rewrites of registered queries, per request text, relations and
/// declared tables, for one loaded schema. The rewrite depends on the
/// params only through the check that every bind has a value, which a hit
/// repeats; failed rewrites are not kept.
#[derive(Default)]
pub struct RewriteCache {
    inner: std::sync::Mutex<Option<Rewrites>>,
}

struct Rewrites {
    /// The schema these rewrites are for (held, so its address is never
    /// reused while it keys this map).
    loaded: Arc<Loaded>,
    map: std::collections::HashMap<u64, Vec<(Key, Arc<Rewrite>)>>,
    len: usize,
}

/// A heaviest straight run not read yet.
pub const UNKNOWN: usize = usize::MAX;

/// The longest query text tried on the calling thread: compiling (and
/// checking) a longer one there would hold the event loop by itself.
pub(super) const NOW_MAX_TEXT: usize = 4096;

/// Bounds the cache: a host registers a fixed set of queries, so reaching
/// this means generated text, and the map starts over.
const MAX_REWRITES: usize = 1024;

/// A cached rewrite, and what its runs have shown.
#[derive(Debug)]
pub struct Rewrite {
    pub prepared: Prepared,
    /// Where the query runs, from what its runs on the calling thread have
    /// shown (see [`Placement`]).
    pub placement: Placement,
    /// The heaviest straight run of its program (`super::shape`), read by
    /// its first run; [`UNKNOWN`] before.
    pub heavy: AtomicUsize,
}

/// Whether a registered query runs on the calling thread. Every query is
/// tried there first. A run stopped at its budget (steps, time, or a value
/// too large for the calling thread) sends the query off-thread for its
/// next 2, 4, ... up to [`MAX_SKIP`] calls, doubling with each such run in
/// a row; then it is tried there again. A run that fits starts the count
/// over. A query near the budget thus stays on the calling thread when
/// most of its runs fit, rather than leaving it for good after one slow
/// run. One that never fits costs the calling thread one budget (about
/// 2 ms) every [`MAX_SKIP`] calls.
#[derive(Debug, Default)]
pub struct Placement {
    /// Runs over budget in a row, capped.
    misses: AtomicU32,
    /// Calls left to send off-thread before the next try.
    skip: AtomicU32,
}

/// The most calls a query is sent off-thread between two tries on the
/// calling thread.
pub const MAX_SKIP: u32 = 64;

impl Placement {
    /// True when this call may try the calling thread.
    pub fn try_now(&self) -> bool {
        // Racing callers may both decrement or both try: either is harmless.
        let left = self.skip.load(Ordering::Relaxed);
        if left == 0 {
            return true;
        }
        self.skip.store(left - 1, Ordering::Relaxed);
        false
    }

    pub fn over_budget(&self) {
        let misses = (self.misses.load(Ordering::Relaxed) + 1).min(6);
        self.misses.store(misses, Ordering::Relaxed);
        self.skip
            .store((1u32 << misses).min(MAX_SKIP), Ordering::Relaxed);
    }

    pub fn within_budget(&self) {
        if self.misses.load(Ordering::Relaxed) != 0 {
            self.misses.store(0, Ordering::Relaxed);
        }
    }

    /// Records how a run on the calling thread ended: `None` when it was
    /// stopped at its budget (it runs again off-thread), else its answer.
    pub fn record<T>(&self, run: Result<T>) -> Option<Result<T>> {
        match run {
            Err(e) if is_over_budget(&e) => {
                self.over_budget();
                None
            }
            r => {
                self.within_budget();
                Some(r)
            }
        }
    }
}

#[derive(PartialEq)]
enum Key {
    Legacy(String, Vec<String>),
    Plan(String, Vec<(String, u64, u64, Option<String>)>, Vec<String>),
}

impl Key {
    fn of(req: &Request, declared: &[String]) -> Option<Key> {
        match req {
            Request::Legacy { sql } => Some(Key::Legacy(sql.clone(), declared.to_vec())),
            Request::Plan { sql, relations } => Some(Key::Plan(
                sql.clone(),
                relations
                    .iter()
                    .map(|r| {
                        (
                            r.table.clone(),
                            r.start.to_bits(),
                            r.end.to_bits(),
                            r.alias.clone(),
                        )
                    })
                    .collect(),
                declared.to_vec(),
            )),
            Request::Malformed => None,
        }
    }

    fn matches(&self, req: &Request, declared: &[String]) -> bool {
        match (self, req) {
            (Key::Legacy(k, d), Request::Legacy { sql }) => k == sql && d == declared,
            (Key::Plan(k, rels, d), Request::Plan { sql, relations }) => {
                k == sql
                    && d == declared
                    && rels.len() == relations.len()
                    && rels.iter().zip(relations).all(|((t, s, e, a), r)| {
                        *t == r.table
                            && *s == r.start.to_bits()
                            && *e == r.end.to_bits()
                            && *a == r.alias
                    })
            }
            _ => false,
        }
    }
}

fn key_hash(req: &Request, declared: &[String]) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    match req {
        Request::Legacy { sql } => (0u8, sql).hash(&mut h),
        Request::Plan { sql, relations } => {
            (1u8, sql).hash(&mut h);
            for r in relations {
                (&r.table, r.start.to_bits(), r.end.to_bits(), &r.alias).hash(&mut h);
            }
        }
        Request::Malformed => return None,
    }
    declared.hash(&mut h);
    Some(h.finish())
}

impl RewriteCache {
    /// The rewrite of `req` against `loaded`, from the cache when present.
    pub(super) fn prepare(
        &self, loaded: &Arc<Loaded>, req: &Request, params: &[Value], declared: &[String],
    ) -> Result<Arc<Rewrite>> {
        let hash = key_hash(req, declared);
        if let Some(hash) = hash {
            let inner = lock(&self.inner);
            let hit = inner
                .as_ref()
                .filter(|r| Arc::ptr_eq(&r.loaded, loaded))
                .and_then(|r| r.map.get(&hash))
                .and_then(|list| list.iter().find(|(k, _)| k.matches(req, declared)))
                .map(|(_, p)| p.clone());
            drop(inner);
            if let Some(p) = hit {
                // What `flatten` checks of the params.
                for b in &p.prepared.binds {
                    if let Bind::Param(i) = b {
                        if matches!(params.get(*i), None | Some(Value::Undefined)) {
                            return Err(Error::plain(query::PLAN_ERROR, query::MSG_BINDS));
                        }
                    }
                }
                return Ok(p);
            }
        }
        let mut prepared = query::prepare_for(req, params, declared, &loaded.schema, Target::View)?;
        prepared.sql.insert_str(0, isolation::MARK);
        let prepared = Arc::new(Rewrite {
            prepared,
            placement: Placement::default(),
            heavy: AtomicUsize::new(UNKNOWN),
        });
        if let (Some(hash), Some(key)) = (hash, Key::of(req, declared)) {
            let mut inner = lock(&self.inner);
            let fresh = match inner.as_ref() {
                Some(r) => !Arc::ptr_eq(&r.loaded, loaded) || r.len >= MAX_REWRITES,
                None => true,
            };
            if fresh {
                *inner = Some(Rewrites {
                    loaded: loaded.clone(),
                    map: Default::default(),
                    len: 0,
                });
            }
            if let Some(r) = inner.as_mut() {
                r.map.entry(hash).or_default().push((key, prepared.clone()));
                r.len += 1;
            }
        }
        Ok(prepared)
    }
}
