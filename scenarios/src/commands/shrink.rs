//! `keel shrink`: a failing seed's plan (or a plan file) reduced to a minimal one.

use super::args::{ExpectArg, RunFormat, TargetArgs};
use super::files::write_plan_file;
use super::output::Output;
use super::target::{load_target, Target};
use crate::error::KeelError;
use crate::explore::target_class;
use crate::reproduce::replay_plan_command;
use crate::shrink::shrink;
use clap::Args;

#[derive(Debug, Args)]
pub struct ShrinkArgs {
    #[command(flatten)]
    pub target: TargetArgs,

    /// Keep the failure that breaks this (default: the most serious failure shown).
    #[arg(long, value_enum)]
    pub expect: Option<ExpectArg>,

    /// Write the shrunk plan to this file.
    #[arg(long, value_name = "FILE.json")]
    pub save_plan: Option<String>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = RunFormat::Text)]
    pub format: RunFormat,
}

pub(crate) fn cmd_shrink(args: &ShrinkArgs) -> Result<Output, KeelError> {
    let Target {
        spec,
        sink,
        explore,
        baseline,
        run_spec,
        result,
        verdict,
    } = load_target(&args.target, args.expect)?;
    let Some(class) = target_class(&explore, &verdict).filter(|_| explore.fails(&verdict, sink))
    else {
        return Ok(Output::ok(format!(
            "nothing to shrink: the run holds ({}) on sink {sink}\n",
            verdict.summary()
        )));
    };
    let shrunk = shrink(&run_spec, &baseline.expected, &run_spec.plan, class);
    if let Some(path) = &args.save_plan {
        write_plan_file(path, &shrunk.plan)?;
    }
    let reproduce = replay_plan_command(
        &|command, seed| spec.command_with_seed(command, seed),
        spec.seed,
        sink,
        &shrunk.plan,
    );
    let plan_json = serde_json::to_string(&shrunk.plan.to_file()).expect("plans serialize");
    Ok(Output::ok(match args.format {
        RunFormat::Text => format!(
            "shrink scenario={} protocol={} sink={sink} seed={}\nfailure: {class} ({})\nfrom {} faults to {} in {} runs\nplan: {plan_json}\noutcome: {}\nfingerprint={}\nreproduce: {reproduce}\n",
            spec.label(),
            spec.protocol,
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
                "class": class,
                "original": verdict,
                "plan": shrunk.plan.to_file(),
                "oracle": shrunk.verdict,
                "runs": shrunk.runs,
                "fingerprint": shrunk.fingerprint,
                "reproduce": reproduce,
            });
            serde_json::to_string_pretty(&json).expect("json") + "\n"
        }
    }))
}
