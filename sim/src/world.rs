//! The world a run lives in: clock, disk, fault plan, step counter and trace, as one plain value.
//!
//! Every effect the system under test performs goes through [`World::effect`] (local disk
//! operations) or [`World::request`] (requests to the sink): it gets the next step number,
//! consults the [`FaultPlan`] before and after the effect, and appends a line to the trace. A crash comes back as an `Err(Crash)` value that the system under test
//! propagates with `?`; the runner (not the system under test) then decides what survives
//! and calls [`World::restart`]. A step that writes or reads bytes says which
//! ([`World::effect_data`], [`World::request_data`]): its line then shows their digest, so
//! the fingerprint covers the data a run wrote and read, not only the steps it took.

use crate::clock::Clock;
use crate::disk::{CrashReaders, Disk, DurableIdentity, PowerLossClasses};
use crate::fault::{CrashPoint, Fault, FaultPlan, PlannedFault};
use crate::rng::SeedTree;
use crate::storage::Storage;
use crate::trace::{Fingerprint, NoteText, Trace, TraceLine};
use crate::txlog::TxLog;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// Power losses, disk errors and crash-state counts need the simulated disk: a real
/// directory supports process crashes only (callers refuse other plans in real mode).
const SIMULATION_ONLY: &str = "power loss and disk errors are simulation-only";

/// A run that takes more steps than this is a bug (an unbounded loop), not a long run.
pub const STEPS_MAX: u64 = 50_000_000;

/// Where an effect happens: the operation and what it acts on (a path, a key, an event).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    pub op: &'static str,
    pub target: String,
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.op, self.target)
    }
}

/// Where a fault took effect: its step's site, and the operation of the step before it
/// ("" at the first step).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultSite {
    pub site: Site,
    pub after_op: &'static str,
}

/// What the server did for one operation's requests: the world's own count, against which
/// a system's report of what it sent (and what the server did with it) can be checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Served {
    /// Requests whose effect ran at the server (a lost ack included).
    pub requests: u64,
    /// Those of them that changed the file they named (`Data::File`): a sink write that
    /// appended, not one the sink skipped as a duplicate.
    pub changed_file: u64,
}

impl std::ops::Add for Served {
    type Output = Served;

    fn add(self, other: Served) -> Served {
        Served {
            requests: self.requests + other.requests,
            changed_file: self.changed_file + other.changed_file,
        }
    }
}

impl std::ops::Sub for Served {
    type Output = Served;

    /// What was served between two counts of one run, `other` the earlier.
    fn sub(self, other: Served) -> Served {
        assert!(other.requests <= self.requests);
        assert!(other.changed_file <= self.changed_file);
        Served {
            requests: self.requests - other.requests,
            changed_file: self.changed_file - other.changed_file,
        }
    }
}

/// The bytes a step wrote or read, as its trace line shows them (a digest, `#` and 16 hex
/// digits), once its effect ran.
#[derive(Clone, Copy, Debug)]
pub enum Data<'a> {
    /// The file the step wrote or read (or both): its running digest after the step
    /// ([`Storage::digest`]), which covers every byte written into it, so a read of a long
    /// file costs no hashing.
    File(&'a str),
    /// A request's payload (a record sent to the log): its FNV-1a 64.
    Bytes(&'a [u8]),
}

/// A memo of one step's power-loss classes, shared by runs ([`World::share_classes_at`]).
pub type ClassesMemo = Arc<std::sync::Mutex<Option<ClassesAt>>>;

/// The power-loss classes at one step (`key`: [`ClassesAt::key_of`]), and the durable
/// state of the disk they are classes of.
#[derive(Clone, Debug)]
pub struct ClassesAt {
    pub key: u64,
    pub classes: Arc<PowerLossClasses>,
    pub durable: Arc<DurableIdentity>,
}

impl ClassesAt {
    /// The key of the classes a power-loss class at `step` (`at` its effect; split by tail
    /// or not) takes: one function, so that the world that fills a memo and a sweep that
    /// reads it cannot disagree on it.
    pub fn key_of(step: u64, at: CrashPoint, by_tail: bool) -> u64 {
        (step * 2 + u64::from(at == CrashPoint::After)) * 2 + u64::from(by_tail)
    }
}

/// What a run records of each step's power-loss crash states ([`World::record_crash_states`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashCounts {
    /// How many crash states.
    States,
    /// How many classes of them, by what the system reads.
    Classes,
    /// How many classes split by tail (`CrashReaders::split_tails`): what a sweep's first
    /// faults are where a second fault follows.
    TailClasses,
}

/// How the process died.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashKind {
    /// kill -9: the disk is as the process left it.
    Process,
    /// The machine lost power: the disk was resolved to this crash state (with `class`, to
    /// the representative of this class of crash states).
    PowerLoss { state: u64, class: bool },
    /// The process was cut off and declared dead, but it lives on: the runner keeps it and
    /// wakes it up as a zombie after its replacement has recovered.
    Zombie,
}

/// The process died at `step`: a value, propagated out of the system under test with `?`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Crash {
    pub step: u64,
    pub at: CrashPoint,
    pub time_ms: u64,
    pub kind: CrashKind,
}

impl fmt::Display for Crash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            CrashKind::Process => f.write_str("process crash")?,
            CrashKind::PowerLoss {
                state,
                class: false,
            } => write!(f, "power loss (crash state {state})")?,
            CrashKind::PowerLoss { state, class: true } => {
                write!(f, "power loss (crash state class {state})")?
            }
            CrashKind::Zombie => f.write_str("cut off (zombie)")?,
        }
        write!(f, " {} step {} at t={}ms", self.at, self.step, self.time_ms)
    }
}

/// Why a sink request did not succeed, as the process sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestError {
    /// The sink refused the request; it did not take effect.
    Refused,
    /// No reply came: the request may or may not have taken effect.
    Timeout,
    /// The sink is down; try again later.
    Unavailable,
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RequestError::Refused => "refused",
            RequestError::Timeout => "timeout",
            RequestError::Unavailable => "unavailable",
        })
    }
}

/// What an effect may touch: the parts of the world that outlive a process. `S` is the
/// storage the engine's files live on: the simulated [`Disk`], or a real directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Env<S = Disk> {
    pub clock: Clock,
    pub disk: S,
    /// The transactional log service (the two-phase-commit sink's broker).
    pub txlog: TxLog,
    /// The sink refuses every request until this time (a sink outage).
    pub sink_down_until_ms: u64,
}

/// Default transaction timeout of an `Env::default()` log (Kafka's default is 60 s).
const TRANSACTION_TIMEOUT_MS_DEFAULT: u64 = 60_000;

impl<S> Env<S> {
    pub fn new(disk: S, txlog: TxLog) -> Env<S> {
        Env {
            clock: Clock::default(),
            disk,
            txlog,
            sink_down_until_ms: 0,
        }
    }
}

impl Default for Env {
    fn default() -> Self {
        Env::new(Disk::new(), TxLog::new(TRANSACTION_TIMEOUT_MS_DEFAULT))
    }
}

/// A power loss whose planned crash state was not below the step's count of crash states,
/// so the world wrapped it (a generator may draw any u64; a plan file must not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WrappedState {
    pub step: u64,
    /// The state the plan asked for.
    pub planned: u64,
    /// How many crash states (with `class`, classes) the step had: the state that ran is
    /// `planned % count`. A class at a step whose classes are not numbered has count 0: it
    /// ran as the state `planned` names.
    pub count: u64,
    /// Whether the plan named a class of crash states (`Fault::PowerLossClass`).
    pub class: bool,
}

/// Where a process incarnation starts in a run that another process began: the next step
/// number, the simulated time, the incarnation number, and whether the plan's kill by the
/// clock has happened. A real run starts each child process from one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Resume {
    pub step_next: u64,
    pub time_ms: u64,
    /// The last processing timestamp read (see [`Clock::timestamp_us`]).
    #[serde(default)]
    pub timestamp_us_last: u64,
    pub incarnation: u32,
    pub kill_done: bool,
}

/// The simulated world. Clone it to fork a run at any point.
#[derive(Clone, Debug)]
pub struct World<S = Disk> {
    env: Env<S>,
    seeds: SeedTree,
    plan: FaultPlan,
    step_next: u64,
    incarnation: u32,
    trace: Trace,
    /// Whether the plan's kill by the clock has happened (it happens once).
    kill_done: bool,
    /// When recording: the number of power-loss crash states after each step's effect (with
    /// `counted_as`, of classes of them: None where they are not numbered).
    crash_state_counts: Option<Vec<Option<u64>>>,
    /// When recording: the exact number of crash states after each step whose count above
    /// is None (past a u64, or classes not numbered), in step order.
    crash_state_counts_exact: Vec<(u64, num_bigint::BigUint)>,
    counted_as: CrashCounts,
    /// What the system under test reads of its files after a power loss (see
    /// `disk::power_loss::classes`): the caller's claims, by which crash states fall into
    /// classes. The default claims nothing, and a class is a state.
    crash_readers: Arc<CrashReaders>,
    /// The crash states of the class a planned power-loss class resolved to (one class a
    /// run: a class fault is a single fault).
    class_states: Option<num_bigint::BigUint>,
    /// A memo of power-loss classes the caller shares between runs, and the one step at
    /// which it claims this run's disk is the disk of every other run that uses the memo
    /// there ([`World::share_classes_at`]).
    classes_memo: Option<(ClassesMemo, u64)>,
    /// When recording: the unpersisted bytes after each step's effect (what a page eviction
    /// there would drop).
    unpersisted_counts: Vec<u64>,
    /// The planned faults that took effect, in order (a fault aimed at a step where it does
    /// not apply, or at a step the run never reached, is not here).
    injected: Vec<PlannedFault>,
    /// Where each of `injected` took effect (the coverage of a run: which places of a
    /// protocol its faults reached).
    injected_sites: Vec<FaultSite>,
    /// Where the step running now is, kept only when the plan aims a fault at it.
    fault_site: Option<FaultSite>,
    /// The operation of the newest step ("" before the first).
    last_op: &'static str,
    /// The power losses whose planned state wrapped, in order.
    wrapped: Vec<WrappedState>,
    /// Whether a planned power loss keeps the disk as it stood before it
    /// ([`World::keep_disk_before_power_loss`]).
    keeps_disk_before_power_loss: bool,
    /// The disk as it stood just before the latest planned power loss, and that power
    /// loss's step, when kept.
    disk_before_power_loss: Option<(u64, Disk)>,
    /// While a zombie runs: its incarnation (for the trace) and the steps it has left.
    zombie: Option<(u32, u64)>,
    /// Requests whose effect ran at the server, by operation (a lost ack included): the
    /// world's own count, against which a system's report of what it sent can be checked.
    served_requests: BTreeMap<&'static str, Served>,
    /// The first sink outage: when it began and when the server next served a request (the
    /// world's own clock readings, against which a system's retry policy can be checked).
    first_outage_ms: Option<(u64, Option<u64>)>,
    /// Whether the newest step's line has yet to reach [`Storage::record`] (it does when
    /// its step is over).
    step_unrecorded: bool,
}

impl World {
    pub fn new(seed: u64, plan: FaultPlan) -> Self {
        World::with_disk(seed, plan, Disk::new())
    }

    /// A world whose disk is `disk` (e.g. one with another sector size).
    pub fn with_disk(seed: u64, plan: FaultPlan, disk: Disk) -> Self {
        World::with_env(
            seed,
            plan,
            Env::new(disk, TxLog::new(TRANSACTION_TIMEOUT_MS_DEFAULT)),
        )
    }

    /// Holds `later`'s file chunks where this world's files are prefixes of its files
    /// ([`Disk::share_prefixes_of`]): the same world, in less memory. How many did.
    pub fn share_disk_prefixes_of(&mut self, later: &World) -> usize {
        self.env.disk.share_prefixes_of(&later.env.disk)
    }
}

impl<S: Storage> World<S> {
    /// A world whose outliving parts (disk, log) are `env`.
    pub fn with_env(seed: u64, plan: FaultPlan, env: Env<S>) -> Self {
        World {
            env,
            seeds: SeedTree::new(seed),
            plan,
            step_next: 0,
            incarnation: 0,
            trace: Trace::default(),
            kill_done: false,
            crash_state_counts: None,
            crash_state_counts_exact: Vec::new(),
            counted_as: CrashCounts::States,
            crash_readers: Arc::default(),
            class_states: None,
            classes_memo: None,
            unpersisted_counts: Vec::new(),
            injected: Vec::new(),
            injected_sites: Vec::new(),
            fault_site: None,
            last_op: "",
            wrapped: Vec::new(),
            keeps_disk_before_power_loss: false,
            disk_before_power_loss: None,
            zombie: None,
            served_requests: BTreeMap::new(),
            first_outage_ms: None,
            step_unrecorded: false,
        }
    }

    /// A world that goes on where another process left a run: `resume` says from which
    /// step, time and incarnation. Its trace holds only what happens from here.
    pub fn resumed(seed: u64, plan: FaultPlan, mut env: Env<S>, resume: Resume) -> Self {
        env.clock = Clock::resumed(resume.time_ms, resume.timestamp_us_last);
        let mut world = World::with_env(seed, plan, env);
        world.step_next = resume.step_next;
        world.incarnation = resume.incarnation;
        world.kill_done = resume.kill_done;
        world
    }

    /// Where a process starting now would resume this run (see [`World::resumed`]).
    pub fn resume_point(&self) -> Resume {
        Resume {
            step_next: self.step_next,
            time_ms: self.now_ms(),
            timestamp_us_last: self.env.clock.timestamp_us_last(),
            incarnation: self.incarnation,
            kill_done: self.kill_done,
        }
    }

    /// A fork of this run that goes on under `plan` instead: the same world (clock, storage,
    /// step counter, incarnation, trace so far), recording crash-state counts from here on
    /// if asked. Only a run that no fault has touched yet forks (a sweep forks its
    /// fault-free baseline), and the plan must aim at no step already taken.
    pub fn fork(&self, plan: FaultPlan, record_crash_states: bool) -> Self
    where
        S: Clone,
    {
        assert!(
            self.injected.is_empty(),
            "a fork starts from a fault-free run"
        );
        assert!(
            self.wrapped.is_empty(),
            "a fork starts from a fault-free run"
        );
        assert!(self.zombie.is_none(), "no fork while a zombie runs");
        assert!(self.plan.is_empty(), "a fork starts from a fault-free run");
        assert!(
            plan.iter().all(|f| f.step >= self.step_next),
            "a fork's plan aims at steps still to come"
        );
        let mut world = self.clone();
        world.plan = plan;
        world.crash_state_counts = record_crash_states.then(Vec::new);
        world.crash_state_counts_exact = Vec::new();
        world.counted_as = CrashCounts::States;
        world
    }

    /// A fork of this run, some of whose faults may have happened, that goes on under `plan`
    /// instead: `plan` aims the same faults at the steps already taken (so the run so far is
    /// its run too) and any others at steps still to come. What a sweep's second faults
    /// start from: the run of their first fault, paused before the second.
    pub fn fork_later(&self, plan: FaultPlan) -> Self
    where
        S: Clone,
    {
        let so_far = |f: &PlannedFault| f.step < self.step_next;
        let taken = plan.iter().take_while(so_far);
        assert!(
            taken.eq(self.plan.iter().take_while(so_far)),
            "the same faults so far"
        );
        assert_eq!(plan.kill_time_ms(), None, "no kill by the clock");
        assert_eq!(self.plan.kill_time_ms(), None, "no kill by the clock");
        assert!(self.zombie.is_none(), "no fork while a zombie runs");
        assert!(
            self.crash_state_counts.is_none(),
            "a recording run is not forked later"
        );
        let mut world = self.clone();
        world.plan = plan;
        world
    }

    /// Folds the trace so far into its fingerprint state (see [`Trace::forget`]): what a
    /// run keeps before it is forked many times.
    pub fn forget_trace(&mut self) {
        self.record_step_line();
        self.trace.forget();
    }

    /// Names the run's input (its events and every knob that changes what it does) by its
    /// digest, which the fingerprint hashes first ([`Trace::set_input`]); before the first
    /// step.
    pub fn set_input_digest(&mut self, digest: u64) {
        self.trace.set_input(digest);
    }

    /// Whether the plan can do nothing more: every planned fault aims at a step already
    /// taken, and there is no kill by the clock still to come.
    pub fn plan_spent(&self) -> bool {
        self.pending_kill_ms().is_none()
            && self
                .plan
                .iter()
                .next_back()
                .is_none_or(|last| last.step < self.step_next)
    }

    /// Read-only view for the runner and the oracle; the system under test uses [`World::effect`].
    pub fn env(&self) -> &Env<S> {
        &self.env
    }

    /// Appends `line` to the trace; the storage sees it first (a real process paces it, and
    /// writes it out: a step's line once its step is over, [`World::record_step_line`]).
    fn trace_push(&mut self, line: TraceLine) {
        if self.env.disk.records() {
            self.record_step_line();
            self.env.disk.begin(&line);
            if matches!(line, TraceLine::Step { .. }) {
                self.step_unrecorded = true;
            } else {
                self.env.disk.record(&line);
            }
        } else {
            self.env.disk.begin(&line);
        }
        self.trace.push(line);
    }

    /// Hands the newest step's line to the storage, now final, if it has not had it.
    fn record_step_line(&mut self) {
        if std::mem::take(&mut self.step_unrecorded) {
            let line = self.trace.lines().next_back().expect("the step's line");
            assert!(matches!(line, TraceLine::Step { .. }), "the step's line");
            self.env.disk.record(line);
        }
    }

    /// Shows the digest of `data` on `step`'s line, its effect having run.
    fn set_step_data(&mut self, step: u64, data: Data<'_>) {
        let digest = match data {
            Data::File(name) => self.env.disk.digest(name).map(|digest| digest.value()),
            Data::Bytes(bytes) => Some(crate::digest::fnv1a64(bytes)),
        };
        if let Some(digest) = digest {
            self.trace.set_step_data(step, digest);
        }
    }

    pub fn seeds(&self) -> SeedTree {
        self.seeds
    }

    pub fn now_ms(&self) -> u64 {
        self.env.clock.now_ms()
    }

    /// A processing timestamp in microseconds, unique within the run (see
    /// [`Clock::timestamp_us`]). Reading the clock is not a step.
    pub fn timestamp_us(&mut self) -> u64 {
        self.env.clock.timestamp_us()
    }

    /// The number the next step will get (= the number of steps taken so far).
    pub fn steps_taken(&self) -> u64 {
        self.step_next
    }

    /// Which process this is: 0 for the first, +1 per restart.
    /// How many `op` requests reached the server and ran there, over the whole run (every
    /// incarnation and zombie), whether or not their reply arrived.
    pub fn served_requests(&self, op: &str) -> u64 {
        self.served(op).requests
    }

    /// What the server did for `op` requests over the whole run: how many it served and
    /// how many of those changed the file they named (see [`Served`]).
    pub fn served(&self, op: &str) -> Served {
        self.served_requests.get(op).copied().unwrap_or_default()
    }

    /// The run's first sink outage: the time it began (the refused request's) and the time
    /// of the first request the server served after it (None: none was).
    pub fn first_outage_ms(&self) -> Option<(u64, Option<u64>)> {
        self.first_outage_ms
    }

    pub fn incarnation(&self) -> u32 {
        self.incarnation
    }

    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    pub fn fingerprint(&self) -> Fingerprint {
        self.trace.fingerprint()
    }

    /// Keeps only the fingerprint of the trace, not its lines (see [`Trace::stream`]); call
    /// before the first step.
    pub fn stream_trace(&mut self) {
        self.trace.stream();
    }

    /// The plan this world runs.
    pub fn plan(&self) -> &FaultPlan {
        &self.plan
    }

    /// The plan that reproduces this run: the step faults that took effect, and the kill
    /// by the clock if the plan has one.
    pub fn plan_that_ran(&self) -> FaultPlan {
        FaultPlan::from_file(crate::fault::PlanFile {
            faults: self.injected.clone(),
            kill_at_ms: self.plan.kill_time_ms(),
        })
        .expect("faults take effect at distinct steps")
    }

    /// The planned faults that took effect so far, in order.
    pub fn faults_injected(&self) -> &[PlannedFault] {
        &self.injected
    }

    /// Where each fault of [`World::faults_injected`] took effect, in the same order.
    pub fn fault_sites(&self) -> &[FaultSite] {
        &self.injected_sites
    }

    /// The power losses whose planned crash state was beyond their step's count and wrapped
    /// (the injected fault, in [`World::faults_injected`], has the state that ran).
    pub fn wrapped_states(&self) -> &[WrappedState] {
        &self.wrapped
    }

    /// Waits in simulated time; waiting is not an effect and takes no step, but the process
    /// can be killed while it waits (a plan's kill by the clock).
    pub fn sleep_until(&mut self, deadline_ms: u64) -> Result<(), Crash> {
        if let Some(kill_ms) = self.pending_kill_ms() {
            if deadline_ms >= kill_ms {
                self.env.clock.sleep_until(kill_ms);
                return Err(self.kill_by_clock());
            }
        }
        self.env.clock.sleep_until(deadline_ms);
        Ok(())
    }

    fn pending_kill_ms(&self) -> Option<u64> {
        self.plan.kill_time_ms().filter(|_| !self.kill_done)
    }

    /// The plan's kill by the clock: the next step never happens.
    fn kill_by_clock(&mut self) -> Crash {
        assert!(!self.kill_done);
        self.kill_done = true;
        self.crash(self.step_next, CrashPoint::Before, CrashKind::Process)
    }

    /// Numbers the next step, traces it and returns the fault the plan aims at it.
    fn begin_step(
        &mut self,
        op: &'static str,
        target: String,
    ) -> Result<(u64, Option<Fault>), Crash> {
        if self
            .pending_kill_ms()
            .is_some_and(|kill_ms| self.now_ms() >= kill_ms)
        {
            return Err(self.kill_by_clock());
        }
        let step = self.step_next;
        assert!(step < STEPS_MAX, "run exceeded {STEPS_MAX} steps");
        self.step_next += 1;
        let fault = self.plan.at(step);
        self.fault_site = fault.map(|_| FaultSite {
            site: Site {
                op,
                target: target.clone(),
            },
            after_op: self.last_op,
        });
        self.last_op = op;
        self.trace_push(TraceLine::Step {
            step,
            time_ms: self.now_ms(),
            incarnation: self.zombie.map_or(self.incarnation, |(zombie, _)| zombie),
            op,
            target,
            data: None,
            fault,
        });
        Ok((step, fault))
    }

    /// Records a decision of the system under test in the trace (not a step: no fault applies).
    pub fn note(&mut self, text: impl Into<String>) {
        self.trace_push(TraceLine::Note {
            time_ms: self.now_ms(),
            incarnation: self.incarnation,
            text: NoteText::Text(text.into()),
        });
    }

    /// Performs one local effect (a disk operation, an input read) as one numbered step,
    /// injecting the plan's fault for that step. A planned disk error makes the step's disk
    /// operation fail with EIO.
    pub fn effect<T>(
        &mut self,
        op: &'static str,
        target: impl Into<String>,
        effect: impl FnOnce(&mut Env<S>) -> T,
    ) -> Result<T, Crash> {
        self.effect_with(op, target.into(), None, effect)
    }

    /// [`World::effect`] for a step that writes or reads bytes: once the effect ran, its
    /// line shows the digest of `data` (a file's running digest after the step, so a read
    /// costs no hashing and a write hashes its bytes once, as it writes them).
    pub fn effect_data<T>(
        &mut self,
        op: &'static str,
        target: impl Into<String>,
        data: Data<'_>,
        effect: impl FnOnce(&mut Env<S>) -> T,
    ) -> Result<T, Crash> {
        self.effect_with(op, target.into(), Some(data), effect)
    }

    fn effect_with<T>(
        &mut self,
        op: &'static str,
        target: String,
        data: Option<Data<'_>>,
        effect: impl FnOnce(&mut Env<S>) -> T,
    ) -> Result<T, Crash> {
        let (step, fault) = self.begin_step(op, target)?;
        self.crash_if_planned(step, fault, CrashPoint::Before)?;
        match fault {
            Some(Fault::DiskError) => self
                .env
                .disk
                .simulated_mut()
                .expect(SIMULATION_ONLY)
                .inject_error(),
            Some(
                Fault::SinkError
                | Fault::AckLost
                | Fault::SinkUnavailable { .. }
                | Fault::Zombie
                | Fault::MessageLost
                | Fault::SlowDelivery { .. },
            ) => {
                // A fault that does not apply leaves no mark: the run is the one without it,
                // so the plan that ran (which omits it) replays with the same fingerprint.
                self.trace.restate_fault(step, None);
            }
            _ => {}
        }
        let output = effect(&mut self.env);
        if fault == Some(Fault::DiskError) {
            let disk = self.env.disk.simulated_mut().expect(SIMULATION_ONLY);
            if disk.clear_injected_error() {
                // The step did no disk operation it could fail: no mark, as above.
                self.trace.restate_fault(step, None);
            } else {
                self.injected_at(step, Fault::DiskError);
            }
        }
        if let Some(data) = data {
            self.set_step_data(step, data);
        }
        self.record_crash_state_count(step);
        self.evict_if_planned(step, fault);
        self.crash_if_planned(step, fault, CrashPoint::After)?;
        self.record_step_line();
        Ok(output)
    }

    /// Sends one request to the sink as one numbered step. The plan can make it fail before
    /// it takes effect, lose its acknowledgement after it took effect, or start an outage.
    pub fn request<T>(
        &mut self,
        op: &'static str,
        target: impl Into<String>,
        effect: impl FnOnce(&mut Env<S>) -> T,
    ) -> Result<Result<T, RequestError>, Crash> {
        self.request_with(op, target.into(), None, effect)
    }

    /// [`World::request`] for a request that carries or writes bytes: when the sink served
    /// it (its effect ran), its line shows the digest of `data` (the sink file's running
    /// digest after it, or the payload's).
    pub fn request_data<T>(
        &mut self,
        op: &'static str,
        target: impl Into<String>,
        data: Data<'_>,
        effect: impl FnOnce(&mut Env<S>) -> T,
    ) -> Result<Result<T, RequestError>, Crash> {
        self.request_with(op, target.into(), Some(data), effect)
    }

    fn request_with<T>(
        &mut self,
        op: &'static str,
        target: String,
        data: Option<Data<'_>>,
        effect: impl FnOnce(&mut Env<S>) -> T,
    ) -> Result<Result<T, RequestError>, Crash> {
        let (step, fault) = self.begin_step(op, target)?;
        self.crash_if_planned(step, fault, CrashPoint::Before)?;
        let now_ms = self.now_ms();
        match fault {
            Some(f @ (Fault::SinkError | Fault::AckLost)) => self.injected_at(step, f),
            Some(f @ Fault::SinkUnavailable { duration_ms }) => {
                self.injected_at(step, f);
                let until_ms = now_ms.saturating_add(duration_ms);
                self.env.sink_down_until_ms = self.env.sink_down_until_ms.max(until_ms);
                self.first_outage_ms.get_or_insert((now_ms, None));
            }
            // Does not apply to a sink request: no mark, as in `effect`.
            Some(Fault::DiskError | Fault::MessageLost | Fault::SlowDelivery { .. }) => {
                self.trace.restate_fault(step, None)
            }
            _ => {}
        }
        let outcome = if now_ms < self.env.sink_down_until_ms {
            Err(RequestError::Unavailable)
        } else if fault == Some(Fault::SinkError) {
            Err(RequestError::Refused)
        } else {
            let file_before = match data {
                Some(Data::File(name)) => self.env.disk.digest(name),
                _ => None,
            };
            let output = effect(&mut self.env);
            let changed_file = match data {
                Some(Data::File(name)) => self.env.disk.digest(name) != file_before,
                _ => false,
            };
            if let Some(data) = data {
                self.set_step_data(step, data);
            }
            let served = self.served_requests.entry(op).or_default();
            served.requests += 1;
            served.changed_file += u64::from(changed_file);
            if let Some((_, served_ms @ None)) = &mut self.first_outage_ms {
                *served_ms = Some(now_ms);
            }
            if fault == Some(Fault::AckLost) {
                Err(RequestError::Timeout)
            } else {
                Ok(output)
            }
        };
        self.record_crash_state_count(step);
        self.evict_if_planned(step, fault);
        self.crash_if_planned(step, fault, CrashPoint::After)?;
        if fault == Some(Fault::Zombie) {
            self.injected_at(step, Fault::Zombie);
            return Err(self.crash(step, CrashPoint::After, CrashKind::Zombie));
        }
        self.record_step_line();
        Ok(outcome)
    }

    /// Lets the zombie `incarnation` take at most `steps_max` steps (its steps are traced
    /// under its own incarnation); `end_zombie` gives the world back to the live process.
    pub fn begin_zombie(&mut self, incarnation: u32, steps_max: u64) {
        assert!(self.zombie.is_none());
        assert!(incarnation < self.incarnation);
        self.note(format!("zombie: p{incarnation} wakes up"));
        self.zombie = Some((incarnation, steps_max));
    }

    pub fn end_zombie(&mut self) {
        assert!(self.zombie.is_some());
        self.zombie = None;
    }

    /// After a crash: the process is gone; `restart_delay_ms` later a new one starts.
    /// The disk is as the crash left it (a power loss has already resolved it), unless its
    /// file system went read-only (btrfs after a failed fsync): then the restart is a reboot
    /// that mounts it again ([`Disk::remount`](crate::Disk::remount)), losing what no fsync
    /// made durable, since a process restarted on it could change nothing.
    pub fn restart(&mut self, restart_delay_ms: u64) {
        if let Some(disk) = self.env.disk.simulated_mut() {
            if disk.is_read_only() {
                let outcome = disk.remount();
                self.note(format!(
                    "remount: the file system was read-only after a failed fsync; {outcome}"
                ));
            }
        }
        self.env.clock.advance(restart_delay_ms);
        self.incarnation += 1;
        self.trace_push(TraceLine::Restart {
            time_ms: self.now_ms(),
            incarnation: self.incarnation,
        });
    }
}

mod crashes;
mod messages;
#[cfg(test)]
mod tests;

pub use messages::{Delivery, Sends};
