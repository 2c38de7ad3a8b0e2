//! Depth-2 points whose second fault is a process crash after their first fault's run
//! converged take their observation composed from two single-fault runs
//! (`fork/converged_pairs.rs` states why that is the pair's) instead of running. The
//! single-fault runs are kept for every chunk and thread of the sweep ([`ConvergedPairs`]).

use super::run::{point_records, LastJudged};
use super::{PointRecord, SweepPoint};
use crate::baseline::Baseline;
use crate::fork::{ConvergedFirst, Forks};
use crate::observation::Observation;
use keel_engine::SinkKind;
use keel_sim::{Fault, FaultKind, FaultPlan, PlannedFault};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::{Arc, RwLock};

/// The most first faults whose runs [`ConvergedPairs`] keeps at once: a chunk's points share
/// one or two first faults, and a thread runs one chunk at a time.
const FIRSTS_MAX: usize = 64;

/// The most single-crash observations it keeps at once (a few hundred bytes each, for a
/// splice of the fault-free file): one a step of a 16,000-event stream.
const SECONDS_MAX: usize = 1 << 16;

/// Debug builds run every this many composed pairs and compare (the module's claim, checked).
#[cfg(debug_assertions)]
const CHECKED_EVERY: u64 = 16;

/// The runs composed pairs are made of, by sink: each first fault's (converged or not), and
/// each single process crash's on the fault-free run. Shared by every chunk and thread of a
/// sweep, behind reader-writer locks; what a pair is composed of is the same whichever thread
/// ran it first (each is a single-fault run, forked from a snapshot with no shared futures).
#[derive(Default)]
pub struct ConvergedPairs {
    firsts: RwLock<BTreeMap<FaultOn, Option<Arc<ConvergedFirst>>>>,
    seconds: RwLock<BTreeMap<FaultOn, Arc<Observation>>>,
}

/// A single fault on a sink's fault-free run.
type FaultOn = (SinkKind, PlannedFault);

impl ConvergedPairs {
    /// The records of `point` (number `index`) composed, if it is a pair of a first fault
    /// whose run converged and a process crash after that.
    pub(super) fn records_of(
        &self,
        baseline: &Baseline,
        forks: &Forks,
        index: u64,
        point: &SweepPoint,
        judged: &mut LastJudged,
    ) -> Option<Vec<PointRecord>> {
        let [first, second] = point.faults.as_slice() else {
            return None;
        };
        // A class point stands for several states, counted on its record: it runs.
        let composable = second.fault.kind() == FaultKind::ProcessCrash
            && !matches!(first.fault, Fault::PowerLossClass { .. });
        if !composable {
            return None;
        }
        let converged = self.first(forks, point.sink, *first)?;
        let single = PlannedFault {
            step: converged.fault_free_step(second.step)?,
            fault: second.fault,
        };
        let observation =
            forks.compose_after_converged(&converged, &self.second(forks, point.sink, single))?;
        #[cfg(debug_assertions)]
        if index % CHECKED_EVERY == 0 {
            let plan = FaultPlan::new(point.faults.iter().copied()).expect("distinct steps");
            let ran = forks.run_point(&plan, true, None);
            assert_eq!(*ran.observation, observation, "{:?}", point.faults);
        }
        Some(point_records(
            baseline,
            index,
            point,
            Rc::new(observation),
            None,
            None,
            judged,
        ))
    }

    /// `first`'s run on `sink`, if it converged on the fault-free run.
    fn first(
        &self,
        forks: &Forks,
        sink: SinkKind,
        first: PlannedFault,
    ) -> Option<Arc<ConvergedFirst>> {
        let key = (sink, first);
        if let Some(kept) = self.firsts.read().expect("not poisoned").get(&key) {
            return kept.clone();
        }
        let plan = FaultPlan::new([first]).expect("one fault");
        let run = forks.run_point(&plan, true, None);
        let converged = run.converged_at.map(|at| {
            Arc::new(ConvergedFirst {
                observation: Arc::new((*run.observation).clone()),
                at,
            })
        });
        let mut firsts = self.firsts.write().expect("not poisoned");
        if firsts.len() == FIRSTS_MAX {
            firsts.clear();
        }
        firsts.insert(key, converged.clone());
        converged
    }

    /// What the single-fault point `single` observes on `sink`'s fault-free run.
    fn second(&self, forks: &Forks, sink: SinkKind, single: PlannedFault) -> Arc<Observation> {
        let key = (sink, single);
        if let Some(kept) = self.seconds.read().expect("not poisoned").get(&key) {
            return Arc::clone(kept);
        }
        let plan = FaultPlan::new([single]).expect("one fault");
        let observation = Arc::new((*forks.run_point(&plan, true, None).observation).clone());
        let mut seconds = self.seconds.write().expect("not poisoned");
        if seconds.len() == SECONDS_MAX {
            seconds.clear();
        }
        seconds.insert(key, Arc::clone(&observation));
        observation
    }
}
