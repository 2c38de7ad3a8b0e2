//! One real child process: one incarnation of the engine on a real directory
//! (`keel __incarnation SPEC.json`), killed by a real SIGKILL where the plan crashes it.
//!
//! A planned process crash comes out of the engine as a value (`Err(Crash)`), propagated
//! with `?` and touching nothing on the way (every effect is a step, and none happens
//! after the crash point); the child then writes its post-mortem (what the simulated
//! runner reads off the dropped engine: its stats and operator state, and where the run
//! stands) to a file outside the directory, and sends itself SIGKILL. The directory holds
//! exactly what the completed steps did, as after a kill -9 at that point.

use super::dir::RealDir;
use super::pacing::{Pacer, Pacing};
use keel_engine::{EngineConfig, Event, IncarnationStats, Interrupt, OperatorState};
use keel_sim::fault::PlanFile;
use keel_sim::{CrashPoint, Env, FaultPlan, PlannedFault, Resume, TxLog, World};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Everything a child needs: the run, where it stands, and where to write.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IncarnationSpec {
    pub events: Vec<Event>,
    pub config: EngineConfig,
    pub plan: PlanFile,
    pub seed: u64,
    pub restart_delay_ms: u64,
    pub transaction_timeout_ms: u64,
    /// Where the previous incarnation left the run (None: this is the first one).
    pub resume: Option<Resume>,
    /// The engine's directory.
    pub dir: PathBuf,
    /// Trace lines are appended here as they happen (outside `dir`).
    pub trace_file: PathBuf,
    /// The post-mortem goes here (outside `dir`).
    pub post_mortem_file: PathBuf,
    /// Real pacing: sleep until each step's simulated time, scaled (None: never wait).
    #[serde(default)]
    pub pacing: Option<Pacing>,
}

/// How a child's incarnation ended, as it knew just before it exited or was killed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChildEnd {
    Completed,
    /// A planned process crash: the child sends itself SIGKILL right after the post-mortem.
    Crashed {
        step: u64,
        at: CrashPoint,
        time_ms: u64,
    },
    Aborted(String),
    Failed(String),
}

/// What a child leaves behind besides the directory and its trace lines.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PostMortem {
    pub stats: IncarnationStats,
    pub state: OperatorState,
    pub end: ChildEnd,
    /// Where the next incarnation goes on.
    pub resume: Resume,
    /// The planned faults that took effect in this incarnation.
    pub injected: Vec<PlannedFault>,
}

/// Runs one incarnation on the real directory and returns its post-mortem (the caller
/// writes it and, for a crash, sends SIGKILL).
pub fn run_incarnation(spec: &IncarnationSpec) -> Result<PostMortem, String> {
    let mut storage = RealDir::with_trace_file(&spec.dir, &spec.trace_file)
        .map_err(|e| format!("{}: {e}", spec.trace_file.display()))?;
    if let Some(pacing) = spec.pacing {
        // This process starts where the last one stopped (its restart delay still to come).
        storage = storage.paced(Pacer::new(pacing, spec.resume.map_or(0, |r| r.time_ms)));
    }
    let plan = FaultPlan::from_file(spec.plan.clone()).map_err(|e| format!("plan: {e}"))?;
    let env = Env::new(storage, TxLog::new(spec.transaction_timeout_ms));
    let mut world = match spec.resume {
        None => World::with_env(spec.seed, plan, env),
        Some(resume) => {
            let mut world = World::resumed(spec.seed, plan, env, resume);
            world.restart(spec.restart_delay_ms);
            world
        }
    };
    let mut engine = keel_engine::Engine::new(spec.config);
    let result = engine
        .recover(&mut world)
        .and_then(|()| engine.run(&mut world, &spec.events));
    let end = match result {
        Ok(()) => ChildEnd::Completed,
        Err(Interrupt::Crash(crash)) => ChildEnd::Crashed {
            step: crash.step,
            at: crash.at,
            time_ms: crash.time_ms,
        },
        Err(Interrupt::Abort(error)) => {
            world.note(format!("abort: {error}"));
            ChildEnd::Aborted(error.message)
        }
        Err(Interrupt::Failed(error)) => ChildEnd::Failed(error.message),
    };
    Ok(PostMortem {
        stats: engine.stats().clone(),
        state: engine.state().clone(),
        end,
        resume: world.resume_point(),
        injected: world.faults_injected().to_vec(),
    })
}

/// The child's end: `keel __incarnation SPEC.json`. Writes the post-mortem, then a planned
/// crash sends SIGKILL to this very process (a real kill -9); anything else exits 0.
pub fn incarnation_main(spec_file: &std::path::Path) -> Result<(), String> {
    let text =
        std::fs::read_to_string(spec_file).map_err(|e| format!("{}: {e}", spec_file.display()))?;
    let spec: IncarnationSpec =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", spec_file.display()))?;
    let post_mortem = run_incarnation(&spec)?;
    let json = serde_json::to_vec(&post_mortem).expect("a post-mortem serializes");
    std::fs::write(&spec.post_mortem_file, json)
        .map_err(|e| format!("{}: {e}", spec.post_mortem_file.display()))?;
    if matches!(post_mortem.end, ChildEnd::Crashed { .. }) {
        kill_self();
    }
    Ok(())
}

/// SIGKILL to this process: it dies at once, no destructor, no flush, no exit handler.
fn kill_self() -> ! {
    // SAFETY: getpid and kill are async-signal-safe system calls with no memory effects;
    // SIGKILL cannot be caught, so `kill` does not return while this process exists.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
    unreachable!("SIGKILL does not return")
}
