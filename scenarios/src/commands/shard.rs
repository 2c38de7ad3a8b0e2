//! The lines of a `--shard` output file, and reading them back for `keel merge`.

use super::args::Shard;
use crate::error::KeelError;
use crate::explore::{ExploreRow, ExploreSpec};
use crate::fidelity::PointComparison;
use crate::spec::ScenarioSpec;
use crate::sweep::{PointRecord, SweepSpec, SHARING_CHUNK_POINTS};
use keel_engine::SinkKind;
use keel_sim::world::STEPS_MAX;
use keel_sim::Fault;

/// One line of a shard file.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ShardLine {
    SweepHeader {
        spec: ScenarioSpec,
        sweep: SweepSpec,
        shard: Shard,
        total: u64,
    },
    ExploreHeader {
        spec: ScenarioSpec,
        explore: ExploreSpec,
        shard: Shard,
        total: u64,
    },
    /// `keel fidelity kill --shard`: the run (its sinks in order) and how many points it has.
    FidelityKillHeader {
        spec: ScenarioSpec,
        sinks: Vec<SinkKind>,
        shard: Shard,
        total: u64,
    },
    Point(PointRecord),
    Row(ExploreRow),
    FidelityPoint(PointComparison),
}

pub(crate) fn shard_output(lines: &[ShardLine]) -> String {
    let mut out = String::new();
    for line in lines {
        push_shard_line(&mut out, line);
    }
    out
}

/// Appends `line` to a shard's output, as a JSON line.
pub(crate) fn push_shard_line(out: &mut String, line: &ShardLine) {
    let json = serde_json::to_string(line).expect("shard lines serialize");
    out.push_str(&json);
    out.push('\n');
}

impl ShardLine {
    /// The values no keel run writes: a count beyond what one run can take steps for, a sweep
    /// point without a fault, a shard i/n with i >= n, an exploration whose seed range is
    /// backwards or does not have the stated number of rows. (`keel merge` tallies counts and
    /// enumerates the exploration's seeds; such values would overflow or exhaust memory.)
    fn check(&self) -> Result<(), String> {
        let counts: Vec<(&str, u64)> = match self {
            ShardLine::SweepHeader { sweep, shard, .. } => {
                check_shard(shard)?;
                if !(1..=2).contains(&sweep.depth) {
                    return Err(format!("sweep depth {} (it is 1 or 2)", sweep.depth));
                }
                Vec::new()
            }
            ShardLine::ExploreHeader {
                explore,
                shard,
                total,
                ..
            } => {
                check_shard(shard)?;
                let seeds = explore
                    .seeds_end
                    .checked_sub(explore.seeds_start)
                    .ok_or_else(|| {
                        format!(
                            "seeds {}..{} end before they start",
                            explore.seeds_start, explore.seeds_end
                        )
                    })?;
                let views: u64 = explore
                    .sinks
                    .iter()
                    .map(|&sink| crate::observation::views_of(sink).len() as u64)
                    .sum();
                if seeds.checked_mul(views) != Some(*total) {
                    return Err(format!(
                        "total {total} is not the number of rows of seeds {}..{} on {} sinks",
                        explore.seeds_start,
                        explore.seeds_end,
                        explore.sinks.len()
                    ));
                }
                if !(1..=64).contains(&explore.max_faults) {
                    return Err(format!("max_faults {} (it is 1 to 64)", explore.max_faults));
                }
                if explore.faults.is_empty() {
                    return Err("no fault kinds".to_string());
                }
                Vec::new()
            }
            ShardLine::FidelityKillHeader { sinks, shard, .. } => {
                check_shard(shard)?;
                if sinks.is_empty() || sinks.iter().any(SinkKind::is_transactional) {
                    return Err(
                        "fidelity kill runs on the append and idempotent sinks only".to_string()
                    );
                }
                Vec::new()
            }
            ShardLine::FidelityPoint(point) => {
                if point.sink.is_transactional()
                    || !matches!(point.point.fault, Fault::ProcessCrash { .. })
                {
                    return Err(
                        "a fidelity point is a process crash on the append or idempotent sink"
                            .to_string(),
                    );
                }
                vec![("step", point.point.step)]
            }
            ShardLine::Point(point) => {
                if !(1..=2).contains(&point.faults.len()) {
                    return Err(format!(
                        "a sweep point with {} faults (it has 1 or 2)",
                        point.faults.len()
                    ));
                }
                // A span lies within one chunk of points (`SHARING_CHUNK_POINTS`).
                if let Some(span) = point.span {
                    if !(2..=SHARING_CHUNK_POINTS).contains(&span.runs) {
                        return Err(format!(
                            "a span of {} points (it has 2 to {SHARING_CHUNK_POINTS})",
                            span.runs
                        ));
                    }
                }
                vec![
                    ("duplicates", point.duplicates),
                    ("lost", point.lost),
                    ("wrong", point.wrong),
                    ("corrupt", point.corrupt),
                    ("stale_windows", point.stale_windows),
                    ("rolled_back", point.rolled_back),
                    ("dirty_reads", point.dirty_reads),
                ]
            }
            ShardLine::Row(row) => vec![
                ("faults_injected", row.faults_injected),
                ("duplicates", row.duplicates),
                ("lost", row.lost),
                ("wrong", row.wrong),
                ("corrupt", row.corrupt),
                ("stale_windows", row.stale_windows),
                ("rolled_back", row.rolled_back),
                ("dirty_reads", row.dirty_reads),
            ],
        };
        for (name, value) in counts {
            if value > STEPS_MAX {
                return Err(format!(
                    "{name} {value} is more than a run can count (at most {STEPS_MAX}, the most steps a run takes)"
                ));
            }
        }
        Ok(())
    }
}

fn check_shard(shard: &Shard) -> Result<(), String> {
    if shard.index >= shard.count {
        return Err(format!(
            "shard {}/{}: the index must be below the count",
            shard.index, shard.count
        ));
    }
    Ok(())
}

/// The lines of the shard file `path` (its text), each with its 1-based line number; blank
/// lines are skipped. Every error names the file and the line: a line that is not a shard
/// line, and a last line without its newline (keel ends every line with one, so the file was
/// cut short while it was written).
pub fn parse_shard_file(path: &str, text: &str) -> Result<Vec<(usize, ShardLine)>, KeelError> {
    let mut lines = Vec::new();
    let mut rest = text;
    let mut line_number = 0;
    while !rest.is_empty() {
        line_number += 1;
        let Some(newline) = rest.find('\n') else {
            return Err(KeelError::usage(format!(
                "{path}: line {line_number}: the last line has no newline: the file is truncated (was the command that wrote it interrupted?)"
            )));
        };
        let line = &rest[..newline];
        rest = &rest[newline + 1..];
        if line.trim().is_empty() {
            continue;
        }
        let parsed: ShardLine = serde_json::from_str(line).map_err(|e| {
            KeelError::usage(format!(
                "{path}: line {line_number}: not a keel shard line: {e}"
            ))
        })?;
        parsed.check().map_err(|e| {
            KeelError::usage(format!(
                "{path}: line {line_number}: not what keel writes: {e}"
            ))
        })?;
        lines.push((line_number, parsed));
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_truncated_or_garbled_shard_file_is_an_error_naming_file_and_line() {
        assert!(parse_shard_file("s.jsonl", "").unwrap().is_empty());
        assert!(parse_shard_file("s.jsonl", "\n  \n").unwrap().is_empty());
        let error = parse_shard_file("s.jsonl", "\n{\"type\": \"row\"").unwrap_err();
        assert_eq!(
            error,
            KeelError::usage(
                "s.jsonl: line 2: the last line has no newline: the file is truncated (was the command that wrote it interrupted?)"
            )
        );
        let error = parse_shard_file("s.jsonl", "\n\n{\"type\": \"row\"\n").unwrap_err();
        assert!(
            error
                .message
                .starts_with("s.jsonl: line 3: not a keel shard line: "),
            "{error}"
        );
        assert_eq!(error.exit_code, 2);
    }
}
