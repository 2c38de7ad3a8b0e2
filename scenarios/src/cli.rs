//! The `keel` command line: clap definitions (doc comments are the help text) and dispatch.
//! The only module of keel that prints.

use crate::catalogue::{events_from_text, Scenario};
use crate::error::KeelError;
use crate::report::{run_report, CrashRequest};
use crate::runner::{RunSpec, RESTART_DELAY_MS_DEFAULT};
use clap::{Args, Parser, Subcommand, ValueEnum};
use keel_engine::{EngineConfig, Event, SinkKind};
use keel_sim::FaultPlan;
use std::process::ExitCode;

/// keel: deterministic simulation testing for a small stream-processing engine.
///
/// Runs the chapter-04 engine on a simulated clock and an in-memory disk, kills it where you
/// ask, restarts it from its last checkpoint and counts what the sink ends up with.
#[derive(Debug, Parser)]
#[command(name = "keel", version, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a scenario once, optionally killing the process, and compare with the fault-free run.
    Run(RunArgs),
}

/// Which input and which engine knobs.
#[derive(Debug, Args)]
pub struct ScenarioArgs {
    /// A shipped scenario (default: ch04, the chapter's stream).
    #[arg(long, value_name = "NAME", conflicts_with = "events")]
    pub scenario: Option<String>,

    /// An events file instead: one JSON object {"ts": <int>, "value": <int>} per line.
    #[arg(long, value_name = "FILE.jsonl")]
    pub events: Option<String>,

    /// Tumbling window size W (event-time units).
    #[arg(
        long,
        value_name = "W",
        default_value_t = 10,
        allow_negative_numbers = true
    )]
    pub window: i64,

    /// Out-of-orderness D: the watermark is max_ts - D.
    #[arg(
        long,
        value_name = "D",
        default_value_t = 5,
        allow_negative_numbers = true
    )]
    pub out_of_orderness: i64,

    /// Checkpoint after every K events.
    #[arg(long, value_name = "K", default_value_t = 8)]
    pub checkpoint_every: u64,

    /// Event i arrives at i * I milliseconds of simulated time.
    #[arg(long, value_name = "I", default_value_t = 300)]
    pub event_interval_ms: u64,

    /// Simulated time between a crash and the restarted process.
    #[arg(long, value_name = "MS", default_value_t = RESTART_DELAY_MS_DEFAULT)]
    pub restart_delay_ms: u64,
}

/// The sink the engine writes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SinkArg {
    /// Non-idempotent: appends every record, replays included (at-least-once).
    Append,
    /// Deduplicates by the record's key (event index, window end).
    Idempotent,
}

impl From<SinkArg> for SinkKind {
    fn from(sink: SinkArg) -> Self {
        match sink {
            SinkArg::Append => SinkKind::Append,
            SinkArg::Idempotent => SinkKind::Idempotent,
        }
    }
}

/// How a report is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RunFormat {
    /// The chapter's lines.
    Text,
    /// One JSON object.
    Json,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,

    /// The sink.
    #[arg(long, value_enum, default_value_t = SinkArg::Append)]
    pub sink: SinkArg,

    /// Kill the process after event C (and after its checkpoint, if one was due).
    #[arg(long, value_name = "C", conflicts_with = "crash_at_ms")]
    pub crash_after_event: Option<u64>,

    /// Kill the process when the simulated clock reaches T ms (the chapter's "kill -9 after 2.6 s").
    #[arg(long, value_name = "T")]
    pub crash_at_ms: Option<u64>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = RunFormat::Text)]
    pub format: RunFormat,

    /// Seed of the run's random streams (a run without random faults does not draw from it).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// The input events and the name to report them under.
fn load_events(args: &ScenarioArgs) -> Result<(String, Vec<Event>), KeelError> {
    match &args.events {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| KeelError::usage(format!("cannot read events file {path}: {e}")))?;
            Ok((path.clone(), events_from_text(path, &text)?))
        }
        None => {
            let scenario = Scenario::by_name(args.scenario.as_deref().unwrap_or("ch04"))?;
            Ok((scenario.name.to_string(), scenario.events()))
        }
    }
}

/// The command line that reproduces a run, as a user would type it.
fn reproduce_command(args: &RunArgs) -> String {
    let s = &args.scenario;
    let mut parts = vec!["keel run".to_string()];
    match &s.events {
        Some(path) => parts.push(format!("--events {path}")),
        None => parts.push(format!(
            "--scenario {}",
            s.scenario.as_deref().unwrap_or("ch04")
        )),
    }
    parts.push(format!("--window {}", s.window));
    parts.push(format!("--out-of-orderness {}", s.out_of_orderness));
    parts.push(format!("--checkpoint-every {}", s.checkpoint_every));
    parts.push(format!("--event-interval-ms {}", s.event_interval_ms));
    parts.push(format!("--restart-delay-ms {}", s.restart_delay_ms));
    parts.push(format!("--sink {}", SinkKind::from(args.sink)));
    if let Some(c) = args.crash_after_event {
        parts.push(format!("--crash-after-event {c}"));
    }
    if let Some(t) = args.crash_at_ms {
        parts.push(format!("--crash-at-ms {t}"));
    }
    parts.push(format!("--seed {}", args.seed));
    parts.join(" ")
}

fn engine_config(args: &ScenarioArgs, sink: SinkKind) -> Result<EngineConfig, KeelError> {
    let config = EngineConfig {
        window_size: args.window,
        out_of_orderness: args.out_of_orderness,
        checkpoint_every: args.checkpoint_every,
        sink,
        event_interval_ms: args.event_interval_ms,
    };
    config.validate().map_err(KeelError::usage)?;
    Ok(config)
}

fn cmd_run(args: &RunArgs) -> Result<String, KeelError> {
    let config = engine_config(&args.scenario, args.sink.into())?;
    let (scenario, events) = load_events(&args.scenario)?;
    let crash = match (args.crash_after_event, args.crash_at_ms) {
        (Some(c), _) => Some(CrashRequest::AfterEvent(c)),
        (None, Some(t)) => Some(CrashRequest::AtMs(t)),
        (None, None) => None,
    };
    let spec = RunSpec {
        events,
        config,
        plan: FaultPlan::none(),
        seed: args.seed,
        restart_delay_ms: args.scenario.restart_delay_ms,
    };
    let report = run_report(&scenario, &spec, crash, reproduce_command(args))?;
    Ok(match args.format {
        RunFormat::Text => report.to_text(),
        RunFormat::Json => report.to_json() + "\n",
    })
}

/// Runs a parsed command line and returns what to print on stdout.
pub fn execute(cli: &Cli) -> Result<String, KeelError> {
    match &cli.command {
        Command::Run(args) => cmd_run(args),
    }
}

/// `keel`'s whole life: parse, execute, print once, exit with a clear code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match execute(&cli) {
        Ok(output) => {
            print!("{output}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            error.exit_code()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
