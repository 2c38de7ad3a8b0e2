//! The runner: runs the engine in a simulated world under a fault plan, restarting it after
//! every crash, and decides what survives a crash (the disk; not the process's memory).

use keel_engine::sink::crash_readers;
use keel_engine::{
    Engine, EngineCaches, EngineConfig, EngineError, Event, IncarnationStats, Interrupt,
    OperatorState,
};
use keel_sim::disk::FsModel;
use keel_sim::{Crash, CrashCounts, CrashKind, Disk, Env, FaultPlan, TxLog, World};
use std::sync::Arc;

/// More restarts than this means recovery loops: an outcome, not a hang.
pub const RESTARTS_MAX: u32 = 64;

/// Steps a zombie may take once it wakes up (bounds its afterlife).
pub const ZOMBIE_STEPS_MAX: u64 = 8;

/// Default pause between a crash and the new process, in simulated milliseconds.
pub const RESTART_DELAY_MS_DEFAULT: u64 = 500;

/// Everything that determines a run.
#[derive(Clone, Debug)]
pub struct RunSpec {
    /// Shared: every fork and point of a sweep copies its spec.
    pub events: Arc<[Event]>,
    pub config: EngineConfig,
    pub plan: FaultPlan,
    pub seed: u64,
    pub restart_delay_ms: u64,
    /// The unit a write tears at on power loss.
    pub sector_size_bytes: usize,
    /// The transactional log aborts a transaction open longer than this.
    pub transaction_timeout_ms: u64,
    /// The file-system profile of the simulated disk's crash model.
    pub fs_model: FsModel,
}

impl RunSpec {
    /// The digest of this run's input: its events ([`crate::catalogue::events_digest`]) and
    /// every knob that changes what it does, as [`RunSpec::input_text`] writes them. The
    /// world's fingerprint hashes it first (`World::set_input_digest`), so two runs on
    /// different events or knobs never share a fingerprint, however alike their steps. The
    /// plan is not part of it (the trace shows the faults that took effect, and a planned
    /// fault that did not is no part of the run), nor the seed (a run never reads it: a plan
    /// drawn from a seed is the plan).
    pub fn input_digest(&self) -> u64 {
        keel_sim::fnv1a64(self.input_text().as_bytes())
    }

    /// The input as one line of text: `events=<digest>` and each knob as `name=value`. The
    /// state backend keeps the name it had when the fingerprints were pinned
    /// (`checkpoint_mode`): a new name here would change every fingerprint for nothing.
    pub fn input_text(&self) -> String {
        let config = &self.config;
        let key = match config.key {
            keel_engine::KeyScheme::EventIndex => "event-index",
            keel_engine::KeyScheme::ProcessingTime => "processing-time",
        };
        let lateness = config
            .allowed_lateness
            .map_or("unbounded".to_string(), |l| l.to_string());
        format!(
            "events={} window={} out_of_orderness={} checkpoint_every={} allowed_lateness={lateness} event_interval_ms={} sink={} protocol={} checkpoint_mode={} key={key} restart_delay_ms={} sector_size_bytes={} transaction_timeout_ms={} fs_model={}",
            crate::catalogue::events_digest(&self.events),
            config.window_size,
            config.out_of_orderness,
            config.checkpoint_every,
            config.event_interval_ms,
            config.sink,
            config.protocol,
            config.state_backend,
            self.restart_delay_ms,
            self.sector_size_bytes,
            self.transaction_timeout_ms,
            self.fs_model,
        )
    }
}

#[cfg(test)]
impl RunSpec {
    /// ch04 with the default knobs, no fault, on `fs_model`: where unit tests start.
    pub fn ch04_on(fs_model: FsModel) -> RunSpec {
        RunSpec {
            events: crate::catalogue::Scenario::by_name("ch04")
                .unwrap()
                .events()
                .into(),
            config: EngineConfig::default(),
            plan: FaultPlan::none(),
            seed: 0,
            restart_delay_ms: RESTART_DELAY_MS_DEFAULT,
            sector_size_bytes: SECTOR_SIZE_BYTES_DEFAULT,
            fs_model,
            transaction_timeout_ms: TRANSACTION_TIMEOUT_MS_DEFAULT,
        }
    }
}

/// Default transaction timeout of the simulated log (Kafka's default is 60 s).
pub const TRANSACTION_TIMEOUT_MS_DEFAULT: u64 = 60_000;

/// Default sector size of the simulated disk.
pub const SECTOR_SIZE_BYTES_DEFAULT: usize = 512;

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The last incarnation read the whole input and flushed.
    Completed,
    /// Recovery gave up.
    RecoveryFailed(EngineError),
    /// The engine kept crashing or aborting: more than [`RESTARTS_MAX`] restarts.
    RestartLimit,
}

impl Outcome {
    pub fn describe(&self) -> String {
        match self {
            Outcome::Completed => "completed".to_string(),
            Outcome::RecoveryFailed(e) => format!("recovery failed: {e}"),
            Outcome::RestartLimit => format!("restart limit: more than {RESTARTS_MAX} restarts"),
        }
    }
}

/// How one process incarnation ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IncarnationEnd {
    Completed,
    /// Killed by the plan (process crash or power loss).
    Crashed(Crash),
    /// Stopped itself on an error it must not ignore; the runner restarts it.
    Aborted(EngineError),
    /// Recovery could not go on.
    Failed(EngineError),
}

/// One process incarnation as the runner saw it.
#[derive(Clone, Debug)]
pub struct Incarnation {
    pub stats: IncarnationStats,
    pub end: IncarnationEnd,
}

impl Incarnation {
    /// Set when this incarnation was killed.
    pub fn crash(&self) -> Option<Crash> {
        match self.end {
            IncarnationEnd::Crashed(crash) => Some(crash),
            _ => None,
        }
    }
}

/// The result of one run: the world as it ended, and each incarnation's story.
#[derive(Clone, Debug)]
pub struct RunResult {
    pub world: World,
    pub incarnations: Vec<Incarnation>,
    pub outcome: Outcome,
    /// The operator state of the last incarnation (meaningful when completed).
    pub final_state: OperatorState,
}

impl RunResult {
    /// Every file the run left on the disk, by name (what a directory listing shows).
    pub fn disk_files(&self) -> Vec<String> {
        self.world.env().disk.list()
    }
}

/// Which consumer reads the sink.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum View {
    /// isolation.level=read_committed: only committed records, up to the last stable offset.
    ReadCommitted,
    /// Everything, aborted and open transactions included (dirty reads).
    ReadUncommitted,
}

impl View {
    pub fn name(&self) -> &'static str {
        match self {
            View::ReadCommitted => "read_committed",
            View::ReadUncommitted => "read_uncommitted",
        }
    }
}

/// Runs `spec` to the end: crash, restart after the delay, recover, until the input is done.
pub fn run(spec: &RunSpec) -> RunResult {
    run_world(spec, new_world(spec, spec.plan.clone()))
}

/// Runs `spec`, recording how many power-loss crash states each step leaves.
pub fn run_recording_crash_states(spec: &RunSpec) -> RunResult {
    run_recording_crash_counts(spec, CrashCounts::States)
}

/// Runs `spec`, recording how many power-loss crash states, or classes of them
/// (`keel_sim::disk::PowerLossClasses`), each step leaves, as `counts` says.
pub fn run_recording_crash_counts(spec: &RunSpec, counts: CrashCounts) -> RunResult {
    let mut world = new_world(spec, spec.plan.clone());
    world.record_crash_states(counts);
    run_world(spec, world)
}

/// Runs `spec` keeping only its trace's fingerprint (and the lines of its last step): the
/// same run and fingerprint as [`run`], in memory that does not grow with the trace, for a
/// caller that reads nothing else of it.
pub fn run_streaming_trace(spec: &RunSpec) -> RunResult {
    let mut world = new_world(spec, spec.plan.clone());
    world.stream_trace();
    run_world(spec, world)
}

/// Runs `spec` on a disk that already holds files (what a fuzzer or a test put there, as a
/// power loss could have left them); its sector size is the disk's own.
pub fn run_on_disk(spec: &RunSpec, disk: Disk) -> RunResult {
    let mut world = World::with_env(
        spec.seed,
        spec.plan.clone(),
        Env::new(disk, TxLog::new(spec.transaction_timeout_ms)),
    );
    world.set_input_digest(spec.input_digest());
    world.read_after_power_loss(crash_readers(spec.config.sink, spec.config.protocol));
    run_world(spec, world)
}

/// A fresh world for `spec`, told what the engine reads of its files after a power loss
/// (the engine's claims: `keel_engine::sink::crash_readers`).
fn new_world(spec: &RunSpec, plan: FaultPlan) -> World {
    let mut world = World::with_env(
        spec.seed,
        plan,
        Env::new(
            Disk::with_model(spec.sector_size_bytes, spec.fs_model),
            TxLog::new(spec.transaction_timeout_ms),
        ),
    );
    world.set_input_digest(spec.input_digest());
    world.read_after_power_loss(crash_readers(spec.config.sink, spec.config.protocol));
    world
}

fn run_world(spec: &RunSpec, world: World) -> RunResult {
    match drive(
        spec,
        world,
        Start::Fresh(EngineCaches::default()),
        &mut |_| Control::Continue,
    ) {
        Driven::Finished(result) => *result,
        Driven::Stopped(_) | Driven::Restarting(_) => {
            unreachable!("a run that is never told to stop runs to its end")
        }
    }
}

/// A run paused between two events of an incarnation's input: everything the runner and
/// the engine hold there. Resuming it ([`resume`]) goes on exactly as the run would have.
#[derive(Clone, Debug)]
pub struct Paused {
    pub world: World,
    /// The live process (its memory).
    pub engine: Engine,
    /// The incarnations that ended before this one.
    pub incarnations: Vec<Incarnation>,
    /// The restarts so far (this incarnation's number among the runner's attempts).
    pub restarts: u32,
    /// The next event the engine reads (the input's length: only the end of input is left).
    pub index: u64,
}

impl Paused {
    /// This run with `world` (a fork of its own, under another plan) in place of its world:
    /// the world is made once, not copied and then forked.
    pub fn with_world(&self, world: World) -> Paused {
        Paused {
            world,
            engine: self.engine.clone(),
            incarnations: self.incarnations.clone(),
            restarts: self.restarts,
            index: self.index,
        }
    }
}

/// What a run looks like between two events, as [`drive`] shows it to its caller.
pub struct Between<'a> {
    pub world: &'a mut World,
    pub engine: &'a Engine,
    pub incarnations: &'a [Incarnation],
    /// The next event the engine reads.
    pub index: u64,
}

/// What a run looks like at a restart, before the new process recovers, as [`drive`] shows
/// it to its caller: only the world survives a crash, so only the world (and the runner's
/// record of the incarnations so far) can make what follows differ.
pub struct Restarting<'a> {
    pub world: &'a World,
    /// The incarnations that ended before this restart.
    pub incarnations: &'a [Incarnation],
}

/// Where [`drive`] asks its caller whether to go on.
pub enum Moment<'a> {
    /// Between two events of an incarnation's input.
    Between(Between<'a>),
    /// After a crash or an abort, before the new process's recovery; never while a zombie
    /// waits to wake up (it wakes after the recovery, so the world alone does not decide
    /// what follows).
    Restarting(Restarting<'a>),
}

/// Whether a run goes on at a [`Moment`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    Continue,
    /// Pause here: [`drive`] returns the run as [`Driven::Stopped`] between two events, as
    /// [`Driven::Restarting`] at a restart.
    Stop,
}

/// How [`drive`] came back.
#[derive(Debug)]
pub enum Driven {
    Finished(Box<RunResult>),
    Stopped(Box<Paused>),
    /// Stopped at a restart, before recovery: the world and the incarnations that ended.
    Restarting(Box<(World, Vec<Incarnation>)>),
}

/// Runs `spec` from the start like [`run`], asking `between` at every event boundary and
/// restart whether to go on (what a sweep's snapshots of a fault-free run are taken with).
pub fn run_between(spec: &RunSpec, between: &mut dyn FnMut(Moment) -> Control) -> Driven {
    run_between_with(spec, EngineCaches::default(), between)
}

/// [`run_between`] with `caches` handed to its first process: caches, not state, so the same
/// run (a sweep's second sink builds on the first sink's fault-free file).
pub fn run_between_with(
    spec: &RunSpec,
    caches: EngineCaches,
    between: &mut dyn FnMut(Moment) -> Control,
) -> Driven {
    drive(
        spec,
        new_world(spec, spec.plan.clone()),
        Start::Fresh(caches),
        between,
    )
}

/// Where [`drive`] starts: a fresh run whose first process gets these caches, or a paused
/// run's process, the incarnations before it, its restarts and its next event.
enum Start {
    Fresh(EngineCaches),
    Midway(Box<Engine>, Vec<Incarnation>, u32, u64),
}

/// Runs a paused run on from where it stopped, under its world's plan.
pub fn resume(
    spec: &RunSpec,
    paused: Paused,
    between: &mut dyn FnMut(Moment) -> Control,
) -> Driven {
    let Paused {
        world,
        engine,
        incarnations,
        restarts,
        index,
    } = paused;
    drive(
        spec,
        world,
        Start::Midway(Box::new(engine), incarnations, restarts, index),
        between,
    )
}

/// Runs a process incarnation's input from event `from` to the end, asking `between` at every
/// event boundary (before each event and before the end of input) whether to go on.
/// `Ok(Some(index))`: told to stop before event `index`.
fn run_input(
    spec: &RunSpec,
    world: &mut World,
    engine: &mut Engine,
    incarnations: &[Incarnation],
    from: u64,
    between: &mut dyn FnMut(Moment) -> Control,
) -> Result<Option<u64>, Interrupt> {
    let len = spec.events.len() as u64;
    for index in from..=len {
        let control = between(Moment::Between(Between {
            world,
            engine,
            incarnations,
            index,
        }));
        if control == Control::Stop {
            return Ok(Some(index));
        }
        if index < len {
            engine.process(world, &spec.events, index)?;
        }
    }
    engine.finish(world, &spec.events)?;
    Ok(None)
}

/// Starts a process: recovery, then the zombie (if any) wakes up; what it does in its
/// afterlife goes into its incarnation's record in `incarnations`.
fn start_incarnation(
    world: &mut World,
    engine: &mut Engine,
    zombie: &mut Option<(u32, Engine)>,
    incarnations: &mut [Incarnation],
) -> Result<(), Interrupt> {
    engine.recover(world)?;
    // The zombie wakes up once its replacement has recovered: the moment it does the most
    // harm, when the new process already owns the sink.
    if let Some((incarnation, mut old)) = zombie.take() {
        world.begin_zombie(incarnation, ZOMBIE_STEPS_MAX);
        let mut power_loss = None;
        let outcome = match old.wake_as_zombie(world) {
            Ok(()) => "its writes were accepted".to_string(),
            Err(Interrupt::Crash(crash)) => {
                // The zombie shares the machine (and the disk) with its replacement: a
                // power loss takes both down, a kill only the zombie.
                if matches!(crash.kind, CrashKind::PowerLoss { .. }) {
                    power_loss = Some(crash);
                }
                "it died for good".to_string()
            }
            Err(Interrupt::Abort(e) | Interrupt::Failed(e)) => {
                format!("it was stopped: {e}")
            }
        };
        world.end_zombie();
        // What the zombie did in its afterlife is part of its incarnation's record.
        let zombie_record: &mut Incarnation = &mut incarnations[incarnation as usize];
        zombie_record.stats = old.stats().clone();
        world.note(format!("zombie: p{incarnation} is gone ({outcome})"));
        if let Some(crash) = power_loss {
            world.note(format!(
                "power loss: p{} goes down with the machine",
                world.incarnation()
            ));
            return Err(Interrupt::Crash(crash));
        }
    }
    Ok(())
}

/// The runner's loop: crash, restart after the delay, recover, until the input is done or
/// `between` says stop at an event boundary or a restart; `start` where it starts.
fn drive(
    spec: &RunSpec,
    mut world: World,
    start: Start,
    between: &mut dyn FnMut(Moment) -> Control,
) -> Driven {
    // The engine's caches, handed from each process to the next (`EngineCaches`).
    let (mut midway, mut incarnations, restarts_first, mut caches) = match start {
        Start::Midway(engine, incarnations, restarts, index) => {
            let caches = engine.caches().clone();
            (Some((*engine, index)), incarnations, restarts, caches)
        }
        Start::Fresh(caches) => (None, Vec::new(), 0, caches),
    };
    // A process that was cut off but lives on, waiting to wake up.
    let mut zombie: Option<(u32, Engine)> = None;
    for restarts in restarts_first..=RESTARTS_MAX {
        let (engine, result) = match midway.take() {
            Some((mut engine, index)) => {
                let result =
                    run_input(spec, &mut world, &mut engine, &incarnations, index, between);
                (engine, result)
            }
            None => {
                if restarts > 0 {
                    world.restart(spec.restart_delay_ms);
                    if zombie.is_none() {
                        let moment = Moment::Restarting(Restarting {
                            world: &world,
                            incarnations: &incarnations,
                        });
                        if between(moment) == Control::Stop {
                            return Driven::Restarting(Box::new((world, incarnations)));
                        }
                    }
                }
                let mut engine = Engine::new(spec.config).with_caches(std::mem::take(&mut caches));
                let result =
                    start_incarnation(&mut world, &mut engine, &mut zombie, &mut incarnations)
                        .and_then(|()| engine.resume_index(&spec.events))
                        .and_then(|start| {
                            run_input(spec, &mut world, &mut engine, &incarnations, start, between)
                        });
                (engine, result)
            }
        };
        let stats = engine.stats().clone();
        caches = engine.caches().clone();
        let (end, outcome) = match result {
            Ok(Some(index)) => {
                return Driven::Stopped(Box::new(Paused {
                    world,
                    engine,
                    incarnations,
                    restarts,
                    index,
                }))
            }
            Ok(None) => (IncarnationEnd::Completed, Some(Outcome::Completed)),
            Err(Interrupt::Failed(error)) => (
                IncarnationEnd::Failed(error.clone()),
                Some(Outcome::RecoveryFailed(error)),
            ),
            // Cut off, not dead: the runner keeps the process to wake it up later.
            Err(Interrupt::Crash(crash)) if crash.kind == CrashKind::Zombie => {
                zombie = Some((world.incarnation(), engine.clone()));
                (IncarnationEnd::Crashed(crash), None)
            }
            // The process is gone: `engine` (its memory) is dropped; the world's disk stays.
            Err(Interrupt::Crash(crash)) => (IncarnationEnd::Crashed(crash), None),
            Err(Interrupt::Abort(error)) => {
                world.note(format!("abort: {error}"));
                (IncarnationEnd::Aborted(error), None)
            }
        };
        incarnations.push(Incarnation { stats, end });
        if let Some(outcome) = outcome {
            if outcome == Outcome::Completed {
                // The run is over and its output stays on disk: in time the kernel writes
                // back every dirty page and drops every clean one, so what the sink's
                // readers see is what the disk holds (a page cache that outlives the run
                // is no promise of durability).
                world.evict_clean_pages("the run is over");
            }
            return Driven::Finished(Box::new(RunResult {
                world,
                incarnations,
                outcome,
                final_state: engine.state().clone(),
            }));
        }
    }
    Driven::Finished(Box::new(RunResult {
        world,
        incarnations,
        outcome: Outcome::RestartLimit,
        final_state: OperatorState::default(),
    }))
}
