//! The engine-side boundary of registered queries on PostgreSQL.
//!
//! The shared rewrite (`crate::core::query`) reads SQL with a lexer of its own;
//! wherever that lexer misreads PostgreSQL syntax (`ONLY`, `U&"…"`,
//! `E'…'`, nested comments, dollar quoting), the text it produced cannot be
//! trusted. So the final SQL is parsed again here by PostgreSQL's own
//! parser (libpg_query), and:
//!
//! 1. every relation is bound in the tree: each bare app-table reference,
//!    and each subquery of the rewrite's shape
//!    (`(SELECT <app columns> FROM <table> WHERE "_sync_partition" = ?)`),
//!    becomes `pg_temp."_syncular_q_<table>_<hash>" AS <name>`: the
//!    session's security-barrier view of the table (see [`view_ddl`]), which
//!    shows the rows of the partition the call sets in
//!    `syncular.partition`; the other parameters are renumbered densely;
//! 2. the whole tree, serialized so that every field of every node is
//!    visible, is checked against an allowlist of node types, fields,
//!    functions, operators, types and relation names;
//! 3. the tree is deparsed, the text parsed again and checked again, so
//!    what runs is exactly what was checked.
//!
//! What runs is the deparsed text, never the caller's.

mod allowlist;
mod bind;
mod check;
mod scope;
mod tree;

pub use bind::Slot;
#[cfg(test)]
pub use scope::view_name;
pub use scope::{view_ddl, view_ddl_for, Scope, PARTITION_SETTING};

use crate::core::error::{Error, Result};
use crate::core::query::Bind;
use bind::Binder;
use pg_query::NodeEnum as N;
use tree::refused;

/// The SQL to run and its parameters, `$1…` in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Guarded {
    pub sql: String,
    pub slots: Vec<Slot>,
    /// Per slot: whether the SQL uses it (where the rewrite's lexer saw a
    /// placeholder PostgreSQL does not, the value is bound but unused).
    pub used: Vec<bool>,
}

/// The longest SQL text the guard reads, in bytes (after the rewrite,
/// which expands each table reference into a projection of its columns;
/// the request's own text is held to [`MAX_QUERY_BYTES`] before it). The
/// guard's work (PostgreSQL's parser twice, the walk, the printer) grows
/// with the text: this bounds it before any of it starts.
pub const MAX_GUARDED_BYTES: usize = 4 * MAX_QUERY_BYTES;

/// The longest registered query text accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 32 * 1024;

/// Guards `sql` (the rewrite's output, placeholders numbered `$n` with
/// `binds[n-1]` saying what each one is).
pub fn guard(sql: &str, binds: &[Bind], scope: &Scope) -> Result<Guarded> {
    if sql.len() > MAX_GUARDED_BYTES {
        return Err(refused(format!(
            "its rewritten text is longer than {MAX_GUARDED_BYTES} bytes"
        )));
    }
    let parsed = pg_query::parse(sql, 0).map_err(|e| match e {
        // What the server would have said about the same text.
        pg_query::Error::Parse(m) => Error::Engine {
            code: "42601".into(),
            message: m,
        },
        other => refused(format!("it cannot be parsed ({other})")),
    })?;
    let mut tree = parsed.protobuf;
    // Each bounded call's share of a row's work, and the most a built
    // value may hold (see `super::cost`).
    let share = super::cost::shares(&tree)?;
    let mut binder = Binder::new(binds, scope, share);
    {
        let [raw] = tree.stmts.as_mut_slice() else {
            return Err(refused("it must be exactly one SELECT statement"));
        };
        let Some(N::SelectStmt(select)) = raw.stmt.as_mut().and_then(|n| n.node.as_mut()) else {
            return Err(refused("it must be a SELECT statement"));
        };
        binder.select(select);
    }
    if let Some(e) = binder.error.take() {
        return Err(e);
    }
    let slots = binder.slots();
    let used = (1..=slots.len() as i32)
        .map(|n| binder.used.contains(&n))
        .collect();
    let limit = slots.len() as i32;
    check::check(&tree, scope, limit)?;
    let text = tree
        .deparse(pg_query::DeparseOptions::default())
        .map_err(|e| refused(format!("it cannot be printed back ({e})")))?;
    let again = pg_query::parse(&text, 0)
        .map_err(|e| refused(format!("its printed form does not parse ({e})")))?;
    check::check(&again.protobuf, scope, limit)?;
    Ok(Guarded {
        sql: text,
        slots,
        used,
    })
}

/// The guard's result per final SQL text and partition-bind pattern, for
/// one loaded schema; repeat calls skip parsing.
#[derive(Default)]
pub struct Cache {
    /// The loaded schema the entries were made for (held, so its address
    /// is never reused by another).
    owner: Option<std::sync::Arc<dyn std::any::Any + Send + Sync>>,
    map: std::collections::HashMap<String, std::sync::Arc<Guarded>>,
}

const CACHE_ENTRIES: usize = 512;

/// The cache key: the SQL and which of its parameters are the partition.
pub fn cache_key(sql: &str, binds: &[Bind]) -> String {
    let mut key = String::with_capacity(sql.len() + binds.len() + 1);
    key.push_str(sql);
    key.push('\0');
    key.extend(binds.iter().map(|b| match b {
        Bind::Partition => 'p',
        Bind::Param(_) => 'v',
    }));
    key
}

impl Cache {
    fn owned_by(&mut self, owner: &std::sync::Arc<dyn std::any::Any + Send + Sync>) {
        let same = self.owner.as_ref().is_some_and(|o| {
            std::ptr::addr_eq(std::sync::Arc::as_ptr(o), std::sync::Arc::as_ptr(owner))
        });
        if !same {
            self.map.clear();
            self.owner = Some(owner.clone());
        }
    }

    pub fn get(
        &mut self, owner: &std::sync::Arc<dyn std::any::Any + Send + Sync>, key: &str,
    ) -> Option<std::sync::Arc<Guarded>> {
        self.owned_by(owner);
        self.map.get(key).cloned()
    }

    pub fn insert(
        &mut self, owner: &std::sync::Arc<dyn std::any::Any + Send + Sync>, key: String,
        g: std::sync::Arc<Guarded>,
    ) {
        self.owned_by(owner);
        if self.map.len() >= CACHE_ENTRIES {
            self.map.clear();
        }
        self.map.insert(key, g);
    }
}

/// The guard through `cache`, whose lock is not held while guarding.
pub fn cached(
    cache: &std::sync::Mutex<Cache>, owner: std::sync::Arc<dyn std::any::Any + Send + Sync>,
    sql: &str, binds: &[Bind], scope: &Scope,
) -> Result<std::sync::Arc<Guarded>> {
    let lock = || cache.lock().unwrap_or_else(|p| p.into_inner());
    let key = cache_key(sql, binds);
    if let Some(g) = lock().get(&owner, &key) {
        return Ok(g);
    }
    let g = std::sync::Arc::new(guard(sql, binds, scope)?);
    lock().insert(&owner, key, g.clone());
    Ok(g)
}
