//! `keel sites` and `keel sweep`: every step of the fault-free run, and every single fault
//! at every step where it applies (every crash state for a power loss, within a bound),
//! each run to the end, judged by the oracle and tallied per sink and fault kind.

use crate::oracle::{judge, Expected, Recovery, Verdict};
use crate::runner::{run, run_recording_crash_states, RunResult, RunSpec};
use crate::table::{Table, TableFormat};
use keel_engine::{EngineConfig, Event, SinkKind};
use keel_sim::disk::POWER_LOSS_ENUMERATION_BOUND;
use keel_sim::{
    CrashPoint, Fault, FaultKind, FaultPlan, Fingerprint, PlannedFault, SeedTree, Subsystem,
    TraceLine,
};
use rand_core::RngCore;
use serde::Serialize;

/// Crash states drawn per step when a power loss there has more than the enumeration bound.
pub const POWER_LOSS_SAMPLES_PER_STEP: u64 = 32;

/// Whether a fault of `kind` can be aimed at a step doing `op`.
pub fn applies(op: &str, kind: FaultKind) -> bool {
    match kind {
        FaultKind::ProcessCrash | FaultKind::PowerLoss => true,
        FaultKind::DiskError => matches!(
            op,
            "disk.create"
                | "disk.write"
                | "disk.truncate"
                | "disk.fsync"
                | "disk.rename"
                | "disk.remove"
                | "disk.fsync-dir"
                | "sink.open"
        ),
        FaultKind::SinkError | FaultKind::AckLost | FaultKind::SinkUnavailable => {
            op == "sink.write"
        }
    }
}

/// One step of the fault-free run: where faults can be aimed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SiteRow {
    pub step: u64,
    pub time_ms: u64,
    pub op: String,
    pub target: String,
    /// The fault kinds that apply here.
    pub faults: Vec<FaultKind>,
    /// How many disk states a power loss right after this step can leave (null: > 2^64).
    pub power_loss_states: Option<u64>,
}

/// The fault-free run of `spec`, recording crash-state counts, and its steps as sites.
pub fn sites(spec: &RunSpec) -> (RunResult, Vec<SiteRow>) {
    let baseline = run_recording_crash_states(spec);
    let rows = sites_from_run(&baseline);
    (baseline, rows)
}

/// The steps of a fault-free run recorded with [`run_recording_crash_states`], as sites.
pub fn sites_from_run(baseline: &RunResult) -> Vec<SiteRow> {
    let counts = baseline.world.crash_state_counts();
    baseline
        .world
        .trace()
        .lines()
        .iter()
        .filter_map(|line| match line {
            TraceLine::Step {
                step,
                time_ms,
                op,
                target,
                ..
            } => Some(SiteRow {
                step: *step,
                time_ms: *time_ms,
                op: op.to_string(),
                target: target.clone(),
                faults: FaultKind::ALL
                    .into_iter()
                    .filter(|k| applies(op, *k))
                    .collect(),
                power_loss_states: counts[*step as usize],
            }),
            _ => None,
        })
        .collect()
}

pub fn sites_table(rows: &[SiteRow]) -> Table {
    let mut table = Table::new(&[
        "step",
        "time_ms",
        "op",
        "target",
        "faults",
        "power_loss_states",
    ]);
    for row in rows {
        let faults: Vec<&str> = row.faults.iter().map(|k| k.name()).collect();
        table.push(vec![
            row.step.to_string(),
            row.time_ms.to_string(),
            row.op.clone(),
            row.target.clone(),
            faults.join(","),
            row.power_loss_states
                .map_or(">2^64".to_string(), |c| c.to_string()),
        ]);
    }
    table
}

/// Every single fault of `kind` the sweep tries, in step order.
pub fn points(sites: &[SiteRow], kind: FaultKind, seed: u64, outage_ms: u64) -> Vec<PlannedFault> {
    let mut points = Vec::new();
    for site in sites.iter().filter(|s| s.faults.contains(&kind)) {
        let step = site.step;
        let mut push = |fault| points.push(PlannedFault { step, fault });
        match kind {
            FaultKind::ProcessCrash => push(Fault::ProcessCrash {
                at: CrashPoint::After,
            }),
            FaultKind::PowerLoss => match site.power_loss_states {
                Some(count) if count <= POWER_LOSS_ENUMERATION_BOUND => {
                    for state in 0..count {
                        push(Fault::PowerLoss {
                            at: CrashPoint::After,
                            state,
                        });
                    }
                }
                _ => {
                    // Too many to enumerate: draw them from the seed, per step, so one step's
                    // draws never depend on another's.
                    let mut rng = SeedTree::new(seed ^ step.wrapping_mul(0x9e37_79b9_7f4a_7c15))
                        .stream(Subsystem::DiskCrash);
                    for _ in 0..POWER_LOSS_SAMPLES_PER_STEP {
                        push(Fault::PowerLoss {
                            at: CrashPoint::After,
                            state: rng.next_u64(),
                        });
                    }
                }
            },
            FaultKind::DiskError => push(Fault::DiskError),
            FaultKind::SinkError => push(Fault::SinkError),
            FaultKind::AckLost => push(Fault::AckLost),
            FaultKind::SinkUnavailable => push(Fault::SinkUnavailable {
                duration_ms: outage_ms,
            }),
        }
    }
    points
}

/// Does this run break what the sink promises (at-least-once for append, exactly-once for
/// idempotent), or roll recovery back?
pub fn is_failure(verdict: &Verdict, sink: SinkKind) -> bool {
    let at_least_once = verdict.lost == 0
        && verdict.wrong == 0
        && verdict.corrupt == 0
        && verdict.recovery == Recovery::Ok
        && verdict.final_windows_match;
    let promise = match sink {
        SinkKind::Append => at_least_once,
        SinkKind::Idempotent => at_least_once && verdict.duplicates == 0,
    };
    !promise || verdict.rolled_back > 0
}

/// The first failing point of a row, and how to replay it alone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FirstFailure {
    pub step: u64,
    pub crash_state: Option<u64>,
    pub outcome: String,
    pub reproduce: String,
}

/// One row of a sweep: one sink, one fault kind, every point.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SweepRow {
    pub sink: String,
    pub fault: String,
    pub points: u64,
    pub points_with_duplicates: u64,
    pub duplicates: u64,
    pub points_with_loss: u64,
    pub lost: u64,
    pub wrong: u64,
    pub corrupt: u64,
    pub rolled_back: u64,
    pub failed_recoveries: u64,
    pub first_failure: Option<FirstFailure>,
}

/// What a sweep covers.
#[derive(Clone, Debug)]
pub struct SweepSpec {
    pub events: Vec<Event>,
    /// The engine; its `sink` is replaced by each of `sinks`.
    pub config: EngineConfig,
    pub sinks: Vec<SinkKind>,
    pub faults: Vec<FaultKind>,
    pub seed: u64,
    pub restart_delay_ms: u64,
    pub sector_size_bytes: usize,
    pub outage_ms: u64,
    /// The `keel run ...` command line with the scenario's options, without sink and fault.
    pub reproduce_prefix: String,
}

/// A whole sweep's result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SweepReport {
    pub scenario: String,
    pub protocol: String,
    pub rows: Vec<SweepRow>,
    /// A hash of every point's run fingerprint, in sweep order.
    pub fingerprint: String,
}

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

pub fn sweep(scenario: &str, spec: &SweepSpec) -> SweepReport {
    let mut rows = Vec::new();
    let mut fingerprints = String::new();
    for &sink in &spec.sinks {
        let run_spec = RunSpec {
            events: spec.events.clone(),
            config: EngineConfig {
                sink,
                ..spec.config
            },
            plan: FaultPlan::none(),
            seed: spec.seed,
            restart_delay_ms: spec.restart_delay_ms,
            sector_size_bytes: spec.sector_size_bytes,
        };
        let (baseline, site_rows) = sites(&run_spec);
        let expected = Expected::from_baseline(&baseline, &run_spec.config);
        for &kind in &spec.faults {
            let mut row = SweepRow {
                sink: sink.name().to_string(),
                fault: kind.name().to_string(),
                ..SweepRow::default()
            };
            for planned in points(&site_rows, kind, spec.seed, spec.outage_ms) {
                let plan = FaultPlan::new([planned]).expect("one fault");
                let result = run(&RunSpec {
                    plan,
                    ..run_spec.clone()
                });
                let verdict = judge(&expected, &result, &run_spec.config);
                fingerprints.push_str(&format!(
                    "{sink} {} {}\n",
                    planned.fault,
                    result.world.fingerprint()
                ));
                row.points += 1;
                row.points_with_duplicates += u64::from(verdict.duplicates > 0);
                row.duplicates += verdict.duplicates;
                row.points_with_loss += u64::from(verdict.lost > 0);
                row.lost += verdict.lost;
                row.wrong += verdict.wrong;
                row.corrupt += verdict.corrupt;
                row.rolled_back += u64::from(verdict.rolled_back > 0);
                row.failed_recoveries += u64::from(verdict.recovery != Recovery::Ok);
                if row.first_failure.is_none() && is_failure(&verdict, sink) {
                    row.first_failure = Some(FirstFailure {
                        step: planned.step,
                        crash_state: match planned.fault {
                            Fault::PowerLoss { state, .. } => Some(state),
                            _ => None,
                        },
                        outcome: verdict.summary(),
                        reproduce: reproduce_point(&spec.reproduce_prefix, sink, &planned),
                    });
                }
            }
            rows.push(row);
        }
    }
    SweepReport {
        scenario: scenario.to_string(),
        protocol: spec.config.protocol.name().to_string(),
        rows,
        fingerprint: Fingerprint::of(fingerprints.as_bytes()).to_string(),
    }
}

impl SweepReport {
    pub fn table(&self) -> Table {
        let mut table = Table::new(&[
            "sink",
            "fault",
            "points",
            "dup_points",
            "duplicates",
            "loss_points",
            "lost",
            "wrong",
            "corrupt",
            "rolled_back",
            "failed_recoveries",
            "first_failure",
        ]);
        for row in &self.rows {
            let first = row.first_failure.as_ref().map_or("-".to_string(), |f| {
                let state = f
                    .crash_state
                    .map_or(String::new(), |s| format!(" state {s}"));
                format!("step {}{state}: {}", f.step, f.outcome)
            });
            table.push(vec![
                row.sink.clone(),
                row.fault.clone(),
                row.points.to_string(),
                row.points_with_duplicates.to_string(),
                row.duplicates.to_string(),
                row.points_with_loss.to_string(),
                row.lost.to_string(),
                row.wrong.to_string(),
                row.corrupt.to_string(),
                row.rolled_back.to_string(),
                row.failed_recoveries.to_string(),
                first,
            ]);
        }
        table
    }

    /// The table, then one reproduce command per failing row, then the fingerprint.
    pub fn render(&self, format: TableFormat) -> String {
        let mut out = String::new();
        if format != TableFormat::Csv {
            out.push_str(&format!(
                "sweep scenario={} protocol={}\n\n",
                self.scenario, self.protocol
            ));
        }
        out.push_str(&self.table().render(format));
        if format != TableFormat::Csv {
            out.push('\n');
            for row in &self.rows {
                if let Some(first) = &row.first_failure {
                    out.push_str(&format!(
                        "first failure {} / {}: {}\n  reproduce: {}\n",
                        row.sink, row.fault, first.outcome, first.reproduce
                    ));
                }
            }
            out.push_str(&format!("fingerprint={}\n", self.fingerprint));
        }
        out
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a sweep report always serializes") + "\n"
    }
}
