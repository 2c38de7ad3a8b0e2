//! Which task of a parallel job a step belongs to, for the sweep's report: a crash at a
//! coordinator step (trigger, acknowledgement, decline, the metadata file, removing old
//! checkpoints) is Flink's JobManager failover with HA, and like every crash it restarts the
//! whole job from the newest completed checkpoint; the report says how many points of each
//! fault kind fell on each task's steps, so a user sees that every one was tried.
//!
//! An action's steps are its task's: the first names the action (`source.read`,
//! `operator.take`, `coord.ack`...), the disk steps after it (a snapshot, a pre-commit, the
//! metadata) are the same task's. Steps before the first action of an incarnation are its
//! recovery's.

use keel_engine::job::Action;
use keel_sim::TraceLine;
use serde::Serialize;
use std::fmt;

/// The task a step belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TaskClass {
    Coordinator,
    Sources,
    Operators,
    Sink,
    /// An incarnation's start: reading the newest checkpoint, resolving the sink.
    Recovery,
}

impl TaskClass {
    pub fn name(&self) -> &'static str {
        match self {
            TaskClass::Coordinator => "coordinator",
            TaskClass::Sources => "sources",
            TaskClass::Operators => "operators",
            TaskClass::Sink => "sink",
            TaskClass::Recovery => "recovery",
        }
    }

    /// The task whose action `action` is.
    pub fn of_action(action: &Action) -> TaskClass {
        match action {
            Action::SourceRead(_) | Action::SourceBarrier(_) => TaskClass::Sources,
            Action::OperatorTake { .. } => TaskClass::Operators,
            Action::SinkTake { .. } | Action::Commit => TaskClass::Sink,
            Action::Trigger | Action::Acknowledge | Action::Decline => TaskClass::Coordinator,
        }
    }

    /// The task of an action whose first step's operation is `op` (None: not an action's
    /// first step).
    pub fn of_first_op(op: &str) -> Option<TaskClass> {
        Some(match op {
            "source.read" | "source.barrier" => TaskClass::Sources,
            "operator.take" => TaskClass::Operators,
            "sink.take" | "sink.notified" => TaskClass::Sink,
            "coord.trigger" | "coord.ack" | "coord.decline" => TaskClass::Coordinator,
            _ => return None,
        })
    }
}

impl fmt::Display for TaskClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether a fault of `kind` may apply at a step whose operation is `op`: a lost message
/// where a control message is received, a slow delivery where items go on a channel, the
/// others anywhere. Whether it does, its run says (`keel_sim::world::messages`): an
/// operator's take puts nothing on the sink's channel when it fires nothing.
pub fn fault_may_apply(kind: keel_sim::FaultKind, op: &str) -> bool {
    match kind {
        keel_sim::FaultKind::MessageLost => matches!(op, "coord.ack" | "sink.notified"),
        keel_sim::FaultKind::SlowChannel => {
            matches!(op, "source.read" | "source.barrier" | "operator.take")
        }
        _ => true,
    }
}

/// Each step of a run's trace (in step order: index = step, from step 0) with its
/// operation and its task.
pub fn step_tasks<'a>(
    lines: impl Iterator<Item = &'a TraceLine>,
) -> Vec<(&'static str, TaskClass)> {
    let mut steps = Vec::new();
    let mut task = TaskClass::Recovery;
    for line in lines {
        match line {
            TraceLine::Step { op, .. } => {
                task = TaskClass::of_first_op(op).unwrap_or(task);
                steps.push((*op, task));
            }
            TraceLine::Restart { .. } => task = TaskClass::Recovery,
            _ => {}
        }
    }
    steps
}
