//! RFC 0007 checkpoint decisions both engines share (storage-layout §14.4,
//! §14.5): the outcome vocabularies and the rules that turn what an engine
//! read into an outcome. The engines only read and write.

/// Returned by `hasSourceChangesAbove`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceState {
    Clean,
    Changed,
    /// Pruning removed changes above the seq: nothing can be proven.
    Unverifiable,
}

impl SourceState {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceState::Clean => "clean",
            SourceState::Changed => "changed",
            SourceState::Unverifiable => "unverifiable",
        }
    }

    /// The verdict once the horizon (read first) and the change probe are
    /// known: a window the horizon has passed is never reported clean.
    pub fn decide(changed: bool, horizon: i64, seq: i64) -> SourceState {
        if changed {
            SourceState::Changed
        } else if horizon > seq {
            SourceState::Unverifiable
        } else {
            SourceState::Clean
        }
    }
}

/// Returned by `activateCheckpoint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    Activated,
    Stale,
    Unverifiable,
}

impl Activation {
    pub fn as_str(self) -> &'static str {
        match self {
            Activation::Activated => "activated",
            Activation::Stale => "stale",
            Activation::Unverifiable => "unverifiable",
        }
    }

    /// What a non-clean source check means for activation; `None` when the
    /// sources are clean and the activating update may run.
    pub fn refused_by(state: SourceState) -> Option<Activation> {
        match state {
            SourceState::Changed => Some(Activation::Stale),
            SourceState::Unverifiable => Some(Activation::Unverifiable),
            SourceState::Clean => None,
        }
    }

    /// The activating update changed `rows` rows.
    pub fn from_changed(rows: u64) -> Activation {
        if rows == 1 {
            Activation::Activated
        } else {
            Activation::Stale
        }
    }
}

/// Activation needs the fence row and the checkpoint row, with the fence at
/// or above the checkpoint's schema version.
pub fn fence_covers(required_writer_version: Option<i64>, schema_version: Option<i64>) -> bool {
    matches!((required_writer_version, schema_version), (Some(r), Some(v)) if r >= v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions() {
        assert_eq!(SourceState::decide(true, 9, 1), SourceState::Changed);
        assert_eq!(SourceState::decide(false, 4, 3), SourceState::Unverifiable);
        assert_eq!(SourceState::decide(false, 3, 3), SourceState::Clean);
        assert!(fence_covers(Some(2), Some(2)));
        assert!(!fence_covers(Some(1), Some(2)));
        assert!(!fence_covers(None, Some(1)));
        assert!(!fence_covers(Some(1), None));
        assert_eq!(Activation::from_changed(1), Activation::Activated);
        assert_eq!(Activation::from_changed(0), Activation::Stale);
    }
}
