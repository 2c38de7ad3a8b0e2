//! `keel bench`: simulation speed on the wall clock, in runs and steps per second, and
//! against a small sample of real process-crash points (a real child process on a fresh
//! temporary directory, killed with SIGKILL at the step), timed in the same run: the speed
//! ratio of issue 9.

use super::args::{parse_seed_range, FaultArg, ScenarioArgs, SeedPlanArgs, SeedRange, SinkArg};
use super::explore::{explore_baselines, explore_spec};
use super::fidelity::{compare_point, process_crash_points};
use super::files::prepare;
use super::interrupt::par_map_interruptible;
use super::output::Output;
use super::progress::Progress;
use crate::baseline::baselines;
use crate::error::KeelError;
use crate::explore::{MAX_FAULTS_DEFAULT, OUTAGE_MS_DEFAULT};
use crate::fidelity::PointComparison;
use crate::parallel::default_jobs;
use crate::runner::run;
use crate::spec::ScenarioSpec;
use clap::Args;
use keel_engine::SinkKind;
use keel_sim::PlannedFault;

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

    /// Also run this many process-crash points of the scenario for real (on the first
    /// --sinks sink real mode supports: append or idempotent), spread evenly over its
    /// points, each simulated too and compared as `keel fidelity kill` does, and print the
    /// speed ratio: simulated runs per second over real points per second, both measured
    /// here with the same --jobs. 0: simulated runs only (also the default when --sinks has
    /// only the transactional sink).
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    pub real_points: u64,

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

/// One of the two places keel reads the wall clock (with `keel fidelity kill`): to time
/// whole runs from outside, never inside one.
pub(crate) fn cmd_bench(args: &BenchArgs) -> Result<Output, KeelError> {
    super::args::reject_seed_for_seed_range(&args.scenario.given, args.scenario.seed, "bench")?;
    let (spec, events) = prepare(&args.scenario)?;
    let real_sink = args
        .sinks
        .iter()
        .map(|&s| SinkKind::from(s))
        .find(|s| !s.is_transactional());
    let real_sink = match (args.real_points, real_sink) {
        (0, _) => None,
        (_, Some(sink)) => Some(sink),
        // `--sinks transactional` alone: no real sample, unless asked for by name.
        (_, None) if !args.scenario.given.has("real_points") => None,
        (_, None) => {
            return Err(KeelError::usage(
                "keel bench --real-points needs an append or idempotent sink in --sinks (the transactional sink is simulation-only)",
            ))
        }
    };
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
    let rows = par_map_interruptible(
        &points,
        jobs,
        |&(seed, sink)| {
            let baseline = &baselines[&sink];
            let result = run(&baseline.seed_spec(&explore, seed));
            (result.world.steps_taken(), result.world.fingerprint())
        },
        &|_| progress.done(false),
        &progress,
    )?;
    let elapsed = started.elapsed().as_secs_f64().max(1e-9);
    let steps: u64 = rows.iter().map(|(steps, _)| steps).sum();
    let digest: String = rows.iter().map(|(_, f)| f.to_string()).collect();
    let runs_per_second = rows.len() as f64 / elapsed;
    let mut stdout = format!(
        "bench scenario={} protocol={} jobs={jobs}\nruns={} steps={} elapsed={elapsed:.3}s\nruns_per_second={runs_per_second:.0} steps_per_second={:.0}\nfingerprint={}\n",
        spec.label(),
        spec.protocol,
        rows.len(),
        steps,
        steps as f64 / elapsed,
        keel_sim::Fingerprint::of(digest.as_bytes()),
    );
    if let Some(sink) = real_sink {
        let real = real_sample(&spec, &events, sink, args.real_points, jobs, args.job.quiet)?;
        let real_per_second = real.points as f64 / real.elapsed;
        stdout.push_str(&format!(
            "real_points={} sink={sink} agree={} elapsed={:.3}s real_points_per_second={real_per_second:.1}\nspeed_ratio={:.0} (simulated runs per second / real points per second)\n",
            real.points,
            real.agree,
            real.elapsed,
            runs_per_second / real_per_second,
        ));
    }
    Ok(Output::ok(stdout))
}

/// What the real sample measured.
struct RealSample {
    points: u64,
    agree: u64,
    /// Wall seconds for the whole sample on `jobs` threads.
    elapsed: f64,
}

/// `n` process-crash points of `sink`, spread evenly over all of them, each run simulated
/// and for real (`keel fidelity kill`'s comparison), timed as a whole.
fn real_sample(
    spec: &ScenarioSpec,
    events: &[keel_engine::Event],
    sink: SinkKind,
    n: u64,
    jobs: usize,
    quiet: bool,
) -> Result<RealSample, KeelError> {
    let baseline = &baselines(spec, events, &[sink])?[&sink];
    let all = process_crash_points(baseline, spec.seed);
    let n = (n as usize).min(all.len());
    let sample: Vec<(u64, PlannedFault)> = (0..n)
        .map(|i| {
            let index = i * all.len() / n;
            (index as u64, all[index])
        })
        .collect();
    let prefix = spec.command("run");
    let progress = Progress::new(sample.len(), quiet);
    let started = std::time::Instant::now();
    let compared = par_map_interruptible(
        &sample,
        jobs,
        |&(index, point)| compare_point(baseline, index, point, &prefix),
        &|result: &Result<PointComparison, String>| {
            progress.done(result.as_ref().map_or(true, |c| !c.differences.is_empty()))
        },
        &progress,
    )?;
    let elapsed = started.elapsed().as_secs_f64().max(1e-9);
    let compared: Vec<PointComparison> = KeelError::all_ok(compared)?;
    Ok(RealSample {
        points: compared.len() as u64,
        agree: compared.iter().filter(|c| c.differences.is_empty()).count() as u64,
        elapsed,
    })
}
