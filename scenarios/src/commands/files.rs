//! The files commands read and write: events files and plan files.

use super::args::{scenario_spec, ScenarioArgs};
use crate::catalogue::{events_from_text, Scenario};
use crate::error::KeelError;
use crate::spec::ScenarioSpec;
use keel_engine::{Event, SinkKind};
use keel_sim::fault::PlanFile;
use keel_sim::FaultPlan;

/// The input events of a spec: a shipped scenario, or an events file read from disk.
pub(crate) fn load_events(spec: &ScenarioSpec) -> Result<Vec<Event>, KeelError> {
    match &spec.events {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| KeelError::usage(format!("cannot read events file {path}: {e}")))?;
            events_from_text(path, &text)
        }
        None => Ok(Scenario::by_name(&spec.label())?.events()),
    }
}

/// Checks the knobs, then loads the events.
pub(crate) fn prepare(args: &ScenarioArgs) -> Result<(ScenarioSpec, Vec<Event>), KeelError> {
    let spec = scenario_spec(args);
    spec.config(SinkKind::Append)?;
    let events = load_events(&spec)?;
    Ok((spec, events))
}

pub(crate) fn read_plan_file(path: &str) -> Result<FaultPlan, KeelError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| KeelError::usage(format!("cannot read plan file {path}: {e}")))?;
    let file: PlanFile = serde_json::from_str(&text).map_err(|e| {
        KeelError::usage(format!(
            "{path}: not a fault plan ({e}); a plan looks like {{\"faults\": [{{\"step\": 29, \"fault\": {{\"kind\": \"power-loss\", \"at\": \"after\", \"state\": 12}}}}]}}"
        ))
    })?;
    FaultPlan::from_file(file).map_err(|e| KeelError::usage(format!("{path}: {e}")))
}

pub(crate) fn write_plan_file(path: &str, plan: &FaultPlan) -> Result<(), KeelError> {
    let json = serde_json::to_string_pretty(&plan.to_file()).expect("plans serialize") + "\n";
    std::fs::write(path, json)
        .map_err(|e| KeelError::usage(format!("cannot write plan file {path}: {e}")))
}
