//! The files commands read and write: events files and plan files, and `write_atomically`,
//! through which every file keel writes goes.

use super::args::{scenario_spec, ScenarioArgs};
use super::output::Output;
use crate::catalogue::{events_digest, Scenario};
use crate::error::KeelError;
use crate::plan_file::SavedPlan;
use crate::spec::ScenarioSpec;
use keel_engine::{read_events, Event, EventParseError, SinkKind};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

/// The input events of a spec: a shipped scenario, or an events file (or standard input,
/// `--events -`) read a line at a time.
pub(crate) fn load_events(spec: &ScenarioSpec) -> Result<Vec<Event>, KeelError> {
    match &spec.events {
        Some(path) if path == STDIN_EVENTS && STDIN_HANDED_OVER.get().is_some() => {
            Ok(STDIN_HANDED_OVER.get().expect("checked").clone())
        }
        Some(path) => {
            let events = read_events_source(path, |reader| read_events(reader))?;
            if events.is_empty() {
                return Err(KeelError::usage(format!(
                    "no events in {}",
                    events_source_name(path)
                )));
            }
            Ok(events)
        }
        None => Ok(Scenario::by_name(&spec.label())?.events()),
    }
}

/// What `--events` takes for standard input.
pub(crate) const STDIN_EVENTS: &str = "-";

/// The events a chained `keel job` command line read from standard input before it became
/// the chapter's command (`chaining.rs`): stdin is read once, by whoever reads it first.
static STDIN_HANDED_OVER: std::sync::OnceLock<Vec<Event>> = std::sync::OnceLock::new();

/// Hands the events read from stdin to the chapter's command that runs next.
pub(crate) fn hand_over_stdin_events(events: Vec<Event>) {
    assert!(STDIN_HANDED_OVER.set(events).is_ok(), "stdin is read once");
}

/// How errors name the events at `path`: the path, or "stdin" for `-`.
pub(crate) fn events_source_name(path: &str) -> &str {
    if path == STDIN_EVENTS {
        "stdin"
    } else {
        path
    }
}

/// The one place `--events` is read, by every command: `parse` reads the file at `path`, or
/// standard input for `-`, a line at a time (never the whole at once: see
/// `keel_engine::event::json_lines`). An error names the file (or stdin) and the line; exit 2.
pub(crate) fn read_events_source<T>(
    path: &str,
    parse: impl FnOnce(&mut dyn BufRead) -> Result<T, EventParseError>,
) -> Result<T, KeelError> {
    let parsed = if path == STDIN_EVENTS {
        parse(&mut std::io::stdin().lock())
    } else {
        let file = std::fs::File::open(path)
            .map_err(|e| KeelError::usage(format!("cannot read events file {path}: {e}")))?;
        parse(&mut std::io::BufReader::new(file))
    };
    parsed.map_err(|e| KeelError::usage(format!("{}: {e}", events_source_name(path))))
}

/// Checks the knobs, then loads the events.
pub(crate) fn prepare(args: &ScenarioArgs) -> Result<(ScenarioSpec, Vec<Event>), KeelError> {
    prepare_spec(scenario_spec(args))
}

/// Checks a spec's knobs, then loads its events and names them by their digest
/// (`ScenarioSpec::events_digest`); a spec that records a digest (a plan file's, a shard
/// header's) must name the events loaded now.
pub(crate) fn prepare_spec(
    mut spec: ScenarioSpec,
) -> Result<(ScenarioSpec, Vec<Event>), KeelError> {
    spec.config(SinkKind::Append)?;
    let events = load_recorded_events(&spec)?;
    spec.events_digest = Some(events_digest(&events).to_string());
    Ok((spec, events))
}

/// The events of a spec ([`load_events`]), refused if the spec records a digest they do not
/// have: the file changed since the spec was saved with it. The error names both digests.
pub(crate) fn load_recorded_events(spec: &ScenarioSpec) -> Result<Vec<Event>, KeelError> {
    let events = load_events(spec)?;
    if let Some(recorded) = &spec.events_digest {
        let now = events_digest(&events).to_string();
        if *recorded != now {
            let what = match spec.events.as_deref() {
                Some(STDIN_EVENTS) => "the events on stdin (--events -)".to_string(),
                Some(path) => format!("the events file {path}"),
                None => format!("the scenario {}", spec.label()),
            };
            return Err(KeelError::usage(format!(
                "{what} changed since it was recorded here: recorded events digest {recorded}, events digest now {now} (give back the events it was recorded with, or run again on these)"
            )));
        }
    }
    Ok(events)
}

/// The most bytes a plan (a file, or stdin) may hold (a plan file names its faults and its
/// run, not its events: a few KiB; a depth-2 plan's JSON line is under one).
const PLAN_LEN_MAX_BYTES: u64 = 16 * 1024 * 1024;

/// The text of the plan at `path`, `-` meaning stdin (read once: the job and the one-task
/// readers both ask), so that a reproduce line can hand a plan over without writing a file
/// a user may have (`echo '<plan>' | keel replay --plan -`).
pub(crate) fn read_plan_text(path: &str) -> Result<String, KeelError> {
    static STDIN: std::sync::OnceLock<Result<String, String>> = std::sync::OnceLock::new();
    if path == "-" {
        let read = STDIN.get_or_init(|| {
            let what = "the plan on stdin (--plan -)";
            read_plan_bounded(std::io::stdin(), what, what)
        });
        return read.clone().map_err(KeelError::usage);
    }
    std::fs::File::open(path)
        .map_err(|e| format!("cannot read plan file {path}: {e}"))
        .and_then(|file| read_plan_bounded(file, &format!("plan file {path}"), path))
        .map_err(KeelError::usage)
}

/// At most [`PLAN_LEN_MAX_BYTES`] of `reader`, as text; `what` names it where it cannot be
/// read, `named` where it is too long.
fn read_plan_bounded(
    reader: impl std::io::Read,
    what: &str,
    named: &str,
) -> Result<String, String> {
    use std::io::Read as _;
    let mut text = String::new();
    reader
        .take(PLAN_LEN_MAX_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read {what}: {e}"))?;
    if text.len() as u64 > PLAN_LEN_MAX_BYTES {
        return Err(format!(
            "{named}: passes {PLAN_LEN_MAX_BYTES} bytes: not a plan file"
        ));
    }
    Ok(text)
}

/// A plan file, checked: JSON of the right shape, at most one fault per step.
pub(crate) fn read_plan_file(path: &str) -> Result<SavedPlan, KeelError> {
    let text = read_plan_text(path)?;
    let file: SavedPlan = serde_json::from_str(&text).map_err(|e| {
        KeelError::usage(format!(
            "{path}: not a fault plan ({e}); a plan looks like {{\"faults\": [{{\"step\": 29, \"fault\": {{\"kind\": \"power-loss\", \"at\": \"after\", \"state\": 12}}}}]}}, with the run it belongs to in \"spec\", \"sink\" and \"view\" when --save-plan wrote it"
        ))
    })?;
    file.plan()
        .map_err(|e| KeelError::usage(format!("{path}: {e}")))?;
    Ok(file)
}

pub(crate) fn write_plan_file(path: &str, plan: &SavedPlan) -> Result<(), KeelError> {
    write_atomically(Path::new(path), plan.to_pretty_json().as_bytes())
        .map_err(|e| KeelError::usage(format!("cannot write plan file {path}: {e}")))
}

/// Writes every file keel writes (plan files, `--out` reports and shard files, SVG pictures):
/// the bytes go to a temp file beside `path`, which is fsynced and renamed over `path`, and
/// the directory is fsynced. A keel killed at any moment leaves `path` as it was (absent, or
/// the previous file) or complete, never half-written; at worst a temp file
/// `.<name>.keel-tmp-<pid>` is left beside it.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = AtomicFile::create(path)?;
    file.write_all(bytes)?;
    file.commit()
}

/// A file written as [`write_atomically`] writes one, but a piece at a time: its bytes go to
/// the temp file as they are made (a `--shard` file of millions of points is never held in
/// memory), and [`AtomicFile::commit`] fsyncs it and renames it over `path`. Dropped without
/// a commit (an error, Ctrl-C), it removes its temp file and leaves `path` as it was.
pub(crate) struct AtomicFile {
    temp: PathBuf,
    path: PathBuf,
    dir: PathBuf,
    /// None once committed.
    file: Option<std::io::BufWriter<std::fs::File>>,
}

/// Removes the temp files a killed keel left for the same path (`<prefix><pid>`, another
/// pid's: this process's own is about to be created again). Two keels writing one path at
/// once would lose one of the files anyway (the last rename wins), so a temp file of the
/// same path is taken as stale. Best effort: a file that cannot be removed is left.
fn remove_stale_temps(dir: &Path, prefix: &std::ffi::OsStr) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let prefix = prefix.as_encoded_bytes();
    // Bounded by the directory's entries.
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.as_encoded_bytes().strip_prefix(prefix) else {
            continue;
        };
        if !pid.is_empty() && pid.iter().all(u8::is_ascii_digit) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

impl AtomicFile {
    pub(crate) fn create(path: &Path) -> std::io::Result<AtomicFile> {
        let name = path.file_name().ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file name")
        })?;
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        let mut prefix = std::ffi::OsString::from(".");
        prefix.push(name);
        prefix.push(".keel-tmp-");
        remove_stale_temps(dir, &prefix);
        let mut temp_name = prefix;
        temp_name.push(std::process::id().to_string());
        let temp = dir.join(temp_name);
        let file = std::fs::File::create(&temp)?;
        Ok(AtomicFile {
            temp,
            path: path.to_path_buf(),
            dir: dir.to_path_buf(),
            file: Some(std::io::BufWriter::new(file)),
        })
    }

    /// Makes the file whole and durable under its name.
    pub(crate) fn commit(mut self) -> std::io::Result<()> {
        let file = self.file.take().expect("an AtomicFile is committed once");
        let committed = (|| {
            let file = file.into_inner().map_err(|e| e.into_error())?;
            file.sync_all()?;
            drop(file);
            std::fs::rename(&self.temp, &self.path)?;
            sync_dir(&self.dir)
        })();
        if committed.is_err() {
            let _ = std::fs::remove_file(&self.temp);
        }
        committed
    }
}

impl Write for AtomicFile {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.file.as_mut().expect("not committed yet").write(bytes)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.as_mut().expect("not committed yet").flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

/// With `--out FILE`, the report goes to FILE (atomically) and nothing to stdout.
pub(crate) fn write_out(out: Option<&str>, output: Output) -> Result<Output, KeelError> {
    let Some(path) = out else {
        return Ok(output);
    };
    write_atomically(Path::new(path), output.stdout.as_bytes())
        .map_err(|e| KeelError::usage(format!("cannot write {path}: {e}")))?;
    Ok(Output {
        stdout: String::new(),
        ..output
    })
}

/// Makes a rename in `dir` durable.
#[cfg(unix)]
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Elsewhere a directory cannot be opened to sync it; the rename is as durable as it gets.
#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> std::io::Result<()> {
    Ok(())
}
