//! `keel merge`: `--shard` output files (of `sweep`, `explore` or `fidelity kill`) combined
//! into the report an unsharded run prints.

use super::args::{parse_expectation, Shard, TableFormatArg};
use super::explore::{explore_baselines, explore_output};
use super::fidelity::kill_output;
use super::files::load_recorded_events;
use super::output::Output;
use super::shard::{ShardLine, ShardLines};
use super::sweep::render;
use crate::error::KeelError;
use crate::explore::{ExploreSpec, ExploreTally};
use crate::fidelity::{aggregate as fidelity_aggregate, PointComparison};
use crate::property::Expectation;
use crate::spec::ScenarioSpec;
use crate::sweep::{PointRecord, SweepSpec};
use crate::tally::SweepTally;
use clap::Args;
use keel_engine::SinkKind;
use std::collections::BTreeMap;

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Shard files written by `keel sweep --shard`, `keel explore --shard` or `keel fidelity
    /// kill --shard`.
    #[arg(required = true, value_name = "FILES")]
    pub files: Vec<String>,

    /// Do not shrink the first failing seed (explore shards only).
    #[arg(long)]
    pub no_shrink: bool,

    /// Print the summary and failing seeds, not one row per seed (explore shards only; the
    /// JSON report's rows are then empty, and no row is held).
    #[arg(long)]
    pub summary_only: bool,

    /// What every point or seed must hold, as `keel sweep --expect` and `keel explore
    /// --expect` take it (a comma-separated list of properties); overrides the `--expect`
    /// the shards were run with. Exit 1 on a violation.
    #[arg(long, value_name = "PROPERTIES", value_parser = parse_expectation)]
    pub expect: Option<Expectation>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = TableFormatArg::Table)]
    pub format: TableFormatArg,
}

pub(crate) fn cmd_merge(args: &MergeArgs) -> Result<Output, KeelError> {
    // Every file's header first (its first line), each checked against the first file's:
    // a sweep's points are then read one file at a time, in shard order, and tallied as
    // they come, so merging holds no file and no point whole.
    let mut header: Option<(String, ShardLine)> = None;
    let mut shards_seen: Vec<Shard> = Vec::new();
    // Where each file's points start, for a sweep's files of `--points` parts of a shard
    // (a budgeted run and its resumption: the same shard twice).
    let mut starts: Vec<Option<u64>> = Vec::new();
    for path in &args.files {
        let h = match open_shard(path)?.next().transpose()? {
            Some((1, h)) if is_header(&h) => h,
            Some((line_number, _)) => {
                return Err(KeelError::usage(format!(
                    "{path}: line {line_number}: not a shard header (keel writes one as a shard file's first line)"
                )))
            }
            None => {
                return Err(KeelError::usage(format!(
                    "{path}: no shard header: the file is empty (was the command that wrote it interrupted?)"
                )))
            }
        };
        let shard = header_shard(&h);
        let start = header_points_start(&h);
        let seen = shards_seen.iter().zip(&starts);
        if seen.into_iter().any(|(s, st)| *s == shard && *st == start) {
            return Err(KeelError::usage(match start {
                Some(start) => format!(
                    "{path}: points from {start} of shard {}/{} given twice",
                    shard.index, shard.count
                ),
                None => format!("{path}: shard {}/{} given twice", shard.index, shard.count),
            }));
        }
        shards_seen.push(shard);
        starts.push(start);
        match &header {
            None => header = Some((path.clone(), h)),
            Some((first_path, first)) if header_key(first) != header_key(&h) => {
                let (first_events, events) = (header_events(first), header_events(&h));
                if first_events != events {
                    return Err(KeelError::usage(format!(
                        "{path} is a shard of a run on other events than {first_path} (events digest {} against {})",
                        events.unwrap_or("not recorded"),
                        first_events.unwrap_or("not recorded"),
                    )));
                }
                return Err(KeelError::usage(format!(
                    "{path} is a shard of another run than {first_path} (different command, options or shard count)"
                )));
            }
            Some(_) => {}
        }
    }
    let Some((_, header)) = header else {
        return Err(KeelError::usage(
            "no shard header found: give files written with --shard i/n".to_string(),
        ));
    };
    if let ShardLine::SweepHeader {
        spec,
        sweep,
        shard,
        total,
        ..
    } = header
    {
        for (given, option) in [
            (args.no_shrink, "--no-shrink"),
            (args.summary_only, "--summary-only"),
        ] {
            if given {
                return Err(KeelError::usage(format!(
                    "{option} applies to explore shards only; these are shards of a sweep, which has no seeds to shrink or summarise"
                )));
            }
        }
        check_every_shard(&shards_seen, shard.count)?;
        let mut files: Vec<(&String, (u64, u64))> = args
            .files
            .iter()
            .zip(shards_seen.iter().zip(&starts))
            .map(|(file, (shard, start))| {
                let start = start.unwrap_or_else(|| shard.range_u64(total).start);
                (file, (shard.index, start))
            })
            .collect();
        files.sort_by_key(|(_, at)| *at);
        let files: Vec<&String> = files.into_iter().map(|(file, _)| file).collect();
        return merge_sweep(args, &files, &spec, &sweep, total);
    }
    if let ShardLine::ExploreHeader {
        spec,
        explore,
        shard,
        total,
    } = header
    {
        let files = in_shard_order(&args.files, &shards_seen);
        return merge_explore(
            args,
            &files,
            (&shards_seen, shard.count),
            spec,
            explore,
            total,
        );
    }
    let mut rows = 0usize;
    let mut compared: Vec<PointComparison> = Vec::new();
    let mut foreign = 0usize;
    for path in &args.files {
        for line in open_shard(path)?.skip(1) {
            match line? {
                (_, ShardLine::FidelityPoint(point)) => compared.push(point),
                (_, ShardLine::Row(_)) => rows += 1,
                (line_number, line) if is_header(&line) => {
                    return Err(header_after_first(path, line_number))
                }
                _ => foreign += 1,
            }
        }
    }
    let foreign = foreign + rows;
    if foreign > 0 {
        return Err(foreign_lines("keel fidelity kill", foreign));
    }
    match header {
        ShardLine::FidelityKillHeader {
            spec,
            sinks,
            shard,
            total,
        } => {
            for (given, option) in [
                (args.no_shrink, "--no-shrink"),
                (args.summary_only, "--summary-only"),
                (args.expect.is_some(), "--expect"),
            ] {
                if given {
                    return Err(KeelError::usage(format!(
                        "{option} does not apply to shards of keel fidelity kill, which compares each point simulated and real (any disagreement exits 1)"
                    )));
                }
            }
            compared.sort_by_key(|point| point.index);
            check_complete(&shards_seen, shard.count, compared.len() as u64, total)?;
            if compared
                .iter()
                .enumerate()
                .any(|(i, point)| point.index != i as u64 || !sinks.contains(&point.sink))
            {
                return Err(KeelError::usage(
                    "the shard files' points are not exactly the fidelity run's points".to_string(),
                ));
            }
            let report = fidelity_aggregate(&spec.label(), spec.protocol.name(), &sinks, &compared);
            Ok(kill_output(&report, args.format))
        }
        _ => unreachable!("the header is a header"),
    }
}

/// `files` (whose headers named the shards `seen`, in the same order) in shard order.
fn in_shard_order<'f>(files: &'f [String], seen: &[Shard]) -> Vec<(&'f String, Shard)> {
    let mut files: Vec<(&String, Shard)> = files.iter().zip(seen.iter().copied()).collect();
    files.sort_by_key(|(_, shard)| shard.index);
    files
}

/// Merges an exploration's shard files, in shard order, a row at a time: each row is checked
/// to be the exploration's next and tallied as it comes (the rows are kept only where the
/// report prints them), so merging holds no file whole.
fn merge_explore(
    args: &MergeArgs,
    files: &[(&String, Shard)],
    (seen, count): (&[Shard], u64),
    spec: ScenarioSpec,
    mut explore: ExploreSpec,
    total: u64,
) -> Result<Output, KeelError> {
    if args.expect.is_some() {
        explore.expect = args.expect.clone();
    }
    let mut tally = ExploreTally::new(&spec, &explore, !args.summary_only);
    let mut expected = explore.row_keys();
    let (mut held, mut foreign) = (0u64, 0usize);
    // The first row of another exploration, and whether the rows ever left the
    // exploration's order: reported once every line is counted, after a count that is off.
    let mut stray: Option<(u64, SinkKind)> = None;
    let mut out_of_order = false;
    for (path, _) in files {
        for line in open_shard(path)?.skip(1) {
            match line? {
                (_, ShardLine::Row(row)) => {
                    held += 1;
                    if !explore.covers(row.seed, row.sink) {
                        stray.get_or_insert((row.seed, row.sink));
                        continue;
                    }
                    out_of_order |= expected.next() != Some((row.seed, row.sink, row.view));
                    if stray.is_none() && !out_of_order {
                        tally.add(row);
                    }
                }
                (line_number, line) if is_header(&line) => {
                    return Err(header_after_first(path, line_number))
                }
                _ => foreign += 1,
            }
        }
    }
    if foreign > 0 {
        return Err(foreign_lines("keel explore", foreign));
    }
    check_complete(seen, count, held, total)?;
    if let Some((seed, sink)) = stray {
        return Err(KeelError::usage(format!(
            "seed {seed} on {sink} is not part of this exploration"
        )));
    }
    if out_of_order || expected.next().is_some() {
        return Err(KeelError::usage(
            "the shard files' rows are not exactly the exploration's seeds".to_string(),
        ));
    }
    let shrink_first = !args.no_shrink && tally.any_failing();
    let baselines = if shrink_first {
        explore_baselines(&spec, &load_recorded_events(&spec)?, &explore)?
    } else {
        BTreeMap::new()
    };
    let report = tally.finish(&baselines, shrink_first);
    Ok(explore_output(
        &report,
        &explore,
        args.format,
        args.summary_only,
    ))
}

/// The shards `seen` against the `count` the headers name, then the results they hold
/// (`got`) against the run's `total`.
fn check_complete(seen: &[Shard], count: u64, got: u64, total: u64) -> Result<(), KeelError> {
    check_every_shard(seen, count)?;
    check_held(got, total)
}

fn check_every_shard(seen: &[Shard], count: u64) -> Result<(), KeelError> {
    // The first few only: a header may claim any count up to 2^64 - 1.
    let missing: Vec<String> = (0..count)
        .filter(|i| !seen.iter().any(|s| s.index == *i))
        .map(|i| format!("{i}/{count}"))
        .take(8)
        .collect();
    if !missing.is_empty() {
        return Err(KeelError::usage(format!(
            "missing shard files: {}",
            missing.join(", ")
        )));
    }
    Ok(())
}

fn check_held(got: u64, total: u64) -> Result<(), KeelError> {
    if got != total {
        return Err(KeelError::usage(format!(
            "the shard files hold {got} results, the run has {total}"
        )));
    }
    Ok(())
}

/// A sweep's shard files (`files`, in shard order) tallied as one sweep: each file's points
/// read and counted in point order, the records of one point (one a consumer view) together.
fn merge_sweep(
    args: &MergeArgs,
    files: &[&String],
    spec: &ScenarioSpec,
    sweep: &SweepSpec,
    total: u64,
) -> Result<Output, KeelError> {
    let expect = args.expect.clone().or(sweep.expect.clone());
    let mut tally = SweepTally::new(spec, sweep, expect.as_ref());
    // The points held (a record with a span stands for the points after it too), and
    // whether they are exactly 0..held, each once, so far: tallying stops at the first that
    // is not, and the error waits for the count (a file with points given twice holds more
    // than the run has, and says so).
    let mut held = 0u64;
    let mut in_order = true;
    let mut foreign = 0usize;
    // The records of the point being read.
    let mut point: Vec<PointRecord> = Vec::new();
    let add = |point: &mut Vec<PointRecord>, tally: &mut SweepTally| {
        point.sort_by_key(|record| record.view);
        point.iter().for_each(|record| tally.add(record));
    };
    // The files whose budget ran out, and where.
    let mut stopped: Vec<(&String, u64)> = Vec::new();
    for path in files {
        for line in open_shard(path)?.skip(1) {
            let record = match line? {
                (_, ShardLine::Point(record)) => record,
                (_, ShardLine::SweepStopped { next }) => {
                    stopped.push((path, next));
                    continue;
                }
                (line_number, line) if is_header(&line) => {
                    return Err(header_after_first(path, line_number))
                }
                _ => {
                    foreign += 1;
                    continue;
                }
            };
            match point.last() {
                Some(last) if last.index == record.index => {
                    in_order &= last.points() == record.points()
                        && point.iter().all(|r| r.view != record.view);
                }
                _ => {
                    in_order &= record.index == held;
                    held = held.saturating_add(record.points());
                    if in_order {
                        add(&mut point, &mut tally);
                    }
                    point.clear();
                }
            }
            point.push(record);
        }
    }
    if foreign > 0 {
        return Err(foreign_lines("keel sweep", foreign));
    }
    if held != total {
        if let Some((path, next)) = stopped.first() {
            return Err(KeelError::usage(format!(
                "the shard files hold {held} of the sweep's {total} points: {path} stopped at point {next} when its budget ran out; merge it with the lines of the resume command it printed (keel sweep ... --points {next}..)"
            )));
        }
    }
    check_held(held, total)?;
    if !in_order {
        return Err(KeelError::usage(
            "the shard files' points are not exactly the sweep's points".to_string(),
        ));
    }
    add(&mut point, &mut tally);
    Ok(render(tally, args.format))
}

fn foreign_lines(command: &str, foreign: usize) -> KeelError {
    KeelError::usage(format!(
        "these are shards of {command}, but {foreign} of their lines come from another command"
    ))
}

/// The lines of the shard file `path`, read as they are asked for.
fn open_shard(path: &str) -> Result<ShardLines<'_, std::io::BufReader<std::fs::File>>, KeelError> {
    let file = std::fs::File::open(path)
        .map_err(|e| KeelError::usage(format!("cannot read shard file {path}: {e}")))?;
    Ok(ShardLines::new(path, std::io::BufReader::new(file)))
}

fn is_header(line: &ShardLine) -> bool {
    matches!(
        line,
        ShardLine::SweepHeader { .. }
            | ShardLine::ExploreHeader { .. }
            | ShardLine::FidelityKillHeader { .. }
    )
}

fn header_after_first(path: &str, line_number: usize) -> KeelError {
    KeelError::usage(format!(
        "{path}: line {line_number}: a header after the first line"
    ))
}

/// The digest of the events a shard's run loaded, as its header records it.
fn header_events(header: &ShardLine) -> Option<&str> {
    match header {
        ShardLine::SweepHeader { spec, .. }
        | ShardLine::ExploreHeader { spec, .. }
        | ShardLine::FidelityKillHeader { spec, .. } => spec.events_digest.as_deref(),
        _ => unreachable!("a header"),
    }
}

/// Where a sweep file of a `--points` part starts (None: it holds its whole shard).
fn header_points_start(header: &ShardLine) -> Option<u64> {
    match header {
        ShardLine::SweepHeader { points, .. } => points.map(|[start, _]| start),
        _ => None,
    }
}

fn header_shard(header: &ShardLine) -> Shard {
    match header {
        ShardLine::SweepHeader { shard, .. }
        | ShardLine::ExploreHeader { shard, .. }
        | ShardLine::FidelityKillHeader { shard, .. } => *shard,
        _ => unreachable!("a header"),
    }
}

/// What two shards of one run share in their headers: all but the shard's index.
fn header_key(header: &ShardLine) -> String {
    match header {
        ShardLine::SweepHeader {
            spec,
            sweep,
            total,
            shard,
            ..
        } => {
            // The default scenario named or not is one scenario (a resume command names it).
            let spec = ScenarioSpec {
                scenario: spec.events.is_none().then(|| spec.label()),
                ..spec.clone()
            };
            serde_json::to_string(&(spec, sweep, total, shard.count)).expect("json")
        }
        ShardLine::ExploreHeader {
            spec,
            explore,
            total,
            shard,
        } => serde_json::to_string(&(spec, explore, total, shard.count)).expect("json"),
        ShardLine::FidelityKillHeader {
            spec,
            sinks,
            total,
            shard,
        } => serde_json::to_string(&(spec, sinks, total, shard.count)).expect("json"),
        _ => unreachable!("only headers have keys"),
    }
}
