//! Property tests of the row codec (issue 7, hostile input).
//!
//! * `decode_row` never panics, on arbitrary bytes and on mutated valid
//!   payloads;
//! * encoding valid values and decoding them gives the values back, and the
//!   bytes re-encode identically (decode then encode is the identity);
//! * any payload that decodes re-encodes to the same bytes, except that a
//!   leading byte-order mark in a text value is dropped (as the host's
//!   `TextDecoder` does).
//!
//! The case count follows `PROPTEST_CASES` (proptest's own variable):
//! modest by default so `cargo test` stays quick, large in the stress run
//! (`npm run test:stress`).

use proptest::prelude::*;
use proptest::test_runner::Config;
use syncular_native_storage::core::codec::{decode_row, encode_row, ColumnDef, ColumnType, Value};

const MAX_SAFE: i64 = 9_007_199_254_740_991;

/// An owned column value (the codec's `Value` borrows).
#[derive(Clone, Debug)]
enum Owned {
    Null,
    Text(String),
    Integer(i64),
    Float(f64),
    Boolean(bool),
    Bytes(Vec<u8>),
}

impl Owned {
    fn as_value(&self) -> Value<'_> {
        match self {
            Owned::Null => Value::Null,
            Owned::Text(s) => Value::Text(s),
            Owned::Integer(v) => Value::Integer(*v),
            Owned::Float(v) => Value::Float(*v),
            Owned::Boolean(v) => Value::Boolean(*v),
            Owned::Bytes(v) => Value::Bytes(v),
        }
    }
}

/// Value equality with floats compared bit for bit (NaN payloads included).
fn same(a: &Value<'_>, b: &Value<'_>) -> bool {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

fn all_same(a: &[Value<'_>], b: &[Value<'_>]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y))
}

fn column() -> impl Strategy<Value = ColumnDef> {
    (0usize..8, any::<bool>())
        .prop_map(|(t, nullable)| ColumnDef::new(ColumnType::ALL[t], nullable))
}

fn columns() -> impl Strategy<Value = Vec<ColumnDef>> {
    prop::collection::vec(column(), 0..24)
}

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            any::<char>(),
            Just('\u{FEFF}'),
            Just('\0'),
            Just('"'),
            Just('𝄞')
        ],
        0..12,
    )
    .prop_map(|cs| {
        let s: String = cs.into_iter().collect();
        // A leading U+FEFF does not survive a decode (by design).
        s.trim_start_matches('\u{FEFF}').to_string()
    })
}

fn json_text() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(serde_json::Value::from),
        text().prop_map(serde_json::Value::from),
    ];
    let doc = leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
            prop::collection::vec((text(), inner), 0..4)
                .prop_map(|kv| serde_json::Value::Object(kv.into_iter().collect())),
        ]
    });
    (doc, any::<bool>()).prop_map(|(d, pretty)| {
        if pretty {
            serde_json::to_string_pretty(&d).unwrap()
        } else {
            serde_json::to_string(&d).unwrap()
        }
    })
}

fn blob_ref_text() -> impl Strategy<Value = String> {
    (prop::collection::vec(any::<u8>(), 32), 0u64..1_000_000).prop_map(|(hash, len)| {
        let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
        format!(r#"{{"blobId":"sha256:{hex}","byteLength":{len}}}"#)
    })
}

fn value_for(column: ColumnDef) -> BoxedStrategy<Owned> {
    let present: BoxedStrategy<Owned> = match column.ty {
        ColumnType::String => text().prop_map(Owned::Text).boxed(),
        ColumnType::Json => json_text().prop_map(Owned::Text).boxed(),
        ColumnType::BlobRef => blob_ref_text().prop_map(Owned::Text).boxed(),
        ColumnType::Integer => (-MAX_SAFE..=MAX_SAFE).prop_map(Owned::Integer).boxed(),
        ColumnType::Float => any::<u64>()
            .prop_map(|b| Owned::Float(f64::from_bits(b)))
            .boxed(),
        ColumnType::Boolean => any::<bool>().prop_map(Owned::Boolean).boxed(),
        ColumnType::Bytes | ColumnType::Crdt => prop::collection::vec(any::<u8>(), 0..40)
            .prop_map(Owned::Bytes)
            .boxed(),
    };
    if column.nullable {
        prop_oneof![1 => Just(Owned::Null), 3 => present].boxed()
    } else {
        present
    }
}

/// Columns and a valid row of values for them.
fn valid_row() -> impl Strategy<Value = (Vec<ColumnDef>, Vec<Owned>)> {
    columns().prop_flat_map(|cols| {
        let values: Vec<BoxedStrategy<Owned>> = cols.iter().map(|c| value_for(*c)).collect();
        (Just(cols), values)
    })
}

#[derive(Clone, Debug)]
enum Mutation {
    Set(usize, u8),
    Flip(usize, u8),
    Truncate(usize),
    Insert(usize, u8),
    Remove(usize),
    Append(Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        (any::<usize>(), 0u8..8).prop_map(|(i, bit)| Mutation::Flip(i, bit)),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<usize>().prop_map(Mutation::Remove),
        prop::collection::vec(any::<u8>(), 1..8).prop_map(Mutation::Append),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    let len = bytes.len();
    match m {
        Mutation::Set(i, b) if len > 0 => bytes[i % len] = *b,
        Mutation::Flip(i, bit) if len > 0 => bytes[i % len] ^= 1 << bit,
        Mutation::Truncate(i) => bytes.truncate(i % (len + 1)),
        Mutation::Insert(i, b) => bytes.insert(i % (len + 1), *b),
        Mutation::Remove(i) if len > 0 => {
            bytes.remove(i % len);
        }
        Mutation::Append(tail) => bytes.extend_from_slice(tail),
        _ => {}
    }
}

/// Whatever decodes re-encodes to the same bytes, or to the same bytes less
/// dropped leading BOMs (3 bytes each) that decode to the same values.
fn check_reencode(columns: &[ColumnDef], bytes: &[u8]) -> Result<(), TestCaseError> {
    let Ok(values) = decode_row(columns, bytes) else {
        return Ok(());
    };
    let again = encode_row(columns, &values)
        .map_err(|e| TestCaseError::fail(format!("decoded values do not re-encode: {e}")))?;
    if again != bytes {
        prop_assert!(
            again.len() < bytes.len() && (bytes.len() - again.len()) % 3 == 0,
            "re-encoding changed the payload beyond BOM removal"
        );
        let twice = decode_row(columns, &again)
            .map_err(|e| TestCaseError::fail(format!("re-encoded payload does not decode: {e}")))?;
        prop_assert!(all_same(&values, &twice));
    }
    Ok(())
}

fn config() -> Config {
    // Config::default() reads PROPTEST_CASES (256 when unset).
    Config {
        failure_persistence: None,
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn decode_never_panics_on_arbitrary_bytes(
        cols in columns(),
        bytes in prop::collection::vec(any::<u8>(), 0..96),
    ) {
        check_reencode(&cols, &bytes)?;
    }

    #[test]
    fn encode_then_decode_is_the_identity((cols, owned) in valid_row()) {
        let values: Vec<Value<'_>> = owned.iter().map(Owned::as_value).collect();
        let bytes = encode_row(&cols, &values)
            .map_err(|e| TestCaseError::fail(format!("valid values do not encode: {e}")))?;
        let decoded = decode_row(&cols, &bytes)
            .map_err(|e| TestCaseError::fail(format!("encoded row does not decode: {e}")))?;
        prop_assert!(all_same(&values, &decoded), "values changed through the codec");
        let again = encode_row(&cols, &decoded)
            .map_err(|e| TestCaseError::fail(format!("decoded row does not re-encode: {e}")))?;
        prop_assert_eq!(again, bytes, "decode then encode is not the identity");
    }

    #[test]
    fn decode_never_panics_on_mutated_payloads(
        (cols, owned) in valid_row(),
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let values: Vec<Value<'_>> = owned.iter().map(Owned::as_value).collect();
        let mut bytes = encode_row(&cols, &values)
            .map_err(|e| TestCaseError::fail(format!("valid values do not encode: {e}")))?;
        for m in &mutations {
            apply(&mut bytes, m);
        }
        check_reencode(&cols, &bytes)?;
    }
}
