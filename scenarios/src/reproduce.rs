//! The command lines that replay a fault plan: `keel run --fault ...` for one fault, else
//! `keel replay --plan` on the plan written to a self-contained plan file.

use crate::plan_file::SavedPlan;
use crate::property::Expectation;
use crate::runner::View;
use crate::spec::ScenarioSpec;
use keel_engine::SinkKind;
use keel_sim::{CrashPoint, Fault, FaultPlan, PlannedFault};

/// The command line that replays one point alone.
pub fn reproduce_point(prefix: &str, sink: SinkKind, planned: &PlannedFault) -> String {
    let mut command = format!(
        "{prefix} --sink {sink} --fault {} --at-step {}",
        planned.fault.kind(),
        planned.step
    );
    match planned.fault {
        Fault::ProcessCrash {
            at: CrashPoint::Before,
        } => command.push_str(" --at before"),
        Fault::PowerLoss { at, state } => {
            if at == CrashPoint::Before {
                command.push_str(" --at before");
            }
            command.push_str(&format!(" --crash-state {state}"))
        }
        Fault::PowerLossClass {
            at,
            class,
            by_tail: false,
        } => {
            if at == CrashPoint::Before {
                command.push_str(" --at before");
            }
            command.push_str(&format!(" --crash-state-class {class}"))
        }
        Fault::PowerLossClass { by_tail: true, .. } => {
            unreachable!("a class split by tail is replayed from a plan file")
        }
        Fault::SinkUnavailable { duration_ms } => {
            command.push_str(&format!(" --outage-ms {duration_ms}"))
        }
        _ => {}
    }
    command
}

/// One command that replays `plan` on `sink` of `spec`, judged in `view`: `keel run --fault
/// ...` for a single step fault, else the plan, with the run it belongs to, handed to `keel
/// replay --plan -` on stdin (no file written: a user's `plan.json` stays theirs).
pub fn replay_plan_command(
    spec: &ScenarioSpec,
    sink: SinkKind,
    view: Option<View>,
    plan: &FaultPlan,
) -> String {
    let faults = plan.faults();
    // `keel run` numbers classes unsplit: a class split by tail goes through a plan file.
    let split = |f: &PlannedFault| matches!(f.fault, Fault::PowerLossClass { by_tail: true, .. });
    if let ([only], None) = (faults.as_slice(), plan.kill_time_ms()) {
        if split(only) {
            let json = SavedPlan::of(spec, sink, view, plan).to_json_line();
            return format!("echo '{json}' | keel replay --plan -");
        }
        let view_option = view.map_or(String::new(), |v| format!(" --view {}", v.name()));
        return reproduce_point(&spec.command("run"), sink, only) + &view_option;
    }
    let json = SavedPlan::of(spec, sink, view, plan).to_json_line();
    format!("echo '{json}' | keel replay --plan -")
}

/// `command` judged as it was asked: with ` --expect ...` when an expectation was given, so
/// the command fails on the property that failed (a property no sink promises unasked,
/// `bounded-disk`, would otherwise show only as a figure).
pub fn with_expect(command: &str, asked: Option<&Expectation>) -> String {
    match asked {
        Some(asked) => format!("{command} --expect {asked}"),
        None => command.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ScenarioSpec {
        ScenarioSpec::ch04(226)
    }

    #[test]
    fn one_fault_replays_with_keel_run_naming_before() {
        let before = PlannedFault {
            step: 23,
            fault: Fault::PowerLoss {
                at: CrashPoint::Before,
                state: 4,
            },
        };
        let command = replay_plan_command(
            &spec(),
            SinkKind::Transactional,
            Some(View::ReadUncommitted),
            &FaultPlan::new([before]).unwrap(),
        );
        assert!(
            command.starts_with("keel run --scenario ch04 "),
            "{command}"
        );
        assert!(
            command.ends_with(
                " --seed 226 --sink transactional --fault power-loss --at-step 23 --at before --crash-state 4 --view read_uncommitted"
            ),
            "{command}"
        );
    }

    #[test]
    fn several_faults_replay_from_a_self_contained_plan_file() {
        let plan = FaultPlan::new([
            PlannedFault {
                step: 3,
                fault: Fault::ProcessCrash {
                    at: CrashPoint::Before,
                },
            },
            PlannedFault {
                step: 30,
                fault: Fault::DiskError,
            },
        ])
        .unwrap();
        let command = replay_plan_command(&spec(), SinkKind::Idempotent, None, &plan);
        let json = command
            .strip_prefix("echo '")
            .and_then(|rest| rest.strip_suffix("' | keel replay --plan -"))
            .unwrap_or_else(|| panic!("{command}"));
        let saved: SavedPlan = serde_json::from_str(json).unwrap();
        assert_eq!(saved.spec, Some(spec()));
        assert_eq!(saved.sink, Some(SinkKind::Idempotent));
        assert_eq!(saved.plan().unwrap(), plan);
    }
}
