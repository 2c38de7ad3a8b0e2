//! `keel explore`: seeds, each a swarm-drawn fault plan, on every sink asked for.

use super::args::{
    dedup_kinds, jobs, parse_seed_range, table_format, ExpectArg, JobArgs, ScenarioArgs,
    SeedPlanArgs, SeedRange, SinkArg, TableFormatArg,
};
use super::files::prepare;
use super::output::{Output, EXIT_VIOLATION};
use super::progress::Progress;
use super::shard::{shard_output, ShardLine};
use crate::baseline::{baselines, Baseline};
use crate::error::KeelError;
use crate::explore::{
    explore_one, report as explore_report, ExploreReport, ExploreRow, ExploreSpec,
};
use crate::oracle::Expectation;
use crate::parallel::par_map;
use crate::spec::ScenarioSpec;
use clap::Args;
use keel_engine::{Event, SinkKind};
use keel_sim::FaultKind;
use std::collections::BTreeMap;

#[derive(Debug, Args)]
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

    /// Exit 1 if any seed breaks this (and print how to replay it).
    #[arg(long, value_enum)]
    pub expect: Option<ExpectArg>,

    /// Do not shrink the first failing seed.
    #[arg(long)]
    pub no_shrink: bool,

    /// Print the summary and failing seeds, not one row per seed.
    #[arg(long)]
    pub summary_only: bool,

    #[command(flatten)]
    pub job: JobArgs,

    /// Output format.
    #[arg(long, value_enum, default_value_t = TableFormatArg::Table)]
    pub format: TableFormatArg,
}

pub(crate) fn cmd_explore(args: &ExploreArgs) -> Result<Output, KeelError> {
    let (spec, events) = prepare(&args.scenario)?;
    let explore = explore_spec(&args.plans, &args.sinks, args.seeds, args.expect);
    let baselines = explore_baselines(&spec, &events, &explore)?;
    let points = explore.points();
    let range = args
        .job
        .shard
        .map_or(0..points.len(), |shard| shard.range(points.len()));
    let progress = Progress::new(range.len(), args.job.quiet);
    let rows = par_map(
        &points[range],
        jobs(&args.job),
        |&(seed, sink)| explore_one(&explore, &baselines[&sink], seed),
        &|row: &ExploreRow| progress.done(row.failed),
    );
    progress.finish();
    if let Some(shard) = args.job.shard {
        let mut lines = vec![ShardLine::ExploreHeader {
            spec,
            explore,
            shard,
            total: points.len() as u64,
        }];
        lines.extend(rows.into_iter().map(ShardLine::Row));
        return Ok(Output::ok(shard_output(&lines)));
    }
    Ok(finish_explore(
        &spec,
        &explore,
        &baselines,
        rows,
        !args.no_shrink,
        (args.format, args.summary_only),
    ))
}

pub(crate) fn explore_spec(
    args: &SeedPlanArgs,
    sinks: &[SinkArg],
    seeds: SeedRange,
    expect: Option<ExpectArg>,
) -> ExploreSpec {
    ExploreSpec {
        sinks: dedup_kinds(sinks.iter().map(|&s| SinkKind::from(s))),
        faults: dedup_kinds(args.faults.iter().map(|&f| FaultKind::from(f))),
        max_faults: args.max_faults as usize,
        outage_ms: args.outage_ms,
        seeds_start: seeds.start,
        seeds_end: seeds.end,
        expect: expect.map(Expectation::from),
    }
}

pub(crate) fn explore_baselines(
    spec: &ScenarioSpec,
    events: &[Event],
    explore: &ExploreSpec,
) -> Result<BTreeMap<SinkKind, Baseline>, KeelError> {
    baselines(spec, events, &explore.sinks)
}

fn explore_output(
    report: &ExploreReport,
    explore: &ExploreSpec,
    format: TableFormatArg,
    summary_only: bool,
) -> Output {
    let mut stdout = match table_format(format) {
        Some(format) => report.render(format, summary_only),
        None => report.to_json(),
    };
    let exit_code = match (explore.expect, report.failing.first()) {
        (Some(expectation), Some(first)) => {
            if format != TableFormatArg::Json {
                stdout.push_str(&format!(
                    "\nVIOLATION of --expect {}: seed {} {}: {}\n  reproduce: {}\n",
                    expectation.name(),
                    first.seed,
                    first.sink,
                    first.outcome,
                    first.reproduce
                ));
            }
            EXIT_VIOLATION
        }
        _ => 0,
    };
    Output { stdout, exit_code }
}

/// The exploration report from its rows (shrinking the first failure if asked), rendered.
pub(crate) fn finish_explore(
    spec: &ScenarioSpec,
    explore: &ExploreSpec,
    baselines: &BTreeMap<SinkKind, Baseline>,
    rows: Vec<ExploreRow>,
    shrink_first: bool,
    (format, summary_only): (TableFormatArg, bool),
) -> Output {
    let command = |command: &str, seed: u64| spec.command_with_seed(command, seed);
    let report = explore_report(
        &spec.label(),
        spec.protocol.name(),
        explore,
        baselines,
        rows,
        shrink_first,
        &command,
    );
    explore_output(&report, explore, format, summary_only)
}
