//! Commit-window folding (storage-layout §7.4), engine-neutral: each engine
//! runs its own page query (candidate commits from the change-scope index,
//! LEFT JOIN metadata and the table's changes, ordered by seq and idx) and
//! feeds the rows here; this module decides what is emitted and when paging
//! stops, and packs what is emitted as it comes ([`crate::core::records`]),
//! so both engines answer in the one packed form. A change whose stored scopes are not an object is a corrupt
//! value, never skipped.

use crate::core::model::ChangeOp;
use crate::core::records::{Columns, Records};
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

/// One change of a page, borrowed from the row being stepped.
pub struct ChangeRef<'a> {
    pub row_id: &'a str,
    pub op: i64,
    pub row_version: Option<i64>,
    pub scopes_json: &'a str,
    pub payload: Option<&'a [u8]>,
}

/// The candidate being folded.
struct Folding {
    seq: i64,
    /// `(actor, createdAtMs)` when its metadata row exists; the actor's
    /// text is in [`WindowFold::actor`].
    created_at_ms: Option<i64>,
    /// Where its `changeCount` is in the numbers, once a change was packed.
    count_at: Option<usize>,
    changes: i64,
}

/// Folds a window's rows straight into its packed answer
/// ([`crate::core::records`]): a commit's header is written with its first
/// change that passes the filter, so a candidate with none, or with no
/// metadata row, leaves nothing behind. No change is held as owned strings.
pub struct WindowFold<'q> {
    q: &'q WindowQuery<'q>,
    out: Columns,
    commits: i64,
    total: i64,
    current: Option<Folding>,
    actor: String,
    candidates: i64,
    memo: ScopeMemo,
    /// The page cursor: the last candidate seq seen.
    pub after: i64,
}

impl<'q> WindowFold<'q> {
    pub fn new(q: &'q WindowQuery<'q>) -> Self {
        let n = usize::try_from(q.limit_changes.clamp(0, 1024)).unwrap_or(0);
        let mut out = Columns::with_capacity(1 + n * 11, n * 16, 0);
        // commitCount, set by `finish`.
        out.int(0);
        WindowFold {
            q,
            out,
            commits: 0,
            total: 0,
            current: None,
            actor: String::new(),
            candidates: 0,
            memo: ScopeMemo::default(),
            after: q.after_seq,
        }
    }

    fn flush(&mut self) {
        if let Some(c) = self.current.take() {
            if let Some(at) = c.count_at {
                self.out.nums[at] = c.changes as f64;
                self.total += c.changes;
                self.commits += 1;
            }
        }
    }

    /// Whether the next row starts a new candidate commit.
    pub fn is_new(&self, seq: i64) -> bool {
        self.current.as_ref().is_none_or(|c| c.seq != seq)
    }

    /// Starts candidate `seq`; `false` when the window is already complete
    /// (stop reading).
    pub fn start(&mut self, seq: i64, meta: Option<(&str, i64)>) -> bool {
        self.flush();
        self.after = seq;
        self.candidates += 1;
        if self.total >= self.q.limit_changes {
            return false;
        }
        self.actor.clear();
        if let Some((actor, _)) = meta {
            self.actor.push_str(actor);
        }
        self.current = Some(Folding {
            seq,
            created_at_ms: meta.map(|m| m.1),
            count_at: None,
            changes: 0,
        });
        true
    }

    /// Whether a change with these scopes belongs in the window; `None`
    /// when they are not an object (the caller reports [`change_corrupt`]).
    pub fn wants(&mut self, scopes_json: &str) -> Option<bool> {
        self.q.filter.matches_json_memo(&mut self.memo, scopes_json)
    }

    /// Packs a change of the current candidate (one without a metadata
    /// row delivers nothing).
    pub fn add(&mut self, c: ChangeRef<'_>) {
        let Some(f) = self.current.as_mut() else {
            return;
        };
        let Some(created_at_ms) = f.created_at_ms else {
            return;
        };
        let out = &mut self.out;
        if f.count_at.is_none() {
            out.int(f.seq);
            out.int(created_at_ms);
            out.interned(0, &self.actor);
            f.count_at = Some(out.nums.len());
            out.int(0);
        }
        f.changes += 1;
        out.interned(1, self.q.table);
        out.inline(c.row_id);
        out.int(match ChangeOp::from_code(c.op) {
            ChangeOp::Upsert => 1,
            ChangeOp::Delete => 2,
        });
        out.opt_int(c.row_version);
        out.interned(2, c.scopes_json);
        out.blob(c.payload);
    }

    /// Ends a page; `true` when another page must be read (from `after`).
    pub fn next_page(&mut self) -> bool {
        self.flush();
        let more = self.total < self.q.limit_changes && self.candidates >= self.q.batch();
        self.candidates = 0;
        more
    }

    pub fn finish(mut self) -> Records {
        self.flush();
        self.out.nums[0] = self.commits as f64;
        self.out.finish()
    }
}
