//! Fault plans: faults are data, a list of (step, fault), never `if`s scattered through the engine.
//!
//! Fault model (each fault is aimed at one step; `World` carries it out):
//! - a **process crash** (kill -9) just before or just after a step's effect: the process's
//!   memory is lost, every completed disk operation survives (the kernel's page cache is
//!   intact), and the runner restarts a fresh engine after a restart delay.
//! - a **power loss** just before or after a step's effect: the disk keeps only what its
//!   crash model lets survive (`disk.rs` states the rules), resolved to one numbered crash
//!   state so the run can be replayed; then the process restarts.
//! - a **disk error**: the step's disk operation fails with EIO; a failed fsync leaves the
//!   bytes it should have written unpersisted: the process still reads them, the disk does
//!   not hold them, and a second fsync returns 0 (ext4 and xfs; PostgreSQL's "fsyncgate").
//! - a **page eviction** after a step's effect: the kernel drops its clean pages (memory
//!   pressure), so bytes a failed fsync left unpersisted read as the disk holds them. It
//!   applies only where there are such bytes; elsewhere it does nothing and leaves no mark.
//! - **sink faults** at a sink request: the request fails before taking effect; it takes
//!   effect but the acknowledgement is lost; or the sink is unavailable for a while.
//! - a **zombie**: after a sink request the process is cut off and replaced; once the new
//!   process has recovered, the old one wakes up and retries its last write and its commit.
//!
//! - a **lost message** (`keel job` only): a control message a step receives never
//!   arrives: a task's acknowledgement of a checkpoint to the coordinator (`coord.ack`), or
//!   the coordinator's completion notification to the sink (`sink.notified`). The sender
//!   does not learn it (no retry, as an RPC whose reply nobody waits for); the receiver acts
//!   as if it never came. It applies only at a step that receives such a message
//!   ([`crate::World::message`] with `Sends::Message`); elsewhere it leaves no mark.
//! - a **slow delivery** (`keel job` only): the items a step puts on a channel between two
//!   tasks become visible to the consumer only `delay_ms` of simulated time later; the
//!   channel stays FIFO, so every item behind them waits too. Nothing is lost or reordered.
//!   It applies only at a step that delivers items into a channel (`Sends::Channel`).
//!
//! Neither applies to any step of the one-task engine, which sends no such message: there
//! they leave no mark, and no sweep or exploration of it draws them.
//!
//! - a **process crash at a simulated time** T: the process is killed the moment the clock
//!   reaches T, while it waits or just before the first step at or after T (the chapter's
//!   "kill -9 after 2.6 s").
//!
//! Steps are numbered from 0 across the whole run, restarts included, so a plan can also aim
//! at a step of a recovery.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// Whether a crash happens before the step's effect (the effect never happens) or after it
/// (the effect happened, the process dies before it can act on the result).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CrashPoint {
    Before,
    After,
}

impl fmt::Display for CrashPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CrashPoint::Before => "before",
            CrashPoint::After => "after",
        })
    }
}

/// One fault the world injects at a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Fault {
    /// kill -9 of the process, before or after the step's effect: every completed write
    /// survives (the page cache outlives the process).
    ProcessCrash { at: CrashPoint },
    /// The machine loses power before or after the step's effect: the disk is resolved to
    /// crash state number `state` (see `disk::power_loss`), then the process restarts.
    PowerLoss { at: CrashPoint, state: u64 },
    /// A power loss resolved to the representative of class `class` of the step's crash
    /// states (see `disk::power_loss::classes`): every state of the class leads to the same
    /// run, given what the system reads after a power loss ([`crate::World::read_after_power_loss`]).
    /// With `by_tail`, the classes are split by tail (`CrashReaders::split_tails`): every
    /// state of the class also leads to the same steps, so a later fault lands alike in all.
    PowerLossClass {
        at: CrashPoint,
        class: u64,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        by_tail: bool,
    },
    /// The step's disk operation fails with EIO; a failed fsync leaves the bytes it should
    /// have written unpersisted (read from the page cache, not on disk).
    DiskError,
    /// The sink request fails before it takes effect.
    SinkError,
    /// The sink request takes effect but its acknowledgement is lost.
    AckLost,
    /// The sink becomes unavailable for `duration_ms` of simulated time, starting at this request.
    SinkUnavailable { duration_ms: u64 },
    /// After the request took effect the process is cut off (a long GC pause, a partition):
    /// it is declared dead and replaced, then wakes up as a zombie and retries its last
    /// write and its commit with its old identity.
    Zombie,
    /// After the step's effect the kernel drops every clean page: bytes a failed fsync left
    /// unpersisted read as the disk holds them (the old bytes, or zeros).
    PageEviction,
    /// The control message the step receives (a checkpoint acknowledgement, a completion
    /// notification) never arrives: the receiver goes on as if it had not been sent.
    MessageLost,
    /// The items the step puts on a channel become visible to its consumer only `delay_ms`
    /// of simulated time later (the items behind them wait too).
    SlowDelivery { delay_ms: u64 },
}

impl Fault {
    pub fn kind(&self) -> FaultKind {
        match self {
            Fault::ProcessCrash { .. } => FaultKind::ProcessCrash,
            Fault::PowerLoss { .. } | Fault::PowerLossClass { .. } => FaultKind::PowerLoss,
            Fault::DiskError => FaultKind::DiskError,
            Fault::SinkError => FaultKind::SinkError,
            Fault::AckLost => FaultKind::AckLost,
            Fault::SinkUnavailable { .. } => FaultKind::SinkUnavailable,
            Fault::Zombie => FaultKind::Zombie,
            Fault::PageEviction => FaultKind::PageEviction,
            Fault::MessageLost => FaultKind::MessageLost,
            Fault::SlowDelivery { .. } => FaultKind::SlowChannel,
        }
    }
}

impl Fault {
    /// The fault's text (what `Display` writes) where it holds no number: a sweep writes
    /// one for each of millions of points into its fingerprint, without the formatter.
    pub fn fixed_text(&self) -> Option<&'static str> {
        Some(match self {
            Fault::ProcessCrash {
                at: CrashPoint::Before,
            } => "process-crash before",
            Fault::ProcessCrash {
                at: CrashPoint::After,
            } => "process-crash after",
            Fault::DiskError => "disk-error",
            Fault::SinkError => "sink-error",
            Fault::AckLost => "ack-lost",
            Fault::Zombie => "zombie",
            Fault::PageEviction => "page-eviction",
            Fault::MessageLost => "message-lost",
            Fault::PowerLoss { .. }
            | Fault::PowerLossClass { .. }
            | Fault::SinkUnavailable { .. }
            | Fault::SlowDelivery { .. } => return None,
        })
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::PowerLoss { at, state } => write!(f, "power-loss {at} state {state}"),
            Fault::PowerLossClass {
                at,
                class,
                by_tail: false,
            } => write!(f, "power-loss {at} class {class}"),
            Fault::PowerLossClass {
                at,
                class,
                by_tail: true,
            } => write!(f, "power-loss {at} tail-class {class}"),
            Fault::SinkUnavailable { duration_ms } => {
                write!(f, "sink-unavailable {duration_ms}ms")
            }
            Fault::SlowDelivery { delay_ms } => write!(f, "slow-channel {delay_ms}ms"),
            _ => f.write_str(self.fixed_text().expect("a fault without a number")),
        }
    }
}

/// The kinds of fault, without their parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    ProcessCrash,
    PowerLoss,
    DiskError,
    SinkError,
    AckLost,
    SinkUnavailable,
    Zombie,
    PageEviction,
    MessageLost,
    SlowChannel,
}

impl FaultKind {
    /// Every kind (the last two apply only to a parallel job's steps: see [`FaultKind::JOB`]).
    pub const ALL: [FaultKind; 10] = [
        FaultKind::ProcessCrash,
        FaultKind::PowerLoss,
        FaultKind::DiskError,
        FaultKind::SinkError,
        FaultKind::AckLost,
        FaultKind::SinkUnavailable,
        FaultKind::Zombie,
        FaultKind::PageEviction,
        FaultKind::MessageLost,
        FaultKind::SlowChannel,
    ];

    /// The kinds of a parallel job's own faults (`keel job`): they apply to no step of the
    /// one-task engine, which neither sweeps nor draws them.
    pub const JOB: [FaultKind; 2] = [FaultKind::MessageLost, FaultKind::SlowChannel];

    /// The kinds a sweep or an exploration uses unless told otherwise (not the zombie, nor
    /// the page eviction, which does something only after a failed fsync: ask for them).
    pub const DEFAULT: [FaultKind; 6] = [
        FaultKind::ProcessCrash,
        FaultKind::PowerLoss,
        FaultKind::DiskError,
        FaultKind::SinkError,
        FaultKind::AckLost,
        FaultKind::SinkUnavailable,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            FaultKind::ProcessCrash => "process-crash",
            FaultKind::PowerLoss => "power-loss",
            FaultKind::DiskError => "disk-error",
            FaultKind::SinkError => "sink-error",
            FaultKind::AckLost => "ack-lost",
            FaultKind::SinkUnavailable => "sink-unavailable",
            FaultKind::Zombie => "zombie",
            FaultKind::PageEviction => "page-eviction",
            FaultKind::MessageLost => "message-lost",
            FaultKind::SlowChannel => "slow-channel",
        }
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A fault aimed at one step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PlannedFault {
    pub step: u64,
    pub fault: Fault,
}

/// A plan asked for two faults at one step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanError {
    pub step: u64,
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the plan has more than one fault at step {}", self.step)
    }
}

impl std::error::Error for PlanError {}

/// A fault plan as a file holds it (JSON): the faults in step order and the kill time.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanFile {
    pub faults: Vec<PlannedFault>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kill_at_ms: Option<u64>,
}

/// Which fault (if any) to inject at each step. At most one fault per step.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultPlan {
    by_step: BTreeMap<u64, Fault>,
    /// kill -9 when the simulated clock reaches this time (at most once per run).
    kill_at_ms: Option<u64>,
}

impl FaultPlan {
    /// The plan that injects nothing.
    pub fn none() -> Self {
        FaultPlan::default()
    }

    pub fn new(faults: impl IntoIterator<Item = PlannedFault>) -> Result<Self, PlanError> {
        let mut by_step = BTreeMap::new();
        for planned in faults {
            if by_step.insert(planned.step, planned.fault).is_some() {
                return Err(PlanError { step: planned.step });
            }
        }
        Ok(FaultPlan {
            by_step,
            kill_at_ms: None,
        })
    }

    /// The plan that kills the process when the simulated clock reaches `kill_at_ms`.
    pub fn kill_at_ms(kill_at_ms: u64) -> Self {
        FaultPlan {
            by_step: BTreeMap::new(),
            kill_at_ms: Some(kill_at_ms),
        }
    }

    /// When the plan kills the process by the clock, if it does.
    pub fn kill_time_ms(&self) -> Option<u64> {
        self.kill_at_ms
    }

    pub fn at(&self, step: u64) -> Option<Fault> {
        self.by_step.get(&step).copied()
    }

    /// How many faults the plan injects.
    pub fn len(&self) -> usize {
        self.by_step.len() + usize::from(self.kill_at_ms.is_some())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The plan as a file holds it.
    pub fn to_file(&self) -> PlanFile {
        PlanFile {
            faults: self.faults(),
            kill_at_ms: self.kill_at_ms,
        }
    }

    /// The plan a file holds; two faults at one step are an error.
    pub fn from_file(file: PlanFile) -> Result<FaultPlan, PlanError> {
        let mut plan = FaultPlan::new(file.faults)?;
        plan.kill_at_ms = file.kill_at_ms;
        Ok(plan)
    }

    /// The faults in step order.
    pub fn faults(&self) -> Vec<PlannedFault> {
        self.iter().collect()
    }

    /// The faults in step order, not collected: what the per-step checks of a sweep's
    /// millions of points read (collecting them was 3% of a ch04 depth-2 sweep).
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = PlannedFault> + '_ {
        self.by_step
            .iter()
            .map(|(&step, &fault)| PlannedFault { step, fault })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_rejects_two_faults_at_one_step() {
        let crash = Fault::ProcessCrash {
            at: CrashPoint::After,
        };
        let twice = [
            PlannedFault {
                step: 3,
                fault: crash,
            },
            PlannedFault {
                step: 3,
                fault: crash,
            },
        ];
        assert_eq!(FaultPlan::new(twice), Err(PlanError { step: 3 }));
    }

    #[test]
    fn a_plan_with_a_job_fault_round_trips_through_its_file() {
        let plan = FaultPlan::new([
            PlannedFault {
                step: 4,
                fault: Fault::MessageLost,
            },
            PlannedFault {
                step: 9,
                fault: Fault::SlowDelivery { delay_ms: 250 },
            },
        ])
        .unwrap();
        let text = serde_json::to_string(&plan.to_file()).unwrap();
        assert_eq!(
            text,
            r#"{"faults":[{"step":4,"fault":{"kind":"message-lost"}},{"step":9,"fault":{"kind":"slow-delivery","delay_ms":250}}]}"#
        );
        let back: PlanFile = serde_json::from_str(&text).unwrap();
        assert_eq!(FaultPlan::from_file(back).unwrap(), plan);
        assert_eq!(Fault::MessageLost.to_string(), "message-lost");
        assert_eq!(
            Fault::SlowDelivery { delay_ms: 250 }.to_string(),
            "slow-channel 250ms"
        );
        assert_eq!(Fault::MessageLost.kind(), FaultKind::MessageLost);
        assert_eq!(
            Fault::SlowDelivery { delay_ms: 1 }.kind(),
            FaultKind::SlowChannel
        );
    }
}
