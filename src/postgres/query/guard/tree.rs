//! Reading the guard's serialized parse tree (serde_json of libpg_query's
//! protobuf): the helpers the binder's shape match and the checker share,
//! and the guard's one refusal error.

use crate::core::error::Error;
use crate::core::query::REFUSED;
use serde_json::{Map, Value as Json};

pub(super) fn refused(msg: impl std::fmt::Display) -> Error {
    Error::plain(REFUSED, format!("registered query refused: {msg}"))
}

pub(super) fn is_default(v: &Json) -> bool {
    match v {
        Json::Null => true,
        Json::Bool(b) => !b,
        Json::Number(n) => n.as_i64() == Some(0),
        Json::String(s) => s.is_empty(),
        Json::Array(a) => a.is_empty(),
        Json::Object(_) => false,
    }
}

/// `{"node": {"<ty>": body}}` → body.
pub(super) fn unwrap<'j>(v: &'j Json, ty: &str) -> Option<&'j Map<String, Json>> {
    v.get("node")?.get(ty)?.as_object()
}

pub(super) fn single_name(v: &Json) -> Option<&str> {
    let fields = unwrap(v, "ColumnRef")?.get("fields")?.as_array()?;
    let [f] = fields.as_slice() else { return None };
    unwrap(f, "String")?.get("sval")?.as_str()
}

/// The parts of a qualified name (a list of `String` nodes); `None` when
/// any part is something else.
pub(super) fn name_list(list: &Json) -> Option<Vec<&str>> {
    list.as_array()?
        .iter()
        .map(|n| unwrap(n, "String")?.get("sval")?.as_str())
        .collect()
}
