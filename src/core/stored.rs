//! Stored JSON values in every form the in-tree writers left them
//! (docs/legacy-forms.md), read the way the in-tree readers read them.
//!
//! PostgreSQL: a JSONB column is read as `::text`, whose first byte names
//! the form exactly (`{` object, `[` array, `"` string). Bun.SQL stored the
//! writers' JSON text as a jsonb *string*; the in-tree reader parses any
//! string the driver hands it, so a string's content is the value. SQLite:
//! TEXT holding the JSON itself, nothing else was ever written. A value that
//! is not JSON of the column's shape is [`corrupt`], never skipped, never
//! handed on as a string.

use crate::core::codec::is_valid_json;
use crate::core::error::Error;
use crate::core::model::reactions::StoredReaction;
use crate::core::model::{ClientRecord, StoredRow};
use std::borrow::Cow;

/// What a JSON column holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    Object,
    Array,
    /// Any JSON value (a reaction payload).
    Any,
}

impl Shape {
    /// Whether `text` is JSON (as `JSON.parse` accepts it) of this shape.
    pub fn holds(self, text: &str) -> bool {
        let first = text
            .bytes()
            .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
        let opens = match self {
            Shape::Object => first == Some(b'{'),
            Shape::Array => first == Some(b'['),
            Shape::Any => true,
        };
        opens && is_valid_json(text)
    }
}

/// How an engine stores JSON columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// PostgreSQL JSONB, read as `::text`.
    Jsonb,
    /// SQLite TEXT.
    Text,
}

/// The JSON text of a stored value of `shape`, or `None` when unreadable.
/// The common form costs one byte check on PostgreSQL.
pub fn read(form: Form, text: String, shape: Shape) -> Option<String> {
    let content = match read_ref(form, &text, shape)? {
        Cow::Borrowed(_) => None,
        Cow::Owned(content) => Some(content),
    };
    Some(content.unwrap_or(text))
}

/// [`read`] of a borrowed text (a column of the row being stepped): the
/// text itself when it is the value, an owned copy only of a jsonb
/// string's content.
pub fn read_ref(form: Form, text: &str, shape: Shape) -> Option<Cow<'_, str>> {
    match form {
        Form::Jsonb => from_jsonb(text, shape),
        Form::Text => shape.holds(text).then_some(Cow::Borrowed(text)),
    }
}

/// A JSONB value's text (always valid JSON, no leading whitespace).
fn from_jsonb(text: &str, shape: Shape) -> Option<Cow<'_, str>> {
    match (shape, text.as_bytes().first()) {
        (Shape::Object, Some(b'{')) | (Shape::Array, Some(b'[')) => Some(Cow::Borrowed(text)),
        (_, Some(b'"')) => {
            let content = serde_json::from_str::<String>(text).ok();
            match content {
                Some(inner) if shape.holds(&inner) => Some(Cow::Owned(inner)),
                // A string payload as node-postgres, pglite and this
                // package before it wrapped strings stored it ("hi"): the
                // string itself. The in-tree reader throws on it.
                _ if shape == Shape::Any => Some(Cow::Borrowed(text)),
                _ => None,
            }
        }
        (Shape::Any, Some(_)) => Some(Cow::Borrowed(text)),
        _ => None,
    }
}

/// The text to bind (as `::text::jsonb`) for a reaction payload on
/// PostgreSQL: a JSON string is stored as Bun.SQL stores every payload, a
/// jsonb string whose content is the payload's JSON text, so that reading
/// the content back as JSON (what the in-tree reader does) is exact. Any
/// other value is stored as itself.
pub fn payload_for_jsonb(json: &str) -> std::borrow::Cow<'_, str> {
    if json
        .trim_start_matches([' ', '\t', '\n', '\r'])
        .starts_with('"')
    {
        // Serializing a str cannot fail.
        serde_json::to_string(json).map_or(json.into(), Into::into)
    } else {
        json.into()
    }
}

/// One primary-key value of the row an error names.
#[derive(Clone, Copy, Debug)]
pub enum Key<'a> {
    Text(&'a str),
    Int(i64),
}

/// `ERR_SYNCULAR_CORRUPT_VALUE`: the value of `table.column` in the row
/// whose primary key is `key` is not JSON of `shape` in any stored form.
pub fn corrupt(table: &str, column: &str, shape: Shape, key: &[(&str, Key<'_>)]) -> Error {
    let row: Vec<String> = key
        .iter()
        .map(|(name, v)| match v {
            Key::Text(t) => format!("{name} {}", serde_json::Value::from(*t)),
            Key::Int(i) => format!("{name} {i}"),
        })
        .collect();
    let what = match shape {
        Shape::Object => "a JSON object",
        Shape::Array => "a JSON array",
        Shape::Any => "JSON",
    };
    Error::plain(
        "ERR_SYNCULAR_CORRUPT_VALUE",
        format!(
            "unreadable stored value: {table}.{column} of the row {} is not {what}",
            row.join(", ")
        ),
    )
}

/// A row of an app table with its `_sync_scopes` read as an object.
pub fn row(form: Form, mut r: StoredRow, table: &str, partition: &str) -> crate::Result<StoredRow> {
    match read(form, std::mem::take(&mut r.scopes_json), Shape::Object) {
        Some(scopes) => {
            r.scopes_json = scopes;
            Ok(r)
        }
        None => Err(row_corrupt(table, partition, &r.row_id)),
    }
}

/// [`corrupt`] for the `_sync_scopes` of one row of an app table.
pub fn row_corrupt(table: &str, partition: &str, row_id: &str) -> Error {
    corrupt(
        table,
        "_sync_scopes",
        Shape::Object,
        &[
            ("_sync_partition", Key::Text(partition)),
            ("_sync_row_id", Key::Text(row_id)),
        ],
    )
}

/// A client record with its subscriptions read as an array.
pub fn client(form: Form, mut c: ClientRecord, partition: &str) -> crate::Result<ClientRecord> {
    match read(
        form,
        std::mem::take(&mut c.subscriptions_json),
        Shape::Array,
    ) {
        Some(s) => {
            c.subscriptions_json = s;
            Ok(c)
        }
        None => Err(corrupt(
            "sync_clients",
            "subscriptions",
            Shape::Array,
            &[
                ("partition", Key::Text(partition)),
                ("client_id", Key::Text(&c.client_id)),
            ],
        )),
    }
}

/// A reaction with its payload (any JSON) and last failure (an object, or
/// none) read.
pub fn reaction(
    form: Form, mut r: StoredReaction, partition: &str,
) -> crate::Result<StoredReaction> {
    let corrupt = |column, shape, key: &str| {
        corrupt(
            "sync_reactions",
            column,
            shape,
            &[
                ("partition", Key::Text(partition)),
                ("idempotency_key", Key::Text(key)),
            ],
        )
    };
    match read(form, std::mem::take(&mut r.payload_json), Shape::Any) {
        Some(p) => r.payload_json = p,
        None => return Err(corrupt("payload", Shape::Any, &r.idempotency_key)),
    }
    if let Some(text) = r.last_failure_json.take() {
        match read(form, text, Shape::Object) {
            Some(f) => r.last_failure_json = Some(f),
            None => return Err(corrupt("last_failure", Shape::Object, &r.idempotency_key)),
        }
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonb_forms() {
        let obj = r#"{"p": "1"}"#.to_owned();
        assert_eq!(read(Form::Jsonb, obj.clone(), Shape::Object), Some(obj));
        // Bun.SQL's form: a jsonb string holding the JSON text.
        let bun = serde_json::to_string(r#"{"p":"1"}"#).unwrap();
        assert_eq!(
            read(Form::Jsonb, bun, Shape::Object).as_deref(),
            Some(r#"{"p":"1"}"#)
        );
        let bun = serde_json::to_string("[1]").unwrap();
        assert_eq!(
            read(Form::Jsonb, bun.clone(), Shape::Array).as_deref(),
            Some("[1]")
        );
        assert_eq!(read(Form::Jsonb, bun, Shape::Object), None);
        for bad in ["[1]", "42", "null", r#""nope""#, r#""42""#] {
            assert_eq!(read(Form::Jsonb, bad.into(), Shape::Object), None, "{bad}");
        }
    }

    #[test]
    fn payloads() {
        let any = |t: &str| read(Form::Jsonb, t.into(), Shape::Any).unwrap();
        assert_eq!(any("42"), "42");
        assert_eq!(any(r#"{"a":1}"#), r#"{"a":1}"#);
        // Bun.SQL's 42, and its "hi".
        assert_eq!(any(r#""42""#), "42");
        assert_eq!(any(r#""\"hi\"""#), r#""hi""#);
        // node-postgres's "hi": not JSON inside, so the string itself.
        assert_eq!(any(r#""hi""#), r#""hi""#);
        // Our writer wraps strings so that they read back exactly.
        for json in [r#""hi""#, r#""42""#, r#""{\"a\":1}""#, r#""""#] {
            // The jsonb string bound as `stored` reads back as `stored`.
            let stored = payload_for_jsonb(json).into_owned();
            assert_eq!(any(&stored), json);
        }
        assert_eq!(payload_for_jsonb(r#"{"a":"x"}"#), r#"{"a":"x"}"#);
        assert_eq!(payload_for_jsonb("7"), "7");
    }

    #[test]
    fn text_forms() {
        assert!(read(Form::Text, r#"  { "p" : "1" } "#.into(), Shape::Object).is_some());
        for bad in ["", "[]", r#"{"p":"#, r#""{\"p\":\"1\"}""#, "{} x"] {
            assert_eq!(read(Form::Text, bad.into(), Shape::Object), None, "{bad}");
        }
        assert!(read(Form::Text, r#""hi""#.into(), Shape::Any).is_some());
        assert!(read(Form::Text, "hi".into(), Shape::Any).is_none());
    }

    #[test]
    fn corrupt_names_the_row() {
        let e = row_corrupt("tasks", "p", "r\"1");
        assert_eq!(
            e,
            Error::plain(
                "ERR_SYNCULAR_CORRUPT_VALUE",
                r#"unreadable stored value: tasks._sync_scopes of the row _sync_partition "p", _sync_row_id "r\"1" is not a JSON object"#
            )
        );
    }
}
