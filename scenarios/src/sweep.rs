//! `keel sweep`: every single fault at every step where it applies (every crash state for a
//! power loss, within a bound), each run to the end, judged by the oracle and tallied per
//! sink and fault kind. The steps (sites) come from `crate::sites`.

use crate::baseline::{Baseline, CrashStates};
use crate::fork::{Forks, PointRun, SharedFutures, Sharing};
use crate::observation::{Observation, Recovery};
use crate::property::{failures, Expectation, Property};
use crate::reproduce::replay_plan_command;
use crate::runner::{RunSpec, View};
use crate::spec::ScenarioSpec;
use crate::table::{Table, TableFormat};
use crate::verdict::{judge, Reference, Verdict};
use keel_engine::SinkKind;
use keel_sim::disk::POWER_LOSS_ENUMERATION_BOUND;
use keel_sim::{FaultKind, FaultPlan, FingerprintBuilder, PlannedFault};
use num_bigint::BigUint;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::ops::Range;
use std::rc::Rc;
use std::sync::Arc;

mod class_runs;
use class_runs::ClassRuns;
mod points;
pub use points::{first_faults_len, points, power_loss_states, Sampled, SweepPoint, SweepPoints};

// Re-exported for `teach.rs`, which still imports them from here; new code imports from
// `crate::baseline` and `crate::sites`.
pub use crate::baseline::{baselines, baselines_sharing, baselines_with};
pub use crate::sites::sites;

/// The default of `--power-loss-states-max`, and its largest value: the sim's enumeration
/// bound (65,536), so that every state a sweep enumerates or draws without repetition is an
/// index.
pub const POWER_LOSS_STATES_MAX_DEFAULT: u64 = POWER_LOSS_ENUMERATION_BOUND;

/// Marks the points of a row where some crash states were drawn, not all run.
pub const SAMPLED_MARK: &str = "*";

/// `n` with a comma every three digits: 62208 -> "62,208".
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// The first failing point of a row, and how to replay it alone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FirstFailure {
    pub step: u64,
    pub crash_state: Option<u64>,
    /// The class of crash states (`--power-loss-points classes`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crash_state_class: Option<u64>,
    /// The properties it breaks (of those the row is judged by).
    pub broken: Vec<String>,
    pub outcome: String,
    pub reproduce: String,
}

/// One row of a sweep: one sink, one fault kind, every point.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SweepRow {
    pub sink: String,
    pub fault: String,
    /// The consumer view (transactional sink only): read_committed or read_uncommitted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub view: Option<String>,
    pub points: u64,
    /// The crash states the model admits, summed over the row's points (one a point for
    /// faults other than a power loss; a power loss step counts all of its states, run or
    /// not). None: more than a u64 counts, or unknown.
    pub states_total: Option<u64>,
    /// The states run: one a point.
    pub states_run: u64,
    /// Whether every state ran (no step was sampled).
    pub exhaustive: bool,
    /// The steps where only some states ran (None when exhaustive).
    pub sampled: Option<SampledSteps>,
    pub points_with_duplicates: u64,
    pub duplicates: u64,
    pub points_with_loss: u64,
    pub lost: u64,
    pub wrong: u64,
    pub corrupt: u64,
    pub points_with_stale_windows: u64,
    pub stale_windows: u64,
    pub rolled_back: u64,
    pub failed_recoveries: u64,
    /// Distinct outcomes among the points: same records in every view, same final windows,
    /// same verdict.
    pub distinct_outcomes: u64,
    /// Points that break what the row is judged by.
    pub failing_points: u64,
    pub points_with_dirty_reads: u64,
    pub dirty_reads: u64,
    pub visibility_delay_ms_max: u64,
    /// With `--power-loss-points classes`, on a power-loss row: the crash states its points
    /// stand for, exactly (the counts above count points: classes, and states drawn where a
    /// step's classes are not numbered).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crash_states: Option<ClassedStates>,
    pub first_failure: Option<FirstFailure>,
}

/// The crash states a row of class points stands for, as decimal numbers (they pass 2^64:
/// a sink file's pending lines have 3^pieces states).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ClassedStates {
    /// Every state the points stand for: every state of the row's steps where it is
    /// exhaustive.
    pub states: String,
    /// Of those, the states whose run holds duplicates, loses records, or breaks what the
    /// row is judged by.
    pub with_duplicates: String,
    pub with_loss: String,
    pub failing: String,
}

/// The sampled steps of a row: how many, how many crash states they admit, how many ran.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SampledSteps {
    pub steps: u64,
    /// The crash states those steps admit (None: more than a u64 counts, or unknown).
    pub states: Option<u64>,
    /// The points drawn there.
    pub drawn: u64,
}

/// What a sweep covers; serializable so shard files can carry it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepSpec {
    pub sinks: Vec<SinkKind>,
    pub faults: Vec<FaultKind>,
    /// 1: every single fault; 2: also a second fault at every step after the first.
    pub depth: u8,
    pub outage_ms: u64,
    /// What every point must hold (None: what each sink promises to each view).
    pub expect: Option<Expectation>,
    /// The most crash states a power loss at one step is run in; a step with more is sampled.
    pub power_loss_states_max: u64,
    /// What a power-loss point is: a crash state, or a class of them.
    #[serde(default)]
    pub power_loss_points: PowerLossPoints,
}

/// What a power-loss point of a sweep is (`--power-loss-points`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PowerLossPoints {
    /// One crash state a point: every state of a step, or a draw of them.
    #[default]
    States,
    /// One class of crash states a point (`keel_sim::disk::PowerLossClasses`: the states a
    /// reader of the sink file's whole lines cannot tell apart lead to the same run), run in
    /// its first state and counted for all of its states. Depth 1 only: the states of a class
    /// leave the disk alike for what the engine reads, not for a second fault.
    Classes,
}

impl SweepSpec {
    /// Whether its baselines count crash states: only power-loss points read them (a
    /// depth-2 point's second fault is counted on its first fault's run).
    pub fn crash_states(&self) -> CrashStates {
        if self.faults.contains(&FaultKind::PowerLoss) {
            match self.power_loss_points {
                PowerLossPoints::States => CrashStates::Counted,
                PowerLossPoints::Classes => CrashStates::Classes,
            }
        } else {
            CrashStates::NotCounted
        }
    }
}

/// A whole sweep's result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SweepReport {
    pub scenario: String,
    pub protocol: String,
    /// `incremental` with `--checkpoint-mode incremental`; absent with full checkpoints
    /// (the default), so every report of full checkpoints is what it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint_mode: Option<String>,
    /// The file-system profile of the crash model (`--fs-model`).
    pub fs_model: String,
    /// The seed sampled crash states were drawn with (`--seed`).
    pub seed: u64,
    /// The most crash states run at one step (`--power-loss-states-max`).
    pub power_loss_states_max: u64,
    /// What the points were judged by: an `--expect`, or "promised" (what each sink promises
    /// to each view).
    pub judged_by: String,
    /// Where the fault-free run departs from the independent model (fails the sweep).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_mismatch: Option<String>,
    pub rows: Vec<SweepRow>,
    /// A hash of every point's faults and outcome digest, in sweep order: what the default
    /// (forked, converged) and the `--naive` sweep both compute.
    pub fingerprint: String,
}

/// What one point's run came to: a line of a shard file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PointRecord {
    pub index: u64,
    pub sink: SinkKind,
    pub row: String,
    /// The consumer view judged (transactional sink only).
    pub view: Option<View>,
    /// The crash states a power-loss class point stands for (`--power-loss-points
    /// classes`; a drawn state stands for itself): the class's, exactly.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::decimal::optional"
    )]
    pub class_states: Option<BigUint>,
    pub dirty_reads: u64,
    pub visibility_delay_ms_max: u64,
    pub faults: Vec<PlannedFault>,
    /// The sampled steps this point opens (see [`SweepPoint::sampled`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sampled: Vec<Sampled>,
    pub duplicates: u64,
    pub lost: u64,
    pub wrong: u64,
    pub corrupt: u64,
    pub stale_windows: u64,
    pub rolled_back: u64,
    pub failed_recovery: bool,
    /// Every property this view of the run breaks (judging happens when tallying, against
    /// what is asked then: `keel merge --expect` may ask something else).
    pub broken: Vec<Property>,
    /// Where the fault-free run departs from the independent model.
    pub model_mismatch: Option<String>,
    pub outcome: String,
    /// A hash of what the consumers saw and the verdict: equal digests, equal outcomes.
    pub outcome_digest: String,
    /// The run's trace fingerprint, when the point ran to its end (not when it converged on
    /// the fault-free run: see `fork.rs`); the sweep's fingerprint does not hash it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
}

impl PointRecord {
    /// The one command that replays this point and judges its view: made only for a point
    /// a report names (a sweep has millions of points, and formatting a plan for each was a
    /// tenth of a depth-2 sweep's time).
    pub fn reproduce(&self, spec: &ScenarioSpec) -> String {
        let plan = FaultPlan::new(self.faults.iter().copied()).expect("distinct steps");
        // `keel run --fault ...` for one fault, else a plan file; the view is appended to
        // either (not written into the plan: the command sweeps have always printed).
        let command = replay_plan_command(spec, self.sink, None, &plan);
        match self.view {
            Some(view) => format!("{command} --view {}", view.name()),
            None => command,
        }
    }

    /// Why this point fails what is asked (None: what its sink promises to its view).
    pub fn failures(&self, asked: Option<&Expectation>) -> Vec<String> {
        failures(
            &self.broken,
            self.model_mismatch.is_some(),
            asked,
            self.sink,
            self.view,
        )
    }
}

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
        Ok(SweepSetup {
            baselines,
            forks,
            class_runs: ClassRuns::default(),
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

    /// [`run_chunk`] against this setup.
    pub fn run_chunk(&self, points: &SweepPoints, chunk: Range<u64>) -> Vec<Vec<PointRecord>> {
        run_chunk(
            &self.baselines,
            self.forks.as_ref(),
            points,
            chunk,
            &self.class_runs,
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
) -> Vec<Vec<PointRecord>> {
    assert!(chunk.start < chunk.end);
    assert_eq!(
        chunk.start / SHARING_CHUNK_POINTS,
        (chunk.end - 1) / SHARING_CHUNK_POINTS,
        "one chunk"
    );
    let mut tables: BTreeMap<SinkKind, SharedFutures> = BTreeMap::new();
    let mut judged = LastJudged::default();
    points
        .get(chunk, baselines, forks)
        .iter()
        .map(|(index, point)| {
            let shared = tables.entry(point.sink).or_default();
            let baseline = &baselines[&point.sink];
            if let Some(records) = class_runs.records_of(baseline, *index, point, shared) {
                return records;
            }
            let mut records = run_point(baselines, forks, *index, point, Some(shared), &mut judged);
            class_runs.remember(baseline, point, shared, &mut records);
            records
        })
        .collect()
}

/// `range` (indices of consecutive points) cut into chunks at the multiples of
/// [`SHARING_CHUNK_POINTS`]: the same cuts whatever the thread count.
pub fn sharing_chunks(range: Range<u64>) -> Vec<Range<u64>> {
    let mut chunks = Vec::new();
    let mut start = range.start;
    while start < range.end {
        let end = ((start / SHARING_CHUNK_POINTS + 1) * SHARING_CHUNK_POINTS).min(range.end);
        chunks.push(start..end);
        start = end;
    }
    chunks
}

/// The last observation a thread judged, with its verdicts and outcome digest: points whose
/// runs hand them the same observation (the same `Rc`: power-loss siblings that keep the
/// same sink file, `fork/sibling.rs`) are judged once. The `Rc` held keeps its address from
/// being reused by another observation.
#[derive(Debug, Default)]
pub struct LastJudged(Option<(Rc<Observation>, Vec<Verdict>, String)>);

impl LastJudged {
    /// The verdicts on `observation` and its outcome digest, judged against `reference`
    /// unless it is the observation judged last.
    fn judge(&mut self, reference: &Reference, observation: Rc<Observation>) -> (&[Verdict], &str) {
        let judged_last = self
            .0
            .as_ref()
            .is_some_and(|(last, _, _)| Rc::ptr_eq(last, &observation));
        if !judged_last {
            let verdicts = judge(reference, &observation);
            let digest = outcome_digest(reference, &observation, &verdicts);
            self.0 = Some((observation, verdicts, digest));
        }
        let (_, verdicts, digest) = self.0.as_ref().expect("judged");
        (verdicts, digest)
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
    let (verdicts, outcome_digest) = judged.judge(&baseline.reference, observation);
    verdicts
        .iter()
        .map(|verdict| PointRecord {
            index,
            sink: point.sink,
            row: point.row.clone(),
            view: verdict.view,
            class_states: class_states.clone(),
            dirty_reads: verdict.dirty_reads,
            visibility_delay_ms_max: verdict.visibility_delay_ms_max,
            faults: point.faults.clone(),
            sampled: point.sampled.clone(),
            duplicates: verdict.duplicates,
            lost: verdict.lost,
            wrong: verdict.wrong,
            corrupt: verdict.corrupt,
            stale_windows: verdict.stale_windows,
            rolled_back: verdict.rolled_back,
            failed_recovery: verdict.recovery != Recovery::Ok,
            broken: verdict.broken(),
            model_mismatch: verdict.model_mismatch.as_ref().map(|m| m.to_string()),
            outcome: verdict.summary(),
            outcome_digest: outcome_digest.to_string(),
            fingerprint: fingerprint.map(|f| f.to_string()),
        })
        .collect()
}

/// What every consumer saw, and the verdicts: the same digest means the same outcome. The
/// FNV-1a 64 of a text: for each view, a line `records=<count> <hash>` (the records'
/// [`SequenceHash`](crate::observation::records::SequenceHash), 16 hex digits: it composes,
/// so a forked point's view is hashed from what differs from the fault-free run) and a line
/// `corrupt=<lines>`; `final_windows=<hash>`, the FNV-1a 64 of the final windows' text
/// (hashed once per map that points share: the text grows with the stream); the events
/// dropped as too late when there are any; each verdict's summary. Hashed as it is written,
/// never kept whole.
fn outcome_digest(
    reference: &Reference,
    observation: &Observation,
    verdicts: &[Verdict],
) -> String {
    // One text, written with `write!` straight into the hash, never kept: the same bytes in
    // the same order as before, so the same digest.
    let mut text = FingerprintBuilder::default();
    for view in &observation.views {
        let records = view.records.hash();
        let (len, hash) = (records.len, records.hash);
        let corrupt = view.corrupt_lines;
        write!(text, "records={len} {hash:016x}\ncorrupt={corrupt}\n").expect("to a hash");
    }
    // The windows' text as its hash, worked out once per shared map of windows.
    let windows = reference.final_windows_hash(&observation.final_windows);
    write!(text, "final_windows={windows:016x}").expect("to a hash");
    // Part of the final state (`recovers` compares it); written only when some event was
    // dropped, so digests of runs without a lateness bound are what they were.
    if observation.dropped_late > 0 {
        write!(text, "\ndropped_late={}", observation.dropped_late).expect("to a hash");
    }
    for verdict in verdicts {
        text.write_str("\n").expect("to a hash");
        verdict.write_summary(&mut text).expect("to a hash");
    }
    text.finish().to_string()
}

impl SweepReport {
    /// The rows as a table. In CSV, the points column is a plain number and three columns say
    /// how many crash states there were and whether all ran; in text and Markdown, the points
    /// of a sampled row carry [`SAMPLED_MARK`] and a line under the table explains it.
    pub fn table(&self, format: TableFormat) -> Table {
        let with_views = self.rows.iter().any(|r| r.view.is_some());
        let csv = format == TableFormat::Csv;
        let mut headers = vec!["sink", "fault"];
        if with_views {
            headers.push("view");
        }
        headers.push("points");
        let classed = self.rows.iter().any(|r| r.crash_states.is_some());
        if csv {
            headers.extend(["states_total", "states_run", "exhaustive"]);
            if classed {
                headers.extend([
                    "crash_states",
                    "crash_states_with_duplicates",
                    "crash_states_with_loss",
                    "crash_states_failing",
                ]);
            }
        }
        headers.extend([
            "dup_points",
            "duplicates",
            "loss_points",
            "lost",
            "wrong",
            "corrupt",
            "stale_windows",
            "rolled_back",
            "failed_recoveries",
            "outcomes",
            "failing",
        ]);
        if with_views {
            headers.extend(["dirty_reads", "vis_delay_ms_max"]);
        }
        headers.push("first_failure");
        let mut table = Table::new(&headers);
        for row in &self.rows {
            let first = row.first_failure.as_ref().map_or("-".to_string(), |f| {
                let state = match (f.crash_state, f.crash_state_class) {
                    (Some(state), _) => format!(" state {state}"),
                    (None, Some(class)) => format!(" class {class}"),
                    (None, None) => String::new(),
                };
                format!("step {}{state}: {} broken", f.step, f.broken.join(","))
            });
            let mut cells = vec![row.sink.clone(), row.fault.clone()];
            if with_views {
                cells.push(row.view.clone().unwrap_or_else(|| "-".to_string()));
            }
            if csv {
                cells.extend([
                    row.points.to_string(),
                    row.states_total
                        .map_or_else(String::new, |total| total.to_string()),
                    row.states_run.to_string(),
                    row.exhaustive.to_string(),
                ]);
                if classed {
                    let states = row.crash_states.clone().unwrap_or_default();
                    cells.extend([
                        states.states,
                        states.with_duplicates,
                        states.with_loss,
                        states.failing,
                    ]);
                }
            } else if row.exhaustive {
                cells.push(row.points.to_string());
            } else {
                let mark = match format {
                    // A bare `*` could start emphasis in Markdown.
                    TableFormat::Markdown => "\\*",
                    _ => SAMPLED_MARK,
                };
                cells.push(format!("{}{mark}", row.points));
            }
            cells.extend([
                row.points_with_duplicates.to_string(),
                row.duplicates.to_string(),
                row.points_with_loss.to_string(),
                row.lost.to_string(),
                row.wrong.to_string(),
                row.corrupt.to_string(),
                row.stale_windows.to_string(),
                row.rolled_back.to_string(),
                row.failed_recoveries.to_string(),
                row.distinct_outcomes.to_string(),
                row.failing_points.to_string(),
            ]);
            if with_views {
                cells.extend([
                    row.dirty_reads.to_string(),
                    row.visibility_delay_ms_max.to_string(),
                ]);
            }
            cells.push(first);
            table.push(cells);
        }
        table
    }

    /// The table, then one reproduce command per failing row, then the fingerprint.
    pub fn render(&self, format: TableFormat) -> String {
        let mut out = String::new();
        if format != TableFormat::Csv {
            out.push_str(&format!(
                "sweep scenario={} protocol={}{} fs_model={} judged_by={}\n\n",
                self.scenario,
                self.protocol,
                mode_field(&self.checkpoint_mode),
                self.fs_model,
                self.judged_by
            ));
            if let Some(mismatch) = &self.model_mismatch {
                out.push_str(&format!(
                    "MODEL MISMATCH: the engine departs from the reference model at {mismatch}\n\n"
                ));
            }
        }
        out.push_str(&self.table(format).render(format));
        if format != TableFormat::Csv {
            let lines = self.sampled_lines();
            if !lines.is_empty() {
                // In Markdown, each its own paragraph (and none a table row).
                let (mark, end) = match format {
                    TableFormat::Markdown => ("\\*", "\n\n"),
                    _ => (SAMPLED_MARK, "\n"),
                };
                out.push('\n');
                for line in lines {
                    out.push_str(&format!("{mark} {line}{end}"));
                }
                if end == "\n" {
                    out.push('\n');
                }
            } else {
                out.push('\n');
            }
            let lines = self.classed_lines();
            for line in &lines {
                out.push_str(line);
                out.push_str(if format == TableFormat::Markdown {
                    "\n\n"
                } else {
                    "\n"
                });
            }
            if !lines.is_empty() && format != TableFormat::Markdown {
                out.push('\n');
            }
            for row in &self.rows {
                if let Some(first) = &row.first_failure {
                    let view = row
                        .view
                        .as_ref()
                        .map_or(String::new(), |v| format!(" / {v}"));
                    out.push_str(&format!(
                        "first failure {} / {}{view}: {} broken ({})\n  reproduce: {}\n",
                        row.sink,
                        row.fault,
                        first.broken.join(","),
                        first.outcome,
                        first.reproduce
                    ));
                }
            }
            out.push_str(&format!("fingerprint={}\n", self.fingerprint));
        }
        out
    }

    /// One line per row of power-loss classes (`--power-loss-points classes`): the crash
    /// states its points stand for, exactly.
    pub fn classed_lines(&self) -> Vec<String> {
        self.rows
            .iter()
            .filter_map(|row| {
                let states = row.crash_states.as_ref()?;
                let view = row
                    .view
                    .as_ref()
                    .map_or(String::new(), |v| format!(" / {v}"));
                Some(format!(
                    "classes {} / {}{view}: {} points stand for {} crash states: {} with duplicates, {} with loss, {} failing",
                    row.sink,
                    row.fault,
                    thousands(row.points),
                    states.states,
                    states.with_duplicates,
                    states.with_loss,
                    states.failing,
                ))
            })
            .collect()
    }

    /// One line per sampled row: how many crash states were drawn, of how many, at how many
    /// steps, and with which seed.
    pub fn sampled_lines(&self) -> Vec<String> {
        self.rows
            .iter()
            .filter_map(|row| {
                let sampled = row.sampled?;
                let view = row
                    .view
                    .as_ref()
                    .map_or(String::new(), |v| format!(" / {v}"));
                let of = match sampled.states {
                    Some(states) => format!("of {} ", thousands(states)),
                    None => "of an uncounted number of ".to_string(),
                };
                let steps = if sampled.steps == 1 { "step" } else { "steps" };
                Some(format!(
                    "sampled {} / {}{view}: {} {of}crash states at {} {steps} were drawn with seed {} (--power-loss-states-max {})",
                    row.sink,
                    row.fault,
                    thousands(sampled.drawn),
                    thousands(sampled.steps),
                    self.seed,
                    self.power_loss_states_max,
                ))
            })
            .collect()
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a sweep report always serializes") + "\n"
    }
}

/// ` checkpoint_mode=<mode>` for a header line, or nothing with full checkpoints.
pub(crate) fn mode_field(mode: &Option<String>) -> String {
    mode.as_ref()
        .map_or(String::new(), |m| format!(" checkpoint_mode={m}"))
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
            let sweep = SweepSpec {
                sinks: vec![SinkKind::Append, SinkKind::Idempotent],
                faults: vec![FaultKind::ProcessCrash, FaultKind::SinkError],
                depth,
                outage_ms: 2_000,
                expect: None,
                power_loss_states_max: POWER_LOSS_STATES_MAX_DEFAULT,
                power_loss_points: PowerLossPoints::States,
            };
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
                assert_eq!(records.len() as u64, chunk.end - chunk.start);
                assert_eq!(replica.run_chunk(&points, chunk), records);
            }
        }
    }
}
