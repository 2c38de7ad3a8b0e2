//! The `keel` command line: clap definitions (doc comments are the help text) and dispatch.
//! The only module of keel that prints.

use crate::catalogue::{events_from_text, Scenario};
use crate::error::KeelError;
use crate::report::{run_report, CrashRequest};
use crate::runner::{RunSpec, RESTART_DELAY_MS_DEFAULT, SECTOR_SIZE_BYTES_DEFAULT};
use crate::sweep::{sites, sites_table, sweep, SweepSpec};
use crate::table::TableFormat;
use clap::{Args, Parser, Subcommand, ValueEnum};
use keel_engine::{CheckpointProtocol, EngineConfig, Event, SinkKind};
use keel_sim::{CrashPoint, Fault, FaultKind, FaultPlan, PlannedFault};
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
    /// Run a scenario once, optionally with one fault, and compare with the fault-free run.
    Run(RunArgs),
    /// List every step of the fault-free run and the faults that apply at each.
    Sites(SitesArgs),
    /// Inject every single fault at every step where it applies, and tally what the sink got.
    Sweep(SweepArgs),
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

    /// How checkpoints are written and recovered: `safe`, or a classic unsafe variant.
    #[arg(long, value_enum, value_name = "P", default_value_t = ProtocolArg::Safe)]
    pub checkpoint_protocol: ProtocolArg,

    /// Seed of the run's random streams (drawn crash states, later swarm plans).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,

    /// The simulated disk's sector: the unit a write tears at on power loss.
    #[arg(long, value_name = "BYTES", default_value_t = SECTOR_SIZE_BYTES_DEFAULT as u64, value_parser = clap::value_parser!(u64).range(1..=2_097_152))]
    pub sector_size_bytes: u64,
}

/// A checkpoint protocol (see the README's protocol table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ProtocolArg {
    /// Sink sync, unique name, checksum, temp file, fsync, rename, fsync dir, then delete the old.
    Safe,
    /// Rewrite one state.json in place, no fsync.
    InPlace,
    /// Temp file and rename without fsync of the data.
    NoFsyncRename,
    /// No fsync of the directory after the rename.
    NoDirFsync,
    /// Delete the old checkpoint before the rename.
    DeleteThenRename,
    /// No checksum, no data fsync: a file of the right size is trusted.
    SizeOnly,
    /// Commit the checkpoint before the sink's writes are durable.
    CheckpointBeforeSinkSync,
    /// Recovery appends after a torn sink tail.
    NoTailRepair,
}

impl From<ProtocolArg> for CheckpointProtocol {
    fn from(protocol: ProtocolArg) -> Self {
        match protocol {
            ProtocolArg::Safe => CheckpointProtocol::Safe,
            ProtocolArg::InPlace => CheckpointProtocol::InPlace,
            ProtocolArg::NoFsyncRename => CheckpointProtocol::NoFsyncRename,
            ProtocolArg::NoDirFsync => CheckpointProtocol::NoDirFsync,
            ProtocolArg::DeleteThenRename => CheckpointProtocol::DeleteThenRename,
            ProtocolArg::SizeOnly => CheckpointProtocol::SizeOnly,
            ProtocolArg::CheckpointBeforeSinkSync => CheckpointProtocol::CheckpointBeforeSinkSync,
            ProtocolArg::NoTailRepair => CheckpointProtocol::NoTailRepair,
        }
    }
}

/// A kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FaultArg {
    /// kill -9: memory lost, every completed write kept.
    ProcessCrash,
    /// The machine stops: unsynced data survives only as a crash state allows.
    PowerLoss,
    /// The step's disk operation fails with EIO (a failed fsync drops its data).
    DiskError,
    /// The sink write fails before it takes effect.
    SinkError,
    /// The sink write takes effect but its acknowledgement is lost.
    AckLost,
    /// The sink is unavailable for --outage-ms of simulated time.
    SinkUnavailable,
}

impl From<FaultArg> for FaultKind {
    fn from(fault: FaultArg) -> Self {
        match fault {
            FaultArg::ProcessCrash => FaultKind::ProcessCrash,
            FaultArg::PowerLoss => FaultKind::PowerLoss,
            FaultArg::DiskError => FaultKind::DiskError,
            FaultArg::SinkError => FaultKind::SinkError,
            FaultArg::AckLost => FaultKind::AckLost,
            FaultArg::SinkUnavailable => FaultKind::SinkUnavailable,
        }
    }
}

/// Before or after a step's effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AtArg {
    Before,
    After,
}

/// How a table report is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TableFormatArg {
    /// Aligned columns.
    Table,
    Markdown,
    Csv,
    /// One JSON object.
    Json,
}

#[derive(Debug, Args)]
pub struct SitesArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,

    /// The sink.
    #[arg(long, value_enum, default_value_t = SinkArg::Append)]
    pub sink: SinkArg,

    /// Output format.
    #[arg(long, value_enum, default_value_t = TableFormatArg::Table)]
    pub format: TableFormatArg,
}

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

    /// Output format.
    #[arg(long, value_enum, default_value_t = TableFormatArg::Table)]
    pub format: TableFormatArg,
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
    #[arg(long, value_name = "C", conflicts_with_all = ["crash_at_ms", "fault"])]
    pub crash_after_event: Option<u64>,

    /// Kill the process when the simulated clock reaches T ms (the chapter's "kill -9 after 2.6 s").
    #[arg(long, value_name = "T", conflicts_with = "fault")]
    pub crash_at_ms: Option<u64>,

    /// Inject one fault of this kind at --at-step (as `keel sweep` names a point).
    #[arg(long, value_enum, requires = "at_step")]
    pub fault: Option<FaultArg>,

    /// The step of --fault (`keel sites` lists them).
    #[arg(long, value_name = "N", requires = "fault")]
    pub at_step: Option<u64>,

    /// For a crash or power loss: before or after the step's effect.
    #[arg(long, value_enum, default_value_t = AtArg::After)]
    pub at: AtArg,

    /// For a power loss: which crash state the disk is left in.
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub crash_state: u64,

    /// For sink-unavailable: the outage, in simulated milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 2_000)]
    pub outage_ms: u64,

    /// Output format.
    #[arg(long, value_enum, default_value_t = RunFormat::Text)]
    pub format: RunFormat,

    /// Print the run's whole trace (every step, fault, crash, restart and recovery decision).
    #[arg(long)]
    pub trace: bool,
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

/// `keel run` with the scenario options of `args`, as a user would type it.
fn reproduce_prefix(s: &ScenarioArgs) -> String {
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
    parts.push(format!(
        "--checkpoint-protocol {}",
        CheckpointProtocol::from(s.checkpoint_protocol)
    ));
    if s.sector_size_bytes != SECTOR_SIZE_BYTES_DEFAULT as u64 {
        parts.push(format!("--sector-size-bytes {}", s.sector_size_bytes));
    }
    parts.push(format!("--seed {}", s.seed));
    parts.join(" ")
}

/// The fault `keel run` was asked for, if any.
fn run_fault(args: &RunArgs) -> Option<CrashRequest> {
    if let Some(c) = args.crash_after_event {
        return Some(CrashRequest::AfterEvent(c));
    }
    if let Some(t) = args.crash_at_ms {
        return Some(CrashRequest::AtMs(t));
    }
    let (kind, step) = (args.fault?, args.at_step?);
    let at = match args.at {
        AtArg::Before => CrashPoint::Before,
        AtArg::After => CrashPoint::After,
    };
    let fault = match kind {
        FaultArg::ProcessCrash => Fault::ProcessCrash { at },
        FaultArg::PowerLoss => Fault::PowerLoss {
            at,
            state: args.crash_state,
        },
        FaultArg::DiskError => Fault::DiskError,
        FaultArg::SinkError => Fault::SinkError,
        FaultArg::AckLost => Fault::AckLost,
        FaultArg::SinkUnavailable => Fault::SinkUnavailable {
            duration_ms: args.outage_ms,
        },
    };
    Some(CrashRequest::AtStep(PlannedFault { step, fault }))
}

/// The command line that reproduces a run, as a user would type it.
fn reproduce_command(args: &RunArgs) -> String {
    let mut command = format!(
        "{} --sink {}",
        reproduce_prefix(&args.scenario),
        SinkKind::from(args.sink)
    );
    match run_fault(args) {
        None => {}
        Some(CrashRequest::AfterEvent(c)) => command.push_str(&format!(" --crash-after-event {c}")),
        Some(CrashRequest::AtMs(t)) => command.push_str(&format!(" --crash-at-ms {t}")),
        Some(CrashRequest::AtStep(planned)) => {
            command.push_str(&format!(
                " --fault {} --at-step {}",
                planned.fault.kind(),
                planned.step
            ));
            match planned.fault {
                Fault::ProcessCrash { at } => command.push_str(&format!(" --at {at}")),
                Fault::PowerLoss { at, state } => {
                    command.push_str(&format!(" --at {at} --crash-state {state}"))
                }
                Fault::SinkUnavailable { duration_ms } => {
                    command.push_str(&format!(" --outage-ms {duration_ms}"))
                }
                _ => {}
            }
        }
    }
    command
}

fn engine_config(args: &ScenarioArgs, sink: SinkKind) -> Result<EngineConfig, KeelError> {
    let config = EngineConfig {
        window_size: args.window,
        out_of_orderness: args.out_of_orderness,
        checkpoint_every: args.checkpoint_every,
        sink,
        protocol: args.checkpoint_protocol.into(),
        event_interval_ms: args.event_interval_ms,
    };
    config.validate().map_err(KeelError::usage)?;
    Ok(config)
}

fn cmd_run(args: &RunArgs) -> Result<String, KeelError> {
    let config = engine_config(&args.scenario, args.sink.into())?;
    let (scenario, events) = load_events(&args.scenario)?;
    let spec = RunSpec {
        events,
        config,
        plan: FaultPlan::none(),
        seed: args.scenario.seed,
        restart_delay_ms: args.scenario.restart_delay_ms,
        sector_size_bytes: args.scenario.sector_size_bytes as usize,
    };
    let report = run_report(&scenario, &spec, run_fault(args), reproduce_command(args))?;
    Ok(match args.format {
        RunFormat::Text if args.trace => format!(
            "{}trace:\n{}",
            report.to_text(),
            report.trace.join("\n") + "\n"
        ),
        RunFormat::Text => report.to_text(),
        RunFormat::Json => report.to_json() + "\n",
    })
}

fn table_format(format: TableFormatArg) -> Option<TableFormat> {
    match format {
        TableFormatArg::Table => Some(TableFormat::Table),
        TableFormatArg::Markdown => Some(TableFormat::Markdown),
        TableFormatArg::Csv => Some(TableFormat::Csv),
        TableFormatArg::Json => None,
    }
}

fn cmd_sites(args: &SitesArgs) -> Result<String, KeelError> {
    let config = engine_config(&args.scenario, args.sink.into())?;
    let (_, events) = load_events(&args.scenario)?;
    let spec = RunSpec {
        events,
        config,
        plan: FaultPlan::none(),
        seed: args.scenario.seed,
        restart_delay_ms: args.scenario.restart_delay_ms,
        sector_size_bytes: args.scenario.sector_size_bytes as usize,
    };
    let (_, rows) = sites(&spec);
    Ok(match table_format(args.format) {
        Some(format) => sites_table(&rows).render(format),
        None => serde_json::to_string_pretty(&rows).expect("sites serialize") + "\n",
    })
}

fn cmd_sweep(args: &SweepArgs) -> Result<String, KeelError> {
    let config = engine_config(&args.scenario, SinkKind::Append)?;
    let (scenario, events) = load_events(&args.scenario)?;
    let mut sinks: Vec<SinkKind> = args.sinks.iter().map(|&s| s.into()).collect();
    sinks.dedup();
    let mut faults: Vec<FaultKind> = args.faults.iter().map(|&f| f.into()).collect();
    faults.dedup();
    let spec = SweepSpec {
        events,
        config,
        sinks,
        faults,
        seed: args.scenario.seed,
        restart_delay_ms: args.scenario.restart_delay_ms,
        sector_size_bytes: args.scenario.sector_size_bytes as usize,
        outage_ms: args.outage_ms,
        reproduce_prefix: reproduce_prefix(&args.scenario),
    };
    let report = sweep(&scenario, &spec);
    Ok(match table_format(args.format) {
        Some(format) => report.render(format),
        None => report.to_json(),
    })
}

/// Runs a parsed command line and returns what to print on stdout.
pub fn execute(cli: &Cli) -> Result<String, KeelError> {
    match &cli.command {
        Command::Run(args) => cmd_run(args),
        Command::Sites(args) => cmd_sites(args),
        Command::Sweep(args) => cmd_sweep(args),
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
