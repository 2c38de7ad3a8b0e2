//! Depth-2 points whose second fault is a process crash, a sink error, a lost ack or (the
//! disks alike: where the run converged, or a later boundary of it) a power loss after
//! their first fault's run converged take their observation
//! composed from two single-fault runs (`fork/converged_pairs.rs` states why that is the
//! pair's) instead of running; a power loss, first or second, may be a class of crash
//! states, and the pair's record then counts the product of its classes' states. The
//! single-fault runs are kept for every chunk and thread of the sweep ([`ConvergedPairs`]).

use super::run::{push_point_records, LastJudged};
use super::{digest_hash, outcome_key, run_term, Folded, PointRecord, SweepPoint};
use crate::baseline::Baseline;
use crate::fork::{ConvergedFirst, Forks, SingleFault};
use crate::observation::Observation;
use keel_engine::SinkKind;
use keel_sim::{CrashPoint, Fault, FaultKind, FaultPlan, PlannedFault};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

/// The most first faults whose runs [`ConvergedPairs`] keeps at once: a chunk's points share
/// one or two first faults, and a thread runs one chunk at a time.
const FIRSTS_MAX: usize = 64;

/// How far back a filled slot looks for the nearest filled one to be alike with: past the
/// steps where its kind applies to nothing (those slots stay empty).
const ALIKE_LOOKBACK_SLOTS: usize = 16;

/// The most single power losses [`ConvergedPairs`] keeps, over its sinks: a sampled step's
/// states are drawn anew for each first fault, so a sweep can meet as many as it has pairs.
/// About 500 bytes each: 32 MB. Beyond it a single power loss runs for its pair and is not
/// kept (which are kept depends on thread timing; what a pair observes does not).
const POWER_LOSSES_KEPT_MAX: usize = 1 << 16;

/// Debug builds run every this many composed pairs and compare (the module's claim, checked).
#[cfg(debug_assertions)]
const CHECKED_EVERY: u64 = 16;

/// The runs composed pairs are made of, by sink: each first fault's (converged or not), and
/// each single fault's on the fault-free run that a pair can end with, a slot each at every
/// step. Shared by every chunk and thread of a sweep: what a pair is composed of is the
/// same whichever thread ran it first (each is a single-fault run, forked from a snapshot
/// with no shared futures).
#[derive(Default)]
pub struct ConvergedPairs {
    firsts: RwLock<BTreeMap<FaultOn, Option<Arc<FirstRun>>>>,
    /// Per sink, at depth 2 only: slot `step * slots.per_step + slots.of(fault)`.
    singles: BTreeMap<SinkKind, Vec<OnceLock<Single>>>,
    slots: Slots,
    /// Per sink, at depth 2 with power losses aimed: each step's power losses (a crash point
    /// and a state or a class each) on the fault-free run, run once a sweep. A step has a few (as many as
    /// `--power-loss-states-max` a crash point), so a small map under a lock of its own.
    power_losses: BTreeMap<SinkKind, Vec<PowerLossesAt>>,
    /// How many `power_losses` holds, up to [`POWER_LOSSES_KEPT_MAX`].
    power_losses_kept: AtomicUsize,
}

/// A step's power losses on the fault-free run, as pairs take them.
type PowerLossesAt = Mutex<BTreeMap<Fault, Arc<SingleFault>>>;

/// A first fault's run that converged, as its pairs take it: from where it converged for a
/// second process crash, sink error or lost ack; from where its whole disk is alike too for
/// a second power loss (`fork/converged_pairs.rs`), which may be a later boundary of the
/// same run.
struct FirstRun {
    converged: ConvergedFirst,
    /// Where the run's disk was not alike where it converged: the same run at the first
    /// boundary where it is (None: it never is, or no power loss comes second).
    disk_alike_later: Option<ConvergedFirst>,
}

impl FirstRun {
    /// The run as a pair whose second fault is `second` takes it.
    fn for_second(&self, second: Fault) -> Option<&ConvergedFirst> {
        let power_loss = matches!(
            second,
            Fault::PowerLoss { .. } | Fault::PowerLossClass { .. }
        );
        if power_loss && !self.converged.disk_alike() {
            self.disk_alike_later.as_ref()
        } else {
            Some(&self.converged)
        }
    }
}

/// A single fault's run in its slot, and which slots compose the same pairs.
struct Single {
    fault: SingleFault,
    /// The first slot of a chain of filled slots up to this one, each alike with the one
    /// before ([`SingleFault::same_as`]; the nearest filled when it was filled): two slots
    /// with the same `alike` compose the same pair with one first fault.
    /// Found once, when the slot is filled, so a pair learns it can take the last pair's
    /// observation without reading the single fault itself (a cache miss a pair, a tenth of
    /// a 10,000-event sweep's time).
    alike: usize,
}

/// Where a step's single faults lie among its slots: only the kinds the sweep aims at have
/// one (a process crash two: before and after the step's effect).
#[derive(Clone, Copy, Debug, Default)]
struct Slots {
    per_step: usize,
    process_crash: Option<usize>,
    sink_error: Option<usize>,
    ack_lost: Option<usize>,
}

impl Slots {
    fn of_kinds(kinds: &[FaultKind]) -> Slots {
        let mut slots = Slots::default();
        for (kind, width) in [
            (FaultKind::ProcessCrash, 2),
            (FaultKind::SinkError, 1),
            (FaultKind::AckLost, 1),
        ] {
            if !kinds.contains(&kind) {
                continue;
            }
            let at = Some(slots.per_step);
            match kind {
                FaultKind::ProcessCrash => slots.process_crash = at,
                FaultKind::SinkError => slots.sink_error = at,
                _ => slots.ack_lost = at,
            }
            slots.per_step += width;
        }
        slots
    }

    /// The slot of `fault` among a step's, if a pair can end with it: a process crash, a
    /// sink error or a lost ack (`fork/converged_pairs.rs` says why these).
    fn of(&self, fault: Fault) -> Option<usize> {
        match fault {
            Fault::ProcessCrash { at } => {
                Some(self.process_crash? + usize::from(at == CrashPoint::After))
            }
            Fault::SinkError => self.sink_error,
            Fault::AckLost => self.ack_lost,
            _ => None,
        }
    }
}

/// A single fault on a sink's fault-free run.
type FaultOn = (SinkKind, PlannedFault);

/// The first fault a chunk's last pair had, with its run, and the last pair composed of it:
/// consecutive pairs share their first fault, and those whose second faults leave the same
/// outcome (a crash at each step of one window's events) share their observation, composed
/// once and so judged once ([`LastJudged`] knows it by its pointer).
#[derive(Default)]
pub(super) struct LastFirst {
    first: Option<(FaultOn, Option<Arc<FirstRun>>)>,
    composed: Option<Composed>,
}

/// The observation the chunk's last composed pair has, and what its points share.
struct Composed {
    /// The single fault it was composed of.
    alike: Alike,
    observation: Rc<Observation>,
    /// The last point that took it.
    index: u64,
    /// The outcome key of its records (`sweep/fingerprint.rs`), once a span needs it.
    outcome_key: Option<u64>,
}

/// A single fault a pair was composed of, as a later pair with the same first fault knows
/// it composes the same observation.
enum Alike {
    /// Which slots a process crash, sink error or lost ack is alike with ([`Single::alike`]).
    Slot(usize),
    /// A power loss, compared with the next pair's ([`SingleFault::same_as`]): consecutive
    /// crash states of one step often leave the same disk behind.
    PowerLoss(Arc<SingleFault>),
}

impl Alike {
    fn composes_as(&self, other: &Alike) -> bool {
        match (self, other) {
            (Alike::Slot(a), Alike::Slot(b)) => a == b,
            (Alike::PowerLoss(a), Alike::PowerLoss(b)) => Arc::ptr_eq(a, b) || a.same_as(b),
            _ => false,
        }
    }
}

impl ConvergedPairs {
    /// Slots for the single faults of `kinds` a pair can end with, at every step of each of
    /// `baselines`' fault-free runs, at depth 2 (none at depth 1).
    pub(super) fn new(
        baselines: &BTreeMap<SinkKind, Baseline>,
        depth: u8,
        kinds: &[FaultKind],
    ) -> ConvergedPairs {
        let slots = Slots::of_kinds(kinds);
        let power_losses = if depth == 2 && kinds.contains(&FaultKind::PowerLoss) {
            baselines
                .iter()
                .map(|(&sink, baseline)| {
                    let steps = baseline.sites.len();
                    (sink, (0..steps).map(|_| Mutex::default()).collect())
                })
                .collect()
        } else {
            BTreeMap::new()
        };
        let singles = if depth == 2 {
            baselines
                .iter()
                .map(|(&sink, baseline)| {
                    let len = slots.per_step * baseline.sites.len();
                    (sink, (0..len).map(|_| OnceLock::new()).collect())
                })
                .collect()
        } else {
            BTreeMap::new()
        };
        ConvergedPairs {
            firsts: RwLock::default(),
            singles,
            slots,
            power_losses,
            power_losses_kept: AtomicUsize::new(0),
        }
    }

    /// Pushes the records of `point` (and its number) composed onto `out`, if it is a pair of
    /// a first fault whose run converged and a process crash, a sink error, a lost ack, or
    /// (the disks alike there) a power loss after that (None: it is not; `out` is left as
    /// it was).
    /// `last`: the chunk's last first fault.
    pub(super) fn records_of(
        &self,
        baseline: &Baseline,
        forks: &Forks,
        &(index, ref point): &(u64, SweepPoint),
        judged: &mut LastJudged,
        last: &mut LastFirst,
        out: &mut Vec<PointRecord>,
    ) -> Option<()> {
        let [first, second] = &*point.faults else {
            return None;
        };
        let key = (point.sink, *first);
        if last.first.as_ref().map(|(last_key, _)| *last_key) != Some(key) {
            last.first = Some((key, self.first(forks, key)));
            last.composed = None;
        }
        // Taken out of `last` while its pairs are composed, which sets `last.composed`, and
        // put back (not cloned: an `Arc` count every thread would write for every pair).
        let first_run = last.first.take();
        let records = first_run
            .as_ref()
            .and_then(|(_, run)| run.as_deref())
            .and_then(|run| run.for_second(second.fault))
            .and_then(|converged| {
                let on = OnSink { baseline, forks };
                let pair = Pair {
                    index,
                    point,
                    second: *second,
                    converged,
                };
                if matches!(
                    second.fault,
                    Fault::PowerLoss { .. } | Fault::PowerLossClass { .. }
                ) {
                    self.power_loss_records_of(on, pair, last, judged, out)
                } else {
                    self.slot_records_of(on, pair, last, judged, out)
                }
            });
        last.first = first_run;
        records
    }

    /// [`ConvergedPairs::records_of`] for a pair whose second fault is a process crash, a
    /// sink error or a lost ack, after the first fault's run `converged`.
    fn slot_records_of(
        &self,
        on: OnSink,
        pair: Pair,
        last: &mut LastFirst,
        judged: &mut LastJudged,
        out: &mut Vec<PointRecord>,
    ) -> Option<()> {
        let (forks, converged, point, second) = (on.forks, pair.converged, pair.point, pair.second);
        let slot = self.slots.of(second.fault)?;
        let step = converged.fault_free_step(second.step)?;
        let slot = step as usize * self.slots.per_step + slot;
        let singles = self.singles.get(&point.sink)?;
        let single = singles.get(slot)?.get_or_init(|| {
            let fault = single_run(forks, step, second.fault);
            // Whether another thread filled the slot before is a matter of timing: it moves
            // which pairs share an observation, never what a pair observes.
            let nearest = slot.saturating_sub(ALIKE_LOOKBACK_SLOTS)..slot;
            let before = nearest.rev().find_map(|before| singles[before].get());
            let alike = match before {
                Some(before) if before.fault.same_as(&fault) => before.alike,
                _ => slot,
            };
            Single { fault, alike }
        });
        let alike = Alike::Slot(single.alike);
        on.push_composed(pair, &single.fault, alike, last, judged, out)
    }

    /// [`ConvergedPairs::records_of`] for a pair whose second fault is a power loss (a
    /// crash state or a class of them): composed only where the first fault's whole disk was
    /// alike with the fault-free run's where it converged (`fork/converged_pairs.rs`).
    fn power_loss_records_of(
        &self,
        on: OnSink,
        pair: Pair,
        last: &mut LastFirst,
        judged: &mut LastJudged,
        out: &mut Vec<PointRecord>,
    ) -> Option<()> {
        let (forks, converged, point, second) = (on.forks, pair.converged, pair.point, pair.second);
        assert!(matches!(
            second.fault,
            Fault::PowerLoss { .. } | Fault::PowerLossClass { .. }
        ));
        if !converged.disk_alike() {
            return None;
        }
        let step = converged.fault_free_step(second.step)?;
        let at_step = self.power_losses.get(&point.sink)?.get(step as usize)?;
        let kept = at_step
            .lock()
            .expect("not poisoned")
            .get(&second.fault)
            .cloned();
        let single = kept.unwrap_or_else(|| {
            let made = Arc::new(single_run(forks, step, second.fault));
            let room = self
                .power_losses_kept
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |kept| {
                    (kept < POWER_LOSSES_KEPT_MAX).then_some(kept + 1)
                })
                .is_ok();
            if !room {
                return made;
            }
            // Another thread may have run it meanwhile: the same run, either kept (and the
            // count then one too high, which only keeps fewer).
            let mut at_step = at_step.lock().expect("not poisoned");
            Arc::clone(at_step.entry(second.fault).or_insert(made))
        });
        let alike = Alike::PowerLoss(Arc::clone(&single));
        on.push_composed(pair, &single, alike, last, judged, out)
    }

    /// The run of `first` on its sink, if it converged on the fault-free run and its pairs
    /// can be composed from it.
    fn first(&self, forks: &Forks, key: FaultOn) -> Option<Arc<FirstRun>> {
        if let Some(kept) = self.firsts.read().expect("not poisoned").get(&key) {
            return kept.clone();
        }
        let plan = FaultPlan::new([key.1]).expect("one fault");
        // The disks are compared only where a power loss can come second.
        let run = if self.power_losses.is_empty() {
            forks.run_point(&plan, true, None)
        } else {
            forks.run_first_fault(&plan)
        };
        let converged = forks.converged_first(&run).map(|converged| {
            // Where a power loss can come second and the disk was not alike where the run
            // converged, the same run is run on to where it is.
            let disk_alike_later = (!self.power_losses.is_empty() && !converged.disk_alike())
                .then(|| forks.disk_alike_boundary(&plan))
                .flatten()
                .and_then(|at| forks.converged_first_at(&run, at));
            Arc::new(FirstRun {
                converged,
                disk_alike_later,
            })
        });
        let mut firsts = self.firsts.write().expect("not poisoned");
        if firsts.len() == FIRSTS_MAX {
            firsts.clear();
        }
        firsts.insert(key, converged.clone());
        converged
    }
}

/// The sink a chunk's pairs are on: its fault-free run and its forks.
#[derive(Clone, Copy)]
struct OnSink<'a> {
    baseline: &'a Baseline,
    forks: &'a Forks,
}

/// A pair to compose: its point (and number), its second fault, and its first fault's run,
/// converged.
#[derive(Clone, Copy)]
struct Pair<'a> {
    index: u64,
    point: &'a SweepPoint,
    second: PlannedFault,
    converged: &'a ConvergedFirst,
}

/// The single fault `fault` at `step` of the fault-free run, as pairs take it.
fn single_run(forks: &Forks, step: u64, fault: Fault) -> SingleFault {
    let plan = FaultPlan::new([PlannedFault { step, fault }]).expect("one fault");
    forks.single_fault(&forks.run_point(&plan, true, None))
}

impl OnSink<'_> {
    /// Pushes the records of `pair`, composed of its first fault's run and the single fault
    /// `single` (`alike` says which), onto `out`; None where a piece is not there. A pair
    /// whose single fault composes as the last pair's takes its observation (judged once), and
    /// where that pair was the point just before, whose record is `out`'s last, the record
    /// stands for this point too (a span) instead of a record of its own.
    fn push_composed(
        &self,
        Pair {
            index,
            point,
            converged,
            ..
        }: Pair,
        single: &SingleFault,
        alike: Alike,
        last: &mut LastFirst,
        judged: &mut LastJudged,
        out: &mut Vec<PointRecord>,
    ) -> Option<()> {
        let (baseline, forks) = (self.baseline, self.forks);
        // Where either fault is a class, the pair stands for the product of their states.
        let class_states = single.class_states_after(converged);
        // The last point that took a composed observation (whether it is this point's
        // neighbour decides whether this point's record may join that point's).
        let last_index = last.composed.as_ref().map(|composed| composed.index);
        let shared = matches!(&last.composed, Some(composed) if composed.alike.composes_as(&alike));
        if !shared {
            last.composed = Some(Composed {
                alike,
                observation: Rc::new(forks.compose_after_converged(converged, single)?),
                index,
                outcome_key: None,
            });
        }
        let composed = last.composed.as_mut().expect("set above");
        let observation = Rc::clone(&composed.observation);
        #[cfg(debug_assertions)]
        if index % CHECKED_EVERY == 0 {
            let plan = FaultPlan::new(point.faults.iter().copied()).expect("distinct steps");
            let ran = forks.run_point(&plan, true, None);
            assert_eq!(
                ran.observation.seen_as(&observation),
                *observation,
                "{:?}",
                point.faults
            );
            assert_eq!(ran.class_states, class_states, "{:?}", point.faults);
        }
        composed.index = index;
        // The record of the point before, if that point was composed too and its record is
        // `out`'s last: this point's record joins it (a span) when the two are alike but for
        // the faults.
        let before_at = out.len().checked_sub(1).filter(|&at| {
            let record = &out[at];
            last_index.is_some_and(|last| last + 1 == index)
                && record.index + record.points() == index
                && record.view.is_none()
                && point.sampled.is_empty()
        });
        match before_at {
            // The same observation as the point before: the same record but for the faults,
            // known without judging it.
            Some(at)
                if shared && *out[at].row == *point.row && out[at].class_states == class_states =>
            {
                join_span(&mut out[at], composed, &point.faults);
            }
            before_at => {
                push_point_records(
                    baseline,
                    index,
                    point,
                    (observation, None, class_states),
                    judged,
                    out,
                );
                // Composed anew (its single fault not known alike with the last pair's:
                // which slots are linked is a matter of thread timing), yet judged the same
                // as the point before: it joins that point's record all the same, so that
                // which records a sweep's points share turns on what they observe alone, and
                // a shard's lines are the same for any `--jobs`.
                if let Some(at) = before_at {
                    let new = out.last().expect("just pushed");
                    if out.len() == at + 2 && same_but_faults(&out[at], new) {
                        let new = out.pop().expect("just pushed");
                        join_span(&mut out[at], composed, &new.faults);
                    }
                }
            }
        }
        Some(())
    }
}

/// Extends `record`'s span (made on first use) by the point whose faults are `faults`, which
/// took the observation `composed` holds.
fn join_span(record: &mut PointRecord, composed: &mut Composed, faults: &[PlannedFault]) {
    assert!(record.view.is_none(), "a file sink's one view");
    let key = *composed
        .outcome_key
        .get_or_insert_with(|| outcome_key(record.sink, digest_hash(&record.outcome_digest)));
    let span = record
        .span
        .get_or_insert_with(|| Folded::of(run_term(key, &record.faults)));
    span.push(run_term(key, faults));
}

/// Whether two records of composed points say the same of their points but for which points
/// they are (their number and faults) and the span.
fn same_but_faults(a: &PointRecord, b: &PointRecord) -> bool {
    // Every field named, so a new one cannot be left out.
    let PointRecord {
        index: _,
        sink,
        row,
        view,
        class_states,
        dirty_reads,
        visibility_delay_ms_max,
        faults: _,
        sampled,
        duplicates,
        lost,
        wrong,
        corrupt,
        stale_windows,
        rolled_back,
        failed_recovery,
        broken,
        model_mismatch,
        outcome,
        outcome_digest,
        fingerprint,
        span: _,
    } = a;
    *sink == b.sink
        && **row == *b.row
        && *class_states == b.class_states
        && *view == b.view
        && *dirty_reads == b.dirty_reads
        && *visibility_delay_ms_max == b.visibility_delay_ms_max
        && sampled.is_empty()
        && b.sampled.is_empty()
        && *duplicates == b.duplicates
        && *lost == b.lost
        && *wrong == b.wrong
        && *corrupt == b.corrupt
        && *stale_windows == b.stale_windows
        && *rolled_back == b.rolled_back
        && *failed_recovery == b.failed_recovery
        && *broken == b.broken
        && *model_mismatch == b.model_mismatch
        && *outcome == b.outcome
        && *outcome_digest == b.outcome_digest
        && fingerprint.is_none()
        && b.fingerprint.is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::Scenario;
    use crate::spec::ScenarioSpec;
    use crate::sweep::run::{crash_and_sink_error_sweep, run_point, SweepSetup};
    use crate::sweep::SweepPoints;
    use keel_sim::FaultKind;

    /// Runs every point of ch04's sweep `sweep` (depth 2), and checks that each pair
    /// composed has the records of its run from scratch (`--naive`'s), but for the trace
    /// fingerprint only a run to the end has. Returns, per row, the pairs composed of all
    /// its pairs.
    fn check(sweep: &crate::sweep::SweepSpec) -> Vec<String> {
        let spec = ScenarioSpec::ch04(0);
        let events: Arc<[keel_engine::Event]> = Scenario::by_name("ch04").unwrap().events().into();
        let setup = SweepSetup::new(&spec, Arc::clone(&events), sweep, false).unwrap();
        let forks = setup.forks.as_ref().expect("forked");
        let points = SweepPoints::new(&spec, sweep, &setup.baselines, Some(forks));
        let pairs = ConvergedPairs::new(&setup.baselines, sweep.depth, &sweep.faults);
        let (mut judged, mut last) = (LastJudged::default(), LastFirst::default());
        // Per row: the pairs composed, of all its pairs.
        let mut composed: BTreeMap<(SinkKind, String), (u64, u64)> = BTreeMap::new();
        for indexed in points.get(0..points.len(), &setup.baselines, Some(forks)) {
            let (index, point) = &indexed;
            let index = *index;
            let baseline = &setup.baselines[&point.sink];
            let forks_of_sink = &forks[&point.sink];
            let row = composed
                .entry((point.sink, point.row.to_string()))
                .or_default();
            row.1 += 1;
            let mut records = Vec::new();
            let composed = pairs.records_of(
                baseline,
                forks_of_sink,
                &indexed,
                &mut judged,
                &mut last,
                &mut records,
            );
            if composed.is_none() {
                continue;
            }
            row.0 += 1;
            let mut naive = run_point(&setup.baselines, None, index, point, None, &mut judged);
            for record in &mut naive {
                record.fingerprint = None;
            }
            assert_eq!(records, naive, "{:?}", point.faults);
        }
        composed
            .into_iter()
            .map(|((sink, row), (n, of))| format!("{sink:?} {row} {n} of {of}"))
            .collect()
    }

    /// Every pair of ch04's depth-2 sweep (process crashes, sink errors and lost acks) that is
    /// composed has the records of its run from scratch: 4,185 of them. The pairs that run
    /// are those whose second fault comes before their first fault's run converged.
    #[test]
    fn a_composed_pair_has_the_records_of_its_run_from_scratch() {
        let mut sweep = crash_and_sink_error_sweep(2);
        sweep.faults.push(FaultKind::AckLost);
        let composed = check(&sweep);
        assert_eq!(
            composed,
            [
                "Append ack-lost+ack-lost 6 of 10",
                "Append ack-lost+process-crash 48 of 56",
                "Append ack-lost+sink-error 6 of 10",
                "Append process-crash+ack-lost 178 of 207",
                "Append process-crash+process-crash 1672 of 2394",
                "Append process-crash+sink-error 178 of 207",
                "Append sink-error+ack-lost 6 of 10",
                "Append sink-error+process-crash 48 of 56",
                "Append sink-error+sink-error 6 of 10",
                "Idempotent ack-lost+ack-lost 6 of 10",
                "Idempotent ack-lost+process-crash 48 of 56",
                "Idempotent ack-lost+sink-error 6 of 10",
                "Idempotent process-crash+ack-lost 161 of 207",
                "Idempotent process-crash+process-crash 1595 of 2394",
                "Idempotent process-crash+sink-error 161 of 207",
                "Idempotent sink-error+ack-lost 6 of 10",
                "Idempotent sink-error+process-crash 48 of 56",
                "Idempotent sink-error+sink-error 6 of 10",
            ]
        );
    }

    /// With power losses (two crash states a step and crash point at most): a second power
    /// loss is composed only after the boundary where its first fault's whole disk is alike
    /// with the fault-free run's (where the run converged, or a later boundary of the same
    /// run), and each such pair has the records of its run from scratch. On the append sink
    /// a first fault whose replay wrote lines again leaves them in the file, so its disk is
    /// alike only where it replayed none. On the idempotent sink 3,136 second power losses
    /// were composed when only the boundary where the run converged was tried.
    #[test]
    fn a_composed_second_power_loss_has_the_records_of_its_run_from_scratch() {
        let mut sweep = crash_and_sink_error_sweep(2);
        sweep.faults = vec![FaultKind::ProcessCrash, FaultKind::PowerLoss];
        sweep.power_loss_states_max = 2;
        let composed = check(&sweep);
        assert_eq!(
            composed,
            [
                "Append power-loss+power-loss 3136 of 6070",
                "Append power-loss+process-crash 2456 of 3766",
                "Append process-crash+power-loss 2212 of 3970",
                "Append process-crash+process-crash 1672 of 2394",
                "Idempotent power-loss+power-loss 3675 of 6003",
                "Idempotent power-loss+process-crash 2361 of 3766",
                "Idempotent process-crash+power-loss 2555 of 3879",
                "Idempotent process-crash+process-crash 1595 of 2394",
            ]
        );
    }

    /// With power-loss classes (split by tail, as at depth 2): a pair whose first fault, or
    /// whose second power loss, is a class is composed as a pair of states is, and its
    /// records (the states it stands for, the product of its classes', included) are those
    /// of its run from scratch.
    #[test]
    fn a_composed_pair_of_classes_has_the_records_of_its_run_from_scratch() {
        let mut sweep = crash_and_sink_error_sweep(2);
        sweep.faults = vec![FaultKind::ProcessCrash, FaultKind::PowerLoss];
        sweep.power_loss_points = crate::sweep::PowerLossPoints::Classes;
        let composed = check(&sweep);
        assert_eq!(
            composed,
            [
                "Append power-loss+power-loss 8490 of 17467",
                "Append power-loss+process-crash 3261 of 5529",
                "Append process-crash+power-loss 4944 of 8067",
                "Append process-crash+process-crash 1672 of 2394",
                "Idempotent power-loss+power-loss 9978 of 16171",
                "Idempotent power-loss+process-crash 3113 of 5529",
                "Idempotent process-crash+power-loss 5812 of 7729",
                "Idempotent process-crash+process-crash 1595 of 2394",
            ]
        );
    }
}
