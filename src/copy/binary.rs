//! PostgreSQL's binary `COPY … TO STDOUT` read back into SQLite values
//! (the copy into SQLite, docs/copy.md): a reader that takes the stream's
//! chunks and yields whole tuples, and each field bound to an `INSERT` as
//! the SQLite engine stores its column: integers and booleans as INTEGER,
//! DOUBLE PRECISION as REAL, BYTEA as BLOB, JSONB as compact JSON text in
//! the form the SQLite engine's reads take.

use super::tables::Kind;
use crate::core::stored::{self, Form, Shape};
use rusqlite::types::{ToSqlOutput, ValueRef};
use std::ops::Range;

const SIGNATURE: &[u8] = b"PGCOPY\n\xff\r\n\0";

/// What [`Reader::next`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// A whole tuple: its fields are in the vector passed.
    Tuple,
    /// The tuple is not complete yet: feed more.
    More,
    /// The trailer: the stream has ended.
    End,
}

/// The stream's bytes not yet read, and where reading stands.
#[derive(Default)]
pub struct Reader {
    buf: Vec<u8>,
    pos: usize,
    header: bool,
}

impl Reader {
    /// Appends a chunk; the bytes of tuples already read are let go.
    pub fn feed(&mut self, chunk: &[u8]) {
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(chunk);
    }

    fn at<const N: usize>(&self, p: usize) -> Option<[u8; N]> {
        self.buf
            .get(p..p + N)
            .map(|s| s.try_into().expect("N bytes"))
    }

    /// The next tuple: each field's bytes as a range of [`Reader::bytes`]
    /// (`None` for NULL), valid until the next [`Reader::feed`].
    pub fn next(&mut self, fields: &mut Vec<Option<Range<usize>>>) -> Result<Step, String> {
        fields.clear();
        if !self.header {
            let Some(ext) = self.at::<4>(self.pos + 15) else {
                return Ok(Step::More);
            };
            if !self.buf[self.pos..].starts_with(SIGNATURE) {
                return Err("not a binary COPY stream".to_owned());
            }
            let end = self.pos + 19 + u32::from_be_bytes(ext) as usize;
            if self.buf.len() < end {
                return Ok(Step::More);
            }
            self.pos = end;
            self.header = true;
        }
        let Some(n) = self.at::<2>(self.pos).map(i16::from_be_bytes) else {
            return Ok(Step::More);
        };
        if n == -1 {
            self.pos += 2;
            return Ok(Step::End);
        }
        let mut p = self.pos + 2;
        for _ in 0..n.max(0) {
            let Some(len) = self.at::<4>(p).map(i32::from_be_bytes) else {
                fields.clear();
                return Ok(Step::More);
            };
            p += 4;
            if len < 0 {
                fields.push(None);
                continue;
            }
            let end = p + len as usize;
            if self.buf.len() < end {
                fields.clear();
                return Ok(Step::More);
            }
            fields.push(Some(p..end));
            p = end;
        }
        self.pos = p;
        Ok(Step::Tuple)
    }

    pub fn bytes(&self, r: &Range<usize>) -> &[u8] {
        &self.buf[r.clone()]
    }
}

/// What a JSON column holds, by its name (docs/legacy-forms.md): an
/// object, an array (`subscriptions`), or any JSON (a reaction payload, an
/// app `json` column).
pub fn shape(column: &str) -> Shape {
    match column {
        "subscriptions" => Shape::Array,
        "scopes" | "_sync_scopes" | "result" | "last_failure" => Shape::Object,
        _ => Shape::Any,
    }
}

/// JSONB text (`{"a": 1, "b": [1, 2]}`) as the SQLite engine stores it:
/// the value a PostgreSQL read hands on (Bun.SQL's string form unwrapped,
/// `core::stored`), written without the spaces JSONB's output puts after
/// `:` and `,`. Keys keep JSONB's order (shorter keys first).
pub fn json_back(text: &str, shape: Shape) -> String {
    match text.as_bytes().first() {
        // An object or an array: JSONB's own text (the common form).
        Some(b'{' | b'[') => compact(text),
        _ => compact(
            &stored::read(Form::Jsonb, text.to_owned(), shape).unwrap_or_else(|| text.to_owned()),
        ),
    }
}

/// `text` (JSON) without whitespace outside strings.
pub fn compact(text: &str) -> String {
    let mut out = Vec::with_capacity(text.len());
    let (mut in_str, mut escaped) = (false, false);
    for &b in text.as_bytes() {
        if in_str {
            out.push(b);
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_str = false;
            }
        } else if b == b'"' {
            in_str = true;
            out.push(b);
        } else if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            out.push(b);
        }
    }
    // Only ASCII bytes outside strings were dropped.
    String::from_utf8(out).unwrap_or_else(|_| text.to_owned())
}

/// A field of a column of `kind` as the SQLite value to bind; on a field
/// the column's kind cannot read, what was wrong.
pub fn value<'a>(
    kind: Kind, column: &str, field: Option<&'a [u8]>, json: &'a mut String,
) -> Result<ToSqlOutput<'a>, String> {
    let Some(b) = field else {
        return Ok(ToSqlOutput::Borrowed(ValueRef::Null));
    };
    let fixed = |n: usize| {
        if b.len() == n {
            Ok(())
        } else {
            Err(format!(
                "a field of {} bytes where {n} were expected",
                b.len()
            ))
        }
    };
    Ok(ToSqlOutput::Borrowed(match kind {
        Kind::Int8 | Kind::Int4 | Kind::Int2 => {
            fixed(8)?;
            ValueRef::Integer(i64::from_be_bytes(b.try_into().expect("8 bytes")))
        }
        Kind::Bool => {
            fixed(1)?;
            ValueRef::Integer(i64::from(b[0] != 0))
        }
        Kind::Float8 => {
            fixed(8)?;
            ValueRef::Real(f64::from_bits(u64::from_be_bytes(
                b.try_into().expect("8 bytes"),
            )))
        }
        Kind::Text => ValueRef::Text(b),
        Kind::Bytea => ValueRef::Blob(b),
        Kind::Json | Kind::JsonOrNull => {
            let text = std::str::from_utf8(b).map_err(|_| "JSON that is not UTF-8".to_owned())?;
            *json = json_back(text, shape(column));
            let json: &'a String = json;
            ValueRef::Text(json.as_bytes())
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(tuples: &[&[Option<&[u8]>]]) -> Vec<u8> {
        let mut s = super::super::value::COPY_HEADER.to_vec();
        for t in tuples {
            s.extend_from_slice(&(t.len() as i16).to_be_bytes());
            for f in *t {
                match f {
                    None => s.extend_from_slice(&(-1i32).to_be_bytes()),
                    Some(b) => {
                        s.extend_from_slice(&(b.len() as i32).to_be_bytes());
                        s.extend_from_slice(b);
                    }
                }
            }
        }
        s.extend_from_slice(super::super::value::COPY_TRAILER);
        s
    }

    #[test]
    fn reads_tuples_across_any_chunking() {
        let data = stream(&[
            &[Some(b"p1"), None, Some(&7i64.to_be_bytes())],
            &[Some(b""), Some(b"x"), None],
        ]);
        for size in [1, 2, 3, 7, data.len()] {
            let mut r = Reader::default();
            let mut fields = Vec::new();
            let mut got: Vec<Vec<Option<Vec<u8>>>> = Vec::new();
            let mut ended = false;
            for chunk in data.chunks(size) {
                r.feed(chunk);
                loop {
                    match r.next(&mut fields).unwrap() {
                        Step::Tuple => got.push(
                            fields
                                .iter()
                                .map(|f| f.as_ref().map(|f| r.bytes(f).to_vec()))
                                .collect(),
                        ),
                        Step::More => break,
                        Step::End => {
                            ended = true;
                            break;
                        }
                    }
                }
            }
            assert!(ended, "chunks of {size}");
            assert_eq!(got.len(), 2);
            assert_eq!(got[0][0].as_deref(), Some(&b"p1"[..]));
            assert_eq!(got[0][1], None);
            assert_eq!(got[0][2].as_deref(), Some(&7i64.to_be_bytes()[..]));
            assert_eq!(got[1][0].as_deref(), Some(&b""[..]));
        }
        let mut r = Reader::default();
        r.feed(b"PGCOPX\n\xff\r\n\0\0\0\0\0\0\0\0\0\0\0");
        assert!(r.next(&mut Vec::new()).is_err());
    }

    #[test]
    fn jsonb_text_back_to_the_sqlite_form() {
        assert_eq!(
            json_back(r#"{"a": 1, "bb": [1, 2.5, "x: y, z"]}"#, Shape::Object),
            r#"{"a":1,"bb":[1,2.5,"x: y, z"]}"#
        );
        // Bun.SQL's string form: the content.
        assert_eq!(
            json_back(r#""{\"project_id\":\"p 1\"}""#, Shape::Object),
            r#"{"project_id":"p 1"}"#
        );
        // A string payload (node-postgres): the string.
        assert_eq!(json_back(r#""hi there""#, Shape::Any), r#""hi there""#);
        assert_eq!(
            compact(r#"{"a\" b": "c\\", "d": null}"#),
            r#"{"a\" b":"c\\","d":null}"#
        );
    }

    #[test]
    fn values_by_kind() {
        let mut j = String::new();
        let v = |k, f: Option<&[u8]>, j: &mut String| {
            value(k, "c", f, j).map(|o| match o {
                ToSqlOutput::Borrowed(v) => format!("{v:?}"),
                _ => unreachable!(),
            })
        };
        assert_eq!(v(Kind::Bool, Some(&[1]), &mut j).unwrap(), "Integer(1)");
        assert_eq!(
            v(Kind::Int8, Some(&(-3i64).to_be_bytes()), &mut j).unwrap(),
            "Integer(-3)"
        );
        assert_eq!(
            v(Kind::Float8, Some(&0.5f64.to_bits().to_be_bytes()), &mut j).unwrap(),
            "Real(0.5)"
        );
        assert_eq!(v(Kind::Int8, None, &mut j).unwrap(), "Null");
        assert!(v(Kind::Int8, Some(&[1, 2]), &mut j).is_err());
    }
}
