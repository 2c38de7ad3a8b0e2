//! Which engine a `keel job run|sweep|explore` command line runs: a graph that chains (one
//! source, one operator, events without keys: `keel_engine::job::graph`) is one task, the
//! chapter's engine, and its command is `keel run|sweep|explore` with the same options;
//! any other graph is the task graph.
//!
//! The decision needs the events (do they carry keys?), so it is made on the command line
//! before clap builds the job's arguments, and the events are read once: from standard input
//! they are handed over to whichever command runs (`files::hand_over_stdin_events`, or the
//! job's own `events_read`).

use super::files::{hand_over_stdin_events, read_events_source, STDIN_EVENTS};
use crate::error::KeelError;
use keel_engine::job::{read_keyed_events, Execution, JobGraph, KeyedEvent};
use keel_engine::Event;
use std::ffi::OsString;
use std::sync::Arc;

/// A `keel job` command line resolved: the chapter's command (the graph chained), or the job's
/// with the keyed events it already read from stdin (if any).
pub enum Resolved {
    /// Parse this command line as it is.
    AsGiven(Vec<OsString>),
    /// A chained graph: the chapter's command line (the job's options minus the graph's).
    Chained(Vec<OsString>),
    /// The task graph, whose events came from stdin and were read here.
    TasksWithStdin(Vec<OsString>, Arc<[KeyedEvent]>),
}

/// The graph's options, which the chapter's commands do not take.
const GRAPH_OPTIONS: [&str; 2] = ["--sources", "--parallelism"];
const DISABLE_CHAINING: &str = "--disable-chaining";

/// Resolves `argv` (already through `cli::job_alias`): see the module docs.
pub fn resolve(argv: Vec<OsString>) -> Result<Resolved, KeelError> {
    let text: Vec<String> = argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let is_job_command = text.get(1).is_some_and(|a| a == "job")
        && text
            .get(2)
            .is_some_and(|c| ["run", "sweep", "explore"].contains(&c.as_str()));
    if !is_job_command {
        return Ok(Resolved::AsGiven(argv));
    }
    // The job's defaults are P = 2, M = 2: a chain needs both given as 1.
    let given_one = |name: &str| option_value(&text, name).as_deref() == Some("1");
    let candidate = given_one("--sources")
        && given_one("--parallelism")
        && !text.iter().any(|a| a == DISABLE_CHAINING)
        && !text.iter().any(|a| a == "--help" || a == "-h");
    if !candidate {
        return Ok(Resolved::AsGiven(argv));
    }
    let events_path = option_value(&text, "--events");
    let events: Option<Vec<KeyedEvent>> = match &events_path {
        Some(path) => Some(read_events_source(path, |reader| {
            read_keyed_events(reader, 1)
        })?),
        None => None,
    };
    let graph = JobGraph {
        sources: 1,
        parallelism: 1,
        keyed: events
            .as_ref()
            .is_some_and(|events| events.iter().any(|e| !e.key.is_empty())),
        chaining: true,
    };
    let from_stdin = events_path.as_deref() == Some(STDIN_EVENTS);
    match (graph.execution(), events) {
        (Execution::Chained, events) => {
            if let (true, Some(events)) = (from_stdin, events) {
                let plain: Vec<Event> = events
                    .iter()
                    .map(|e| Event {
                        ts: e.ts,
                        value: e.value,
                    })
                    .collect();
                hand_over_stdin_events(plain);
            }
            Ok(Resolved::Chained(chapter_argv(&argv)))
        }
        (Execution::Tasks { .. }, Some(events)) if from_stdin => {
            Ok(Resolved::TasksWithStdin(argv, events.into()))
        }
        (Execution::Tasks { .. }, _) => Ok(Resolved::AsGiven(argv)),
    }
}

/// The chapter's command line for a chained job's: `keel job CMD ...` without `job`, the
/// graph's options and `--disable-chaining`.
fn chapter_argv(argv: &[OsString]) -> Vec<OsString> {
    let mut out = Vec::with_capacity(argv.len());
    let mut skip_value = false;
    for (i, arg) in argv.iter().enumerate() {
        if i == 1 {
            continue; // "job"
        }
        if skip_value {
            skip_value = false;
            continue;
        }
        let text = arg.to_string_lossy();
        if GRAPH_OPTIONS.contains(&text.as_ref()) {
            skip_value = true;
            continue;
        }
        if GRAPH_OPTIONS
            .iter()
            .any(|name| text.starts_with(&format!("{name}=")))
        {
            continue;
        }
        out.push(arg.clone());
    }
    out
}

/// The value of the last `--name V` or `--name=V` in `text` (clap takes the last).
fn option_value(text: &[String], name: &str) -> Option<String> {
    let mut value = None;
    let prefix = format!("{name}=");
    for (i, arg) in text.iter().enumerate().skip(2) {
        if arg == "--" {
            break;
        }
        if arg == name {
            value = text.get(i + 1).cloned();
        } else if let Some(v) = arg.strip_prefix(&prefix) {
            value = Some(v.to_string());
        }
    }
    value
}

/// The error for an option a chained job's command (the chapter's) does not take: names the
/// option, why the job is chained, and how to run the task graph instead.
pub fn refused_on_chained(command: &str, option: &str) -> KeelError {
    KeelError::usage(format!(
        "{option}: a job of one source and one operator over events without keys is chained into one task, the chapter's engine (`keel {command}`), which takes no {option}; give --disable-chaining to run it as a graph of three tasks"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(line: &str) -> Vec<OsString> {
        line.split_whitespace().map(OsString::from).collect()
    }

    fn check(line: &str, expected: Option<&str>) {
        let resolved = resolve(argv(line)).expect("resolves");
        match (resolved, expected) {
            (Resolved::Chained(chapter), Some(expected)) => {
                assert_eq!(chapter, argv(expected), "{line}")
            }
            (Resolved::AsGiven(given), None) => assert_eq!(given, argv(line), "{line}"),
            (_, expected) => panic!("{line}: expected {expected:?}"),
        }
    }

    #[test]
    fn only_a_chaining_graph_becomes_the_chapters_command() {
        check(
            "keel job run --sources 1 --parallelism 1 --seed 3",
            Some("keel run --seed 3"),
        );
        check(
            "keel job sweep --sources=1 --scenario ch04 --parallelism=1 --sinks append",
            Some("keel sweep --scenario ch04 --sinks append"),
        );
        check("keel job run --sources 1", None);
        check("keel job run --sources 1 --parallelism 2", None);
        check(
            "keel job run --sources 1 --parallelism 1 --disable-chaining",
            None,
        );
        check("keel job teach --sources 1 --parallelism 1", None);
        check("keel run --seed 3", None);
    }
}
