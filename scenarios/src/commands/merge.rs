//! `keel merge`: `--shard` output files (of `sweep`, `explore` or `fidelity kill`) combined
//! into the report an unsharded run prints.

use super::args::{parse_expectation, Shard, TableFormatArg};
use super::explore::{explore_baselines, finish_explore};
use super::fidelity::kill_output;
use super::files::load_events;
use super::output::Output;
use super::shard::{parse_shard_file, ShardLine};
use super::sweep::sweep_output;
use crate::error::KeelError;
use crate::explore::ExploreRow;
use crate::fidelity::{aggregate as fidelity_aggregate, PointComparison};
use crate::property::Expectation;
use crate::sweep::PointRecord;
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

    /// Print the summary and failing seeds, not one row per seed (explore shards only).
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
    let mut header: Option<(String, ShardLine)> = None;
    let mut shards_seen: Vec<Shard> = Vec::new();
    let mut points: Vec<PointRecord> = Vec::new();
    let mut rows: Vec<ExploreRow> = Vec::new();
    let mut compared: Vec<PointComparison> = Vec::new();
    for path in &args.files {
        let text = std::fs::read_to_string(path)
            .map_err(|e| KeelError::usage(format!("cannot read shard file {path}: {e}")))?;
        for (line_number, parsed) in parse_shard_file(path, &text)? {
            match parsed {
                ShardLine::Point(record) => points.push(record),
                ShardLine::Row(row) => rows.push(row),
                ShardLine::FidelityPoint(point) => compared.push(point),
                ref h @ (ShardLine::SweepHeader { shard, .. }
                | ShardLine::ExploreHeader { shard, .. }
                | ShardLine::FidelityKillHeader { shard, .. }) => {
                    if line_number != 1 {
                        return Err(KeelError::usage(format!(
                            "{path}: line {line_number}: a header after the first line"
                        )));
                    }
                    if shards_seen.contains(&shard) {
                        return Err(KeelError::usage(format!(
                            "{path}: shard {}/{} given twice",
                            shard.index, shard.count
                        )));
                    }
                    shards_seen.push(shard);
                    let key =
                        |line: &ShardLine| match line {
                            ShardLine::SweepHeader {
                                spec,
                                sweep,
                                total,
                                shard,
                            } => serde_json::to_string(&(spec, sweep, total, shard.count))
                                .expect("json"),
                            ShardLine::ExploreHeader {
                                spec,
                                explore,
                                total,
                                shard,
                            } => serde_json::to_string(&(spec, explore, total, shard.count))
                                .expect("json"),
                            ShardLine::FidelityKillHeader {
                                spec,
                                sinks,
                                total,
                                shard,
                            } => serde_json::to_string(&(spec, sinks, total, shard.count))
                                .expect("json"),
                            _ => unreachable!("only headers have keys"),
                        };
                    match &header {
                        None => header = Some((path.clone(), h.clone())),
                        Some((first_path, first)) if key(first) != key(h) => {
                            return Err(KeelError::usage(format!(
                                "{path} is a shard of another run than {first_path} (different command, options or shard count)"
                            )));
                        }
                        Some(_) => {}
                    }
                }
            }
        }
    }
    let Some((_, header)) = header else {
        return Err(KeelError::usage(
            "no shard header found: give files written with --shard i/n".to_string(),
        ));
    };
    let (command, foreign) = match header {
        ShardLine::SweepHeader { .. } => ("keel sweep", rows.len() + compared.len()),
        ShardLine::ExploreHeader { .. } => ("keel explore", points.len() + compared.len()),
        _ => ("keel fidelity kill", points.len() + rows.len()),
    };
    if foreign > 0 {
        return Err(KeelError::usage(format!(
            "these are shards of {command}, but {foreign} of their lines come from another command"
        )));
    }
    match header {
        ShardLine::SweepHeader {
            spec,
            sweep,
            shard,
            total,
        } => {
            // A transactional point has one record per consumer view, with the same index;
            // a record with a span stands for the points after it too.
            points.sort_by_key(|p| (p.index, p.view));
            let mut starts: Vec<(u64, u64)> =
                points.iter().map(|p| (p.index, p.points())).collect();
            starts.dedup();
            let held = starts
                .iter()
                .fold(0u64, |sum, (_, n)| sum.saturating_add(*n));
            check_complete(&shards_seen, shard.count, held, total)?;
            // The points covered, in order, each once: exactly 0..total.
            let mut covered = 0u64;
            for (index, points) in starts {
                if index != covered {
                    return Err(KeelError::usage(
                        "the shard files' points are not exactly the sweep's points".to_string(),
                    ));
                }
                covered = covered.saturating_add(points);
            }
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
            let expect = args.expect.clone().or(sweep.expect.clone());
            Ok(sweep_output(
                &spec,
                &sweep,
                &points,
                expect.as_ref(),
                args.format,
            ))
        }
        ShardLine::ExploreHeader {
            spec,
            explore,
            shard,
            total,
        } => {
            check_complete(&shards_seen, shard.count, rows.len() as u64, total)?;
            let order: BTreeMap<(u64, SinkKind), usize> = explore
                .points()
                .into_iter()
                .enumerate()
                .map(|(i, p)| (p, i))
                .collect();
            let mut keyed = Vec::with_capacity(rows.len());
            for row in rows {
                let index = *order.get(&(row.seed, row.sink)).ok_or_else(|| {
                    KeelError::usage(format!(
                        "seed {} on {} is not part of this exploration",
                        row.seed, row.sink
                    ))
                })?;
                keyed.push(((index, row.view), row));
            }
            keyed.sort_by_key(|(key, _)| *key);
            let expected_keys: Vec<(usize, Option<crate::runner::View>)> = explore
                .points()
                .iter()
                .enumerate()
                .flat_map(|(i, (_, sink))| {
                    crate::observation::views_of(*sink)
                        .iter()
                        .map(move |&view| (i, view))
                })
                .collect();
            if keyed.iter().map(|(key, _)| *key).ne(expected_keys) {
                return Err(KeelError::usage(
                    "the shard files' rows are not exactly the exploration's seeds".to_string(),
                ));
            }
            let rows: Vec<ExploreRow> = keyed.into_iter().map(|(_, row)| row).collect();
            let mut explore = explore;
            if args.expect.is_some() {
                explore.expect = args.expect.clone();
            }
            let shrink_first = !args.no_shrink
                && rows
                    .iter()
                    .any(|r| !r.failures(explore.expect.as_ref()).is_empty());
            let baselines = if shrink_first {
                explore_baselines(&spec, &load_events(&spec)?, &explore)?
            } else {
                BTreeMap::new()
            };
            Ok(finish_explore(
                &spec,
                &explore,
                &baselines,
                rows,
                shrink_first,
                (args.format, args.summary_only),
            ))
        }
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

fn check_complete(seen: &[Shard], count: u64, got: u64, total: u64) -> Result<(), KeelError> {
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
    if got != total {
        return Err(KeelError::usage(format!(
            "the shard files hold {got} results, the run has {total}"
        )));
    }
    Ok(())
}
