//! `keel fidelity kill`: does a simulated process crash at step N do what a real kill -9 at
//! step N does? Per point, what the simulated run and the real run left, compared aspect by
//! aspect (sink, final windows, the oracle's verdict, the directory, the trace), and rows
//! per sink. Pure: the command (`commands/fidelity.rs`) runs both sides and times them.

use crate::baseline::Baseline;
use crate::observation::Observation;
use crate::real::{disk_listing, ListedFile, RealRun};
use crate::runner::RunResult;
use crate::table::{Table, TableFormat};
use crate::verdict::{judge_one, Verdict};
use keel_engine::{Record, SinkKind};
use keel_sim::PlannedFault;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;

/// The aspects two sides are compared in, in the order [`differences`] names them.
pub const ASPECTS: [&str; 5] = ["sink", "final_windows", "verdict", "directory", "trace"];

/// What one side (simulated or real) of a point left, in the terms both share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Side {
    pub records: Vec<Record>,
    pub corrupt_lines: u64,
    pub final_windows: BTreeMap<i64, i128>,
    pub verdict: Verdict,
    pub directory: Vec<ListedFile>,
    pub trace: Vec<String>,
}

impl Side {
    pub fn simulated(result: &RunResult, baseline: &Baseline) -> Side {
        let observation = Observation::of(result, &baseline.spec.config);
        Side::of(
            &observation,
            baseline,
            disk_listing(&result.world.env().disk),
            result.world.trace().text_lines(),
        )
    }

    pub fn real(run: &RealRun, baseline: &Baseline) -> Side {
        let observation = Observation::of_file_sink(
            &baseline.spec.config,
            run.sink.as_deref(),
            &run.file_names(),
            &run.incarnations,
            &run.outcome,
            &run.final_state,
        );
        Side::of(
            &observation,
            baseline,
            run.listing.clone(),
            run.trace.clone(),
        )
    }

    fn of(
        observation: &Observation,
        baseline: &Baseline,
        directory: Vec<ListedFile>,
        trace: Vec<String>,
    ) -> Side {
        let view = observation.view(None);
        Side {
            records: view.records.to_vec(),
            corrupt_lines: view.corrupt_lines,
            final_windows: (*observation.final_windows).clone(),
            verdict: judge_one(&baseline.reference, observation, None),
            directory,
            trace,
        }
    }
}

/// The aspects in which two sides differ, in the order of [`ASPECTS`] (empty: they agree).
pub fn differences(simulated: &Side, real: &Side) -> Vec<&'static str> {
    let mut differ = Vec::new();
    if (&simulated.records, simulated.corrupt_lines) != (&real.records, real.corrupt_lines) {
        differ.push("sink");
    }
    if simulated.final_windows != real.final_windows {
        differ.push("final_windows");
    }
    if simulated.verdict != real.verdict {
        differ.push("verdict");
    }
    if simulated.directory != real.directory {
        differ.push("directory");
    }
    if simulated.trace != real.trace {
        differ.push("trace");
    }
    differ
}

/// One crash point, run both ways (with `--shard`, a line of the shard file).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PointComparison {
    /// The point's place among all the points of the run (sink by sink, step by step).
    pub index: u64,
    pub sink: SinkKind,
    pub point: PlannedFault,
    #[serde(deserialize_with = "aspects")]
    pub differences: Vec<&'static str>,
    /// Wall time of the simulated and the real run, in microseconds.
    pub simulated_us: u64,
    pub real_us: u64,
    /// The commands that replay the point simulated and for real.
    pub reproduce_simulated: String,
    pub reproduce_real: String,
}

/// Aspect names read back from a shard file, as the `'static` names of [`ASPECTS`]; any
/// other name is an error.
fn aspects<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<&'static str>, D::Error> {
    Vec::<String>::deserialize(deserializer)?
        .iter()
        .map(|name| {
            ASPECTS
                .iter()
                .find(|aspect| *aspect == name)
                .copied()
                .ok_or_else(|| {
                    serde::de::Error::custom(format!(
                        "unknown aspect '{name}' (the aspects are {})",
                        ASPECTS.join(", ")
                    ))
                })
        })
        .collect()
}

/// The first point of a row where the two sides differ.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Disagreement {
    pub step: u64,
    pub differs: Vec<String>,
    pub reproduce_simulated: String,
    pub reproduce_real: String,
}

/// One sink's row.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FidelityRow {
    pub sink: String,
    pub points: u64,
    pub agree: u64,
    pub disagree: u64,
    pub first_disagreement: Option<Disagreement>,
    /// Mean wall time per point, simulated and real, in microseconds, and real / simulated.
    pub simulated_us_per_point: f64,
    pub real_us_per_point: f64,
    pub ratio: f64,
}

/// The whole report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FidelityReport {
    pub scenario: String,
    pub protocol: String,
    pub rows: Vec<FidelityRow>,
}

/// Rows per sink, in `sinks` order, from the points in sink and step order.
pub fn aggregate(
    scenario: &str,
    protocol: &str,
    sinks: &[SinkKind],
    points: &[PointComparison],
) -> FidelityReport {
    let rows = sinks
        .iter()
        .map(|&sink| {
            let mine: Vec<&PointComparison> = points.iter().filter(|p| p.sink == sink).collect();
            let disagree = mine.iter().filter(|p| !p.differences.is_empty()).count() as u64;
            let n = mine.len().max(1) as f64;
            let simulated = mine.iter().map(|p| p.simulated_us as f64).sum::<f64>() / n;
            let real = mine.iter().map(|p| p.real_us as f64).sum::<f64>() / n;
            FidelityRow {
                sink: sink.name().to_string(),
                points: mine.len() as u64,
                agree: mine.len() as u64 - disagree,
                disagree,
                first_disagreement: mine.iter().find(|p| !p.differences.is_empty()).map(|p| {
                    Disagreement {
                        step: p.point.step,
                        differs: p.differences.iter().map(|d| d.to_string()).collect(),
                        reproduce_simulated: p.reproduce_simulated.clone(),
                        reproduce_real: p.reproduce_real.clone(),
                    }
                }),
                simulated_us_per_point: simulated,
                real_us_per_point: real,
                ratio: if simulated > 0.0 {
                    real / simulated
                } else {
                    0.0
                },
            }
        })
        .collect();
    FidelityReport {
        scenario: scenario.to_string(),
        protocol: protocol.to_string(),
        rows,
    }
}

impl FidelityReport {
    pub fn disagreements(&self) -> u64 {
        self.rows.iter().map(|r| r.disagree).sum()
    }

    pub fn table(&self) -> Table {
        let mut table = Table::new(&[
            "sink",
            "points",
            "agree",
            "disagree",
            "sim_us_per_point",
            "real_us_per_point",
            "real/sim",
            "first_disagreement",
        ]);
        for row in &self.rows {
            table.push(vec![
                row.sink.clone(),
                row.points.to_string(),
                row.agree.to_string(),
                row.disagree.to_string(),
                format!("{:.0}", row.simulated_us_per_point),
                format!("{:.0}", row.real_us_per_point),
                format!("{:.0}", row.ratio),
                row.first_disagreement
                    .as_ref()
                    .map_or("-".to_string(), |d| {
                        format!("step {} ({})", d.step, d.differs.join(","))
                    }),
            ]);
        }
        table
    }

    /// The table, with a title line and the first disagreements (CSV: the table alone).
    pub fn render(&self, format: TableFormat) -> String {
        if format == TableFormat::Csv {
            return self.table().render(format);
        }
        let mut out = format!(
            "fidelity kill: scenario={} protocol={} (each process-crash point simulated and with a real SIGKILL)\n",
            self.scenario, self.protocol
        );
        out.push_str(&self.table().render(format));
        for row in &self.rows {
            if let Some(d) = &row.first_disagreement {
                out.push_str(&format!(
                    "\n{} step {}: {} differ\n  simulated: {}\n  real:      {}\n",
                    row.sink,
                    d.step,
                    d.differs.join(", "),
                    d.reproduce_simulated,
                    d.reproduce_real
                ));
            }
        }
        out
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report serializes") + "\n"
    }
}
