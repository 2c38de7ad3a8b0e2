//! The lines of a `--shard` output file, and reading them back for `keel merge`.

use super::args::Shard;
use super::files::AtomicFile;
use super::output::Output;
use crate::error::KeelError;
use crate::explore::{ExploreRow, ExploreSpec};
use crate::fidelity::PointComparison;
use crate::spec::ScenarioSpec;
use crate::sweep::{PointRecord, SweepSpec, SHARING_CHUNK_POINTS};
use keel_engine::SinkKind;
use keel_sim::world::STEPS_MAX;
use keel_sim::Fault;
use std::io::Write;
use std::path::Path;

/// One line of a shard file.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum ShardLine {
    SweepHeader {
        spec: ScenarioSpec,
        sweep: SweepSpec,
        shard: Shard,
        total: u64,
        /// With `--points a..b`: the part of the shard's points the file holds (all of the
        /// shard's when absent).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        points: Option<[u64; 2]>,
    },
    /// The last line of a sweep's file whose budget (`--time-budget`, `--points-max`) ran
    /// out: it holds its points up to `next`, and `keel sweep --points next..` the rest.
    SweepStopped {
        next: u64,
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

/// Where a sweep's or an exploration's shard lines go as they are made, so that what waits
/// for the end is neither the points' records nor their text (several hundred bytes a
/// point: a shard of a depth-2 sweep has millions): into the `--out` file (a temp file,
/// committed whole at the end), through `keel`'s stdout, or, when `cli::execute`
/// runs a command in process, kept to return as its output.
pub(crate) struct ShardWriter<'a> {
    to: ShardTo<'a>,
    /// The line being written.
    line: String,
    /// The first error writing a line; the lines after it are not written.
    error: Option<std::io::Error>,
}

enum ShardTo<'a> {
    Kept(String),
    Stdout(&'a mut (dyn Write + Send)),
    File { path: String, file: AtomicFile },
}

impl<'a> ShardWriter<'a> {
    /// A writer to `out` (a file path) if given, else to `stdout` if given, else kept. The
    /// file is created at once, so a path that cannot be written fails before the sweep runs.
    pub(crate) fn new(
        out: Option<&str>,
        stdout: Option<&'a mut (dyn Write + Send)>,
    ) -> Result<ShardWriter<'a>, KeelError> {
        let to = match (out, stdout) {
            (Some(path), _) => ShardTo::File {
                path: path.to_string(),
                file: AtomicFile::create(Path::new(path))
                    .map_err(|e| KeelError::usage(format!("cannot write {path}: {e}")))?,
            },
            (None, Some(stdout)) => ShardTo::Stdout(stdout),
            (None, None) => ShardTo::Kept(String::new()),
        };
        Ok(ShardWriter {
            to,
            line: String::new(),
            error: None,
        })
    }

    /// Whether the lines go through `keel`'s stdout as they are made (an interrupted shard
    /// leaves some there).
    pub(crate) fn streams_to_stdout(&self) -> bool {
        matches!(self.to, ShardTo::Stdout(_))
    }

    pub(crate) fn push(&mut self, line: &ShardLine) {
        if self.error.is_some() {
            return;
        }
        let out: &mut dyn Write = match &mut self.to {
            ShardTo::Kept(text) => return push_shard_line(text, line),
            ShardTo::Stdout(out) => out,
            ShardTo::File { file, .. } => file,
        };
        self.line.clear();
        push_shard_line(&mut self.line, line);
        self.error = out.write_all(self.line.as_bytes()).err();
    }

    /// The command's output once every line is pushed: the lines kept, or nothing once the
    /// file is committed or stdout flushed. A reader that stopped early (`| head`) closed
    /// stdout: that is not an error of the run, as `cli::main` prints a report.
    pub(crate) fn finish(self) -> Result<Output, KeelError> {
        match self.to {
            ShardTo::Kept(text) => Ok(Output::ok(text)),
            ShardTo::Stdout(out) => match self.error.map_or_else(|| out.flush(), Err) {
                Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => Err(
                    KeelError::usage(format!("cannot write the shard's lines to stdout: {error}")),
                ),
                _ => Ok(Output::ok(String::new())),
            },
            ShardTo::File { path, file } => self
                .error
                .map_or_else(|| file.commit(), Err)
                .map(|()| Output::ok(String::new()))
                .map_err(|e| KeelError::usage(format!("cannot write {path}: {e}"))),
        }
    }
}

impl ShardLine {
    /// The values no keel run writes: a count beyond what one run can take steps for, a sweep
    /// point without a fault, a shard i/n with i >= n, an exploration whose seed range is
    /// backwards or does not have the stated number of rows. (`keel merge` tallies counts and
    /// enumerates the exploration's seeds; such values would overflow or exhaust memory.)
    fn check(&self) -> Result<(), String> {
        let counts: Vec<(&str, u64)> = match self {
            ShardLine::SweepHeader {
                sweep,
                shard,
                total,
                points,
                ..
            } => {
                check_shard(shard)?;
                if let Some([start, end]) = points {
                    let of_shard = shard.range_u64(*total);
                    if start >= end || *start < of_shard.start || *end > of_shard.end {
                        return Err(format!(
                            "points {start}..{end} are not a part of shard {}/{}'s {}..{}",
                            shard.index, shard.count, of_shard.start, of_shard.end
                        ));
                    }
                }
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
            ShardLine::SweepStopped { .. } => Vec::new(),
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

/// The error of a shard stopped before its end (Ctrl-C): where its lines went through
/// stdout, it says that those printed are not all of them (an `--out` file is not left).
pub(crate) fn interrupted_shard(mut error: KeelError, lines: &ShardWriter) -> KeelError {
    if lines.streams_to_stdout() {
        error.message.push_str(
            " (the shard's lines printed so far are not all of them: keel merge refuses them)",
        );
    }
    error
}

/// The lines of the shard file `path` (its text), each with its 1-based line number; blank
/// lines are skipped. Every error names the file and the line (see [`ShardLines`]).
pub fn parse_shard_file(path: &str, text: &str) -> Result<Vec<(usize, ShardLine)>, KeelError> {
    ShardLines::new(path, text.as_bytes()).collect()
}

/// The lines of a shard file read one at a time (`keel merge` never holds a sweep shard
/// whole), each with its 1-based line number; blank lines are skipped. Every error names the
/// file and the line: a line that is not a shard line, and a last line without its newline
/// (keel ends every line with one, so the file was cut short while it was written).
pub struct ShardLines<'a, R> {
    path: &'a str,
    reader: R,
    line_number: usize,
    line: Vec<u8>,
    /// Set after an error: the iterator ends.
    done: bool,
}

impl<'a, R: std::io::BufRead> ShardLines<'a, R> {
    pub fn new(path: &'a str, reader: R) -> ShardLines<'a, R> {
        ShardLines {
            path,
            reader,
            line_number: 0,
            line: Vec::new(),
            done: false,
        }
    }

    fn next_line(&mut self) -> Result<Option<(usize, ShardLine)>, KeelError> {
        let path = self.path;
        loop {
            self.line.clear();
            let read = self
                .reader
                .read_until(b'\n', &mut self.line)
                .map_err(|e| KeelError::usage(format!("cannot read shard file {path}: {e}")))?;
            if read == 0 {
                return Ok(None);
            }
            self.line_number += 1;
            let line_number = self.line_number;
            let Some(line) = self.line.strip_suffix(b"\n") else {
                return Err(KeelError::usage(format!(
                    "{path}: line {line_number}: the last line has no newline: the file is truncated (was the command that wrote it interrupted?)"
                )));
            };
            let line = std::str::from_utf8(line).map_err(|e| {
                KeelError::usage(format!(
                    "{path}: line {line_number}: not a keel shard line: not UTF-8 text ({e})"
                ))
            })?;
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
            return Ok(Some((line_number, parsed)));
        }
    }
}

impl<R: std::io::BufRead> Iterator for ShardLines<'_, R> {
    type Item = Result<(usize, ShardLine), KeelError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let next = self.next_line().transpose();
        self.done = matches!(next, None | Some(Err(_)));
        next
    }
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
        let lines: Result<Vec<_>, _> =
            ShardLines::new("s.jsonl", &b"\n{\"type\": \xff}\n"[..]).collect();
        assert_eq!(
            lines.unwrap_err(),
            KeelError::usage(
                "s.jsonl: line 2: not a keel shard line: not UTF-8 text (invalid utf-8 sequence of 1 bytes from index 9)"
            )
        );
    }
}
