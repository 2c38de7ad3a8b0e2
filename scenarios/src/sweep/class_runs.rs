//! Power-loss class points that boot into a disk an earlier one booted into take its
//! records instead of running ([`ClassRuns`]).

use super::{PointRecord, SweepPoint};
use crate::baseline::Baseline;
use crate::fork::SharedFutures;
use keel_engine::{KeyScheme, SinkKind};
use keel_sim::disk::{DurableIdentity, PowerLossClasses};
use keel_sim::{ClassesAt, Fault};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// The durable states whose class runs [`ClassRuns`] keeps at once.
const CLASS_RUNS_STATES_MAX: usize = 4;

/// The power-loss class points of a sweep that have run, by sink and by the disk they boot
/// into: a class at a later step that keeps the same lines of the sink file on the same
/// durable state (nothing else at risk but the directory, with the same digit) boots into
/// the very same disk, so its run is the earlier one's, but for the clock, which the engine
/// observes only through processing-time keys and the log sink's transactions (neither
/// shares). Its records are the earlier point's, restamped with its own index, fault and
/// class count; no class point's record carries a trace fingerprint, so a record is the
/// same whichever thread or chunk ran the class first. Shared by every chunk and thread of
/// a sweep, behind a reader-writer lock: nearly every class point only looks up, and
/// copies what it takes after the lock is released. Bounded: the runs of
/// [`CLASS_RUNS_STATES_MAX`] durable states at a time, at most one a point of each.
#[derive(Default)]
pub struct ClassRuns {
    by_sink: RwLock<BTreeMap<SinkKind, Runs>>,
    /// How many points took an earlier run's records: what the tests read, since a report
    /// is the same whether any did (a key that never matched went unseen for a day).
    taken: AtomicU64,
}

/// One sink's class runs: by what they boot into, the durable states and their records.
#[derive(Default)]
struct Runs {
    runs: BTreeMap<BootsInto, Vec<ClassRun>>,
}

/// The records of a class point that ran, and the durable state its disk had.
type ClassRun = (Arc<DurableIdentity>, Arc<Vec<PointRecord>>);

/// A class's directory digit and the lengths its line-read files keep
/// (`PowerLossClasses::boots_into`).
type BootsInto = (u64, Vec<u64>);

/// What a class point boots into (the durable state, with the pending namespace
/// operations, and [`BootsInto`]), and its class among the step's classes.
struct ClassRunKey {
    durable: Arc<DurableIdentity>,
    boots_into: BootsInto,
    classes: Arc<PowerLossClasses>,
    class: u64,
}

impl ClassRuns {
    /// The records of `point` (number `index`), taken from an earlier class point that
    /// booted into the same disk, if one ran.
    pub(super) fn records_of(
        &self,
        baseline: &Baseline,
        index: u64,
        point: &SweepPoint,
        shared: &SharedFutures,
    ) -> Option<Vec<PointRecord>> {
        let key = key(baseline, point, shared)?;
        let records = {
            let by_sink = self.by_sink.read().expect("no panic while held");
            Arc::clone(by_sink.get(&point.sink)?.get(&key)?)
        };
        self.taken.fetch_add(1, Ordering::Relaxed);
        // Worked out only for a point that takes a run: its class's crash states.
        let states = key.classes.class_states(key.class);
        Some(
            records
                .iter()
                .map(|record| {
                    assert_eq!(record.sink, point.sink);
                    assert_eq!(record.row, point.row);
                    PointRecord {
                        index,
                        faults: Arc::clone(&point.faults),
                        sampled: point.sampled.clone(),
                        class_states: Some(states.clone()),
                        ..record.clone()
                    }
                })
                .collect(),
        )
    }

    /// Keeps the records of `point`, which ran, if it is a class point (the first at its
    /// step fills the step's classes as it runs): without its trace fingerprint, which a
    /// point that takes them would not have.
    pub(super) fn remember(
        &self,
        baseline: &Baseline,
        point: &SweepPoint,
        shared: &SharedFutures,
        records: &mut [PointRecord],
    ) {
        let Some(key) = key(baseline, point, shared) else {
            return;
        };
        for record in records.iter_mut() {
            record.fingerprint = None;
        }
        let mut by_sink = self.by_sink.write().expect("no panic while held");
        by_sink.entry(point.sink).or_default().insert(key, records);
    }
}

/// The disk `point` boots into, where it is a single power-loss class at a step whose
/// classes are known already and leave nothing else at risk, on a sink whose run cannot see
/// the clock.
fn key(baseline: &Baseline, point: &SweepPoint, shared: &SharedFutures) -> Option<ClassRunKey> {
    let config = &baseline.spec.config;
    if config.key != KeyScheme::EventIndex || config.sink.is_transactional() {
        return None;
    }
    let [only] = &*point.faults else {
        return None;
    };
    let Fault::PowerLossClass {
        at,
        class,
        by_tail: false,
    } = only.fault
    else {
        return None;
    };
    let memo = shared.classes_memo.lock().expect("no panic while held");
    let at_step = memo.as_ref()?;
    if at_step.key != ClassesAt::key_of(only.step, at, false) {
        return None;
    }
    if at_step.classes.count().is_none_or(|count| class >= count) {
        return None;
    }
    Some(ClassRunKey {
        durable: Arc::clone(&at_step.durable),
        boots_into: at_step.classes.boots_into(class)?,
        classes: Arc::clone(&at_step.classes),
        class,
    })
}

#[cfg(test)]
impl ClassRuns {
    /// How many points took an earlier run's records.
    pub(super) fn taken(&self) -> u64 {
        self.taken.load(Ordering::Relaxed)
    }
}

impl Runs {
    fn get(&self, key: &ClassRunKey) -> Option<&Arc<Vec<PointRecord>>> {
        self.runs
            .get(&key.boots_into)?
            .iter()
            .find(|(durable, _)| **durable == *key.durable)
            .map(|(_, records)| records)
    }

    fn insert(&mut self, key: ClassRunKey, records: &[PointRecord]) {
        let ClassRunKey {
            durable,
            boots_into,
            ..
        } = key;
        // Points come step by step, a thread's chunks in order: the runs of a few durable
        // states at a time serve every thread (one checkpoint interval each, and a thread
        // just past one's end).
        let mut held: Vec<&Arc<DurableIdentity>> = Vec::new();
        for (identity, _) in self.runs.values().flatten() {
            if !held.iter().any(|h| ***h == **identity) {
                held.push(identity);
            }
        }
        if !held.iter().any(|h| ***h == *durable) && held.len() >= CLASS_RUNS_STATES_MAX {
            self.runs.clear();
        }
        let same = self.runs.entry(boots_into).or_default();
        if !same.iter().any(|(held, _)| **held == *durable) {
            // Kept as templates: what a taking point restamps is left out, so that it is
            // not copied to be dropped.
            let templates = records
                .iter()
                .map(|record| PointRecord {
                    class_states: None,
                    faults: Arc::new([]),
                    sampled: Vec::new(),
                    ..record.clone()
                })
                .collect();
            same.push((durable, Arc::new(templates)));
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::catalogue::Scenario;
    use crate::spec::ScenarioSpec;
    use crate::sweep::run::{crash_and_sink_error_sweep, sharing_chunks, SweepSetup};
    use crate::sweep::{PowerLossPoints, SweepPoints};
    use keel_sim::FaultKind;
    use std::sync::Arc;

    /// ch04's power-loss class sweep, chunk by chunk as a sweep runs them: how many class
    /// points took the records of an earlier one that booted into the same disk, of all.
    fn taken_of(sweep: &crate::sweep::SweepSpec) -> (u64, u64) {
        let spec = ScenarioSpec::ch04(0);
        let events: Arc<[keel_engine::Event]> = Scenario::by_name("ch04").unwrap().events().into();
        let setup = SweepSetup::new(&spec, events, sweep, false).unwrap();
        let points = SweepPoints::new(&spec, sweep, &setup.baselines, setup.forks.as_ref());
        for chunk in sharing_chunks(0..points.len()) {
            setup.run_chunk(&points, chunk);
        }
        (setup.class_runs().taken(), points.len())
    }

    /// Class points at a later step that keep the same lines on the same durable state take
    /// an earlier one's run: on ch04 (both file sinks) 100 of its 280 class points.
    #[test]
    fn a_class_that_boots_into_a_disk_an_earlier_one_booted_into_takes_its_run() {
        let mut sweep = crash_and_sink_error_sweep(1);
        sweep.faults = vec![FaultKind::PowerLoss];
        sweep.power_loss_points = PowerLossPoints::Classes;
        assert_eq!(taken_of(&sweep), (100, 280));
    }
}
