//! `keel explore`: thousands of seeds, each a swarm-drawn fault plan, one row per seed and
//! sink, a summary per sink, and the failing seeds with the command that replays each.

use crate::baseline::Baseline;
use crate::coverage::{run_cells, Cell, SinkCoverage};
use crate::observation::{views_of, Observation};
use crate::property::{failures, Expectation, Property, MATCHES_MODEL};
use crate::reproduce::{replay_plan_command, with_expect};
use crate::runner::{run, RunSpec, View};
use crate::shrink::{shrink, Shrunk};
use crate::spec::ScenarioSpec;
use crate::swarm::{plan_for_seed, PlanContext};
use crate::table::{Table, TableFormat};
use crate::verdict::{judge, judge_one};
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
        (0..self.points_len()).map(|i| self.point(i)).collect()
    }

    /// How many (seed, sink) points the exploration runs.
    pub fn points_len(&self) -> u64 {
        (self.seeds_end - self.seeds_start) * self.sinks.len() as u64
    }

    /// The point `index` (below [`ExploreSpec::points_len`]) in report order: seed by seed,
    /// each on every sink in turn.
    pub fn point(&self, index: u64) -> (u64, SinkKind) {
        assert!(index < self.points_len());
        let sinks = self.sinks.len() as u64;
        (
            self.seeds_start + index / sinks,
            self.sinks[(index % sinks) as usize],
        )
    }

    /// Whether `seed` on `sink` is one of the exploration's points.
    pub fn covers(&self, seed: u64, sink: SinkKind) -> bool {
        (self.seeds_start..self.seeds_end).contains(&seed) && self.sinks.contains(&sink)
    }

    /// Every row the exploration has, as (seed, sink, view), in report order.
    pub fn row_keys(&self) -> impl Iterator<Item = (u64, SinkKind, Option<View>)> + '_ {
        (0..self.points_len()).flat_map(move |i| {
            let (seed, sink) = self.point(i);
            views_of(sink).iter().map(move |&view| (seed, sink, view))
        })
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

    /// How many rows the exploration has: one per seed, sink and consumer view.
    pub fn row_count(&self) -> u64 {
        let views: u64 = self.sinks.iter().map(|&s| views_of(s).len() as u64).sum();
        (self.seeds_end - self.seeds_start) * views
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

/// One seed on one sink, as one consumer view saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExploreRow {
    pub seed: u64,
    pub sink: SinkKind,
    /// The consumer view (transactional sink only).
    pub view: Option<View>,
    pub faults_injected: u64,
    pub duplicates: u64,
    pub lost: u64,
    pub wrong: u64,
    pub corrupt: u64,
    pub stale_windows: u64,
    pub rolled_back: u64,
    pub recovery: String,
    pub dirty_reads: u64,
    /// Every property this view of the run breaks (judged against what is asked when the
    /// report is built, so `keel merge --expect` can ask something else).
    pub broken: Vec<Property>,
    pub model_mismatch: Option<String>,
    pub outcome: String,
    pub fingerprint: String,
}

impl ExploreRow {
    /// Why this row fails what is asked (None: what its sink promises to its view).
    pub fn failures(&self, asked: Option<&Expectation>) -> Vec<String> {
        failures(
            &self.broken,
            self.model_mismatch.is_some(),
            asked,
            self.sink,
            self.view,
        )
    }

    pub fn exactly_once(&self) -> bool {
        self.broken.is_empty()
    }
}

/// One seed on one sink: a row per consumer view, and the coverage cells its faults reached.
pub struct Explored {
    pub rows: Vec<ExploreRow>,
    pub cells: Vec<Cell>,
}

/// Runs one seed on one sink: one row per consumer view.
pub fn explore_one(explore: &ExploreSpec, baseline: &Baseline, seed: u64) -> Explored {
    let result = run(&baseline.seed_spec(explore, seed));
    let observation = Observation::of(&result, &baseline.spec.config);
    let sink = baseline.spec.config.sink;
    let cells = run_cells(result.world.faults_injected(), result.world.fault_sites());
    let rows = judge(&baseline.reference, &observation)
        .into_iter()
        .map(|verdict| ExploreRow {
            seed,
            sink,
            view: verdict.view,
            faults_injected: result.world.faults_injected().len() as u64,
            duplicates: verdict.duplicates,
            lost: verdict.lost,
            wrong: verdict.wrong,
            corrupt: verdict.corrupt,
            stale_windows: verdict.stale_windows,
            rolled_back: verdict.rolled_back,
            recovery: verdict.recovery.to_string(),
            dirty_reads: verdict.dirty_reads,
            broken: verdict.broken(),
            model_mismatch: verdict.model_mismatch.as_ref().map(|m| m.to_string()),
            outcome: verdict.summary(),
            fingerprint: result.world.fingerprint().to_string(),
        })
        .collect();
    Explored { rows, cells }
}

/// Per-sink (and per-view) totals.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SinkSummary {
    pub sink: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub view: Option<String>,
    pub seeds: u64,
    pub with_duplicates: u64,
    pub with_loss: u64,
    pub with_wrong: u64,
    pub with_corrupt: u64,
    pub with_stale_windows: u64,
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub view: Option<String>,
    /// The properties it breaks (of those asked).
    pub broken: Vec<String>,
    pub outcome: String,
    pub reproduce: String,
}

/// The shrunk first failure.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ShrunkReport {
    pub seed: u64,
    pub sink: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub view: Option<String>,
    /// The property the shrunk plan still breaks.
    pub property: Property,
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
    /// `incremental` with `--state-backend incremental`; absent with full checkpoints
    /// (the default), so every report of full checkpoints is what it was.
    #[serde(skip_serializing_if = "Option::is_none", alias = "checkpoint_mode")]
    pub state_backend: Option<String>,
    /// The file-system profile of the crash model (`--fs-model`).
    pub fs_model: String,
    /// What the seeds were judged by: an `--expect`, or "promised".
    pub judged_by: String,
    pub rows: Vec<ExploreRow>,
    pub summary: Vec<SinkSummary>,
    pub failing: Vec<FailingSeed>,
    pub shrunk: Option<ShrunkReport>,
    /// With `--coverage`: the sweep's cells each sink's seeds reached.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coverage: Option<Vec<SinkCoverage>>,
}

/// An exploration's report, tallied a row at a time as its seeds finish (in point order):
/// it keeps the summary, the failing seeds and, only where they are printed, the rows, so
/// that an exploration that prints its summary holds no row.
pub struct ExploreTally<'a> {
    spec: &'a ScenarioSpec,
    explore: &'a ExploreSpec,
    summary: Vec<SinkSummary>,
    failing: Vec<FailingSeed>,
    /// The first failing row: the seed, sink and view shrinking starts from.
    first_failing: Option<(u64, SinkKind, Option<View>)>,
    /// Every row, where the report prints them (None: `--summary-only`).
    rows: Option<Vec<ExploreRow>>,
}

impl<'a> ExploreTally<'a> {
    /// An empty tally of `explore` on `spec`, keeping its rows if `keep_rows`.
    pub fn new(spec: &'a ScenarioSpec, explore: &'a ExploreSpec, keep_rows: bool) -> Self {
        let summary = explore
            .sinks
            .iter()
            .flat_map(|&sink| {
                views_of(sink).iter().map(move |view| SinkSummary {
                    sink: sink.name().to_string(),
                    view: view.map(|v| v.name().to_string()),
                    ..SinkSummary::default()
                })
            })
            .collect();
        ExploreTally {
            spec,
            explore,
            summary,
            failing: Vec::new(),
            first_failing: None,
            rows: keep_rows.then(Vec::new),
        }
    }

    /// Counts `row`, the next in point order.
    pub fn add(&mut self, row: ExploreRow) {
        let (spec, explore) = (self.spec, self.explore);
        let asked = explore.expect.as_ref();
        let view = row.view.map(|v| v.name().to_string());
        let s = self
            .summary
            .iter_mut()
            .find(|s| s.sink == row.sink.name() && s.view == view)
            .expect("a row's sink and view were asked for");
        let broken = row.failures(asked);
        s.seeds += 1;
        s.with_duplicates += u64::from(row.duplicates > 0);
        s.with_loss += u64::from(row.lost > 0);
        s.with_wrong += u64::from(row.wrong > 0);
        s.with_corrupt += u64::from(row.corrupt > 0);
        s.with_stale_windows += u64::from(row.stale_windows > 0);
        s.rolled_back += u64::from(row.rolled_back > 0);
        s.failed_recoveries += u64::from(row.recovery != "ok");
        s.exactly_once += u64::from(row.exactly_once());
        s.failing += u64::from(!broken.is_empty());
        if !broken.is_empty() {
            self.first_failing
                .get_or_insert((row.seed, row.sink, row.view));
            let view_option = view
                .as_ref()
                .map_or(String::new(), |v| format!(" --view {v}"));
            self.failing.push(FailingSeed {
                seed: row.seed,
                sink: row.sink.name().to_string(),
                view,
                broken,
                outcome: row.outcome.clone(),
                reproduce: with_expect(
                    &format!(
                        "{} --sink {}{}{view_option}",
                        spec.command_with_seed("replay", row.seed),
                        row.sink,
                        explore.plan_options()
                    ),
                    asked,
                ),
            });
        }
        if let Some(rows) = &mut self.rows {
            rows.push(row);
        }
    }

    /// Whether a row counted so far fails what is asked.
    pub fn any_failing(&self) -> bool {
        self.first_failing.is_some()
    }

    /// The report of the rows counted, shrinking the first failure if `shrink_first`
    /// (`baselines`: the sinks' fault-free runs, needed only then).
    pub fn finish(
        self,
        baselines: &BTreeMap<SinkKind, Baseline>,
        shrink_first: bool,
    ) -> ExploreReport {
        let (spec, explore) = (self.spec, self.explore);
        let mut summary = self.summary;
        for s in &mut summary {
            s.exactly_once_rate = if s.seeds == 0 {
                "-".to_string()
            } else {
                format!("{:.1}%", s.exactly_once as f64 * 100.0 / s.seeds as f64)
            };
        }
        let shrunk = self
            .first_failing
            .filter(|_| shrink_first)
            .and_then(|(seed, sink, view)| {
                shrink_seed(explore, &baselines[&sink], (seed, view), spec)
            });
        ExploreReport {
            scenario: spec.label(),
            protocol: spec.protocol.name().to_string(),
            state_backend: (!spec.state_backend.is_full()).then(|| spec.state_backend.to_string()),
            fs_model: spec.fs_model.to_string(),
            judged_by: explore
                .expect
                .as_ref()
                .map_or("promised".to_string(), Expectation::name),
            rows: self.rows.unwrap_or_default(),
            summary,
            failing: self.failing,
            shrunk,
            coverage: None,
        }
    }
}

/// The property to keep while shrinking: the most serious one the view fails (None when it
/// fails nothing a plan could shrink: a model mismatch fails the fault-free run too).
pub fn target_property(failures: &[String]) -> Option<Property> {
    failures
        .iter()
        .filter(|name| name.as_str() != MATCHES_MODEL)
        .find_map(|name| Property::ALL.into_iter().find(|p| p.name() == name))
}

/// Shrinks the plan of `seed` on `baseline`'s sink, judged in `view` (`None` if it shows no
/// failure to keep).
pub fn shrink_seed(
    explore: &ExploreSpec,
    baseline: &Baseline,
    (seed, view): (u64, Option<View>),
    spec: &ScenarioSpec,
) -> Option<ShrunkReport> {
    let seed_spec = baseline.seed_spec(explore, seed);
    let result = run(&seed_spec);
    let observation = Observation::of(&result, &baseline.spec.config);
    let verdict = judge_one(&baseline.reference, &observation, view);
    let sink = baseline.spec.config.sink;
    let property = target_property(&verdict.failures(explore.expect.as_ref(), sink))?;
    let Shrunk {
        plan,
        verdict,
        runs,
        ..
    } = shrink(
        &seed_spec,
        &baseline.reference,
        &seed_spec.plan,
        (property, view),
    );
    let seed_scenario = ScenarioSpec {
        seed,
        ..spec.clone()
    };
    Some(ShrunkReport {
        seed,
        sink: sink.name().to_string(),
        view: view.map(|v| v.name().to_string()),
        property,
        plan: plan.to_file(),
        outcome: verdict.summary(),
        runs,
        reproduce: with_expect(
            &replay_plan_command(&seed_scenario, sink, view, &plan),
            explore.expect.as_ref(),
        ),
    })
}

impl ExploreReport {
    pub fn rows_table(&self) -> Table {
        let with_views = self.rows.iter().any(|r| r.view.is_some());
        let mut headers = vec!["seed", "sink"];
        if with_views {
            headers.push("view");
        }
        headers.extend([
            "faults",
            "duplicates",
            "lost",
            "wrong",
            "corrupt",
            "stale_windows",
            "rolled_back",
            "recovery",
            "fingerprint",
        ]);
        let mut table = Table::new(&headers);
        for r in &self.rows {
            let mut cells = vec![r.seed.to_string(), r.sink.name().to_string()];
            if with_views {
                cells.push(r.view.map_or("-".to_string(), |v| v.name().to_string()));
            }
            cells.extend([
                r.faults_injected.to_string(),
                r.duplicates.to_string(),
                r.lost.to_string(),
                r.wrong.to_string(),
                r.corrupt.to_string(),
                r.stale_windows.to_string(),
                r.rolled_back.to_string(),
                r.recovery.clone(),
                r.fingerprint.clone(),
            ]);
            table.push(cells);
        }
        table
    }

    pub fn summary_table(&self) -> Table {
        let with_views = self.summary.iter().any(|s| s.view.is_some());
        let mut headers = vec!["sink"];
        if with_views {
            headers.push("view");
        }
        headers.extend([
            "seeds",
            "with_duplicates",
            "with_loss",
            "with_wrong",
            "with_corrupt",
            "with_stale_windows",
            "rolled_back",
            "failed_recoveries",
            "exactly_once",
            "exactly_once_rate",
            "failing",
        ]);
        let mut table = Table::new(&headers);
        for s in &self.summary {
            let mut cells = vec![s.sink.clone()];
            if with_views {
                cells.push(s.view.clone().unwrap_or_else(|| "-".to_string()));
            }
            cells.extend([
                s.seeds.to_string(),
                s.with_duplicates.to_string(),
                s.with_loss.to_string(),
                s.with_wrong.to_string(),
                s.with_corrupt.to_string(),
                s.with_stale_windows.to_string(),
                s.rolled_back.to_string(),
                s.failed_recoveries.to_string(),
                s.exactly_once.to_string(),
                s.exactly_once_rate.clone(),
                s.failing.to_string(),
            ]);
            table.push(cells);
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
            "explore scenario={} protocol={}{} fs_model={} judged_by={}\n\n",
            self.scenario,
            self.protocol,
            crate::sweep::mode_field(&self.state_backend),
            self.fs_model,
            self.judged_by
        ));
        if !summary_only {
            out.push_str(&self.rows_table().render(format));
            out.push('\n');
        }
        out.push_str(&self.summary_table().render(format));
        if !self.failing.is_empty() {
            out.push_str(&format!("\nfailing seeds: {}\n", self.failing.len()));
            for failing in &self.failing {
                let view = failing
                    .view
                    .as_ref()
                    .map_or(String::new(), |v| format!(" {v}"));
                out.push_str(&format!(
                    "  seed {} {}{view}: {} broken ({})\n    reproduce: {}\n",
                    failing.seed,
                    failing.sink,
                    failing.broken.join(","),
                    failing.outcome,
                    failing.reproduce
                ));
            }
        }
        if let Some(shrunk) = &self.shrunk {
            out.push_str(&format!(
                "\nshrunk seed {} {}{} ({} broken, {} runs): {}\n  plan: {}\n  reproduce: {}\n",
                shrunk.seed,
                shrunk.sink,
                shrunk
                    .view
                    .as_ref()
                    .map_or(String::new(), |v| format!(" {v}")),
                shrunk.property,
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
