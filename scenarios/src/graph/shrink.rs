//! Shrinking a failing point of a parallel job: its one crash and its schedule.
//!
//! A point is a schedule (the scheduler's choices, scripted) and one planned fault. The
//! shrinker keeps a point only if it still breaks one of the properties the original broke.
//! The canonical order is round-robin (each task in turn, in label order: the order
//! `--schedule round-robin` teaches with). The shrinker first keeps the shortest prefix of
//! the schedule that, followed by round-robin, still fails; then it moves each choice left to
//! the one round-robin would make there, from the first choice on, so the schedule that
//! remains departs from round-robin only where the failure needs it; then it makes the fault
//! simpler where the failure survives it (a power loss as a process crash, else in crash
//! state 0) and moves it, of whatever kind, to the earliest step (a crash before its effect
//! first) that still fails. Each attempt is one run: at most (2 × choices + 2 × steps + 3).

use crate::graph::oracle::{judge_spec, JobProperty};
use crate::graph::{run, GraphSpec};
use keel_sim::{CrashPoint, Fault, FaultPlan, PlannedFault};

/// `schedule` without its trailing round-robin choices (`picks[i]` is round-robin's choice
/// at choice i), which a scheduler that goes round-robin after its script makes again.
fn trimmed(mut schedule: Vec<u32>, picks: &[u32]) -> Vec<u32> {
    while let Some(&last) = schedule.last() {
        if picks.get(schedule.len() - 1) != Some(&last) {
            break;
        }
        schedule.pop();
    }
    schedule
}

/// Which side of its step a fault takes effect on, for ordering places (0: before the
/// effect; a fault that is not a crash takes effect with the step).
fn crash_side(fault: &Fault) -> u8 {
    match fault {
        Fault::ProcessCrash { at } | Fault::PowerLoss { at, .. } => match at {
            CrashPoint::Before => 0,
            CrashPoint::After => 1,
        },
        _ => 1,
    }
}

/// `fault` on each side of a step, before first (a crash), or as it is.
fn sides(fault: Fault) -> Vec<Fault> {
    match fault {
        Fault::ProcessCrash { .. } => [CrashPoint::Before, CrashPoint::After]
            .map(|at| Fault::ProcessCrash { at })
            .to_vec(),
        Fault::PowerLoss { state, .. } => [CrashPoint::Before, CrashPoint::After]
            .map(|at| Fault::PowerLoss { at, state })
            .to_vec(),
        other => vec![other],
    }
}

/// A shrunk point: its schedule (choices; after them, round-robin's), its fault, and what
/// it breaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shrunk {
    pub schedule: Vec<u32>,
    pub fault: Option<PlannedFault>,
    pub broken: Vec<JobProperty>,
    /// Choices that are not round-robin's.
    pub departures: usize,
    pub runs: u64,
}

/// What a candidate breaks, the schedule it ran and round-robin's pick at each choice.
type Attempt = (Vec<JobProperty>, Vec<u32>, Vec<u32>);

/// Shrinks the point `spec` (its plan, its script or its seed's schedule) that breaks some
/// of `expected`. None if it does not fail.
pub fn shrink(spec: &GraphSpec, expected: &[JobProperty]) -> Option<Shrunk> {
    let breaks = |candidate: &GraphSpec| -> Attempt {
        let ran = run(candidate);
        let verdict = judge_spec(candidate, &ran);
        (
            verdict.broken(expected),
            ran.schedule,
            ran.round_robin_picks,
        )
    };
    let (broken, schedule, _) = breaks(spec);
    if broken.is_empty() {
        return None;
    }
    let still = |found: &[JobProperty]| found.iter().any(|p| broken.contains(p));
    let mut runs = 1u64;
    let mut best = GraphSpec {
        script: schedule,
        round_robin_after_script: true,
        ..spec.clone()
    };
    // The shortest prefix of the schedule that, followed by round-robin, still fails.
    for keep in 0..best.script.len() {
        let candidate = GraphSpec {
            script: best.script[..keep].to_vec(),
            ..best.clone()
        };
        let (found, _, _) = breaks(&candidate);
        runs += 1;
        if still(&found) {
            best = candidate;
            break;
        }
    }
    // Each choice moved to round-robin's where the failure survives it. A changed choice
    // can shorten the run, and changes the picks after it: both are read again from the
    // schedule as it stands.
    let (_, _, mut picks) = breaks(&best);
    runs += 1;
    let mut index = 0;
    while index < best.script.len() {
        let at = index;
        index += 1;
        let Some(&pick) = picks.get(at) else {
            break;
        };
        if best.script[at] == pick {
            continue;
        }
        let mut script = best.script.clone();
        script[at] = pick;
        let candidate = GraphSpec {
            script,
            ..best.clone()
        };
        let (found, ran_schedule, ran_picks) = breaks(&candidate);
        runs += 1;
        if still(&found) {
            best = GraphSpec {
                script: trimmed(ran_schedule, &ran_picks),
                ..candidate
            };
            picks = ran_picks;
        }
    }
    // A fault plan tried on the best point: the point to keep (its schedule trimmed) if it
    // still fails.
    let mut attempt = |best: &GraphSpec, planned: PlannedFault| -> Option<GraphSpec> {
        let candidate = GraphSpec {
            plan: FaultPlan::new([planned]).expect("one fault"),
            ..best.clone()
        };
        let (found, ran_schedule, ran_picks) = breaks(&candidate);
        runs += 1;
        still(&found).then(|| GraphSpec {
            script: trimmed(ran_schedule, &ran_picks),
            ..candidate
        })
    };
    let first = best.plan.iter().next();
    if let Some(planned) = first {
        // A simpler fault at the same step first: a power loss as a process crash, else in
        // its first crash state.
        let simpler = match planned.fault {
            Fault::PowerLoss { at, state } => {
                let mut simpler = vec![Fault::ProcessCrash { at }];
                if state != 0 {
                    simpler.push(Fault::PowerLoss { at, state: 0 });
                }
                simpler
            }
            _ => Vec::new(),
        };
        let step = planned.step;
        if let Some(kept) = simpler
            .into_iter()
            .find_map(|fault| attempt(&best, PlannedFault { step, fault }))
        {
            best = kept;
        }
    }
    // Then the fault moved to the earliest place where it still fails: step by step, a
    // crash before its step's effect first. A fault kept at a step where it does not apply
    // leaves a fault-free run, which does not fail.
    let first = best.plan.iter().next();
    if let Some(PlannedFault { step, fault }) = first {
        let current = (step, crash_side(&fault));
        let earlier = (0..=step)
            .flat_map(|earlier| sides(fault).into_iter().map(move |moved| (earlier, moved)))
            .take_while(|(earlier, moved)| (*earlier, crash_side(moved)) < current);
        let mut kept = None;
        for (earlier, moved) in earlier {
            kept = attempt(
                &best,
                PlannedFault {
                    step: earlier,
                    fault: moved,
                },
            );
            if kept.is_some() {
                break;
            }
        }
        if let Some(kept) = kept {
            best = kept;
        }
    }
    let (broken, _, picks) = breaks(&best);
    assert!(still(&broken), "the shrunk point still fails");
    let schedule = best.script.clone();
    let fault = best.plan.iter().next();
    Some(Shrunk {
        departures: (0..schedule.len())
            .filter(|&i| picks.get(i) != Some(&schedule[i]))
            .count(),
        schedule,
        fault,
        broken,
        runs: runs + 1,
    })
}
