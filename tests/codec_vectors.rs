//! Row codec against the upstream wire vectors (`tests/fixtures/vectors`,
//! vendored; provenance and licence in the README there).
//!
//! * Segment vectors (SSG2) carry a self-describing column table and a JSON
//!   rendering of every value: each row is decoded, compared value by value,
//!   and re-encoded byte for byte.
//! * Response / request vectors carry full rows as base64 over the NOTES and
//!   DOCS tables; the same rows appear in the segment renderings, which give
//!   the expected values.
//! * The invalid segment vectors about row payloads must be rejected.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value as Json;
use syncular_native_storage::core::codec::{
    decode_row, encode_row, reencode_with_added_nulls, ColumnDef, ColumnType, Value,
};

// ---------------------------------------------------------------- fixtures

fn vectors_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/vectors");
    assert!(
        dir.join("README.md").is_file(),
        "wire vectors missing: expected them under {}",
        dir.display()
    );
    dir
}

fn read_bytes(rel: &str) -> Vec<u8> {
    let path = vectors_dir().join(rel);
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn read_json(rel: &str) -> Json {
    let bytes = read_bytes(rel);
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{rel} is not JSON: {e}"))
}

const fn col(ty: ColumnType, nullable: bool) -> ColumnDef {
    ColumnDef { ty, nullable }
}

/// `NOTES_COLUMNS` of upstream `generate-vectors.ts`.
const NOTES: [(&str, ColumnDef); 8] = [
    ("id", col(ColumnType::String, false)),
    ("title", col(ColumnType::String, true)),
    ("body", col(ColumnType::String, false)),
    ("count", col(ColumnType::Integer, true)),
    ("score", col(ColumnType::Float, false)),
    ("done", col(ColumnType::Boolean, false)),
    ("meta", col(ColumnType::Json, true)),
    ("blob", col(ColumnType::Bytes, true)),
];

/// `DOCS_COLUMNS` of upstream `generate-vectors.ts`.
const DOCS: [(&str, ColumnDef); 3] = [
    ("id", col(ColumnType::String, false)),
    ("title", col(ColumnType::String, false)),
    ("doc", col(ColumnType::Crdt, true)),
];

fn table_columns(table: &str) -> &'static [(&'static str, ColumnDef)] {
    match table {
        "notes" => &NOTES,
        "docs" => &DOCS,
        other => panic!("no column list for table {other:?}"),
    }
}

fn defs(columns: &[(impl AsRef<str>, ColumnDef)]) -> Vec<ColumnDef> {
    columns.iter().map(|(_, d)| *d).collect()
}

// ---------------------------------------------------------------- base64

fn base64_decode(text: &str) -> Vec<u8> {
    fn sextet(c: u8) -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("invalid base64 character {:?}", c as char),
        }
    }
    let body = text.trim_end_matches('=');
    assert!(
        text.len().is_multiple_of(4),
        "base64 length not a multiple of 4: {text:?}"
    );
    assert!(
        text.len() - body.len() <= 2,
        "too much base64 padding: {text:?}"
    );
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for &c in body.as_bytes() {
        acc = (acc << 6) | sextet(c);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    assert_eq!(acc, 0, "non-zero base64 padding bits in {text:?}");
    out
}

#[test]
fn base64_decoder_sanity() {
    assert_eq!(base64_decode(""), b"");
    assert_eq!(base64_decode("Zg=="), b"f");
    assert_eq!(base64_decode("Zm8="), b"fo");
    assert_eq!(base64_decode("Zm9v"), b"foo");
    assert_eq!(base64_decode("AAEC/v8="), [0, 1, 2, 0xfe, 0xff]);
}

// ---------------------------------------------------------------- SSG2 reader (test-only)

/// Minimal SSG2 reader, layout as seen in the vectors:
/// `"SSG2"`, u32 formatVersion, u32-prefixed table name, u32 schemaVersion,
/// u16 column count, per column (u32-prefixed name, u8 type tag, u8
/// nullable), then blocks of (u32 rowCount, u32 byteLength, rows) closed by
/// rowCount = 0. A row is an i64 serverVersion followed by a full-row
/// payload, which is not length-prefixed: its extent is found by walking the
/// column types (no validation; that is the codec's job).
struct Segment {
    table: String,
    columns: Vec<(String, ColumnDef)>,
    blocks: Vec<Vec<Record>>,
}

struct Record {
    server_version: i64,
    payload: Vec<u8>,
}

struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| format!("truncated at offset {} (need {n} bytes)", self.pos))?;
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, String> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().unwrap()))
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn i64(&mut self) -> Result<i64, String> {
        Ok(i64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn string(&mut self) -> Result<String, String> {
        let len = self.u32()? as usize;
        String::from_utf8(self.take(len)?.to_vec()).map_err(|e| e.to_string())
    }
}

/// Length of the row payload at the start of `bytes`, trusting the bitmap.
fn walk_row(columns: &[ColumnDef], bytes: &[u8]) -> Result<usize, String> {
    let mut cur = Cursor { bytes, pos: 0 };
    let bitmap = cur.take(columns.len().div_ceil(8))?;
    for (i, column) in columns.iter().enumerate() {
        if bitmap[i >> 3] & (1 << (i & 7)) != 0 {
            continue;
        }
        match column.ty {
            ColumnType::Integer | ColumnType::Float => {
                cur.take(8)?;
            }
            ColumnType::Boolean => {
                cur.take(1)?;
            }
            _ => {
                let len = cur.u32()? as usize;
                cur.take(len)?;
            }
        }
    }
    Ok(cur.pos)
}

fn read_segment(bytes: &[u8]) -> Result<Segment, String> {
    let mut cur = Cursor { bytes, pos: 0 };
    if cur.take(4)? != b"SSG2" {
        return Err("bad magic".into());
    }
    let format_version = cur.u32()?;
    if format_version != 1 {
        return Err(format!("format version {format_version}"));
    }
    let table = cur.string()?;
    let _schema_version = cur.u32()?;
    let column_count = cur.u16()?;
    let mut columns = Vec::new();
    for _ in 0..column_count {
        let name = cur.string()?;
        let tag = cur.u8()?;
        let ty = ColumnType::from_tag(tag).ok_or_else(|| format!("column tag {tag}"))?;
        let nullable = match cur.u8()? {
            0 => false,
            1 => true,
            b => return Err(format!("nullable byte {b}")),
        };
        columns.push((name, ColumnDef { ty, nullable }));
    }
    let column_defs = defs(&columns);
    let mut blocks = Vec::new();
    loop {
        let row_count = cur.u32()?;
        if row_count == 0 {
            break;
        }
        let byte_length = cur.u32()? as usize;
        let block = cur.take(byte_length)?;
        let mut inner = Cursor {
            bytes: block,
            pos: 0,
        };
        let mut records = Vec::new();
        for _ in 0..row_count {
            let server_version = inner.i64()?;
            let len = walk_row(&column_defs, &block[inner.pos..])?;
            let payload = inner.take(len)?.to_vec();
            records.push(Record {
                server_version,
                payload,
            });
        }
        if inner.pos != block.len() {
            return Err("block byteLength does not match its rows".into());
        }
        blocks.push(records);
    }
    if cur.pos != bytes.len() {
        return Err("bytes after the end marker".into());
    }
    Ok(Segment {
        table,
        columns,
        blocks,
    })
}

// ---------------------------------------------------------------- comparison

fn assert_value_matches(ctx: &str, column: &ColumnDef, value: &Value<'_>, rendering: &Json) {
    match (column.ty, value, rendering) {
        (_, Value::Null, Json::Null) => assert!(column.nullable, "{ctx}: NULL in non-nullable"),
        (ColumnType::String | ColumnType::BlobRef, Value::Text(t), Json::String(s)) => {
            assert_eq!(t, s, "{ctx}")
        }
        (ColumnType::Json, Value::Text(t), expected) => {
            let parsed: Json = serde_json::from_str(t)
                .unwrap_or_else(|e| panic!("{ctx}: json text {t:?} does not parse: {e}"));
            assert_eq!(&parsed, expected, "{ctx}");
        }
        (ColumnType::Integer, Value::Integer(v), Json::Number(n)) => {
            assert_eq!(Some(*v), n.as_i64(), "{ctx}")
        }
        (ColumnType::Float, Value::Float(v), Json::Number(n)) => {
            assert_eq!(Some(*v), n.as_f64(), "{ctx}")
        }
        (ColumnType::Boolean, Value::Boolean(v), Json::Bool(b)) => assert_eq!(v, b, "{ctx}"),
        (ColumnType::Bytes | ColumnType::Crdt, Value::Bytes(v), Json::String(s)) => {
            assert_eq!(*v, base64_decode(s).as_slice(), "{ctx}")
        }
        _ => panic!("{ctx}: {value:?} does not match rendering {rendering}"),
    }
}

/// Decodes, compares with the rendering, re-encodes byte for byte, and
/// checks the migration helper on the row.
fn check_row(
    ctx: &str, columns: &[(impl AsRef<str>, ColumnDef)], payload: &[u8], rendering: &Json,
) {
    let defs = defs(columns);
    let values = decode_row(&defs, payload).unwrap_or_else(|e| panic!("{ctx}: decode failed: {e}"));
    assert_eq!(values.len(), columns.len(), "{ctx}");
    let object = rendering
        .as_object()
        .unwrap_or_else(|| panic!("{ctx}: rendering is not an object"));
    assert_eq!(
        object.len(),
        columns.len(),
        "{ctx}: rendering has other columns"
    );
    for ((name, def), value) in columns.iter().zip(&values) {
        let name = name.as_ref();
        let expected = object
            .get(name)
            .unwrap_or_else(|| panic!("{ctx}: rendering lacks column {name}"));
        assert_value_matches(&format!("{ctx} column {name}"), def, value, expected);
    }
    let again = encode_row(&defs, &values).unwrap_or_else(|e| panic!("{ctx}: encode failed: {e}"));
    assert_eq!(again, payload, "{ctx}: re-encoding differs");

    // Migration helper: one nullable column appended.
    let mut wider = defs.clone();
    wider.push(col(ColumnType::Json, true));
    let migrated = reencode_with_added_nulls(&defs, &wider, payload)
        .unwrap_or_else(|e| panic!("{ctx}: reencode failed: {e}"));
    let mut padded = values.clone();
    padded.push(Value::Null);
    assert_eq!(decode_row(&wider, &migrated).unwrap(), padded, "{ctx}");
}

/// Every segment row rendering, keyed by table and `id`, with its payload.
fn segment_rows() -> HashMap<(String, String), (Json, Vec<u8>)> {
    let manifest = read_json("segment/manifest.json");
    let mut rows = HashMap::new();
    for case in manifest["cases"].as_array().expect("segment cases") {
        let rendering = read_json(&format!("segment/{}", case["json"].as_str().unwrap()));
        let segment = read_segment(&read_bytes(&format!(
            "segment/{}",
            case["bin"].as_str().unwrap()
        )))
        .unwrap_or_else(|e| panic!("{case}: {e}"));
        let table = rendering["table"].as_str().unwrap().to_string();
        for (block, records) in rendering["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .zip(&segment.blocks)
        {
            for (row, record) in block.as_array().unwrap().iter().zip(records) {
                let id = row["values"]["id"].as_str().unwrap().to_string();
                rows.insert(
                    (table.clone(), id),
                    (row["values"].clone(), record.payload.clone()),
                );
            }
        }
    }
    rows
}

// ---------------------------------------------------------------- segment vectors

#[test]
fn segment_vectors_decode_and_round_trip() {
    let manifest = read_json("segment/manifest.json");
    let cases = manifest["cases"].as_array().expect("segment cases");
    let names: Vec<&str> = cases.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert!(
        names.contains(&"rows-two-blocks") && names.contains(&"crdt-column"),
        "{names:?}"
    );

    let mut rows_checked = 0;
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let rendering = read_json(&format!("segment/{}", case["json"].as_str().unwrap()));
        let segment = read_segment(&read_bytes(&format!(
            "segment/{}",
            case["bin"].as_str().unwrap()
        )))
        .unwrap_or_else(|e| panic!("{name}: {e}"));

        assert_eq!(rendering["magic"], "SSG2");
        assert_eq!(
            rendering["table"].as_str(),
            Some(segment.table.as_str()),
            "{name}"
        );

        // Column table: binary == rendering == the upstream column list.
        let rendered_columns: Vec<(String, ColumnDef)> = rendering["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let ty = ColumnType::parse(c["type"].as_str().unwrap())
                    .unwrap_or_else(|| panic!("{name}: unknown type {}", c["type"]));
                (
                    c["name"].as_str().unwrap().to_string(),
                    col(ty, c["nullable"].as_bool().unwrap()),
                )
            })
            .collect();
        assert_eq!(segment.columns, rendered_columns, "{name}");
        let expected: Vec<(String, ColumnDef)> = table_columns(&segment.table)
            .iter()
            .map(|(n, d)| (n.to_string(), *d))
            .collect();
        assert_eq!(segment.columns, expected, "{name}");

        let blocks = rendering["blocks"].as_array().unwrap();
        assert_eq!(blocks.len(), segment.blocks.len(), "{name}: block count");
        for (b, (block, records)) in blocks.iter().zip(&segment.blocks).enumerate() {
            let block = block.as_array().unwrap();
            assert_eq!(block.len(), records.len(), "{name}: block {b} row count");
            for (r, (row, record)) in block.iter().zip(records).enumerate() {
                let ctx = format!("{name} block {b} row {r}");
                assert_eq!(
                    row["serverVersion"].as_i64(),
                    Some(record.server_version),
                    "{ctx}"
                );
                check_row(&ctx, &segment.columns, &record.payload, &row["values"]);
                rows_checked += 1;
            }
        }
    }
    assert_eq!(rows_checked, 6, "rows in the segment vectors");
}

#[test]
fn json_column_text_is_kept_verbatim() {
    let segment = read_segment(&read_bytes("segment/rows-two-blocks.bin")).unwrap();
    let payload = &segment.blocks[0][1].payload;
    let values = decode_row(&defs(&NOTES), payload).unwrap();
    assert_eq!(values[0], Value::Text("n-1"));
    assert_eq!(values[1], Value::Text("📝 déjà vu 𝄞"));
    assert_eq!(values[2], Value::Text(""));
    assert_eq!(
        values[6],
        Value::Text("{\"tags\": [\"a\", \"b\"],  \"unicode\": \"𝔘\"}")
    );
    let boundary = &segment.blocks[1][0];
    assert_eq!(boundary.server_version, 9_007_199_254_740_991);
    let values = decode_row(&defs(&NOTES), &boundary.payload).unwrap();
    assert_eq!(values[3], Value::Integer(9_007_199_254_740_991));
    assert_eq!(values[7], Value::Bytes(&[]));
}

// ---------------------------------------------------------------- invalid segment vectors

#[test]
fn invalid_segment_vectors_are_rejected() {
    let manifest = read_json("segment/manifest.json");
    let invalid = manifest["invalid"]
        .as_array()
        .expect("segment invalid cases");
    let mut codec_rejections = 0;
    for case in invalid {
        let name = case["name"].as_str().unwrap();
        assert_eq!(case["error"], "sync.invalid_request", "{name}");
        let bytes = read_bytes(&format!("segment/{}", case["bin"].as_str().unwrap()));
        match name {
            // Row payload errors: the codec must refuse the row.
            "null-bit-on-non-nullable" | "json-column-not-json" => {
                let segment = read_segment(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
                let defs = defs(&segment.columns);
                let records: Vec<&Record> = segment.blocks.iter().flatten().collect();
                assert_eq!(records.len(), 1, "{name}");
                let err = decode_row(&defs, &records[0].payload)
                    .expect_err(&format!("{name}: payload must not decode"));
                let needle = if name == "json-column-not-json" {
                    "JSON"
                } else {
                    "non-nullable"
                };
                assert!(err.message.contains(needle), "{name}: {}", err.message);
                codec_rejections += 1;
            }
            // Segment framing errors: not the codec's concern, but check that
            // the test reader sees them and that the row inside is fine.
            "missing-end-marker" => {
                assert!(read_segment(&bytes).is_err(), "{name}");
            }
            "server-version-zero" => {
                let segment = read_segment(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
                let defs = defs(&segment.columns);
                for record in segment.blocks.iter().flatten() {
                    assert_eq!(record.server_version, 0, "{name}");
                    decode_row(&defs, &record.payload).unwrap();
                }
            }
            other => panic!("unexpected invalid segment case {other:?}: update this test"),
        }
    }
    assert_eq!(codec_rejections, 2);
}

// ---------------------------------------------------------------- response / request vectors

/// (table, base64 payload) of every full row in a response or request vector.
fn wire_rows(rel: &str) -> Vec<(String, String)> {
    let doc = read_json(rel);
    let mut out = Vec::new();
    for frame in doc["frames"].as_array().expect("frames") {
        match frame["type"].as_str().unwrap() {
            "COMMIT" => {
                let tables = frame["tables"].as_array().unwrap();
                for change in frame["changes"].as_array().unwrap() {
                    if let Some(row) = change.get("row") {
                        let table = &tables[change["tableIndex"].as_u64().unwrap() as usize];
                        out.push((table.as_str().unwrap().into(), row.as_str().unwrap().into()));
                    }
                }
            }
            "PUSH_RESULT" => {
                // The conflict vectors are over the NOTES table.
                for result in frame["results"].as_array().unwrap() {
                    if let Some(row) = result.get("serverRow") {
                        out.push(("notes".into(), row.as_str().unwrap().into()));
                    }
                }
            }
            "PUSH_COMMIT" => {
                for op in frame["operations"].as_array().unwrap() {
                    if let Some(payload) = op.get("payload") {
                        out.push((
                            op["table"].as_str().unwrap().into(),
                            payload.as_str().unwrap().into(),
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    out
}

#[test]
fn wire_vector_rows_decode_and_round_trip() {
    let expected = segment_rows();
    let cases = [
        ("response/commits-incremental", 2),
        ("response/commit-crdt-merge", 1),
        ("response/push-conflict", 1),
        ("request/push-multi-commit", 2),
    ];
    for (case, count) in cases {
        let bin = read_bytes(&format!("{case}.bin"));
        let rows = wire_rows(&format!("{case}.json"));
        assert_eq!(rows.len(), count, "{case}: rows found");
        for (i, (table, b64)) in rows.iter().enumerate() {
            let ctx = format!("{case} row {i}");
            let payload = base64_decode(b64);
            assert!(
                bin.windows(payload.len()).any(|w| w == payload.as_slice()),
                "{ctx}: payload not found in the .bin"
            );
            let columns = table_columns(table);
            let values = decode_row(&defs(columns), &payload)
                .unwrap_or_else(|e| panic!("{ctx}: decode failed: {e}"));
            let Value::Text(id) = values[0] else {
                panic!("{ctx}: no id");
            };
            let (rendering, segment_payload) = expected
                .get(&(table.clone(), id.to_string()))
                .unwrap_or_else(|| panic!("{ctx}: no rendering for {table}/{id}"));
            check_row(&ctx, columns, &payload, rendering);
            assert_eq!(
                &payload, segment_payload,
                "{ctx}: differs from the segment row"
            );
        }
    }
}
