//! Every schedule of a small parallel job, crossed with a process crash at every step.
//!
//! Reduction (state caching, as stateright's and SPIN's): a run of the job is a function of
//! its state between two actions (every task, channel and the coordinator as
//! `Job::state_text` writes them; the disk as the process sees it, name by name, byte for
//! byte; the clock and step counter; whether the one crash has happened). Two schedule
//! prefixes that reach the same state have the same futures, so the enumeration explores
//! the futures of a state once and counts them for every prefix that reaches it. It never
//! skips a distinguishable order: whatever two prefixes could still do differently, their
//! states differ and both are explored. `reduce: false` explores every prefix on its own;
//! tests compare the two on small jobs (the same schedules, the same outcomes).
//!
//! A crash at step s (before or after its effect) is one more branch at every step of the
//! fault-free prefix (depth 1): the runner's restart (drop the job, keep the disk) and a
//! recovery follow, and the recovered job's schedules are enumerated in turn
//! (`after_crash_all`), or the recovered job runs the one schedule the seed's scheduler
//! picks (every schedule up to the crash, every crash point, one schedule after it).
//!
//! The job's own faults (`job_faults`: a lost message, a slow delivery) are branches of the
//! same kind: at every step of the fault-free prefix where the fault applies (the world
//! says so: it takes effect), one branch with it, after which the job goes on without a
//! restart (every schedule, or the seed's). A step where it does not apply is no point.
//! Every faulted point is also counted by its fault's kind and the task whose step it was
//! (`by_fault`).

use crate::graph::oracle::{judge_records, model, JobProperty, JobVerdict};
use crate::graph::tasks::TaskClass;
use crate::graph::{drive, GraphOutcome, GraphSpec, RESTARTS_MAX};
use keel_engine::job::sink::visible_lines;
use keel_engine::job::{Job, JobRecord, KeyedEvent};
use keel_engine::Interrupt;
use keel_sim::{CrashPoint, Fault, FaultKind, FaultPlan, PlannedFault, Scheduler, World};
use num_bigint::BigUint;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Distinct states an enumeration visits at most before it stops (not exhaustive).
pub const STATES_MAX_DEFAULT: u64 = 2_000_000;

/// What to enumerate.
#[derive(Clone, Debug)]
pub struct Enumeration {
    pub spec: GraphSpec,
    /// Cross every schedule with a process crash before and after every step.
    pub crashes: bool,
    /// Cross every schedule with each of these faults (`Fault::MessageLost`,
    /// `Fault::SlowDelivery`) at every step where it applies.
    pub job_faults: Vec<Fault>,
    /// State caching on (see the module header).
    pub reduce: bool,
    /// After a crash, every schedule of the recovered job too (true), or the one the seed's
    /// scheduler picks (false: the points are every schedule up to the crash, each crash
    /// point, and one schedule after it).
    pub after_crash_all: bool,
    pub states_max: u64,
}

/// One distinct outcome: what the consumer saw, and the first point that led to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub verdict: JobVerdict,
    /// How many (schedule, crash) points end this way.
    pub points: BigUint,
    /// The first: its schedule (choices) and crash, if any.
    pub example_schedule: Vec<u32>,
    pub example_crash: Option<PlannedFault>,
}

/// What an enumeration found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Enumerated {
    /// Every (schedule, crash) point: a schedule without a crash, or one crash point on a
    /// schedule, with the schedule after the recovery.
    pub points: BigUint,
    /// Of which without a crash.
    pub fault_free_points: BigUint,
    /// Distinct states explored (with `reduce`; every prefix's state without).
    pub states: u64,
    /// Distinct outcomes, by what the consumer saw (records in sink order) and the verdict.
    pub outcomes: BTreeMap<String, Outcome>,
    /// False when `states_max` stopped it.
    pub exhaustive: bool,
    /// The faulted points by their fault's kind and the task whose step it was: how many
    /// end in each outcome (keys of `outcomes`).
    pub by_fault: BTreeMap<(FaultKind, TaskClass), BTreeMap<String, BigUint>>,
}

/// How many points a fault kind had on a task's steps, how many distinct outcomes they
/// ended in, and how many of them broke an expected property.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultPoints {
    pub kind: FaultKind,
    pub task: TaskClass,
    pub points: BigUint,
    pub outcomes: usize,
    pub failing: BigUint,
}

impl Enumerated {
    /// The outcomes that break one of `expected`, with the properties they break.
    pub fn fault_points(&self, expected: &[JobProperty]) -> Vec<FaultPoints> {
        self.by_fault
            .iter()
            .map(|((kind, task), outcomes)| FaultPoints {
                kind: *kind,
                task: *task,
                points: outcomes.values().sum(),
                outcomes: outcomes.len(),
                failing: outcomes
                    .iter()
                    .filter(|(key, _)| !self.outcomes[*key].verdict.broken(expected).is_empty())
                    .map(|(_, points)| points)
                    .sum(),
            })
            .collect()
    }

    pub fn failing(&self, expected: &[JobProperty]) -> Vec<(&Outcome, Vec<JobProperty>)> {
        self.outcomes
            .values()
            .filter_map(|o| {
                let broken = o.verdict.broken(expected);
                (!broken.is_empty()).then_some((o, broken))
            })
            .collect()
    }
}

#[derive(Clone)]
struct Node {
    job: Job,
    world: World,
    crashed: bool,
    restarts: u32,
}

/// The futures of a state: how many points, and which outcomes (by key).
#[derive(Clone, Default)]
struct Futures {
    points: BigUint,
    fault_free_points: BigUint,
    /// Outcome id -> points that end in it.
    outcomes: BTreeMap<u32, BigUint>,
    /// The faulted points among them, by fault kind and task: outcome id -> points.
    by_fault: BTreeMap<(FaultKind, TaskClass), BTreeMap<u32, BigUint>>,
}

struct Search<'a> {
    enumeration: &'a Enumeration,
    expected: BTreeMap<(String, i64), i128>,
    partitions: Arc<Vec<Vec<KeyedEvent>>>,
    memo: HashMap<u128, Futures>,
    states: u64,
    stopped: bool,
    /// Outcome id -> its key in `outcomes`.
    outcome_keys: Vec<String>,
    outcomes: BTreeMap<String, (u32, Outcome)>,
    /// The current path: choices, and the crash once placed.
    path: Vec<u32>,
    crash: Option<PlannedFault>,
}

/// Enumerates every schedule of `enumeration.spec` (its plan is ignored), crossed with a
/// process crash at every step when asked.
pub fn enumerate(enumeration: &Enumeration) -> Enumerated {
    let spec = &enumeration.spec;
    let events: &[KeyedEvent] = &spec.events;
    let mut search = Search {
        enumeration,
        expected: model(events, spec.config.window_size),
        partitions: spec.partitions(),
        memo: HashMap::new(),
        states: 0,
        stopped: false,
        outcome_keys: Vec::new(),
        outcomes: BTreeMap::new(),
        path: Vec::new(),
        crash: None,
    };
    let mut spec_free = spec.clone();
    spec_free.plan = FaultPlan::none();
    let mut world = crate::graph::new_world(&spec_free);
    let job = Job::recover(&mut world, spec.config, search.partitions.clone())
        .expect("a fresh start takes no fault");
    let futures = search.explore(Node {
        job,
        world,
        crashed: false,
        restarts: 0,
    });
    for (id, points) in &futures.outcomes {
        let key = &search.outcome_keys[*id as usize];
        search
            .outcomes
            .get_mut(key)
            .expect("an outcome found")
            .1
            .points = points.clone();
    }
    Enumerated {
        points: futures.points,
        fault_free_points: futures.fault_free_points,
        states: search.states,
        outcomes: search
            .outcomes
            .into_iter()
            .map(|(key, (_, o))| (key, o))
            .collect(),
        exhaustive: !search.stopped,
        by_fault: futures
            .by_fault
            .iter()
            .map(|(class, outcomes)| {
                let by_key = outcomes
                    .iter()
                    .map(|(id, points)| (search.outcome_keys[*id as usize].clone(), points.clone()))
                    .collect();
                (*class, by_key)
            })
            .collect(),
    }
}

impl Search<'_> {
    /// A state's key: a 128-bit digest of the job's future text, the disk as the process
    /// sees it and whether the crash has happened.
    fn key(node: &Node) -> u128 {
        let disk = &node.world.env().disk;
        let mut digest = Digest128::default();
        digest.write(node.job.future_text(node.world.now_ms()).as_bytes());
        for name in disk.list() {
            digest.write(b"\0file\0");
            digest.write(name.as_bytes());
            digest.write(b"\0");
            digest.write(&disk.read(&name).unwrap_or_default());
        }
        digest.write(if node.crashed {
            b"\0crashed"
        } else {
            b"\0running"
        });
        digest.finish()
    }

    fn explore(&mut self, mut node: Node) -> Futures {
        // Clones of the world copy its trace: keep none (the fingerprint still covers it).
        node.world.forget_trace();
        // Time passes with no choice while nothing is enabled.
        loop {
            if node.job.finished() {
                return self.terminal(&node, true);
            }
            if !node.job.enabled(node.world.now_ms()).is_empty() {
                break;
            }
            match node.job.next_timer_ms(node.world.now_ms()) {
                Some(timer_ms) => node
                    .world
                    .sleep_until(timer_ms)
                    .expect("no kill by the clock"),
                None => return self.terminal(&node, false),
            }
        }
        let key = self.enumeration.reduce.then(|| Search::key(&node));
        if let Some(futures) = key.as_ref().and_then(|k| self.memo.get(k)) {
            return futures.clone();
        }
        self.states += 1;
        if self.states > self.enumeration.states_max {
            self.stopped = true;
            return Futures::default();
        }
        let enabled = node.job.enabled(node.world.now_ms());
        let mut futures = Futures::default();
        for (index, action) in enabled.iter().enumerate() {
            self.path.push(index as u32);
            let mut child = node.clone();
            let step_first = child.world.steps_taken();
            child
                .world
                .sleep_until(child.world.now_ms() + self.enumeration.spec.config.action_ms)
                .expect("no kill by the clock");
            let done = child.job.perform(&mut child.world, *action);
            let steps = child.world.steps_taken() - step_first;
            let child_futures = match done {
                Ok(()) => self.explore(child),
                Err(interrupt) => self.after_interrupt(child, interrupt),
            };
            add(&mut futures, &child_futures);
            if !node.crashed {
                let task = TaskClass::of_action(action);
                let action_ms = self.enumeration.spec.config.action_ms;
                for k in 0..steps {
                    for fault in self.faults() {
                        let planned = PlannedFault {
                            step: step_first + k,
                            fault,
                        };
                        let mut faulty = node.clone();
                        faulty.world = node
                            .world
                            .fork(FaultPlan::new([planned]).expect("one fault"), false);
                        faulty
                            .world
                            .sleep_until(faulty.world.now_ms() + action_ms)
                            .expect("no kill by the clock");
                        let done = faulty.job.perform(&mut faulty.world, *action);
                        if faulty.world.faults_injected().is_empty() {
                            continue; // Does not apply at this step: no point.
                        }
                        self.crash = Some(planned);
                        let fault_futures = match done {
                            Ok(()) => {
                                faulty.crashed = true;
                                if self.enumeration.after_crash_all {
                                    self.explore(faulty)
                                } else {
                                    self.one_schedule_after(faulty, true)
                                }
                            }
                            Err(interrupt) => self.after_interrupt(faulty, interrupt),
                        };
                        self.crash = None;
                        add(&mut futures, &fault_futures);
                        let by_kind = futures.by_fault.entry((fault.kind(), task)).or_default();
                        for (id, points) in &fault_futures.outcomes {
                            *by_kind.entry(*id).or_default() += points;
                        }
                    }
                }
            }
            self.path.pop();
            if self.stopped {
                break;
            }
        }
        if let (Some(key), false) = (key, self.stopped) {
            self.memo.insert(key, futures.clone());
        }
        futures
    }

    /// The faults tried at each step of the fault-free prefix.
    fn faults(&self) -> Vec<Fault> {
        let crashes = [CrashPoint::Before, CrashPoint::After]
            .map(|at| Fault::ProcessCrash { at })
            .into_iter()
            .filter(|_| self.enumeration.crashes);
        crashes
            .chain(self.enumeration.job_faults.iter().copied())
            .collect()
    }

    /// The runner's part after an interrupt: restart, recover, go on.
    fn after_interrupt(&mut self, mut node: Node, interrupt: Interrupt) -> Futures {
        if let Interrupt::Failed(_) = interrupt {
            return self.terminal(&node, false);
        }
        node.restarts += 1;
        node.crashed = true;
        if node.restarts > RESTARTS_MAX {
            return self.terminal(&node, false);
        }
        node.world.restart(self.enumeration.spec.restart_delay_ms);
        if !self.enumeration.after_crash_all {
            return self.one_schedule_after(node, false);
        }
        match Job::recover(
            &mut node.world,
            self.enumeration.spec.config,
            self.partitions.clone(),
        ) {
            Ok(job) => {
                node.job = job;
                self.explore(node)
            }
            Err(interrupt) => self.after_interrupt(node, interrupt),
        }
    }

    /// Runs the job to its end under the seed's scheduler (after a crash, from a recovery;
    /// after a fault the job survives, `goes_on`, as it is), whose choices join the path (a
    /// replay of the example scripts them).
    fn one_schedule_after(&mut self, node: Node, goes_on: bool) -> Futures {
        let spec = &self.enumeration.spec;
        let scheduler = Scheduler::new(node.world.seeds(), spec.schedule);
        let start = goes_on.then(|| node.job.clone());
        let ran = drive(spec, node.world, scheduler, start);
        let mut end = Node {
            job: node.job,
            world: ran.world,
            crashed: true,
            restarts: node.restarts,
        };
        end.world.forget_trace();
        let depth = self.path.len();
        self.path.extend_from_slice(&ran.schedule);
        let futures = self.terminal(&end, ran.outcome == GraphOutcome::Completed);
        self.path.truncate(depth);
        futures
    }

    fn terminal(&mut self, node: &Node, completed: bool) -> Futures {
        let sink = self.enumeration.spec.config.sink;
        let mut records = Vec::new();
        let mut corrupt = 0;
        let lines = visible_lines(&node.world.env().disk, sink);
        for line in &lines {
            match JobRecord::parse_line(line) {
                Some(record) => records.push(record),
                None => corrupt += 1,
            }
        }
        let verdict = judge_records(&records, corrupt, &self.expected, completed);
        let key = format!("{verdict:?}\n{}", lines.join("\n"));
        let next_id = self.outcomes.len() as u32;
        let id = match self.outcomes.get_mut(&key) {
            Some((id, _)) => *id,
            None => {
                self.outcomes.insert(
                    key.clone(),
                    (
                        next_id,
                        Outcome {
                            verdict,
                            points: BigUint::ZERO,
                            example_schedule: self.path.clone(),
                            example_crash: self.crash,
                        },
                    ),
                );
                self.outcome_keys.push(key);
                next_id
            }
        };
        Futures {
            points: BigUint::from(1u8),
            fault_free_points: BigUint::from(u8::from(!node.crashed)),
            outcomes: BTreeMap::from([(id, BigUint::from(1u8))]),
            by_fault: BTreeMap::new(),
        }
    }
}

/// Two independent FNV-1a 64 streams (different offset bases) as one 128-bit digest: the
/// same on every machine. Two distinct states share a key with probability about
/// n^2 / 2^129 for n states (below 10^-20 for the bound of `STATES_MAX_DEFAULT`).
struct Digest128 {
    a: u64,
    b: u64,
}

impl Default for Digest128 {
    fn default() -> Self {
        Digest128 {
            a: 0xcbf2_9ce4_8422_2325,
            b: 0x6c62_272e_07bb_0142,
        }
    }
}

impl Digest128 {
    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.a = (self.a ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3);
            self.b = (self.b ^ u64::from(*byte))
                .wrapping_mul(0x0000_0100_0000_01b3)
                .rotate_left(5);
        }
    }

    fn finish(&self) -> u128 {
        (u128::from(self.a) << 64) | u128::from(self.b)
    }
}

/// Adds a child's futures to a parent's.
fn add(into: &mut Futures, child: &Futures) {
    into.points += &child.points;
    into.fault_free_points += &child.fault_free_points;
    for (id, points) in &child.outcomes {
        *into.outcomes.entry(*id).or_default() += points;
    }
    for (class, outcomes) in &child.by_fault {
        let into = into.by_fault.entry(*class).or_default();
        for (id, points) in outcomes {
            *into.entry(*id).or_default() += points;
        }
    }
}
