//! `keel replay`: one seed (or a plan file) step by step, the whole trace and its tallies.

use super::args::{ExpectArg, RunFormat, TargetArgs};
use super::files::write_plan_file;
use super::output::{Output, EXIT_VIOLATION};
use super::target::{load_target, Target};
use crate::error::KeelError;
use crate::runner::run;
use clap::Args;

#[derive(Debug, Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub target: TargetArgs,

    /// Run twice and fail loudly, with the first differing step, if the traces differ.
    #[arg(long)]
    pub check_determinism: bool,

    /// Write the faults that took effect to this plan file.
    #[arg(long, value_name = "FILE.json")]
    pub save_plan: Option<String>,

    /// Exit 1 if the run breaks this.
    #[arg(long, value_enum)]
    pub expect: Option<ExpectArg>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = RunFormat::Text)]
    pub format: RunFormat,
}

pub(crate) fn cmd_replay(args: &ReplayArgs) -> Result<Output, KeelError> {
    let Target {
        spec,
        sink,
        explore,
        run_spec,
        result,
        verdict,
        ..
    } = load_target(&args.target, args.expect)?;
    if let Some(path) = &args.save_plan {
        write_plan_file(path, &result.world.plan_that_ran())?;
    }
    let trace: Vec<String> = result.world.trace().text_lines();
    let mut exit_code = 0;
    let mut stdout = String::new();
    let source = match &args.target.plan {
        Some(path) => format!("plan={path}"),
        None => format!("seed={}", spec.seed),
    };
    let plan_json = serde_json::to_string(&run_spec.plan.to_file()).expect("plans serialize");
    let injected_json =
        serde_json::to_string(&result.world.plan_that_ran().to_file()).expect("plans serialize");
    if args.check_determinism {
        let again = run(&run_spec);
        let trace_again: Vec<String> = again.world.trace().text_lines();
        if let Some(i) =
            (0..trace.len().max(trace_again.len())).find(|&i| trace.get(i) != trace_again.get(i))
        {
            stdout.push_str(&format!(
                "NONDETERMINISM: the traces differ at line {i}\n  first:  {}\n  second: {}\n",
                trace.get(i).map_or("(end)", String::as_str),
                trace_again.get(i).map_or("(end)", String::as_str)
            ));
            exit_code = EXIT_VIOLATION;
        }
    }
    let violated = explore.expect.filter(|e| !e.holds(&verdict));
    match args.format {
        RunFormat::Text => {
            stdout.push_str(&format!(
                "replay scenario={} protocol={} sink={sink} {source}\nplan: {plan_json}\ninjected: {injected_json}\n\n",
                spec.label(),
                spec.protocol
            ));
            for line in &trace {
                stdout.push_str(line);
                stdout.push('\n');
            }
            stdout.push_str(&format!(
                "\noutcome: {}\nduplicates={} lost={} wrong={} corrupt={} rolled_back={} recovery={} restarts={} final_windows_match={}\nfingerprint={}\n",
                result.outcome.describe(),
                verdict.duplicates,
                verdict.lost,
                verdict.wrong,
                verdict.corrupt,
                verdict.rolled_back,
                verdict.recovery,
                verdict.restarts,
                verdict.final_windows_match,
                result.world.fingerprint()
            ));
            if args.check_determinism && exit_code == 0 {
                stdout.push_str("determinism: two runs, identical traces\n");
            }
            if let Some(expectation) = violated {
                stdout.push_str(&format!(
                    "VIOLATION of --expect {}: {}\n",
                    expectation.name(),
                    verdict.summary()
                ));
            }
        }
        RunFormat::Json => {
            let json = serde_json::json!({
                "scenario": spec.label(),
                "protocol": spec.protocol.name(),
                "sink": sink.name(),
                "seed": spec.seed,
                "plan": run_spec.plan.to_file(),
                "injected": result.world.plan_that_ran().to_file(),
                "trace": trace,
                "oracle": verdict,
                "fingerprint": result.world.fingerprint().to_string(),
            });
            stdout.push_str(&(serde_json::to_string_pretty(&json).expect("json") + "\n"));
        }
    }
    if violated.is_some() {
        exit_code = EXIT_VIOLATION;
    }
    Ok(Output { stdout, exit_code })
}
