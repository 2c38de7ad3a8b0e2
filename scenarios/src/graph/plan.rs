//! A parallel job's plan file: the run (its input by name and digest, every knob, the seed),
//! the faults that ran and the schedule that ran, every choice. `keel replay --plan FILE`
//! alone replays it byte for byte and `keel shrink --plan FILE` shrinks it; `keel job run
//! --save-plan FILE` writes one.
//!
//! The events are named (a scenario, or a file by path) and pinned by their digest: a plan
//! replayed against events that changed since it was saved is refused, both digests named,
//! rather than replayed into a different run under the same name.

use crate::graph::GraphSpec;
use keel_engine::job::{JobConfig, KeyedEvent};
use keel_sim::disk::FsModel;
use keel_sim::fault::PlanFile;
use keel_sim::{FaultPlan, PlanError, PlannedFault, SchedulePolicy};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// What a job plan file holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedJobPlan {
    pub job: SavedJob,
    /// The faults, in step order.
    pub faults: Vec<PlannedFault>,
    /// The kill by the clock, if the plan has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kill_at_ms: Option<u64>,
    /// The schedule: the scheduler's choices, each an index into the actions enabled then;
    /// after the last, round-robin's.
    pub schedule: Vec<u32>,
}

/// The run a job plan belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedJob {
    /// A shipped scenario's name, or None with `events`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario: Option<String>,
    /// An events file's path, as it was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<String>,
    /// [`events_digest`] of the keyed events the run read (16 hex digits).
    pub events_digest: String,
    pub config: JobConfig,
    pub seed: u64,
    pub schedule_policy: SchedulePolicy,
    pub restart_delay_ms: u64,
    pub fs_model: FsModel,
}

/// The digest of a job's keyed events (partitions and keys included), as 16 hex digits.
pub fn events_digest(events: &[KeyedEvent]) -> String {
    let bytes = serde_json::to_vec(events).expect("events serialize");
    format!("{:016x}", keel_sim::fnv1a64(&bytes))
}

impl SavedJobPlan {
    /// The plan file of a run of `spec` that ran `plan` with `schedule`; `scenario` or
    /// `events` names where its events came from.
    pub fn of(
        spec: &GraphSpec,
        scenario: Option<String>,
        events: Option<String>,
        plan: &FaultPlan,
        schedule: &[u32],
    ) -> SavedJobPlan {
        assert!(
            scenario.is_some() != events.is_some(),
            "one source of events"
        );
        let PlanFile { faults, kill_at_ms } = plan.to_file();
        SavedJobPlan {
            job: SavedJob {
                scenario,
                events,
                events_digest: events_digest(&spec.events),
                config: spec.config,
                seed: spec.seed,
                schedule_policy: spec.schedule,
                restart_delay_ms: spec.restart_delay_ms,
                fs_model: spec.fs_model,
            },
            faults,
            kill_at_ms,
            schedule: schedule.to_vec(),
        }
    }

    /// The fault plan; two faults at one step are an error.
    pub fn plan(&self) -> Result<FaultPlan, PlanError> {
        FaultPlan::from_file(PlanFile {
            faults: self.faults.clone(),
            kill_at_ms: self.kill_at_ms,
        })
    }

    /// The run to replay on `events` (which the caller read from where the plan names them):
    /// an error naming both digests if they are not the events the plan was saved with.
    pub fn spec(&self, events: Vec<KeyedEvent>) -> Result<GraphSpec, String> {
        let digest = events_digest(&events);
        if digest != self.job.events_digest {
            return Err(format!(
                "the events changed since the plan was saved: their digest is {digest}, the plan's is {}",
                self.job.events_digest
            ));
        }
        self.job.config.validate()?;
        Ok(GraphSpec {
            events: Arc::from(events),
            config: self.job.config,
            plan: self.plan().map_err(|e| e.to_string())?,
            seed: self.job.seed,
            schedule: self.job.schedule_policy,
            script: self.schedule.clone(),
            round_robin_after_script: true,
            restart_delay_ms: self.job.restart_delay_ms,
            fs_model: self.job.fs_model,
        })
    }

    /// The file's text: pretty JSON and a final newline.
    pub fn to_pretty_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("plans serialize") + "\n"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::run;
    use keel_sim::{CrashPoint, Fault};

    fn spec() -> GraphSpec {
        let events: Vec<KeyedEvent> = (0..12)
            .map(|i| KeyedEvent {
                ts: i,
                key: format!("k{}", i % 3),
                value: i + 1,
                partition: (i % 2) as u32,
            })
            .collect();
        GraphSpec {
            events: events.into(),
            config: JobConfig::default(),
            plan: FaultPlan::none(),
            seed: 5,
            schedule: SchedulePolicy::Random,
            script: Vec::new(),
            round_robin_after_script: false,
            restart_delay_ms: 500,
            fs_model: FsModel::Posix,
        }
    }

    #[test]
    fn a_saved_plan_replays_its_run_byte_for_byte_and_refuses_other_events() {
        let point = GraphSpec {
            plan: FaultPlan::new([PlannedFault {
                step: 40,
                fault: Fault::ProcessCrash {
                    at: CrashPoint::After,
                },
            }])
            .unwrap(),
            ..spec()
        };
        let ran = run(&point);
        assert_eq!(ran.crashes.len(), 1);
        let saved = SavedJobPlan::of(
            &point,
            None,
            Some("e.jsonl".into()),
            &ran.world.plan_that_ran(),
            &ran.schedule,
        );
        let text = saved.to_pretty_json();
        let read: SavedJobPlan = serde_json::from_str(&text).unwrap();
        assert_eq!(read, saved);
        // Another seed in the file's knobs would draw another schedule: the script rules.
        let replayed = run(&read.spec(point.events.to_vec()).unwrap());
        assert_eq!(replayed.fingerprint(), ran.fingerprint());
        assert_eq!(
            replayed.world.trace().text_lines(),
            ran.world.trace().text_lines()
        );
        let mut changed = point.events.to_vec();
        changed[3].value += 1;
        let error = read.spec(changed).unwrap_err();
        assert!(error.contains(&saved.job.events_digest), "{error}");
        assert!(error.starts_with("the events changed"), "{error}");
    }
}
