//! Placeholder until tracing is wired (replaced by the telemetry module).

pub fn call_started() -> Option<std::time::Instant> {
    None
}

pub fn call_finished(
    _start: Option<std::time::Instant>, _member: &'static str, _engine: &'static str,
) {
}
