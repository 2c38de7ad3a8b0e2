//! The argument groups and value types several commands share, and what they turn into.

use crate::error::KeelError;
use crate::explore::{MAX_FAULTS_DEFAULT, OUTAGE_MS_DEFAULT};
use crate::parallel::default_jobs;
use crate::property::Expectation;
use crate::runner::View;
use crate::runner::{
    RESTART_DELAY_MS_DEFAULT, SECTOR_SIZE_BYTES_DEFAULT, TRANSACTION_TIMEOUT_MS_DEFAULT,
};
use crate::spec::ScenarioSpec;
use crate::table::TableFormat;
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, FromArgMatches, ValueEnum};
use keel_engine::{CheckpointProtocol, KeyScheme, SinkKind, StateBackend};
use keel_sim::disk::FsModel;
use keel_sim::FaultKind;
use std::collections::BTreeSet;

/// The options given on the command line, as opposed to those left at their defaults, of
/// the whole command it is flattened into (clap ids: field names, e.g. `seed`,
/// `checkpoint_every`). Lets a command reject an option that has no effect where it was
/// given, and compare the options given with the run a plan file carries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Given(BTreeSet<String>);

impl Given {
    /// Whether the option with this clap id was given on the command line.
    pub fn has(&self, id: &str) -> bool {
        self.0.contains(id)
    }

    /// The clap ids of the options given, in order.
    pub fn ids(&self) -> impl Iterator<Item = &str> + '_ {
        self.0.iter().map(String::as_str)
    }
}

impl FromArgMatches for Given {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(Given(
            matches
                .ids()
                .filter(|id| matches.value_source(id.as_str()) == Some(ValueSource::CommandLine))
                .map(|id| id.as_str().to_string())
                .collect(),
        ))
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Given::from_arg_matches(matches)?;
        Ok(())
    }
}

impl Args for Given {
    fn augment_args(command: clap::Command) -> clap::Command {
        command
    }

    fn augment_args_for_update(command: clap::Command) -> clap::Command {
        command
    }
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

    /// Write the report (with --shard, the JSON lines for `keel merge`) to FILE instead of
    /// stdout, atomically: a temp file, fsync, rename; an interrupted keel leaves no file or
    /// a complete one.
    #[arg(long, value_name = "FILE")]
    pub out: Option<String>,
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
        let range = self.range_u64(len as u64);
        range.start as usize..range.end as usize
    }

    /// [`Shard::range`] of `len` items counted in a u64 (in u128 arithmetic: `i * len`
    /// does not overflow).
    pub fn range_u64(&self, len: u64) -> std::ops::Range<u64> {
        let (i, n, len) = (
            u128::from(self.index),
            u128::from(self.count),
            u128::from(len),
        );
        let at = |k: u128| u64::try_from(k * len / n).expect("at most len");
        at(i)..at(i + 1)
    }
}

/// A half-open seed range `a..b`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeedRange {
    pub start: u64,
    pub end: u64,
}

pub(crate) fn parse_seed_range(text: &str) -> Result<SeedRange, String> {
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

/// A part of a sweep's points, `a..b` or `a..` (to the end): what `--points` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PointRange {
    pub start: u64,
    /// None: to the end of the sweep (or of its `--shard`).
    pub end: Option<u64>,
}

pub(crate) fn parse_point_range(text: &str) -> Result<PointRange, String> {
    let (start, end) = text
        .split_once("..")
        .ok_or_else(|| format!("expected a range a..b or a.. (e.g. 1000..2000), got '{text}'"))?;
    let start: u64 = start
        .parse()
        .map_err(|_| format!("'{start}' is not a point number"))?;
    let end = match end {
        "" => None,
        end => Some(
            end.parse::<u64>()
                .map_err(|_| format!("'{end}' is not a point number"))?,
        ),
    };
    if end.is_some_and(|end| start >= end) {
        return Err(format!("the range {text} is empty"));
    }
    Ok(PointRange { start, end })
}

/// Parses a wall-clock budget: a positive whole number with a unit, `ms`, `s`, `m` or `h`
/// (`60s`, `10m`), into milliseconds.
pub(crate) fn parse_duration_ms(text: &str) -> Result<u64, String> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = text.split_at(digits);
    let ms_per_unit: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => {
            return Err(format!(
                "expected a duration such as 60s, 500ms, 10m or 2h, got '{text}'"
            ))
        }
    };
    let number: u64 = number
        .parse()
        .map_err(|_| format!("expected a duration such as 60s, 500ms, 10m or 2h, got '{text}'"))?;
    if number == 0 {
        return Err(format!("'{text}' is no time at all: give a budget above 0"));
    }
    number
        .checked_mul(ms_per_unit)
        .ok_or_else(|| format!("'{text}' is too long a budget"))
}

/// Seeds one `keel explore` may run (bounds memory: one row per seed and sink).
const SEEDS_MAX: u64 = 10_000_000;

/// Parses `--expect`: a comma-separated list of property names.
pub fn parse_expectation(text: &str) -> Result<Expectation, String> {
    Expectation::parse(text)
}

/// The consumer view of the transactional sink to judge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ViewArg {
    /// isolation.level=read_committed: only committed records (promises exactly-once).
    #[value(name = "read_committed")]
    ReadCommitted,
    /// Everything, aborted and open transactions included (promises at-least-once; dirty
    /// reads are a figure, not a failure).
    #[value(name = "read_uncommitted")]
    ReadUncommitted,
}

impl From<ViewArg> for View {
    fn from(view: ViewArg) -> Self {
        match view {
            ViewArg::ReadCommitted => View::ReadCommitted,
            ViewArg::ReadUncommitted => View::ReadUncommitted,
        }
    }
}

/// The view to judge on `sink`: `--view` (transactional sink only), else the sink's default
/// (read_committed for the transactional sink, the file otherwise).
pub fn view_for(sink: SinkKind, view: Option<View>) -> Result<Option<View>, KeelError> {
    match (sink.is_transactional(), view) {
        (true, view) => Ok(Some(view.unwrap_or(View::ReadCommitted))),
        (false, None) => Ok(None),
        (false, Some(_)) => Err(KeelError::usage(format!(
            "--view applies to the transactional sink only; the {sink} sink has one view, its file"
        ))),
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

    /// Length of a sink outage, in simulated milliseconds (only with sink-unavailable in
    /// --faults).
    #[arg(long, value_name = "MS", default_value_t = OUTAGE_MS_DEFAULT)]
    pub outage_ms: u64,
}

/// `--outage-ms` sets the length of the sink-unavailable faults, so it needs them in
/// `--faults`.
pub(crate) fn check_outage_ms(given: &Given, faults: &[FaultArg]) -> Result<(), KeelError> {
    if given.has("outage_ms") && !faults.contains(&FaultArg::SinkUnavailable) {
        return Err(KeelError::usage(
            "--outage-ms is the length of a sink-unavailable fault, and --faults does not include sink-unavailable: drop --outage-ms or add sink-unavailable to --faults",
        ));
    }
    Ok(())
}

/// `--seed` for a command that runs a range of seeds (`--seeds A..B`): each seed of the range
/// is its run's seed, so a single `--seed` has no effect.
pub(crate) fn reject_seed_for_seed_range(
    given: &Given,
    seed: u64,
    command: &str,
) -> Result<(), KeelError> {
    if given.has("seed") {
        return Err(KeelError::usage(format!(
            "--seed has no effect on `keel {command}`: every seed of --seeds A..B is the seed of its own run; use --seeds {seed}..{} to run seed {seed} alone",
            seed.saturating_add(1)
        )));
    }
    Ok(())
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
    ///
    /// A plan saved by `--save-plan` carries the run it came from (scenario or events file,
    /// every knob, the seed, the sink and the view), so `--plan FILE` alone replays it; an
    /// option given beside it must agree with the plan (a different value is an error: edit
    /// the file to change the run). A plan of faults only ({"faults": [...]}) runs with the
    /// options given. --seed, --faults, --max-faults and --outage-ms draw a seed's plan, so
    /// they cannot be given with --plan. `--plan -` reads the plan from stdin (what a
    /// reproduce line does: `echo '<plan>' | keel replay --plan -`).
    #[arg(long, value_name = "FILE.json", conflicts_with_all = ["seed", "faults", "max_faults", "outage_ms"])]
    pub plan: Option<String>,

    /// The consumer view to judge (transactional sink only; default read_committed).
    #[arg(long, value_enum)]
    pub view: Option<ViewArg>,
}

/// Which input and which engine knobs.
#[derive(Debug, Args)]
pub struct ScenarioArgs {
    // Which of the whole command's options were given on the command line (no option of
    // its own). It must stay the first field, and `ScenarioArgs` the first field of every
    // command: clap's derive takes each option out of the matches as it fills a field, so
    // only the first field sees them all (the test `given_sees_every_option` checks it).
    #[command(flatten)]
    pub given: Given,

    /// A shipped scenario (default: ch04, the chapter's stream).
    #[arg(long, value_name = "NAME", conflicts_with = "events")]
    pub scenario: Option<String>,

    /// An events file instead: one JSON object {"ts": <int>, "value": <int>} per line.
    ///
    /// ts and value are integers from -9007199254740991 to 9007199254740991 (±(2^53 - 1)):
    /// window ends and watermarks then never overflow (a window end reaches at most ts + W,
    /// past 2^53 only for a ts within W of the bound, where a JSON reader that parses
    /// numbers as doubles may round it). Blank lines are
    /// skipped; each field appears once; a line is at most 65,536 bytes; a file holds at least
    /// 1 and at most 1,000,000 events. `-` reads the events from standard input.
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

    /// Allowed lateness L (event-time units), as Flink's allowedLateness: a window is
    /// purged once the watermark reaches its end + L, and a later event for it is dropped
    /// and counted (dropped_late). Default: unbounded (a fired window takes late updates
    /// forever, the chapter's semantics).
    #[arg(long, value_name = "L", allow_negative_numbers = true)]
    pub allowed_lateness: Option<i64>,

    /// Event i arrives at i * I milliseconds of simulated time.
    #[arg(long, value_name = "I", default_value_t = 300)]
    pub event_interval_ms: u64,

    /// Simulated time between a crash and the restarted process.
    #[arg(long, value_name = "MS", default_value_t = RESTART_DELAY_MS_DEFAULT)]
    pub restart_delay_ms: u64,

    /// How checkpoints are written and recovered: `safe`, or a classic unsafe variant.
    #[arg(long, value_enum, value_name = "P", default_value_t = ProtocolArg::Safe)]
    pub checkpoint_protocol: ProtocolArg,

    /// What a checkpoint writes: `full` (every window, one file: the chapter's) or
    /// `incremental` (a delta of the windows changed since the last checkpoint on a base,
    /// named by a manifest, compacted into a new base when the deltas outgrow it).
    #[arg(long, value_enum, value_name = "BACKEND", default_value_t = StateBackendArg::Full)]
    pub state_backend: StateBackendArg,

    /// The old name of --state-backend, and `keel job`'s barrier alignment: refused with a
    /// message that says which option the user wants.
    #[arg(long, hide = true, value_name = "MODE", value_parser = refuse_checkpoint_mode)]
    pub checkpoint_mode: Option<String>,

    /// The seed: `keel replay` and `keel shrink` run the fault plan it draws, `keel sweep`
    /// draws from it the crash states it tries where a step has too many to try them all.
    /// `keel run` names it in the command that reproduces the run.
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

    /// The file system whose crash behaviour the simulated disk follows where kernels
    /// disagree: `posix` (every crash state any of them admits), or what `ext4`, `xfs` or
    /// `btrfs` were measured to do (see the user guide's protocol table).
    #[arg(long, value_enum, value_name = "FS", default_value_t = FsModelArg::Posix)]
    pub fs_model: FsModelArg,
}

/// A file-system profile of the crash model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FsModelArg {
    /// The union of the profiles: the most adversarial.
    Posix,
    /// Journal commit at an fsync; zeros in a kept size; a failed fsync keeps its pages.
    Ext4,
    /// As ext4, and a kept size may hold stale bytes.
    Xfs,
    /// An fsync logs its file's names out of order; a failed fsync turns it read-only.
    Btrfs,
}

impl From<FsModelArg> for FsModel {
    fn from(model: FsModelArg) -> Self {
        match model {
            FsModelArg::Posix => FsModel::Posix,
            FsModelArg::Ext4 => FsModel::Ext4,
            FsModelArg::Xfs => FsModel::Xfs,
            FsModelArg::Btrfs => FsModel::Btrfs,
        }
    }
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

/// A checkpoint protocol (see the user guide's protocol table).
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
    /// Recovery trusts the sink as the page cache shows it after a failed fsync.
    TrustPageCacheAfterEio,
    /// Incremental mode only: the manifest names a delta that was never fsynced.
    NoDeltaFsync,
}

/// What a checkpoint writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StateBackendArg {
    /// Every window in one file per checkpoint.
    Full,
    /// Deltas on a base, named by a manifest.
    Incremental,
}

impl From<StateBackendArg> for StateBackend {
    fn from(backend: StateBackendArg) -> Self {
        match backend {
            StateBackendArg::Full => StateBackend::Full,
            StateBackendArg::Incremental => StateBackend::Incremental,
        }
    }
}

/// `--checkpoint-mode` on a command of the one-task engine: `full` and `incremental` are
/// state backends (`--state-backend`); `aligned`, `unaligned` and `at-least-once` align the
/// barriers of a task with several inputs, which only `keel job` has.
fn refuse_checkpoint_mode(text: &str) -> Result<String, String> {
    Err(match text {
        "full" | "incremental" => format!(
            "full and incremental are state backends: use --state-backend {text}"
        ),
        _ => format!(
            "--checkpoint-mode {text} aligns the barriers of a task with several inputs: the chapter's job is one task with one input; run a parallel job with `keel job run --checkpoint-mode {text}`"
        ),
    })
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
            ProtocolArg::TrustPageCacheAfterEio => CheckpointProtocol::TrustPageCacheAfterEio,
            ProtocolArg::NoDeltaFsync => CheckpointProtocol::NoDeltaFsync,
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
    /// The step's disk operation fails with EIO (a failed fsync leaves its data unpersisted:
    /// still read from the page cache, not on disk; on btrfs it turns the disk read-only).
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
    /// After the step the kernel drops its clean pages: what a failed fsync left unpersisted
    /// reads as the disk holds it (applies only after a disk error; not in the default sets).
    PageEviction,
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
            FaultArg::PageEviction => FaultKind::PageEviction,
        }
    }
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

impl From<SinkKind> for SinkArg {
    fn from(sink: SinkKind) -> Self {
        match sink {
            SinkKind::Append => SinkArg::Append,
            SinkKind::Idempotent => SinkArg::Idempotent,
            SinkKind::Transactional => SinkArg::Transactional,
        }
    }
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

pub(crate) fn scenario_spec(args: &ScenarioArgs) -> ScenarioSpec {
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
        allowed_lateness: args.allowed_lateness,
        fs_model: args.fs_model.into(),
        state_backend: args.state_backend.into(),
        events_digest: None,
    }
}

pub(crate) fn jobs(job: &JobArgs) -> usize {
    job.jobs.map_or_else(default_jobs, |n| n as usize)
}

pub(crate) fn table_format(format: TableFormatArg) -> Option<TableFormat> {
    match format {
        TableFormatArg::Table => Some(TableFormat::Table),
        TableFormatArg::Markdown => Some(TableFormat::Markdown),
        TableFormatArg::Csv => Some(TableFormat::Csv),
        TableFormatArg::Json => None,
    }
}

pub(crate) fn dedup_kinds<T: PartialEq + Copy>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_and_point_ranges_parse_or_say_why_not() {
        fn check(text: &str, expected: Result<u64, &str>) {
            match (parse_duration_ms(text), expected) {
                (Ok(ms), Ok(expected)) => assert_eq!(ms, expected, "{text}"),
                (Err(why), Err(part)) => assert!(why.contains(part), "{text}: {why}"),
                (got, expected) => panic!("{text}: {got:?}, expected {expected:?}"),
            }
        }
        check("60s", Ok(60_000));
        check("500ms", Ok(500));
        check("10m", Ok(600_000));
        check("2h", Ok(7_200_000));
        check("0s", Err("no time at all"));
        check("60", Err("expected a duration"));
        check("s", Err("expected a duration"));
        check("1.5s", Err("expected a duration"));
        check("-1s", Err("expected a duration"));
        check("99999999999999999999h", Err("expected a duration"));
        check("9999999999999999h", Err("too long"));
        assert_eq!(
            parse_point_range("10..20"),
            Ok(PointRange {
                start: 10,
                end: Some(20)
            })
        );
        assert_eq!(
            parse_point_range("10.."),
            Ok(PointRange {
                start: 10,
                end: None
            })
        );
        assert!(parse_point_range("20..10").unwrap_err().contains("empty"));
        assert!(parse_point_range("x..")
            .unwrap_err()
            .contains("not a point"));
        assert!(parse_point_range("10")
            .unwrap_err()
            .contains("expected a range"));
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
