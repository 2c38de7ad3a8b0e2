//! Depth-2 points start from the run of their first fault: the points that share a first
//! fault are consecutive in a sweep (by second step), and each runs the same steps as that
//! fault's run up to its second fault. So one run of the first fault, paused at event
//! boundaries as the points need them, stands for each point's prefix: a point forks it
//! at the latest boundary before its second fault ([`keel_sim::World::fork_later`]) instead
//! of forking the fault-free run before its first fault and running the first fault, the
//! recovery and the replay again.

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
                at: self.fork(&head_plan, false)?,
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
        let mut paused = run.at.clone();
        paused.world = paused.world.fork_later(plan.clone());
        Some(paused)
    }

    /// The run `at` shows, run on to its next event boundary (None: it ends first).
    fn next_boundary(&self, at: &Paused) -> Option<Paused> {
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
