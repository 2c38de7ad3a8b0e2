//! Parallel jobs (`keel job`): the runner that drives a task graph under a seeded scheduler,
//! restarting the whole job after every crash, and the oracle that judges what its sink holds.
//!
//! The runner, not the job, decides what survives a crash: it drops the job (every task's
//! memory, every channel) and keeps the world (disk, clock, step counter), then starts a new
//! incarnation with `Job::recover`. One seed drives the fault plan's draws and, from a
//! stream of its own, the schedule; the schedule that ran is data (`schedule`) and a
//! scripted scheduler replays it byte for byte.

pub mod oracle;
pub mod plan;
pub mod schedules;
pub mod shrink;
pub mod tasks;
pub mod visibility;

use keel_engine::job::{split_partitions, Job, JobConfig, JobStats, KeyedEvent};
use keel_engine::{EngineError, Interrupt};
use keel_sim::disk::FsModel;
use keel_sim::{Crash, Disk, Env, FaultPlan, Fingerprint, SchedulePolicy, Scheduler, TxLog, World};
use std::sync::Arc;

pub use oracle::{judge, JobProperty, JobVerdict};

/// More restarts than this means recovery loops: an outcome, not a hang.
pub const RESTARTS_MAX: u32 = 64;

/// Everything that determines a run of a parallel job.
#[derive(Clone, Debug)]
pub struct GraphSpec {
    pub events: Arc<[KeyedEvent]>,
    pub config: JobConfig,
    pub plan: FaultPlan,
    pub seed: u64,
    pub schedule: SchedulePolicy,
    /// Choices to make first (a replayed schedule).
    pub script: Vec<u32>,
    /// After the script, round-robin instead of the policy (a shrunk or saved schedule).
    pub round_robin_after_script: bool,
    pub restart_delay_ms: u64,
    pub fs_model: FsModel,
}

impl GraphSpec {
    /// The digest of this job's input: every event (key and partition included) and every
    /// knob, as [`GraphSpec::input_text`] writes them. The world's fingerprint hashes it
    /// first, so two runs on other events or knobs never share a fingerprint. The plan and
    /// the schedule are not part of it: the trace shows the faults that took effect and
    /// every action the scheduler chose.
    pub fn input_digest(&self) -> u64 {
        keel_sim::fnv1a64(self.input_text().as_bytes())
    }

    /// The input as text: the events' digest and each knob as `name=value`.
    pub fn input_text(&self) -> String {
        let events = serde_json::to_vec(&*self.events).expect("events serialize");
        let c = &self.config;
        format!(
            "job events={:016x} sources={} parallelism={} window={} out_of_orderness={} mode={} sink={} checkpoint_interval_ms={} checkpoint_timeout_ms={} channel_capacity={} action_ms={} checkpoints_max={} restart_delay_ms={} fs_model={}",
            keel_sim::fnv1a64(&events),
            c.sources,
            c.parallelism,
            c.window_size,
            c.out_of_orderness,
            c.mode,
            c.sink,
            c.checkpoint_interval_ms,
            c.checkpoint_timeout_ms,
            c.channel_capacity,
            c.action_ms,
            c.checkpoints_max,
            self.restart_delay_ms,
            self.fs_model,
        ) + &c
            .state_ttl_ms
            .map_or(String::new(), |ttl| format!(" state_ttl_ms={ttl}"))
    }

    /// The job in one line: its graph, its events and the knobs a reader compares runs by.
    pub fn summary_line(&self) -> String {
        let c = &self.config;
        format!(
            "job: sources={} parallelism={} events={} window={} out_of_orderness={} checkpoint_interval_ms={} channel_capacity={} schedule={} seed={}",
            c.sources,
            c.parallelism,
            self.events.len(),
            c.window_size,
            c.out_of_orderness,
            c.checkpoint_interval_ms,
            c.channel_capacity,
            self.schedule,
            self.seed
        )
    }

    pub fn partitions(&self) -> Arc<Vec<Vec<KeyedEvent>>> {
        Arc::new(split_partitions(&self.events, self.config.sources))
    }
}

/// How a run of a parallel job ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GraphOutcome {
    Completed,
    RecoveryFailed(EngineError),
    RestartLimit,
    /// No action was enabled and none would be by time alone: a bug of the job.
    Deadlock,
}

impl GraphOutcome {
    pub fn describe(&self) -> String {
        match self {
            GraphOutcome::Completed => "completed".to_string(),
            GraphOutcome::RecoveryFailed(e) => format!("recovery failed: {e}"),
            GraphOutcome::RestartLimit => format!("gave up after {RESTARTS_MAX} restarts"),
            GraphOutcome::Deadlock => "deadlock: no task could act".to_string(),
        }
    }
}

/// A finished run of a parallel job.
#[derive(Clone, Debug)]
pub struct GraphRun {
    pub outcome: GraphOutcome,
    pub world: World,
    /// Each incarnation's report, in order.
    pub incarnations: Vec<JobStats>,
    /// The crashes, in order.
    pub crashes: Vec<Crash>,
    /// The schedule that ran: every choice, as an index into the enabled actions.
    pub schedule: Vec<u32>,
    /// With `round_robin_after_script`: for each choice, the one round-robin would have
    /// made then (what a shrinker moves a choice to). Empty otherwise.
    pub round_robin_picks: Vec<u32>,
}

impl GraphRun {
    pub fn fingerprint(&self) -> Fingerprint {
        self.world.fingerprint()
    }

    /// The job's figures summed over incarnations (the largest checkpoint: the largest).
    pub fn totals(&self) -> JobStats {
        let mut total = JobStats::default();
        for stats in &self.incarnations {
            total.sink.written += stats.sink.written;
            total.sink.skipped += stats.sink.skipped;
            total.sink.committed += stats.sink.committed;
            total.checkpoints_completed += stats.checkpoints_completed;
            total.checkpoints_declined += stats.checkpoints_declined;
            total.alignment_ms += stats.alignment_ms;
            total.checkpoint_bytes_max = total.checkpoint_bytes_max.max(stats.checkpoint_bytes_max);
            total.in_flight_items += stats.in_flight_items;
            total.ttl += stats.ttl;
            total.rejected.extend(stats.rejected.iter().cloned());
        }
        total.restored = self.incarnations.last().and_then(|s| s.restored);
        total
    }
}

/// A fresh world for `spec`.
pub fn new_world(spec: &GraphSpec) -> World {
    let mut world = World::with_env(
        spec.seed,
        spec.plan.clone(),
        Env::new(Disk::with_model(512, spec.fs_model), TxLog::new(60_000)),
    );
    world.set_input_digest(spec.input_digest());
    world
}

/// Runs `spec` from a fresh world to its end.
pub fn run(spec: &GraphSpec) -> GraphRun {
    run_in(spec, new_world(spec))
}

/// [`run`] keeping only the trace's fingerprint, not its lines: what explore's many runs
/// need (their figures and verdicts), in a fraction of the memory and time.
pub fn run_streamed(spec: &GraphSpec) -> GraphRun {
    let mut world = new_world(spec);
    world.stream_trace();
    run_in(spec, world)
}

/// [`run`] recording, after each step, how many crash states a power loss there could leave
/// the disk in (`World::crash_state_counts`): what a sweep of power losses reads off the
/// fault-free run.
pub fn run_recording_crash_states(spec: &GraphSpec) -> GraphRun {
    let mut world = new_world(spec);
    world.record_crash_states(keel_sim::CrashCounts::States);
    run_in(spec, world)
}

fn run_in(spec: &GraphSpec, world: World) -> GraphRun {
    let scheduler = Scheduler::new(world.seeds(), spec.schedule);
    let scheduler = if spec.round_robin_after_script {
        scheduler.scripted_then_round_robin(spec.script.clone())
    } else {
        scheduler.scripted(spec.script.clone())
    };
    drive(spec, world, scheduler, None)
}

/// One incarnation between two actions: the job and the world it runs in.
#[derive(Clone, Debug)]
pub struct Between {
    pub job: Job,
    pub world: World,
}

/// Drives `spec` in `world` (from a recovery, or from `start` when given) to its end.
pub fn drive(
    spec: &GraphSpec,
    world: World,
    mut scheduler: Scheduler,
    start: Option<Job>,
) -> GraphRun {
    let partitions = spec.partitions();
    let mut world = world;
    let mut incarnations = Vec::new();
    let mut crashes = Vec::new();
    let mut restarts = 0u32;
    let mut start = start;
    let outcome = 'run: loop {
        let recovered = match start.take() {
            Some(job) => Ok(job),
            None => Job::recover(&mut world, spec.config, partitions.clone()),
        };
        let mut job = match recovered {
            Ok(job) => job,
            Err(interrupt) => {
                match interrupted(&mut world, interrupt, &mut crashes, &mut restarts, spec) {
                    Some(outcome) => break 'run outcome,
                    None => continue 'run,
                }
            }
        };
        loop {
            if job.finished() {
                incarnations.push(job.stats().clone());
                break 'run GraphOutcome::Completed;
            }
            let enabled = job.enabled(world.now_ms());
            if enabled.is_empty() {
                let Some(timer_ms) = job.next_timer_ms(world.now_ms()) else {
                    incarnations.push(job.stats().clone());
                    break 'run GraphOutcome::Deadlock;
                };
                assert!(
                    timer_ms > world.now_ms(),
                    "a due timer is an enabled action"
                );
                if let Err(crash) = world.sleep_until(timer_ms) {
                    incarnations.push(job.stats().clone());
                    match interrupted(
                        &mut world,
                        Interrupt::Crash(crash),
                        &mut crashes,
                        &mut restarts,
                        spec,
                    ) {
                        Some(outcome) => break 'run outcome,
                        None => continue 'run,
                    }
                }
                continue;
            }
            let action = enabled[scheduler.choose_among(enabled.len(), |i| enabled[i].to_string())];
            let performed = world
                .sleep_until(world.now_ms() + spec.config.action_ms)
                .map_err(Interrupt::Crash)
                .and_then(|()| job.perform(&mut world, action));
            if let Err(interrupt) = performed {
                incarnations.push(job.stats().clone());
                match interrupted(&mut world, interrupt, &mut crashes, &mut restarts, spec) {
                    Some(outcome) => break 'run outcome,
                    None => continue 'run,
                }
            }
        }
    };
    GraphRun {
        outcome,
        world,
        incarnations,
        crashes,
        schedule: scheduler.choices().to_vec(),
        round_robin_picks: scheduler.round_robin_picks().to_vec(),
    }
}

/// After an interrupt: restarts the job (None) or ends the run (its outcome).
fn interrupted(
    world: &mut World,
    interrupt: Interrupt,
    crashes: &mut Vec<Crash>,
    restarts: &mut u32,
    spec: &GraphSpec,
) -> Option<GraphOutcome> {
    match interrupt {
        Interrupt::Failed(error) => return Some(GraphOutcome::RecoveryFailed(error)),
        Interrupt::Crash(crash) => crashes.push(crash),
        Interrupt::Abort(error) => world.note(format!("abort: {error}")),
    }
    *restarts += 1;
    if *restarts > RESTARTS_MAX {
        return Some(GraphOutcome::RestartLimit);
    }
    world.restart(spec.restart_delay_ms);
    None
}
