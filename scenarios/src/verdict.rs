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
use crate::observation::records::{KnownRecords, Records};
pub use crate::observation::Recovery;
use crate::observation::{Observation, SinkOutage, SinkWriteCounts, ViewObservation};
use crate::property::{self, Expectation, Property};
use crate::recipe;
use crate::runner::{run, Outcome, RunResult, RunSpec, View};
use keel_engine::{EngineConfig, KeyScheme, Record, SinkKind};
use keel_sim::{FaultPlan, Fingerprint, TraceLine};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

mod identity;
mod splice;

use identity::{judge_records, ReferenceTallies, Tally};

/// What the fault-free run delivered: the reference every faulty run is judged against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    /// The fault-free run's records in emission order, with the chapter's stable keys.
    pub records: Vec<Record>,
    pub final_windows: BTreeMap<i64, i128>,
    /// Events the fault-free run dropped as later than the allowed lateness.
    pub dropped_late: u64,
    /// Where the fault-free run departs from the independent model, if it does.
    pub model_mismatch: Option<ModelMismatch>,
    /// What a process killed after each step of the fault-free run finds on its disk, by the
    /// protocol's recipe (None until the counts of a one-incarnation run were checked).
    pub found: Option<recipe::FoundTimeline>,
    /// What judging needs of `records` alone, built at the first judgement and reused by
    /// every later one (`records` are not changed once a run was judged against them).
    prepared: Prepared,
}

/// The reference side of every judgement, built once per key scheme (a processing-time key
/// names no event, so its slots are coarser), and the final windows' text.
#[derive(Clone, Debug, Default)]
struct Prepared {
    event_index: OnceLock<ReferenceTallies>,
    processing_time: OnceLock<ReferenceTallies>,
    /// The hash of the final windows' text (`Reference::final_windows_hash`).
    final_windows_hash: OnceLock<u64>,
    spliced: SpliceBases,
    compared_windows: ComparedWindows,
}

/// The most shared final windows whose comparison with the reference's a reference keeps.
const COMPARED_WINDOWS_MAX: usize = 16;

/// Shared final windows (`observation::FinalState`) already compared with the reference's,
/// and whether they were equal, the oldest dropped beyond [`COMPARED_WINDOWS_MAX`]: the
/// points of a sweep that end alike share one map, compared once instead of once a point.
/// Each is kept alive here, so its address is not reused while it is remembered. A cache: a
/// clone starts empty.
#[derive(Debug, Default)]
struct ComparedWindows(Mutex<Vec<ComparedWindow>>);

/// Shared final windows, whether they are the reference's, and the hash of their text.
#[derive(Clone, Debug)]
struct ComparedWindow {
    windows: SharedWindows,
    equal: bool,
    text_hash: u64,
}

/// Final windows as points share them.
pub type SharedWindows = Arc<BTreeMap<i64, i128>>;

impl Clone for ComparedWindows {
    fn clone(&self) -> ComparedWindows {
        ComparedWindows::default()
    }
}

/// The most known files whose judgement a reference keeps (one a sink and key scheme is what
/// a sweep needs).
const SPLICE_BASES_MAX: usize = 4;

/// Known files judged against the reference, by key scheme, to judge their splices from
/// (`verdict/splice.rs`), the oldest dropped beyond [`SPLICE_BASES_MAX`]. A cache: a clone
/// starts empty.
#[derive(Debug, Default)]
struct SpliceBases(Mutex<Vec<SpliceBase>>);

/// A known file, the key scheme it was judged as, and its judgement.
type SpliceBase = (Arc<KnownRecords>, KeyScheme, Arc<splice::Base>);

impl Clone for SpliceBases {
    fn clone(&self) -> SpliceBases {
        SpliceBases::default()
    }
}

/// A cache, not part of the reference's value: two references with the same fields are equal
/// whatever either has prepared.
impl PartialEq for Prepared {
    fn eq(&self, _: &Prepared) -> bool {
        true
    }
}

impl Eq for Prepared {}

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
            self.model_mismatch = match config.checkpoint_mode {
                keel_engine::CheckpointMode::Full => model::check_checkpoint_files(
                    &result.disk_files(),
                    events,
                    config.checkpoint_every,
                    config.protocol.in_place(),
                    config.sink.is_transactional(),
                ),
                keel_engine::CheckpointMode::Incremental => model::check_manifest_files(
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
        if !config.checkpoint_mode.is_full() || result.world.trace().is_streamed() {
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
            records,
            final_windows,
            dropped_late,
            model_mismatch,
            found: None,
            prepared: Prepared::default(),
        }
    }

    /// The FNV-1a 64 of `keel_engine::format_windows(windows)` (hashed once per shared map).
    pub fn final_windows_hash(&self, windows: &SharedWindows) -> u64 {
        self.compared_windows(windows).text_hash
    }

    /// Whether `windows` are the reference's final windows (compared once per shared map).
    pub fn has_final_windows(&self, windows: &SharedWindows) -> bool {
        self.compared_windows(windows).equal
    }

    /// What is known of `windows`, worked out at the first sight of the shared map.
    fn compared_windows(&self, windows: &SharedWindows) -> ComparedWindow {
        let mut compared = self
            .prepared
            .compared_windows
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(known) = compared.iter().find(|c| Arc::ptr_eq(&c.windows, windows)) {
            return known.clone();
        }
        let text_hash =
            |windows| Fingerprint::of(keel_engine::format_windows(windows).as_bytes()).0;
        let equal = **windows == self.final_windows;
        let known = ComparedWindow {
            windows: Arc::clone(windows),
            equal,
            text_hash: if equal {
                *self
                    .prepared
                    .final_windows_hash
                    .get_or_init(|| text_hash(&self.final_windows))
            } else {
                text_hash(windows)
            },
        };
        if compared.len() == COMPARED_WINDOWS_MAX {
            compared.remove(0);
        }
        compared.push(known.clone());
        known
    }

    /// `known` judged against the reference as a run keyed by `key`, built at the first call.
    fn splice_base(&self, known: &Arc<KnownRecords>, key: KeyScheme) -> Arc<splice::Base> {
        let mut bases = self
            .prepared
            .spliced
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((_, _, base)) = bases
            .iter()
            .find(|(k, scheme, _)| Arc::ptr_eq(k, known) && *scheme == key)
        {
            return Arc::clone(base);
        }
        let base = Arc::new(splice::Base::of(
            self.tallies(key),
            self.records.len() as u64,
            &known.records,
            key,
        ));
        if bases.len() == SPLICE_BASES_MAX {
            bases.remove(0);
        }
        bases.push((Arc::clone(known), key, Arc::clone(&base)));
        base
    }

    /// The reference side of a judgement of a run keyed by `key`, built at the first call.
    fn tallies(&self, key: KeyScheme) -> &ReferenceTallies {
        let cell = match key {
            KeyScheme::EventIndex => &self.prepared.event_index,
            KeyScheme::ProcessingTime => &self.prepared.processing_time,
        };
        let tallies = cell.get_or_init(|| ReferenceTallies::of(&self.records, key));
        debug_assert_eq!(
            tallies.slots.values().map(|(total, _)| total).sum::<u64>(),
            self.records.len() as u64,
            "the records did not change since they were tallied"
        );
        tallies
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
    pub properties: BTreeMap<String, bool>,
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
        let mut parts = Vec::new();
        if let Some(mismatch) = &self.model_mismatch {
            parts.push(format!("model_mismatch({mismatch})"));
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
                parts.push(format!("{name}={value}"));
            }
        }
        if self.recovery != Recovery::Ok {
            parts.push(format!("recovery={}", self.recovery));
        } else if !self.final_windows_match {
            parts.push("final_state_differs".to_string());
        }
        if parts.is_empty() {
            "exactly-once".to_string()
        } else {
            parts.join(" ")
        }
    }

    /// Property by property, as judged by `judged`: "no-loss ok, no-duplicates FAILED, ...";
    /// a property outside `judged` is marked "(not judged)" (a read_uncommitted consumer's
    /// duplicates, say).
    pub fn properties_line(&self, judged: &Expectation) -> String {
        Property::ALL
            .into_iter()
            .map(|p| {
                let state = if p.holds(self) { "ok" } else { "FAILED" };
                if judged.properties().any(|q| q == p) {
                    format!("{} {state}", p.name())
                } else {
                    format!("{} {state} (not judged)", p.name())
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
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
        .map(|p| (p.name().to_string(), p.holds(&verdict)))
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
mod tests {
    use super::identity::{content, slot, upsert, Content, Slot, Trigger};
    use super::*;
    use crate::observation::ViewObservation;
    use keel_engine::RecordKind;

    fn rec(key: &str, window_end: i64, sum: i128, watermark: i64, kind: RecordKind) -> Record {
        Record {
            key: key.to_string(),
            window_end,
            sum,
            watermark,
            kind,
        }
    }

    /// The chapter's fault-free output on ch04.
    fn ch04() -> Vec<Record> {
        vec![
            rec("13:10", 10, 55, 10, RecordKind::Fire),
            rec("24:20", 20, 138, 21, RecordKind::Fire),
            rec("25:20", 20, 155, 21, RecordKind::LateUpdate),
            rec("flush:30", 30, 255, 24, RecordKind::Flush),
        ]
    }

    fn finals() -> BTreeMap<i64, i128> {
        BTreeMap::from([(10, 55), (20, 155), (30, 255)])
    }

    pub(super) fn reference(records: Vec<Record>) -> Reference {
        Reference {
            records,
            final_windows: finals(),
            dropped_late: 0,
            model_mismatch: None,
            found: None,
            prepared: Prepared::default(),
        }
    }

    fn observation(key: KeyScheme, records: Vec<Record>) -> Observation {
        Observation {
            sink: SinkKind::Append,
            key,
            views: vec![ViewObservation {
                view: None,
                records: records.into(),
                ..ViewObservation::default()
            }],
            recovery: Recovery::Ok,
            final_windows: finals().into(),
            dropped_late: 0,
            rolled_back: 0,
            restarts: 1,
            stray_files: Vec::new(),
            sink_writes: None,
            sink_outage: None,
            restart: None,
        }
    }

    /// Judges `seen` against `want` and compares the figures
    /// (delivered, duplicates, lost, wrong, stale_windows) and the broken properties.
    fn check(
        key: KeyScheme,
        want: Vec<Record>,
        seen: Vec<Record>,
        figures: (u64, u64, u64, u64, u64),
        broken: &[&str],
    ) {
        let verdicts = judge(&reference(want), &observation(key, seen));
        let v = &verdicts[0];
        assert_eq!(
            (v.delivered, v.duplicates, v.lost, v.wrong, v.stale_windows),
            figures,
            "{v:?}"
        );
        assert_eq!(
            v.failures(Some(&Expectation::exactly_once()), SinkKind::Append),
            broken,
            "{v:?}"
        );
    }

    #[test]
    fn a_restart_that_forgets_the_dropped_late_count_does_not_recover() {
        // The sink is right, but the final state counts 2 dropped events where the
        // fault-free run counted 3 (a checkpoint that did not carry the count).
        let mut want = reference(ch04());
        want.dropped_late = 3;
        let mut seen = observation(KeyScheme::EventIndex, ch04());
        seen.dropped_late = 2;
        let v = &judge(&want, &seen)[0];
        assert!(!v.final_windows_match);
        assert_eq!(
            v.failures(Some(&Expectation::exactly_once()), SinkKind::Append),
            ["recovers"]
        );
        seen.dropped_late = 3;
        assert!(judge(&want, &seen)[0].final_windows_match);
    }

    /// The judgement as it was first written (every reference record and every view record
    /// in one map, per point): (delivered, duplicates, lost, wrong, stale windows, first
    /// wrong record).
    fn judged_in_one_map(
        want: &[Record],
        seen: &[Record],
        key: KeyScheme,
    ) -> (u64, u64, u64, u64, u64, Option<String>) {
        let mut slots: BTreeMap<Slot, BTreeMap<Content, (u64, u64)>> = BTreeMap::new();
        for record in want {
            slots
                .entry(slot(record, key))
                .or_default()
                .entry(content(record))
                .or_default()
                .0 += 1;
        }
        let mut first_wrong = None;
        for record in seen {
            let copies = slots
                .entry(slot(record, key))
                .or_default()
                .entry(content(record))
                .or_default();
            if copies.0 == 0 && first_wrong.is_none() {
                first_wrong = Some(record.to_json_line());
            }
            copies.1 += 1;
        }
        let (mut delivered, mut duplicates, mut wrong, mut lost) = (0, 0, 0, 0);
        for contents in slots.values() {
            let (mut missing, mut foreign) = (0, 0);
            for &(want, got) in contents.values() {
                delivered += want.min(got);
                if want == 0 {
                    foreign += got;
                } else {
                    duplicates += got.saturating_sub(want);
                    missing += want.saturating_sub(got);
                }
            }
            wrong += foreign;
            lost += missing.saturating_sub(foreign);
        }
        let (want, got) = (upsert(want), upsert(seen));
        let mut ends: Vec<i64> = want.keys().chain(got.keys()).copied().collect();
        ends.sort_unstable();
        ends.dedup();
        let stale = ends
            .iter()
            .filter(|end| want.get(end) != got.get(end))
            .count() as u64;
        (delivered, duplicates, lost, wrong, stale, first_wrong)
    }

    #[test]
    fn the_judgement_is_the_one_map_judgement_on_every_edit_of_ch04() {
        // Every view made of ch04's records with one record dropped, repeated at any place,
        // or changed in one field, and then one more such edit, under both key schemes.
        let edits = |records: &[Record]| -> Vec<Vec<Record>> {
            let mut out = Vec::new();
            for i in 0..records.len() {
                let mut dropped = records.to_vec();
                dropped.remove(i);
                out.push(dropped);
                for at in 0..=records.len() {
                    let mut repeated = records.to_vec();
                    repeated.insert(at, records[i].clone());
                    out.push(repeated);
                }
                for change in 0..5 {
                    let mut changed = records.to_vec();
                    let r = &mut changed[i];
                    match change {
                        0 => r.sum += 1,
                        1 => r.watermark += 1,
                        2 => r.window_end += 10,
                        3 => r.key = format!("0{}", r.key),
                        _ => r.kind = RecordKind::LateUpdate,
                    }
                    out.push(changed);
                }
            }
            out
        };
        let want = ch04();
        let mut judged = 0;
        for key in [KeyScheme::EventIndex, KeyScheme::ProcessingTime] {
            let reference = reference(want.clone());
            for once in edits(&want) {
                for seen in edits(&once) {
                    let v = &judge(&reference, &observation(key, seen.clone()))[0];
                    assert_eq!(
                        (
                            v.delivered,
                            v.duplicates,
                            v.lost,
                            v.wrong,
                            v.stale_windows,
                            v.first_wrong.clone()
                        ),
                        judged_in_one_map(&want, &seen, key),
                        "{seen:?}"
                    );
                    judged += 1;
                }
            }
        }
        assert_eq!(judged, 4_400);
    }

    #[test]
    fn triggers_are_equal_exactly_when_their_texts_are() {
        let texts = [
            "0",
            "00",
            "7",
            "07",
            "+7",
            "-7",
            "13",
            "flush",
            "",
            "18446744073709551615",
            "18446744073709551616",
            "1 3",
        ];
        for a in texts {
            for b in texts {
                assert_eq!(Trigger::of(a) == Trigger::of(b), a == b, "{a:?} {b:?}");
            }
        }
        assert_eq!(Trigger::of("13"), Trigger::Index(13));
        assert_eq!(Trigger::of("013"), Trigger::Text("013".to_string()));
        assert_eq!(
            Trigger::of("18446744073709551616"),
            Trigger::Text("18446744073709551616".to_string())
        );
    }

    #[test]
    fn the_fault_free_output_is_exactly_once() {
        check(KeyScheme::EventIndex, ch04(), ch04(), (4, 0, 0, 0, 0), &[]);
    }

    #[test]
    fn a_replayed_record_is_a_duplicate_not_a_loss() {
        let mut seen = ch04();
        seen.insert(1, rec("13:10", 10, 55, 10, RecordKind::Fire));
        check(
            KeyScheme::EventIndex,
            ch04(),
            seen,
            (4, 1, 0, 0, 0),
            &["no-duplicates"],
        );
    }

    #[test]
    fn equal_records_are_a_multiset_not_one_identity() {
        // The twins stream: two late updates with equal content, keyed by processing time.
        let want = vec![
            rec("1:10", 10, 1, 15, RecordKind::Fire),
            rec("2:10", 10, 1, 15, RecordKind::LateUpdate),
            rec("3:10", 10, 1, 15, RecordKind::LateUpdate),
            rec("flush:30", 30, 1, 15, RecordKind::Flush),
        ];
        let seen = vec![
            rec("pt300:10", 10, 1, 15, RecordKind::Fire),
            rec("pt600:10", 10, 1, 15, RecordKind::LateUpdate),
            rec("pt900:10", 10, 1, 15, RecordKind::LateUpdate),
            rec("flush:30", 30, 1, 15, RecordKind::Flush),
        ];
        let mut reference = reference(want.clone());
        reference.final_windows = BTreeMap::from([(10, 1), (30, 1)]);
        let mut seen_obs = observation(KeyScheme::ProcessingTime, seen.clone());
        seen_obs.final_windows = reference.final_windows.clone().into();
        let v = &judge(&reference, &seen_obs)[0];
        assert_eq!((v.delivered, v.duplicates, v.lost, v.wrong), (4, 0, 0, 0));
        // One copy short is one loss; a third copy is one duplicate.
        let mut short = seen_obs.clone();
        let mut fewer = seen.clone();
        fewer.remove(2);
        short.views[0].records = fewer.into();
        let v = &judge(&reference, &short)[0];
        assert_eq!((v.delivered, v.duplicates, v.lost, v.wrong), (3, 0, 1, 0));
        let mut extra = seen_obs;
        let mut more = seen;
        more.push(rec("pt1200:10", 10, 1, 15, RecordKind::LateUpdate));
        extra.views[0].records = more.into();
        let v = &judge(&reference, &extra)[0];
        assert_eq!((v.delivered, v.duplicates, v.lost, v.wrong), (4, 1, 0, 0));
    }

    #[test]
    fn a_watermark_off_by_one_after_recovery_is_wrong() {
        // Mutation: records written after recovery carry watermark + 1.
        let mut seen = ch04();
        seen[2].watermark += 1;
        seen[3].watermark += 1;
        check(
            KeyScheme::EventIndex,
            ch04(),
            seen,
            (2, 0, 0, 2, 0),
            &["no-wrong"],
        );
    }

    #[test]
    fn records_replayed_in_reverse_order_leave_a_stale_window() {
        // Mutation: recovery writes its records in reverse order, so a consumer that keeps
        // the last value per window ends with 138 for window 20.
        let mut seen = ch04()[..1].to_vec();
        seen.extend(ch04()[1..].iter().rev().cloned());
        check(
            KeyScheme::EventIndex,
            ch04(),
            seen,
            (4, 0, 0, 0, 1),
            &["consistent-view"],
        );
    }

    #[test]
    fn a_wrong_sum_is_wrong_not_lost() {
        let mut seen = ch04();
        seen[1].sum = 137;
        check(
            KeyScheme::EventIndex,
            ch04(),
            seen,
            (3, 0, 0, 1, 0),
            &["no-wrong"],
        );
        let mut seen = ch04();
        seen.remove(2);
        check(
            KeyScheme::EventIndex,
            ch04(),
            seen,
            (3, 0, 1, 0, 1),
            &["no-loss", "consistent-view"],
        );
    }

    #[test]
    fn a_model_mismatch_fails_whatever_was_asked() {
        let mut reference = reference(ch04());
        reference.model_mismatch = Some(ModelMismatch {
            at: "record 0".to_string(),
            model: "x".to_string(),
            engine: "y".to_string(),
        });
        let v = &judge(&reference, &observation(KeyScheme::EventIndex, ch04()))[0];
        assert_eq!(
            v.failures(
                Some(&Expectation::parse("no-loss").unwrap()),
                SinkKind::Append
            ),
            ["matches-model"]
        );
        assert!(v.summary().starts_with("model_mismatch("));
    }
}
