//! The oracle: judges what each consumer of a run observed (an [`Observation`]) against the
//! reference (the engine's fault-free output, itself checked against the independent model),
//! in one place, and names the properties the run kept (`property.rs` defines them).
//!
//! Record identity: a record is identified by its *slot* (window end, kind, and the event that
//! triggered it when the sink's key names one: "13:10" names event 13, "flush:30" the end of
//! input, a processing-time key "pt4500.000:20" names nothing) and its *content* (sum and
//! watermark). Within a slot the reference is a multiset: the n-th copy of a content is the
//! n-th occurrence of that record, so two equal records of the fault-free run are two
//! identities, and a sink holding both has neither a duplicate nor a loss.
//!
//! Within one slot, for each content c, with R(c) copies in the reference and S(c) in the view:
//! - delivered: min(R(c), S(c));
//! - duplicates: S(c) - R(c) where R(c) > 0 and S(c) > R(c) (another copy of a real record);
//! - wrong: every copy of a content the reference does not have in that slot;
//! - lost: copies of reference records the view lacks, less the wrong records that stand
//!   in for them in the same slot (a record with the right identity and a wrong sum is
//!   wrong, not also lost).
//!
//! So, per view: records = delivered + duplicates + wrong, and
//! reference records = delivered + lost + (wrong records standing in for missing ones).

use crate::model::{self, ModelMismatch};
use crate::observation::records::Records;
pub use crate::observation::Recovery;
use crate::observation::{Observation, SinkOutage, SinkWriteCounts, ViewObservation};
use crate::property::{self, Expectation, Judged, Property};
use crate::recipe;
use crate::runner::{run, Outcome, RunResult, RunSpec, View};
use keel_engine::{EngineConfig, KeyScheme, Record, SinkKind};
use keel_sim::{FaultPlan, TraceLine};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

mod identity;
mod prepared;
mod splice;

use identity::{judge_records, Tally};
use prepared::Prepared;

/// What the fault-free run delivered: the reference every faulty run is judged against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    /// The fault-free run's records in emission order, with the chapter's stable keys.
    /// Shared by the reference's clones (one a sink).
    pub records: Arc<[Record]>,
    pub final_windows: BTreeMap<i64, i128>,
    /// Events the fault-free run dropped as later than the allowed lateness.
    pub dropped_late: u64,
    /// Where the fault-free run departs from the independent model, if it does.
    pub model_mismatch: Option<ModelMismatch>,
    /// What a process killed after each step of the fault-free run finds on its disk, by the
    /// protocol's recipe (None until the counts of a one-incarnation run were checked).
    pub found: Option<recipe::FoundTimeline>,
    /// What judging needs of `records` alone, built at the first judgement and reused by
    /// every later one (`records` are not changed once a run was judged against them);
    /// shared by the reference's clones (every sink of a sweep takes one reference:
    /// `baseline::baselines_with`), so it is built once for them all.
    prepared: Arc<Prepared>,
}

impl Reference {
    /// What the engine emits for `spec`'s input and knobs when nothing fails: the records of
    /// its fault-free run with the chapter's stable keys on the plain append sink (what any
    /// sink should end up holding, whatever its own keys and mechanics), checked against the
    /// model.
    pub fn for_spec(spec: &RunSpec) -> Reference {
        let config = Reference::config(spec);
        let result = run(&RunSpec {
            config,
            plan: FaultPlan::none(),
            ..spec.clone()
        });
        Reference::of_fault_free_run(spec, &config, &result)
    }

    /// `for_spec`, taking `fault_free` (the fault-free run of `spec`) as the reference run
    /// when it is one: the plain append sink with the chapter's keys. Saves a run, which
    /// at a million events is most of `keel run`.
    pub fn for_spec_given(spec: &RunSpec, fault_free: &RunResult) -> Reference {
        let config = Reference::config(spec);
        if spec.config == config && fault_free.world.plan().is_empty() {
            Reference::of_fault_free_run(spec, &config, fault_free)
        } else {
            Reference::for_spec(spec)
        }
    }

    /// The reference run's config: the spec's, on the append sink with stable keys.
    fn config(spec: &RunSpec) -> EngineConfig {
        EngineConfig {
            sink: SinkKind::Append,
            key: KeyScheme::EventIndex,
            ..spec.config
        }
    }

    fn of_fault_free_run(spec: &RunSpec, config: &EngineConfig, result: &RunResult) -> Reference {
        assert_eq!(
            result.outcome,
            Outcome::Completed,
            "a fault-free append run completes"
        );
        let observation = Observation::of(result, config);
        let [file] = observation.views.as_slice() else {
            unreachable!("the append sink has one view")
        };
        assert_eq!(
            file.corrupt_lines, 0,
            "a fault-free run writes whole records"
        );
        let mut reference = Reference::new(
            file.records.to_vec(),
            Arc::unwrap_or_clone(observation.final_windows),
            observation.dropped_late,
            &model::expected_output(
                &spec.events,
                spec.config.window_size,
                spec.config.out_of_orderness,
                spec.config.allowed_lateness,
            ),
        );
        reference.check_counts(config, spec.events.len() as u64, result);
        reference
    }

    /// Checks the counts the fault-free run `result` (of `config`, any sink, over `events`
    /// events) reports, and the checkpoint files it left, against the model's, unless the
    /// reference already departs from the model. A run the sink itself
    /// made restart (a transaction timeout shorter than a checkpoint interval) has no
    /// single count to check; its verdicts show what went wrong.
    pub fn check_counts(&mut self, config: &EngineConfig, events: u64, result: &RunResult) {
        let [incarnation] = result.incarnations.as_slice() else {
            return;
        };
        let stats = &incarnation.stats;
        let counts = model::FaultFreeCounts {
            events_read: stats.processed_upto_index,
            written: stats.written,
            skipped: stats.skipped,
        };
        if self.model_mismatch.is_none() {
            self.model_mismatch = model::check_counts(counts, events, self.records.len() as u64);
        }
        if self.model_mismatch.is_none() {
            self.model_mismatch = match config.state_backend {
                keel_engine::StateBackend::Full => model::check_checkpoint_files(
                    &result.disk_files(),
                    events,
                    config.checkpoint_every,
                    config.protocol.in_place(),
                    config.sink.is_transactional(),
                ),
                keel_engine::StateBackend::Incremental => model::check_manifest_files(
                    &result.disk_files(),
                    events,
                    config.checkpoint_every,
                    config.sink.is_transactional(),
                ),
            };
        }
        // The recipe restates full checkpoints only (incremental.rs's header states its own
        // protocol; its files are checked above, its steps are not restated yet). The steps
        // are checked where the run kept its trace's lines (every sweep's and exploration's
        // baseline does, and `keel run`'s when it has a fault to judge); a streamed trace
        // keeps only its fingerprint, and its run (`keel run` without a fault, a million
        // events, say) needs no recipe at all.
        if !config.state_backend.is_full() || result.world.trace().is_streamed() {
            return;
        }
        let steps = recipe::fault_free_steps(config, events, &self.records);
        self.found = Some(recipe::FoundTimeline::of(&steps));
        if self.model_mismatch.is_none() {
            let run = result.world.trace().lines().filter_map(|line| match line {
                TraceLine::Step { op, target, .. } => Some((*op, target.as_str())),
                _ => None,
            });
            self.model_mismatch = recipe::check_steps(run, &steps);
        }
    }

    /// A reference from the engine's fault-free records, final windows and dropped events,
    /// checked against the model's.
    pub fn new(
        records: Vec<Record>,
        final_windows: BTreeMap<i64, i128>,
        dropped_late: u64,
        model: &model::ModelOutput,
    ) -> Reference {
        let model_mismatch = model::check(&records, &final_windows, dropped_late, model);
        Reference {
            records: records.into(),
            final_windows,
            dropped_late,
            model_mismatch,
            found: None,
            prepared: Arc::default(),
        }
    }
}

/// The oracle's verdict on one consumer view of one run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// The consumer view judged (transactional sink only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub view: Option<View>,
    /// Whole records the view holds.
    pub records: u64,
    /// Records of the fault-free run the view holds (each occurrence once).
    pub delivered: u64,
    /// Records delivered more than once (copies beyond the fault-free run's count).
    pub duplicates: u64,
    /// Records of the fault-free run the view never got.
    pub lost: u64,
    /// Records the fault-free run never emitted (a field differs).
    pub wrong: u64,
    /// Unreadable lines.
    pub corrupt: u64,
    /// Windows whose last value (records upserted by window end, in sink order) differs from
    /// the fault-free run's.
    pub stale_windows: u64,
    /// Restarts that restored an older checkpoint than the newest one committed.
    pub rolled_back: u64,
    pub recovery: Recovery,
    /// The final operator state equals the fault-free run's: its windows and its count of
    /// events dropped as later than the allowed lateness.
    pub final_windows_match: bool,
    pub restarts: u64,
    /// Files the run left beside the sink and its newest checkpoint (`bounded-disk`).
    pub stray_files: u64,
    /// Transactional sink, read_uncommitted: records shown that never committed.
    pub dirty_reads: u64,
    /// Transactional sink, read_committed: the longest wait from send to visibility (ms).
    pub visibility_delay_ms_max: u64,
    /// The first record the oracle could not match, for the report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_wrong: Option<String>,
    /// Where the fault-free run departs from the independent model (fails every command).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_mismatch: Option<ModelMismatch>,
    /// Each property, held or not.
    pub properties: BTreeMap<&'static str, bool>,
}

impl Judged for Verdict {
    fn lost(&self) -> u64 {
        self.lost
    }
    fn duplicates(&self) -> u64 {
        self.duplicates
    }
    fn wrong(&self) -> u64 {
        self.wrong
    }
    fn corrupt(&self) -> u64 {
        self.corrupt
    }
    fn rolled_back(&self) -> u64 {
        self.rolled_back
    }
    fn recovery(&self) -> Recovery {
        self.recovery
    }
    fn final_windows_match(&self) -> bool {
        self.final_windows_match
    }
    fn stale_windows(&self) -> u64 {
        self.stale_windows
    }
    fn stray_files(&self) -> u64 {
        self.stray_files
    }
}

impl Verdict {
    pub fn holds(&self, property: Property) -> bool {
        property.holds(self)
    }

    /// Whether every delivery property holds.
    pub fn exactly_once(&self) -> bool {
        Expectation::exactly_once().broken(self).is_empty()
    }

    /// Every property this view breaks, most serious first.
    pub fn broken(&self) -> Vec<Property> {
        Property::ALL
            .into_iter()
            .filter(|p| !p.holds(self))
            .collect()
    }

    /// Why this view fails what was asked (None: what the sink promises to the view); see
    /// [`crate::property::failures`]. Empty when it holds.
    pub fn failures(&self, asked: Option<&Expectation>, sink: SinkKind) -> Vec<String> {
        property::failures(
            &self.broken(),
            self.model_mismatch.is_some(),
            asked,
            sink,
            self.view,
        )
    }

    /// A short account of the figures: "exactly-once", or what went wrong
    /// ("duplicates=1 rolled_back=1").
    pub fn summary(&self) -> String {
        let mut summary = String::new();
        self.write_summary(&mut summary).expect("to a String");
        summary
    }

    /// [`Verdict::summary`] written into `out`.
    fn write_summary(&self, out: &mut impl std::fmt::Write) -> std::fmt::Result {
        let mut first = true;
        let mut part = |out: &mut dyn std::fmt::Write, args: std::fmt::Arguments| {
            if !std::mem::take(&mut first) {
                out.write_str(" ")?;
            }
            out.write_fmt(args)
        };
        if let Some(mismatch) = &self.model_mismatch {
            part(out, format_args!("model_mismatch({mismatch})"))?;
        }
        for (name, value) in [
            ("duplicates", self.duplicates),
            ("lost", self.lost),
            ("wrong", self.wrong),
            ("corrupt", self.corrupt),
            ("stale_windows", self.stale_windows),
            ("rolled_back", self.rolled_back),
            ("stray_files", self.stray_files),
        ] {
            if value > 0 {
                part(out, format_args!("{name}={value}"))?;
            }
        }
        if self.recovery != Recovery::Ok {
            part(out, format_args!("recovery={}", self.recovery))?;
        } else if !self.final_windows_match {
            part(out, format_args!("final_state_differs"))?;
        }
        if first {
            out.write_str("exactly-once")?;
        }
        Ok(())
    }

    /// Property by property, as judged by `judged`, for the tail of one verdict line: the
    /// judged ones broken first ("broken no-loss; recovers, no-wrong ok"), then the others
    /// after `others` ("not promised: no-duplicates FAILED, bounded-disk ok"), so a verdict
    /// that holds never stands beside an unmarked FAILED.
    pub fn properties_line(&self, judged: &Expectation, others: &str) -> String {
        let is_judged = |p: &Property| judged.properties().any(|q| q == *p);
        let names = |ps: &[Property]| ps.iter().map(|p| p.name()).collect::<Vec<_>>().join(", ");
        let (judged_all, other_all): (Vec<Property>, Vec<Property>) =
            Property::ALL.into_iter().partition(is_judged);
        let (ok, broken): (Vec<Property>, Vec<Property>) =
            judged_all.into_iter().partition(|p| p.holds(self));
        let mut parts = Vec::new();
        if !broken.is_empty() {
            parts.push(format!("broken {}", names(&broken)));
        }
        if !ok.is_empty() {
            parts.push(format!("{} ok", names(&ok)));
        }
        if !other_all.is_empty() {
            let states: Vec<String> = other_all
                .iter()
                .map(|p| {
                    let state = if p.holds(self) { "ok" } else { "FAILED" };
                    format!("{} {state}", p.name())
                })
                .collect();
            parts.push(format!("{others}: {}", states.join(", ")));
        }
        parts.join("; ")
    }
}

/// Judges every view of `observation` against `reference`.
pub fn judge(reference: &Reference, observation: &Observation) -> Vec<Verdict> {
    observation
        .views
        .iter()
        .map(|view| judge_view(reference, observation, view))
        .collect()
}

/// Judges the view `view` of `observation` (None: a file sink's only view).
pub fn judge_one(reference: &Reference, observation: &Observation, view: Option<View>) -> Verdict {
    judge_view(reference, observation, observation.view(view))
}

fn judge_view(reference: &Reference, observation: &Observation, seen: &ViewObservation) -> Verdict {
    let key = observation.key;
    let tallies = reference.tallies(key);
    let reference_len = reference.records.len() as u64;
    let judged = match &seen.records {
        Records::Own(records) => judge_records(tallies, reference_len, records, key),
        Records::Spliced(splice) => {
            let judged = reference
                .splice_base(&splice.known, key)
                .judge(tallies, key, splice);
            debug_assert_eq!(
                judged,
                judge_records(tallies, reference_len, &seen.records.to_vec(), key),
                "a splice is judged as its whole view is"
            );
            judged
        }
    };
    let Tally {
        delivered,
        duplicates,
        wrong,
        lost,
        stand_ins,
    } = judged.tally;
    let first_wrong = judged.first_wrong_at.map(|at| {
        seen.records
            .get(at)
            .expect("a place in the view")
            .to_json_line()
    });
    let records = seen.records.len() as u64;
    assert_eq!(records, delivered + duplicates + wrong);
    assert_eq!(reference_len, delivered + lost + stand_ins);

    let stale_windows = judged.stale_windows;
    // The final operator state: its windows and its count of events dropped as too late (a
    // figure the report prints, and state a checkpoint must carry across a restart).
    let final_windows_match = observation.recovery == Recovery::Ok
        && reference.has_final_windows(&observation.final_windows)
        && observation.dropped_late == reference.dropped_late;
    let mut verdict = Verdict {
        view: seen.view,
        records,
        delivered,
        duplicates,
        lost,
        wrong,
        corrupt: seen.corrupt_lines,
        stale_windows,
        rolled_back: observation.rolled_back,
        recovery: observation.recovery,
        final_windows_match,
        restarts: observation.restarts,
        stray_files: observation.stray_files.len() as u64,
        dirty_reads: seen.dirty_reads,
        visibility_delay_ms_max: seen.visibility_delay_ms_max,
        first_wrong,
        model_mismatch: reference.model_mismatch.clone().or_else(|| {
            observation
                .sink_writes
                .as_ref()
                .and_then(SinkWriteCounts::mismatch)
                .or_else(|| {
                    observation
                        .sink_outage
                        .as_ref()
                        .and_then(SinkOutage::mismatch)
                })
                .or_else(|| {
                    let restart = observation.restart.as_ref()?;
                    restart.mismatch(reference.found.as_ref()?)
                })
        }),
        properties: BTreeMap::new(),
    };
    verdict.properties = Property::ALL
        .into_iter()
        .map(|p| (p.name(), p.holds(&verdict)))
        .collect();
    verdict
}

/// Every view of a run, judged, with why each fails what was asked (empty when it holds).
pub fn judge_against(
    reference: &Reference,
    observation: &Observation,
    asked: Option<&Expectation>,
) -> Vec<(Verdict, Vec<String>)> {
    judge(reference, observation)
        .into_iter()
        .map(|verdict| {
            let failures = verdict.failures(asked, observation.sink);
            (verdict, failures)
        })
        .collect()
}

#[cfg(test)]
mod tests;
