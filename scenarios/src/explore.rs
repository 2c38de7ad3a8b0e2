//! `keel explore`: thousands of seeds, each a swarm-drawn fault plan, one row per seed and
//! sink, a summary per sink, and the failing seeds with the command that replays each.

use crate::baseline::Baseline;
use crate::failure::is_failure;
use crate::oracle::{judge, Expectation, Verdict};
use crate::reproduce::replay_plan_command;
use crate::runner::{run, RunSpec};
use crate::shrink::{failure_classes, shrink, FailureClass, Shrunk};
use crate::swarm::{plan_for_seed, PlanContext};
use crate::table::{Table, TableFormat};
use keel_engine::SinkKind;
use keel_sim::{FaultKind, FaultPlan};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What an exploration covers; serializable so shard files can carry it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExploreSpec {
    pub sinks: Vec<SinkKind>,
    pub faults: Vec<FaultKind>,
    pub max_faults: usize,
    pub outage_ms: u64,
    /// Seeds `seeds_start..seeds_end`.
    pub seeds_start: u64,
    pub seeds_end: u64,
    pub expect: Option<Expectation>,
}

impl ExploreSpec {
    /// Every (seed, sink) the exploration runs, in report order.
    pub fn points(&self) -> Vec<(u64, SinkKind)> {
        (self.seeds_start..self.seeds_end)
            .flat_map(|seed| self.sinks.iter().map(move |&sink| (seed, sink)))
            .collect()
    }

    /// The options `keel replay` and `keel shrink` need to draw the same plan from a seed.
    pub fn plan_options(&self) -> String {
        let mut options = String::new();
        if self.faults != FaultKind::DEFAULT.to_vec() {
            let names: Vec<&str> = self.faults.iter().map(|k| k.name()).collect();
            options.push_str(&format!(" --faults {}", names.join(",")));
        }
        if self.max_faults != MAX_FAULTS_DEFAULT {
            options.push_str(&format!(" --max-faults {}", self.max_faults));
        }
        if self.outage_ms != OUTAGE_MS_DEFAULT {
            options.push_str(&format!(" --outage-ms {}", self.outage_ms));
        }
        options
    }

    /// Whether a run fails: it breaks `--expect`, or without one, what its sink promises.
    pub fn fails(&self, verdict: &Verdict, sink: SinkKind) -> bool {
        match self.expect {
            Some(expectation) => !expectation.holds(verdict),
            None => is_failure(verdict, sink),
        }
    }
}

pub const MAX_FAULTS_DEFAULT: usize = 3;
pub const OUTAGE_MS_DEFAULT: u64 = 2_000;

/// How an exploration draws a seed's plan on a baseline.
impl Baseline {
    /// The plan seed `seed` draws for this sink.
    pub fn plan(&self, explore: &ExploreSpec, seed: u64) -> FaultPlan {
        let context = PlanContext {
            sites: &self.sites,
            allowed: &explore.faults,
            max_faults: explore.max_faults,
            outage_ms: explore.outage_ms,
        };
        plan_for_seed(seed, &context).1
    }

    /// The run of seed `seed`: its plan, and the seed for every other draw of the world.
    pub fn seed_spec(&self, explore: &ExploreSpec, seed: u64) -> RunSpec {
        RunSpec {
            plan: self.plan(explore, seed),
            seed,
            ..self.spec.clone()
        }
    }
}

/// One seed on one sink.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExploreRow {
    pub seed: u64,
    pub sink: SinkKind,
    pub faults_injected: u64,
    pub duplicates: u64,
    pub lost: u64,
    pub wrong: u64,
    pub corrupt: u64,
    pub rolled_back: u64,
    pub recovery: String,
    pub exactly_once: bool,
    pub failed: bool,
    pub outcome: String,
    pub fingerprint: String,
}

/// Runs one seed on one sink.
pub fn explore_one(explore: &ExploreSpec, baseline: &Baseline, seed: u64) -> ExploreRow {
    let result = run(&baseline.seed_spec(explore, seed));
    let verdict = judge(&baseline.expected, &result, &baseline.spec.config);
    let sink = baseline.spec.config.sink;
    ExploreRow {
        seed,
        sink,
        faults_injected: result.world.faults_injected().len() as u64,
        duplicates: verdict.duplicates,
        lost: verdict.lost,
        wrong: verdict.wrong,
        corrupt: verdict.corrupt,
        rolled_back: verdict.rolled_back,
        recovery: verdict.recovery.to_string(),
        exactly_once: verdict.exactly_once,
        failed: explore.fails(&verdict, sink),
        outcome: verdict.summary(),
        fingerprint: result.world.fingerprint().to_string(),
    }
}

/// Per-sink totals.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SinkSummary {
    pub sink: String,
    pub seeds: u64,
    pub with_duplicates: u64,
    pub with_loss: u64,
    pub with_wrong: u64,
    pub with_corrupt: u64,
    pub rolled_back: u64,
    pub failed_recoveries: u64,
    pub exactly_once: u64,
    /// exactly_once / seeds, as a percentage with one decimal ("99.5%").
    pub exactly_once_rate: String,
    pub failing: u64,
}

/// A failing seed and how to replay it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FailingSeed {
    pub seed: u64,
    pub sink: String,
    pub outcome: String,
    pub reproduce: String,
}

/// The shrunk first failure.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ShrunkReport {
    pub seed: u64,
    pub sink: String,
    pub class: FailureClass,
    pub plan: keel_sim::fault::PlanFile,
    pub outcome: String,
    pub runs: u64,
    pub reproduce: String,
}

/// A whole exploration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ExploreReport {
    pub scenario: String,
    pub protocol: String,
    pub rows: Vec<ExploreRow>,
    pub summary: Vec<SinkSummary>,
    pub failing: Vec<FailingSeed>,
    pub shrunk: Option<ShrunkReport>,
}

/// Builds the report from the rows (in point order), shrinking the first failure unless not
/// asked to. `scenario_command(c)` is `keel c` with the scenario's options.
pub fn report(
    scenario: &str,
    protocol: &str,
    explore: &ExploreSpec,
    baselines: &BTreeMap<SinkKind, Baseline>,
    rows: Vec<ExploreRow>,
    shrink_first: bool,
    scenario_command: &dyn Fn(&str, u64) -> String,
) -> ExploreReport {
    let mut summary: Vec<SinkSummary> = explore
        .sinks
        .iter()
        .map(|sink| SinkSummary {
            sink: sink.name().to_string(),
            ..SinkSummary::default()
        })
        .collect();
    let mut failing = Vec::new();
    for row in &rows {
        let index = explore
            .sinks
            .iter()
            .position(|s| *s == row.sink)
            .expect("a row's sink was asked for");
        let s = &mut summary[index];
        s.seeds += 1;
        s.with_duplicates += u64::from(row.duplicates > 0);
        s.with_loss += u64::from(row.lost > 0);
        s.with_wrong += u64::from(row.wrong > 0);
        s.with_corrupt += u64::from(row.corrupt > 0);
        s.rolled_back += u64::from(row.rolled_back > 0);
        s.failed_recoveries += u64::from(row.recovery != "ok");
        s.exactly_once += u64::from(row.exactly_once);
        s.failing += u64::from(row.failed);
        if row.failed {
            failing.push(FailingSeed {
                seed: row.seed,
                sink: row.sink.name().to_string(),
                outcome: row.outcome.clone(),
                reproduce: format!(
                    "{} --sink {}{}",
                    scenario_command("replay", row.seed),
                    row.sink,
                    explore.plan_options()
                ),
            });
        }
    }
    for s in &mut summary {
        s.exactly_once_rate = if s.seeds == 0 {
            "-".to_string()
        } else {
            format!("{:.1}%", s.exactly_once as f64 * 100.0 / s.seeds as f64)
        };
    }
    let shrunk = failing.first().filter(|_| shrink_first).and_then(|first| {
        let row = rows
            .iter()
            .find(|r| r.seed == first.seed && r.sink.name() == first.sink)
            .expect("a failing seed has its row");
        let baseline = &baselines[&row.sink];
        shrink_seed(explore, baseline, row.seed, scenario_command)
    });
    ExploreReport {
        scenario: scenario.to_string(),
        protocol: protocol.to_string(),
        rows,
        summary,
        failing,
        shrunk,
    }
}

/// The failure class to keep while shrinking `verdict`: the violated expectation's, else
/// the most serious one shown.
pub fn target_class(explore: &ExploreSpec, verdict: &Verdict) -> Option<FailureClass> {
    let classes = failure_classes(verdict);
    let wanted: &[FailureClass] = match explore.expect {
        Some(Expectation::NoLoss) => &[
            FailureClass::RecoveryFailed,
            FailureClass::RecoveryLooped,
            FailureClass::Lost,
        ],
        _ => &[],
    };
    classes
        .iter()
        .copied()
        .find(|c| wanted.is_empty() || wanted.contains(c))
}

/// Shrinks the plan of `seed` on `baseline`'s sink (`None` if it shows no failure to keep).
pub fn shrink_seed(
    explore: &ExploreSpec,
    baseline: &Baseline,
    seed: u64,
    scenario_command: &dyn Fn(&str, u64) -> String,
) -> Option<ShrunkReport> {
    let seed_spec = baseline.seed_spec(explore, seed);
    let result = run(&seed_spec);
    let verdict = judge(&baseline.expected, &result, &baseline.spec.config);
    let class = target_class(explore, &verdict)?;
    let Shrunk {
        plan,
        verdict,
        runs,
        ..
    } = shrink(&seed_spec, &baseline.expected, &seed_spec.plan, class);
    let sink = baseline.spec.config.sink;
    Some(ShrunkReport {
        seed,
        sink: sink.name().to_string(),
        class,
        plan: plan.to_file(),
        outcome: verdict.summary(),
        runs,
        reproduce: replay_plan_command(scenario_command, seed, sink, &plan),
    })
}

impl ExploreReport {
    pub fn rows_table(&self) -> Table {
        let mut table = Table::new(&[
            "seed",
            "sink",
            "faults",
            "duplicates",
            "lost",
            "wrong",
            "corrupt",
            "rolled_back",
            "recovery",
            "fingerprint",
        ]);
        for r in &self.rows {
            table.push(vec![
                r.seed.to_string(),
                r.sink.name().to_string(),
                r.faults_injected.to_string(),
                r.duplicates.to_string(),
                r.lost.to_string(),
                r.wrong.to_string(),
                r.corrupt.to_string(),
                r.rolled_back.to_string(),
                r.recovery.clone(),
                r.fingerprint.clone(),
            ]);
        }
        table
    }

    pub fn summary_table(&self) -> Table {
        let mut table = Table::new(&[
            "sink",
            "seeds",
            "with_duplicates",
            "with_loss",
            "with_wrong",
            "with_corrupt",
            "rolled_back",
            "failed_recoveries",
            "exactly_once",
            "exactly_once_rate",
            "failing",
        ]);
        for s in &self.summary {
            table.push(vec![
                s.sink.clone(),
                s.seeds.to_string(),
                s.with_duplicates.to_string(),
                s.with_loss.to_string(),
                s.with_wrong.to_string(),
                s.with_corrupt.to_string(),
                s.rolled_back.to_string(),
                s.failed_recoveries.to_string(),
                s.exactly_once.to_string(),
                s.exactly_once_rate.clone(),
                s.failing.to_string(),
            ]);
        }
        table
    }

    /// Rows (unless `summary_only`), the summary, the failing seeds, the shrunk plan.
    pub fn render(&self, format: TableFormat, summary_only: bool) -> String {
        let mut out = String::new();
        if format == TableFormat::Csv {
            return if summary_only {
                self.summary_table().render(format)
            } else {
                self.rows_table().render(format)
            };
        }
        out.push_str(&format!(
            "explore scenario={} protocol={}\n\n",
            self.scenario, self.protocol
        ));
        if !summary_only {
            out.push_str(&self.rows_table().render(format));
            out.push('\n');
        }
        out.push_str(&self.summary_table().render(format));
        if !self.failing.is_empty() {
            out.push_str(&format!("\nfailing seeds: {}\n", self.failing.len()));
            for failing in &self.failing {
                out.push_str(&format!(
                    "  seed {} {}: {}\n    reproduce: {}\n",
                    failing.seed, failing.sink, failing.outcome, failing.reproduce
                ));
            }
        }
        if let Some(shrunk) = &self.shrunk {
            out.push_str(&format!(
                "\nshrunk seed {} {} ({}, {} runs): {}\n  plan: {}\n  reproduce: {}\n",
                shrunk.seed,
                shrunk.sink,
                shrunk.class,
                shrunk.runs,
                shrunk.outcome,
                serde_json::to_string(&shrunk.plan).expect("plans serialize"),
                shrunk.reproduce
            ));
        }
        out
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("reports serialize") + "\n"
    }
}
