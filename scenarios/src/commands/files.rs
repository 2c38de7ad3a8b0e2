//! The files commands read and write: events files and plan files.

use super::args::{scenario_spec, ScenarioArgs};
use crate::catalogue::{events_from_text, Scenario};
use crate::error::KeelError;
use crate::plan_file::SavedPlan;
use crate::spec::ScenarioSpec;
use keel_engine::{Event, SinkKind};

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
    prepare_spec(scenario_spec(args))
}

/// Checks a spec's knobs, then loads its events.
pub(crate) fn prepare_spec(spec: ScenarioSpec) -> Result<(ScenarioSpec, Vec<Event>), KeelError> {
    spec.config(SinkKind::Append)?;
    let events = load_events(&spec)?;
    Ok((spec, events))
}

/// A plan file, checked: JSON of the right shape, at most one fault per step.
pub(crate) fn read_plan_file(path: &str) -> Result<SavedPlan, KeelError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| KeelError::usage(format!("cannot read plan file {path}: {e}")))?;
    let file: SavedPlan = serde_json::from_str(&text).map_err(|e| {
        KeelError::usage(format!(
            "{path}: not a fault plan ({e}); a plan looks like {{\"faults\": [{{\"step\": 29, \"fault\": {{\"kind\": \"power-loss\", \"at\": \"after\", \"state\": 12}}}}]}}, with the run it belongs to in \"spec\", \"sink\" and \"view\" when --save-plan wrote it"
        ))
    })?;
    file.plan()
        .map_err(|e| KeelError::usage(format!("{path}: {e}")))?;
    Ok(file)
}

pub(crate) fn write_plan_file(path: &str, plan: &SavedPlan) -> Result<(), KeelError> {
    std::fs::write(path, plan.to_pretty_json())
        .map_err(|e| KeelError::usage(format!("cannot write plan file {path}: {e}")))
}
