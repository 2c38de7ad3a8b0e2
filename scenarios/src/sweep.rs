//! `keel sweep`: every single fault at every step where it applies (every crash state for a
//! power loss, within a bound), each run to the end, judged by the oracle and tallied per
//! sink and fault kind. The steps (sites) come from `crate::sites`.

use crate::baseline::CrashStates;
use crate::observation::views_of;
use crate::property::{failures, failures_against, Expectation, Property};
use crate::reproduce::replay_plan_command;
use crate::runner::View;
use crate::spec::ScenarioSpec;
use crate::table::{Table, TableFormat};
use keel_engine::SinkKind;
use keel_sim::disk::POWER_LOSS_ENUMERATION_BOUND;
use keel_sim::{FaultKind, FaultPlan, PlannedFault};
use num_bigint::BigUint;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

pub use crate::decimal::count_text;
pub(crate) use crate::decimal::thousands;

mod class_runs;
mod converged_pairs;
mod counts_file;
pub use counts_file::CountsFile;
mod fingerprint;
pub use fingerprint::{digest_hash, digest_number, outcome_key, run_term, Folded};
mod points;
pub use points::{
    first_faults_len, points, power_loss_states, PairCounts, Sampled, SweepPoint, SweepPoints,
};
mod run;
#[cfg(test)]
pub(crate) use run::crash_and_sink_error_sweep;
pub use run::{
    run_chunk, run_point, sharing_chunks, sweep_forks, LastJudged, SweepSetup,
    REORDER_WINDOW_CHUNKS_PER_JOB, REPLICA_EVENTS_MAX, REPLICA_POINTS_PER_EVENT_MIN,
    SHARING_CHUNK_POINTS,
};

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
    /// not), exactly: a JSON number up to 2^53, a decimal string beyond. None (null) only
    /// at depth 2 where a first step was sampled: the pairs that start in a crash state
    /// not drawn are not known without running it.
    #[serde(with = "crate::decimal::optional_count")]
    pub states_total: Option<BigUint>,
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
    /// In the report of a sweep whose budget ran out ([`SweepReport::stopped`]): the row's
    /// points not run (then `exhaustive` is false). Absent in a whole sweep's report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub points_left: Option<u64>,
}

/// Where a sweep stopped because its budget ran out (`--time-budget`, `--points-max`): its
/// report is of the points before, each row's as it stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Stopped {
    /// The option whose budget ran out, as given: `--points-max 1000`, `--time-budget 60s`.
    pub by: String,
    pub points_run: u64,
    pub points_total: u64,
    /// The command that runs the points left: its lines, merged by `keel merge` with this
    /// run's (which `--points 0.. --out FILE` keeps), make the report of the whole sweep.
    pub resume: String,
}

/// Marks the points of a row a budgeted sweep did not finish.
pub const UNFINISHED_MARK: &str = "+";

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
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SampledSteps {
    pub steps: u64,
    /// The crash states those steps admit, exactly (a JSON number up to 2^53, a decimal
    /// string beyond; None: unknown, at depth 2 as for [`SweepRow::states_total`]).
    #[serde(with = "crate::decimal::optional_count")]
    pub states: Option<BigUint>,
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

/// What a classes sweep's verdict rests on, printed under its rows.
pub const CLASSES_CLAIM: &str = "classes rest on the engine's claim of what its recovery reads \
(keel_engine::sink::crash_readers), each judged by one state: a recovery that breaks the \
claim goes unseen (--power-loss-points states runs every state)";

/// What a power-loss point of a sweep is (`--power-loss-points`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PowerLossPoints {
    /// One crash state a point: every state of a step, or a draw of them.
    #[default]
    States,
    /// One class of crash states a point (`keel_sim::disk::PowerLossClasses`: the states a
    /// reader of the sink file's whole lines cannot tell apart lead to the same run), run in
    /// its first state and counted for all of its states. At depth 2 the classes are split
    /// by tail (`keel_sim::disk::CrashReaders::split_tails`): tail repair cuts and syncs only
    /// where bytes follow the kept lines, so a class's states run alike only once it is split
    /// that way, and a second fault then finds the same steps in every state of a class.
    Classes,
}

impl SweepSpec {
    /// Whether its baselines count crash states: only power-loss points read them (a
    /// depth-2 point's second fault is counted on its first fault's run).
    pub fn crash_states(&self) -> CrashStates {
        if self.faults.contains(&FaultKind::PowerLoss) {
            match self.power_loss_points {
                PowerLossPoints::States => CrashStates::Counted,
                PowerLossPoints::Classes if self.depth == 1 => CrashStates::Classes,
                PowerLossPoints::Classes => CrashStates::TailClasses,
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
    /// `incremental` with `--state-backend incremental`; absent with full checkpoints
    /// (the default), so every report of full checkpoints is what it was.
    #[serde(skip_serializing_if = "Option::is_none", alias = "checkpoint_mode")]
    pub state_backend: Option<String>,
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
    /// Where the sweep stopped, when its budget ran out (absent: it ran every point).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<Stopped>,
}

/// What one point's run came to: a line of a shard file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PointRecord {
    pub index: u64,
    pub sink: SinkKind,
    pub row: Arc<str>,
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
    /// Shared with the point it records.
    pub faults: Arc<[PlannedFault]>,
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
    /// Shared by the records of points judged once, as the outcome is.
    pub broken: Arc<[Property]>,
    /// Where the fault-free run departs from the independent model.
    pub model_mismatch: Option<String>,
    /// Shared by the records of points judged once ([`run::LastJudged`]), as is the digest.
    pub outcome: Arc<str>,
    /// A hash of what the consumers saw and the verdict: equal digests, equal outcomes.
    pub outcome_digest: Arc<str>,
    /// The run's trace fingerprint, when the point ran to its end (not when it converged on
    /// the fault-free run: see `fork.rs`); the sweep's fingerprint does not hash it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// The points after this one, consecutive, that have its outcome and are counted with
    /// it (a first fault's composed pairs, `sweep/converged_pairs.rs`): the runs of all of
    /// them, this one first, with their fingerprint terms folded. None: this point alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span: Option<Folded>,
}

impl PointRecord {
    /// The points this record stands for: itself and its span's.
    pub fn points(&self) -> u64 {
        self.span.map_or(1, |span| span.runs)
    }

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

    /// [`PointRecord::failures`], against its view's expectation in `expectations` (built
    /// once for the sweep's views, asking what they were built with).
    pub fn failures_in(&self, expectations: &ViewExpectations) -> Vec<String> {
        let mismatch = self.model_mismatch.is_some();
        match expectations.get(self.sink, self.view) {
            Some(expectation) => failures_against(&self.broken, mismatch, expectation),
            None => self.failures(expectations.asked.as_ref()),
        }
    }
}

/// What each view of a sweep's sinks is judged by (what was asked, or what its sink promises
/// it), built once: a sweep judges millions of records against a handful of views.
#[derive(Clone, Debug)]
pub struct ViewExpectations {
    asked: Option<Expectation>,
    built: Vec<(SinkKind, Option<View>, Expectation)>,
}

impl ViewExpectations {
    pub fn new(asked: Option<&Expectation>, sinks: &[SinkKind]) -> ViewExpectations {
        let built = sinks
            .iter()
            .flat_map(|&sink| views_of(sink).iter().map(move |&view| (sink, view)))
            .map(|(sink, view)| (sink, view, Expectation::for_view(asked, sink, view)))
            .collect();
        ViewExpectations {
            asked: asked.cloned(),
            built,
        }
    }

    fn get(&self, sink: SinkKind, view: Option<View>) -> Option<&Expectation> {
        let built = self.built.iter().find(|(s, v, _)| *s == sink && *v == view);
        built.map(|(_, _, expectation)| expectation)
    }
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
                        .as_ref()
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
                let mark = match (format, &row.sampled) {
                    (_, None) => "",
                    // A bare `*` could start emphasis in Markdown.
                    (TableFormat::Markdown, Some(_)) => "\\*",
                    (_, Some(_)) => SAMPLED_MARK,
                };
                let unfinished = match row.points_left {
                    Some(left) if left > 0 => UNFINISHED_MARK,
                    _ => "",
                };
                cells.push(format!("{}{mark}{unfinished}", row.points));
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
                mode_field(&self.state_backend),
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
            let mut lines = self.classed_lines();
            if !lines.is_empty() {
                // A class is a claim, not a measurement: say whose.
                lines.push(CLASSES_CLAIM.to_string());
            }
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
            if let Some(stopped) = &self.stopped {
                out.push_str(&self.stopped_text(stopped, format));
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
                    count_text(&states.states),
                    count_text(&states.with_duplicates),
                    count_text(&states.with_loss),
                    count_text(&states.failing),
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
                let sampled = row.sampled.as_ref()?;
                let view = row
                    .view
                    .as_ref()
                    .map_or(String::new(), |v| format!(" / {v}"));
                let of = match &sampled.states {
                    Some(states) => format!("of {} ", count_text(&states.to_string())),
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

    /// Lays the report of a sweep stopped by its budget out as the whole sweep's: every row
    /// of `row_lens` (its planned points, per sink and row, in report order), in each of its
    /// sink's views, those not reached with no points, each saying how many points it has
    /// left (a row with some left is not exhaustive).
    pub fn stop(&mut self, stopped: Stopped, row_lens: &[(SinkKind, String, u64)]) {
        let mut rows = std::mem::take(&mut self.rows);
        for (sink, fault, len) in row_lens {
            for view in views_of(*sink) {
                let view = view.map(|v| v.name().to_string());
                let at = rows
                    .iter()
                    .position(|r| r.sink == sink.name() && r.fault == *fault && r.view == view);
                let mut row = match at {
                    Some(at) => rows.remove(at),
                    None => SweepRow {
                        sink: sink.name().to_string(),
                        fault: fault.clone(),
                        view,
                        states_total: Some(BigUint::ZERO),
                        ..SweepRow::default()
                    },
                };
                let left = len.saturating_sub(row.points);
                row.points_left = Some(left);
                row.exhaustive &= left == 0;
                self.rows.push(row);
            }
        }
        assert!(rows.is_empty(), "every row run is a row of the sweep");
        self.stopped = Some(stopped);
    }

    /// What a stopped report says under its table: where and why it stopped, the rows not
    /// finished, and the command that resumes it.
    fn stopped_text(&self, stopped: &Stopped, format: TableFormat) -> String {
        let end = if format == TableFormat::Markdown {
            "\n\n"
        } else {
            "\n"
        };
        let mut out = format!(
            "stopped by {} after {} of {} points: a row marked {UNFINISHED_MARK} is not finished (exhaustive: false){end}",
            stopped.by,
            thousands(stopped.points_run),
            thousands(stopped.points_total),
        );
        for row in &self.rows {
            let Some(left) = row.points_left.filter(|&left| left > 0) else {
                continue;
            };
            let view = row
                .view
                .as_ref()
                .map_or(String::new(), |v| format!(" / {v}"));
            out.push_str(&format!(
                "  {} / {}{view}: {} points run, {} left{end}",
                row.sink,
                row.fault,
                thousands(row.points),
                thousands(left)
            ));
        }
        out.push_str(&format!(
            "resume: {}{end}(its lines and this run's, kept with --points 0.. --out FILE, merge with keel merge into the whole sweep's report){end}",
            stopped.resume
        ));
        if end == "\n" {
            out.push('\n');
        }
        out
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a sweep report always serializes") + "\n"
    }
}

/// ` state_backend=<mode>` for a header line, or nothing with full checkpoints.
pub(crate) fn mode_field(mode: &Option<String>) -> String {
    mode.as_ref()
        .map_or(String::new(), |m| format!(" state_backend={m}"))
}
