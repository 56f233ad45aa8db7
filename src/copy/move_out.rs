//! The command's whole move (`syncular-native-storage copy --final`,
//! docs/copy.md, "The final pass from the command"): the snapshot or a
//! resume, catch-up passes while the host writes, then the final pass
//! under the command's own lock on the file, which marks it moved.

use super::{catchup, Options, Progress};
use crate::core::error::Result;
use crate::sqlite::SqliteEngine;
use serde_json::json;

/// The command's whole move (`copy --final`): the snapshot, or a resume
/// from the positions the target recorded; catch-up passes while the host
/// writes, until one copies few commits; then [`catchup::finish_locked`].
pub fn move_out(
    source: &SqliteEngine, o: &Options, wait: std::time::Duration,
    progress: &mut dyn FnMut(&Progress),
) -> Result<serde_json::Value> {
    let quiet = Options {
        verify: false,
        resume: true,
        ..o.clone()
    };
    let mut out = super::load::copy(source, &quiet, progress)?;
    if out["resumed"] != json!(true) {
        let passes = catchup::resume(source, &quiet, &out["positions"].to_string(), progress)?;
        out["catchUp"] = passes["catchUp"].clone();
        out["positions"] = passes["positions"].clone();
    }
    let mut last =
        catchup::finish_locked(source, o, &out["positions"].to_string(), wait, progress)?;
    out["positions"] = last["positions"].clone();
    if let Some(v) = last.as_object_mut().and_then(|m| m.remove("verify")) {
        out["verify"] = v;
    }
    out["finalPass"] = last;
    Ok(out)
}
