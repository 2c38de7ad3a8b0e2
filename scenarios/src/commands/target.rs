//! What `keel replay` and `keel shrink` work on: one seed's plan (or a plan file) on one
//! sink, run once and judged.

use super::args::{view_for, SeedRange, TargetArgs};
use super::explore::explore_spec;
use super::files::{prepare, read_plan_file};
use crate::baseline::Baseline;
use crate::error::KeelError;
use crate::explore::ExploreSpec;
use crate::observation::Observation;
use crate::property::Expectation;
use crate::runner::{run, RunResult, RunSpec, View};
use crate::spec::ScenarioSpec;
use crate::verdict::{judge_one, Verdict};
use keel_engine::SinkKind;
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
    let (spec, events) = prepare(&args.scenario)?;
    let sink = SinkKind::from(args.sink);
    let view = view_for(sink, args.view)?;
    let seeds = SeedRange {
        start: spec.seed,
        end: spec.seed + 1,
    };
    let explore = explore_spec(&args.plans, &[args.sink], seeds, expect);
    let baseline = Baseline::new(spec.run_spec(&events, sink, FaultPlan::none())?);
    let run_spec = match &args.plan {
        Some(path) => RunSpec {
            plan: read_plan_file(path)?,
            ..baseline.spec.clone()
        },
        None => baseline.seed_spec(&explore, spec.seed),
    };
    let result = run(&run_spec);
    if let Some(path) = &args.plan {
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

/// A plan file must fit the run: every fault has to take effect where it is aimed.
fn check_plan_applies(path: &str, plan: &FaultPlan, result: &RunResult) -> Result<(), KeelError> {
    let injected = result.world.faults_injected();
    for planned in plan.faults() {
        if injected.iter().any(|f| f.step == planned.step) {
            continue;
        }
        let site = result
            .world
            .trace()
            .lines()
            .iter()
            .find_map(|line| match line {
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
