//! Row lists and commit windows in their packed form: one string holding
//! every string of the answer, a list of every number, and one byte buffer
//! holding every payload (`Records`). Both engines' window reads, scope
//! scans and index lookups write it as they step their rows
//! (`crate::core::window`, `crate::core::scan`); the binding hands the
//! three parts to JS as they are (`src/napi/packed.rs`), where
//! lib/values.js slices strings out of the text by their lengths and
//! builds each object with a fixed shape. No
//! JSON is written here and none is parsed in JS. Strings that repeat
//! (scopes, table names, actor ids) cross once, in a dictionary at the end
//! of the text.
//!
//! Numbers: `dictionaryLength`, then the UTF-16 length of each dictionary
//! entry, then the records. An inline string is its UTF-16 length, its text
//! at the head of the string in record order; the dictionary's texts end
//! the string. An interned string is its dictionary index. Byte fields are
//! `offset, length` into the buffer, offset -1 for none. Integers are exact
//! up to 2^53, as JSON numbers were.
//!
//! Row: `rowCount`, then per row `rowId` (inline), `serverVersion`,
//! `scopes` (interned), `payloadOffset, payloadLength`,
//! `columnVersionsOffset, columnVersionsLength`.
//! Window: `commitCount`, then per commit `commitSeq, createdAtMs, actorId`
//! (interned), `changeCount`, then per change `table` (interned), `rowId`
//! (inline), `op` (1 upsert, 2 delete), `rowVersion` (NaN for none),
//! `scopes` (interned), `payloadOffset, payloadLength`.

use std::collections::HashMap;

/// A packed answer: `text`, the numbers (`head` then `nums`) and `bytes`.
#[derive(Debug, Default)]
pub struct Records {
    pub text: String,
    /// The dictionary's lengths lead the numbers: they are known last.
    pub head: Vec<f64>,
    pub nums: Vec<f64>,
    pub bytes: Vec<u8>,
}

impl Records {
    /// An answer of no rows or no commits: its count, 0, and nothing else
    /// (the row form and the window form agree on it).
    pub fn none() -> Records {
        let mut out = Columns::with_capacity(1, 0, 0);
        out.int(0);
        out.finish()
    }
}

/// The row form, one row at a time: `rowCount`, then the rows as
/// [`push`](Self::push) writes them.
pub struct RowList {
    out: Columns,
    count: usize,
}

impl RowList {
    /// Room for `rows` rows' numbers and ids (more grows as it must).
    pub fn with_capacity(rows: usize) -> Self {
        let mut out = Columns::with_capacity(1 + rows * 7, rows * 16, 0);
        // rowCount, set by `finish`.
        out.int(0);
        RowList { out, count: 0 }
    }

    /// One row: `rowId` (inline), `serverVersion`, `scopes` (interned as
    /// field 0), payload, column versions.
    pub fn push(
        &mut self, row_id: &str, server_version: i64, scopes: &str, payload: &[u8],
        column_versions: Option<&[u8]>,
    ) {
        let out = &mut self.out;
        out.inline(row_id);
        out.int(server_version);
        out.interned(0, scopes);
        out.blob(Some(payload));
        out.blob(column_versions);
        self.count += 1;
    }

    /// Rows pushed so far.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn finish(mut self) -> Records {
        self.out.nums[0] = self.count as f64;
        self.out.finish()
    }
}

/// Builds [`Records`]. Strings are copied in as they are given, so a
/// caller may pass values borrowed from a database row it is stepping.
pub struct Columns {
    /// The dictionary's texts, one after another, and each entry's range.
    dict_text: String,
    dict: Vec<(usize, usize)>,
    index: HashMap<Box<str>, usize>,
    /// Per field, the index of the last string interned for it.
    last: [Option<usize>; 3],
    inline: String,
    pub(crate) nums: Vec<f64>,
    bytes: Vec<u8>,
}

/// How many UTF-16 code units `s` is as a JS string.
fn utf16_len(s: &str) -> usize {
    if s.is_ascii() {
        s.len()
    } else {
        s.chars().map(char::len_utf16).sum()
    }
}

impl Columns {
    pub fn with_capacity(nums: usize, inline: usize, bytes: usize) -> Self {
        Columns {
            dict_text: String::new(),
            dict: Vec::new(),
            index: HashMap::new(),
            last: [None; 3],
            inline: String::with_capacity(inline),
            nums: Vec::with_capacity(nums),
            bytes: Vec::with_capacity(bytes),
        }
    }

    pub fn int(&mut self, v: i64) {
        self.nums.push(v as f64);
    }

    /// An integer or none (NaN).
    pub fn opt_int(&mut self, v: Option<i64>) {
        self.nums.push(v.map_or(f64::NAN, |v| v as f64));
    }

    pub fn inline(&mut self, s: &str) {
        self.nums.push(utf16_len(s) as f64);
        self.inline.push_str(s);
    }

    /// Interns `s` as field `field` of a record (0..3): a field mostly
    /// repeats its value of the record before (a page's scopes, a window's
    /// actor and table), which is compared rather than hashed.
    pub fn interned(&mut self, field: usize, s: &str) {
        if let Some(at) = self.last[field] {
            let (start, end) = self.dict[at];
            if &self.dict_text[start..end] == s {
                self.nums.push(at as f64);
                return;
            }
        }
        let at = match self.index.get(s) {
            Some(at) => *at,
            None => {
                let at = self.dict.len();
                let start = self.dict_text.len();
                self.dict_text.push_str(s);
                self.dict.push((start, self.dict_text.len()));
                self.index.insert(s.into(), at);
                at
            }
        };
        self.last[field] = Some(at);
        self.nums.push(at as f64);
    }

    /// `offset, length` (or `-1, 0`).
    pub fn blob(&mut self, b: Option<&[u8]>) {
        match b {
            Some(b) => {
                self.nums.push(self.bytes.len() as f64);
                self.nums.push(b.len() as f64);
                self.bytes.extend_from_slice(b);
            }
            None => self.nums.extend([-1.0, 0.0]),
        }
    }

    pub fn finish(self) -> Records {
        let mut head = Vec::with_capacity(1 + self.dict.len());
        head.push(self.dict.len() as f64);
        for &(start, end) in &self.dict {
            head.push(utf16_len(&self.dict_text[start..end]) as f64);
        }
        let mut text = self.inline;
        text.push_str(&self.dict_text);
        Records {
            text,
            head,
            nums: self.nums,
            bytes: self.bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interned_strings_cross_once_after_the_inline_ones() {
        let mut c = Columns::with_capacity(0, 0, 0);
        c.inline("é1");
        c.interned(0, "a");
        c.interned(1, "b");
        c.interned(0, "a");
        c.interned(0, "b");
        c.blob(Some(b"xy"));
        c.blob(None);
        c.opt_int(None);
        let r = c.finish();
        assert_eq!(r.text, "é1ab");
        assert_eq!(r.head, vec![2.0, 1.0, 1.0]);
        assert_eq!(&r.nums[..5], &[2.0, 0.0, 1.0, 0.0, 1.0]);
        assert_eq!(&r.nums[5..9], &[0.0, 2.0, -1.0, 0.0]);
        assert!(r.nums[9].is_nan());
        assert_eq!(r.bytes, b"xy");
    }
}
