//! `keel sweep`: every single fault (or pair) at every step where it applies.

use super::args::{
    check_outage_ms, dedup_kinds, jobs, parse_duration_ms, parse_expectation, parse_point_range,
    table_format, FaultArg, JobArgs, PointRange, ScenarioArgs, Shard, SinkArg, TableFormatArg,
};
use super::files::{prepare, write_atomically, write_out};
use super::interrupt::par_fold_budgeted_with;
use super::output::{Output, EXIT_VIOLATION};
use super::progress::Progress;
use super::shard::{interrupted_shard, ShardLine, ShardWriter};
use crate::baseline::Baseline;
use crate::coverage::{render_coverage, sweep_cells_by_sink, Cell, CoverageTally};
use crate::error::KeelError;
use crate::parallel::Threads;
use crate::property::Expectation;
use crate::sweep::{
    first_faults_len, sharing_chunks, thousands, CountsFile, PairCounts, PointRecord,
    PowerLossPoints, Stopped, SweepPoints, SweepSetup, SweepSpec, ViewExpectations,
    POWER_LOSS_STATES_MAX_DEFAULT, REORDER_WINDOW_CHUNKS_PER_JOB, SHARING_CHUNK_POINTS,
};
use crate::tally::SweepTally;
use clap::Args;
use keel_engine::{Event, SinkKind};
use keel_sim::FaultKind;
use std::collections::BTreeMap;
use std::io::Write;
use std::ops::Range;
use std::sync::Arc;

#[derive(Debug, Args)]
pub struct SweepArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,

    /// The sinks to sweep.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "append,idempotent"
    )]
    pub sinks: Vec<SinkArg>,

    /// The fault kinds to inject.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "process-crash,power-loss,disk-error,sink-error,ack-lost,sink-unavailable"
    )]
    pub faults: Vec<FaultArg>,

    /// Length of a sink outage, in simulated milliseconds (only with sink-unavailable in
    /// --faults).
    #[arg(long, value_name = "MS", default_value_t = 2_000)]
    pub outage_ms: u64,

    /// 1: every single fault; 2: also a second fault at every step after the first
    /// (recovery included).
    #[arg(long, value_name = "D", default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2))]
    pub depth: u8,

    /// The most crash states a power loss at one step is run in (1..=65536). A step with
    /// more is sampled: N states drawn without repetition from --seed (N seeds where a step
    /// has more than 65,536), its row marked `*` and `exhaustive: false`.
    #[arg(long, value_name = "N", default_value_t = POWER_LOSS_STATES_MAX_DEFAULT,
          value_parser = clap::value_parser!(u64).range(1..=POWER_LOSS_STATES_MAX_DEFAULT))]
    pub power_loss_states_max: u64,

    /// What a power-loss point is. `classes` runs one crash state a class of those that
    /// recovery cannot tell apart (the same whole lines of the sink file kept, every other
    /// choice alike) and counts the row's crash states exactly, however many. At depth 2
    /// a class is also split by whether bytes follow the kept lines (recovery cuts and
    /// syncs them away: steps a second fault can land on), and a pair counts the product
    /// of its two classes' states
    #[arg(long, value_enum, value_name = "P", default_value_t = PowerLossPointsArg::States)]
    pub power_loss_points: PowerLossPointsArg,

    /// What every point must hold, judged in every consumer view: a comma-separated list of
    /// no-loss, no-duplicates, no-wrong, no-rollback, recovers, consistent-view, or the
    /// shorthands at-least-once and exactly-once. A read_uncommitted consumer is never held to
    /// no-duplicates. Default: what each sink promises (append: at-least-once; idempotent and
    /// transactional: exactly-once). Exit 1 if a point breaks it (without --expect, exit 1
    /// only when the fault-free run departs from the reference model).
    #[arg(long, value_name = "PROPERTIES", value_parser = parse_expectation)]
    pub expect: Option<Expectation>,

    /// Run every point from scratch to its end (the algorithm before forks): slower, and
    /// the reference the default is checked against. By default each point starts from a
    /// snapshot of its sink's fault-free run taken at or before its first fault. The report
    /// is the same either way.
    #[arg(long)]
    pub naive: bool,

    /// At --depth 2: a file that keeps the count of the sweep's pairs, which each shard
    /// would otherwise run again (every first fault once: a quarter of a shard's time on a
    /// 1,000-event stream). If FILE exists it must hold this very sweep's count (the same
    /// scenario, events, options and keel version; anything else is refused), and no first
    /// fault runs to count; else the count runs and is written to FILE.
    #[arg(long, value_name = "FILE")]
    pub counts: Option<std::path::PathBuf>,

    /// A wall-clock budget (`60s`, `500ms`, `10m`, `2h`), counted from the command's start:
    /// once it has passed, no point starts, and the report is of the points before the
    /// first not run, every row not finished saying `exhaustive: false` and how many points
    /// it has left, with the command that resumes there (`--points`). The clock decides only
    /// where the sweep stops: the points it ran are tallied as in a whole sweep.
    #[arg(long = "time-budget", value_name = "DURATION", value_parser = parse_duration_ms)]
    pub time_budget_ms: Option<u64>,

    /// Run at most N points (of the sweep, its --shard, or its --points), then stop as
    /// --time-budget does: the same stop on every machine.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub points_max: Option<u64>,

    /// Run only points A..B of the sweep (A..: to its end; within --shard's, if given) and,
    /// as --shard, print their JSON lines for `keel merge`: the part a budgeted run left
    /// (it prints the command), or the first part, kept (`--points 0.. --time-budget 60s
    /// --out FILE`). Point numbers are those of the whole sweep.
    #[arg(long, value_name = "A..B", value_parser = parse_point_range)]
    pub points: Option<PointRange>,

    /// Stop once a point breaks what its row is judged by (--expect, or what its sink
    /// promises): the report, with the failure's reproduce line, is of the points up to the
    /// end of the chunk of points it was in (1,024 at most; chunks are the sweep's own, so
    /// the stop is the same on every machine), stopped as a budget stops it.
    #[arg(long)]
    pub fail_fast: bool,

    /// After the report, the sweep's cells (the phase of the protocol a step is in, named by
    /// its operation and target, crossed with the fault kind) and, for each, the first point
    /// the sweep ran there (its first fault's): every cell, unless a budget stopped it
    /// (with --format table or markdown).
    #[arg(long)]
    pub coverage: bool,

    #[command(flatten)]
    pub job: JobArgs,

    /// Output format (not with --shard or --points, which print JSON lines for `keel merge`).
    #[arg(long, value_enum, default_value_t = TableFormatArg::Table, conflicts_with_all = ["shard", "points"])]
    pub format: TableFormatArg,
}

/// `--power-loss-points`: what a power-loss point is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PowerLossPointsArg {
    /// One crash state a point: every state of a step, or a draw of them
    States,
    /// One class of crash states a point, counted for all of its states: the classes are the
    /// engine's claim of what its recovery reads, not checked (states checks every state)
    Classes,
}

impl From<PowerLossPointsArg> for PowerLossPoints {
    fn from(arg: PowerLossPointsArg) -> PowerLossPoints {
        match arg {
            PowerLossPointsArg::States => PowerLossPoints::States,
            PowerLossPointsArg::Classes => PowerLossPoints::Classes,
        }
    }
}

/// At depth 2, power-loss classes pair with process crashes and power losses only: the
/// states of a class (split by tail) run alike when the next fault restarts the process,
/// not when a disk or sink fault ends or bends recovery's cut of the torn bytes they
/// differ in.
pub(crate) fn check_classes_pair(
    points: PowerLossPoints,
    depth: u8,
    faults: &[FaultKind],
) -> Result<(), KeelError> {
    let other = faults
        .iter()
        .find(|kind| !matches!(kind, FaultKind::ProcessCrash | FaultKind::PowerLoss));
    match other {
        Some(other) if points == PowerLossPoints::Classes && depth > 1 => {
            Err(KeelError::usage(format!(
                "--power-loss-points classes at --depth 2 pairs process-crash and power-loss only, not {other}: a class's states differ in torn bytes that recovery cuts away, and a {other} during that cut would see them"
            )))
        }
        _ => Ok(()),
    }
}

/// `keel sweep`: its report, or with `--out` nothing (the report is in the file). A shard
/// writes its lines as they are made: into `--out`, else through `stdout` when given
/// (`keel`'s own), else into the output returned.
pub(crate) fn cmd_sweep(
    args: &SweepArgs,
    stdout: Option<&mut (dyn Write + Send)>,
) -> Result<Output, KeelError> {
    // The budget counts from here (the baselines and the count of points are part of it).
    let deadline = args
        .time_budget_ms
        .map(|ms| std::time::Instant::now() + std::time::Duration::from_millis(ms));
    check_outage_ms(&args.scenario.given, &args.faults)?;
    let (spec, events) = prepare(&args.scenario)?;
    let sweep = SweepSpec {
        sinks: dedup_kinds(args.sinks.iter().map(|&s| SinkKind::from(s))),
        faults: dedup_kinds(args.faults.iter().map(|&f| FaultKind::from(f))),
        depth: args.depth,
        outage_ms: args.outage_ms,
        expect: args.expect.clone(),
        power_loss_states_max: args.power_loss_states_max,
        power_loss_points: args.power_loss_points.into(),
    };
    check_classes_pair(sweep.power_loss_points, sweep.depth, &sweep.faults)?;
    let printed_report = matches!(
        args.format,
        TableFormatArg::Table | TableFormatArg::Markdown
    ) && args.job.shard.is_none()
        && args.points.is_none();
    if args.coverage && !printed_report {
        return Err(KeelError::usage(
            "--coverage prints after a report in --format table or markdown, not with --shard or --points",
        ));
    }
    if args.counts.is_some() && sweep.depth != 2 {
        return Err(KeelError::usage(
            "--counts keeps a depth-2 sweep's count of pairs: it needs --depth 2",
        ));
    }
    let events: Arc<[Event]> = events.into();
    let saved = match &args.counts {
        Some(path) => read_counts(path, &spec, &sweep, &events)?,
        None => None,
    };
    let setup = SweepSetup::new(&spec, Arc::clone(&events), &sweep, args.naive)?;
    // Counted, not listed: each chunk draws its points when it runs. At depth 2 counting
    // runs every first fault once, with a bar of its own (unless --counts holds the count).
    let to_count = match saved {
        Some(_) => 0,
        None => first_faults_len(&sweep, &setup.baselines),
    };
    let counting = Progress::counting(to_count, args.job.quiet);
    let points = SweepPoints::counting(
        &spec,
        &sweep,
        &setup.baselines,
        setup.forks.as_ref(),
        jobs(&args.job),
        &|| counting.done(false),
        saved.as_ref(),
    )
    .map_err(|why| {
        let path = args
            .counts
            .as_ref()
            .expect("only given counts disagree")
            .display();
        KeelError::usage(format!("--counts {path}: {why}"))
    })?;
    counting.finish();
    if let (Some(path), None) = (&args.counts, &saved) {
        let file = CountsFile::new(&spec, &sweep, &events, points.pair_counts());
        write_atomically(path, file.to_json().as_bytes()).map_err(|e| {
            KeelError::usage(format!("cannot write --counts {}: {e}", path.display()))
        })?;
    }
    let range = points_to_run(args, points.len())?;
    // Where a --points-max budget ends it.
    let run_to = args.points_max.map_or(range.end, |max| {
        range.start.saturating_add(max).min(range.end)
    });
    let chunks = sharing_chunks(range.start..run_to);
    if !args.job.quiet {
        // A status line, not part of the report: stdout stays the report alone.
        eprintln!(
            "{}",
            planned_line(args, &sweep, &points, &(range.start..run_to), || {
                setup.run_chunk(&points, chunks[0].clone());
            })
        );
    }
    let progress = Progress::new((run_to - range.start) as usize, args.job.quiet);
    // On several threads each runs against a copy of its own where that pays
    // (`SweepSetup::replica`), else all share `setup`; one thread runs against `setup`.
    let threads = Threads {
        jobs: jobs(&args.job),
        window_items_per_job: REORDER_WINDOW_CHUNKS_PER_JOB,
    };
    let worker = |_thread: usize| {
        (threads.jobs > 1).then(|| setup.replica(&spec, &events, &sweep, points.len()))?
    };
    let run = |own: &mut Option<SweepSetup>, chunk: &Range<u64>| {
        own.as_ref()
            .unwrap_or(&setup)
            .run_chunk(&points, chunk.clone())
    };
    // What each view is judged by, built once: a depth-2 sweep counts millions of points
    // whose views break a property nobody asked for (an append sink's duplicates).
    let expectations = ViewExpectations::new(args.expect.as_ref(), &sweep.sinks);
    let fails = |r: &PointRecord| !r.failures_in(&expectations).is_empty();
    // A chunk's records, a point's after another's (one a view, or one for a span of
    // points): a bar step a point.
    let on_done = |chunk: &Vec<PointRecord>| {
        for records in chunk.chunk_by(|a, b| a.index == b.index) {
            progress.done_many(records[0].points(), records.iter().any(fails))
        }
    };
    // A shard prints every point's record, for `keel merge` to tally: each written as a
    // line as its chunk finishes, in point order, through `stdout` or into `--out`, so
    // nothing waits for the end (a 3.6M-point shard of a depth-2 sweep held 4 GB of
    // records, and then 2 GB of their text). Otherwise the records are tallied as the
    // points finish, in point order: no point's record is kept.
    let lines_out = args.job.shard.is_some() || args.points.is_some();
    let mut shard_lines = match lines_out {
        true => {
            let mut lines = ShardWriter::new(args.job.out.as_deref(), stdout)?;
            lines.push(&ShardLine::SweepHeader {
                spec: spec.clone(),
                sweep: sweep.clone(),
                shard: args.job.shard.unwrap_or(Shard { index: 0, count: 1 }),
                total: points.len(),
                points: args.points.map(|_| [range.start, range.end]),
            });
            Some(lines)
        }
        false => None,
    };
    let mut tally = SweepTally::new(&spec, &sweep, args.expect.as_ref());
    let mut coverage = match args.coverage {
        true => Some(SweepCoverage::new(&setup.baselines, &sweep)),
        false => None,
    };
    // Whether --fail-fast stopped the sweep (at the chunk last consumed).
    let mut failed_fast = false;
    let swept = par_fold_budgeted_with(
        &chunks,
        threads,
        worker,
        run,
        &on_done,
        &mut |chunk: Vec<PointRecord>| {
            failed_fast = args.fail_fast && chunk.iter().any(fails);
            match shard_lines.as_mut() {
                Some(lines) => chunk
                    .into_iter()
                    .for_each(|record| lines.push(&ShardLine::Point(record))),
                None => chunk.iter().for_each(|record| {
                    tally.add(record);
                    if let Some(coverage) = coverage.as_mut() {
                        coverage.add(record);
                    }
                }),
            }
            !failed_fast
        },
        &progress,
        deadline,
    );
    // Where the budget stopped the sweep, if before the end of its points.
    let stop = swept.as_ref().ok().and_then(|&consumed| {
        let next = chunks.get(consumed).map_or(run_to, |chunk| chunk.start);
        (next < range.end).then(|| {
            let by = match (next < run_to, args.time_budget_ms) {
                _ if failed_fast => {
                    "--fail-fast (a point broke what its row is judged by)".to_string()
                }
                (true, Some(ms)) => format!("--time-budget {}", duration_ms_text(ms)),
                _ => format!(
                    "--points-max {}",
                    args.points_max.expect("a budget stopped it")
                ),
            };
            Stopped {
                by,
                points_run: next - range.start,
                points_total: range.end - range.start,
                resume: format!(
                    "{} --points {next}..{} --out FILE",
                    sweep_command(args, &spec, &sweep),
                    range.end
                ),
            }
        })
    });
    match (swept, shard_lines) {
        (Err(error), Some(lines)) => Err(interrupted_shard(error, &lines)),
        (Err(error), None) => Err(error),
        (Ok(_), Some(mut lines)) => {
            if let Some(stop) = &stop {
                let next = range.start + stop.points_run;
                lines.push(&ShardLine::SweepStopped { next });
                // Not a report: stdout (or --out) holds the lines.
                let this = args.job.out.as_deref().unwrap_or("these lines");
                eprintln!(
                    "sweep: stopped by {} after {} of its {} points ({}..{}); the rest: {}, then keel merge {this} FILE (with the sweep's other parts, if any)",
                    stop.by,
                    thousands(stop.points_run),
                    thousands(stop.points_total),
                    range.start,
                    range.end,
                    stop.resume
                );
            }
            lines.finish()
        }
        (Ok(_), None) => {
            let row_lens = points.row_lens();
            let mut output = render_stopped(tally, args.format, stop, &row_lens);
            if let Some(coverage) = coverage {
                output.stdout.push_str(&render_coverage(
                    &coverage.tally.finish(),
                    "the sweep's points (each cell with the first point there, by its first fault)",
                    args.format == TableFormatArg::Markdown,
                ));
            }
            write_out(args.job.out.as_deref(), output)
        }
    }
}

/// The points this run covers: the sweep's, its `--shard`'s, or the part `--points` asks of
/// either (which must lie within).
fn points_to_run(args: &SweepArgs, len: u64) -> Result<Range<u64>, KeelError> {
    let whole = args.job.shard.map_or(0..len, |shard| shard.range_u64(len));
    let Some(part) = args.points else {
        return Ok(whole);
    };
    let end = part.end.unwrap_or(whole.end);
    let of = match args.job.shard {
        Some(shard) => format!("shard {}/{}'s points", shard.index, shard.count),
        None => "the sweep's points".to_string(),
    };
    if part.start < whole.start || end > whole.end || part.start >= end {
        return Err(KeelError::usage(format!(
            "--points {}..{end} is not a part of {of}, {}..{}",
            part.start, whole.start, whole.end
        )));
    }
    Ok(part.start..end)
}

/// A budget as it is written: `60s`, or `1500ms` where it is not whole seconds.
fn duration_ms_text(ms: u64) -> String {
    if ms % 1_000 == 0 {
        format!("{}s", ms / 1_000)
    } else {
        format!("{ms}ms")
    }
}

/// `keel sweep` with every option that decides its points and their report (the scenario's,
/// the sweep's, `--shard`), without a budget or a part: the command a resume line extends.
fn sweep_command(args: &SweepArgs, spec: &crate::spec::ScenarioSpec, sweep: &SweepSpec) -> String {
    let mut parts = vec![spec.command("sweep")];
    let names = |names: Vec<String>| names.join(",");
    parts.push(format!(
        "--sinks {}",
        names(sweep.sinks.iter().map(|s| s.name().to_string()).collect())
    ));
    parts.push(format!(
        "--faults {}",
        names(sweep.faults.iter().map(|f| f.name().to_string()).collect())
    ));
    if sweep.faults.contains(&FaultKind::SinkUnavailable) {
        parts.push(format!("--outage-ms {}", sweep.outage_ms));
    }
    if sweep.depth != 1 {
        parts.push(format!("--depth {}", sweep.depth));
    }
    if let Some(expect) = &sweep.expect {
        parts.push(format!("--expect {expect}"));
    }
    if sweep.power_loss_states_max != POWER_LOSS_STATES_MAX_DEFAULT {
        parts.push(format!(
            "--power-loss-states-max {}",
            sweep.power_loss_states_max
        ));
    }
    if sweep.power_loss_points == PowerLossPoints::Classes {
        parts.push("--power-loss-points classes".to_string());
    }
    if args.naive {
        parts.push("--naive".to_string());
    }
    if let Some(counts) = &args.counts {
        parts.push(format!("--counts {}", counts.display()));
    }
    if let Some(shard) = args.job.shard {
        parts.push(format!("--shard {}/{}", shard.index, shard.count));
    }
    parts.join(" ")
}

/// The points past which the line [`planned_line`] prints before a sweep also estimates how
/// long it runs: eight chunks, so that the warm-up it times (the first chunk, run once more
/// and thrown away) costs at most an eighth of the sweep.
const ESTIMATE_POINTS_MIN: u64 = 8 * SHARING_CHUNK_POINTS;

/// The line printed on stderr before a sweep starts (not with `--quiet`): how many points
/// it plans, per sink and row, and for a sweep of more than [`ESTIMATE_POINTS_MIN`] points
/// how long that is at the rate of a warm-up (`warm_up`: its first chunk, timed on the wall
/// clock, which only this command layer reads here), with the options that reduce it. A
/// billion-point sweep said so only on a terminal's progress bar.
fn planned_line(
    args: &SweepArgs,
    sweep: &SweepSpec,
    points: &SweepPoints,
    range: &Range<u64>,
    warm_up: impl FnOnce(),
) -> String {
    let rows: Vec<String> = points
        .row_lens()
        .iter()
        .map(|(sink, row, len)| format!("{sink} {row} {}", thousands(*len)))
        .collect();
    let mut line = format!(
        "sweep: {} points planned ({})",
        thousands(points.len()),
        rows.join(", ")
    );
    let to_run = range.end - range.start;
    if let Some(shard) = args.job.shard {
        line.push_str(&format!(
            "; shard {}/{} runs {} of them",
            shard.index,
            shard.count,
            thousands(to_run)
        ));
    }
    if to_run <= ESTIMATE_POINTS_MIN {
        return line;
    }
    let started = std::time::Instant::now();
    warm_up();
    let warm_up_s = started.elapsed().as_secs_f64();
    let warmed = SHARING_CHUNK_POINTS.min(to_run);
    if warm_up_s <= 0.0 {
        return line;
    }
    let rate_per_s = warmed as f64 / warm_up_s;
    let mut reduce = vec!["--faults", "--sinks"];
    if sweep.faults.contains(&FaultKind::PowerLoss) {
        reduce.extend(["--power-loss-states-max", "--power-loss-points classes"]);
    }
    if sweep.depth > 1 {
        reduce.push("--depth 1");
    }
    reduce.push("--shard");
    let (last, init) = reduce.split_last().expect("options");
    line.push_str(&format!(
        "; at about {} points/s, measured on a warm-up run of its first {} points on one thread (later points may run faster or slower), this is about {} on one thread; {} or {last} reduce it",
        thousands(rate_per_s.round() as u64),
        thousands(warmed),
        duration_text(to_run as f64 / rate_per_s),
        init.join(", "),
    ));
    line
}

/// Seconds as a person reads them: "40 s", "12 min", "28 h", "9 days".
fn duration_text(seconds: f64) -> String {
    let rounded = |x: f64| thousands(x.round().max(1.0) as u64);
    if seconds < 120.0 {
        format!("{} s", rounded(seconds))
    } else if seconds < 2.0 * 3600.0 {
        format!("{} min", rounded(seconds / 60.0))
    } else if seconds < 3.0 * 86_400.0 {
        format!("{} h", rounded(seconds / 3600.0))
    } else {
        format!("{} days", rounded(seconds / 86_400.0))
    }
}

/// The count `--counts` holds at `path` for this sweep, or None where there is no file yet.
fn read_counts(
    path: &std::path::Path,
    spec: &crate::spec::ScenarioSpec,
    sweep: &SweepSpec,
    events: &[Event],
) -> Result<Option<PairCounts>, KeelError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(KeelError::usage(format!(
                "cannot read --counts {}: {e}",
                path.display()
            )))
        }
    };
    CountsFile::counts_of(&text, spec, sweep, events)
        .map(Some)
        .map_err(|why| KeelError::usage(format!("--counts {}: {why}", path.display())))
}

/// Renders a finished tally, with its first violation under the table.
pub(crate) fn render(tally: SweepTally, format: TableFormatArg) -> Output {
    render_stopped(tally, format, None, &[])
}

/// [`render`] of a sweep that its budget may have `stopped` before the end of the points
/// `row_lens` plans (then every row is laid out, as [`crate::sweep::SweepReport::stop`]).
fn render_stopped(
    tally: SweepTally,
    format: TableFormatArg,
    stopped: Option<Stopped>,
    row_lens: &[(SinkKind, String, u64)],
) -> Output {
    let (mut report, violation) = tally.finish();
    if let Some(stopped) = stopped {
        report.stop(stopped, row_lens);
    }
    let mut stdout = match table_format(format) {
        Some(format) => report.render(format),
        None => report.to_json(),
    };
    let exit_code = match violation {
        Some(violation) => {
            if format != TableFormatArg::Json {
                let view = violation
                    .view
                    .map_or(String::new(), |v| format!(" / {}", v.name()));
                stdout.push_str(&format!(
                    "\nVIOLATION of --expect {}: {} / {}{view}: {} broken ({})\n  reproduce: {}\n",
                    report.judged_by,
                    violation.sink,
                    violation.row,
                    violation.failures.join(","),
                    violation.outcome,
                    violation.reproduce,
                ));
            }
            EXIT_VIOLATION
        }
        None => 0,
    };
    Output { stdout, exit_code }
}

/// What `--coverage` counts as a sweep's records come: each record's cell, by its first
/// fault's step in its sink's fault-free run.
struct SweepCoverage {
    tally: CoverageTally,
    phases: BTreeMap<SinkKind, Vec<String>>,
}

impl SweepCoverage {
    fn new(baselines: &BTreeMap<SinkKind, Baseline>, sweep: &SweepSpec) -> SweepCoverage {
        let mut cells = BTreeMap::new();
        let mut phases = BTreeMap::new();
        for (sink, sweep_cells) in sweep_cells_by_sink(baselines, &sweep.faults) {
            cells.insert(sink, sweep_cells.cells);
            phases.insert(sink, sweep_cells.phases_by_step);
        }
        SweepCoverage {
            tally: CoverageTally::new(cells),
            phases,
        }
    }

    fn add(&mut self, record: &PointRecord) {
        let Some(first) = record.faults.first() else {
            return;
        };
        let phase = self.phases[&record.sink]
            .get(first.step as usize)
            .cloned()
            .expect("a first fault aims at a step of the fault-free run");
        let cell = Cell {
            phase,
            fault: first.fault.kind(),
        };
        self.tally.add(record.index, record.sink, vec![cell]);
    }
}
