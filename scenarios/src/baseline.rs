//! The fault-free run of one sink: the sites faults can be aimed at, and the output the
//! oracle expects. (The plan a seed draws on a baseline is `explore`'s: see `explore.rs`.)

use crate::error::KeelError;
use crate::runner::{run, run_recording_crash_counts, RunSpec};
use crate::sites::{site_aims, SiteAims};
use crate::spec::ScenarioSpec;
use crate::verdict::Reference;
use keel_engine::{Event, SinkKind};
use keel_sim::{CrashCounts, FaultPlan};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The fault-free run of one sink: sites to aim at and what the sink should get.
#[derive(Clone, Debug)]
pub struct Baseline {
    pub spec: RunSpec,
    pub sites: SiteAims,
    /// Whether the sites carry their power-loss crash-state counts (else every count is
    /// None: a sweep without power loss does not read them).
    pub crash_states_counted: bool,
    /// What every sink should end up holding (checked against the independent model).
    pub reference: Reference,
}

/// Whether a baseline counts each site's power-loss crash states: only a sweep that aims
/// power losses reads them, and counting them is most of a long fault-free run's cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashStates {
    Counted,
    /// The classes of them (`--power-loss-points classes`).
    Classes,
    /// The classes split by tail (`--power-loss-points classes` at depth 2, where a fault
    /// follows a power loss: `keel_sim::CrashCounts::TailClasses`).
    TailClasses,
    NotCounted,
}

impl CrashStates {
    /// What a run records to count them (None: nothing).
    pub fn counts(self) -> Option<CrashCounts> {
        match self {
            CrashStates::Counted => Some(CrashCounts::States),
            CrashStates::Classes => Some(CrashCounts::Classes),
            CrashStates::TailClasses => Some(CrashCounts::TailClasses),
            CrashStates::NotCounted => None,
        }
    }
}

impl Baseline {
    pub fn new(spec: RunSpec) -> Baseline {
        Baseline::with(spec, CrashStates::Counted, &mut None)
    }

    /// The baseline of `spec`, counting crash states if asked. `reference` is the
    /// reference of the same events and knobs on any sink (the reference run is on the
    /// append sink whatever the sink: `Reference::for_spec`), made here if None.
    pub fn with(
        spec: RunSpec,
        crash_states: CrashStates,
        reference: &mut Option<Reference>,
    ) -> Baseline {
        let counted = crash_states != CrashStates::NotCounted;
        let fault_free = match crash_states.counts() {
            Some(counts) => run_recording_crash_counts(&spec, counts),
            None => run(&spec),
        };
        let sites = site_aims(&fault_free, counted);
        let mut reference = reference
            .get_or_insert_with(|| Reference::for_spec_given(&spec, &fault_free))
            .clone();
        reference.check_counts(&spec.config, spec.events.len() as u64, &fault_free);
        Baseline {
            spec,
            sites,
            crash_states_counted: counted,
            reference,
        }
    }
}

/// The fault-free run of every sink a sweep or an exploration covers.
pub fn baselines(
    spec: &ScenarioSpec,
    events: &[Event],
    sinks: &[SinkKind],
) -> Result<BTreeMap<SinkKind, Baseline>, KeelError> {
    baselines_with(spec, events, sinks, CrashStates::Counted)
}

/// [`baselines`], counting crash states only if asked.
pub fn baselines_with(
    spec: &ScenarioSpec,
    events: &[Event],
    sinks: &[SinkKind],
    crash_states: CrashStates,
) -> Result<BTreeMap<SinkKind, Baseline>, KeelError> {
    baselines_sharing(spec, events.into(), sinks, crash_states)
}

/// [`baselines_with`] on events already shared: every sink's runs read this one copy.
pub fn baselines_sharing(
    spec: &ScenarioSpec,
    events: Arc<[Event]>,
    sinks: &[SinkKind],
    crash_states: CrashStates,
) -> Result<BTreeMap<SinkKind, Baseline>, KeelError> {
    // The append sink's first: its fault-free run is the reference run (with the chapter's
    // keys), which every other sink's baseline then takes instead of running it again.
    let mut order = sinks.to_vec();
    order.sort_by_key(|&sink| sink != SinkKind::Append);
    let mut reference = None;
    order
        .into_iter()
        .map(|sink| {
            let spec = spec.run_spec_on(events.clone(), sink, FaultPlan::none())?;
            Ok((sink, Baseline::with(spec, crash_states, &mut reference)))
        })
        .collect()
}
