//! Shrinking: a failing plan reduced to a minimal one (fewest faults, earliest steps,
//! simplest faults and crash states) that still shows the same kind of failure.

use crate::observation::Observation;
use crate::property::Property;
use crate::runner::{run, RunSpec, View};
use crate::verdict::{judge_one, Reference, Verdict};
use keel_sim::{CrashPoint, Fault, FaultPlan, PlannedFault};

/// Runs a shrink may spend (bounds the search).
pub const SHRINK_RUNS_MAX: u64 = 20_000;
/// Crash states tried below a drawn (non-enumerable) one.
const SHRINK_STATES_MAX: u64 = 64;

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
    reference: &'a Reference,
    /// The property the plan breaks, and must keep breaking.
    property: Property,
    view: Option<View>,
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
        let verdict = judge_one(
            self.reference,
            &Observation::of(&result, &self.spec.config),
            self.view,
        );
        (!self.property.holds(&verdict)).then(|| result.world.faults_injected().to_vec())
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

/// Shrinks `plan`, which breaks `property` in `view` on `spec`, to a minimal plan that
/// breaks it too.
pub fn shrink(
    spec: &RunSpec,
    reference: &Reference,
    plan: &FaultPlan,
    (property, view): (Property, Option<View>),
) -> Shrunk {
    let mut search = Search {
        spec,
        reference,
        property,
        view,
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
        verdict: judge_one(reference, &Observation::of(&result, &spec.config), view),
        fingerprint: result.world.fingerprint().to_string(),
        plan,
        runs: search.runs,
    }
}
