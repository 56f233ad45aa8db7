//! Scope-scan paging (storage-layout §7.5), engine-neutral: each engine runs
//! its page query (candidate row ids from the row-scope index, LEFT JOIN the
//! row table, ordered by `row_id` in the database's collation) and feeds the
//! rows here for full-filter verification and the stop rule. A candidate
//! whose stored scopes are not an object is a corrupt value, never skipped.

use std::borrow::Cow;

use crate::core::model::StoredRow;
use crate::core::records::{Records, RowList};
use crate::core::scope::{ScopeFilter, ScopeMemo};
use crate::core::stored::{self, Form, Shape};
use crate::Result;

/// A matched row's fields after its id and scopes, borrowed from the
/// database row being stepped: `serverVersion`, payload, column versions.
pub type RowRest<'a> = (i64, &'a [u8], Option<&'a [u8]>);

/// Folds a scan's candidates straight into its packed answer
/// (`crate::core::records`, the row form): no matched row is held as
/// owned strings.
pub struct ScanFold<'f> {
    filter: &'f ScopeFilter,
    /// The row table and partition, named by a corrupt-value error.
    table: &'f str,
    partition: &'f str,
    limit: i64,
    out: RowList,
    seen: i64,
    memo: ScopeMemo,
    /// The page cursor: the last candidate row id.
    pub after: String,
}

impl<'f> ScanFold<'f> {
    pub fn new(
        filter: &'f ScopeFilter, table: &'f str, partition: &'f str, after_row_id: &str, limit: i64,
    ) -> Self {
        ScanFold {
            filter,
            table,
            partition,
            limit,
            out: RowList::with_capacity(limit.clamp(0, 1000) as usize),
            seen: 0,
            memo: ScopeMemo::default(),
            after: after_row_id.to_owned(),
        }
    }

    /// Candidates per page.
    pub fn batch(&self) -> i64 {
        self.limit.max(64)
    }

    fn wants(&mut self, row_id: &str, scopes: &str) -> Result<bool> {
        self.filter
            .matches_json_memo(&mut self.memo, scopes)
            .ok_or_else(|| stored::row_corrupt(self.table, self.partition, row_id))
    }

    /// Packs a matched row; `false` once the limit is reached.
    fn put(&mut self, row_id: &str, scopes: &str, rest: RowRest<'_>) -> bool {
        let (server_version, payload, column_versions) = rest;
        self.out
            .push(row_id, server_version, scopes, payload, column_versions);
        (self.out.len() as i64) < self.limit
    }

    /// Feeds one owned candidate; `row` is `None` when the row vanished.
    /// Returns `false` once the limit is reached (stop reading).
    pub fn add(&mut self, row_id: String, row: Option<StoredRow>) -> Result<bool> {
        self.seen += 1;
        if let Some(row) = row {
            if self.wants(&row_id, &row.scopes_json)? {
                let rest = (
                    row.server_version,
                    &row.payload[..],
                    row.column_versions.as_deref(),
                );
                if !self.put(&row_id, &row.scopes_json, rest) {
                    return Ok(false);
                }
            }
        }
        self.after = row_id;
        Ok(true)
    }

    /// [`add`](Self::add) for a page read in order, reading nothing more of
    /// rows that fail the filter: `scopes` is the candidate's stored scope
    /// text (`None` when the row vanished) and `rest` reads the row's other
    /// fields once it matched.
    pub fn offer<'r>(
        &mut self, row_id: &str, scopes: Option<&str>, rest: impl FnOnce() -> Result<RowRest<'r>>,
    ) -> Result<bool> {
        self.seen += 1;
        if let Some(scopes) = scopes {
            if self.wants(row_id, scopes)? && !self.put(row_id, scopes, rest()?) {
                return Ok(false);
            }
        }
        self.after.clear();
        self.after.push_str(row_id);
        Ok(true)
    }

    /// Ends a page; `true` when another page must be read.
    pub fn next_page(&mut self) -> bool {
        let more = self.seen >= self.batch();
        self.seen = 0;
        more
    }

    /// The packed rows: `crate::core::records`' row form.
    pub fn finish(self) -> Records {
        self.out.finish()
    }
}

/// An index lookup's rows (storage-layout §7.6) packed as they are read
/// (`crate::core::records`, the row form). Each row's stored scopes are
/// read as an object in the engine's form first: a row whose scopes are
/// not one is a corrupt value, as a row read anywhere is.
pub struct IndexFold<'f> {
    form: Form,
    /// The row table and partition, named by a corrupt-value error.
    table: &'f str,
    partition: &'f str,
    out: RowList,
    /// The last stored scope text read as an object that is its own
    /// object text: the rows of a lookup mostly share their scopes, and a
    /// text equal to it is not read again.
    known: Option<String>,
}

impl<'f> IndexFold<'f> {
    pub fn new(form: Form, table: &'f str, partition: &'f str, limit: i64) -> Self {
        IndexFold {
            form,
            table,
            partition,
            out: RowList::with_capacity(limit.clamp(0, 1000) as usize),
            known: None,
        }
    }

    /// Packs one row, its fields borrowed from the database row being
    /// stepped; `scopes` is its stored scope text.
    pub fn add(&mut self, row_id: &str, scopes: &str, rest: RowRest<'_>) -> Result<()> {
        let scopes = if self.known.as_deref() == Some(scopes) {
            Cow::Borrowed(scopes)
        } else {
            let Some(read) = stored::read_ref(self.form, scopes, Shape::Object) else {
                return Err(stored::row_corrupt(self.table, self.partition, row_id));
            };
            if let Cow::Borrowed(text) = read {
                let known = self.known.get_or_insert_with(String::new);
                known.clear();
                known.push_str(text);
            }
            read
        };
        let (server_version, payload, column_versions) = rest;
        self.out
            .push(row_id, server_version, &scopes, payload, column_versions);
        Ok(())
    }

    pub fn finish(self) -> Records {
        self.out.finish()
    }
}

/// Validates an index lookup (storage-layout §7.6) in the specified order
/// and returns the index and its values, one per index column, and the
/// limit. `values` is `None` when the caller's `values` is not an array.
pub fn check_index_lookup<'t, 'v>(
    table: &'t crate::core::schema::Table, index: &str,
    values: Option<&'v [crate::core::query::Value]>, limit: f64,
) -> crate::Result<(
    &'t crate::core::schema::Index,
    &'v [crate::core::query::Value],
    i64,
)> {
    use crate::core::error::Error;
    if !(limit.fract() == 0.0 && (1.0..=1000.0).contains(&limit)) {
        return Err(Error::query("sync.storage.invalid_limit"));
    }
    if !table.materialize {
        return Err(Error::query("sync.storage.index_not_materialized"));
    }
    let Some(ix) = table.indexes.iter().find(|i| i.name == index) else {
        return Err(Error::query("sync.storage.index_not_found"));
    };
    match values {
        Some(v) if v.len() == ix.columns.len() => Ok((ix, v, limit as i64)),
        _ => Err(Error::query("sync.storage.index_value_count_mismatch")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_rows_pack_each_stored_scopes_form_and_refuse_a_corrupt_one() {
        let mut fold = IndexFold::new(Form::Jsonb, "tasks", "p", 10);
        fold.add("a", r#"{"p":"1"}"#, (3, b"x", None)).unwrap();
        // Bun.SQL's form: a jsonb string holding the object's text.
        let bun = serde_json::to_string(r#"{"p":"1"}"#).unwrap();
        fold.add("b", &bun, (4, b"yz", Some(b"v"))).unwrap();
        let r = fold.finish();
        // Both rows share one dictionary entry, the object's text.
        assert_eq!(r.text, r#"ab{"p":"1"}"#);
        assert_eq!(r.head, vec![1.0, 9.0]);
        let row_b = [1.0, 4.0, 0.0, 1.0, 2.0, 3.0, 1.0];
        assert_eq!(r.nums[0], 2.0);
        assert_eq!(&r.nums[1..8], &[1.0, 3.0, 0.0, 0.0, 1.0, -1.0, 0.0]);
        assert_eq!(&r.nums[8..], &row_b);
        assert_eq!(r.bytes, b"xyzv");

        // A text read once is not read again, but a different one is.
        let mut fold = IndexFold::new(Form::Text, "tasks", "p", 10);
        fold.add("a", r#"{"p":"1"}"#, (1, b"", None)).unwrap();
        fold.add("b", r#"{"p":"1"}"#, (1, b"", None)).unwrap();
        let e = fold.add("c", r#"{"p":"1"} x"#, (1, b"", None)).unwrap_err();
        assert_eq!(e, stored::row_corrupt("tasks", "p", "c"));

        for (form, bad) in [(Form::Jsonb, "[1]"), (Form::Text, "{} x")] {
            let mut fold = IndexFold::new(form, "tasks", "p", 10);
            let e = fold.add("c", bad, (1, b"", None)).unwrap_err();
            assert_eq!(e, stored::row_corrupt("tasks", "p", "c"));
        }
    }
}
