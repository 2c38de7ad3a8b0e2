//! Job plan files on the command line: `keel job run --save-plan` writes one, `keel replay
//! --plan` and `keel shrink --plan` recognise one (a top-level `"job"`) and replay or shrink
//! its run, schedule and faults together.

use super::args::Given;
use super::files::{read_events_source, write_atomically};
use super::job::{report_run, run_header};
use super::output::{Output, EXIT_VIOLATION};
use crate::catalogue::Scenario;
use crate::error::KeelError;
use crate::graph::oracle::{judge_spec, JobProperty};
use crate::graph::plan::SavedJobPlan;
use crate::graph::run;
use crate::graph::shrink::shrink;
use keel_engine::job::{read_keyed_events, KeyedEvent};
use keel_sim::FaultPlan;
use std::fmt::Write as _;
use std::path::Path;

/// The job plan at `path`, or None if the file is another kind of plan (the caller reads
/// it as one). An unreadable file or a broken job plan is an error naming the file.
pub(super) fn read_job_plan(path: &str) -> Result<Option<SavedJobPlan>, KeelError> {
    let text = super::files::read_plan_text(path)?;
    let value: serde_json::Value = match serde_json::from_str(&text) {
        Ok(value) => value,
        // Not JSON at all: the caller's reader says what a plan looks like.
        Err(_) => return Ok(None),
    };
    if value.get("job").is_none() {
        return Ok(None);
    }
    let saved: SavedJobPlan = serde_json::from_value(value)
        .map_err(|e| KeelError::usage(format!("{path}: not a job plan: {e}")))?;
    saved
        .plan()
        .map_err(|e| KeelError::usage(format!("{path}: {e}")))?;
    Ok(Some(saved))
}

/// A job plan carries its whole run: an option other than `allowed` (clap ids) given beside
/// it is an error naming it.
pub(super) fn reject_options_beside(
    path: &str,
    given: &Given,
    allowed: &[&str],
) -> Result<(), KeelError> {
    match given.ids().find(|id| !allowed.contains(id)) {
        Some(id) => Err(KeelError::usage(format!(
            "{path} is a job plan: it carries its run (events, knobs, schedule, faults); --{} does not apply to it",
            id.replace('_', "-")
        ))),
        None => Ok(()),
    }
}

/// The run a job plan names, on the events it names (checked against its digest).
fn spec_of_plan(path: &str, saved: &SavedJobPlan) -> Result<crate::graph::GraphSpec, KeelError> {
    let sources = saved.job.config.sources;
    let events: Vec<KeyedEvent> = match (&saved.job.scenario, &saved.job.events) {
        (Some(name), None) => KeyedEvent::from_events(&Scenario::by_name(name)?.events(), sources),
        (None, Some(file)) => read_events_source(file, |reader| read_keyed_events(reader, sources))
            .map_err(|e| KeelError::usage(format!("{path}: {}", e.message)))?,
        _ => {
            return Err(KeelError::usage(format!(
                "{path}: a job plan names its events by \"scenario\" or by \"events\", one of them"
            )))
        }
    };
    saved
        .spec(events)
        .map_err(|e| KeelError::usage(format!("{path}: {e}")))
}

/// Writes a job plan file (atomically).
pub(super) fn write_job_plan(path: &str, saved: &SavedJobPlan) -> Result<(), KeelError> {
    write_atomically(Path::new(path), saved.to_pretty_json().as_bytes())
        .map_err(|e| KeelError::usage(format!("cannot write plan file {path}: {e}")))
}

/// `keel replay --plan FILE` of a job plan: the run, its whole trace and its verdict; with
/// `check_determinism`, run twice and fail on the first differing trace line.
pub(super) fn replay_job_plan(
    path: &str,
    saved: &SavedJobPlan,
    check_determinism: bool,
) -> Result<Output, KeelError> {
    let spec = spec_of_plan(path, saved)?;
    let ran = run(&spec);
    let verdict = judge_spec(&spec, &ran);
    let mut out = run_header(&spec);
    writeln!(out, "plan={path}").unwrap();
    for line in ran.world.trace().text_lines() {
        writeln!(out, "  {line}").unwrap();
    }
    for crash in &ran.crashes {
        writeln!(out, "crash: {crash}").unwrap();
    }
    report_run(&mut out, &spec, &ran, &verdict);
    if check_determinism {
        let again = run(&spec);
        let first = ran.world.trace().text_lines();
        let second = again.world.trace().text_lines();
        let lines = first.len().max(second.len());
        if let Some(i) = (0..lines).find(|&i| first.get(i) != second.get(i)) {
            let show = |line: Option<&String>| line.map_or("(none)".to_string(), String::clone);
            writeln!(
                out,
                "NONDETERMINISM: the traces differ at line {i}\n  first:  {}\n  second: {}",
                show(first.get(i)),
                show(second.get(i))
            )
            .unwrap();
            return Ok(Output {
                stdout: out,
                exit_code: EXIT_VIOLATION,
            });
        }
        writeln!(
            out,
            "determinism: two runs, the same {} trace lines, fingerprint {}",
            first.len(),
            again.fingerprint()
        )
        .unwrap();
    }
    Ok(Output::ok(out))
}

/// `keel shrink --plan FILE` of a job plan: its schedule and its crash reduced to a minimal
/// point that still breaks a property its sink promises, written back as a plan with
/// `save_plan`.
pub(super) fn shrink_job_plan(
    path: &str,
    saved: &SavedJobPlan,
    save_plan: Option<&str>,
) -> Result<Output, KeelError> {
    let spec = spec_of_plan(path, saved)?;
    if spec.plan.iter().count() > 1 || spec.plan.kill_time_ms().is_some() {
        return Err(KeelError::usage(format!(
            "{path}: the job shrinker takes a plan of one fault at a step (this one has {} and {} kill by the clock)",
            spec.plan.iter().count(),
            if spec.plan.kill_time_ms().is_some() { "a" } else { "no" }
        )));
    }
    let expected = JobProperty::promised_by(spec.config.sink);
    let mut out = run_header(&spec);
    writeln!(out, "plan={path}").unwrap();
    let Some(shrunk) = shrink(&spec, expected) else {
        let names: Vec<&str> = expected.iter().map(|p| p.name()).collect();
        writeln!(
            out,
            "nothing to shrink: the plan breaks none of {}",
            names.join(", ")
        )
        .unwrap();
        return Ok(Output::ok(out));
    };
    let names: Vec<&str> = shrunk.broken.iter().map(|p| p.name()).collect();
    writeln!(
        out,
        "shrunk ({} runs): {} broken; the schedule departs from round-robin at {} of {} choices; fault: {}",
        shrunk.runs,
        names.join(", "),
        shrunk.departures,
        shrunk.schedule.len(),
        shrunk
            .fault
            .map_or("none".to_string(), |f| format!("{} at step {}", f.fault, f.step))
    )
    .unwrap();
    let plan = FaultPlan::new(shrunk.fault).expect("at most one fault");
    let shrunk_plan = SavedJobPlan {
        faults: plan.faults(),
        kill_at_ms: None,
        schedule: shrunk.schedule.clone(),
        ..saved.clone()
    };
    match save_plan {
        Some(file) => {
            write_job_plan(file, &shrunk_plan)?;
            writeln!(out, "reproduce: keel replay --plan {file}").unwrap();
        }
        None => writeln!(
            out,
            "save it with --save-plan FILE; keel replay --plan FILE replays it"
        )
        .unwrap(),
    }
    Ok(Output::ok(out))
}
