//! The runner: runs the engine in a simulated world under a fault plan, restarting it after
//! every crash, and decides what survives a crash (the disk; not the process's memory).

use keel_engine::{
    Engine, EngineConfig, EngineError, Event, IncarnationStats, Interrupt, OperatorState, Record,
};
use keel_sim::{Crash, FaultPlan, World};

/// More restarts than this means recovery loops: an outcome, not a hang.
pub const RESTARTS_MAX: u32 = 64;

/// Default pause between a crash and the new process, in simulated milliseconds.
pub const RESTART_DELAY_MS_DEFAULT: u64 = 500;

/// Everything that determines a run.
#[derive(Clone, Debug)]
pub struct RunSpec {
    pub events: Vec<Event>,
    pub config: EngineConfig,
    pub plan: FaultPlan,
    pub seed: u64,
    pub restart_delay_ms: u64,
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The last incarnation read the whole input and flushed.
    Completed,
    /// Recovery gave up.
    RecoveryFailed(EngineError),
    /// The engine kept crashing: more than [`RESTARTS_MAX`] restarts.
    RestartLimit,
}

/// One process incarnation as the runner saw it.
#[derive(Clone, Debug)]
pub struct Incarnation {
    pub stats: IncarnationStats,
    /// Set when this incarnation was killed.
    pub crash: Option<Crash>,
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

/// What the sink file holds at the end of a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SinkContents {
    pub records: Vec<Record>,
    /// Lines that are not a whole record (a torn append nothing repaired).
    pub corrupt_lines: u64,
}

impl RunResult {
    /// Reads the sink file of the run's sink as the oracle sees it (not a step of the run).
    pub fn sink_contents(&self, config: &EngineConfig) -> SinkContents {
        let mut contents = SinkContents::default();
        let Ok(bytes) = self.world.env().disk.read(&config.sink.file_name()) else {
            return contents;
        };
        for line in String::from_utf8_lossy(&bytes).lines() {
            match Record::parse_line(line) {
                Some(record) => contents.records.push(record),
                None => contents.corrupt_lines += 1,
            }
        }
        contents
    }
}

/// Runs `spec` to the end: crash, restart after the delay, recover, until the input is done.
pub fn run(spec: &RunSpec) -> RunResult {
    let mut world = World::new(spec.seed, spec.plan.clone());
    let mut incarnations = Vec::new();
    for restarts in 0..=RESTARTS_MAX {
        if restarts > 0 {
            world.restart(spec.restart_delay_ms);
        }
        let mut engine = Engine::new(spec.config);
        let result = engine
            .recover(&mut world)
            .and_then(|()| engine.run(&mut world, &spec.events));
        let stats = engine.stats().clone();
        match result {
            Ok(()) => {
                incarnations.push(Incarnation { stats, crash: None });
                return RunResult {
                    world,
                    incarnations,
                    outcome: Outcome::Completed,
                    final_state: engine.state().clone(),
                };
            }
            Err(Interrupt::Failed(error)) => {
                incarnations.push(Incarnation { stats, crash: None });
                return RunResult {
                    world,
                    incarnations,
                    outcome: Outcome::RecoveryFailed(error),
                    final_state: engine.state().clone(),
                };
            }
            // The process is gone: `engine` (its memory) is dropped here; the world's disk stays.
            Err(Interrupt::Crash(crash)) => incarnations.push(Incarnation {
                stats,
                crash: Some(crash),
            }),
        }
    }
    RunResult {
        world,
        incarnations,
        outcome: Outcome::RestartLimit,
        final_state: OperatorState::default(),
    }
}
