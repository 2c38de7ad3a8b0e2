//! Running a sweep's points: the setup they run against (each sink's baseline and forks),
//! the chunks a thread runs in order with one table of shared futures, and each point run,
//! judged and digested into its records.

use super::class_runs::ClassRuns;
use super::converged_pairs::{ConvergedPairs, LastFirst};
use super::{PointRecord, SweepPoint, SweepPoints, SweepSpec};
use crate::baseline::{baselines_sharing, Baseline};
use crate::fork::{Forks, PointRun, SharedFutures, Sharing};
use crate::observation::{Observation, Recovery};
use crate::property::Property;
use crate::runner::RunSpec;
use crate::spec::ScenarioSpec;
use crate::verdict::{judge, Reference, Verdict};
use keel_engine::SinkKind;
use keel_sim::{hex16, FaultPlan, FingerprintBuilder};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::ops::Range;
use std::rc::Rc;
use std::sync::Arc;

/// The snapshots of each sink's fault-free run that the sweep's points fork from; None with
/// `--naive` (every point from scratch, to its end: the reference the forks are checked
/// against).
pub fn sweep_forks(
    baselines: &BTreeMap<SinkKind, Baseline>,
    naive: bool,
) -> Option<BTreeMap<SinkKind, Forks>> {
    (!naive).then(|| {
        let mut forks: BTreeMap<SinkKind, Forks> = BTreeMap::new();
        for (&sink, baseline) in baselines {
            let sharing = Sharing {
                earlier: forks.values().last(),
                records: Some(&baseline.reference.records),
            };
            let made = Forks::sharing(&baseline.spec, sharing);
            forks.insert(sink, made);
        }
        forks
    })
}

/// What a sweep's points run against: each sink's fault-free baseline and, unless
/// `--naive`, the snapshots of its run that points fork from.
pub struct SweepSetup {
    pub baselines: BTreeMap<SinkKind, Baseline>,
    pub forks: Option<BTreeMap<SinkKind, Forks>>,
    /// The power-loss class points that ran, by the disk they booted into: shared by every
    /// chunk and thread that runs against this setup.
    class_runs: ClassRuns,
    /// The single-fault runs depth-2 points after a converged first fault are composed of:
    /// shared the same way.
    converged_pairs: ConvergedPairs,
}

/// When a sweep's threads each run against a setup of their own ([`SweepSetup::replica`])
/// rather than share one: on streams of at most this many events, and only where the sweep
/// has at least [`REPLICA_POINTS_PER_EVENT_MIN`] points an event. Two threads forking from
/// the same snapshots clone and drop the same reference counts, and ch04's depth-2 sweep (30
/// events, 558,217 points) spent about a tenth of its CPU time on that: 4.4 s of CPU on two
/// threads, 3.9 s on one. A copy costs the setup's time and memory again, which is what a depth-1
/// sweep of 10,000 events (24,214 points) costs in all: it ran 0.16 s, 53 MB shared, and
/// 0.20 s, 122 MB with copies.
pub const REPLICA_EVENTS_MAX: usize = 20_000;

/// See [`REPLICA_EVENTS_MAX`].
pub const REPLICA_POINTS_PER_EVENT_MIN: u64 = 100;

impl SweepSetup {
    /// The baselines of `sweep.sinks` on `events` (one copy for every sink's runs: 16 MB a
    /// million events), and their forks unless `naive`.
    pub fn new(
        spec: &ScenarioSpec,
        events: Arc<[keel_engine::Event]>,
        sweep: &SweepSpec,
        naive: bool,
    ) -> Result<SweepSetup, crate::error::KeelError> {
        let baselines = baselines_sharing(spec, events, &sweep.sinks, sweep.crash_states())?;
        let forks = sweep_forks(&baselines, naive);
        let converged_pairs = ConvergedPairs::new(&baselines, sweep.depth, &sweep.faults);
        Ok(SweepSetup {
            baselines,
            forks,
            class_runs: ClassRuns::default(),
            converged_pairs,
        })
    }

    /// A copy of this setup made the same way, for another thread of a sweep of `points`
    /// points: none of its reference counts is shared with this one (each copy even has its
    /// own events). Every run is deterministic, so every record is the same against either.
    /// None where a copy does not pay ([`REPLICA_EVENTS_MAX`]): that thread shares this
    /// setup.
    pub fn replica(
        &self,
        spec: &ScenarioSpec,
        events: &Arc<[keel_engine::Event]>,
        sweep: &SweepSpec,
        points: u64,
    ) -> Option<SweepSetup> {
        let events_len = events.len().max(1) as u64;
        if events.len() > REPLICA_EVENTS_MAX || points / events_len < REPLICA_POINTS_PER_EVENT_MIN {
            return None;
        }
        let own_events: Arc<[keel_engine::Event]> = events.to_vec().into();
        let replica = SweepSetup::new(spec, own_events, sweep, self.forks.is_none())
            .expect("the same setup was made once already");
        for (sink, baseline) in &self.baselines {
            let copy = &replica.baselines[sink];
            assert_eq!(copy.sites.len(), baseline.sites.len());
            assert_eq!(copy.reference.records, baseline.reference.records);
        }
        Some(replica)
    }

    /// The power-loss class points that ran, by the disk they booted into.
    #[cfg(test)]
    pub(super) fn class_runs(&self) -> &ClassRuns {
        &self.class_runs
    }

    /// [`run_chunk`] against this setup.
    pub fn run_chunk(&self, points: &SweepPoints, chunk: Range<u64>) -> Vec<PointRecord> {
        run_chunk(
            &self.baselines,
            self.forks.as_ref(),
            points,
            chunk,
            &self.class_runs,
            &self.converged_pairs,
        )
    }
}

/// How many consecutive points (by index in the whole sweep) one thread runs in order with
/// one table of shared futures (`fork/shared.rs`): chunks are the same whatever the thread
/// count, so every record is too. Sharing stops at a chunk's end; a chunk is never cut. Long
/// enough that a class's first point (which recovers and replays) is rare, short enough
/// that a sweep of a few thousand points still has a chunk for each thread.
pub const SHARING_CHUNK_POINTS: u64 = 1024;

/// How many chunks' records may wait, per thread, to be tallied in order behind a chunk still
/// running (`parallel::par_fold_until_with`): 32 chunks, 32,768 points. A chunk's records
/// wait whole, so the window made for single runs (1,024 items a thread) let a sweep hold a
/// million points' records. Measured on the million-event sweep (2 threads): 605-619 MB at
/// its peak with 1,024 chunks a thread, 601 MB with 64, 557 MB with 32, 551 MB with 16; the
/// smaller the window, the more often a thread waits on a slow chunk: 28.0, 28.0, 28.8 and
/// 29.7 s.
pub const REORDER_WINDOW_CHUNKS_PER_JOB: usize = 32;

/// Draws the points at `chunk` (within one chunk of [`SHARING_CHUNK_POINTS`]) and runs them
/// one after the other, each as [`run_point`] does, later ones sharing the futures of
/// earlier ones where they reach the same state.
pub fn run_chunk(
    baselines: &BTreeMap<SinkKind, Baseline>,
    forks: Option<&BTreeMap<SinkKind, Forks>>,
    points: &SweepPoints,
    chunk: Range<u64>,
    class_runs: &ClassRuns,
    converged_pairs: &ConvergedPairs,
) -> Vec<PointRecord> {
    assert!(chunk.start < chunk.end);
    assert_eq!(
        chunk.start / SHARING_CHUNK_POINTS,
        (chunk.end - 1) / SHARING_CHUNK_POINTS,
        "one chunk"
    );
    let mut tables: BTreeMap<SinkKind, SharedFutures> = BTreeMap::new();
    let mut judged = LastJudged::default();
    let mut last_first = LastFirst::default();
    let drawn = points.get(chunk, baselines, forks);
    // One list for the chunk, each point's records in turn: a composed pair's are written
    // straight into it (a list a point was an allocation a pair).
    let mut out = Vec::with_capacity(drawn.len());
    for indexed in &drawn {
        let (index, point) = indexed;
        let shared = tables.entry(point.sink).or_default();
        let baseline = &baselines[&point.sink];
        if let Some(records) = class_runs.records_of(baseline, *index, point, shared) {
            out.extend(records);
            continue;
        }
        let composed = forks.and_then(|forks| {
            converged_pairs.records_of(
                baseline,
                &forks[&point.sink],
                indexed,
                &mut judged,
                &mut last_first,
                &mut out,
            )
        });
        if composed.is_some() {
            continue;
        }
        let mut records = run_point(baselines, forks, *index, point, Some(shared), &mut judged);
        class_runs.remember(baseline, point, shared, &mut records);
        out.extend(records);
    }
    out
}

/// `range` (indices of consecutive points) cut into chunks at the multiples of
/// [`SHARING_CHUNK_POINTS`]: the same cuts whatever the thread count.
pub fn sharing_chunks(range: Range<u64>) -> Vec<Range<u64>> {
    crate::parallel::chunks_at_multiples(range, SHARING_CHUNK_POINTS)
}

/// The last observation a thread judged, with its verdicts and outcome digest: points whose
/// runs hand them the same observation (the same `Rc`: power-loss siblings that keep the
/// same sink file, `fork/sibling.rs`) are judged once. The `Rc` held keeps its address from
/// being reused by another observation.
#[derive(Debug, Default)]
pub struct LastJudged(Option<Judged>);

/// An observation judged: its verdicts, their summaries (each written once, for the digest
/// and the record alike) and its outcome digest.
#[derive(Debug)]
struct Judged {
    observation: Rc<Observation>,
    verdicts: Vec<Verdict>,
    summaries: Vec<Arc<str>>,
    /// Each verdict's broken properties, for its records to share.
    broken: Vec<Arc<[Property]>>,
    digest: Arc<str>,
}

impl LastJudged {
    /// The verdicts on `observation` and its outcome digest, judged against `reference`
    /// unless it is the observation judged last.
    fn judge(&mut self, reference: &Reference, observation: Rc<Observation>) -> &Judged {
        let judged_last = self
            .0
            .as_ref()
            .is_some_and(|last| Rc::ptr_eq(&last.observation, &observation));
        if !judged_last {
            let verdicts = judge(reference, &observation);
            let summaries: Vec<Arc<str>> =
                verdicts.iter().map(|v| Arc::from(v.summary())).collect();
            let digest = outcome_digest(reference, &observation, &summaries).into();
            let broken = verdicts.iter().map(|v| v.broken().into()).collect();
            self.0 = Some(Judged {
                observation,
                verdicts,
                summaries,
                broken,
                digest,
            });
        }
        self.0.as_ref().expect("judged")
    }
}

/// Runs one point (forked from `forks`, or from scratch without) and judges it: once, or
/// once per consumer view for the transactional sink. With `shared`, a forked point may
/// stop where an earlier point's run stood for it, and is remembered for later ones.
/// `judged`: the last observation judged on this thread.
pub fn run_point(
    baselines: &BTreeMap<SinkKind, Baseline>,
    forks: Option<&BTreeMap<SinkKind, Forks>>,
    index: u64,
    point: &SweepPoint,
    shared: Option<&SharedFutures>,
    judged: &mut LastJudged,
) -> Vec<PointRecord> {
    let baseline = &baselines[&point.sink];
    let plan = FaultPlan::new(point.faults.iter().copied()).expect("distinct steps");
    let PointRun {
        observation,
        fingerprint,
        class_states,
        ..
    } = match forks {
        Some(forks) => forks[&point.sink].run_point(&plan, true, shared),
        None => PointRun::naive(&RunSpec {
            plan: plan.clone(),
            ..baseline.spec.clone()
        }),
    };
    point_records(
        baseline,
        index,
        point,
        observation,
        fingerprint,
        class_states,
        judged,
    )
}

/// The records of `point` (number `index`), whose run observed `observation`: one per view,
/// judged against `baseline`'s reference.
pub(super) fn point_records(
    baseline: &Baseline,
    index: u64,
    point: &SweepPoint,
    observation: Rc<Observation>,
    fingerprint: Option<keel_sim::Fingerprint>,
    class_states: Option<num_bigint::BigUint>,
    judged: &mut LastJudged,
) -> Vec<PointRecord> {
    let mut out = Vec::with_capacity(1);
    let run = (observation, fingerprint, class_states);
    push_point_records(baseline, index, point, run, judged, &mut out);
    out
}

/// [`point_records`], pushed onto `out`.
pub(super) fn push_point_records(
    baseline: &Baseline,
    index: u64,
    point: &SweepPoint,
    (observation, fingerprint, class_states): (
        Rc<Observation>,
        Option<keel_sim::Fingerprint>,
        Option<num_bigint::BigUint>,
    ),
    judged: &mut LastJudged,
    out: &mut Vec<PointRecord>,
) {
    let Judged {
        verdicts,
        summaries,
        broken,
        digest,
        ..
    } = judged.judge(&baseline.reference, observation);
    let records = verdicts
        .iter()
        .zip(summaries)
        .zip(broken)
        .map(|((verdict, summary), broken)| PointRecord {
            index,
            sink: point.sink,
            row: point.row.clone(),
            view: verdict.view,
            class_states: class_states.clone(),
            dirty_reads: verdict.dirty_reads,
            visibility_delay_ms_max: verdict.visibility_delay_ms_max,
            faults: Arc::clone(&point.faults),
            sampled: point.sampled.clone(),
            duplicates: verdict.duplicates,
            lost: verdict.lost,
            wrong: verdict.wrong,
            corrupt: verdict.corrupt,
            stale_windows: verdict.stale_windows,
            rolled_back: verdict.rolled_back,
            failed_recovery: verdict.recovery != Recovery::Ok,
            broken: Arc::clone(broken),
            model_mismatch: verdict.model_mismatch.as_ref().map(|m| m.to_string()),
            outcome: Arc::clone(summary),
            outcome_digest: Arc::clone(digest),
            fingerprint: fingerprint.map(|f| f.to_string()),
            span: None,
        });
    out.extend(records);
}

/// What every consumer saw, and the verdicts: the same digest means the same outcome. The
/// FNV-1a 64 of a text: for each view, a line `records=<count> <hash>` (the records'
/// [`SequenceHash`](crate::observation::records::SequenceHash), 16 hex digits: it composes,
/// so a forked point's view is hashed from what differs from the fault-free run) and a line
/// `corrupt=<lines>`; `final_windows=<hash>`, the FNV-1a 64 of the final windows' text
/// (hashed once per map that points share: the text grows with the stream); the events
/// dropped as too late when there are any; each verdict's summary (written once, for the
/// digest and the point's record alike). Hashed as it is written,
/// never kept whole.
fn outcome_digest(
    reference: &Reference,
    observation: &Observation,
    summaries: &[Arc<str>],
) -> String {
    // One text, written with `write!` straight into the hash, never kept: the same bytes in
    // the same order as before, so the same digest.
    let mut text = FingerprintBuilder::default();
    for view in &observation.views {
        let records = view.records.hash();
        let (len, hash) = (records.len, records.hash);
        let corrupt = view.corrupt_lines;
        write!(text, "records={len} ").expect("to a hash");
        text.write_str(hex16(hash).as_str()).expect("to a hash");
        write!(text, "\ncorrupt={corrupt}\n").expect("to a hash");
    }
    // The windows' text as its hash, worked out once per shared map of windows.
    let windows = reference.final_windows_hash(&observation.final_windows);
    text.write_str("final_windows=").expect("to a hash");
    text.write_str(hex16(windows).as_str()).expect("to a hash");
    // Part of the final state (`recovers` compares it); written only when some event was
    // dropped, so digests of runs without a lateness bound are what they were.
    if observation.dropped_late > 0 {
        write!(text, "\ndropped_late={}", observation.dropped_late).expect("to a hash");
    }
    for summary in summaries {
        text.write_str("\n").expect("to a hash");
        text.write_str(summary).expect("to a hash");
    }
    text.finish().to_string()
}

/// For tests: a sweep of process crashes and sink errors on the append and the idempotent
/// sink at `depth`.
#[cfg(test)]
pub(crate) fn crash_and_sink_error_sweep(depth: u8) -> SweepSpec {
    use super::{PowerLossPoints, POWER_LOSS_STATES_MAX_DEFAULT};
    SweepSpec {
        sinks: vec![SinkKind::Append, SinkKind::Idempotent],
        faults: vec![
            keel_sim::FaultKind::ProcessCrash,
            keel_sim::FaultKind::SinkError,
        ],
        depth,
        outage_ms: 2_000,
        expect: None,
        power_loss_states_max: POWER_LOSS_STATES_MAX_DEFAULT,
        power_loss_points: PowerLossPoints::States,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::Scenario;

    /// ch04 at depth 2 has hundreds of points an event: each thread gets a copy of the setup,
    /// and every record run against the copy is the one run against the original. At depth
    /// 1 it has a few points an event: no copy.
    #[test]
    fn a_replica_runs_every_point_as_the_setup_does() {
        let spec = ScenarioSpec::ch04(0);
        let events: Arc<[keel_engine::Event]> = Scenario::by_name("ch04").unwrap().events().into();
        for (depth, copied) in [(1, false), (2, true)] {
            let sweep = crash_and_sink_error_sweep(depth);
            let setup = SweepSetup::new(&spec, Arc::clone(&events), &sweep, false).unwrap();
            let points = SweepPoints::new(&spec, &sweep, &setup.baselines, setup.forks.as_ref());
            let replica = setup.replica(&spec, &events, &sweep, points.len());
            assert_eq!(
                replica.is_some(),
                copied,
                "depth {depth}: {} points",
                points.len()
            );
            let Some(replica) = replica else { continue };
            assert!(points.len() > 3 * SHARING_CHUNK_POINTS);
            for chunk in sharing_chunks(0..points.len()).into_iter().take(3) {
                let records = setup.run_chunk(&points, chunk.clone());
                let points_recorded: u64 = records.iter().map(PointRecord::points).sum();
                assert_eq!(points_recorded, chunk.end - chunk.start);
                assert_eq!(replica.run_chunk(&points, chunk), records);
            }
        }
    }
}
