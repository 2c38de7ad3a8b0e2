//! Shrinking a failing point of a parallel job: its one crash and its schedule.
//!
//! A point is a schedule (the scheduler's choices, scripted) and one planned fault. The
//! shrinker keeps a point only if it still breaks one of the properties the original broke.
//! It first moves each choice to 0 (the first enabled action, in the job's fixed order:
//! sources, operators, the sink, the coordinator), from the first choice on, so the schedule
//! that remains departs from that canonical order only where the failure needs it; then it
//! moves the crash to the earliest step (before its effect first) that still fails.
//! Each attempt is one run: at most (choices + 2 × steps) runs.

use crate::graph::oracle::{judge_spec, JobProperty};
use crate::graph::{run, GraphSpec};
use keel_sim::{CrashPoint, Fault, FaultPlan, PlannedFault};

/// `schedule` without its trailing zeros (first enabled actions, which follow a script).
fn trimmed(mut schedule: Vec<u32>) -> Vec<u32> {
    while schedule.last() == Some(&0) {
        schedule.pop();
    }
    schedule
}

/// A shrunk point: its schedule (choices; after them, the first enabled action every
/// time), its fault, and what it breaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shrunk {
    pub schedule: Vec<u32>,
    pub fault: Option<PlannedFault>,
    pub broken: Vec<JobProperty>,
    /// Choices that are not the first enabled action.
    pub departures: usize,
    pub runs: u64,
}

/// Shrinks the point `spec` (its plan, its script or its seed's schedule) that breaks some
/// of `expected`. None if it does not fail.
pub fn shrink(spec: &GraphSpec, expected: &[JobProperty]) -> Option<Shrunk> {
    let breaks = |candidate: &GraphSpec| -> (Vec<JobProperty>, Vec<u32>) {
        let ran = run(candidate);
        let verdict = judge_spec(candidate, &ran);
        (verdict.broken(expected), ran.schedule)
    };
    let (broken, schedule) = breaks(spec);
    if broken.is_empty() {
        return None;
    }
    let still = |found: &[JobProperty]| found.iter().any(|p| broken.contains(p));
    let mut runs = 1u64;
    let mut best = GraphSpec {
        script: schedule,
        first_after_script: true,
        ..spec.clone()
    };
    // The shortest prefix of the schedule that, followed by first enabled actions only,
    // still fails.
    for keep in 0..best.script.len() {
        let candidate = GraphSpec {
            script: best.script[..keep].to_vec(),
            ..best.clone()
        };
        let (found, _) = breaks(&candidate);
        runs += 1;
        if still(&found) {
            best = candidate;
            break;
        }
    }
    // A changed choice can shorten the run: the bound is the schedule as it stands.
    let mut index = 0;
    while index < best.script.len() {
        index += 1;
        let index = index - 1;
        if best.script[index] == 0 {
            continue;
        }
        let mut script = best.script.clone();
        script[index] = 0;
        let candidate = GraphSpec {
            script,
            ..best.clone()
        };
        let (found, ran_schedule) = breaks(&candidate);
        runs += 1;
        if still(&found) {
            best = GraphSpec {
                script: trimmed(ran_schedule),
                ..candidate
            };
        }
    }
    let fault = best.plan.iter().next();
    if let Some(PlannedFault {
        step,
        fault: Fault::ProcessCrash { at },
    }) = fault
    {
        'earlier: for earlier in 0..=step {
            for point in [CrashPoint::Before, CrashPoint::After] {
                if earlier == step && (point == at || at == CrashPoint::Before) {
                    break 'earlier;
                }
                let plan = FaultPlan::new([PlannedFault {
                    step: earlier,
                    fault: Fault::ProcessCrash { at: point },
                }])
                .expect("one fault");
                let candidate = GraphSpec {
                    plan,
                    ..best.clone()
                };
                let (found, ran_schedule) = breaks(&candidate);
                runs += 1;
                if still(&found) {
                    best = GraphSpec {
                        script: trimmed(ran_schedule),
                        ..candidate
                    };
                    break 'earlier;
                }
            }
        }
    }
    let (broken, _) = breaks(&best);
    assert!(still(&broken), "the shrunk point still fails");
    let schedule = best.script.clone();
    let fault = best.plan.iter().next();
    Some(Shrunk {
        departures: schedule.iter().filter(|c| **c != 0).count(),
        schedule,
        fault,
        broken,
        runs: runs + 1,
    })
}
