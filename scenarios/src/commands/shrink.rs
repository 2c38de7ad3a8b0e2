//! `keel shrink`: a failing seed's plan (or a plan file) reduced to a minimal one.

use super::args::{parse_expectation, RunFormat, TargetArgs};
use super::files::write_plan_file;
use super::job_plan::{read_job_plan, reject_options_beside, shrink_job_plan};
use super::output::{Output, EXIT_VIOLATION};
use super::target::{load_target, Target};
use crate::error::KeelError;
use crate::explore::target_property;
use crate::plan_file::SavedPlan;
use crate::property::{Expectation, MATCHES_MODEL};
use crate::reproduce::replay_plan_command;
use crate::shrink::shrink;
use clap::Args;

#[derive(Debug, Args)]
pub struct ShrinkArgs {
    #[command(flatten)]
    pub target: TargetArgs,

    /// Keep a property of these that the run breaks (a comma-separated list, as `--expect`
    /// takes it everywhere; default: what the sink promises to the view). The most serious
    /// broken one is kept.
    #[arg(long, value_name = "PROPERTIES", value_parser = parse_expectation)]
    pub expect: Option<Expectation>,

    /// Write the shrunk plan, with the run it belongs to (scenario, knobs, seed, sink,
    /// view), to this plan file: `keel replay --plan FILE` alone replays it. Nothing is
    /// written when there is nothing to shrink.
    #[arg(long, value_name = "FILE.json")]
    pub save_plan: Option<String>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = RunFormat::Text)]
    pub format: RunFormat,
}

pub(crate) fn cmd_shrink(args: &ShrinkArgs) -> Result<Output, KeelError> {
    if let Some(path) = &args.target.plan {
        if let Some(saved) = read_job_plan(path)? {
            reject_options_beside(path, &args.target.scenario.given, &["plan", "save_plan"])?;
            return shrink_job_plan(path, &saved, args.save_plan.as_deref());
        }
    }
    let Target {
        spec,
        sink,
        baseline,
        run_spec,
        result,
        view,
        verdict,
        failures,
        ..
    } = load_target(&args.target, args.expect.clone())?;
    // One rule for every command: exit 1 when the run breaks a property --expect asked for
    // (or the fault-free run disagrees with the model, whatever was asked).
    let violated = !failures.is_empty()
        && (args.expect.is_some() || failures.iter().any(|f| f == MATCHES_MODEL));
    let exit_code = if violated { EXIT_VIOLATION } else { 0 };
    let Some(property) = target_property(&failures) else {
        let why = if failures.is_empty() {
            format!("the run holds ({})", verdict.summary())
        } else {
            format!(
                "the fault-free run already fails ({}): no plan to shrink",
                verdict.summary()
            )
        };
        let not_written = args
            .save_plan
            .as_ref()
            .map_or(String::new(), |path| format!(" ({path} not written)"));
        let stdout = match args.format {
            RunFormat::Text => format!("nothing to shrink: {why} on sink {sink}{not_written}\n"),
            RunFormat::Json => {
                let json = serde_json::json!({
                    "shrunk": false,
                    "reason": why,
                    "sink": sink.name(),
                    "view": view.map(|v| v.name()),
                    "failures": failures,
                    "oracle": verdict,
                    "fingerprint": result.world.fingerprint().to_string(),
                });
                serde_json::to_string_pretty(&json).expect("json") + "\n"
            }
        };
        return Ok(Output { stdout, exit_code });
    };
    let shrunk = shrink(
        &run_spec,
        &baseline.reference,
        &run_spec.plan,
        (property, view),
    );
    if let Some(path) = &args.save_plan {
        write_plan_file(path, &SavedPlan::of(&spec, sink, view, &shrunk.plan))?;
    }
    let view_option = view.map_or(String::new(), |v| format!(" --view {}", v.name()));
    let reproduce = replay_plan_command(&spec, sink, view, &shrunk.plan);
    let plan_json = serde_json::to_string(&shrunk.plan.to_file()).expect("plans serialize");
    let stdout = match args.format {
        RunFormat::Text => format!(
            "shrink scenario={} protocol={} fs_model={} sink={sink}{view_option} seed={}\nfailure: {property} broken ({})\nfrom {} faults to {} in {} runs\nplan: {plan_json}\noutcome: {}\nfingerprint={}\nreproduce: {reproduce}\n",
            spec.label(),
            spec.protocol,
            spec.fs_model,
            spec.seed,
            verdict.summary(),
            result.world.faults_injected().len(),
            shrunk.plan.len(),
            shrunk.runs,
            shrunk.verdict.summary(),
            shrunk.fingerprint,
        ),
        RunFormat::Json => {
            let json = serde_json::json!({
                "shrunk": true,
                "property": property,
                "view": view.map(|v| v.name()),
                "original": verdict,
                "plan": shrunk.plan.to_file(),
                "oracle": shrunk.verdict,
                "runs": shrunk.runs,
                "fingerprint": shrunk.fingerprint,
                "reproduce": reproduce,
            });
            serde_json::to_string_pretty(&json).expect("json") + "\n"
        }
    };
    Ok(Output { stdout, exit_code })
}
