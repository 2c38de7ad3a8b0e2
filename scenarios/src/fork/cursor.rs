//! A point starts from the run of its faults but the last, paused at the latest event
//! boundary before that fault, and moved on from point to point: the points of a chunk are in
//! step order, so each runs on from where the last one started instead of from a snapshot
//! (which lies up to `(N + 1) / SNAPSHOTS_MAX` events back: the prefix a point re-ran grew
//! with the stream).
//!
//! Single-fault points start from the fault-free run, whose boundaries' steps `Forks`
//! records ([`Forks::before_only_fault`]). Depth-2 points start from the run of their first
//! fault: the points that share a first fault are consecutive in a sweep (by second step),
//! and each runs the same steps as that fault's run up to its second fault. So one run of the
//! first fault, paused at event boundaries as the points need them, stands for each point's
//! prefix: a point forks it at the latest boundary before its second fault
//! ([`keel_sim::World::fork_later`]) instead of forking the fault-free run before its first
//! fault and running the first fault, the recovery and the replay again.

use super::Forks;
use crate::runner::{resume, Control, Driven, Moment, Paused, RESTARTS_MAX};
use keel_sim::{FaultPlan, PlannedFault};
use std::cell::RefCell;

/// The run of every fault of a point but its last, paused at an event boundary.
#[derive(Debug)]
pub struct FirstFaults {
    /// The run's faults.
    faults: Vec<PlannedFault>,
    /// The run at a boundary, its trace folded into its fingerprint state.
    at: Paused,
    /// The run at the boundary after `at`, once run to.
    ahead: Option<Paused>,
    /// Whether the run ended after `at` (no boundary follows).
    ended: bool,
}

impl Forks {
    /// A run under `plan` at the latest event boundary before its last fault, taken from the
    /// run of its other faults that `cursor` keeps (made again when they differ, or when the
    /// boundary it stands at is past the last fault). None for a plan of one fault, or one
    /// whose first fault comes before the first snapshot.
    pub(super) fn before_last_fault(
        &self,
        plan: &FaultPlan,
        cursor: &RefCell<Option<FirstFaults>>,
    ) -> Option<Paused> {
        let faults = plan.faults();
        let (last, head) = faults.split_last()?;
        if head.is_empty() {
            return None;
        }
        let mut cursor = cursor.borrow_mut();
        let stale = cursor
            .as_ref()
            .is_none_or(|c| c.faults != head || c.at.world.steps_taken() > last.step);
        if stale {
            let head_plan = FaultPlan::new(head.iter().copied()).expect("distinct steps");
            *cursor = Some(FirstFaults {
                faults: head.to_vec(),
                at: self.fork(&head_plan, None)?,
                ahead: None,
                ended: false,
            });
        }
        let run = cursor.as_mut().expect("made above");
        // A run has at most this many boundaries: every event and the end of input, in
        // every incarnation.
        let boundaries_max = (self.spec.events.len() + 1) * (RESTARTS_MAX as usize + 1);
        for _ in 0..boundaries_max {
            if run.ahead.is_none() && !run.ended {
                run.ahead = self.next_boundary(&run.at);
                run.ended = run.ahead.is_none();
            }
            match run.ahead.take() {
                Some(next) if next.world.steps_taken() <= last.step => run.at = next,
                ahead => {
                    run.ahead = ahead;
                    break;
                }
            }
        }
        assert!(run.at.world.steps_taken() <= last.step);
        Some(run.at.with_world(run.at.world.fork_later(plan.clone())))
    }

    /// A run under `plan`, of one fault, at the latest boundary of the fault-free run at or
    /// before its fault, taken from `cursor` (the fault-free run where the last such point
    /// started) when that is at or before the boundary and not before the latest snapshot
    /// there, else from that snapshot. None for a plan of more faults or of none, or one whose
    /// fault comes before the first snapshot.
    pub(super) fn before_only_fault(
        &self,
        plan: &FaultPlan,
        cursor: &RefCell<Option<Paused>>,
    ) -> Option<Paused> {
        let faults = plan.faults();
        let [only] = faults.as_slice() else {
            return None;
        };
        let snapshot = self.before(only.step)?;
        // The latest boundary of the fault-free run's first incarnation at or before the
        // fault's step: at or after the snapshot's.
        let target = self
            .boundary_steps
            .partition_point(|&steps| u64::from(steps) <= only.step)
            .checked_sub(1)
            .expect("the snapshot's boundary is one") as u64;
        assert!(snapshot.index <= target);
        let mut cursor = cursor.borrow_mut();
        let at = match cursor.take() {
            Some(at) if snapshot.index <= at.index && at.index <= target => at,
            _ => snapshot.clone(),
        };
        let at = if at.index < target {
            self.run_to(at, target)
        } else {
            at
        };
        assert_eq!(at.index, target);
        assert_eq!(
            at.world.steps_taken(),
            u64::from(self.boundary_steps[target as usize])
        );
        let paused = at.with_world(at.world.fork(plan.clone(), false));
        *cursor = Some(at);
        Some(paused)
    }

    /// The fault-free run `at` shows, run on to its boundary `target` (in its first
    /// incarnation), its trace folded there.
    fn run_to(&self, at: Paused, target: u64) -> Paused {
        assert!(
            at.incarnations.is_empty(),
            "the fault-free run's first incarnation"
        );
        let driven = resume(&self.spec, at, &mut |moment| match moment {
            Moment::Between(between)
                if between.index == target && between.incarnations.is_empty() =>
            {
                Control::Stop
            }
            _ => Control::Continue,
        });
        let Driven::Stopped(paused) = driven else {
            unreachable!("the fault-free run reaches its boundary {target}")
        };
        let mut paused = *paused;
        paused.world.forget_trace();
        paused
    }

    /// The run `at` shows, run on to its next event boundary (None: it ends first).
    pub(super) fn next_boundary(&self, at: &Paused) -> Option<Paused> {
        let mut at_start = true;
        let driven = resume(&self.spec, at.clone(), &mut |moment| match moment {
            // The boundary it is paused at comes first.
            Moment::Between(_) if at_start => {
                at_start = false;
                Control::Continue
            }
            Moment::Between(_) => Control::Stop,
            Moment::Restarting(_) => Control::Continue,
        });
        match driven {
            Driven::Stopped(paused) => {
                let mut paused = *paused;
                paused.world.forget_trace();
                Some(paused)
            }
            Driven::Finished(_) => None,
            Driven::Restarting(_) => unreachable!("never told to stop at a restart"),
        }
    }
}
