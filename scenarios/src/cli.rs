//! The `keel` command line: clap definitions (doc comments are the help text) and dispatch.
//! The only module of keel that prints.

use crate::catalogue::{events_from_text, Scenario};
use crate::error::KeelError;
use crate::explore::{
    explore_one, replay_plan_command, report as explore_report, target_class, Baseline,
    ExploreReport, ExploreRow, ExploreSpec, MAX_FAULTS_DEFAULT, OUTAGE_MS_DEFAULT,
};
use crate::oracle::{judge, Expectation, Verdict};
use crate::parallel::{default_jobs, par_map};
use crate::report::{run_report, CrashRequest};
use crate::runner::{
    run, RunResult, RunSpec, RESTART_DELAY_MS_DEFAULT, SECTOR_SIZE_BYTES_DEFAULT,
    TRANSACTION_TIMEOUT_MS_DEFAULT,
};
use crate::shrink::shrink;
use crate::spec::ScenarioSpec;
use crate::sweep::{
    aggregate, baselines, run_point, sites, sites_table, sweep_points, PointRecord, SweepPoint,
    SweepReport, SweepSpec,
};
use crate::table::TableFormat;
use crate::teach::{lessons, Lang};
use clap::{Args, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use keel_engine::{CheckpointProtocol, Event, KeyScheme, SinkKind};
use keel_sim::fault::PlanFile;
use keel_sim::{CrashPoint, Fault, FaultKind, FaultPlan, PlannedFault, TraceLine};
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};

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
    /// Run thousands of seeds, each a swarm-drawn fault plan; tally per seed and per sink.
    Explore(ExploreArgs),
    /// Replay one seed (or a plan file) step by step: the whole trace, tallies, fingerprint.
    Replay(ReplayArgs),
    /// Reduce a failing seed's plan (or a plan file) to a minimal one that fails the same way.
    Shrink(ShrinkArgs),
    /// Combine `--shard` output files into exactly the report an unsharded run prints.
    Merge(MergeArgs),
    /// The chapter's tables (and more), each computed live, in English or Chinese; pictures.
    Teach(TeachArgs),
    /// Measure simulation speed: explore seeds on the wall clock, print runs and steps per second.
    Bench(BenchArgs),
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,

    /// The seeds to run (each on every --sinks sink).
    #[arg(long, value_name = "A..B", value_parser = parse_seed_range, default_value = "0..20000")]
    pub seeds: SeedRange,

    /// The sinks to run.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "append,idempotent,transactional"
    )]
    pub sinks: Vec<SinkArg>,

    #[command(flatten)]
    pub job: JobArgs,
}

#[derive(Debug, Args)]
pub struct TeachArgs {
    /// The scenario to teach with.
    #[arg(default_value = "ch04", value_name = "SCENARIO")]
    pub scenario: String,

    /// The language of the tables and their explanations.
    #[arg(long, value_enum, default_value_t = LangArg::En)]
    pub lang: LangArg,

    /// Output format.
    #[arg(long, value_enum, default_value_t = TeachFormat::Text)]
    pub format: TeachFormat,

    /// Also write SVG pictures into this directory (created if needed).
    #[arg(long, value_name = "DIR")]
    pub svg: Option<String>,
}

/// The language of `keel teach`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LangArg {
    En,
    /// 中文 (the chapter's own words)
    Zh,
}

/// How `keel teach` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TeachFormat {
    Text,
    Markdown,
}

/// How a long job runs: threads, a slice of it, progress.
#[derive(Debug, Args)]
pub struct JobArgs {
    /// Independent simulations run on this many threads; the output is the same for any N
    /// (default: the machine's cores).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub jobs: Option<u64>,

    /// Run only the i-th of n disjoint slices (0-based, e.g. 0/4) and print JSON lines for
    /// `keel merge`.
    #[arg(long, value_name = "i/n", value_parser = parse_shard)]
    pub shard: Option<Shard>,

    /// No progress bar (it is also hidden when stderr is not a terminal).
    #[arg(long, short)]
    pub quiet: bool,
}

/// The i-th of n slices of a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

fn parse_shard(text: &str) -> Result<Shard, String> {
    let (index, count) = text
        .split_once('/')
        .ok_or_else(|| format!("expected i/n (e.g. 0/4), got '{text}'"))?;
    let index: u64 = index
        .parse()
        .map_err(|_| format!("'{index}' is not a shard number"))?;
    let count: u64 = count
        .parse()
        .map_err(|_| format!("'{count}' is not a shard count"))?;
    if count == 0 || index >= count {
        return Err(format!("shard {index}/{count}: need 0 <= i < n"));
    }
    Ok(Shard { index, count })
}

impl Shard {
    /// This shard's contiguous slice of `len` items.
    pub fn range(&self, len: usize) -> std::ops::Range<usize> {
        let (i, n) = (self.index as usize, self.count as usize);
        (i * len / n)..((i + 1) * len / n)
    }
}

/// A half-open seed range `a..b`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeedRange {
    pub start: u64,
    pub end: u64,
}

fn parse_seed_range(text: &str) -> Result<SeedRange, String> {
    let (start, end) = text
        .split_once("..")
        .ok_or_else(|| format!("expected a range a..b (e.g. 0..1000), got '{text}'"))?;
    let start: u64 = start
        .parse()
        .map_err(|_| format!("'{start}' is not a seed"))?;
    let end: u64 = end.parse().map_err(|_| format!("'{end}' is not a seed"))?;
    if start >= end {
        return Err(format!("the range {start}..{end} is empty"));
    }
    if end - start > SEEDS_MAX {
        return Err(format!(
            "at most {SEEDS_MAX} seeds at once (shard bigger ranges)"
        ));
    }
    Ok(SeedRange { start, end })
}

/// Seeds one `keel explore` may run (bounds memory: one row per seed and sink).
const SEEDS_MAX: u64 = 10_000_000;

/// What a run must hold; a violation exits with status 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ExpectArg {
    /// No duplicates, no loss, no wrong result, no corruption, recovered.
    ExactlyOnce,
    /// Nothing of the fault-free run lost, and recovery completed.
    NoLoss,
}

impl From<ExpectArg> for Expectation {
    fn from(expect: ExpectArg) -> Self {
        match expect {
            ExpectArg::ExactlyOnce => Expectation::ExactlyOnce,
            ExpectArg::NoLoss => Expectation::NoLoss,
        }
    }
}

/// How seeds draw their plans (explore, replay and shrink must agree on these).
#[derive(Debug, Args)]
pub struct SeedPlanArgs {
    /// The fault kinds a seed may draw from.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "process-crash,power-loss,disk-error,sink-error,ack-lost,sink-unavailable"
    )]
    pub faults: Vec<FaultArg>,

    /// At most this many faults per seed.
    #[arg(long, value_name = "N", default_value_t = MAX_FAULTS_DEFAULT as u64, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub max_faults: u64,

    /// Length of a sink outage, in simulated milliseconds.
    #[arg(long, value_name = "MS", default_value_t = OUTAGE_MS_DEFAULT)]
    pub outage_ms: u64,
}

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

/// One seed's plan (or a plan file) on one sink: what `replay` and `shrink` work on.
#[derive(Debug, Args)]
pub struct TargetArgs {
    #[command(flatten)]
    pub scenario: ScenarioArgs,

    #[command(flatten)]
    pub plans: SeedPlanArgs,

    /// The sink.
    #[arg(long, value_enum, default_value_t = SinkArg::Append)]
    pub sink: SinkArg,

    /// Use this plan file instead of the plan of --seed.
    #[arg(long, value_name = "FILE.json")]
    pub plan: Option<String>,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub target: TargetArgs,

    /// Run twice and fail loudly, with the first differing step, if the traces differ.
    #[arg(long)]
    pub check_determinism: bool,

    /// Write the faults that took effect to this plan file.
    #[arg(long, value_name = "FILE.json")]
    pub save_plan: Option<String>,

    /// Exit 1 if the run breaks this.
    #[arg(long, value_enum)]
    pub expect: Option<ExpectArg>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = RunFormat::Text)]
    pub format: RunFormat,
}

#[derive(Debug, Args)]
pub struct ShrinkArgs {
    #[command(flatten)]
    pub target: TargetArgs,

    /// Keep the failure that breaks this (default: the most serious failure shown).
    #[arg(long, value_enum)]
    pub expect: Option<ExpectArg>,

    /// Write the shrunk plan to this file.
    #[arg(long, value_name = "FILE.json")]
    pub save_plan: Option<String>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = RunFormat::Text)]
    pub format: RunFormat,
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Shard files written by `keel sweep --shard` or `keel explore --shard`.
    #[arg(required = true, value_name = "FILES")]
    pub files: Vec<String>,

    /// Do not shrink the first failing seed (explore).
    #[arg(long)]
    pub no_shrink: bool,

    /// Print the summary and failing seeds, not one row per seed (explore).
    #[arg(long)]
    pub summary_only: bool,

    /// Output format.
    #[arg(long, value_enum, default_value_t = TableFormatArg::Table)]
    pub format: TableFormatArg,
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

    /// How records are keyed: the chapter's stable key, or processing time (the exercise
    /// where replays make new keys and the idempotent sink stops deduplicating).
    #[arg(long, value_enum, default_value_t = KeyArg::EventIndex)]
    pub key: KeyArg,

    /// The transactional sink's log aborts a transaction open longer than this (simulated ms).
    #[arg(long, value_name = "MS", default_value_t = TRANSACTION_TIMEOUT_MS_DEFAULT)]
    pub transaction_timeout_ms: u64,

    /// The simulated disk's sector: the unit a write tears at on power loss.
    #[arg(long, value_name = "BYTES", default_value_t = SECTOR_SIZE_BYTES_DEFAULT as u64, value_parser = clap::value_parser!(u64).range(1..=2_097_152))]
    pub sector_size_bytes: u64,
}

/// How records are keyed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum KeyArg {
    /// (event index, window end): stable across replays.
    EventIndex,
    /// (processing time, window end): every replay makes new keys.
    ProcessingTime,
}

impl From<KeyArg> for KeyScheme {
    fn from(key: KeyArg) -> Self {
        match key {
            KeyArg::EventIndex => KeyScheme::EventIndex,
            KeyArg::ProcessingTime => KeyScheme::ProcessingTime,
        }
    }
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
    /// The process is cut off after a sink request and replaced; it wakes up later as a
    /// zombie and retries its last write and its commit (not in the default sets).
    Zombie,
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
            FaultArg::Zombie => FaultKind::Zombie,
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

/// The sink the engine writes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SinkArg {
    /// Non-idempotent: appends every record, replays included (at-least-once).
    Append,
    /// Deduplicates by the record's key (event index, window end).
    Idempotent,
    /// Two-phase commit on a Kafka-like transactional log, one transaction per checkpoint.
    Transactional,
}

impl From<SinkArg> for SinkKind {
    fn from(sink: SinkArg) -> Self {
        match sink {
            SinkArg::Append => SinkKind::Append,
            SinkArg::Idempotent => SinkKind::Idempotent,
            SinkArg::Transactional => SinkKind::Transactional,
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

    /// Write the faults that took effect to this plan file (`keel replay --plan` runs it).
    #[arg(long, value_name = "FILE.json")]
    pub save_plan: Option<String>,
}

/// What `keel` prints on stdout, and the status it exits with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    pub stdout: String,
    /// 0: held what was asked; 1: a violation of `--expect` (or of determinism) was found.
    pub exit_code: u8,
}

impl Output {
    fn ok(stdout: String) -> Output {
        Output {
            stdout,
            exit_code: 0,
        }
    }
}

/// Exit status 1: the run found what `--expect` forbids.
pub const EXIT_VIOLATION: u8 = 1;

fn scenario_spec(args: &ScenarioArgs) -> ScenarioSpec {
    ScenarioSpec {
        scenario: args.scenario.clone(),
        events: args.events.clone(),
        window: args.window,
        out_of_orderness: args.out_of_orderness,
        checkpoint_every: args.checkpoint_every,
        event_interval_ms: args.event_interval_ms,
        restart_delay_ms: args.restart_delay_ms,
        protocol: args.checkpoint_protocol.into(),
        key: args.key.into(),
        transaction_timeout_ms: args.transaction_timeout_ms,
        seed: args.seed,
        sector_size_bytes: args.sector_size_bytes as usize,
    }
}

/// The input events of a spec: a shipped scenario, or an events file read from disk.
fn load_events(spec: &ScenarioSpec) -> Result<Vec<Event>, KeelError> {
    match &spec.events {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| KeelError::usage(format!("cannot read events file {path}: {e}")))?;
            events_from_text(path, &text)
        }
        None => Ok(Scenario::by_name(&spec.label())?.events()),
    }
}

/// Checks the knobs, then loads the events.
fn prepare(args: &ScenarioArgs) -> Result<(ScenarioSpec, Vec<Event>), KeelError> {
    let spec = scenario_spec(args);
    spec.config(SinkKind::Append)?;
    let events = load_events(&spec)?;
    Ok((spec, events))
}

fn read_plan_file(path: &str) -> Result<FaultPlan, KeelError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| KeelError::usage(format!("cannot read plan file {path}: {e}")))?;
    let file: PlanFile = serde_json::from_str(&text).map_err(|e| {
        KeelError::usage(format!(
            "{path}: not a fault plan ({e}); a plan looks like {{\"faults\": [{{\"step\": 29, \"fault\": {{\"kind\": \"power-loss\", \"at\": \"after\", \"state\": 12}}}}]}}"
        ))
    })?;
    FaultPlan::from_file(file).map_err(|e| KeelError::usage(format!("{path}: {e}")))
}

fn write_plan_file(path: &str, plan: &FaultPlan) -> Result<(), KeelError> {
    let json = serde_json::to_string_pretty(&plan.to_file()).expect("plans serialize") + "\n";
    std::fs::write(path, json)
        .map_err(|e| KeelError::usage(format!("cannot write plan file {path}: {e}")))
}

/// A plan file must fit the run: every fault has to take effect where it is aimed.
fn check_plan_applies(path: &str, plan: &FaultPlan, result: &RunResult) -> Result<(), KeelError> {
    let injected = result.world.faults_injected();
    for planned in plan.faults() {
        if injected.iter().any(|f| f.step == planned.step) {
            continue;
        }
        let site = result
            .world
            .trace()
            .lines()
            .iter()
            .find_map(|line| match line {
                TraceLine::Step {
                    step, op, target, ..
                } if *step == planned.step => Some(format!("{op} {target}")),
                _ => None,
            });
        let why = match site {
            Some(site) => format!(
                "step {} is {site}, where {} does not apply",
                planned.step,
                planned.fault.kind()
            ),
            None => format!("the run never reached step {}", planned.step),
        };
        return Err(KeelError::usage(format!(
            "{path}: the fault {} at step {} did not take effect: {why} (`keel sites` lists the steps)",
            planned.fault, planned.step
        )));
    }
    Ok(())
}

fn jobs(job: &JobArgs) -> usize {
    job.jobs.map_or_else(default_jobs, |n| n as usize)
}

/// A progress bar on stderr (runs done, failures so far, rate, time left), hidden with
/// `--quiet` or when stderr is not a terminal.
struct Progress {
    bar: Option<ProgressBar>,
    failures: AtomicU64,
}

impl Progress {
    fn new(len: usize, quiet: bool) -> Progress {
        let visible = !quiet && std::io::stderr().is_terminal() && len > 1;
        let bar = visible.then(|| {
            let bar = ProgressBar::with_draw_target(Some(len as u64), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template(
                    "{elapsed_precise} [{bar:30}] {pos}/{len} runs, {msg} failing, {rate}, eta {eta}",
                )
                .expect("a valid template")
                .with_key("rate", |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = write!(w, "{:.0} runs/s", state.per_sec());
                })
                .progress_chars("=> "),
            );
            bar.set_message("0");
            bar
        });
        Progress {
            bar,
            failures: AtomicU64::new(0),
        }
    }

    fn done(&self, failed: bool) {
        if let Some(bar) = &self.bar {
            if failed {
                let failures = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
                bar.set_message(failures.to_string());
            }
            bar.inc(1);
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

fn table_format(format: TableFormatArg) -> Option<TableFormat> {
    match format {
        TableFormatArg::Table => Some(TableFormat::Table),
        TableFormatArg::Markdown => Some(TableFormat::Markdown),
        TableFormatArg::Csv => Some(TableFormat::Csv),
        TableFormatArg::Json => None,
    }
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
        FaultArg::Zombie => Fault::Zombie,
    };
    Some(CrashRequest::AtStep(PlannedFault { step, fault }))
}

/// The command line that reproduces a run, as a user would type it.
fn reproduce_command(spec: &ScenarioSpec, args: &RunArgs) -> String {
    let mut command = format!(
        "{} --sink {}",
        spec.command("run"),
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

fn cmd_run(args: &RunArgs) -> Result<Output, KeelError> {
    let (spec, events) = prepare(&args.scenario)?;
    let run_spec = spec.run_spec(&events, args.sink.into(), FaultPlan::none())?;
    let report = run_report(
        &spec.label(),
        &run_spec,
        run_fault(args),
        reproduce_command(&spec, args),
    )?;
    if let Some(path) = &args.save_plan {
        let injected = FaultPlan::from_file(report.plan.clone()).expect("a plan that ran is valid");
        write_plan_file(path, &injected)?;
    }
    Ok(Output::ok(match args.format {
        RunFormat::Text if args.trace => {
            format!("{}trace:\n{}\n", report.to_text(), report.trace.join("\n"))
        }
        RunFormat::Text => report.to_text(),
        RunFormat::Json => report.to_json() + "\n",
    }))
}

fn cmd_sites(args: &SitesArgs) -> Result<Output, KeelError> {
    let (spec, events) = prepare(&args.scenario)?;
    let (_, rows) = sites(&spec.run_spec(&events, args.sink.into(), FaultPlan::none())?);
    Ok(Output::ok(match table_format(args.format) {
        Some(format) => sites_table(&rows).render(format),
        None => serde_json::to_string_pretty(&rows).expect("sites serialize") + "\n",
    }))
}

/// One line of a shard file.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
enum ShardLine {
    SweepHeader {
        spec: ScenarioSpec,
        sweep: SweepSpec,
        shard: Shard,
        total: u64,
        expect: Option<Expectation>,
    },
    ExploreHeader {
        spec: ScenarioSpec,
        explore: ExploreSpec,
        shard: Shard,
        total: u64,
    },
    Point(PointRecord),
    Row(ExploreRow),
}

fn shard_output(lines: &[ShardLine]) -> String {
    lines
        .iter()
        .map(|line| serde_json::to_string(line).expect("shard lines serialize") + "\n")
        .collect()
}

fn dedup_kinds<T: PartialEq + Copy>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

/// Renders a sweep report, with exit status 1 if a point breaks `expect`.
fn sweep_output(
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

fn cmd_sweep(args: &SweepArgs) -> Result<Output, KeelError> {
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

fn explore_spec(
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

fn explore_baselines(
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
fn finish_explore(
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

fn cmd_explore(args: &ExploreArgs) -> Result<Output, KeelError> {
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

/// A seed's plan (or a plan file) on one sink, run once and judged.
struct Target {
    spec: ScenarioSpec,
    sink: SinkKind,
    explore: ExploreSpec,
    baseline: Baseline,
    run_spec: RunSpec,
    result: RunResult,
    verdict: Verdict,
}

fn load_target(args: &TargetArgs, expect: Option<ExpectArg>) -> Result<Target, KeelError> {
    let (spec, events) = prepare(&args.scenario)?;
    let sink = SinkKind::from(args.sink);
    let seeds = SeedRange {
        start: spec.seed,
        end: spec.seed + 1,
    };
    let explore = explore_spec(&args.plans, &[args.sink], seeds, expect);
    let baseline = Baseline::new(spec.run_spec(&events, sink, FaultPlan::none())?);
    let run_spec = match &args.plan {
        Some(path) => RunSpec {
            plan: read_plan_file(path)?,
            ..baseline.spec.clone()
        },
        None => baseline.seed_spec(&explore, spec.seed),
    };
    let result = run(&run_spec);
    if let Some(path) = &args.plan {
        check_plan_applies(path, &run_spec.plan, &result)?;
    }
    let verdict = judge(&baseline.expected, &result, &run_spec.config);
    Ok(Target {
        spec,
        sink,
        explore,
        baseline,
        run_spec,
        result,
        verdict,
    })
}

fn cmd_replay(args: &ReplayArgs) -> Result<Output, KeelError> {
    let Target {
        spec,
        sink,
        explore,
        run_spec,
        result,
        verdict,
        ..
    } = load_target(&args.target, args.expect)?;
    if let Some(path) = &args.save_plan {
        write_plan_file(path, &result.world.plan_that_ran())?;
    }
    let trace: Vec<String> = result.world.trace().text_lines();
    let mut exit_code = 0;
    let mut stdout = String::new();
    let source = match &args.target.plan {
        Some(path) => format!("plan={path}"),
        None => format!("seed={}", spec.seed),
    };
    let plan_json = serde_json::to_string(&run_spec.plan.to_file()).expect("plans serialize");
    let injected_json =
        serde_json::to_string(&result.world.plan_that_ran().to_file()).expect("plans serialize");
    if args.check_determinism {
        let again = run(&run_spec);
        let trace_again: Vec<String> = again.world.trace().text_lines();
        if let Some(i) =
            (0..trace.len().max(trace_again.len())).find(|&i| trace.get(i) != trace_again.get(i))
        {
            stdout.push_str(&format!(
                "NONDETERMINISM: the traces differ at line {i}\n  first:  {}\n  second: {}\n",
                trace.get(i).map_or("(end)", String::as_str),
                trace_again.get(i).map_or("(end)", String::as_str)
            ));
            exit_code = EXIT_VIOLATION;
        }
    }
    let violated = explore.expect.filter(|e| !e.holds(&verdict));
    match args.format {
        RunFormat::Text => {
            stdout.push_str(&format!(
                "replay scenario={} protocol={} sink={sink} {source}\nplan: {plan_json}\ninjected: {injected_json}\n\n",
                spec.label(),
                spec.protocol
            ));
            for line in &trace {
                stdout.push_str(line);
                stdout.push('\n');
            }
            stdout.push_str(&format!(
                "\noutcome: {}\nduplicates={} lost={} wrong={} corrupt={} rolled_back={} recovery={} restarts={} final_windows_match={}\nfingerprint={}\n",
                result.outcome.describe(),
                verdict.duplicates,
                verdict.lost,
                verdict.wrong,
                verdict.corrupt,
                verdict.rolled_back,
                verdict.recovery,
                verdict.restarts,
                verdict.final_windows_match,
                result.world.fingerprint()
            ));
            if args.check_determinism && exit_code == 0 {
                stdout.push_str("determinism: two runs, identical traces\n");
            }
            if let Some(expectation) = violated {
                stdout.push_str(&format!(
                    "VIOLATION of --expect {}: {}\n",
                    expectation.name(),
                    verdict.summary()
                ));
            }
        }
        RunFormat::Json => {
            let json = serde_json::json!({
                "scenario": spec.label(),
                "protocol": spec.protocol.name(),
                "sink": sink.name(),
                "seed": spec.seed,
                "plan": run_spec.plan.to_file(),
                "injected": result.world.plan_that_ran().to_file(),
                "trace": trace,
                "oracle": verdict,
                "fingerprint": result.world.fingerprint().to_string(),
            });
            stdout.push_str(&(serde_json::to_string_pretty(&json).expect("json") + "\n"));
        }
    }
    if violated.is_some() {
        exit_code = EXIT_VIOLATION;
    }
    Ok(Output { stdout, exit_code })
}

fn cmd_shrink(args: &ShrinkArgs) -> Result<Output, KeelError> {
    let Target {
        spec,
        sink,
        explore,
        baseline,
        run_spec,
        result,
        verdict,
    } = load_target(&args.target, args.expect)?;
    let Some(class) = target_class(&explore, &verdict).filter(|_| explore.fails(&verdict, sink))
    else {
        return Ok(Output::ok(format!(
            "nothing to shrink: the run holds ({}) on sink {sink}\n",
            verdict.summary()
        )));
    };
    let shrunk = shrink(&run_spec, &baseline.expected, &run_spec.plan, class);
    if let Some(path) = &args.save_plan {
        write_plan_file(path, &shrunk.plan)?;
    }
    let reproduce = replay_plan_command(
        &|command, seed| spec.command_with_seed(command, seed),
        spec.seed,
        sink,
        &shrunk.plan,
    );
    let plan_json = serde_json::to_string(&shrunk.plan.to_file()).expect("plans serialize");
    Ok(Output::ok(match args.format {
        RunFormat::Text => format!(
            "shrink scenario={} protocol={} sink={sink} seed={}\nfailure: {class} ({})\nfrom {} faults to {} in {} runs\nplan: {plan_json}\noutcome: {}\nfingerprint={}\nreproduce: {reproduce}\n",
            spec.label(),
            spec.protocol,
            spec.seed,
            verdict.summary(),
            result.world.faults_injected().len(),
            shrunk.plan.len(),
            shrunk.runs,
            shrunk.verdict.summary(),
            shrunk.fingerprint,
        ),
        RunFormat::Json => {
            let json = serde_json::json!({
                "class": class,
                "original": verdict,
                "plan": shrunk.plan.to_file(),
                "oracle": shrunk.verdict,
                "runs": shrunk.runs,
                "fingerprint": shrunk.fingerprint,
                "reproduce": reproduce,
            });
            serde_json::to_string_pretty(&json).expect("json") + "\n"
        }
    }))
}

fn cmd_merge(args: &MergeArgs) -> Result<Output, KeelError> {
    let mut header: Option<(String, ShardLine)> = None;
    let mut shards_seen: Vec<Shard> = Vec::new();
    let mut points: Vec<PointRecord> = Vec::new();
    let mut rows: Vec<ExploreRow> = Vec::new();
    for path in &args.files {
        let text = std::fs::read_to_string(path)
            .map_err(|e| KeelError::usage(format!("cannot read shard file {path}: {e}")))?;
        for (i, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let parsed: ShardLine = serde_json::from_str(line).map_err(|e| {
                KeelError::usage(format!(
                    "{path}: line {}: not a keel shard line: {e}",
                    i + 1
                ))
            })?;
            match parsed {
                ShardLine::Point(record) => points.push(record),
                ShardLine::Row(row) => rows.push(row),
                ref h @ (ShardLine::SweepHeader { shard, .. }
                | ShardLine::ExploreHeader { shard, .. }) => {
                    if i != 0 {
                        return Err(KeelError::usage(format!(
                            "{path}: line {}: a header after the first line",
                            i + 1
                        )));
                    }
                    if shards_seen.contains(&shard) {
                        return Err(KeelError::usage(format!(
                            "{path}: shard {}/{} given twice",
                            shard.index, shard.count
                        )));
                    }
                    shards_seen.push(shard);
                    let key = |line: &ShardLine| match line {
                        ShardLine::SweepHeader {
                            spec,
                            sweep,
                            total,
                            expect,
                            shard,
                        } => serde_json::to_string(&(spec, sweep, total, expect, shard.count))
                            .expect("json"),
                        ShardLine::ExploreHeader {
                            spec,
                            explore,
                            total,
                            shard,
                        } => serde_json::to_string(&(spec, explore, total, shard.count))
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
    match header {
        ShardLine::SweepHeader {
            spec,
            shard,
            total,
            expect,
            ..
        } => {
            check_complete(&shards_seen, shard.count, points.len() as u64, total)?;
            points.sort_by_key(|p| p.index);
            if points.iter().enumerate().any(|(i, p)| p.index != i as u64) {
                return Err(KeelError::usage(
                    "the shard files' points are not exactly the sweep's points".to_string(),
                ));
            }
            let report = aggregate(&spec.label(), spec.protocol.name(), &points);
            Ok(sweep_output(&report, &points, expect, args.format))
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
                keyed.push((index, row));
            }
            keyed.sort_by_key(|(index, _)| *index);
            if keyed.iter().enumerate().any(|(i, (index, _))| *index != i) {
                return Err(KeelError::usage(
                    "the shard files' rows are not exactly the exploration's seeds".to_string(),
                ));
            }
            let rows: Vec<ExploreRow> = keyed.into_iter().map(|(_, row)| row).collect();
            let shrink_first = !args.no_shrink && rows.iter().any(|r| r.failed);
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
        _ => unreachable!("the header is a header"),
    }
}

fn check_complete(seen: &[Shard], count: u64, got: u64, total: u64) -> Result<(), KeelError> {
    let mut missing: Vec<String> = (0..count)
        .filter(|i| !seen.iter().any(|s| s.index == *i))
        .map(|i| format!("{i}/{count}"))
        .collect();
    if !missing.is_empty() {
        missing.truncate(8);
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

/// The only place keel reads the wall clock: to time simulations, never inside one.
fn cmd_bench(args: &BenchArgs) -> Result<Output, KeelError> {
    let (spec, events) = prepare(&args.scenario)?;
    let plans = SeedPlanArgs {
        faults: vec![
            FaultArg::ProcessCrash,
            FaultArg::PowerLoss,
            FaultArg::DiskError,
            FaultArg::SinkError,
            FaultArg::AckLost,
            FaultArg::SinkUnavailable,
        ],
        max_faults: MAX_FAULTS_DEFAULT as u64,
        outage_ms: OUTAGE_MS_DEFAULT,
    };
    let explore = explore_spec(&plans, &args.sinks, args.seeds, None);
    let baselines = explore_baselines(&spec, &events, &explore)?;
    let points = explore.points();
    let progress = Progress::new(points.len(), args.job.quiet);
    let jobs = jobs(&args.job);
    let started = std::time::Instant::now();
    let rows = par_map(
        &points,
        jobs,
        |&(seed, sink)| {
            let baseline = &baselines[&sink];
            let result = run(&baseline.seed_spec(&explore, seed));
            (result.world.steps_taken(), result.world.fingerprint())
        },
        &|_| progress.done(false),
    );
    let elapsed = started.elapsed().as_secs_f64().max(1e-9);
    progress.finish();
    let steps: u64 = rows.iter().map(|(steps, _)| steps).sum();
    let digest: String = rows.iter().map(|(_, f)| f.to_string()).collect();
    Ok(Output::ok(format!(
        "bench scenario={} protocol={} jobs={jobs}\nruns={} steps={} elapsed={elapsed:.3}s\nruns_per_second={:.0} steps_per_second={:.0}\nfingerprint={}\n",
        spec.label(),
        spec.protocol,
        rows.len(),
        steps,
        rows.len() as f64 / elapsed,
        steps as f64 / elapsed,
        keel_sim::Fingerprint::of(digest.as_bytes()),
    )))
}

fn cmd_teach(args: &TeachArgs) -> Result<Output, KeelError> {
    let spec = ScenarioSpec {
        scenario: Some(args.scenario.clone()),
        events: None,
        window: 10,
        out_of_orderness: 5,
        checkpoint_every: 8,
        event_interval_ms: 300,
        restart_delay_ms: RESTART_DELAY_MS_DEFAULT,
        protocol: CheckpointProtocol::Safe,
        key: KeyScheme::EventIndex,
        transaction_timeout_ms: TRANSACTION_TIMEOUT_MS_DEFAULT,
        seed: 0,
        sector_size_bytes: SECTOR_SIZE_BYTES_DEFAULT,
    };
    let events = load_events(&spec)?;
    let lessons = lessons(&spec, &events)?;
    let lang = match args.lang {
        LangArg::En => Lang::En,
        LangArg::Zh => Lang::Zh,
    };
    let format = match args.format {
        TeachFormat::Text => TableFormat::Table,
        TeachFormat::Markdown => TableFormat::Markdown,
    };
    let mut stdout = lessons.render(lang, format);
    if let Some(dir) = &args.svg {
        std::fs::create_dir_all(dir)
            .map_err(|e| KeelError::usage(format!("cannot create {dir}: {e}")))?;
        for (name, svg) in lessons.svgs(lang) {
            let path = std::path::Path::new(dir).join(&name);
            std::fs::write(&path, svg)
                .map_err(|e| KeelError::usage(format!("cannot write {}: {e}", path.display())))?;
            stdout.push_str(&format!("wrote {}\n", path.display()));
        }
    }
    Ok(Output::ok(stdout))
}

/// Runs a parsed command line and returns what to print on stdout.
pub fn execute(cli: &Cli) -> Result<Output, KeelError> {
    match &cli.command {
        Command::Run(args) => cmd_run(args),
        Command::Sites(args) => cmd_sites(args),
        Command::Sweep(args) => cmd_sweep(args),
        Command::Explore(args) => cmd_explore(args),
        Command::Replay(args) => cmd_replay(args),
        Command::Shrink(args) => cmd_shrink(args),
        Command::Merge(args) => cmd_merge(args),
        Command::Teach(args) => cmd_teach(args),
        Command::Bench(args) => cmd_bench(args),
    }
}

/// `keel`'s whole life: parse, execute, print once, exit with a clear code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match execute(&cli) {
        Ok(output) => {
            print!("{}", output.stdout);
            ExitCode::from(output.exit_code)
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

    #[test]
    fn shards_split_a_range_into_disjoint_covering_slices() {
        let slices: Vec<_> = (0..3)
            .map(|i| Shard { index: i, count: 3 }.range(10))
            .collect();
        assert_eq!(slices, vec![0..3, 3..6, 6..10]);
        assert_eq!(parse_shard("1/4"), Ok(Shard { index: 1, count: 4 }));
        assert!(parse_shard("4/4").is_err());
        assert!(parse_shard("x").is_err());
        assert_eq!(
            parse_seed_range("0..1000"),
            Ok(SeedRange {
                start: 0,
                end: 1000
            })
        );
        assert!(parse_seed_range("5..5").is_err());
    }
}
