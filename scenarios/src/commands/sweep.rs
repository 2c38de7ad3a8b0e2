//! `keel sweep`: every single fault (or pair) at every step where it applies.

use super::args::{
    dedup_kinds, jobs, table_format, ExpectArg, FaultArg, JobArgs, ScenarioArgs, SinkArg,
    TableFormatArg,
};
use super::files::prepare;
use super::output::{Output, EXIT_VIOLATION};
use super::progress::Progress;
use super::shard::{shard_output, ShardLine};
use crate::baseline::baselines;
use crate::error::KeelError;
use crate::oracle::Expectation;
use crate::parallel::par_map;
use crate::sweep::{
    aggregate, run_point, sweep_points, PointRecord, SweepPoint, SweepReport, SweepSpec,
};
use clap::Args;
use keel_engine::SinkKind;
use keel_sim::FaultKind;

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

    /// Length of a sink outage, in simulated milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 2_000)]
    pub outage_ms: u64,

    /// 1: every single fault; 2: also a second fault at every step after the first
    /// (recovery included).
    #[arg(long, value_name = "D", default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2))]
    pub depth: u8,

    /// Exit 1 if any point breaks this.
    #[arg(long, value_enum)]
    pub expect: Option<ExpectArg>,

    #[command(flatten)]
    pub job: JobArgs,

    /// Output format.
    #[arg(long, value_enum, default_value_t = TableFormatArg::Table)]
    pub format: TableFormatArg,
}

pub(crate) fn cmd_sweep(args: &SweepArgs) -> Result<Output, KeelError> {
    let (spec, events) = prepare(&args.scenario)?;
    let sweep = SweepSpec {
        sinks: dedup_kinds(args.sinks.iter().map(|&s| SinkKind::from(s))),
        faults: dedup_kinds(args.faults.iter().map(|&f| FaultKind::from(f))),
        depth: args.depth,
        outage_ms: args.outage_ms,
    };
    let baselines = baselines(&spec, &events, &sweep.sinks)?;
    let points = sweep_points(&spec, &sweep, &baselines);
    let range = args
        .job
        .shard
        .map_or(0..points.len(), |shard| shard.range(points.len()));
    let indexed: Vec<(u64, &SweepPoint)> = range.clone().map(|i| (i as u64, &points[i])).collect();
    let progress = Progress::new(indexed.len(), args.job.quiet);
    let records: Vec<PointRecord> = par_map(
        &indexed,
        jobs(&args.job),
        |(index, point)| run_point(&spec, &baselines, *index, point),
        &|records: &Vec<PointRecord>| progress.done(records.iter().any(|r| r.failed)),
    )
    .into_iter()
    .flatten()
    .collect();
    progress.finish();
    let expect = args.expect.map(Expectation::from);
    if let Some(shard) = args.job.shard {
        let mut lines = vec![ShardLine::SweepHeader {
            spec,
            sweep,
            shard,
            total: points.len() as u64,
            expect,
        }];
        lines.extend(records.into_iter().map(ShardLine::Point));
        return Ok(Output::ok(shard_output(&lines)));
    }
    let report = aggregate(&spec.label(), spec.protocol.name(), &records);
    Ok(sweep_output(&report, &records, expect, args.format))
}

/// Renders a sweep report, with exit status 1 if a point breaks `expect`.
pub(crate) fn sweep_output(
    report: &SweepReport,
    records: &[PointRecord],
    expect: Option<Expectation>,
    format: TableFormatArg,
) -> Output {
    let mut stdout = match table_format(format) {
        Some(format) => report.render(format),
        None => report.to_json(),
    };
    let violation = expect.and_then(|expectation| {
        records
            .iter()
            .find(|r| !holds(expectation, r))
            .map(|r| (expectation, r))
    });
    let exit_code = match violation {
        Some((expectation, record)) => {
            if format != TableFormatArg::Json {
                stdout.push_str(&format!(
                    "\nVIOLATION of --expect {}: {} / {}: {}\n  reproduce: {}\n",
                    expectation.name(),
                    record.sink,
                    record.row,
                    record.outcome,
                    record.reproduce
                ));
            }
            EXIT_VIOLATION
        }
        None => 0,
    };
    Output { stdout, exit_code }
}

/// Whether a sweep point holds an expectation.
fn holds(expectation: Expectation, record: &PointRecord) -> bool {
    let no_loss = record.lost == 0 && !record.failed_recovery;
    match expectation {
        Expectation::NoLoss => no_loss,
        Expectation::ExactlyOnce => no_loss && record.outcome == "exactly-once",
    }
}
