//! Whether a judged run fails what its sink promises (to be replaced by the verdict module).

use crate::oracle::{Recovery, Verdict};
use keel_engine::SinkKind;

/// Does this run break what the sink promises (at-least-once for append, exactly-once for
/// idempotent and, in its read_committed view, transactional), or roll recovery back?
pub fn is_failure(verdict: &Verdict, sink: SinkKind) -> bool {
    let at_least_once = verdict.lost == 0
        && verdict.wrong == 0
        && verdict.corrupt == 0
        && verdict.recovery == Recovery::Ok
        && verdict.final_windows_match;
    let promise = match sink {
        SinkKind::Append => at_least_once,
        SinkKind::Idempotent | SinkKind::Transactional => at_least_once && verdict.duplicates == 0,
    };
    !promise || verdict.rolled_back > 0
}
