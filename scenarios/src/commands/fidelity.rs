//! `keel fidelity kill`: every process-crash point of a scenario, simulated and with a real
//! SIGKILL on a real directory, compared; rows per sink with wall times (this command and
//! `keel bench` are the only ones that read the wall clock: to time runs from outside).

use super::args::{
    dedup_kinds, jobs, table_format, JobArgs, ScenarioArgs, SinkArg, TableFormatArg,
};
use super::files::prepare;
use super::incarnation::run_real_here;
use super::output::{Output, EXIT_VIOLATION};
use super::progress::Progress;
use crate::baseline::{baselines, Baseline};
use crate::error::KeelError;
use crate::fidelity::{aggregate, differences, PointComparison, Side};
use crate::parallel::par_map;
use crate::reproduce::reproduce_point;
use crate::runner::{self, RunSpec};
use crate::sweep::{points, SweepSpec, POWER_LOSS_STATES_MAX_DEFAULT};
use clap::{Args, Subcommand};
use keel_engine::SinkKind;
use keel_sim::{FaultKind, FaultPlan, PlannedFault};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

#[derive(Debug, Args)]
pub struct FidelityArgs {
    #[command(subcommand)]
    pub check: FidelityCheck,
}

#[derive(Debug, Subcommand)]
pub enum FidelityCheck {
    /// Every process-crash point (as `keel sweep --faults process-crash` has them), run
    /// simulated and for real (a child process on a fresh temporary directory, killed with
    /// SIGKILL at the step), compared: sink, final windows, verdict, directory, trace. Exit 1
    /// if any point disagrees.
    Kill(KillArgs),
}

#[derive(Debug, Args)]
pub struct KillArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,

    /// The sinks (append and idempotent; the transactional sink is simulation-only).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "append,idempotent"
    )]
    pub sinks: Vec<SinkArg>,

    #[command(flatten)]
    pub job: JobArgs,

    /// Output format. Wall times differ from run to run; everything else does not.
    #[arg(long, value_enum, default_value_t = TableFormatArg::Table)]
    pub format: TableFormatArg,
}

pub(crate) fn cmd_fidelity(args: &FidelityArgs) -> Result<Output, KeelError> {
    match &args.check {
        FidelityCheck::Kill(args) => cmd_kill(args),
    }
}

fn cmd_kill(args: &KillArgs) -> Result<Output, KeelError> {
    if args.job.shard.is_some() {
        return Err(KeelError::usage(
            "keel fidelity kill takes no --shard: its wall times do not merge",
        ));
    }
    let (spec, events) = prepare(&args.scenario)?;
    let sinks = dedup_kinds(args.sinks.iter().map(|&s| SinkKind::from(s)));
    if sinks.iter().any(SinkKind::is_transactional) {
        return Err(KeelError::usage(
            "keel fidelity kill: the transactional sink is simulation-only (its log is simulated)",
        ));
    }
    let sweep = SweepSpec {
        sinks: sinks.clone(),
        faults: vec![FaultKind::ProcessCrash],
        depth: 1,
        outage_ms: 2_000,
        expect: None,
        power_loss_states_max: POWER_LOSS_STATES_MAX_DEFAULT,
    };
    let baselines = baselines(&spec, &events, &sinks)?;
    let items: Vec<(SinkKind, PlannedFault)> = sinks
        .iter()
        .flat_map(|&sink| {
            points(
                &baselines[&sink].sites,
                FaultKind::ProcessCrash,
                spec.seed,
                &sweep,
            )
            .into_iter()
            .map(move |(point, _)| (sink, point))
        })
        .collect();
    let progress = Progress::new(items.len(), args.job.quiet);
    let prefix = spec.command("run");
    let compared: Vec<Result<PointComparison, String>> = par_map(
        &items,
        jobs(&args.job),
        |&(sink, point)| compare_point(&baselines[&sink], sink, point, &prefix),
        &|result: &Result<PointComparison, String>| {
            progress.done(result.as_ref().map_or(true, |c| !c.differences.is_empty()))
        },
    );
    progress.finish();
    let compared: Vec<PointComparison> =
        compared
            .into_iter()
            .collect::<Result<_, _>>()
            .map_err(|message| KeelError {
                message,
                exit_code: 1,
            })?;
    let report = aggregate(&spec.label(), spec.protocol.name(), &sinks, &compared);
    let stdout = match table_format(args.format) {
        Some(format) => report.render(format),
        None => report.to_json(),
    };
    Ok(Output {
        stdout,
        exit_code: if report.disagreements() > 0 {
            EXIT_VIOLATION
        } else {
            0
        },
    })
}

/// Runs one point simulated and for real, and compares what they left.
fn compare_point(
    baseline: &Baseline,
    sink: SinkKind,
    point: PlannedFault,
    prefix: &str,
) -> Result<PointComparison, String> {
    static DIR_NEXT: AtomicU64 = AtomicU64::new(0);
    let spec = RunSpec {
        plan: FaultPlan::new([point]).expect("one fault"),
        ..baseline.spec.clone()
    };
    let started = Instant::now();
    let simulated = runner::run(&spec);
    let simulated_us = started.elapsed().as_micros() as u64;
    let simulated = Side::simulated(&simulated, baseline);

    let dir = std::env::temp_dir().join(format!(
        "keel-fidelity-{}-{}",
        std::process::id(),
        DIR_NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let started = Instant::now();
    let real = run_real_here(&spec, &dir);
    let real_us = started.elapsed().as_micros() as u64;
    // The directory is this point's own, created by `run_real`.
    let _ = std::fs::remove_dir_all(&dir);
    let real = Side::real(&real?, baseline);
    let reproduce_simulated = reproduce_point(prefix, sink, &point);
    Ok(PointComparison {
        sink,
        point,
        differences: differences(&simulated, &real),
        simulated_us,
        real_us,
        reproduce_real: format!("{reproduce_simulated} --real-dir DIR"),
        reproduce_simulated,
    })
}
