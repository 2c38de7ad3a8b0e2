//! `keel bench`: simulation speed on the wall clock, in runs and steps per second, and
//! against a small sample of real process-crash points (a real child process on a fresh
//! temporary directory, killed with SIGKILL at the step), timed in the same run: the speed
//! ratio of issue 9. With `--run-sizes`, `keel run` on streams of growing size, each a
//! child process timed from outside, its peak RSS read with `wait4`; with `--sweep`, `keel
//! sweep` of their process-crash points (or those of `--sweep-faults`) the same way, and on
//! the smaller ones `keel sweep --naive` too, its speed-up and whether the reports are
//! identical (issue 11).

use super::args::{parse_seed_range, FaultArg, ScenarioArgs, SeedPlanArgs, SeedRange, SinkArg};
use super::explore::{explore_baselines, explore_spec};
use super::fidelity::{compare_point, process_crash_points};
use super::files::prepare;
use super::interrupt::par_map_interruptible;
use super::output::Output;
use super::progress::Progress;
use super::sweep::PowerLossPointsArg;
use crate::baseline::baselines;
use crate::error::KeelError;
use crate::explore::{MAX_FAULTS_DEFAULT, OUTAGE_MS_DEFAULT};
use crate::fidelity::PointComparison;
use crate::parallel::default_jobs;
use crate::runner::run;
use crate::spec::ScenarioSpec;
use clap::Args;
use keel_engine::SinkKind;
use keel_sim::{FaultKind, PlannedFault};

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

    /// Also time `keel run` on streams of these sizes (comma-separated event counts, each
    /// 1 to 1,000,000, e.g. 10000,100000,1000000): each a `keel gen --seed 1` stream run
    /// fault-free by a child `keel run` with this command's --window, --out-of-orderness,
    /// --checkpoint-every and --allowed-lateness, one at a time; prints wall time, time per
    /// event and the child's peak RSS.
    #[arg(long, value_name = "N,...", value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub run_sizes: Vec<u64>,

    /// Also time `keel sweep` on streams of these sizes (comma-separated event counts, each
    /// 1 to 1,000,000, e.g. 1000,3000,10000): each a `keel gen --seed 1` stream swept by a
    /// child `keel sweep --faults <--sweep-faults> --sinks append,idempotent` with this
    /// command's --window, --out-of-orderness, --checkpoint-every, --checkpoint-protocol,
    /// --state-backend, --allowed-lateness and --jobs, one at a time; prints wall time,
    /// crash points, points per second, time per point and the child's peak RSS; on the sizes
    /// up to --sweep-naive-max also the same sweep with --naive: its time, the speed-up and
    /// whether the two reports are identical.
    #[arg(long = "sweep", value_name = "N,...", value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub sweep_sizes: Vec<u64>,

    /// The largest --sweep size also swept with --naive (whose time grows as the square of
    /// the stream: every point runs the stream from event 0 to its end).
    #[arg(long, value_name = "N", default_value_t = 3_000, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub sweep_naive_max: u64,

    /// The fault kinds each --sweep size sweeps, one row each (comma-separated, as `keel
    /// sweep --faults`): process-crash for issue 11's figure 1, each single-fault kind for
    /// its figure 2.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "process-crash"
    )]
    pub sweep_faults: Vec<FaultArg>,

    /// What a power-loss point of a --sweep is, as `keel sweep --power-loss-points`: one
    /// crash state (a step with more than 65,536 is sampled), or one class of them.
    #[arg(long, value_enum, value_name = "P", default_value_t = PowerLossPointsArg::States)]
    pub sweep_power_loss_points: PowerLossPointsArg,

    /// The depth of every sweep this command times (--sweep and --sweep-scenario), as `keel
    /// sweep --depth`: 1, every single fault; 2, also a second fault at every step after the
    /// first (issue 11's figure 3).
    #[arg(long, value_name = "D", default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2))]
    pub sweep_depth: u8,

    /// Also time `keel sweep` of the scenario itself (--scenario, or the --events file,
    /// with every knob given here) the same way as a --sweep size: the faults of
    /// --sweep-faults at --sweep-depth on the append and idempotent sinks, the median of
    /// five runs where one is short, and with --naive too where the stream has at most
    /// --sweep-naive-max events (issue 11's figure 3a: `--sweep-scenario --sweep-depth 2`
    /// and every single-fault kind, on ch04).
    #[arg(long)]
    pub sweep_scenario: bool,

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
    let sweep_faults: Vec<FaultKind> = args.sweep_faults.iter().map(|&f| f.into()).collect();
    super::sweep::check_classes_pair(
        args.sweep_power_loss_points.into(),
        args.sweep_depth,
        &sweep_faults,
    )?;
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
    for &events in &args.run_sizes {
        let size = run_size(&spec, events)?;
        stdout.push_str(&format!(
            "run events={events} elapsed={:.3}s us_per_event={:.2} peak_rss_mb={:.1}\n",
            size.elapsed,
            size.elapsed * 1e6 / events as f64,
            size.peak_rss_kb as f64 / 1024.0,
        ));
    }
    let faults: Vec<String> = args.sweep_faults.iter().map(|f| value_name(*f)).collect();
    let faults = faults.join(",");
    // The child's arguments, and what the bench line calls them.
    let mut sweep_args = vec!["--faults".to_string(), faults.clone()];
    let mut sweep_label = faults;
    if args.sweep_power_loss_points != PowerLossPointsArg::States {
        let points = value_name(args.sweep_power_loss_points);
        sweep_label.push_str(&format!(" power_loss_points={points}"));
        sweep_args.extend(["--power-loss-points".to_string(), points]);
    }
    if args.sweep_depth > 1 {
        sweep_label.push_str(&format!(" depth={}", args.sweep_depth));
        sweep_args.extend(["--depth".to_string(), args.sweep_depth.to_string()]);
    }
    sweep_args.extend(["--jobs".to_string(), jobs.to_string()]);
    // `child` passes the stream's knobs but the protocol.
    let protocol = [
        "--checkpoint-protocol".to_string(),
        spec.protocol.to_string(),
    ];
    for &events in &args.sweep_sizes {
        let naive = events <= args.sweep_naive_max;
        let file = GenFile::new(events)?;
        let what = format!("keel sweep on {events} events");
        let size = sweep_size(&what, naive, &|naive| {
            let mut extra = sweep_child_args(&sweep_args, naive);
            extra.extend_from_slice(&protocol);
            child("sweep", &spec, &file, &extra)
        })?;
        stdout.push_str(&format!("sweep events={events} faults={sweep_label} "));
        stdout.push_str(&size.line(args.sweep_naive_max));
    }
    if args.sweep_scenario {
        let naive = events.len() as u64 <= args.sweep_naive_max;
        let label = spec.label();
        let what = format!("keel sweep of {label}");
        let size = sweep_size(&what, naive, &|naive| {
            scenario_child(&spec, &sweep_child_args(&sweep_args, naive))
        })?;
        stdout.push_str(&format!("sweep scenario={label} faults={sweep_label} "));
        stdout.push_str(&size.line(args.sweep_naive_max));
    }
    Ok(Output::ok(stdout))
}

/// A child sweep's arguments after the stream and its knobs: `sweep_args` (the faults, the
/// points, the depth, the jobs), the append and idempotent sinks, quiet JSON, and `--naive`
/// if asked.
fn sweep_child_args(sweep_args: &[String], naive: bool) -> Vec<String> {
    let mut extra = sweep_args.to_vec();
    extra.extend(
        [
            "--sinks",
            "append,idempotent",
            "--quiet",
            "--format",
            "json",
        ]
        .map(String::from),
    );
    if naive {
        extra.push("--naive".to_string());
    }
    extra
}

/// The name clap parses `value` from (what a child keel is given on its command line).
fn value_name(value: impl clap::ValueEnum) -> String {
    value
        .to_possible_value()
        .expect("no value is skipped")
        .get_name()
        .to_string()
}

/// What one child process of a size series measured.
#[derive(Clone, Copy)]
struct RunSize {
    /// Wall seconds of the child.
    elapsed: f64,
    /// The child's peak resident set size (getrusage's ru_maxrss), in KiB.
    peak_rss_kb: u64,
}

/// What one size of `--sweep` measured: the default sweep, and the naive one if it ran
/// (with whether the two reports are the same, byte for byte).
struct SweepSize {
    points: u64,
    /// The median of [`SHORT_SWEEP_REPEATS`] runs where one took under
    /// [`SHORT_SWEEP_SECONDS`] (their peak RSS the highest), else the one run.
    fast: RunSize,
    /// How many times the default sweep ran.
    fast_runs: usize,
    naive: Option<(RunSize, bool)>,
}

fn failed(message: String) -> KeelError {
    KeelError {
        message,
        exit_code: 1,
    }
}

/// `keel gen --events N --seed 1` into a temporary file (removed when dropped).
struct GenFile(std::path::PathBuf);

impl GenFile {
    fn new(events: u64) -> Result<GenFile, KeelError> {
        let stream = crate::gen::generate(&crate::gen::GenSpec {
            events,
            seed: 1,
            out_of_orderness: 5,
            late_fraction: 0.1,
            late_by_max: 200,
            value_max: 100,
            keys: 0,
        });
        let path =
            std::env::temp_dir().join(format!("keel-bench-{}-{events}.jsonl", std::process::id()));
        super::files::write_atomically(&path, stream.as_bytes())
            .map_err(|e| failed(format!("cannot write {}: {e}", path.display())))?;
        Ok(GenFile(path))
    }
}

impl Drop for GenFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// This binary as a child `keel COMMAND`, its stdin and stderr closed (the bench reads only
/// its stdout, if any).
fn keel_child(command: &str) -> Result<std::process::Command, KeelError> {
    let exe = std::env::current_exe().map_err(|e| failed(format!("cannot find keel: {e}")))?;
    let mut child = std::process::Command::new(exe);
    child
        .arg(command)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    Ok(child)
}

/// This binary as a child `keel COMMAND --events FILE` with `spec`'s window,
/// out-of-orderness, checkpoint interval and allowed lateness, and `extra`.
fn child(
    command: &str,
    spec: &ScenarioSpec,
    events: &GenFile,
    extra: &[String],
) -> Result<std::process::Command, KeelError> {
    let mut child = keel_child(command)?;
    child
        .arg("--events")
        .arg(&events.0)
        .args(["--window", &spec.window.to_string()])
        .args(["--out-of-orderness", &spec.out_of_orderness.to_string()])
        .args(["--checkpoint-every", &spec.checkpoint_every.to_string()])
        .args(extra);
    if let Some(lateness) = spec.allowed_lateness {
        child.args(["--allowed-lateness", &lateness.to_string()]);
    }
    if !spec.state_backend.is_full() {
        child.args(["--state-backend", &spec.state_backend.to_string()]);
    }
    Ok(child)
}

/// This binary as a child `keel sweep` of `spec`'s own stream (`--scenario` or its
/// `--events` file) with every knob of `spec` (`ScenarioSpec::command_args`), and `extra`.
fn scenario_child(
    spec: &ScenarioSpec,
    extra: &[String],
) -> Result<std::process::Command, KeelError> {
    let mut child = keel_child("sweep")?;
    child.args(spec.command_args()).args(extra);
    Ok(child)
}

/// Runs `command` timed from outside, its peak RSS from `wait4`; its stdout if `capture`.
fn timed(
    mut command: std::process::Command,
    what: &str,
    capture: bool,
) -> Result<(RunSize, Vec<u8>), KeelError> {
    use std::io::Read;
    command.stdout(if capture {
        std::process::Stdio::piped()
    } else {
        std::process::Stdio::null()
    });
    let started = std::time::Instant::now();
    let mut child = command
        .spawn()
        .map_err(|e| failed(format!("cannot start {what}: {e}")))?;
    let mut stdout = Vec::new();
    // Read to the end first: a child blocked on a full pipe would never exit.
    let read = child
        .stdout
        .take()
        .map_or(Ok(0), |mut out| out.read_to_end(&mut stdout));
    let (status, peak_rss_kb) =
        wait_with_peak_rss(child.id()).map_err(|e| failed(format!("{what}: {e}")))?;
    read.map_err(|e| failed(format!("{what}: reading its output: {e}")))?;
    if status != 0 {
        return Err(failed(format!("{what} exited with wait status {status}")));
    }
    let size = RunSize {
        elapsed: started.elapsed().as_secs_f64(),
        peak_rss_kb,
    };
    Ok((size, stdout))
}

/// `keel gen --events N --seed 1` into a temporary file, then this binary as a child `keel
/// run --events FILE` with `spec`'s window, out-of-orderness, checkpoint interval and allowed
/// lateness, timed from outside; its peak RSS from `wait4`. The file is removed after.
fn run_size(spec: &ScenarioSpec, events: u64) -> Result<RunSize, KeelError> {
    let file = GenFile::new(events)?;
    let command = child("run", spec, &file, &[])?;
    Ok(timed(command, &format!("keel run on {events} events"), false)?.0)
}

/// A default sweep shorter than this is run [`SHORT_SWEEP_REPEATS`] times and its median
/// time reported: on this 2-core machine one run of the 3,000-event sweep (about 70 ms, a
/// process start included) measured anywhere from 63 to 88 ms back to back, which alone
/// moved its speed-up against `--naive` (about 8 s) between 90x and 121x.
const SHORT_SWEEP_SECONDS: f64 = 1.0;

/// How many runs a short default sweep's median is taken over (odd: the median is a run).
const SHORT_SWEEP_REPEATS: usize = 5;

/// A sweep timed from outside by `sweep_size`: `make(naive)` is its child process, the
/// default sweep or the naive one; `what` names it in errors.
type SweepChild<'a> = dyn Fn(bool) -> Result<std::process::Command, KeelError> + 'a;

/// Times the sweep `make` starts (see [`SweepChild`]): the median of
/// [`SHORT_SWEEP_REPEATS`] runs where one is shorter than [`SHORT_SWEEP_SECONDS`], each
/// checked to print the first one's report, with the highest peak RSS; then, if `naive`,
/// the naive sweep once, and whether it printed the same report. The points are summed from
/// the JSON report's rows.
fn sweep_size(what: &str, naive: bool, make: &SweepChild<'_>) -> Result<SweepSize, KeelError> {
    let (first, report) = timed(make(false)?, what, true)?;
    let mut fast_sizes = vec![first];
    if first.elapsed < SHORT_SWEEP_SECONDS {
        // Bounded: SHORT_SWEEP_REPEATS runs in all. Each must print the same report.
        while fast_sizes.len() < SHORT_SWEEP_REPEATS {
            let (size, again) = timed(make(false)?, what, true)?;
            if again != report {
                return Err(failed(format!(
                    "{what}: run {} printed another report than the first (a determinism bug)",
                    fast_sizes.len() + 1
                )));
            }
            fast_sizes.push(size);
        }
    }
    let fast_runs = fast_sizes.len();
    let peak_rss_kb = fast_sizes
        .iter()
        .map(|size| size.peak_rss_kb)
        .max()
        .unwrap_or(0);
    fast_sizes.sort_by(|a, b| a.elapsed.total_cmp(&b.elapsed));
    let fast = RunSize {
        elapsed: fast_sizes[fast_runs / 2].elapsed,
        peak_rss_kb,
    };
    let parsed: serde_json::Value = serde_json::from_slice(&report)
        .map_err(|e| failed(format!("{what}: its report is not JSON: {e}")))?;
    let points = parsed["rows"].as_array().map_or(0, |rows| {
        rows.iter().filter_map(|r| r["points"].as_u64()).sum()
    });
    let naive = if naive {
        let what = format!("{what} --naive");
        let (size, naive_report) = timed(make(true)?, &what, true)?;
        Some((size, naive_report == report))
    } else {
        None
    };
    Ok(SweepSize {
        points,
        fast,
        fast_runs,
        naive,
    })
}

impl SweepSize {
    /// The bench line's figures after what was swept (`points=... elapsed=...`), with the
    /// naive sweep's or why it did not run, and a newline.
    fn line(&self, naive_max: u64) -> String {
        let per_second = self.points as f64 / self.fast.elapsed.max(1e-9);
        let mut line = format!(
            "points={} elapsed={:.3}s{} points_per_second={per_second:.0} us_per_point={:.1} peak_rss_mb={:.1}",
            self.points,
            self.fast.elapsed,
            if self.fast_runs > 1 {
                format!(" (median of {} runs)", self.fast_runs)
            } else {
                String::new()
            },
            self.fast.elapsed * 1e6 / self.points.max(1) as f64,
            self.fast.peak_rss_kb as f64 / 1024.0,
        );
        match &self.naive {
            Some((naive, identical)) => line.push_str(&format!(
                " naive_elapsed={:.3}s naive_peak_rss_mb={:.1} speed_up={:.1}x reports={}\n",
                naive.elapsed,
                naive.peak_rss_kb as f64 / 1024.0,
                naive.elapsed / self.fast.elapsed.max(1e-9),
                if *identical { "identical" } else { "DIFFER" },
            )),
            None => line.push_str(&format!(
                " naive=not-run (more than --sweep-naive-max {naive_max} events)\n"
            )),
        }
        line
    }
}

/// Waits for the child `pid` and returns its wait status and peak RSS in KiB. std's
/// `Child::wait` does not return the child's resource usage; `wait4` does.
fn wait_with_peak_rss(pid: u32) -> Result<(i32, u64), String> {
    let mut status: libc::c_int = 0;
    // SAFETY: a zeroed rusage is a valid value of this plain C struct, and wait4 only
    // writes into the two locals it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let waited = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut usage) };
    if waited < 0 {
        return Err(format!("wait4: {}", std::io::Error::last_os_error()));
    }
    Ok((status, u64::try_from(usage.ru_maxrss).unwrap_or(0)))
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
