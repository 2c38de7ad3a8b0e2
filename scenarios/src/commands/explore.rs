//! `keel explore`: seeds, each a swarm-drawn fault plan, on every sink asked for.

use super::args::{
    check_outage_ms, dedup_kinds, jobs, parse_expectation, parse_seed_range,
    reject_seed_for_seed_range, table_format, JobArgs, ScenarioArgs, SeedPlanArgs, SeedRange,
    SinkArg, TableFormatArg,
};
use super::files::{prepare, write_out};
use super::interrupt::par_fold_interruptible_with;
use super::output::{Output, EXIT_VIOLATION};
use super::progress::Progress;
use super::shard::{interrupted_shard, ShardLine, ShardWriter};
use crate::baseline::{baselines, Baseline};
use crate::coverage::{render_coverage, sweep_cells_by_sink, CoverageTally};
use crate::error::KeelError;
use crate::explore::{explore_one, ExploreReport, ExploreSpec, ExploreTally, Explored};
use crate::parallel::{chunks_at_multiples, Threads};
use crate::property::{Expectation, MATCHES_MODEL};
use crate::spec::ScenarioSpec;
use clap::Args;
use keel_engine::{Event, SinkKind};
use keel_sim::FaultKind;
use std::collections::BTreeMap;
use std::io::Write;
use std::ops::Range;

#[derive(Debug, Args)]
// --seed is refused here (each seed of --seeds is its run's seed), so --help does not show it.
#[command(mut_arg("seed", |arg| arg.hide(true)))]
pub struct ExploreArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,

    #[command(flatten)]
    pub plans: SeedPlanArgs,

    /// The seeds, a half-open range.
    #[arg(long, value_name = "A..B", value_parser = parse_seed_range, default_value = "0..1000")]
    pub seeds: SeedRange,

    /// The sinks to explore.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "append,idempotent"
    )]
    pub sinks: Vec<SinkArg>,

    /// What every seed must hold, judged in every consumer view: a comma-separated list of
    /// no-loss, no-duplicates, no-wrong, no-rollback, recovers, consistent-view, or the
    /// shorthands at-least-once and exactly-once (a read_uncommitted consumer is never held to
    /// no-duplicates). Default: what each sink promises. Exit 1 if a seed breaks it (and
    /// print how to replay it).
    #[arg(long, value_name = "PROPERTIES", value_parser = parse_expectation)]
    pub expect: Option<Expectation>,

    /// Do not shrink the first failing seed (not with --shard: `keel merge` shrinks).
    #[arg(long, conflicts_with = "shard")]
    pub no_shrink: bool,

    /// Print the summary and failing seeds, not one row per seed (the JSON report's rows are
    /// then empty): the seeds are tallied as they finish and no row is kept, so memory does
    /// not grow with the seeds (not with --shard: `keel merge` prints the report).
    #[arg(long, conflicts_with = "shard")]
    pub summary_only: bool,

    /// Report which of the sweep's cells (the phase of the protocol a step is in, named by
    /// its operation and target, crossed with the fault kind: what `keel sweep` tries) the
    /// seeds reached, the first seed that reached each, and the cells they missed (not with
    /// --shard).
    #[arg(long, conflicts_with = "shard")]
    pub coverage: bool,

    #[command(flatten)]
    pub job: JobArgs,

    /// Output format (not with --shard, which prints JSON lines for `keel merge`).
    #[arg(long, value_enum, default_value_t = TableFormatArg::Table, conflicts_with = "shard")]
    pub format: TableFormatArg,
}

/// `keel explore`: its report, or with `--out` nothing (the report is in the file). A shard
/// writes its rows as they come: into `--out`, else through `stdout` when given (`keel`'s
/// own), else into the output returned.
pub(crate) fn cmd_explore(
    args: &ExploreArgs,
    stdout: Option<&mut (dyn Write + Send)>,
) -> Result<Output, KeelError> {
    reject_seed_for_seed_range(&args.scenario.given, args.scenario.seed, "explore")?;
    check_outage_ms(&args.scenario.given, &args.plans.faults)?;
    let (spec, events) = prepare(&args.scenario)?;
    let explore = explore_spec(&args.plans, &args.sinks, args.seeds, args.expect.clone());
    let baselines = explore_baselines(&spec, &events, &explore)?;
    let points_len = explore.points_len();
    let range = args
        .job
        .shard
        .map_or(0..points_len, |shard| shard.range_u64(points_len));
    // Chunks of points, not a list of them: what an exploration holds does not grow with
    // its seeds.
    let chunks = chunks_at_multiples(range.clone(), EXPLORE_CHUNK_POINTS);
    let progress = Progress::new(
        usize::try_from(range.end - range.start).unwrap_or(usize::MAX),
        args.job.quiet,
    );
    // Each point, in point order, to `consume`, as the chunks finish.
    let run_points = |consume: &mut (dyn FnMut(u64, SinkKind, Explored) + Send)| {
        type Done = (u64, Vec<(u64, SinkKind, Explored)>);
        let run = |_: &mut (), chunk: &Range<u64>| -> Done {
            let points = chunk
                .clone()
                .map(|index| {
                    let (seed, sink) = explore.point(index);
                    (seed, sink, explore_one(&explore, &baselines[&sink], seed))
                })
                .collect();
            (chunk.end - chunk.start, points)
        };
        let on_done = |(points, explored): &Done| {
            let failed = explored
                .iter()
                .flat_map(|(_, _, e)| &e.rows)
                .any(|r| !r.failures(explore.expect.as_ref()).is_empty());
            progress.done_many(*points, failed)
        };
        par_fold_interruptible_with(
            &chunks,
            Threads::new(jobs(&args.job)),
            |_| (),
            run,
            &on_done,
            &mut |(_, explored): Done| {
                for (seed, sink, point) in explored {
                    consume(seed, sink, point);
                }
            },
            &progress,
        )
    };
    if let Some(shard) = args.job.shard {
        // A shard's rows are written as they come, in seed order, as a sweep shard's points.
        let mut lines = ShardWriter::new(args.job.out.as_deref(), stdout)?;
        lines.push(&ShardLine::ExploreHeader {
            spec: spec.clone(),
            shard,
            total: explore.row_count(),
            explore: explore.clone(),
        });
        run_points(&mut |_, _, point| {
            point
                .rows
                .into_iter()
                .for_each(|row| lines.push(&ShardLine::Row(row)))
        })
        .map_err(|error| interrupted_shard(error, &lines))?;
        return lines.finish();
    }
    // Tallied as seeds finish, in seed order: rows are kept only where they are printed.
    let mut tally = ExploreTally::new(&spec, &explore, !args.summary_only);
    let mut coverage = match args.coverage {
        true => Some(CoverageTally::new(
            sweep_cells_by_sink(&baselines, &explore.faults)
                .into_iter()
                .map(|(sink, sweep)| (sink, sweep.cells))
                .collect(),
        )),
        false => None,
    };
    run_points(&mut |seed, sink, point| {
        point.rows.into_iter().for_each(|row| tally.add(row));
        if let Some(coverage) = coverage.as_mut() {
            coverage.add(seed, sink, point.cells);
        }
    })?;
    let mut report = tally.finish(&baselines, !args.no_shrink);
    report.coverage = coverage.map(CoverageTally::finish);
    write_out(
        args.job.out.as_deref(),
        explore_output(&report, &explore, args.format, args.summary_only),
    )
}

/// How many points a thread runs at a time (and the progress bar counts at once).
const EXPLORE_CHUNK_POINTS: u64 = 64;

pub(crate) fn explore_spec(
    args: &SeedPlanArgs,
    sinks: &[SinkArg],
    seeds: SeedRange,
    expect: Option<Expectation>,
) -> ExploreSpec {
    ExploreSpec {
        sinks: dedup_kinds(sinks.iter().map(|&s| SinkKind::from(s))),
        faults: dedup_kinds(args.faults.iter().map(|&f| FaultKind::from(f))),
        max_faults: args.max_faults as usize,
        outage_ms: args.outage_ms,
        seeds_start: seeds.start,
        seeds_end: seeds.end,
        expect,
    }
}

pub(crate) fn explore_baselines(
    spec: &ScenarioSpec,
    events: &[Event],
    explore: &ExploreSpec,
) -> Result<BTreeMap<SinkKind, Baseline>, KeelError> {
    baselines(spec, events, &explore.sinks)
}

pub(crate) fn explore_output(
    report: &ExploreReport,
    explore: &ExploreSpec,
    format: TableFormatArg,
    summary_only: bool,
) -> Output {
    let mut stdout = match table_format(format) {
        Some(format) => report.render(format, summary_only),
        None => report.to_json(),
    };
    if let (Some(coverage), Some(table)) = (&report.coverage, table_format(format)) {
        let seeds = format!(
            "seeds {}..{} (each cell with the first seed that reached it)",
            explore.seeds_start, explore.seeds_end
        );
        stdout.push_str(&render_coverage(
            coverage,
            &seeds,
            table == crate::table::TableFormat::Markdown,
        ));
    }
    // Without --expect, failing seeds are reported, not a violation, unless the fault-free
    // run departs from the model: that fails whatever was asked.
    let violation = report
        .failing
        .iter()
        .find(|f| explore.expect.is_some() || f.broken.iter().any(|b| b == MATCHES_MODEL));
    let exit_code = match violation {
        Some(first) => {
            if format != TableFormatArg::Json {
                let view = first
                    .view
                    .as_ref()
                    .map_or(String::new(), |v| format!(" {v}"));
                stdout.push_str(&format!(
                    "\nVIOLATION of --expect {}: seed {} {}{view}: {} broken ({})\n  reproduce: {}\n",
                    report.judged_by,
                    first.seed,
                    first.sink,
                    first.broken.join(","),
                    first.outcome,
                    first.reproduce
                ));
            }
            EXIT_VIOLATION
        }
        None => 0,
    };
    Output { stdout, exit_code }
}
