//! Unit tests for the JSON check and the BlobRef check.

use super::tests::{blob_ref, HASH};
use super::*;

// ---------------------------------------------------------------- is_valid_json

#[test]
fn json_acceptance_matches_json_parse() {
    let valid = [
        "null",
        "true",
        "false",
        "0",
        "-0",
        "1.5",
        "-1.5e10",
        "1E+2",
        "1e-2",
        "1e400",
        "123456789012345678901234567890",
        "\"\"",
        "\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"",
        "\"\\u00e9\\uD834\\uDD1E\"",
        "\"\\uD800\"",         // lone high surrogate: JSON.parse accepts
        "\"\\uDC00x\\uD800\"", // lone low + high
        "\"é𝄞\u{7f}\u{2028}\"",
        "[]",
        "{}",
        " \t\n\r[ 1 , [ ] , { } ] \t\n\r",
        "{\"a\":{\"b\":[1,2,{\"c\":null}]}}",
        "{\"a\":1,\"a\":2}",
        "{\"\":0}",
        "[\"]\",\"}\",\"[\",\"{\"]",
    ];
    for text in valid {
        assert!(is_valid_json(text), "should be valid: {text:?}");
    }
    let invalid = [
        "",
        " ",
        "\u{FEFF}{}",
        "\u{a0}1",
        "nul",
        "nulll",
        "True",
        "undefined",
        "NaN",
        "Infinity",
        "-",
        "+1",
        "01",
        "-01",
        "1.",
        ".5",
        "1e",
        "1e+",
        "0x10",
        "1 2",
        "\"",
        "\"abc",
        "\"\\x\"",
        "\"\\u12\"",
        "\"\\u12G4\"",
        "\"\\U0041\"",
        "\"a\nb\"",
        "\"\t\"",
        "\"\u{0}\"",
        "'a'",
        "[",
        "]",
        "[1,]",
        "[,1]",
        "[1 2]",
        "{",
        "{\"a\"}",
        "{\"a\":}",
        "{\"a\":1,}",
        "{a:1}",
        "{1:1}",
        "{\"a\" 1}",
        "{\"a\":1 \"b\":2}",
        "[}",
        "{]",
        "[1]]",
        "{}}",
        "[1]x",
        "//c\n1",
        "\u{b}1",
        "\u{c}1",
    ];
    for text in invalid {
        assert!(!is_valid_json(text), "should be invalid: {text:?}");
    }
}

#[test]
fn json_deep_nesting_does_not_overflow() {
    let depth = 1_000_000;
    let text = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    assert!(is_valid_json(&text));
    let text = format!("{}{}", "[".repeat(depth), "]".repeat(depth - 1));
    assert!(!is_valid_json(&text));
    let text = format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth));
    assert!(is_valid_json(&text));
    let text = "[".repeat(depth);
    assert!(!is_valid_json(&text));
}

// ---------------------------------------------------------------- check_blob_ref

#[test]
fn blob_ref_accepts_canonical_forms() {
    let id = format!("sha256:{HASH}");
    let good = [
        blob_ref("0"),
        blob_ref("9007199254740991"),
        blob_ref("1.0"),
        blob_ref("1e3"),
        blob_ref("1.5e1"),
        blob_ref("-0"),
        format!(r#"{{"blobId":"{id}","byteLength":5,"mediaType":"text/plain"}}"#),
        format!(r#"{{"blobId":"{id}","byteLength":5,"name":"a.txt"}}"#),
        format!(r#"{{"blobId":"{id}","byteLength":5,"mediaType":"","name":"\ud800"}}"#),
        format!(" {{ \"blobId\" : \"{id}\" , \"byteLength\" : 5 }}\n"),
        // Escaped key and value spell the same strings.
        format!(r#"{{"blob\u0049d":"\u0073ha256:{HASH}","byteLength":5}}"#),
        // Duplicate: first position, last value.
        format!(r#"{{"blobId":1,"byteLength":5,"blobId":"{id}"}}"#),
        format!(r#"{{"blobId":"{id}","byteLength":"x","byteLength":5,"name":"n"}}"#),
    ];
    for text in &good {
        assert_eq!(check_blob_ref(text), Ok(()), "{text}");
    }
}

#[test]
fn blob_ref_rejects_non_canonical_forms() {
    let id = format!("sha256:{HASH}");
    let upper = HASH.to_uppercase();
    let cases: Vec<(String, &str)> = vec![
        ("not json".into(), "JSON"),
        ("[]".into(), "object"),
        (format!("\"{id}\""), "object"),
        ("{}".into(), "missing blobId"),
        (format!(r#"{{"blobId":"{id}"}}"#), "missing byteLength"),
        (r#"{"byteLength":5}"#.to_string(), "missing blobId"),
        // key order
        (format!(r#"{{"byteLength":5,"blobId":"{id}"}}"#), "order"),
        (
            format!(r#"{{"blobId":"{id}","byteLength":5,"name":"n","mediaType":"m"}}"#),
            "order",
        ),
        (
            format!(r#"{{"blobId":"{id}","mediaType":"m","byteLength":5}}"#),
            "order",
        ),
        // a duplicate keeps its first position
        (
            format!(r#"{{"byteLength":1,"blobId":"{id}","byteLength":5}}"#),
            "order",
        ),
        // extra keys
        (
            format!(r#"{{"blobId":"{id}","byteLength":5,"extra":1}}"#),
            "unexpected key",
        ),
        (
            format!(r#"{{"blobId":"{id}","byteLength":5,"0":1}}"#),
            "unexpected key",
        ),
        (
            format!(r#"{{"blobId":"{id}","byteLength":5,"Name":"n"}}"#),
            "unexpected key",
        ),
        (
            format!(r#"{{"blobId":"{id}","byteLength":5,"__proto__":{{}}}}"#),
            "unexpected key",
        ),
        // bad hashes
        (blob_ref_with_id(&format!("sha256:{upper}")), "blobId"),
        (
            blob_ref_with_id(&format!("sha256:{}", &HASH[1..])),
            "blobId",
        ),
        (blob_ref_with_id(&format!("sha256:{HASH}0")), "blobId"),
        (
            blob_ref_with_id(&format!("sha256:{}g", &HASH[1..])),
            "blobId",
        ),
        (blob_ref_with_id(HASH), "blobId"),
        (blob_ref_with_id(&format!("SHA256:{HASH}")), "blobId"),
        (blob_ref_with_id(&format!("sha256:{HASH}\\n")), "blobId"),
        (blob_ref_with_id(&format!(" sha256:{HASH}")), "blobId"),
        (r#"{"blobId":5,"byteLength":5}"#.to_string(), "blobId"),
        (r#"{"blobId":null,"byteLength":5}"#.to_string(), "blobId"),
        // bad byteLength
        (blob_ref("-1"), "byteLength"),
        (blob_ref("1.5"), "byteLength"),
        (blob_ref("9007199254740992"), "byteLength"),
        (blob_ref("9007199254740993"), "byteLength"),
        (blob_ref("1e400"), "byteLength"),
        (blob_ref("\"5\""), "byteLength"),
        (blob_ref("null"), "byteLength"),
        (blob_ref("true"), "byteLength"),
        (blob_ref("[5]"), "byteLength"),
        // mediaType / name types
        (
            format!(r#"{{"blobId":"{id}","byteLength":5,"mediaType":null}}"#),
            "mediaType",
        ),
        (
            format!(r#"{{"blobId":"{id}","byteLength":5,"name":1}}"#),
            "name",
        ),
        (
            format!(r#"{{"blobId":"{id}","byteLength":5,"name":["n"]}}"#),
            "name",
        ),
    ];
    for (text, needle) in &cases {
        match check_blob_ref(text) {
            Ok(()) => panic!("should be rejected: {text}"),
            Err(e) => assert!(e.message.contains(needle), "{text}: {}", e.message),
        }
    }
}

fn blob_ref_with_id(id: &str) -> String {
    format!(r#"{{"blobId":"{id}","byteLength":5}}"#)
}
