//! `keel sweep`: every single fault at every step where it applies (every crash state for a
//! power loss, within a bound), each run to the end, judged by the oracle and tallied per
//! sink and fault kind. The steps (sites) come from `crate::sites`.

use crate::baseline::Baseline;
use crate::oracle::{judge_view, Recovery};
use crate::reproduce::{replay_plan_command, reproduce_point};
use crate::runner::{run, run_recording_crash_states, RunSpec, View};
use crate::sites::{sites_from_run, SiteRow};
use crate::spec::ScenarioSpec;
use crate::table::{Table, TableFormat};
use keel_engine::SinkKind;
use keel_sim::disk::POWER_LOSS_ENUMERATION_BOUND;
use keel_sim::{
    CrashPoint, Fault, FaultKind, FaultPlan, Fingerprint, PlannedFault, SeedTree, Subsystem,
};
use rand_core::RngCore;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

// Re-exported for `teach.rs` (and other callers) that still import them from here; new code
// imports from `crate::baseline`, `crate::sites` and `crate::failure`.
pub use crate::baseline::baselines;
pub use crate::failure::is_failure;
pub use crate::sites::sites;

/// Crash states drawn per step when a power loss there has more than the enumeration bound.
pub const POWER_LOSS_SAMPLES_PER_STEP: u64 = 32;

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
            FaultKind::Zombie => push(Fault::Zombie),
        }
    }
    points
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
    /// The consumer view (transactional sink only): read_committed or read_uncommitted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub view: Option<String>,
    pub points: u64,
    pub points_with_duplicates: u64,
    pub duplicates: u64,
    pub points_with_loss: u64,
    pub lost: u64,
    pub wrong: u64,
    pub corrupt: u64,
    pub rolled_back: u64,
    pub failed_recoveries: u64,
    pub points_with_dirty_reads: u64,
    pub dirty_reads: u64,
    pub visibility_delay_ms_max: u64,
    pub first_failure: Option<FirstFailure>,
}

/// What a sweep covers; serializable so shard files can carry it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepSpec {
    pub sinks: Vec<SinkKind>,
    pub faults: Vec<FaultKind>,
    /// 1: every single fault; 2: also a second fault at every step after the first.
    pub depth: u8,
    pub outage_ms: u64,
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

/// One point of a sweep: one or two faults on one sink.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SweepPoint {
    pub sink: SinkKind,
    /// The row it is tallied in: a fault kind, or "first+second" at depth 2.
    pub row: String,
    pub faults: Vec<PlannedFault>,
}

/// What one point's run came to: a line of a shard file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PointRecord {
    pub index: u64,
    pub sink: SinkKind,
    pub row: String,
    /// The consumer view judged (transactional sink only).
    pub view: Option<View>,
    pub dirty_reads: u64,
    pub visibility_delay_ms_max: u64,
    pub faults: Vec<PlannedFault>,
    pub duplicates: u64,
    pub lost: u64,
    pub wrong: u64,
    pub corrupt: u64,
    pub rolled_back: u64,
    pub failed_recovery: bool,
    pub failed: bool,
    pub outcome: String,
    pub fingerprint: String,
    pub reproduce: String,
}

/// Every point of the sweep, in report order (sink, row, first step, second step).
pub fn sweep_points(
    spec: &ScenarioSpec,
    sweep: &SweepSpec,
    baselines: &BTreeMap<SinkKind, Baseline>,
) -> Vec<SweepPoint> {
    assert!(sweep.depth == 1 || sweep.depth == 2);
    let mut all = Vec::new();
    for &sink in &sweep.sinks {
        let baseline = &baselines[&sink];
        for &first_kind in &sweep.faults {
            let firsts = points(&baseline.sites, first_kind, spec.seed, sweep.outage_ms);
            if sweep.depth == 1 {
                all.extend(firsts.into_iter().map(|first| SweepPoint {
                    sink,
                    row: first_kind.name().to_string(),
                    faults: vec![first],
                }));
                continue;
            }
            for &second_kind in &sweep.faults {
                let row = format!("{first_kind}+{second_kind}");
                for first in &firsts {
                    // The second fault aims at the steps of the run the first one changed,
                    // recovery included: record that run's sites.
                    let after_first = run_recording_crash_states(&RunSpec {
                        plan: FaultPlan::new([*first]).expect("one fault"),
                        ..baseline.spec.clone()
                    });
                    let later: Vec<SiteRow> = sites_from_run(&after_first)
                        .into_iter()
                        .filter(|site| site.step > first.step)
                        .collect();
                    for second in points(&later, second_kind, spec.seed, sweep.outage_ms) {
                        all.push(SweepPoint {
                            sink,
                            row: row.clone(),
                            faults: vec![*first, second],
                        });
                    }
                }
            }
        }
    }
    all
}

/// Runs one point and judges it: once, or once per consumer view for the transactional sink.
pub fn run_point(
    spec: &ScenarioSpec,
    baselines: &BTreeMap<SinkKind, Baseline>,
    index: u64,
    point: &SweepPoint,
) -> Vec<PointRecord> {
    let baseline = &baselines[&point.sink];
    let plan = FaultPlan::new(point.faults.iter().copied()).expect("distinct steps");
    let result = run(&RunSpec {
        plan: plan.clone(),
        ..baseline.spec.clone()
    });
    let reproduce = match point.faults.as_slice() {
        [only] => reproduce_point(&spec.command("run"), point.sink, only),
        _ => replay_plan_command(
            &|command, _| spec.command(command),
            spec.seed,
            point.sink,
            &plan,
        ),
    };
    let views: &[Option<View>] = if point.sink.is_transactional() {
        &[Some(View::ReadCommitted), Some(View::ReadUncommitted)]
    } else {
        &[None]
    };
    views
        .iter()
        .map(|&view| {
            let verdict = judge_view(
                &baseline.expected,
                &result,
                &baseline.spec.config,
                view.unwrap_or(View::ReadCommitted),
            );
            PointRecord {
                index,
                sink: point.sink,
                row: point.row.clone(),
                view,
                // A read_committed consumer never sees uncommitted data, and a
                // read_uncommitted one sees every record at once.
                dirty_reads: if view == Some(View::ReadUncommitted) {
                    verdict.dirty_reads
                } else {
                    0
                },
                visibility_delay_ms_max: if view == Some(View::ReadUncommitted) {
                    0
                } else {
                    verdict.visibility_delay_ms_max
                },
                faults: point.faults.clone(),
                duplicates: verdict.duplicates,
                lost: verdict.lost,
                wrong: verdict.wrong,
                corrupt: verdict.corrupt,
                rolled_back: verdict.rolled_back,
                failed_recovery: verdict.recovery != Recovery::Ok,
                failed: is_failure(&verdict, point.sink),
                outcome: verdict.summary(),
                fingerprint: result.world.fingerprint().to_string(),
                reproduce: reproduce.clone(),
            }
        })
        .collect()
}

/// Tallies point records (in point order) into rows, in the order rows first appear.
pub fn aggregate(scenario: &str, protocol: &str, records: &[PointRecord]) -> SweepReport {
    let mut rows: Vec<SweepRow> = Vec::new();
    let mut fingerprints = String::new();
    for record in records {
        let sink = record.sink.name();
        let view = record.view.map(|v| v.name().to_string());
        let position = rows
            .iter()
            .position(|r| r.sink == sink && r.fault == record.row && r.view == view);
        let row = match position {
            Some(i) => &mut rows[i],
            None => {
                rows.push(SweepRow {
                    sink: sink.to_string(),
                    fault: record.row.clone(),
                    view,
                    ..SweepRow::default()
                });
                rows.last_mut().expect("just pushed")
            }
        };
        let faults: Vec<String> = record
            .faults
            .iter()
            .map(|f| format!("{}@{}", f.fault, f.step))
            .collect();
        // One line per run: a transactional point's second view is the same run.
        if record.view != Some(View::ReadUncommitted) {
            fingerprints.push_str(&format!(
                "{sink} {} {}\n",
                faults.join(","),
                record.fingerprint
            ));
        }
        row.points += 1;
        row.points_with_duplicates += u64::from(record.duplicates > 0);
        row.duplicates += record.duplicates;
        row.points_with_loss += u64::from(record.lost > 0);
        row.lost += record.lost;
        row.wrong += record.wrong;
        row.corrupt += record.corrupt;
        row.rolled_back += u64::from(record.rolled_back > 0);
        row.failed_recoveries += u64::from(record.failed_recovery);
        row.points_with_dirty_reads += u64::from(record.dirty_reads > 0);
        row.dirty_reads += record.dirty_reads;
        row.visibility_delay_ms_max = row
            .visibility_delay_ms_max
            .max(record.visibility_delay_ms_max);
        if row.first_failure.is_none() && record.failed {
            let first = record.faults[0];
            row.first_failure = Some(FirstFailure {
                step: first.step,
                crash_state: match first.fault {
                    Fault::PowerLoss { state, .. } => Some(state),
                    _ => None,
                },
                outcome: record.outcome.clone(),
                reproduce: record.reproduce.clone(),
            });
        }
    }
    SweepReport {
        scenario: scenario.to_string(),
        protocol: protocol.to_string(),
        rows,
        fingerprint: Fingerprint::of(fingerprints.as_bytes()).to_string(),
    }
}

impl SweepReport {
    pub fn table(&self) -> Table {
        let with_views = self.rows.iter().any(|r| r.view.is_some());
        let mut headers = vec!["sink", "fault"];
        if with_views {
            headers.push("view");
        }
        headers.extend([
            "points",
            "dup_points",
            "duplicates",
            "loss_points",
            "lost",
            "wrong",
            "corrupt",
            "rolled_back",
            "failed_recoveries",
        ]);
        if with_views {
            headers.extend(["dirty_reads", "vis_delay_ms_max"]);
        }
        headers.push("first_failure");
        let mut table = Table::new(&headers);
        for row in &self.rows {
            let first = row.first_failure.as_ref().map_or("-".to_string(), |f| {
                let state = f
                    .crash_state
                    .map_or(String::new(), |s| format!(" state {s}"));
                format!("step {}{state}: {}", f.step, f.outcome)
            });
            let mut cells = vec![row.sink.clone(), row.fault.clone()];
            if with_views {
                cells.push(row.view.clone().unwrap_or_else(|| "-".to_string()));
            }
            cells.extend([
                row.points.to_string(),
                row.points_with_duplicates.to_string(),
                row.duplicates.to_string(),
                row.points_with_loss.to_string(),
                row.lost.to_string(),
                row.wrong.to_string(),
                row.corrupt.to_string(),
                row.rolled_back.to_string(),
                row.failed_recoveries.to_string(),
            ]);
            if with_views {
                cells.extend([
                    row.dirty_reads.to_string(),
                    row.visibility_delay_ms_max.to_string(),
                ]);
            }
            cells.push(first);
            table.push(cells);
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
