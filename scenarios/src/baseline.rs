//! The fault-free run of one sink: the sites faults can be aimed at, and the output the
//! oracle expects. (The plan a seed draws on a baseline is `explore`'s: see `explore.rs`.)

use crate::error::KeelError;
use crate::runner::RunSpec;
use crate::sites::{sites, SiteRow};
use crate::spec::ScenarioSpec;
use crate::verdict::Reference;
use keel_engine::{Event, SinkKind};
use keel_sim::FaultPlan;
use std::collections::BTreeMap;

/// The fault-free run of one sink: sites to aim at and what the sink should get.
#[derive(Clone, Debug)]
pub struct Baseline {
    pub spec: RunSpec,
    pub sites: Vec<SiteRow>,
    /// What every sink should end up holding (checked against the independent model).
    pub reference: Reference,
}

impl Baseline {
    pub fn new(spec: RunSpec) -> Baseline {
        let (fault_free, sites) = sites(&spec);
        let mut reference = Reference::for_spec_given(&spec, &fault_free);
        reference.check_counts(&spec.config, spec.events.len() as u64, &fault_free);
        Baseline {
            spec,
            sites,
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
    sinks
        .iter()
        .map(|&sink| {
            Ok((
                sink,
                Baseline::new(spec.run_spec(events, sink, FaultPlan::none())?),
            ))
        })
        .collect()
}
