//! `keel bench`: simulation speed on the wall clock, in runs and steps per second.

use super::args::{parse_seed_range, FaultArg, ScenarioArgs, SeedPlanArgs, SeedRange, SinkArg};
use super::explore::{explore_baselines, explore_spec};
use super::files::prepare;
use super::output::Output;
use super::progress::Progress;
use crate::error::KeelError;
use crate::explore::{MAX_FAULTS_DEFAULT, OUTAGE_MS_DEFAULT};
use crate::parallel::{default_jobs, par_map};
use crate::runner::run;
use clap::Args;

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,

    /// The seeds to run (each on every --sinks sink).
    #[arg(long, value_name = "A..B", value_parser = parse_seed_range, default_value = "0..20000")]
    pub seeds: SeedRange,

    /// The sinks to run.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "append,idempotent,transactional"
    )]
    pub sinks: Vec<SinkArg>,

    #[command(flatten)]
    pub job: BenchJobArgs,
}

/// Threads and progress. No `--shard`: a benchmark always runs whole, since the speed of a
/// slice cannot be merged into the speed of the whole run.
#[derive(Debug, Args)]
pub struct BenchJobArgs {
    /// Independent simulations run on this many threads; the fingerprint is the same for any
    /// N (default: the machine's cores).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub jobs: Option<u64>,

    /// No progress bar (it is also hidden when stderr is not a terminal).
    #[arg(long, short)]
    pub quiet: bool,
}

/// The only place keel reads the wall clock: to time simulations, never inside one.
pub(crate) fn cmd_bench(args: &BenchArgs) -> Result<Output, KeelError> {
    super::args::reject_seed_for_seed_range(&args.scenario.given, args.scenario.seed, "bench")?;
    let (spec, events) = prepare(&args.scenario)?;
    let plans = SeedPlanArgs {
        faults: vec![
            FaultArg::ProcessCrash,
            FaultArg::PowerLoss,
            FaultArg::DiskError,
            FaultArg::SinkError,
            FaultArg::AckLost,
            FaultArg::SinkUnavailable,
        ],
        max_faults: MAX_FAULTS_DEFAULT as u64,
        outage_ms: OUTAGE_MS_DEFAULT,
    };
    let explore = explore_spec(&plans, &args.sinks, args.seeds, None);
    let baselines = explore_baselines(&spec, &events, &explore)?;
    let points = explore.points();
    let progress = Progress::new(points.len(), args.job.quiet);
    let jobs = args.job.jobs.map_or_else(default_jobs, |n| n as usize);
    let started = std::time::Instant::now();
    let rows = par_map(
        &points,
        jobs,
        |&(seed, sink)| {
            let baseline = &baselines[&sink];
            let result = run(&baseline.seed_spec(&explore, seed));
            (result.world.steps_taken(), result.world.fingerprint())
        },
        &|_| progress.done(false),
    );
    let elapsed = started.elapsed().as_secs_f64().max(1e-9);
    progress.finish();
    let steps: u64 = rows.iter().map(|(steps, _)| steps).sum();
    let digest: String = rows.iter().map(|(_, f)| f.to_string()).collect();
    Ok(Output::ok(format!(
        "bench scenario={} protocol={} jobs={jobs}\nruns={} steps={} elapsed={elapsed:.3}s\nruns_per_second={:.0} steps_per_second={:.0}\nfingerprint={}\n",
        spec.label(),
        spec.protocol,
        rows.len(),
        steps,
        rows.len() as f64 / elapsed,
        steps as f64 / elapsed,
        keel_sim::Fingerprint::of(digest.as_bytes()),
    )))
}
