//! Depth-2 points whose second fault is a process crash after their first fault's run
//! converged take their observation composed from two single-fault runs
//! (`fork/converged_pairs.rs` states why that is the pair's) instead of running. The
//! single-fault runs are kept for every chunk and thread of the sweep ([`ConvergedPairs`]).

use super::run::{point_records, LastJudged};
use super::{PointRecord, SweepPoint};
use crate::baseline::Baseline;
use crate::fork::{ConvergedFirst, Forks, SingleCrash};
use keel_engine::SinkKind;
use keel_sim::{CrashPoint, Fault, FaultPlan, PlannedFault};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::{Arc, OnceLock, RwLock};

/// The most first faults whose runs [`ConvergedPairs`] keeps at once: a chunk's points share
/// one or two first faults, and a thread runs one chunk at a time.
const FIRSTS_MAX: usize = 64;

/// Debug builds run every this many composed pairs and compare (the module's claim, checked).
#[cfg(debug_assertions)]
const CHECKED_EVERY: u64 = 16;

/// The runs composed pairs are made of, by sink: each first fault's (converged or not), and
/// each single process crash's on the fault-free run, two a step (before and after its
/// effect). Shared by every chunk and thread of a sweep: what a pair is composed of is the
/// same whichever thread ran it first (each is a single-fault run, forked from a snapshot
/// with no shared futures).
#[derive(Default)]
pub struct ConvergedPairs {
    firsts: RwLock<BTreeMap<FaultOn, Option<Arc<ConvergedFirst>>>>,
    /// Per sink, at depth 2 only: slot `2 * step + (0 before, 1 after)`.
    single_crashes: BTreeMap<SinkKind, Vec<OnceLock<SingleCrash>>>,
}

/// A single fault on a sink's fault-free run.
type FaultOn = (SinkKind, PlannedFault);

/// The first fault a chunk's last pair had, with its run: consecutive pairs share it.
pub(super) type LastFirst = Option<(FaultOn, Option<Arc<ConvergedFirst>>)>;

impl ConvergedPairs {
    /// Slots for the single crashes of every step of each of `baselines`' fault-free runs,
    /// at depth 2 (none at depth 1).
    pub(super) fn new(baselines: &BTreeMap<SinkKind, Baseline>, depth: u8) -> ConvergedPairs {
        let single_crashes = if depth == 2 {
            baselines
                .iter()
                .map(|(&sink, baseline)| {
                    let slots = 2 * baseline.sites.len();
                    (sink, (0..slots).map(|_| OnceLock::new()).collect())
                })
                .collect()
        } else {
            BTreeMap::new()
        };
        ConvergedPairs {
            firsts: RwLock::default(),
            single_crashes,
        }
    }

    /// The records of `point` (number `index`) composed, if it is a pair of a first fault
    /// whose run converged and a process crash after that. `last`: the chunk's last first
    /// fault.
    pub(super) fn records_of(
        &self,
        baseline: &Baseline,
        forks: &Forks,
        index: u64,
        point: &SweepPoint,
        judged: &mut LastJudged,
        last: &mut LastFirst,
    ) -> Option<Vec<PointRecord>> {
        let [first, second] = point.faults.as_slice() else {
            return None;
        };
        // A class point stands for several states, counted on its record: it runs.
        let Fault::ProcessCrash { at } = second.fault else {
            return None;
        };
        if matches!(first.fault, Fault::PowerLossClass { .. }) {
            return None;
        }
        let key = (point.sink, *first);
        let converged = match last {
            Some((last_key, converged)) if *last_key == key => converged.clone(),
            _ => {
                let converged = self.first(forks, key);
                *last = Some((key, converged.clone()));
                converged
            }
        }?;
        let step = converged.fault_free_step(second.step)?;
        let slot = 2 * step as usize + usize::from(at == CrashPoint::After);
        let single = self
            .single_crashes
            .get(&point.sink)?
            .get(slot)?
            .get_or_init(|| {
                let single = PlannedFault {
                    step,
                    fault: second.fault,
                };
                let plan = FaultPlan::new([single]).expect("one fault");
                forks.single_crash(&forks.run_point(&plan, true, None).observation)
            });
        let observation = forks.compose_after_converged(&converged, single)?;
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

    /// The run of `first` on its sink, if it converged on the fault-free run and its pairs
    /// can be composed from it.
    fn first(&self, forks: &Forks, key: FaultOn) -> Option<Arc<ConvergedFirst>> {
        if let Some(kept) = self.firsts.read().expect("not poisoned").get(&key) {
            return kept.clone();
        }
        let plan = FaultPlan::new([key.1]).expect("one fault");
        let converged = forks
            .converged_first(&forks.run_point(&plan, true, None))
            .map(Arc::new);
        let mut firsts = self.firsts.write().expect("not poisoned");
        if firsts.len() == FIRSTS_MAX {
            firsts.clear();
        }
        firsts.insert(key, converged.clone());
        converged
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::Scenario;
    use crate::spec::ScenarioSpec;
    use crate::sweep::run::{crash_and_sink_error_sweep, run_point, SweepSetup};
    use crate::sweep::SweepPoints;

    /// Every pair of ch04's depth-2 sweep that is composed has the records of its run from
    /// scratch (`--naive`'s), but for the trace fingerprint only a run to the end has; and
    /// the pairs composed are the ones after their first fault converged.
    #[test]
    fn a_composed_pair_has_the_records_of_its_run_from_scratch() {
        let spec = ScenarioSpec::ch04(0);
        let events: Arc<[keel_engine::Event]> = Scenario::by_name("ch04").unwrap().events().into();
        let sweep = crash_and_sink_error_sweep(2);
        let setup = SweepSetup::new(&spec, Arc::clone(&events), &sweep, false).unwrap();
        let forks = setup.forks.as_ref().expect("forked");
        let points = SweepPoints::new(&spec, &sweep, &setup.baselines, Some(forks));
        let pairs = ConvergedPairs::new(&setup.baselines, sweep.depth);
        let (mut judged, mut last) = (LastJudged::default(), None);
        // Per row: the pairs composed, of all its pairs.
        let mut composed: BTreeMap<(SinkKind, String), (u64, u64)> = BTreeMap::new();
        for (index, point) in points.get(0..points.len(), &setup.baselines, Some(forks)) {
            let baseline = &setup.baselines[&point.sink];
            let forks_of_sink = &forks[&point.sink];
            let row = composed.entry((point.sink, point.row.clone())).or_default();
            row.1 += 1;
            let Some(records) = pairs.records_of(
                baseline,
                forks_of_sink,
                index,
                &point,
                &mut judged,
                &mut last,
            ) else {
                continue;
            };
            row.0 += 1;
            let mut naive = run_point(&setup.baselines, None, index, &point, None, &mut judged);
            for record in &mut naive {
                record.fingerprint = None;
            }
            assert_eq!(records, naive, "{:?}", point.faults);
        }
        let composed: Vec<_> = composed
            .into_iter()
            .map(|((sink, row), (n, of))| format!("{sink:?} {row} {n} of {of}"))
            .collect();
        // A second sink error never composes; a pair whose second crash comes before its
        // first fault's run converged runs.
        assert_eq!(
            composed,
            [
                "Append process-crash+process-crash 1582 of 2269",
                "Append process-crash+sink-error 0 of 207",
                "Append sink-error+process-crash 48 of 56",
                "Append sink-error+sink-error 0 of 10",
                "Idempotent process-crash+process-crash 1526 of 2269",
                "Idempotent process-crash+sink-error 0 of 207",
                "Idempotent sink-error+process-crash 48 of 56",
                "Idempotent sink-error+sink-error 0 of 10",
            ]
        );
    }
}
