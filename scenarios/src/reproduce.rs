//! The command lines that replay a fault plan: `keel run --fault ...` for one fault, else
//! `keel replay --plan` on the plan written to a file.

use keel_engine::SinkKind;
use keel_sim::{Fault, FaultPlan, PlannedFault};

/// The command line that replays one point alone.
pub fn reproduce_point(prefix: &str, sink: SinkKind, planned: &PlannedFault) -> String {
    let mut command = format!(
        "{prefix} --sink {sink} --fault {} --at-step {}",
        planned.fault.kind(),
        planned.step
    );
    match planned.fault {
        Fault::PowerLoss { state, .. } => command.push_str(&format!(" --crash-state {state}")),
        Fault::SinkUnavailable { duration_ms } => {
            command.push_str(&format!(" --outage-ms {duration_ms}"))
        }
        _ => {}
    }
    command
}

/// One command that replays `plan` on `sink`: `keel run --fault ...` for a single step fault,
/// else writing the plan to a file and `keel replay --plan` on it.
pub fn replay_plan_command(
    scenario_command: &dyn Fn(&str, u64) -> String,
    seed: u64,
    sink: SinkKind,
    plan: &FaultPlan,
) -> String {
    let faults = plan.faults();
    if let ([only], None) = (faults.as_slice(), plan.kill_time_ms()) {
        return reproduce_point(&scenario_command("run", seed), sink, only);
    }
    let json = serde_json::to_string(&plan.to_file()).expect("plans serialize");
    format!(
        "echo '{json}' > plan.json && {} --sink {sink} --plan plan.json",
        scenario_command("replay", seed)
    )
}
