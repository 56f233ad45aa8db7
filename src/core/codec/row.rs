//! Full-row encode / decode.

use super::MAX_SAFE_INTEGER;
use super::{check_blob_ref, is_valid_json, ColumnDef, ColumnType, DecodeError, Value};

const UTF8_BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

fn column_error(index: usize, column: &ColumnDef, what: impl std::fmt::Display) -> DecodeError {
    DecodeError::new(format!("column {index} ({}): {what}", column.ty.as_str()))
}

fn bitmap_len(columns: usize) -> usize {
    columns.div_ceil(8)
}

fn is_null_bit(bitmap: &[u8], index: usize) -> bool {
    bitmap
        .get(index >> 3)
        .is_some_and(|byte| byte & (1u8 << (index & 7)) != 0)
}

/// Bounds-checked cursor over untrusted input. Every read checks the
/// requested length against what is left before touching the slice.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Option<&'a [u8]> {
        if len > self.rest.len() {
            return None;
        }
        let (head, tail) = self.rest.split_at(len);
        self.rest = tail;
        Some(head)
    }

    fn take_array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Some(out)
    }

    /// A `u32` length prefix followed by that many bytes.
    fn take_prefixed(&mut self) -> Result<&'a [u8], &'static str> {
        let len = self
            .take_array::<4>()
            .map(u32::from_le_bytes)
            .ok_or("truncated length prefix")?;
        let len = usize::try_from(len).map_err(|_| "length does not fit in memory")?;
        self.take(len)
            .ok_or("length runs past the end of the payload")
    }
}

/// Decodes text like a fatal WHATWG `TextDecoder("utf-8")`: one leading BOM
/// is dropped, any invalid sequence is an error.
fn decode_text(raw: &[u8]) -> Result<&str, std::str::Utf8Error> {
    std::str::from_utf8(raw.strip_prefix(&UTF8_BOM[..]).unwrap_or(raw))
}

/// Strips one leading U+FEFF, i.e. what a decoder would remove after the
/// encoded text went through the payload.
fn strip_bom_char(text: &str) -> &str {
    text.strip_prefix('\u{FEFF}').unwrap_or(text)
}

/// Checks that a `json` / `blob_ref` text (already BOM-stripped) is valid.
fn check_text_content(index: usize, column: &ColumnDef, text: &str) -> Result<(), DecodeError> {
    match column.ty {
        ColumnType::Json if !is_valid_json(text) => {
            Err(column_error(index, column, "value is not a JSON document"))
        }
        ColumnType::BlobRef => {
            check_blob_ref(text).map_err(|e| column_error(index, column, e.message))
        }
        _ => Ok(()),
    }
}

fn in_safe_range(v: i64) -> bool {
    (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&v)
}

/// Decodes a full row payload against `columns`.
///
/// Borrowed values point into `bytes`. Never panics; every malformed input
/// is a [`DecodeError`].
pub fn decode_row<'a>(
    columns: &[ColumnDef], bytes: &'a [u8],
) -> Result<Vec<Value<'a>>, DecodeError> {
    let n = columns.len();
    let mut reader = Reader { rest: bytes };
    let bitmap = reader.take(bitmap_len(n)).ok_or_else(|| {
        DecodeError::new(format!(
            "row payload truncated: null bitmap needs {} bytes, have {}",
            bitmap_len(n),
            bytes.len()
        ))
    })?;

    // Padding bits (positions >= n) must be zero.
    if let Some(&last) = bitmap.last() {
        let used = n - (bitmap.len() - 1) * 8; // 1..=8
        let padding_mask = if used >= 8 { 0 } else { 0xFFu8 << used };
        if last & padding_mask != 0 {
            return Err(DecodeError::new(
                "row payload null bitmap has a padding bit set",
            ));
        }
    }

    for (index, column) in columns.iter().enumerate() {
        if !column.nullable && is_null_bit(bitmap, index) {
            return Err(column_error(
                index,
                column,
                "NULL for a non-nullable column",
            ));
        }
    }

    let mut values = Vec::with_capacity(n);
    for (index, column) in columns.iter().enumerate() {
        if is_null_bit(bitmap, index) {
            values.push(Value::Null);
            continue;
        }
        let truncated = || column_error(index, column, "truncated value");
        let value = match column.ty {
            ColumnType::String | ColumnType::Json | ColumnType::BlobRef => {
                let raw = reader
                    .take_prefixed()
                    .map_err(|e| column_error(index, column, e))?;
                let text = decode_text(raw)
                    .map_err(|e| column_error(index, column, format!("invalid UTF-8: {e}")))?;
                check_text_content(index, column, text)?;
                Value::Text(text)
            }
            ColumnType::Integer => {
                let v = i64::from_le_bytes(reader.take_array::<8>().ok_or_else(truncated)?);
                if !in_safe_range(v) {
                    return Err(column_error(
                        index,
                        column,
                        format!("integer {v} outside ±(2^53-1)"),
                    ));
                }
                Value::Integer(v)
            }
            ColumnType::Float => Value::Float(f64::from_le_bytes(
                reader.take_array::<8>().ok_or_else(truncated)?,
            )),
            ColumnType::Boolean => match reader.take_array::<1>().ok_or_else(truncated)?[0] {
                0 => Value::Boolean(false),
                1 => Value::Boolean(true),
                other => {
                    return Err(column_error(
                        index,
                        column,
                        format!("boolean byte {other} is not 0 or 1"),
                    ))
                }
            },
            ColumnType::Bytes | ColumnType::Crdt => Value::Bytes(
                reader
                    .take_prefixed()
                    .map_err(|e| column_error(index, column, e))?,
            ),
        };
        values.push(value);
    }

    if !reader.rest.is_empty() {
        return Err(DecodeError::new(format!(
            "row payload has {} trailing bytes",
            reader.rest.len()
        )));
    }
    Ok(values)
}

fn put_prefixed(
    out: &mut Vec<u8>, index: usize, column: &ColumnDef, data: &[u8],
) -> Result<(), DecodeError> {
    let len = u32::try_from(data.len())
        .map_err(|_| column_error(index, column, "value longer than 2^32-1 bytes"))?;
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(data);
    Ok(())
}

/// Encodes `values` (one per column) as a full row payload.
///
/// Validates like [`decode_row`]: value count, nullability, the value kind
/// matching the column type, the integer range, and the `json` / `blob_ref`
/// content checks (applied to the text a decoder would see, i.e. after one
/// leading U+FEFF is dropped). Whatever this returns decodes successfully.
pub fn encode_row(columns: &[ColumnDef], values: &[Value<'_>]) -> Result<Vec<u8>, DecodeError> {
    if values.len() != columns.len() {
        return Err(DecodeError::new(format!(
            "row has {} values for {} columns",
            values.len(),
            columns.len()
        )));
    }
    let n = columns.len();
    let body_len: usize = values
        .iter()
        .map(|v| match v {
            Value::Null => 0,
            Value::Text(t) => 4 + t.len(),
            Value::Integer(_) | Value::Float(_) => 8,
            Value::Boolean(_) => 1,
            Value::Bytes(b) => 4 + b.len(),
        })
        .fold(0usize, usize::saturating_add);
    let mut out = Vec::with_capacity(bitmap_len(n).saturating_add(body_len));
    out.resize(bitmap_len(n), 0);

    for (index, (column, value)) in columns.iter().zip(values).enumerate() {
        match (column.ty, value) {
            (_, Value::Null) => {
                if !column.nullable {
                    return Err(column_error(
                        index,
                        column,
                        "NULL for a non-nullable column",
                    ));
                }
                if let Some(byte) = out.get_mut(index >> 3) {
                    *byte |= 1u8 << (index & 7);
                }
            }
            (ColumnType::String | ColumnType::Json | ColumnType::BlobRef, Value::Text(text)) => {
                check_text_content(index, column, strip_bom_char(text))?;
                put_prefixed(&mut out, index, column, text.as_bytes())?;
            }
            (ColumnType::Integer, Value::Integer(v)) => {
                if !in_safe_range(*v) {
                    return Err(column_error(
                        index,
                        column,
                        format!("integer {v} outside ±(2^53-1)"),
                    ));
                }
                out.extend_from_slice(&v.to_le_bytes());
            }
            (ColumnType::Float, Value::Float(v)) => out.extend_from_slice(&v.to_le_bytes()),
            (ColumnType::Boolean, Value::Boolean(b)) => out.push(u8::from(*b)),
            (ColumnType::Bytes | ColumnType::Crdt, Value::Bytes(data)) => {
                put_prefixed(&mut out, index, column, data)?;
            }
            (_, other) => {
                return Err(column_error(
                    index,
                    column,
                    format!("value {} does not fit the column type", value_kind(other)),
                ))
            }
        }
    }
    Ok(out)
}

fn value_kind(value: &Value<'_>) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Text(_) => "text",
        Value::Integer(_) => "integer",
        Value::Float(_) => "float",
        Value::Boolean(_) => "boolean",
        Value::Bytes(_) => "bytes",
    }
}

/// Migration helper (§6.4): re-encodes a payload stored under `old` for the
/// layout `new`, where `old` is an exact prefix of `new` and every added
/// column is nullable; added columns become NULL.
///
/// Defined as `encode_row(new, decode_row(old, bytes) ++ NULLs)`, so it also
/// normalizes exactly like the host does (a text's leading BOM is dropped).
pub fn reencode_with_added_nulls(
    old: &[ColumnDef], new: &[ColumnDef], bytes: &[u8],
) -> Result<Vec<u8>, DecodeError> {
    if old.len() > new.len() || new[..old.len()] != *old {
        return Err(DecodeError::new(
            "layout change is not an append of columns to the stored layout",
        ));
    }
    if let Some((offset, column)) = new[old.len()..]
        .iter()
        .enumerate()
        .find(|(_, c)| !c.nullable)
    {
        return Err(column_error(
            old.len() + offset,
            column,
            "added column is not nullable",
        ));
    }
    let mut values = decode_row(old, bytes)?;
    values.resize(new.len(), Value::Null);
    encode_row(new, &values)
}
