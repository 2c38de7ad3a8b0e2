//! `keel run`: one run against its fault-free baseline, tallied and rendered as the chapter's
//! text lines or as one JSON object (whose field names other tools read: keep them).

use crate::error::KeelError;
use crate::observation::Observation;
use crate::property::Expectation;
use crate::real::{ChildExit, ListedFile, RealRun};
use crate::runner::{self, Incarnation, Outcome, RunResult, RunSpec, View};
use crate::sites::sites_from_run as sites_of;
use crate::verdict::{judge_one, Reference, Verdict};
use keel_engine::engine::{read_target, END_OF_INPUT};
use keel_engine::{format_windows, Checkpoint, EngineConfig, OperatorState, Record};
use keel_sim::disk::POWER_LOSS_ENUMERATION_BOUND;
use keel_sim::fault::PlanFile;
use keel_sim::{CrashKind, CrashPoint, Fault, FaultPlan, PlannedFault};
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use std::collections::{BTreeMap, BTreeSet};

/// Which fault `keel run` injects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashRequest {
    /// Kill after event C and its checkpoint, if one was due: before the read of event C + 1.
    AfterEvent(u64),
    /// Kill at simulated time T: while waiting, or before the first step at or after T.
    AtMs(u64),
    /// One fault at one step, as a sweep names it.
    AtStep(PlannedFault),
}

/// Turns a crash request into a plan by finding its step in the fault-free run.
pub fn plan_for_crash(
    baseline: &RunResult,
    events_len: u64,
    request: CrashRequest,
) -> Result<FaultPlan, KeelError> {
    let sites = sites_of(baseline);
    let step = match request {
        CrashRequest::AfterEvent(after) => {
            if after >= events_len {
                return Err(KeelError::usage(format!(
                    "--crash-after-event {after} is beyond the input: its events are 0..={}",
                    events_len.saturating_sub(1)
                )));
            }
            let next_read = if after + 1 < events_len {
                read_target(after + 1)
            } else {
                END_OF_INPUT.to_string()
            };
            sites
                .iter()
                .find(|site| site.op == "source.read" && site.target == next_read)
                .map(|site| site.step)
                .expect("the fault-free run reads every event and the end of input")
        }
        CrashRequest::AtMs(at_ms) => {
            let last_ms = sites.iter().map(|site| site.time_ms).max().unwrap_or(0);
            if at_ms > last_ms {
                return Err(KeelError::usage(format!(
                    "--crash-at-ms {at_ms} is after the run: its last step is at t={last_ms}ms"
                )));
            }
            return Ok(FaultPlan::kill_at_ms(at_ms));
        }
        CrashRequest::AtStep(planned) => {
            let site = sites
                .iter()
                .find(|s| s.step == planned.step)
                .ok_or_else(|| {
                    KeelError::usage(format!(
                        "--at-step {} is beyond the run: its steps are 0..={}",
                        planned.step,
                        sites.len().saturating_sub(1)
                    ))
                })?;
            let kind = planned.fault.kind();
            if !site.faults.contains(&kind) {
                return Err(KeelError::usage(format!(
                    "--fault {kind} does not apply at step {} ({} {}); `keel sites` lists where each fault applies",
                    planned.step, site.op, site.target
                )));
            }
            if let Fault::PowerLoss { state, at } = planned.fault {
                // A site's count is the disk's after its effect. Before it, the disk is as
                // the previous step left it (nothing changes it between steps); step 0 reads
                // the directory, which changes nothing.
                let counted = match (at, planned.step.checked_sub(1)) {
                    (CrashPoint::Before, Some(previous)) => sites
                        .iter()
                        .find(|s| s.step == previous)
                        .expect("the steps before a site are sites"),
                    _ => site,
                };
                let enumerable = counted
                    .power_loss_states
                    .as_ref()
                    .and_then(|count| u64::try_from(count).ok())
                    .filter(|&count| count <= POWER_LOSS_ENUMERATION_BOUND);
                if let Some(count) = enumerable {
                    if state >= count {
                        return Err(KeelError::usage(format!(
                            "--crash-state {state} does not exist at step {}: its crash states are 0..={}",
                            planned.step,
                            count - 1
                        )));
                    }
                }
            }
            return Ok(FaultPlan::new([planned]).expect("one fault"));
        }
    };
    Ok(FaultPlan::new([PlannedFault {
        step,
        fault: Fault::ProcessCrash {
            at: CrashPoint::Before,
        },
    }])
    .expect("one fault"))
}

/// Window end -> sum, serialized as a JSON object keyed by the end as a string, in end order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WindowSums(pub BTreeMap<i64, i128>);

impl Serialize for WindowSums {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (end, sum) in &self.0 {
            map.serialize_entry(&end.to_string(), sum)?;
        }
        map.end()
    }
}

impl std::fmt::Display for WindowSums {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&format_windows(&self.0))
    }
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ConfigReport {
    pub window: i64,
    pub out_of_orderness: i64,
    pub checkpoint_every: u64,
    pub sink: String,
    pub event_interval_ms: u64,
    pub restart_delay_ms: u64,
    /// Allowed lateness L in event-time units (absent: unbounded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_lateness: Option<i64>,
    /// The file-system profile of the crash model.
    pub fs_model: String,
    /// `incremental` with `--state-backend incremental`; absent with full checkpoints
    /// (the default), so every report of full checkpoints is what it was.
    #[serde(skip_serializing_if = "Option::is_none", alias = "checkpoint_mode")]
    pub state_backend: Option<String>,
}

/// Counts by the sink's key (the chapter's tally).
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Tally {
    pub total_records: u64,
    pub unique_keys: u64,
    /// Records beyond the first for each key.
    pub duplicates: u64,
    /// Keys of the fault-free run absent from the sink.
    pub lost: u64,
    /// Sink lines that are not a whole record.
    pub corrupt: u64,
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct KeyCount {
    pub key: String,
    pub count: u64,
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct CheckpointReport {
    pub index: u64,
    pub max_ts: Option<i64>,
    pub windows: WindowSums,
}

impl From<&Checkpoint> for CheckpointReport {
    fn from(checkpoint: &Checkpoint) -> Self {
        CheckpointReport {
            index: checkpoint.index,
            max_ts: checkpoint.state.max_ts,
            windows: WindowSums(checkpoint.state.sums()),
        }
    }
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct CrashReport {
    /// "process-crash" or "power-loss".
    pub kind: String,
    /// The power loss's crash state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crash_state: Option<u64>,
    /// The class of crash states a power loss resolved to (`--crash-state-class`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crash_state_class: Option<u64>,
    /// The last event the killed process finished (null if it finished none).
    pub after_event: Option<u64>,
    /// Simulated time of the kill.
    pub at_ms: u64,
    pub step: u64,
    /// Records the killed process got into the sink.
    pub written: u64,
    /// The newest checkpoint in force when the process died.
    pub checkpoint: Option<CheckpointReport>,
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct RecoveryReport {
    pub resume_from_index: u64,
    /// max_ts - D of the restored checkpoint; null when recovery started from scratch.
    pub watermark: Option<i64>,
    pub written: u64,
    pub skipped: u64,
    /// Checkpoint files recovery found damaged and skipped, with the reason.
    pub rejected_checkpoints: Vec<String>,
}

/// Everything `keel run` reports.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct RunReport {
    pub scenario: String,
    pub config: ConfigReport,
    pub outcome: String,
    pub processed_upto_index: u64,
    /// Records the last process got into the sink.
    pub written: u64,
    pub final_windows: WindowSums,
    /// Events dropped as later than the allowed lateness (by the last process's state, which
    /// checkpoints carry: a recovered run counts what the fault-free run counts).
    pub dropped_late: u64,
    pub sink: Vec<Record>,
    pub tally: Tally,
    pub duplicated_keys: Vec<KeyCount>,
    pub lost_keys: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crash: Option<CrashReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery: Option<RecoveryReport>,
    pub baseline_final_windows: WindowSums,
    pub final_windows_match: bool,
    /// The consumer view judged (transactional sink only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub view: Option<View>,
    /// What the run was judged by: an `--expect`, or "promised" (what the sink promises to
    /// the view).
    pub judged_by: String,
    /// The oracle's verdict, by record identity.
    pub oracle: Verdict,
    /// The properties (of those asked) the run breaks; empty when it holds.
    pub failures: Vec<String>,
    /// Property by property, broken first, then those not judged (the verdict line's tail).
    #[serde(skip)]
    pub properties: String,
    pub restarts: u64,
    /// The faults that took effect, as a plan file holds them.
    pub plan: PlanFile,
    pub fingerprint: String,
    pub reproduce: String,
    /// The trace, one line per entry (printed by `keel run --trace`, not in the JSON).
    #[serde(skip)]
    pub trace: Vec<String>,
    /// "real" for a run on a real directory (`--real-dir`); absent for a simulated run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Real mode: the directory's final listing (name, size, FNV-1a 64 of the contents).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub directory: Option<Vec<ListedFile>>,
    /// Real mode: each incarnation's child process and how it ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub children: Option<Vec<ChildExit>>,
}

/// A finished run as the report reads it, simulated or real.
pub struct Ran<'a> {
    pub observation: Observation,
    pub incarnations: &'a [Incarnation],
    pub outcome: &'a Outcome,
    pub final_state: &'a OperatorState,
    pub plan: PlanFile,
    pub fingerprint: String,
    pub trace: Vec<String>,
}

impl<'a> Ran<'a> {
    /// A simulated run; its trace's text only with `keep_trace` (a million-event run's
    /// trace is millions of lines, and only `--trace` prints them).
    pub fn simulated(result: &'a RunResult, config: &EngineConfig, keep_trace: bool) -> Ran<'a> {
        Ran {
            observation: Observation::of(result, config),
            incarnations: &result.incarnations,
            outcome: &result.outcome,
            final_state: &result.final_state,
            plan: result.world.plan_that_ran().to_file(),
            fingerprint: result.world.fingerprint().to_string(),
            trace: if keep_trace {
                assert!(result.world.trace().is_whole(), "a kept trace");
                result.world.trace().text_lines()
            } else {
                Vec::new()
            },
        }
    }

    /// A real run: its sink file judged as the simulated disk's would be.
    pub fn real(run: &'a RealRun, config: &EngineConfig) -> Ran<'a> {
        Ran {
            observation: Observation::of_file_sink(
                config,
                run.sink.as_deref(),
                &run.file_names(),
                &run.incarnations,
                &run.outcome,
                &run.final_state,
            ),
            incarnations: &run.incarnations,
            outcome: &run.outcome,
            final_state: &run.final_state,
            plan: run.plan.clone(),
            fingerprint: run.fingerprint().to_string(),
            trace: run.trace.clone(),
        }
    }
}

/// How `keel run` judges: the consumer view and what the run must hold.
#[derive(Clone, Debug, Default)]
pub struct Judging {
    pub view: Option<View>,
    pub expect: Option<Expectation>,
    /// Keep the trace's text in the report (`keel run --trace`).
    pub keep_trace: bool,
}

/// Runs the scenario fault-free and, if asked, once more with the crash; tallies the sink.
pub fn run_report(
    scenario: &str,
    spec: &RunSpec,
    crash: Option<CrashRequest>,
    judging: &Judging,
    reproduce: String,
) -> Result<RunReport, KeelError> {
    spec.config.validate().map_err(KeelError::usage)?;
    let baseline_spec = RunSpec {
        plan: FaultPlan::none(),
        ..spec.clone()
    };
    // Crash states are counted only where a crash is asked for (a power loss's state must
    // exist, and the crash's step is found in the trace); without one, and without
    // `--trace`, the fault-free run keeps only its fingerprint: a long run's trace is most of
    // its memory.
    let baseline = match (&crash, judging.keep_trace) {
        (Some(_), _) => runner::run_recording_crash_states(&baseline_spec),
        (None, true) => runner::run(&baseline_spec),
        (None, false) => runner::run_streaming_trace(&baseline_spec),
    };
    let reference = Reference::for_spec_given(spec, &baseline);
    let faulty = match crash {
        None => None,
        Some(request) => {
            let plan = plan_for_crash(&baseline, spec.events.len() as u64, request)?;
            let result = runner::run(&RunSpec {
                plan,
                ..spec.clone()
            });
            // A class is checked where it resolves: the step's classes are counted then.
            if let Some(wrapped) = result.world.wrapped_states().iter().find(|w| w.class) {
                return Err(KeelError::usage(if wrapped.count == 0 {
                    format!(
                        "--crash-state-class {} at step {}: that step's crash states are not numbered in classes (too many of the other choices); use --crash-state",
                        wrapped.planned, wrapped.step
                    )
                } else {
                    format!(
                        "--crash-state-class {} does not exist at step {}: its classes are 0..={}",
                        wrapped.planned,
                        wrapped.step,
                        wrapped.count - 1
                    )
                }));
            }
            Some(result)
        }
    };
    // Without a fault the run is the baseline itself (not a copy: a long run's world is big).
    let result = faulty.as_ref().unwrap_or(&baseline);
    Ok(build(
        scenario,
        spec,
        (&baseline, &reference),
        (
            Ran::simulated(result, &spec.config, judging.keep_trace),
            judging,
        ),
        reproduce,
    ))
}

/// `keel run --real-dir`: the same report, of a run that `run_real` carries out on a real
/// directory with real processes (the plan is found on the simulated fault-free run, and
/// the oracle's reference is the simulated one).
pub fn real_run_report(
    scenario: &str,
    spec: &RunSpec,
    crash: Option<CrashRequest>,
    judging: &Judging,
    reproduce: String,
    run_real: impl FnOnce(&RunSpec) -> Result<RealRun, String>,
) -> Result<(RunReport, RealRun), KeelError> {
    spec.config.validate().map_err(KeelError::usage)?;
    let baseline_spec = RunSpec {
        plan: FaultPlan::none(),
        ..spec.clone()
    };
    let baseline = runner::run_recording_crash_states(&baseline_spec);
    let reference = Reference::for_spec_given(spec, &baseline);
    let plan = match crash {
        None => FaultPlan::none(),
        Some(request) => plan_for_crash(&baseline, spec.events.len() as u64, request)?,
    };
    let real_spec = RunSpec {
        plan,
        ..spec.clone()
    };
    crate::real::run::check_supported(&real_spec).map_err(KeelError::usage)?;
    let real = run_real(&real_spec).map_err(|message| KeelError {
        message,
        exit_code: 1,
    })?;
    let mut report = build(
        scenario,
        spec,
        (&baseline, &reference),
        (Ran::real(&real, &spec.config), judging),
        reproduce,
    );
    report.mode = Some("real".to_string());
    report.directory = Some(real.listing.clone());
    report.children = Some(real.children.clone());
    Ok((report, real))
}

fn build(
    scenario: &str,
    spec: &RunSpec,
    (baseline, reference): (&RunResult, &Reference),
    (result, judging): (Ran<'_>, &Judging),
    reproduce: String,
) -> RunReport {
    let (config, restart_delay_ms) = (&spec.config, spec.restart_delay_ms);
    let observation = result.observation;
    let oracle = judge_one(reference, &observation, judging.view);
    let failures = oracle.failures(judging.expect.as_ref(), config.sink);
    let others = if judging.expect.is_some() {
        "not asked"
    } else {
        "not promised"
    };
    let properties = oracle.properties_line(
        &Expectation::for_view(judging.expect.as_ref(), config.sink, judging.view),
        others,
    );
    let contents = observation.view(judging.view).clone();
    let baseline_keys: BTreeSet<String> = Observation::of(baseline, config)
        .view(judging.view)
        .records
        .iter()
        .map(|r| r.key.clone())
        .collect();
    let mut key_counts: BTreeMap<&str, u64> = BTreeMap::new();
    for record in contents.records.iter() {
        *key_counts.entry(record.key.as_str()).or_default() += 1;
    }
    let lost_keys: Vec<String> = baseline_keys
        .iter()
        .filter(|key| !key_counts.contains_key(key.as_str()))
        .cloned()
        .collect();
    let tally = Tally {
        total_records: contents.records.len() as u64,
        unique_keys: key_counts.len() as u64,
        duplicates: contents.records.len() as u64 - key_counts.len() as u64,
        lost: lost_keys.len() as u64,
        corrupt: contents.corrupt_lines,
    };
    let duplicated_keys = key_counts
        .iter()
        .filter(|(_, &count)| count > 1)
        .map(|(key, &count)| KeyCount {
            key: key.to_string(),
            count,
        })
        .collect();

    let first = &result.incarnations[0];
    let crash = first.crash().map(|crash| CrashReport {
        kind: match crash.kind {
            CrashKind::Process => "process-crash".to_string(),
            CrashKind::PowerLoss { .. } => "power-loss".to_string(),
            CrashKind::Zombie => "zombie".to_string(),
        },
        crash_state: match crash.kind {
            CrashKind::PowerLoss {
                state,
                class: false,
            } => Some(state),
            CrashKind::Process | CrashKind::Zombie | CrashKind::PowerLoss { .. } => None,
        },
        crash_state_class: match crash.kind {
            CrashKind::PowerLoss { state, class: true } => Some(state),
            _ => None,
        },
        after_event: first.stats.processed_upto_index.checked_sub(1),
        at_ms: crash.time_ms,
        step: crash.step,
        written: first.stats.written,
        checkpoint: first
            .stats
            .last_committed
            .as_deref()
            .or(first.stats.restored.as_deref())
            .map(CheckpointReport::from),
    });
    let recovery = result.incarnations.get(1).map(|second| RecoveryReport {
        resume_from_index: second.stats.resume_from_index,
        watermark: second
            .stats
            .restored
            .as_ref()
            .and_then(|c| c.state.watermark(config.out_of_orderness)),
        written: second.stats.written,
        skipped: second.stats.skipped,
        rejected_checkpoints: second.stats.rejected_checkpoints.clone(),
    });
    let last = result
        .incarnations
        .last()
        .expect("a run has an incarnation");
    let final_windows = WindowSums(result.final_state.sums());
    let baseline_final_windows = WindowSums(baseline.final_state.sums());
    RunReport {
        scenario: scenario.to_string(),
        config: ConfigReport {
            window: config.window_size,
            out_of_orderness: config.out_of_orderness,
            checkpoint_every: config.checkpoint_every,
            sink: config.sink.name().to_string(),
            event_interval_ms: config.event_interval_ms,
            restart_delay_ms,
            allowed_lateness: config.allowed_lateness,
            fs_model: spec.fs_model.to_string(),
            state_backend: (!config.state_backend.is_full())
                .then(|| config.state_backend.to_string()),
        },
        outcome: match result.outcome {
            Outcome::Completed => "completed".to_string(),
            Outcome::RecoveryFailed(e) => format!("recovery failed: {e}"),
            Outcome::RestartLimit => {
                format!("restart limit: more than {} restarts", runner::RESTARTS_MAX)
            }
        },
        processed_upto_index: last.stats.processed_upto_index,
        written: last.stats.written,
        final_windows_match: *result.outcome == Outcome::Completed
            && final_windows == baseline_final_windows,
        final_windows,
        dropped_late: result.final_state.dropped_late,
        sink: contents.records.to_vec(),
        tally,
        duplicated_keys,
        lost_keys,
        crash,
        recovery,
        baseline_final_windows,
        view: judging.view,
        judged_by: judging
            .expect
            .as_ref()
            .map_or("promised".to_string(), Expectation::name),
        oracle,
        failures,
        properties,
        restarts: result.incarnations.len() as u64 - 1,
        plan: result.plan,
        fingerprint: result.fingerprint,
        reproduce,
        trace: result.trace,
        mode: None,
        directory: None,
        children: None,
    }
}

impl RunReport {
    /// "verdict: holds at-least-once (...)" or "verdict: FAILS exactly-once (...): broken ...".
    pub fn verdict_line(&self) -> String {
        let view = self
            .view
            .map_or(String::new(), |v| format!(" to a {} consumer", v.name()));
        let source = if self.judged_by == "promised" {
            format!("what the {} sink promises{view}", self.config.sink)
        } else {
            format!("--expect {}{view}", self.judged_by)
        };
        let verdict = if self.failures.is_empty() {
            "holds"
        } else {
            "FAILS"
        };
        format!("verdict: {verdict} ({source}): {}", self.properties)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report always serializes")
    }

    /// The chapter's lines: crash and recovery, the end state, the sink, the tally, BASE vs RUN.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let mut line = |text: String| {
            out.push_str(&text);
            out.push('\n');
        };
        let c = &self.config;
        let lateness = c
            .allowed_lateness
            .map_or(String::new(), |l| format!(" allowed_lateness={l}"));
        line(format!(
            "scenario={} window={} out_of_orderness={} checkpoint_every={}{lateness}{} sink={} fs_model={}",
            self.scenario,
            c.window,
            c.out_of_orderness,
            c.checkpoint_every,
            crate::sweep::mode_field(&c.state_backend),
            c.sink,
            c.fs_model
        ));
        line(self.verdict_line());
        if let Some(mismatch) = &self.oracle.model_mismatch {
            line(format!(
                "MODEL MISMATCH: the engine departs from the reference model at {mismatch}"
            ));
        }
        if let Some(crash) = &self.crash {
            let after = crash
                .after_event
                .map_or("none".to_string(), |e| e.to_string());
            let kind = match (crash.crash_state, crash.crash_state_class) {
                (Some(state), _) => format!(" power_loss_state={state}"),
                (None, Some(class)) => format!(" power_loss_state_class={class}"),
                (None, None) => String::new(),
            };
            line(format!(
                "simulated_crash_after_index={after} at_ms={} written={}{kind}",
                crash.at_ms, crash.written
            ));
            match &crash.checkpoint {
                Some(cp) => line(format!(
                    "checkpoint_at_crash: index={} max_ts={} windows={}",
                    cp.index,
                    cp.max_ts.map_or("none".to_string(), |t| t.to_string()),
                    cp.windows
                )),
                None => line("checkpoint_at_crash: none".to_string()),
            }
        }
        if let Some(recovery) = &self.recovery {
            let watermark = recovery
                .watermark
                .map_or("none".to_string(), |w| w.to_string());
            line(format!(
                "resume_from_index={} watermark={watermark}",
                recovery.resume_from_index
            ));
            for rejected in &recovery.rejected_checkpoints {
                line(format!("rejected_checkpoint: {rejected}"));
            }
            line(format!(
                "recovered: written={} skipped={}",
                recovery.written, recovery.skipped
            ));
        }
        if self.outcome != "completed" {
            line(format!("outcome: {}", self.outcome));
        }
        line(format!(
            "processed_upto_index={} written={}",
            self.processed_upto_index, self.written
        ));
        line(format!("final_windows={}", self.final_windows));
        // Unbounded lateness drops nothing: the chapter's lines stay as they were.
        if c.allowed_lateness.is_some() {
            line(format!("dropped_late={}", self.dropped_late));
        }
        line("sink:".to_string());
        for record in &self.sink {
            line(format!("  {record}"));
        }
        let t = &self.tally;
        line(format!(
            "total_records={} unique_keys={} duplicates={} lost={} corrupt={}  (by the sink's key: duplicates = keys the sink saw twice)",
            t.total_records, t.unique_keys, t.duplicates, t.lost, t.corrupt
        ));
        for dup in &self.duplicated_keys {
            line(format!("duplicated key: \"{}\" x{}", dup.key, dup.count));
        }
        for key in &self.lost_keys {
            line(format!("lost key: \"{key}\""));
        }
        if self.crash.is_some() {
            line(format!(
                "BASE  final_windows={}",
                self.baseline_final_windows
            ));
            line(format!("RUN   final_windows={}", self.final_windows));
            line(if self.final_windows_match {
                "=> equal: checkpoint + replay reproduced the fault-free final result".to_string()
            } else {
                "=> DIFFERENT: recovery did not reproduce the fault-free final result".to_string()
            });
        }
        line(format!(
            "oracle (by record identity): {} (restarts={}; duplicates = records delivered more than once)",
            self.oracle.summary(),
            self.restarts
        ));
        if let Some(mode) = &self.mode {
            line(format!("mode: {mode}"));
        }
        for child in self.children.iter().flatten() {
            line(format!("child: {child}"));
        }
        if let Some(directory) = &self.directory {
            line("directory:".to_string());
            for file in directory {
                line(format!(
                    "  {} size={} digest={}",
                    file.name, file.size_bytes, file.digest
                ));
            }
        }
        line(format!("fingerprint={}", self.fingerprint));
        line(format!("reproduce: {}", self.reproduce));
        out
    }
}
