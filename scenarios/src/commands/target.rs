//! What `keel replay` and `keel shrink` work on: one seed's plan (or a plan file) on one
//! sink, run once and judged.

use super::args::{
    check_outage_ms, scenario_spec, view_for, Given, SeedRange, SinkArg, TargetArgs,
};
use super::explore::explore_spec;
use super::files::{prepare, prepare_spec, read_plan_file};
use crate::baseline::Baseline;
use crate::error::KeelError;
use crate::explore::ExploreSpec;
use crate::observation::Observation;
use crate::plan_file::SavedPlan;
use crate::property::Expectation;
use crate::runner::{run, RunResult, RunSpec, View};
use crate::spec::ScenarioSpec;
use crate::verdict::{judge_one, Verdict};
use keel_engine::{Event, KeyScheme, SinkKind};
use keel_sim::{FaultPlan, TraceLine};

/// A seed's plan (or a plan file) on one sink, run once and judged.
pub(crate) struct Target {
    pub(crate) spec: ScenarioSpec,
    pub(crate) sink: SinkKind,
    pub(crate) explore: ExploreSpec,
    pub(crate) baseline: Baseline,
    pub(crate) run_spec: RunSpec,
    pub(crate) result: RunResult,
    /// The consumer view judged (transactional sink only).
    pub(crate) view: Option<View>,
    pub(crate) verdict: Verdict,
    /// Why the run fails what was asked (empty when it holds).
    pub(crate) failures: Vec<String>,
}

pub(crate) fn load_target(
    args: &TargetArgs,
    expect: Option<Expectation>,
) -> Result<Target, KeelError> {
    check_outage_ms(&args.scenario.given, &args.plans.faults)?;
    let saved = match &args.plan {
        Some(path) => Some((path.as_str(), read_plan_file(path)?)),
        None => None,
    };
    let ((spec, events), sink, view) = match &saved {
        Some((path, saved)) => run_of_plan(path, saved, args)?,
        None => (
            prepare(&args.scenario)?,
            SinkKind::from(args.sink),
            args.view.map(View::from),
        ),
    };
    let view = view_for(sink, view)?;
    let seeds = SeedRange {
        start: spec.seed,
        end: spec.seed.saturating_add(1),
    };
    let explore = explore_spec(&args.plans, &[SinkArg::from(sink)], seeds, expect);
    let baseline = Baseline::new(spec.run_spec(&events, sink, FaultPlan::none())?);
    let run_spec = match &saved {
        Some((_, saved)) => RunSpec {
            plan: saved.plan().expect("read_plan_file checked the plan"),
            ..baseline.spec.clone()
        },
        None => baseline.seed_spec(&explore, spec.seed),
    };
    let result = run(&run_spec);
    if let Some((path, _)) = &saved {
        check_plan_applies(path, &run_spec.plan, &result)?;
    }
    let verdict = judge_one(
        &baseline.reference,
        &Observation::of(&result, &run_spec.config),
        view,
    );
    let failures = verdict.failures(explore.expect.as_ref(), sink);
    Ok(Target {
        spec,
        sink,
        explore,
        baseline,
        run_spec,
        result,
        view,
        verdict,
        failures,
    })
}

/// The checked spec and its events, the sink and the view (before `view_for`).
type RunOfPlan = ((ScenarioSpec, Vec<Event>), SinkKind, Option<View>);

/// The run a plan file runs on: what the file records (spec, sink, view), else what the
/// command line says. An option given beside a recorded run must agree with it.
fn run_of_plan(path: &str, saved: &SavedPlan, args: &TargetArgs) -> Result<RunOfPlan, KeelError> {
    let given = &args.scenario.given;
    let flags = scenario_spec(&args.scenario);
    let mut differences = Vec::new();
    if let Some(recorded) = &saved.spec {
        differences.extend(spec_differences(given, &flags, recorded));
    }
    let flag_sink = SinkKind::from(args.sink);
    if let Some(recorded) = saved.sink {
        if given.has("sink") && flag_sink != recorded {
            differences.push(format!("--sink {flag_sink} (the plan's: {recorded})"));
        }
    }
    let flag_view = args.view.map(View::from);
    if let (Some(recorded), Some(flag)) = (saved.view, flag_view) {
        if flag != recorded {
            differences.push(format!(
                "--view {} (the plan's: {})",
                flag.name(),
                recorded.name()
            ));
        }
    }
    if !differences.is_empty() {
        return Err(KeelError::usage(format!(
            "{path} records the run it was saved from, and {} differ{}: drop {} to replay the plan as saved (or edit the file to change the run)",
            differences.join(", "),
            if differences.len() == 1 { "s" } else { "" },
            if differences.len() == 1 { "the option" } else { "the options" },
        )));
    }
    let prepared = match &saved.spec {
        Some(recorded) => prepare_spec(recorded.clone())
            .map_err(|e| KeelError::usage(format!("{path}: {}", e.message)))?,
        None => prepare(&args.scenario)?,
    };
    Ok((
        prepared,
        saved.sink.unwrap_or(flag_sink),
        saved.view.or(flag_view),
    ))
}

/// A key scheme as `--key` names it.
fn key_name(key: KeyScheme) -> &'static str {
    match key {
        KeyScheme::EventIndex => "event-index",
        KeyScheme::ProcessingTime => "processing-time",
    }
}

/// The scenario options given on the command line whose value differs from the recorded
/// spec's, each as "--option flag-value (the plan's: recorded-value)".
fn spec_differences(given: &Given, flags: &ScenarioSpec, recorded: &ScenarioSpec) -> Vec<String> {
    let input = |spec: &ScenarioSpec| match &spec.events {
        Some(path) => format!("--events {path}"),
        None => format!("--scenario {}", spec.label()),
    };
    let lateness = |spec: &ScenarioSpec| {
        spec.allowed_lateness
            .map_or("unbounded".to_string(), |l| l.to_string())
    };
    let knobs: [(&str, &str, String, String); 12] = [
        (
            "window",
            "--window",
            flags.window.to_string(),
            recorded.window.to_string(),
        ),
        (
            "out_of_orderness",
            "--out-of-orderness",
            flags.out_of_orderness.to_string(),
            recorded.out_of_orderness.to_string(),
        ),
        (
            "checkpoint_every",
            "--checkpoint-every",
            flags.checkpoint_every.to_string(),
            recorded.checkpoint_every.to_string(),
        ),
        (
            "allowed_lateness",
            "--allowed-lateness",
            lateness(flags),
            lateness(recorded),
        ),
        (
            "event_interval_ms",
            "--event-interval-ms",
            flags.event_interval_ms.to_string(),
            recorded.event_interval_ms.to_string(),
        ),
        (
            "restart_delay_ms",
            "--restart-delay-ms",
            flags.restart_delay_ms.to_string(),
            recorded.restart_delay_ms.to_string(),
        ),
        (
            "checkpoint_protocol",
            "--checkpoint-protocol",
            flags.protocol.to_string(),
            recorded.protocol.to_string(),
        ),
        (
            "key",
            "--key",
            key_name(flags.key).to_string(),
            key_name(recorded.key).to_string(),
        ),
        (
            "transaction_timeout_ms",
            "--transaction-timeout-ms",
            flags.transaction_timeout_ms.to_string(),
            recorded.transaction_timeout_ms.to_string(),
        ),
        (
            "sector_size_bytes",
            "--sector-size-bytes",
            flags.sector_size_bytes.to_string(),
            recorded.sector_size_bytes.to_string(),
        ),
        (
            "fs_model",
            "--fs-model",
            flags.fs_model.to_string(),
            recorded.fs_model.to_string(),
        ),
        (
            "state_backend",
            "--state-backend",
            flags.state_backend.to_string(),
            recorded.state_backend.to_string(),
        ),
    ];
    let mut differences = Vec::new();
    if (given.has("scenario") || given.has("events")) && input(flags) != input(recorded) {
        differences.push(format!(
            "{} (the plan's: {})",
            input(flags),
            input(recorded)
        ));
    }
    for (id, option, flag, saved) in knobs {
        if given.has(id) && flag != saved {
            differences.push(format!("{option} {flag} (the plan's: {saved})"));
        }
    }
    differences
}

/// A plan file must fit the run: every fault has to take effect where it is aimed, and a
/// power loss must name one of its step's crash states (as `keel run --crash-state` must).
fn check_plan_applies(path: &str, plan: &FaultPlan, result: &RunResult) -> Result<(), KeelError> {
    if let Some(wrapped) = result.world.wrapped_states().first() {
        return Err(KeelError::usage(format!(
            "{path}: crash state {} does not exist at step {}: its crash states are 0..={}",
            wrapped.planned,
            wrapped.step,
            wrapped.count - 1
        )));
    }
    let injected = result.world.faults_injected();
    for planned in plan.faults() {
        if injected.iter().any(|f| f.step == planned.step) {
            continue;
        }
        let site = result.world.trace().lines().find_map(|line| match line {
            TraceLine::Step {
                step, op, target, ..
            } if *step == planned.step => Some(format!("{op} {target}")),
            _ => None,
        });
        let why = match site {
            Some(site) => format!(
                "step {} is {site}, where {} does not apply",
                planned.step,
                planned.fault.kind()
            ),
            None => format!("the run never reached step {}", planned.step),
        };
        return Err(KeelError::usage(format!(
            "{path}: the fault {} at step {} did not take effect: {why} (`keel sites` lists the steps)",
            planned.fault, planned.step
        )));
    }
    Ok(())
}
