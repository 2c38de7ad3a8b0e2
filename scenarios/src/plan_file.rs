//! `SavedPlan`: what a plan file holds. The faults of a run and, when keel wrote the file
//! (`--save-plan`), the run they belong to: the scenario spec (input, every knob, the seed),
//! the sink and the consumer view. Such a file is self-contained: `keel replay --plan FILE`
//! alone reproduces the run, fingerprint included. A file of faults only
//! (`{"faults": [...]}`, as older keel wrote them) still reads; the command line then gives
//! the rest.

use crate::runner::View;
use crate::spec::ScenarioSpec;
use keel_engine::SinkKind;
use keel_sim::fault::PlanFile;
use keel_sim::{FaultPlan, PlanError, PlannedFault};
use serde::{Deserialize, Serialize};

/// A plan file: the run (when recorded) and its faults.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedPlan {
    /// The input and every engine and world knob of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<ScenarioSpec>,
    /// The sink the run wrote to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sink: Option<SinkKind>,
    /// The consumer view judged (transactional sink only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<View>,
    /// The faults, in step order, with the crash states that ran.
    pub faults: Vec<PlannedFault>,
    /// The kill by the clock, if the plan has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kill_at_ms: Option<u64>,
}

impl SavedPlan {
    /// A self-contained plan file: `plan` on `sink` (judged in `view`) with `spec`.
    pub fn of(
        spec: &ScenarioSpec,
        sink: SinkKind,
        view: Option<View>,
        plan: &FaultPlan,
    ) -> SavedPlan {
        let PlanFile { faults, kill_at_ms } = plan.to_file();
        // The scenario by name, even when it was the default one.
        let spec = ScenarioSpec {
            scenario: spec.events.is_none().then(|| spec.label()),
            ..spec.clone()
        };
        SavedPlan {
            spec: Some(spec),
            sink: Some(sink),
            view,
            faults,
            kill_at_ms,
        }
    }

    /// The fault plan; two faults at one step are an error.
    pub fn plan(&self) -> Result<FaultPlan, PlanError> {
        FaultPlan::from_file(PlanFile {
            faults: self.faults.clone(),
            kill_at_ms: self.kill_at_ms,
        })
    }

    /// The file's text: pretty JSON and a final newline.
    pub fn to_pretty_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("plans serialize") + "\n"
    }

    /// One line of JSON (for a shell command that writes the file).
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).expect("plans serialize")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_engine::{CheckpointProtocol, KeyScheme};
    use keel_sim::{CrashPoint, Fault};

    fn spec() -> ScenarioSpec {
        ScenarioSpec {
            scenario: Some("ch04".to_string()),
            events: None,
            window: 10,
            out_of_orderness: 5,
            checkpoint_every: 5,
            event_interval_ms: 300,
            restart_delay_ms: 500,
            protocol: CheckpointProtocol::CheckpointBeforeSinkSync,
            key: KeyScheme::EventIndex,
            transaction_timeout_ms: 60_000,
            seed: 7,
            sector_size_bytes: 512,
            fs_model: keel_sim::disk::FsModel::Posix,
            allowed_lateness: None,
            state_backend: keel_engine::StateBackend::Full,
            events_digest: Some("0123456789abcdef".to_string()),
        }
    }

    #[test]
    fn a_saved_plan_round_trips_and_an_old_one_still_reads() {
        let plan = FaultPlan::new([PlannedFault {
            step: 23,
            fault: Fault::PowerLoss {
                at: CrashPoint::After,
                state: 3,
            },
        }])
        .unwrap();
        let saved = SavedPlan::of(&spec(), SinkKind::Idempotent, None, &plan);
        let read: SavedPlan = serde_json::from_str(&saved.to_pretty_json()).unwrap();
        assert_eq!(read, saved);
        assert_eq!(read.plan().unwrap(), plan);
        let old: SavedPlan = serde_json::from_str(
            r#"{"faults": [{"step": 23, "fault": {"kind": "power-loss", "at": "after", "state": 3}}]}"#,
        )
        .unwrap();
        assert_eq!((&old.spec, old.sink, old.view), (&None, None, None));
        assert_eq!(old.plan().unwrap(), plan);
    }
}
