//! Commit-window folding (storage-layout §7.4), engine-neutral: each engine
//! runs its own page query (candidate commits from the change-scope index,
//! LEFT JOIN metadata and the table's changes, ordered by seq and idx) and
//! feeds the rows here; this module decides what is emitted and when paging
//! stops. A change whose stored scopes are not an object is a corrupt
//! value, never skipped.

use crate::core::model::{Change, ChangeOp, StoredCommit};
use crate::core::scope::{ScopeFilter, ScopeMemo};

pub struct WindowQuery<'a> {
    pub table: &'a str,
    pub filter: &'a ScopeFilter,
    pub after_seq: i64,
    pub through_seq: i64,
    pub limit_changes: i64,
    /// Candidate commits per page when not the default (see `batch`).
    pub page: Option<i64>,
}

/// A window request that owns its parts (what crosses the engine seam).
#[derive(Debug, Clone)]
pub struct Window {
    pub table: String,
    pub filter: ScopeFilter,
    pub after_seq: i64,
    pub through_seq: i64,
    pub limit_changes: i64,
}

impl Window {
    pub fn query(&self) -> WindowQuery<'_> {
        WindowQuery {
            table: &self.table,
            filter: &self.filter,
            after_seq: self.after_seq,
            through_seq: self.through_seq,
            limit_changes: self.limit_changes,
            page: None,
        }
    }
}

impl WindowQuery<'_> {
    /// The probe (first sorted variable and its values), or `None` when the
    /// window is empty without reading anything.
    pub fn probe(&self) -> Option<(&str, &[String])> {
        let (var, values) = self.filter.probe()?;
        if values.is_empty() || self.limit_changes <= 0 {
            return None;
        }
        Some((var, values))
    }

    /// Candidate commits per page: at least 64 unless set otherwise (a
    /// read bounded by a row budget pages by its limit, so that a page
    /// holds no more rows than the window needs).
    pub fn batch(&self) -> i64 {
        self.page.unwrap_or(self.limit_changes.max(64)).max(1)
    }
}

/// [`crate::core::stored::corrupt`] for the scopes of change `idx` of commit `seq`.
pub fn change_corrupt(partition: &str, seq: i64, idx: i64) -> crate::Error {
    use crate::core::stored::{corrupt, Key, Shape};
    corrupt(
        "sync_changes",
        "scopes",
        Shape::Object,
        &[
            ("partition", Key::Text(partition)),
            ("commit_seq", Key::Int(seq)),
            ("idx", Key::Int(idx)),
        ],
    )
}

/// One change row of a page (the LEFT JOINed `sync_changes` columns).
pub struct ChangeRow {
    pub row_id: String,
    pub op: i64,
    pub row_version: Option<i64>,
    pub scopes_json: String,
    pub payload: Option<Vec<u8>>,
}

/// The commit being folded: (seq, (actor, createdAtMs) when its metadata
/// row exists, matching changes).
type Folding = (i64, Option<(String, i64)>, Vec<Change>);

pub struct WindowFold<'q> {
    q: &'q WindowQuery<'q>,
    out: Vec<StoredCommit>,
    total: i64,
    current: Option<Folding>,
    candidates: i64,
    memo: ScopeMemo,
    /// The page cursor: the last candidate seq seen.
    pub after: i64,
}

impl<'q> WindowFold<'q> {
    pub fn new(q: &'q WindowQuery<'q>) -> Self {
        WindowFold {
            q,
            out: Vec::new(),
            total: 0,
            current: None,
            candidates: 0,
            memo: ScopeMemo::default(),
            after: q.after_seq,
        }
    }

    fn flush(&mut self) {
        if let Some((seq, Some((actor_id, created_at_ms)), changes)) = self.current.take() {
            if !changes.is_empty() {
                self.total += changes.len() as i64;
                self.out.push(StoredCommit {
                    commit_seq: seq,
                    created_at_ms,
                    actor_id,
                    changes,
                });
            }
        }
    }

    /// Whether the next row starts a new candidate commit.
    pub fn is_new(&self, seq: i64) -> bool {
        self.current.as_ref().is_none_or(|c| c.0 != seq)
    }

    /// Starts candidate `seq`; `false` when the window is already complete
    /// (stop reading).
    pub fn start(&mut self, seq: i64, meta: Option<(String, i64)>) -> bool {
        self.flush();
        self.after = seq;
        self.candidates += 1;
        if self.total >= self.q.limit_changes {
            return false;
        }
        self.current = Some((seq, meta, Vec::new()));
        true
    }

    /// Whether a change with these scopes belongs in the window; `None`
    /// when they are not an object (the caller reports [`change_corrupt`]).
    pub fn wants(&mut self, scopes_json: &str) -> Option<bool> {
        self.q.filter.matches_json_memo(&mut self.memo, scopes_json)
    }

    pub fn add(&mut self, c: ChangeRow) {
        if let Some((_, _, changes)) = self.current.as_mut() {
            changes.push(Change {
                table: self.q.table.to_owned(),
                row_id: c.row_id,
                op: ChangeOp::from_code(c.op),
                row_version: c.row_version,
                scopes_json: c.scopes_json,
                payload: c.payload,
            });
        }
    }

    /// Ends a page; `true` when another page must be read (from `after`).
    pub fn next_page(&mut self) -> bool {
        self.flush();
        let more = self.total < self.q.limit_changes && self.candidates >= self.q.batch();
        self.candidates = 0;
        more
    }

    pub fn finish(mut self) -> Vec<StoredCommit> {
        self.flush();
        self.out
    }
}
