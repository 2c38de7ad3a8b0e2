//! `keel job`: a parallel job (sources, keyed window operators, a sink) under a seeded
//! scheduler: `run` one schedule, `sweep` every schedule crossed with every crash point,
//! `explore` seeds.

use super::files::{events_source_name, read_events_source};
use super::job_plan::write_job_plan;
use super::job_teach::{cmd_job_teach, JobTeachArgs};
use super::output::{Output, EXIT_VIOLATION};
use crate::catalogue::Scenario;
use crate::error::KeelError;
use crate::graph::oracle::{judge_spec, sink_records, JobProperty, JobVerdict};
use crate::graph::plan::SavedJobPlan;
use crate::graph::schedules::{enumerate, Enumeration, FaultPoints, STATES_MAX_DEFAULT};
use crate::graph::shrink::shrink;
use crate::graph::tasks::{fault_may_apply, step_tasks, TaskClass};
use crate::graph::visibility::visibility;
use crate::graph::{run, run_recording_crash_states, run_streamed, GraphRun, GraphSpec};
use crate::parallel::{default_jobs, par_map};
use clap::{Args, Subcommand, ValueEnum};
use keel_engine::job::{read_keyed_events, AlignmentMode, JobConfig, JobSinkKind, KeyedEvent};
use keel_sim::disk::FsModel;
use keel_sim::{
    CrashPoint, Fault, FaultKind, FaultPlan, PlannedFault, SchedulePolicy, SeedTree, Subsystem,
};
use num_bigint::BigUint;
use rand_core::RngCore;
use std::fmt::Write as _;
use std::sync::Arc;

#[derive(Debug, Args)]
pub struct JobCommandArgs {
    #[command(subcommand)]
    pub command: JobCommand,
}

#[derive(Debug, Subcommand)]
pub enum JobCommand {
    /// Run the job once under one schedule, optionally with one crash, and judge its sink.
    Run(JobRunArgs),
    /// Every schedule (or N seeded ones) crossed with a crash before and after every step.
    Sweep(JobSweepArgs),
    /// Many seeds, each a schedule and a crash at a step drawn from the seed.
    Explore(JobExploreArgs),
    /// The article's trade-off, computed live: one job, one kill -9, the three checkpoint
    /// modes side by side.
    Teach(JobTeachArgs),
}

#[derive(Debug, Args)]
pub struct JobArgs {
    /// A built-in scenario whose events are split over the sources (`ch04`).
    #[arg(long, value_name = "NAME", conflicts_with = "events")]
    pub scenario: Option<String>,
    /// Keyed events, one JSON object a line: {"ts": .., "value": .., "key": "..",
    /// "partition": ..}; key and partition optional (no key: one key for all; no
    /// partition: event i goes to partition i mod P). `-` reads them from standard input.
    #[arg(long, value_name = "FILE.jsonl")]
    pub events: Option<String>,
    /// P: source partitions. With 1, --parallelism 1 and events without keys the graph chains
    /// into one task, the chapter's engine: the command is then `keel run|sweep|explore`
    /// with the other options (see --disable-chaining).
    #[arg(long, value_name = "P", default_value_t = 2)]
    pub sources: u32,
    /// M: parallel window operators (key k goes to operator fnv1a64(k) mod M).
    #[arg(long, value_name = "M", default_value_t = 2)]
    pub parallelism: u32,
    /// Tumbling window size W (event-time units).
    #[arg(long, value_name = "W", default_value_t = 10)]
    pub window: i64,
    /// Out-of-orderness D: a source's watermark is its max ts - D.
    #[arg(
        long,
        value_name = "D",
        default_value_t = 5,
        allow_negative_numbers = true
    )]
    pub out_of_orderness: i64,
    /// The coordinator triggers a checkpoint this often (simulated ms; every action of a
    /// task takes 1 ms).
    #[arg(long, value_name = "MS", default_value_t = 40)]
    pub checkpoint_interval_ms: u64,
    /// A checkpoint not complete this long after its trigger is declined.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    pub checkpoint_timeout_ms: u64,
    /// The coordinator triggers at most this many checkpoints on its interval, the final
    /// one aside (0: no bound): keeps `sweep --schedules all` small.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub checkpoints_max: u64,
    /// Items a channel holds before its producer waits (backpressure).
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub channel_capacity: u32,
    /// A state TTL: an operator drops the state of a key it has not accessed for longer
    /// than this many simulated ms (processing time, as Flink's StateTtlConfig); what it
    /// drops is reported, and the loss judged.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    pub state_ttl: Option<u64>,
    /// Pause between a crash and the restart of the job, in simulated ms.
    #[arg(long, value_name = "MS", default_value_t = 500)]
    pub restart_delay_ms: u64,
    /// How the scheduler picks among enabled actions.
    #[arg(long, value_enum, default_value_t = ScheduleArg::Random)]
    pub schedule: ScheduleArg,
    /// The seed: the schedule's draws (and explore's crash) come from it.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Run a graph that would chain (one source, one operator, events without keys) as tasks
    /// joined by channels: a source, an operator and the sink (Flink's
    /// `disableOperatorChaining`).
    #[arg(long)]
    pub disable_chaining: bool,
    /// The events of `--events`, once read: a command builds several specs on them, and
    /// standard input (`--events -`) can be read only once.
    #[arg(skip)]
    pub events_read: std::sync::OnceLock<Arc<[KeyedEvent]>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ScheduleArg {
    Random,
    RoundRobin,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    Aligned,
    Unaligned,
    AtLeastOnce,
}

impl From<ModeArg> for AlignmentMode {
    fn from(mode: ModeArg) -> AlignmentMode {
        match mode {
            ModeArg::Aligned => AlignmentMode::Aligned,
            ModeArg::Unaligned => AlignmentMode::Unaligned,
            ModeArg::AtLeastOnce => AlignmentMode::AtLeastOnce,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum JobSinkArg {
    Append,
    Idempotent,
    Transactional,
}

impl From<JobSinkArg> for JobSinkKind {
    fn from(sink: JobSinkArg) -> JobSinkKind {
        match sink {
            JobSinkArg::Append => JobSinkKind::Append,
            JobSinkArg::Idempotent => JobSinkKind::Idempotent,
            JobSinkArg::Transactional => JobSinkKind::Transactional,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum JobFaultArg {
    ProcessCrash,
    PowerLoss,
    /// A task's acknowledgement to the coordinator, or the coordinator's completion
    /// notification to the sink, received at the step, never arrives.
    MessageLost,
    /// What the step puts on a channel reaches its consumer --delay-ms later.
    SlowChannel,
}

/// The faults `keel job sweep` tries at every step where they apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum JobSweepFaultArg {
    ProcessCrash,
    /// Seeded sweeps only: the machine loses power after the step, the disk left in each
    /// of its crash states (up to --power-loss-states-max a step).
    PowerLoss,
    MessageLost,
    SlowChannel,
}

/// Simulated ms a slow channel delays a delivery unless told otherwise.
pub const DELAY_MS_DEFAULT: u64 = 100;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AtArg {
    Before,
    After,
}

#[derive(Debug, Args)]
pub struct JobRunArgs {
    #[command(flatten)]
    pub job: JobArgs,
    /// How a task with several inputs aligns barriers.
    #[arg(long, value_enum, default_value_t = ModeArg::Aligned)]
    pub checkpoint_mode: ModeArg,
    /// The sink.
    #[arg(long, value_enum, default_value_t = JobSinkArg::Transactional)]
    pub sink: JobSinkArg,
    /// One fault at --at-step.
    #[arg(long, value_enum, requires = "at_step")]
    pub fault: Option<JobFaultArg>,
    /// The step of --fault (the trace numbers them: --trace).
    #[arg(long, value_name = "N", requires = "fault")]
    pub at_step: Option<u64>,
    /// Before or after the step's effect [default: after].
    #[arg(long, value_enum, requires = "fault")]
    pub at: Option<AtArg>,
    /// For --fault power-loss: the crash state the disk is left in [default: 0].
    #[arg(long, value_name = "S", requires = "fault")]
    pub crash_state: Option<u64>,
    /// For --fault slow-channel: how much later the delivery is seen [default: 100].
    #[arg(long, value_name = "MS", requires = "fault")]
    pub delay_ms: Option<u64>,
    /// Replay a schedule: the choices, comma-separated, as a sweep prints them (each an
    /// index into the actions enabled then; after the last, round-robin's).
    #[arg(long, value_name = "CHOICES", value_parser = parse_choices)]
    pub replay_schedule: Option<Choices>,
    /// Print every step, crash, restart and recovery decision.
    #[arg(long)]
    pub trace: bool,
    /// Write the run (its events by name and digest, every knob, the seed), the faults that
    /// ran and the schedule that ran to this plan file: `keel replay --plan FILE` alone
    /// replays it, `keel shrink --plan FILE` shrinks it.
    #[arg(long, value_name = "FILE.json")]
    pub save_plan: Option<String>,
    /// Exit 1 unless these hold: recovers, no-loss, no-duplicates, no-wrong,
    /// state-exactly-once, or the shorthands exactly-once and at-least-once.
    #[arg(long, value_name = "PROPERTIES", value_parser = parse_properties)]
    pub expect: Option<Properties>,
}

#[derive(Debug, Args)]
pub struct JobSweepArgs {
    #[command(flatten)]
    pub job: JobArgs,
    /// The checkpoint modes to sweep.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "aligned,unaligned,at-least-once"
    )]
    pub modes: Vec<ModeArg>,
    /// The sinks to sweep.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "transactional"
    )]
    pub sinks: Vec<JobSinkArg>,
    /// `all`: every schedule (small jobs: see --states-max); N: the schedules of seeds
    /// --seed .. --seed+N.
    #[arg(long, value_name = "all|N", default_value = "1", value_parser = parse_schedules)]
    pub schedules: SchedulesArg,
    /// With --schedules all: also every schedule of the recovered job after each crash
    /// (default: the one the seed's scheduler picks).
    #[arg(long)]
    pub all_after_crash: bool,
    /// With --schedules all: stop after this many distinct states (the row is then marked
    /// exhaustive: false).
    #[arg(long, value_name = "N", default_value_t = STATES_MAX_DEFAULT)]
    pub states_max: u64,
    /// The faults to try at every step where they apply: process-crash (before and after
    /// every step), message-lost (every acknowledgement and completion notification),
    /// slow-channel (every delivery into a channel, --delay-ms late).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "process-crash"
    )]
    pub faults: Vec<JobSweepFaultArg>,
    /// How late a slow channel's delivery is seen, in simulated ms.
    #[arg(long, value_name = "MS", default_value_t = DELAY_MS_DEFAULT)]
    pub delay_ms: u64,
    /// With --faults power-loss: the crash states tried at a step, at most (a step with
    /// more has this many, spread evenly over them; the header says so).
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=65_536))]
    pub power_loss_states_max: u64,
    /// Exit 1 unless these hold at every point (default: report only).
    #[arg(long, value_name = "PROPERTIES", value_parser = parse_properties)]
    pub expect: Option<Properties>,
}

#[derive(Debug, Args)]
pub struct JobExploreArgs {
    #[command(flatten)]
    pub job: JobArgs,
    /// How a task with several inputs aligns barriers.
    #[arg(long, value_enum, default_value_t = ModeArg::Aligned)]
    pub checkpoint_mode: ModeArg,
    /// The sinks to explore.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "transactional"
    )]
    pub sinks: Vec<JobSinkArg>,
    /// The seeds, a half-open range A..B.
    #[arg(long, value_name = "A..B", default_value = "0..1000", value_parser = parse_range)]
    pub seeds: SeedSpan,
    /// The faults a seed draws from (one a seed: its kind, then a step where it applies):
    /// process-crash (before or after any step), power-loss (before or after a step, the disk
    /// left in a crash state the seed draws), message-lost (an acknowledgement or a
    /// completion notification), slow-channel (a delivery into a channel, --delay-ms late).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "process-crash"
    )]
    pub faults: Vec<JobSweepFaultArg>,
    /// How late a slow channel's delivery is seen, in simulated ms.
    #[arg(long, value_name = "MS", default_value_t = DELAY_MS_DEFAULT)]
    pub delay_ms: u64,
    /// Threads (independent runs only; the report is the same for any N).
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Exit 1 unless these hold for every seed (default: report only).
    #[arg(long, value_name = "PROPERTIES", value_parser = parse_properties)]
    pub expect: Option<Properties>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choices(pub Vec<u32>);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Properties(pub Vec<JobProperty>);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedulesArg {
    All,
    Seeds(u64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeedSpan {
    pub start: u64,
    pub end: u64,
}

fn parse_choices(text: &str) -> Result<Choices, String> {
    if text.trim().is_empty() {
        return Ok(Choices(Vec::new()));
    }
    text.split(',')
        .map(|c| {
            c.trim()
                .parse::<u32>()
                .map_err(|_| format!("{c:?} is not a choice (a small non-negative integer)"))
        })
        .collect::<Result<Vec<u32>, String>>()
        .map(Choices)
}

fn parse_properties(text: &str) -> Result<Properties, String> {
    JobProperty::parse_list(text).map(Properties)
}

fn parse_schedules(text: &str) -> Result<SchedulesArg, String> {
    if text == "all" {
        return Ok(SchedulesArg::All);
    }
    match text.parse::<u64>() {
        Ok(n) if (1..=1_000_000).contains(&n) => Ok(SchedulesArg::Seeds(n)),
        _ => Err(format!(
            "expected `all` or a count from 1 to 1000000, got {text:?}"
        )),
    }
}

fn parse_range(text: &str) -> Result<SeedSpan, String> {
    let (a, b) = text
        .split_once("..")
        .ok_or_else(|| format!("expected A..B, got {text:?}"))?;
    let start: u64 = a.parse().map_err(|_| format!("{a:?} is not a seed"))?;
    let end: u64 = b.parse().map_err(|_| format!("{b:?} is not a seed"))?;
    if start >= end {
        return Err(format!("the range {text} is empty"));
    }
    Ok(SeedSpan { start, end })
}

pub fn cmd_job(args: &JobCommandArgs) -> Result<Output, KeelError> {
    match &args.command {
        JobCommand::Run(run_args) => cmd_job_run(run_args),
        JobCommand::Sweep(sweep_args) => cmd_job_sweep(sweep_args),
        JobCommand::Explore(explore_args) => cmd_job_explore(explore_args),
        JobCommand::Teach(teach_args) => cmd_job_teach(teach_args),
    }
}

/// The job's events and the spec every command starts from.
pub(super) fn spec_of(
    job: &JobArgs,
    mode: AlignmentMode,
    sink: JobSinkKind,
) -> Result<GraphSpec, KeelError> {
    let config = JobConfig {
        sources: job.sources,
        parallelism: job.parallelism,
        window_size: job.window,
        out_of_orderness: job.out_of_orderness,
        mode,
        sink,
        checkpoint_interval_ms: job.checkpoint_interval_ms,
        checkpoint_timeout_ms: job.checkpoint_timeout_ms,
        channel_capacity: job.channel_capacity,
        action_ms: 1,
        checkpoints_max: job.checkpoints_max,
        state_ttl_ms: job.state_ttl,
    };
    config.validate().map_err(KeelError::usage)?;
    let events: Arc<[KeyedEvent]> = match (&job.events, job.events_read.get()) {
        (Some(_), Some(read)) => read.clone(),
        (Some(path), None) => {
            let events = read_events_source(path, |reader| read_keyed_events(reader, job.sources))?;
            if events.is_empty() {
                return Err(KeelError::usage(format!(
                    "no events in {}",
                    events_source_name(path)
                )));
            }
            job.events_read.get_or_init(|| events.into()).clone()
        }
        (None, _) => {
            let name = job.scenario.as_deref().unwrap_or("ch04");
            KeyedEvent::from_events(&Scenario::by_name(name)?.events(), job.sources).into()
        }
    };
    Ok(GraphSpec {
        events,
        config,
        plan: FaultPlan::none(),
        seed: job.seed,
        schedule: match job.schedule {
            ScheduleArg::Random => SchedulePolicy::Random,
            ScheduleArg::RoundRobin => SchedulePolicy::RoundRobin,
        },
        script: Vec::new(),
        round_robin_after_script: false,
        restart_delay_ms: job.restart_delay_ms,
        fs_model: FsModel::Posix,
    })
}

pub(super) fn job_line(spec: &GraphSpec, events: usize) -> String {
    assert_eq!(events, spec.events.len());
    spec.summary_line()
}

/// The first lines of a run's report: the job, its checkpoint mode and its sink.
pub(super) fn run_header(spec: &GraphSpec) -> String {
    format!(
        "{}\ncheckpoint_mode={} sink={}\n",
        spec.summary_line(),
        spec.config.mode,
        spec.config.sink
    )
}

/// The `keel job run` command line that replays `spec` with `fault` and `schedule`.
fn reproduce_line(
    job: &JobArgs,
    spec: &GraphSpec,
    fault: Option<PlannedFault>,
    schedule: Option<&[u32]>,
) -> String {
    let mut line = String::from("keel job run");
    match (&job.events, &job.scenario) {
        (Some(path), _) => write!(line, " --events {path}").unwrap(),
        (None, Some(name)) => write!(line, " --scenario {name}").unwrap(),
        (None, None) => {}
    }
    let c = &spec.config;
    write!(
        line,
        " --sources {} --parallelism {} --window {} --out-of-orderness {} --checkpoint-interval-ms {} --channel-capacity {} --checkpoint-mode {} --sink {} --seed {}",
        c.sources, c.parallelism, c.window_size, c.out_of_orderness, c.checkpoint_interval_ms, c.channel_capacity, c.mode, c.sink, spec.seed
    )
    .unwrap();
    if c.checkpoints_max != 0 {
        write!(line, " --checkpoints-max {}", c.checkpoints_max).unwrap();
    }
    if c.checkpoint_timeout_ms != 10_000 {
        write!(line, " --checkpoint-timeout-ms {}", c.checkpoint_timeout_ms).unwrap();
    }
    if let Some(ttl_ms) = c.state_ttl_ms {
        write!(line, " --state-ttl {ttl_ms}").unwrap();
    }
    if spec.restart_delay_ms != 500 {
        write!(line, " --restart-delay-ms {}", spec.restart_delay_ms).unwrap();
    }
    if spec.schedule == SchedulePolicy::RoundRobin {
        line.push_str(" --schedule round-robin");
    }
    if let Some(planned) = fault {
        match planned.fault {
            Fault::ProcessCrash { at } => write!(
                line,
                " --fault process-crash --at-step {} --at {at}",
                planned.step
            )
            .unwrap(),
            Fault::PowerLoss { at, state } => write!(
                line,
                " --fault power-loss --at-step {} --at {at} --crash-state {state}",
                planned.step
            )
            .unwrap(),
            Fault::MessageLost => {
                write!(line, " --fault message-lost --at-step {}", planned.step).unwrap()
            }
            Fault::SlowDelivery { delay_ms } => write!(
                line,
                " --fault slow-channel --at-step {} --delay-ms {delay_ms}",
                planned.step
            )
            .unwrap(),
            _ => {}
        }
    }
    match schedule {
        // Round-robin from the first choice on: no choice departs from it.
        Some([]) if spec.schedule != SchedulePolicy::RoundRobin => {
            line.push_str(" --schedule round-robin");
        }
        Some([]) | None => {}
        Some(schedule) => {
            let choices: Vec<String> = schedule.iter().map(u32::to_string).collect();
            write!(line, " --replay-schedule {}", choices.join(",")).unwrap();
        }
    }
    line
}

fn verdict_text(verdict: &JobVerdict) -> String {
    format!(
        "records={} lost={} duplicates={} wrong={} over_counted={} under_counted={}",
        verdict.records,
        verdict.lost,
        verdict.duplicates,
        verdict.wrong,
        verdict.over_counted,
        verdict.under_counted
    )
}

fn properties_text(verdict: &JobVerdict) -> String {
    let parts: Vec<String> = JobProperty::ALL
        .iter()
        .map(|p| format!("{p} {}", if verdict.holds(*p) { "holds" } else { "FAILED" }))
        .collect();
    parts.join(", ")
}

fn cmd_job_run(args: &JobRunArgs) -> Result<Output, KeelError> {
    let mut spec = spec_of(&args.job, args.checkpoint_mode.into(), args.sink.into())?;
    let fault = match (args.fault, args.at_step) {
        (Some(kind), Some(step)) => {
            let at = match args.at.unwrap_or(AtArg::After) {
                AtArg::Before => CrashPoint::Before,
                AtArg::After => CrashPoint::After,
            };
            if kind != JobFaultArg::PowerLoss && args.crash_state.is_some() {
                return Err(KeelError::usage(
                    "--crash-state is only for --fault power-loss",
                ));
            }
            if kind != JobFaultArg::SlowChannel && args.delay_ms.is_some() {
                return Err(KeelError::usage(
                    "--delay-ms is only for --fault slow-channel",
                ));
            }
            let crash = matches!(kind, JobFaultArg::ProcessCrash | JobFaultArg::PowerLoss);
            if !crash && args.at.is_some() {
                return Err(KeelError::usage(
                    "--at is only for --fault process-crash and power-loss",
                ));
            }
            let fault = match kind {
                JobFaultArg::ProcessCrash => Fault::ProcessCrash { at },
                JobFaultArg::PowerLoss => Fault::PowerLoss {
                    at,
                    state: args.crash_state.unwrap_or(0),
                },
                JobFaultArg::MessageLost => Fault::MessageLost,
                JobFaultArg::SlowChannel => Fault::SlowDelivery {
                    delay_ms: args.delay_ms.unwrap_or(DELAY_MS_DEFAULT),
                },
            };
            Some(PlannedFault { step, fault })
        }
        _ => None,
    };
    spec.plan = FaultPlan::new(fault).map_err(|e| KeelError::usage(e.to_string()))?;
    if let Some(choices) = &args.replay_schedule {
        spec.script = choices.0.clone();
        spec.round_robin_after_script = true;
    }
    let ran = run(&spec);
    let verdict = judge_spec(&spec, &ran);
    let mut out = run_header(&spec);
    if let Some(path) = &args.save_plan {
        let (scenario, events) = match &args.job.events {
            Some(file) => (None, Some(file.clone())),
            None => (
                Some(
                    args.job
                        .scenario
                        .clone()
                        .unwrap_or_else(|| "ch04".to_string()),
                ),
                None,
            ),
        };
        let saved = SavedJobPlan::of(
            &spec,
            scenario,
            events,
            &ran.world.plan_that_ran(),
            &ran.schedule,
        );
        write_job_plan(path, &saved)?;
    }
    if args.trace {
        for line in ran.world.trace().text_lines() {
            writeln!(out, "  {line}").unwrap();
        }
    }
    for crash in &ran.crashes {
        writeln!(out, "crash: {crash}").unwrap();
    }
    let job_fault = |f: &PlannedFault| FaultKind::JOB.contains(&f.fault.kind());
    for planned in ran.world.faults_injected().iter().filter(|f| job_fault(f)) {
        writeln!(out, "fault: {} at step {}", planned.fault, planned.step).unwrap();
    }
    if let Some(planned) = fault.filter(|f| job_fault(f) && ran.world.faults_injected().is_empty())
    {
        writeln!(
            out,
            "fault: {} does not apply at step {} (it ran without it)",
            planned.fault, planned.step
        )
        .unwrap();
    }
    report_run(&mut out, &spec, &ran, &verdict);
    writeln!(
        out,
        "reproduce: {}",
        reproduce_line(
            &args.job,
            &spec,
            fault,
            args.replay_schedule.as_ref().map(|c| c.0.as_slice())
        )
    )
    .unwrap();
    let broken = args
        .expect
        .as_ref()
        .map(|e| verdict.broken(&e.0))
        .unwrap_or_default();
    if !broken.is_empty() {
        let names: Vec<&str> = broken.iter().map(|p| p.name()).collect();
        writeln!(out, "=> expected {} broken", names.join(", ")).unwrap();
    }
    Ok(Output {
        stdout: out,
        exit_code: if broken.is_empty() { 0 } else { EXIT_VIOLATION },
    })
}

pub(super) fn report_run(out: &mut String, spec: &GraphSpec, ran: &GraphRun, verdict: &JobVerdict) {
    let totals = ran.totals();
    writeln!(
        out,
        "outcome: {} after {} restart(s); restored checkpoint {}",
        ran.outcome.describe(),
        ran.crashes.len(),
        totals
            .restored
            .map_or("none".to_string(), |c| c.to_string())
    )
    .unwrap();
    writeln!(
        out,
        "checkpoints: completed={} declined={} largest_bytes={} in_flight_items={} alignment_ms={}",
        totals.checkpoints_completed,
        totals.checkpoints_declined,
        totals.checkpoint_bytes_max,
        totals.in_flight_items,
        totals.alignment_ms
    )
    .unwrap();
    writeln!(
        out,
        "sink: written={} skipped={} committed_transactions={}",
        totals.sink.written, totals.sink.skipped, totals.sink.committed
    )
    .unwrap();
    let (records, _) = sink_records(ran, spec.config.sink);
    writeln!(out, "sink shows ({} records):", records.len()).unwrap();
    for record in records.iter().take(20) {
        writeln!(out, "  {}", record.to_json_line()).unwrap();
    }
    if records.len() > 20 {
        writeln!(out, "  ... {} more", records.len() - 20).unwrap();
    }
    if let Some(ttl_ms) = spec.config.state_ttl_ms {
        let ttl = totals.ttl;
        writeln!(
            out,
            "state TTL {ttl_ms} ms: expirations={} dropped_windows={} (not yet fired: {}) late_events_after_expiry={}",
            ttl.expirations, ttl.dropped_windows, ttl.dropped_unfired, ttl.late_after_expiry
        )
        .unwrap();
    }
    if let Some(seen) = visibility(ran) {
        writeln!(
            out,
            "visibility: records={} delay_ms_max={} visible_late={} (after a restart)",
            seen.records, seen.delay_ms_max, seen.visible_late
        )
        .unwrap();
    }
    writeln!(out, "tally: {}", verdict_text(verdict)).unwrap();
    writeln!(out, "properties: {}", properties_text(verdict)).unwrap();
    writeln!(
        out,
        "fingerprint={} steps={} choices={}",
        ran.fingerprint(),
        ran.world.steps_taken(),
        ran.schedule.len()
    )
    .unwrap();
}

/// What a row's first failing point broke, its verdict, its crash and (from an
/// enumeration) its schedule.
type FirstFailure = (
    Vec<JobProperty>,
    JobVerdict,
    Option<PlannedFault>,
    Option<Vec<u32>>,
);

/// One row of a job sweep.
struct SweepRow {
    mode: AlignmentMode,
    sink: JobSinkKind,
    points: BigUint,
    schedules: BigUint,
    states: u64,
    outcomes: usize,
    failing_points: BigUint,
    exhaustive: bool,
    first_failure: Option<FirstFailure>,
    /// The seed whose schedule the first failure ran.
    failure_seed: u64,
    /// The faulted points by fault kind and task.
    by_fault: Vec<FaultPoints>,
    /// Whether some step had more power-loss crash states than were tried.
    power_loss_sampled: bool,
}

/// The faults a sweep tries at each step, as `--faults` and `--delay-ms` say.
fn sweep_faults(args: &JobSweepArgs) -> Vec<Fault> {
    faults_of(&args.faults, args.delay_ms)
}

/// The faults of the kinds given (deduplicated, in kind order): a process crash before and
/// after the step, a lost message, a delivery `delay_ms` late.
fn faults_of(kinds: &[JobSweepFaultArg], delay_ms: u64) -> Vec<Fault> {
    let mut kinds = kinds.to_vec();
    kinds.sort();
    kinds.dedup();
    let mut faults = Vec::new();
    for kind in kinds {
        match kind {
            JobSweepFaultArg::ProcessCrash => faults.extend(
                [CrashPoint::Before, CrashPoint::After].map(|at| Fault::ProcessCrash { at }),
            ),
            JobSweepFaultArg::PowerLoss => faults.push(Fault::PowerLoss {
                at: CrashPoint::After,
                state: 0,
            }),
            JobSweepFaultArg::MessageLost => faults.push(Fault::MessageLost),
            JobSweepFaultArg::SlowChannel => faults.push(Fault::SlowDelivery { delay_ms }),
        }
    }
    faults
}

/// The faults of a sweep as its header says them.
fn faults_text(faults: &[Fault]) -> String {
    let mut parts = Vec::new();
    for fault in faults {
        match fault {
            Fault::ProcessCrash {
                at: CrashPoint::Before,
            } => parts.push("process-crash before and after every step".to_string()),
            Fault::MessageLost => parts.push(
                "message-lost at every acknowledgement and completion notification".to_string(),
            ),
            Fault::PowerLoss { .. } => {
                parts.push("power-loss after every step, in each of its crash states".to_string())
            }
            Fault::SlowDelivery { delay_ms } => parts.push(format!(
                "slow-channel ({delay_ms} ms) at every delivery into a channel"
            )),
            _ => {}
        }
    }
    parts.join(", ")
}

fn cmd_job_sweep(args: &JobSweepArgs) -> Result<Output, KeelError> {
    let mut rows = Vec::new();
    let mut out = String::new();
    let faults = sweep_faults(args);
    let faults_said = faults_text(&faults);
    let power_loss = faults.iter().any(|f| f.kind() == FaultKind::PowerLoss);
    if power_loss && args.schedules == SchedulesArg::All {
        return Err(KeelError::usage(
            "--faults power-loss is swept on seeded schedules (--schedules N): --schedules all enumerates process crashes and the job's own faults",
        ));
    }
    let states_max = args.power_loss_states_max;
    for mode in &args.modes {
        for sink in &args.sinks {
            let spec = spec_of(&args.job, (*mode).into(), (*sink).into())?;
            if rows.is_empty() {
                writeln!(out, "{}", job_line(&spec, spec.events.len())).unwrap();
                match args.schedules {
                    SchedulesArg::All => writeln!(
                    out,
                    "schedules=all {} faults={faults_said}",
                    if args.all_after_crash { "(before and after the crash)" } else { "(every schedule up to the crash; after it, the seed's)" }
                )
                .unwrap(),
                    SchedulesArg::Seeds(n) => writeln!(out, "schedules={n} seeded (seeds {}..{}), sampled, not every interleaving; faults={faults_said}", spec.seed, spec.seed + n).unwrap(),
                }
            }
            let expected = JobProperty::promised_by(spec.config.sink);
            rows.push(match args.schedules {
                SchedulesArg::All => sweep_all(
                    &spec,
                    &faults,
                    args.states_max,
                    args.all_after_crash,
                    expected,
                ),
                SchedulesArg::Seeds(n) => sweep_seeded(&spec, &faults, n, states_max, expected),
            });
        }
    }
    writeln!(
        out,
        "{:<14} {:<14} {:>28} {:>16} {:>9} {:>8} {:>28} {:<10}",
        "mode", "sink", "points", "schedules", "states", "outcomes", "failing", "exhaustive"
    )
    .unwrap();
    for row in &rows {
        writeln!(
            out,
            "{:<14} {:<14} {:>28} {:>16} {:>9} {:>8} {:>28} {:<10}",
            row.mode.name(),
            row.sink.name(),
            row.points,
            row.schedules,
            row.states,
            row.outcomes,
            row.failing_points,
            row.exhaustive
        )
        .unwrap();
    }
    writeln!(
        out,
        "points by fault and by the task whose step it was (a crash at a coordinator step restarts the whole job from the newest completed checkpoint: JobManager failover):"
    )
    .unwrap();
    for row in &rows {
        for kind in [
            FaultKind::ProcessCrash,
            FaultKind::PowerLoss,
            FaultKind::MessageLost,
            FaultKind::SlowChannel,
        ] {
            let cells: Vec<&FaultPoints> = row.by_fault.iter().filter(|f| f.kind == kind).collect();
            if cells.is_empty() {
                continue;
            }
            let parts: Vec<String> = cells
                .iter()
                .map(|f| {
                    let mut part = format!("{} {} ({} outcomes", f.task, f.points, f.outcomes);
                    if f.failing != BigUint::ZERO {
                        write!(part, ", {} failing", f.failing).unwrap();
                    }
                    part.push(')');
                    part
                })
                .collect();
            let total: BigUint = cells.iter().map(|f| &f.points).sum();
            let sampled = if kind == FaultKind::PowerLoss && row.power_loss_sampled {
                format!(
                    " (sampled: at most {states_max} crash states a step, some steps have more)"
                )
            } else {
                String::new()
            };
            writeln!(
                out,
                "  {} {} {kind}: {total} points{sampled}: {}",
                row.mode,
                row.sink,
                parts.join(", ")
            )
            .unwrap();
        }
    }
    let mut violated = false;
    for row in &rows {
        let promised: Vec<&str> = JobProperty::promised_by(row.sink)
            .iter()
            .map(|p| p.name())
            .collect();
        match &row.first_failure {
            None => writeln!(
                out,
                "{} {}: {} hold at every point{}",
                row.mode,
                row.sink,
                promised.join(", "),
                if row.exhaustive {
                    ""
                } else {
                    " run (not every point: see exhaustive)"
                }
            )
            .unwrap(),
            Some((broken, verdict, fault, schedule)) => {
                let names: Vec<&str> = broken.iter().map(|p| p.name()).collect();
                writeln!(
                    out,
                    "{} {}: {} FAILED at {} points; first: {}",
                    row.mode,
                    row.sink,
                    names.join(", "),
                    row.failing_points,
                    verdict_text(verdict)
                )
                .unwrap();
                let spec = GraphSpec {
                    seed: row.failure_seed,
                    ..spec_of(&args.job, row.mode, row.sink)?
                };
                writeln!(
                    out,
                    "  reproduce: {}",
                    reproduce_line(&args.job, &spec, *fault, schedule.as_deref())
                )
                .unwrap();
                let point = GraphSpec {
                    plan: FaultPlan::new(*fault).expect("one fault"),
                    script: schedule.clone().unwrap_or_default(),
                    ..spec.clone()
                };
                write_shrunk(
                    &mut out,
                    &args.job,
                    &point,
                    JobProperty::promised_by(row.sink),
                );
            }
        }
        if let (Some(expect), Some((_, verdict, _, _))) = (&args.expect, &row.first_failure) {
            violated |= !verdict.broken(&expect.0).is_empty();
        }
    }
    Ok(Output {
        stdout: out,
        exit_code: if violated { EXIT_VIOLATION } else { 0 },
    })
}

fn sweep_all(
    spec: &GraphSpec,
    faults: &[Fault],
    states_max: u64,
    after_crash_all: bool,
    expected: &[JobProperty],
) -> SweepRow {
    let enumeration = Enumeration {
        spec: spec.clone(),
        crashes: faults.iter().any(|f| f.kind() == FaultKind::ProcessCrash),
        job_faults: faults
            .iter()
            .copied()
            .filter(|f| f.kind() != FaultKind::ProcessCrash)
            .collect(),
        reduce: true,
        after_crash_all,
        states_max,
    };
    // The enumeration recurses once per step: a run of thousands of steps needs more stack
    // than a main thread has.
    let found = std::thread::Builder::new()
        .stack_size(1 << 30)
        .spawn(move || enumerate(&enumeration))
        .expect("a thread")
        .join()
        .expect("the enumeration does not panic");
    let failing = found.failing(expected);
    let failing_points = failing.iter().map(|(o, _)| o.points.clone()).sum();
    let by_fault = found.fault_points(expected);
    let first_failure = failing.first().map(|(o, broken)| {
        (
            broken.clone(),
            o.verdict.clone(),
            o.example_crash,
            Some(o.example_schedule.clone()),
        )
    });
    SweepRow {
        mode: spec.config.mode,
        sink: spec.config.sink,
        points: found.points,
        schedules: found.fault_free_points,
        states: found.states,
        outcomes: found.outcomes.len(),
        failing_points,
        exhaustive: found.exhaustive,
        first_failure,
        failure_seed: spec.seed,
        by_fault,
        power_loss_sampled: false,
    }
}

fn sweep_seeded(
    spec: &GraphSpec,
    faults: &[Fault],
    schedules: u64,
    power_loss_states_max: u64,
    expected: &[JobProperty],
) -> SweepRow {
    let mut row = SweepRow {
        mode: spec.config.mode,
        sink: spec.config.sink,
        points: BigUint::ZERO,
        schedules: BigUint::from(schedules),
        states: 0,
        outcomes: 0,
        failing_points: BigUint::ZERO,
        exhaustive: false,
        first_failure: None,
        failure_seed: spec.seed,
        by_fault: Vec::new(),
        power_loss_sampled: false,
    };
    let mut outcomes = std::collections::BTreeSet::new();
    // (kind, task) -> (points, outcomes, failing points)
    let mut by_fault: std::collections::BTreeMap<
        (FaultKind, TaskClass),
        (u64, std::collections::BTreeSet<String>, u64),
    > = std::collections::BTreeMap::new();
    for seed in spec.seed..spec.seed + schedules {
        let base = GraphSpec {
            seed,
            ..spec.clone()
        };
        // Counting every step's crash states costs a pass over the disk per step: only a
        // sweep of power losses reads them.
        let fault_free = if faults.iter().any(|f| f.kind() == FaultKind::PowerLoss) {
            run_recording_crash_states(&base)
        } else {
            run(&base)
        };
        let steps = step_tasks(fault_free.world.trace().lines());
        let crash_states = fault_free.world.crash_state_counts();
        let mut points: Vec<Option<(PlannedFault, TaskClass)>> = vec![None];
        for (step, (op, task)) in steps.iter().enumerate() {
            for fault in faults {
                if !fault_may_apply(fault.kind(), op) {
                    continue;
                }
                let states = match fault {
                    Fault::PowerLoss { at, .. } => {
                        let count = crash_states.get(step).copied().flatten();
                        let (tried, all) = power_loss_states(count, power_loss_states_max);
                        row.power_loss_sampled |= !all;
                        tried
                            .into_iter()
                            .map(|state| Fault::PowerLoss { at: *at, state })
                            .collect()
                    }
                    _ => vec![*fault],
                };
                for fault in states {
                    let planned = PlannedFault {
                        step: step as u64,
                        fault,
                    };
                    points.push(Some((planned, *task)));
                }
            }
        }
        let judged = par_map(
            &points,
            default_jobs(),
            |point| {
                let point = GraphSpec {
                    plan: FaultPlan::new(point.map(|(f, _)| f)).expect("one fault"),
                    ..base.clone()
                };
                let ran = run(&point);
                let applied = point.plan.is_empty() || !ran.world.faults_injected().is_empty();
                let verdict = judge_spec(&point, &ran);
                let (records, _) = sink_records(&ran, point.config.sink);
                let shown: Vec<String> = records.iter().map(|r| r.to_json_line()).collect();
                (applied, verdict, shown.join("\n"))
            },
            &|_| {},
        );
        for (point, (applied, verdict, shown)) in points.iter().zip(judged) {
            if !applied {
                continue; // The fault does not apply at its step: no point.
            }
            row.points += 1u8;
            let broken = verdict.broken(expected);
            let outcome = format!("{verdict:?}\n{shown}");
            outcomes.insert(outcome.clone());
            if let Some((planned, task)) = point {
                let cell = by_fault.entry((planned.fault.kind(), *task)).or_default();
                cell.0 += 1;
                cell.1.insert(outcome);
                cell.2 += u64::from(!broken.is_empty());
            }
            if !broken.is_empty() {
                row.failing_points += 1u8;
                if row.first_failure.is_none() {
                    row.first_failure = Some((broken, verdict, point.map(|(f, _)| f), None));
                    row.failure_seed = seed;
                }
            }
        }
    }
    row.outcomes = outcomes.len();
    row.by_fault = by_fault
        .into_iter()
        .map(|((kind, task), (points, outcomes, failing))| FaultPoints {
            kind,
            task,
            points: BigUint::from(points),
            outcomes: outcomes.len(),
            failing: BigUint::from(failing),
        })
        .collect();
    row
}

fn cmd_job_explore(args: &JobExploreArgs) -> Result<Output, KeelError> {
    let seeds: Vec<u64> = (args.seeds.start..args.seeds.end).collect();
    let jobs = args.jobs.unwrap_or_else(default_jobs);
    let mut out = String::new();
    let mut violated = false;
    let faults = faults_of(&args.faults, args.delay_ms);
    for (index, sink) in args.sinks.iter().enumerate() {
        let spec = spec_of(&args.job, args.checkpoint_mode.into(), (*sink).into())?;
        if index == 0 {
            writeln!(out, "{}", job_line(&spec, spec.events.len())).unwrap();
            let drawn = if crashes_only(&faults) {
                "one process crash".to_string()
            } else {
                let kinds: Vec<&str> = faults.iter().map(|f| f.kind().name()).collect();
                let mut kinds = kinds;
                kinds.dedup();
                format!("one fault of {}", kinds.join(", "))
            };
            writeln!(out, "checkpoint_mode={} seeds={}..{}: each seed a schedule and {drawn} at a step drawn from it", spec.config.mode, args.seeds.start, args.seeds.end).unwrap();
        }
        let expected: Vec<JobProperty> = args.expect.as_ref().map_or_else(
            || JobProperty::promised_by(spec.config.sink).to_vec(),
            |e| e.0.clone(),
        );
        let results = par_map(
            &seeds,
            jobs,
            |seed| explore_seed(&spec, *seed, &faults, &expected),
            &|_| {},
        );
        let failing: Vec<&SeedResult> = results.iter().filter(|r| !r.2.is_empty()).collect();
        let mut fingerprint = keel_sim::FingerprintBuilder::default();
        // Every seed's fault, verdict and run fingerprint: two reports share a fingerprint
        // only if every run did the same thing to the same data.
        for (seed, fault, _, verdict, run) in &results {
            writeln!(fingerprint, "{seed}:{fault:?}:{run}:{verdict:?}").unwrap();
        }
        writeln!(
            out,
            "{sink:?}: seeds={} failing={} report_fingerprint={}",
            results.len(),
            failing.len(),
            fingerprint.finish()
        )
        .unwrap();
        if let Some((seed, fault, broken, verdict, _)) = failing.first() {
            let names: Vec<&str> = broken.iter().map(|p| p.name()).collect();
            writeln!(
                out,
                "  first failing seed {seed}: {} broken; {}",
                names.join(", "),
                verdict_text(verdict)
            )
            .unwrap();
            let seed_spec = GraphSpec {
                seed: *seed,
                ..spec.clone()
            };
            writeln!(
                out,
                "  reproduce: {}",
                reproduce_line(&args.job, &seed_spec, *fault, None)
            )
            .unwrap();
            let point = GraphSpec {
                plan: FaultPlan::new(*fault).expect("one fault"),
                ..seed_spec.clone()
            };
            write_shrunk(&mut out, &args.job, &point, &expected);
            violated |= args.expect.is_some();
        }
    }
    Ok(Output {
        stdout: out,
        exit_code: if violated { EXIT_VIOLATION } else { 0 },
    })
}

/// Shrinks a failing point and prints it with the line that replays it.
fn write_shrunk(out: &mut String, job: &JobArgs, point: &GraphSpec, expected: &[JobProperty]) {
    let Some(shrunk) = shrink(point, expected) else {
        return;
    };
    let names: Vec<&str> = shrunk.broken.iter().map(|p| p.name()).collect();
    writeln!(
        out,
        "  shrunk ({} runs): {} broken with one crash; the schedule departs from round-robin at {} of {} choices",
        shrunk.runs,
        names.join(", "),
        shrunk.departures,
        shrunk.schedule.len()
    )
    .unwrap();
    writeln!(
        out,
        "  reproduce shrunk: {}",
        reproduce_line(job, point, shrunk.fault, Some(&shrunk.schedule))
    )
    .unwrap();
}

/// A seed, its crash, the properties it broke, its verdict.
/// One seed of `keel job explore`: its seed, the fault as it ran, the properties it broke,
/// its verdict and its run's fingerprint.
type SeedResult = (
    u64,
    Option<PlannedFault>,
    Vec<JobProperty>,
    JobVerdict,
    keel_sim::Fingerprint,
);

/// The crash states a sweep tries at a step with `count` of them (None: more than a u64
/// counts): every one up to `states_max`, else `states_max` of them spread evenly from the
/// first; and whether that is all of them.
fn power_loss_states(count: Option<u64>, states_max: u64) -> (Vec<u64>, bool) {
    assert!(states_max >= 1);
    match count {
        Some(count) if count <= states_max => ((0..count).collect(), true),
        Some(count) => (
            (0..states_max)
                .map(|i| (u128::from(i) * u128::from(count) / u128::from(states_max)) as u64)
                .collect(),
            false,
        ),
        // Past u64: the first states_max, honestly marked sampled.
        None => ((0..states_max).collect(), false),
    }
}

/// Whether `faults` are the process crashes alone (before and after a step): explore's
/// default, whose draws are the same as before other kinds existed.
fn crashes_only(faults: &[Fault]) -> bool {
    faults.iter().all(|f| f.kind() == FaultKind::ProcessCrash)
}

/// One seed: its schedule's fault-free run, then one fault drawn from the seed's plan
/// stream, at a step where it applies, and the run with it; its verdict. With process
/// crashes alone: a step of the fault-free run, then before or after its effect. With other
/// kinds: first the fault (uniformly among `faults`), then a step where it may apply (a
/// seed whose schedule has none runs fault-free).
fn explore_seed(
    spec: &GraphSpec,
    seed: u64,
    faults: &[Fault],
    expected: &[JobProperty],
) -> SeedResult {
    let base = GraphSpec {
        seed,
        ..spec.clone()
    };
    let mut draws = SeedTree::new(seed).stream(Subsystem::Plan);
    let fault = if crashes_only(faults) {
        let steps = run_streamed(&base).world.steps_taken();
        let step = draws.next_u64() % steps.max(1);
        let at = if draws.next_u64() % 2 == 0 {
            CrashPoint::Before
        } else {
            CrashPoint::After
        };
        Some(PlannedFault {
            step,
            fault: Fault::ProcessCrash { at },
        })
    } else {
        let fault = faults[(draws.next_u64() % faults.len() as u64) as usize];
        let fault_free = run(&base);
        let steps = step_tasks(fault_free.world.trace().lines());
        let applicable: Vec<u64> = (0..steps.len() as u64)
            .filter(|&step| fault_may_apply(fault.kind(), steps[step as usize].0))
            .collect();
        (!applicable.is_empty()).then(|| {
            let step = applicable[(draws.next_u64() % applicable.len() as u64) as usize];
            // A power loss draws its side of the step and its crash state, after the draws
            // every kind makes (so the other kinds' seeds are what they were): any u64 names
            // a state, the world wrapping it by the step's count.
            let fault = match fault {
                Fault::PowerLoss { .. } => Fault::PowerLoss {
                    at: if draws.next_u64() % 2 == 0 {
                        CrashPoint::Before
                    } else {
                        CrashPoint::After
                    },
                    state: draws.next_u64(),
                },
                other => other,
            };
            PlannedFault { step, fault }
        })
    };
    let point = GraphSpec {
        plan: FaultPlan::new(fault).expect("at most one fault"),
        ..base
    };
    let ran = run_streamed(&point);
    let verdict = judge_spec(&point, &ran);
    // The fault as it ran (a power loss's state wrapped by its step's count), for the line
    // that replays it.
    let ran_fault = ran.world.faults_injected().first().copied().or(fault);
    let fingerprint = ran.world.fingerprint();
    (
        seed,
        ran_fault,
        verdict.broken(expected),
        verdict,
        fingerprint,
    )
}
