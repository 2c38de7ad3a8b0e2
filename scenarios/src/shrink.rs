//! Shrinking: a failing plan reduced to a minimal one (fewest faults, earliest steps,
//! simplest faults and crash states) that still shows the same kind of failure.

use crate::oracle::{judge, Expected, Recovery, Verdict};
use crate::runner::{run, RunSpec};
use keel_sim::{CrashPoint, Fault, FaultPlan, PlannedFault};
use serde::Serialize;
use std::fmt;

/// Runs a shrink may spend (bounds the search).
pub const SHRINK_RUNS_MAX: u64 = 20_000;
/// Crash states tried below a drawn (non-enumerable) one.
const SHRINK_STATES_MAX: u64 = 64;

/// The kinds of failure, most serious first: a failure is shrunk to a plan that shows the
/// same kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureClass {
    RecoveryFailed,
    RecoveryLooped,
    Wrong,
    Lost,
    Corrupt,
    RolledBack,
    Duplicates,
    /// Recovery completed, yet the final windows differ from the fault-free run's.
    FinalWindows,
}

impl fmt::Display for FailureClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FailureClass::RecoveryFailed => "recovery-failed",
            FailureClass::RecoveryLooped => "recovery-looped",
            FailureClass::Wrong => "wrong",
            FailureClass::Lost => "lost",
            FailureClass::Corrupt => "corrupt",
            FailureClass::RolledBack => "rolled-back",
            FailureClass::Duplicates => "duplicates",
            FailureClass::FinalWindows => "final-windows",
        })
    }
}

/// Every kind of failure a verdict shows, most serious first.
pub fn failure_classes(verdict: &Verdict) -> Vec<FailureClass> {
    let mut classes = Vec::new();
    match verdict.recovery {
        Recovery::Failed => classes.push(FailureClass::RecoveryFailed),
        Recovery::Looped => classes.push(FailureClass::RecoveryLooped),
        Recovery::Ok => {}
    }
    if verdict.wrong > 0 {
        classes.push(FailureClass::Wrong);
    }
    if verdict.lost > 0 {
        classes.push(FailureClass::Lost);
    }
    if verdict.corrupt > 0 {
        classes.push(FailureClass::Corrupt);
    }
    if verdict.rolled_back > 0 {
        classes.push(FailureClass::RolledBack);
    }
    if verdict.duplicates > 0 {
        classes.push(FailureClass::Duplicates);
    }
    if verdict.recovery == Recovery::Ok && !verdict.final_windows_match {
        classes.push(FailureClass::FinalWindows);
    }
    classes
}

/// The result of a shrink.
#[derive(Clone, Debug)]
pub struct Shrunk {
    pub plan: FaultPlan,
    pub verdict: Verdict,
    pub fingerprint: String,
    /// Runs the search spent.
    pub runs: u64,
}

struct Search<'a> {
    spec: &'a RunSpec,
    expected: &'a Expected,
    class: FailureClass,
    runs: u64,
}

impl Search<'_> {
    /// Runs `faults`; returns the faults that took effect if it still fails as wanted.
    fn still_fails(&mut self, faults: &[PlannedFault]) -> Option<Vec<PlannedFault>> {
        if self.runs >= SHRINK_RUNS_MAX {
            return None;
        }
        self.runs += 1;
        let plan = FaultPlan::new(faults.iter().copied()).ok()?;
        let result = run(&RunSpec {
            plan,
            ..self.spec.clone()
        });
        let verdict = judge(self.expected, &result, &self.spec.config);
        failure_classes(&verdict)
            .contains(&self.class)
            .then(|| result.world.faults_injected().to_vec())
    }
}

/// Simpler versions of one fault, simplest first.
fn simpler(fault: Fault) -> Vec<Fault> {
    match fault {
        Fault::PowerLoss { at, state } => {
            let mut candidates = vec![Fault::ProcessCrash { at }];
            if at == CrashPoint::Before {
                candidates.push(Fault::PowerLoss {
                    at: CrashPoint::After,
                    state,
                });
            }
            candidates.extend(
                (0..state.min(SHRINK_STATES_MAX)).map(|s| Fault::PowerLoss { at, state: s }),
            );
            candidates
        }
        Fault::ProcessCrash {
            at: CrashPoint::Before,
        } => vec![Fault::ProcessCrash {
            at: CrashPoint::After,
        }],
        _ => Vec::new(),
    }
}

/// Shrinks `plan`, which fails with `class` on `spec`, to a minimal plan failing the same way.
pub fn shrink(
    spec: &RunSpec,
    expected: &Expected,
    plan: &FaultPlan,
    class: FailureClass,
) -> Shrunk {
    let mut search = Search {
        spec,
        expected,
        class,
        runs: 0,
    };
    let mut faults = search
        .still_fails(&plan.faults())
        .expect("the plan to shrink fails as said");
    loop {
        let before = faults.clone();
        // Fewest faults.
        let mut i = 0;
        while i < faults.len() {
            let mut fewer = faults.clone();
            fewer.remove(i);
            match search.still_fails(&fewer) {
                Some(kept) if kept.len() < faults.len() => faults = kept,
                _ => i += 1,
            }
        }
        // Earliest steps.
        for i in 0..faults.len() {
            let lowest = if i == 0 { 0 } else { faults[i - 1].step + 1 };
            for step in lowest..faults[i].step {
                let mut earlier = faults.clone();
                earlier[i].step = step;
                if let Some(kept) = search.still_fails(&earlier) {
                    if kept.len() == faults.len() {
                        faults = kept;
                        break;
                    }
                }
            }
        }
        // Simplest faults and crash states.
        for i in 0..faults.len() {
            for candidate in simpler(faults[i].fault) {
                let mut simple = faults.clone();
                simple[i].fault = candidate;
                if let Some(kept) = search.still_fails(&simple) {
                    if kept.len() == faults.len() {
                        faults = kept;
                        break;
                    }
                }
            }
        }
        if faults == before || search.runs >= SHRINK_RUNS_MAX {
            break;
        }
    }
    let plan = FaultPlan::new(faults).expect("shrinking keeps steps distinct");
    let result = run(&RunSpec {
        plan: plan.clone(),
        ..spec.clone()
    });
    Shrunk {
        verdict: judge(expected, &result, &spec.config),
        fingerprint: result.world.fingerprint().to_string(),
        plan,
        runs: search.runs,
    }
}
