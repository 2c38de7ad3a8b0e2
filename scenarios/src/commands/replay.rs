//! `keel replay`: one seed (or a plan file) step by step, the whole trace and its tallies.

use super::args::{parse_expectation, RunFormat, TargetArgs};
use super::files::write_plan_file;
use super::job_plan::{read_job_plan, reject_options_beside, replay_job_plan};
use super::output::{Output, EXIT_VIOLATION};
use super::target::{load_target, Target};
use crate::error::KeelError;
use crate::plan_file::SavedPlan;
use crate::property::{Expectation, MATCHES_MODEL};
use crate::runner::run;
use clap::Args;

#[derive(Debug, Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub target: TargetArgs,

    /// Run twice and fail loudly, with the first differing step, if the traces differ.
    #[arg(long)]
    pub check_determinism: bool,

    /// Write the faults that took effect (a drawn crash state as the state that ran), with
    /// the run they belong to (scenario, knobs, seed, sink, view), to this plan file:
    /// `keel replay --plan FILE` alone replays it.
    #[arg(long, value_name = "FILE.json")]
    pub save_plan: Option<String>,

    /// What the run must hold: a comma-separated list of properties, as everywhere (default:
    /// what the sink promises to the view; the verdict is printed, exit 1 only with
    /// --expect). Exit 1 if the run breaks it.
    #[arg(long, value_name = "PROPERTIES", value_parser = parse_expectation)]
    pub expect: Option<Expectation>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = RunFormat::Text)]
    pub format: RunFormat,
}

pub(crate) fn cmd_replay(args: &ReplayArgs) -> Result<Output, KeelError> {
    if let Some(path) = &args.target.plan {
        if let Some(saved) = read_job_plan(path)? {
            let allowed = ["plan", "check_determinism"];
            reject_options_beside(path, &args.target.scenario.given, &allowed)?;
            return replay_job_plan(path, &saved, args.check_determinism);
        }
    }
    let Target {
        spec,
        sink,
        explore,
        run_spec,
        result,
        view,
        verdict,
        failures,
        ..
    } = load_target(&args.target, args.expect.clone())?;
    if let Some(path) = &args.save_plan {
        let saved = SavedPlan::of(&spec, sink, view, &result.world.plan_that_ran());
        write_plan_file(path, &saved)?;
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
    // With --check-determinism: the first line where a second run's trace differs, if any.
    let mut difference: Option<(usize, String, String)> = None;
    if args.check_determinism {
        let again = run(&run_spec);
        let trace_again: Vec<String> = again.world.trace().text_lines();
        if let Some(i) =
            (0..trace.len().max(trace_again.len())).find(|&i| trace.get(i) != trace_again.get(i))
        {
            let line = |trace: &[String]| trace.get(i).map_or("(end)".to_string(), String::clone);
            difference = Some((i, line(&trace), line(&trace_again)));
            exit_code = EXIT_VIOLATION;
        }
    }
    let violated = !failures.is_empty()
        && (explore.expect.is_some() || failures.iter().any(|f| f == MATCHES_MODEL));
    let judged_by = explore
        .expect
        .as_ref()
        .map_or("promised".to_string(), Expectation::name);
    let view_text = view.map_or(String::new(), |v| format!(" view={}", v.name()));
    match args.format {
        RunFormat::Text => {
            if let Some((i, first, second)) = &difference {
                stdout.push_str(&format!(
                    "NONDETERMINISM: the traces differ at line {i}\n  first:  {first}\n  second: {second}\n"
                ));
            }
            stdout.push_str(&format!(
                "replay scenario={} protocol={} fs_model={} sink={sink}{view_text} {source}\nplan: {plan_json}\ninjected: {injected_json}\n",
                spec.label(),
                spec.protocol,
                spec.fs_model
            ));
            if !result.world.wrapped_states().is_empty() {
                stdout.push_str("(a drawn crash state names one of its step's states, modulo their count: `injected` has the state that ran, and --save-plan writes it)\n");
            }
            stdout.push('\n');
            for line in &trace {
                stdout.push_str(line);
                stdout.push('\n');
            }
            stdout.push_str(&format!(
                "\noutcome: {}\nduplicates={} lost={} wrong={} corrupt={} stale_windows={} rolled_back={} recovery={} restarts={} final_windows_match={}\nverdict: {} (judged by {judged_by}): {}\nfingerprint={}\n",
                result.outcome.describe(),
                verdict.duplicates,
                verdict.lost,
                verdict.wrong,
                verdict.corrupt,
                verdict.stale_windows,
                verdict.rolled_back,
                verdict.recovery,
                verdict.restarts,
                verdict.final_windows_match,
                if failures.is_empty() { "holds" } else { "FAILS" },
                verdict.properties_line(
                    &Expectation::for_view(explore.expect.as_ref(), sink, view),
                    if explore.expect.is_some() {
                        "not asked"
                    } else {
                        "not promised"
                    }
                ),
                result.world.fingerprint()
            ));
            if args.check_determinism && difference.is_none() {
                stdout.push_str("determinism: two runs, identical traces\n");
            }
            if violated {
                stdout.push_str(&format!(
                    "VIOLATION of --expect {judged_by}: {} broken ({})\n",
                    failures.join(","),
                    verdict.summary()
                ));
            }
        }
        RunFormat::Json => {
            let json = serde_json::json!({
                "scenario": spec.label(),
                "protocol": spec.protocol.name(),
                "fs_model": spec.fs_model.name(),
                "sink": sink.name(),
                "view": view.map(|v| v.name()),
                "judged_by": judged_by,
                "failures": failures,
                "seed": spec.seed,
                "plan": run_spec.plan.to_file(),
                "injected": result.world.plan_that_ran().to_file(),
                "trace": trace,
                "oracle": verdict,
                "fingerprint": result.world.fingerprint().to_string(),
            });
            let mut json = json;
            if args.check_determinism {
                json["determinism"] = match &difference {
                    None => serde_json::json!({"identical": true}),
                    Some((line, first, second)) => serde_json::json!({
                        "identical": false,
                        "line": line,
                        "first": first,
                        "second": second,
                    }),
                };
            }
            stdout.push_str(&(serde_json::to_string_pretty(&json).expect("json") + "\n"));
        }
    }
    if violated {
        exit_code = EXIT_VIOLATION;
    }
    Ok(Output { stdout, exit_code })
}
