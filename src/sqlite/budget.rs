//! The budget of a read tried on the calling thread (rows stepped, payload
//! bytes copied), and the internal error that sends it off-thread when
//! spent. Used by every read that may answer at once.

use crate::core::error::{Error, Result};

/// Internal: a read tried on the calling thread needed more rows, or more
/// payload bytes, than its budget; the engine runs it again off-thread.
/// Never reaches the host.
pub(crate) const OVER_BUDGET: &str = "ERR_SYNCULAR_OVER_BUDGET";

/// What a read may do on the calling thread: rows stepped and payload
/// bytes copied, both counted down (`None`: unbounded, off-thread).
pub(crate) struct Budget(Option<(usize, usize)>);

impl Budget {
    pub fn unbounded() -> Budget {
        Budget(None)
    }

    pub fn within(rows: usize, bytes: usize) -> Budget {
        Budget(Some((rows, bytes)))
    }

    /// One more row stepped.
    pub fn step(&mut self) -> Result<()> {
        match &mut self.0 {
            None => Ok(()),
            Some((0, _)) => Err(over_budget()),
            Some((n, _)) => {
                *n -= 1;
                Ok(())
            }
        }
    }

    /// `n` more payload bytes copied.
    pub fn copy(&mut self, n: usize) -> Result<()> {
        match &mut self.0 {
            None => Ok(()),
            Some((_, left)) if *left < n => Err(over_budget()),
            Some((_, left)) => {
                *left -= n;
                Ok(())
            }
        }
    }
}

fn over_budget() -> Error {
    Error::plain(OVER_BUDGET, "read exceeded its budget")
}

pub(crate) fn is_over_budget(e: &Error) -> bool {
    matches!(e, Error::Plain { code, .. } if *code == OVER_BUDGET)
}
