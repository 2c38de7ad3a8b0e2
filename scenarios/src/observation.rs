//! What the consumers of one run observed: the sink in order through each consumer view,
//! dirty reads, visibility delays, the final windows and how recovery went. One value, built
//! once from a run's result; the oracle (`verdict.rs`) judges nothing else.

use crate::model::ModelMismatch;
use crate::runner::{Incarnation, Outcome, RunResult, View};
use keel_engine::{EngineConfig, KeyScheme, OperatorState, Record, SinkKind, SINK_WRITE_OP};
use keel_sim::txlog::{EntryKind, TxnStatus};
use std::collections::BTreeMap;
use std::sync::Arc;

mod known;
mod stray;
use stray::stray_files;
pub mod records;

pub(crate) use known::common_prefix_len;
pub use known::{KnownSink, Piece};
pub use records::Records;

/// What one consumer view of the sink saw, in sink order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ViewObservation {
    /// None for a file sink (one view: the file); read_committed or read_uncommitted for the
    /// transactional sink.
    pub view: Option<View>,
    pub records: Records,
    /// Lines that are not a whole record (a torn append nothing repaired).
    pub corrupt_lines: u64,
    /// Records this view showed that never committed (read_uncommitted only).
    pub dirty_reads: u64,
    /// The longest wait, in simulated ms, from a record's send to the moment this view could
    /// see it (0 for a file sink and for read_uncommitted: they see a record at once).
    pub visibility_delay_ms_max: u64,
}

/// Where a consumer finds a file sink: the names the user guide documents (`sink-append.jsonl`,
/// `sink-idempotent.jsonl` in the engine's directory). The oracle reads the sink where a user
/// would, not where the engine says it wrote it, so an engine that writes its records under
/// another name delivers nothing (and leaves a stray file).
pub fn documented_sink_file(sink: SinkKind) -> &'static str {
    match sink {
        SinkKind::Append => "sink-append.jsonl",
        SinkKind::Idempotent => "sink-idempotent.jsonl",
        // The transactional sink is the simulated log, read through its views; no file. A
        // name no engine writes keeps every file of such a run judged by `bounded-disk`.
        SinkKind::Transactional => "sink-transactional.jsonl",
    }
}

/// The files of `files` (a run's directory at its end, every name) that the `bounded-disk`
/// property counts against a run on `sink`: all but its sink file and its newest checkpoint.
pub fn stray_files_of(sink: SinkKind, files: &[String]) -> Vec<String> {
    stray_files(files, documented_sink_file(sink))
}

/// How recovery went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Recovery {
    /// No restart was needed, or every restart recovered.
    Ok,
    /// Recovery gave up (e.g. it trusted a torn checkpoint).
    Failed,
    /// The engine kept restarting.
    Looped,
}

impl std::fmt::Display for Recovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Recovery::Ok => "ok",
            Recovery::Failed => "failed",
            Recovery::Looped => "looped",
        })
    }
}

/// Final windows (each window's end and sum) as the points that end alike share them.
pub type SharedWindows = Arc<BTreeMap<i64, i128>>;

/// What the oracle reads of a run's final operator state: each window's sum, and the events
/// dropped as too late. Computed once per distinct ending: a sweep's points that end as the
/// fault-free run (or an earlier point's run) did share its windows instead of summing every
/// window again, and keep them instead of the whole state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinalState {
    pub windows: SharedWindows,
    pub dropped_late: u64,
}

impl FinalState {
    pub fn of(state: &OperatorState) -> FinalState {
        FinalState {
            windows: Arc::new(state.sums()),
            dropped_late: state.dropped_late,
        }
    }

    /// [`FinalState::of`], `known`'s (a state and its final state) where `state` has the
    /// same windows and drops: windows compare by their digest, not window by window, so a
    /// point whose run completed with the fault-free run's windows costs no sum of each.
    pub fn of_known(state: &OperatorState, known: (&OperatorState, &FinalState)) -> FinalState {
        let (known_state, known_final) = known;
        if state.windows == known_state.windows && state.dropped_late == known_state.dropped_late {
            debug_assert_eq!(*known_final, FinalState::of(state));
            return known_final.clone();
        }
        FinalState::of(state)
    }
}

/// Everything the oracle judges about one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation {
    pub sink: SinkKind,
    /// How the run keyed its records (a processing-time key names no event).
    pub key: KeyScheme,
    /// One entry per consumer view of the sink, in [`views_of`] order.
    pub views: Vec<ViewObservation>,
    pub recovery: Recovery,
    /// The final operator state's windows (empty unless the run completed); shared by the
    /// points whose runs end alike (see [`FinalState`]).
    pub final_windows: SharedWindows,
    /// Events the final operator state dropped as later than the allowed lateness (0 unless
    /// the run completed).
    pub dropped_late: u64,
    /// Restarts that restored an older checkpoint than the newest one committed.
    pub rolled_back: u64,
    pub restarts: u64,
    /// Files the run left in its directory besides the sink file and the newest checkpoint
    /// (an older checkpoint, a temporary file), by name: what `bounded-disk` counts.
    pub stray_files: Vec<String>,
    /// File sinks, simulated runs: the sink writes the simulated sink served (the world's
    /// count) beside the ones the engine's incarnations (zombies included) report as written
    /// or skipped. None where nothing counts independently (a real run, the log).
    pub sink_writes: Option<SinkWriteCounts>,
    /// File sinks, simulated runs whose only fault was one sink outage: its length and
    /// whether the engine restarted. None otherwise.
    pub sink_outage: Option<SinkOutage>,
    /// File sinks, simulated runs whose only fault was one kill -9 at a step: the steps
    /// of the recovery after it. None otherwise.
    pub restart: Option<RestartSteps>,
}

/// The documented retry policy of a file sink's writes (the user guide, "The fault model"): 12
/// attempts, the first retry 100 ms after a failure, each wait doubling up to 3,200 ms.
/// Written here from the documentation, apart from the engine's constants.
pub const SINK_RETRY_WAITS_MS: [u64; 11] = [
    100, 200, 400, 800, 1_600, 3_200, 3_200, 3_200, 3_200, 3_200, 3_200,
];

/// The waits before the last attempt add up to this: an outage no longer than it is ridden
/// out in place.
pub const SINK_OUTAGE_RIDDEN_OUT_MS: u64 = {
    let (mut total_ms, mut i) = (0, 0);
    while i < SINK_RETRY_WAITS_MS.len() {
        total_ms += SINK_RETRY_WAITS_MS[i];
        i += 1;
    }
    total_ms
};

/// When the documented retries reach the sink again after an outage of `duration_ms` that
/// began at a write: the first retry at or past its end, in ms after the failed attempt
/// (None: the outage outlasts them all).
pub fn sink_resumed_after_ms(duration_ms: u64) -> Option<u64> {
    SINK_RETRY_WAITS_MS
        .iter()
        .scan(0, |waited_ms, wait_ms| {
            *waited_ms += wait_ms;
            Some(*waited_ms)
        })
        .find(|&waited_ms| waited_ms >= duration_ms)
}

/// One sink outage, the run's only fault, and what the engine did about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SinkOutage {
    pub duration_ms: u64,
    pub restarts: u64,
    /// From the refused write to the next request the sink served (the world's clock).
    pub resumed_after_ms: Option<u64>,
}

impl SinkOutage {
    /// The outage of a run whose only fault was one sink outage (as `world` ran it), with the
    /// run's restarts.
    pub fn of(world: &keel_sim::World, restarts: u64) -> Option<SinkOutage> {
        // Most runs of a sweep had no outage: answer them before building the plan that ran.
        let (began_ms, served_ms) = world.first_outage_ms()?;
        let plan = world.plan_that_ran();
        if plan.kill_time_ms().is_some() {
            return None;
        }
        let faults = plan.faults();
        let [keel_sim::PlannedFault {
            fault: keel_sim::Fault::SinkUnavailable { duration_ms },
            ..
        }] = faults.as_slice()
        else {
            return None;
        };
        Some(SinkOutage {
            duration_ms: *duration_ms,
            restarts,
            resumed_after_ms: served_ms.map(|served_ms| served_ms - began_ms),
        })
    }

    /// Where the engine departs from its documented retries over an outage they ride out: it
    /// restarted, or reached the sink again at another time than the schedule's (fails every
    /// command, as `matches-model`).
    pub fn mismatch(&self) -> Option<ModelMismatch> {
        let resumed_after_ms = sink_resumed_after_ms(self.duration_ms)?;
        let want = (0, Some(resumed_after_ms));
        let have = (self.restarts, self.resumed_after_ms);
        let show = |(restarts, after_ms): (u64, Option<u64>)| {
            let after = after_ms.map_or("never".to_string(), |ms| format!("{ms}ms"));
            format!("restarts={restarts} sink_reached_again_after={after}")
        };
        (have != want).then(|| ModelMismatch {
            at: format!(
                "a sink outage of {} ms, the run's only fault (the documented retries ride out {SINK_OUTAGE_RIDDEN_OUT_MS} ms)",
                self.duration_ms
            ),
            model: show(want),
            engine: show(have),
        })
    }
}

/// The recovery after a run's only fault, one kill -9 at a step, as the trace has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestartSteps {
    pub protocol: keel_engine::CheckpointProtocol,
    pub sink: SinkKind,
    /// The step the kill came at, and the steps of the fault-free run that had completed
    /// by then (the same ones up to the kill).
    pub crash_step: u64,
    pub steps_done: u64,
    /// The restarted process's first step, and its steps up to its first read of an event
    /// (or of the end of input): the recovery.
    pub first_step: u64,
    /// Shared: a point that took its recovery from an earlier point's holds that one's
    /// (thousands of steps on a long chain of incremental checkpoints).
    pub steps: Arc<[(&'static str, String)]>,
}

/// A restarted process's steps up to its first read of an event (or of the end of input):
/// its recovery, as the trace has it after the restart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoverySteps {
    /// The first of them, by number (or counted from the restart, where so stated).
    pub first_step: u64,
    /// Shared: a point that took its recovery from an earlier point's holds that one's
    /// (thousands of steps on a long chain of incremental checkpoints).
    pub steps: Arc<[(&'static str, String)]>,
}

impl RecoverySteps {
    /// The recovery after the first restart in `lines` (None: no restart, or no step after
    /// it).
    pub fn first_in<'a>(
        lines: impl Iterator<Item = &'a keel_sim::TraceLine>,
    ) -> Option<RecoverySteps> {
        RecoverySteps::of_steps(lines.skip_while(|line| !is_restart(line)))
    }

    /// The recovery after the last restart in `trace`, its first step counted from
    /// `steps_before` (the steps taken before that restart).
    pub fn after_last_restart(trace: &keel_sim::Trace, steps_before: u64) -> Option<RecoverySteps> {
        let lines: Vec<&keel_sim::TraceLine> = trace.lines().collect();
        let restart = lines.iter().rposition(|line| is_restart(line))?;
        let mut recovery = RecoverySteps::of_steps(lines[restart..].iter().copied())?;
        recovery.first_step = recovery
            .first_step
            .checked_sub(steps_before)
            .expect("a step after the restart");
        Some(recovery)
    }

    /// The steps of `lines` up to the first read of the input.
    fn of_steps<'a>(lines: impl Iterator<Item = &'a keel_sim::TraceLine>) -> Option<RecoverySteps> {
        let mut steps = lines
            .filter_map(|line| match line {
                keel_sim::TraceLine::Step {
                    step, op, target, ..
                } => Some((*step, *op, target)),
                _ => None,
            })
            .take_while(|(_, op, _)| *op != "source.read")
            .peekable();
        let first_step = steps.peek().map(|(step, _, _)| *step)?;
        Some(RecoverySteps {
            first_step,
            steps: steps.map(|(_, op, target)| (op, target.clone())).collect(),
        })
    }
}

fn is_restart(line: &keel_sim::TraceLine) -> bool {
    matches!(line, keel_sim::TraceLine::Restart { .. })
}

impl RestartSteps {
    /// The recovery of a run on a file sink whose only fault was a kill -9 at a step (as
    /// `world` ran it), if the process restarted.
    pub fn of(world: &keel_sim::World, config: &EngineConfig) -> Option<RestartSteps> {
        let (crash_step, steps_done) = RestartSteps::single_kill(world, config)?;
        let recovery = RecoverySteps::first_in(world.trace().lines())?;
        Some(RestartSteps {
            protocol: config.protocol,
            sink: config.sink,
            crash_step,
            steps_done,
            first_step: recovery.first_step,
            steps: recovery.steps,
        })
    }

    /// [`RestartSteps::of`] a run stopped at its restart (`world`), whose recovery went as
    /// another run's from the same restart (`recovery`, counted from that restart).
    pub fn of_restarted(
        world: &keel_sim::World,
        config: &EngineConfig,
        recovery: &RecoverySteps,
    ) -> Option<RestartSteps> {
        let (crash_step, steps_done) = RestartSteps::single_kill(world, config)?;
        Some(RestartSteps {
            protocol: config.protocol,
            sink: config.sink,
            crash_step,
            steps_done,
            first_step: world.steps_taken() + recovery.first_step,
            steps: recovery.steps.clone(),
        })
    }

    /// The step of the run's only fault and the steps done by then, if it was one kill -9
    /// at a step of a file sink's run.
    fn single_kill(world: &keel_sim::World, config: &EngineConfig) -> Option<(u64, u64)> {
        if config.sink.is_transactional() {
            return None;
        }
        let plan = world.plan_that_ran();
        if plan.kill_time_ms().is_some() {
            return None;
        }
        let mut faults = plan.iter();
        let (
            Some(keel_sim::PlannedFault {
                step: crash_step,
                fault: keel_sim::Fault::ProcessCrash { at },
            }),
            None,
        ) = (faults.next(), faults.next())
        else {
            return None;
        };
        let steps_done = match at {
            keel_sim::CrashPoint::After => crash_step + 1,
            keel_sim::CrashPoint::Before => crash_step,
        };
        Some((crash_step, steps_done))
    }

    /// Where the recovery departs from the protocol's recipe for what the fault-free run
    /// had left on the disk by the kill (`found`: read off the recipe of that run).
    pub fn mismatch(&self, found: &crate::recipe::FoundTimeline) -> Option<ModelMismatch> {
        let recipe =
            crate::recipe::recovery_steps(self.protocol, self.sink, found.after(self.steps_done));
        crate::recipe::check_steps_of(
            self.steps.iter().map(|(op, target)| (*op, target.as_str())),
            &recipe,
            self.first_step,
            &format!("the recovery after a kill -9 at step {}", self.crash_step),
        )
    }
}

/// Two accounts of the sink writes of one run, which must agree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SinkWriteCounts {
    /// Requests that reached the sink and ran there (a lost ack included).
    pub served: u64,
    /// Those of them that changed the sink file (appended a record; a skipped duplicate
    /// does not), where the run that made the observation ran them: None where a sweep
    /// took the run's future on from another point's (`fork/`), whose file may differ.
    pub appended: Option<u64>,
    /// What the engine reports: records written plus records the idempotent sink skipped.
    pub written: u64,
    pub skipped: u64,
}

impl SinkWriteCounts {
    /// Where the engine's report departs from the world's count (fails every command, as
    /// `matches-model`: a figure the report prints must be true): every request it served
    /// is a record written or skipped, and the written ones are those that changed the file.
    pub fn mismatch(&self) -> Option<ModelMismatch> {
        if self.written + self.skipped != self.served {
            return Some(ModelMismatch {
                at: "the sink writes of the run (as the simulated sink counted them)".to_string(),
                model: format!("served={}", self.served),
                engine: format!("written={} skipped={}", self.written, self.skipped),
            });
        }
        let appended = self.appended?;
        (self.written != appended).then(|| ModelMismatch {
            at: "the sink writes of the run (a written one changes the sink file, a skipped one does not)"
                .to_string(),
            model: format!("written={appended} skipped={}", self.served - appended),
            engine: format!("written={} skipped={}", self.written, self.skipped),
        })
    }
}

/// The consumer views of a sink: the file, or the two isolation levels of the log.
pub fn views_of(sink: SinkKind) -> &'static [Option<View>] {
    if sink.is_transactional() {
        &[Some(View::ReadCommitted), Some(View::ReadUncommitted)]
    } else {
        &[None]
    }
}

impl Observation {
    /// This observation as `composed` could make it: an observation a sweep composed from
    /// other points' futures (`fork/`) did not run its own sink writes, so it has no count
    /// of their appends (`SinkWriteCounts::appended`); every other figure is the same.
    pub fn seen_as(&self, composed: &Observation) -> Observation {
        let mut seen = self.clone();
        if let (Some(writes), Some(other)) = (&mut seen.sink_writes, &composed.sink_writes) {
            if other.appended.is_none() {
                writes.appended = None;
            }
        }
        seen
    }

    /// Reads what every consumer of `result`'s sink sees (reading is not a step of the run).
    pub fn of(result: &RunResult, config: &EngineConfig) -> Observation {
        Observation::of_known(result, config, None)
    }

    /// `of`, reading a file sink's lines that `known` (the fault-free run's file) holds from
    /// it: the same observation, parsing only what differs.
    pub fn of_known(
        result: &RunResult,
        config: &EngineConfig,
        known: Option<&KnownSink>,
    ) -> Observation {
        let final_state = FinalState::of(&result.final_state);
        Observation::of_known_ending(result, config, known, &final_state)
    }

    /// [`Observation::of_known`] of a run whose final state is `final_state` (a forked
    /// point's is mostly the fault-free run's, whose windows' sums are not built again:
    /// `FinalState::of_known`).
    pub fn of_known_ending(
        result: &RunResult,
        config: &EngineConfig,
        known: Option<&KnownSink>,
        final_state: &FinalState,
    ) -> Observation {
        let views = views_of(config.sink)
            .iter()
            .map(|&view| observe_view(result, config, view, known))
            .collect();
        let mut observation = Observation::assemble(
            config,
            views,
            stray_files_of(config.sink, &result.disk_files()),
            &result.incarnations,
            &result.outcome,
            final_state,
        );
        if !config.sink.is_transactional() {
            let stats = result.incarnations.iter().map(|i| &i.stats);
            let served = result.world.served(SINK_WRITE_OP);
            observation.sink_writes = Some(SinkWriteCounts {
                served: served.requests,
                appended: Some(served.changed_file),
                written: stats.clone().map(|s| s.written).sum(),
                skipped: stats.map(|s| s.skipped).sum(),
            });
            observation.sink_outage = SinkOutage::of(&result.world, observation.restarts);
            observation.restart = RestartSteps::of(&result.world, config);
        }
        observation
    }

    /// The observation of a run whose file sink holds `sink_bytes` (None: no sink file) and
    /// whose directory holds `files` (every name, the sink's too), as a real run leaves it;
    /// the incarnations, outcome and final state as the runner saw them.
    pub fn of_file_sink(
        config: &EngineConfig,
        sink_bytes: Option<&[u8]>,
        files: &[String],
        incarnations: &[Incarnation],
        outcome: &Outcome,
        final_state: &OperatorState,
    ) -> Observation {
        Observation::of_file_view(
            config,
            observe_file(sink_bytes),
            stray_files_of(config.sink, files),
            incarnations,
            outcome,
            &FinalState::of(final_state),
        )
    }

    /// `of_file_sink` of a run whose sink file was already read into `view` (a forked point
    /// reads it with the fault-free run's lines: [`KnownSink::observe`], the same view), and
    /// whose stray files ([`stray_files_of`] its files) are `stray_files`.
    pub fn of_file_view(
        config: &EngineConfig,
        view: ViewObservation,
        stray_files: Vec<String>,
        incarnations: &[Incarnation],
        outcome: &Outcome,
        final_state: &FinalState,
    ) -> Observation {
        assert!(!config.sink.is_transactional(), "a file sink");
        Observation::assemble(
            config,
            vec![view],
            stray_files,
            incarnations,
            outcome,
            final_state,
        )
    }

    fn assemble(
        config: &EngineConfig,
        views: Vec<ViewObservation>,
        stray_files: Vec<String>,
        incarnations: &[Incarnation],
        outcome: &Outcome,
        final_state: &FinalState,
    ) -> Observation {
        let recovery = match outcome {
            Outcome::Completed => Recovery::Ok,
            Outcome::RecoveryFailed(_) => Recovery::Failed,
            Outcome::RestartLimit => Recovery::Looped,
        };
        Observation {
            sink: config.sink,
            key: config.key,
            views,
            recovery,
            final_windows: if recovery == Recovery::Ok {
                Arc::clone(&final_state.windows)
            } else {
                Arc::default()
            },
            dropped_late: if recovery == Recovery::Ok {
                final_state.dropped_late
            } else {
                0
            },
            rolled_back: rolled_back(incarnations),
            restarts: incarnations.len() as u64 - 1,
            stray_files,
            sink_writes: None,
            sink_outage: None,
            restart: None,
        }
    }

    /// The observation of `view` (None: the file sink's only view).
    pub fn view(&self, view: Option<View>) -> &ViewObservation {
        self.views
            .iter()
            .find(|v| v.view == view)
            .unwrap_or_else(|| panic!("the sink {} has no view {view:?}", self.sink))
    }
}

/// Restarts that restored an older checkpoint than the newest one committed before them.
fn rolled_back(incarnations: &[Incarnation]) -> u64 {
    let mut rolled_back = 0;
    let mut newest_committed = 0;
    for (i, incarnation) in incarnations.iter().enumerate() {
        let stats = &incarnation.stats;
        if i > 0 && stats.resume_decided && stats.resume_from_index < newest_committed {
            rolled_back += 1;
        }
        newest_committed = newest_committed_after(newest_committed, stats);
    }
    rolled_back
}

/// The newest checkpoint (by event index) an incarnation with `stats` committed or resumed
/// from, or `newest` of those before it if that is newer: what a later restart's roll-back
/// is judged against ([`Observation::rolled_back`]).
pub fn newest_committed_after(newest: u64, stats: &keel_engine::IncarnationStats) -> u64 {
    let committed = stats.last_committed.as_ref().map_or(0, |c| c.index);
    newest.max(committed).max(stats.resume_from_index)
}

/// A consumer's lines, read one at a time: the whole records, and how many lines are not one.
#[derive(Default)]
struct LineReader {
    records: Vec<Record>,
    corrupt_lines: u64,
}

impl LineReader {
    fn push(&mut self, line: &str) {
        match Record::parse_line(line) {
            Some(record) => self.records.push(record),
            None => self.corrupt_lines += 1,
        }
    }
}

/// What a consumer reading a file sink sees in its bytes: the records of its lines in order,
/// and how many lines are not a whole record (a torn append nothing repaired, bytes that are
/// not UTF-8). The reader `fuzz/` feeds arbitrary bytes.
pub fn file_sink_records(bytes: &[u8]) -> (Vec<Record>, u64) {
    let read = read_file(Some(bytes));
    (read.records, read.corrupt_lines)
}

fn read_file(sink_bytes: Option<&[u8]>) -> LineReader {
    let mut read = LineReader::default();
    if let Some(bytes) = sink_bytes {
        for line in String::from_utf8_lossy(bytes).lines() {
            read.push(line);
        }
    }
    read
}

/// The file sink's one view: its lines in order (None: the file does not exist).
fn observe_file(sink_bytes: Option<&[u8]>) -> ViewObservation {
    let read = read_file(sink_bytes);
    ViewObservation {
        records: Records::Own(read.records),
        corrupt_lines: read.corrupt_lines,
        ..ViewObservation::default()
    }
}

fn observe_view(
    result: &RunResult,
    config: &EngineConfig,
    view: Option<View>,
    known: Option<&KnownSink>,
) -> ViewObservation {
    let mut observed = ViewObservation {
        view,
        ..ViewObservation::default()
    };
    match view {
        None => {
            let bytes = result
                .world
                .env()
                .disk
                .read(documented_sink_file(config.sink))
                .ok();
            observed = match (known, bytes) {
                (Some(known), Some(bytes)) => known.observe(&bytes),
                (_, bytes) => observe_file(bytes.as_deref()),
            };
        }
        Some(view) => {
            let txlog = &result.world.env().txlog;
            let records = match view {
                View::ReadCommitted => txlog.read_committed(),
                View::ReadUncommitted => txlog.read_uncommitted(),
            };
            let mut read = LineReader::default();
            for record in &records {
                read.push(&record.payload);
            }
            observed.records = Records::Own(read.records);
            observed.corrupt_lines = read.corrupt_lines;
            if view == View::ReadUncommitted {
                observed.dirty_reads = records
                    .iter()
                    .filter(|r| r.status != TxnStatus::Committed)
                    .count() as u64;
            } else {
                observed.visibility_delay_ms_max = commit_delay_ms_max(result);
            }
        }
    }
    observed
}

/// The longest wait, in simulated ms, from a record's send to its transaction's commit.
fn commit_delay_ms_max(result: &RunResult) -> u64 {
    let entries = result.world.env().txlog.entries();
    let mut delay_ms_max = 0;
    for (i, entry) in entries.iter().enumerate() {
        if !matches!(entry.kind, EntryKind::Data { .. }) {
            continue;
        }
        // The first marker of the same producer and epoch after the record ends its
        // transaction.
        let marker = entries[i + 1..].iter().find(|m| {
            m.transactional_id == entry.transactional_id
                && m.epoch == entry.epoch
                && !matches!(m.kind, EntryKind::Data { .. })
        });
        if let Some(marker) = marker.filter(|m| m.kind == EntryKind::Commit) {
            delay_ms_max = delay_ms_max.max(marker.at_ms - entry.at_ms);
        }
    }
    delay_ms_max
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::Scenario;
    use crate::runner::run;
    use crate::spec::ScenarioSpec;
    use keel_sim::{Fault, FaultPlan, PlannedFault};

    /// What the oracle observes of ch04 on `sink` with `faults` at their steps.
    fn observe(sink: SinkKind, faults: &[(u64, Fault)]) -> Observation {
        let spec = ScenarioSpec::ch04(0);
        let plan = FaultPlan::new(
            faults
                .iter()
                .map(|&(step, fault)| PlannedFault { step, fault }),
        )
        .unwrap();
        let events = Scenario::by_name("ch04").unwrap().events();
        let run_spec = spec.run_spec(&events, sink, plan).unwrap();
        Observation::of(&run(&run_spec), &run_spec.config)
    }

    /// The sink writes of ch04 on `sink` with `faults` at their steps, both accounts.
    fn sink_writes_of(sink: SinkKind, faults: &[(u64, Fault)]) -> Option<SinkWriteCounts> {
        observe(sink, faults).sink_writes
    }

    #[test]
    fn a_sink_outage_the_retries_ride_out_restarts_nothing() {
        let outage = |duration_ms| [(23, Fault::SinkUnavailable { duration_ms })];
        let seen = |sink, duration_ms| observe(sink, &outage(duration_ms)).sink_outage;
        // 100 + 200 + 400 + 800 + 1,600 + 6 x 3,200 ms of waits before the 12th attempt.
        assert_eq!(SINK_OUTAGE_RIDDEN_OUT_MS, 22_300);
        for sink in [SinkKind::Append, SinkKind::Idempotent] {
            // Retries at 100, 300, 700, 1,500, 3,100, ... 22,300 ms after the refused write.
            for (duration_ms, resumed_after_ms) in [
                (1, 100),
                (2_000, 3_100),
                (3_100, 3_100),
                (3_101, 6_300),
                (22_300, 22_300),
            ] {
                let outage = seen(sink, duration_ms).expect("one outage, the only fault");
                assert_eq!(
                    outage,
                    SinkOutage {
                        duration_ms,
                        restarts: 0,
                        resumed_after_ms: Some(resumed_after_ms)
                    }
                );
                assert_eq!(outage.mismatch(), None);
            }
            // One ms longer and the 12th attempt fails too: a restart, as documented.
            let longer = seen(sink, 22_301).expect("one outage");
            assert_eq!(longer.restarts, 1);
            assert_eq!(longer.mismatch(), None);
        }
        // Another fault beside it, or the log: nothing to check.
        let both = [
            (23, Fault::SinkUnavailable { duration_ms: 2_000 }),
            (
                30,
                Fault::ProcessCrash {
                    at: keel_sim::CrashPoint::After,
                },
            ),
        ];
        assert_eq!(observe(SinkKind::Append, &both).sink_outage, None);
        assert_eq!(seen(SinkKind::Transactional, 2_000), None);
        let outage = |restarts, resumed_after_ms| SinkOutage {
            duration_ms: 2_000,
            restarts,
            resumed_after_ms,
        };
        assert_eq!(
            outage(1, Some(3_100)).mismatch().unwrap().to_string(),
            "a sink outage of 2000 ms, the run's only fault (the documented retries ride out \
             22300 ms): the model has restarts=0 sink_reached_again_after=3100ms, the engine \
             has restarts=1 sink_reached_again_after=3100ms"
        );
        // Retrying sooner or later than documented is a mismatch too.
        assert!(outage(0, Some(2_000)).mismatch().is_some());
        assert!(outage(0, Some(6_300)).mismatch().is_some());
        assert!(outage(0, None).mismatch().is_some());
    }

    #[test]
    fn the_engine_counts_every_sink_write_the_sink_served() {
        // Served requests, those of them that appended, the engine's written and skipped.
        let counts = |served, appended, written, skipped| {
            Some(SinkWriteCounts {
                served,
                appended: Some(appended),
                written,
                skipped,
            })
        };
        // ch04 writes 4 records with no fault.
        assert_eq!(sink_writes_of(SinkKind::Append, &[]), counts(4, 4, 4, 0));
        // Two lost acks on the first record's write (step 23): the first attempt wrote it,
        // the second found it there (the engine never heard), the third was acknowledged.
        let ack_lost = [(23, Fault::AckLost), (24, Fault::AckLost)];
        assert_eq!(
            sink_writes_of(SinkKind::Idempotent, &ack_lost),
            counts(6, 4, 4, 2)
        );
        // The appending sink writes it three times.
        assert_eq!(
            sink_writes_of(SinkKind::Append, &ack_lost),
            counts(6, 6, 6, 0)
        );
        // The log is counted by its own figures, not here.
        assert_eq!(sink_writes_of(SinkKind::Transactional, &[]), None);
        assert_eq!(counts(6, 4, 4, 2).unwrap().mismatch(), None);
        assert_eq!(
            counts(6, 4, 4, 1).unwrap().mismatch().unwrap().to_string(),
            "the sink writes of the run (as the simulated sink counted them): the model has \
             served=6, the engine has written=4 skipped=1"
        );
        // A skip reported as a write: the totals agree, the split does not.
        assert_eq!(
            counts(6, 4, 5, 1).unwrap().mismatch().unwrap().to_string(),
            "the sink writes of the run (a written one changes the sink file, a skipped one \
             does not): the model has written=4 skipped=2, the engine has written=5 skipped=1"
        );
    }

    #[test]
    fn the_oracle_reads_the_sink_where_the_readme_says_it_is() {
        // The engine writes there today; the oracle does not ask it where.
        for sink in [SinkKind::Append, SinkKind::Idempotent] {
            assert_eq!(sink.file_name(), documented_sink_file(sink));
        }
        assert_eq!(documented_sink_file(SinkKind::Append), "sink-append.jsonl");
        assert_eq!(
            documented_sink_file(SinkKind::Idempotent),
            "sink-idempotent.jsonl"
        );
    }
}
