//! Coverage: which places of a protocol the faults of an exploration reached.
//!
//! A cell is (phase, fault kind), where the phase is the step's operation and what it acts
//! on with every number masked (`disk.fsync state-N.json.tmp`: the temporary checkpoint's
//! fsync, whichever checkpoint; `sink.write N:N`: a record written to the sink;
//! `log.commit keel-txn-N`: a transaction committed): the protocol's own name for the place,
//! not a step number, so that a cell means the same on every stream. The sweep's cells are
//! those of its fault-free run, every fault kind at every step where it applies (`keel sites`
//! lists them): a sweep reaches all of them by construction. A seed reaches the cells where
//! its faults took effect (`keel_sim::World::fault_sites`), a fault after a restart perhaps
//! in a cell no single-fault sweep has (a recovery's own steps): those are counted apart.

use crate::baseline::Baseline;
use crate::sites::{sites, SiteRow};
use keel_engine::SinkKind;
use keel_sim::{FaultKind, FaultSite, PlannedFault};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// One place of a protocol and a fault there.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Cell {
    pub phase: String,
    pub fault: FaultKind,
}

/// The phase of a step: its operation and its target with every run of digits as `N`; a
/// directory's fsync also names the operation before it (`after disk.rename`: the new
/// checkpoint's name made durable; `after sink.open`: the sink file's), since its target
/// alone does not say which it makes durable.
pub fn phase_of(op: &str, target: &str, after_op: &str) -> String {
    let mut phase = String::with_capacity(op.len() + 1 + target.len());
    phase.push_str(op);
    phase.push(' ');
    let mut in_digits = false;
    for c in target.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                phase.push('N');
            }
            in_digits = true;
        } else {
            phase.push(c);
            in_digits = false;
        }
    }
    if op == DIRECTORY_FSYNC && !after_op.is_empty() {
        phase.push_str(" after ");
        phase.push_str(after_op);
    }
    phase
}

const DIRECTORY_FSYNC: &str = "disk.fsync-dir";

/// The cells a sweep of `faults` tries on the fault-free run whose sites are `sites`.
pub fn sweep_cells(sites: &[SiteRow], faults: &[FaultKind]) -> BTreeSet<Cell> {
    sites
        .iter()
        .zip(phases_by_step(sites))
        .flat_map(|(site, phase)| {
            site.faults
                .iter()
                .filter(|kind| faults.contains(kind))
                .map(move |fault| Cell {
                    phase: phase.clone(),
                    fault,
                })
        })
        .collect()
}

/// Each step's phase in the fault-free run whose sites are `sites` (index: the step).
pub fn phases_by_step(sites: &[SiteRow]) -> Vec<String> {
    assert!(sites.iter().enumerate().all(|(i, s)| s.step == i as u64));
    let after_ops = std::iter::once("").chain(sites.iter().map(|site| site.op));
    sites
        .iter()
        .zip(after_ops)
        .map(|(site, after_op)| phase_of(site.op, &site.target, after_op))
        .collect()
}

/// The sweep's cells of each sink's fault-free run, and its steps' phases.
pub struct SweepCells {
    pub cells: BTreeSet<Cell>,
    pub phases_by_step: Vec<String>,
}

/// [`SweepCells`] for every sink of `baselines` (one fault-free run each, for its sites'
/// targets).
pub fn sweep_cells_by_sink(
    baselines: &BTreeMap<SinkKind, Baseline>,
    faults: &[FaultKind],
) -> BTreeMap<SinkKind, SweepCells> {
    baselines
        .iter()
        .map(|(&sink, baseline)| {
            let (_, sites) = sites(&baseline.spec);
            let cells = SweepCells {
                cells: sweep_cells(&sites, faults),
                phases_by_step: phases_by_step(&sites),
            };
            (sink, cells)
        })
        .collect()
}

/// The cells one run's faults reached: each fault that took effect and where.
pub fn run_cells(injected: &[PlannedFault], sites: &[FaultSite]) -> Vec<Cell> {
    assert_eq!(injected.len(), sites.len());
    injected
        .iter()
        .zip(sites)
        .map(|(planned, at)| Cell {
            phase: phase_of(at.site.op, &at.site.target, at.after_op),
            fault: planned.fault.kind(),
        })
        .collect()
}

/// One sink's coverage: the sweep's cells, the first seed that reached each, and the cells
/// reached that the sweep does not try.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SinkCoverage {
    pub sink: String,
    pub cells: u64,
    pub reached: u64,
    /// Every sweep cell, with the first seed that reached it (None: none did).
    pub first_seed: Vec<CellFirstSeed>,
    /// Cells reached beyond the sweep's (faults after a restart), with their first seed.
    pub beyond_sweep: Vec<CellFirstSeed>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CellFirstSeed {
    pub phase: String,
    pub fault: FaultKind,
    pub first_seed: Option<u64>,
}

/// The coverage of an exploration, tallied as its seeds finish (in seed order, so the first
/// seed to reach a cell is the smallest).
#[derive(Debug)]
pub struct CoverageTally {
    sinks: BTreeMap<SinkKind, SinkCells>,
}

#[derive(Debug)]
struct SinkCells {
    sweep: BTreeMap<Cell, Option<u64>>,
    beyond: BTreeMap<Cell, u64>,
}

impl CoverageTally {
    /// An empty tally, each sink with the sweep's cells of its fault-free run.
    pub fn new(cells_by_sink: BTreeMap<SinkKind, BTreeSet<Cell>>) -> CoverageTally {
        let sinks = cells_by_sink
            .into_iter()
            .map(|(sink, cells)| {
                let cells = SinkCells {
                    sweep: cells.into_iter().map(|c| (c, None)).collect(),
                    beyond: BTreeMap::new(),
                };
                (sink, cells)
            })
            .collect();
        CoverageTally { sinks }
    }

    /// Counts the cells `seed` reached on `sink`.
    pub fn add(&mut self, seed: u64, sink: SinkKind, cells: Vec<Cell>) {
        let tally = self.sinks.get_mut(&sink).expect("a sink explored");
        for cell in cells {
            match tally.sweep.get_mut(&cell) {
                Some(first) => {
                    first.get_or_insert(seed);
                }
                None => {
                    tally.beyond.entry(cell).or_insert(seed);
                }
            }
        }
    }

    /// The coverage, sink by sink.
    pub fn finish(self) -> Vec<SinkCoverage> {
        self.sinks
            .into_iter()
            .map(|(sink, cells)| {
                let first_seed: Vec<CellFirstSeed> = cells
                    .sweep
                    .into_iter()
                    .map(|(cell, first_seed)| CellFirstSeed {
                        phase: cell.phase,
                        fault: cell.fault,
                        first_seed,
                    })
                    .collect();
                SinkCoverage {
                    sink: sink.name().to_string(),
                    cells: first_seed.len() as u64,
                    reached: first_seed.iter().filter(|c| c.first_seed.is_some()).count() as u64,
                    first_seed,
                    beyond_sweep: cells
                        .beyond
                        .into_iter()
                        .map(|(cell, seed)| CellFirstSeed {
                            phase: cell.phase,
                            fault: cell.fault,
                            first_seed: Some(seed),
                        })
                        .collect(),
                }
            })
            .collect()
    }
}

/// The coverage as text (`markdown`: as Markdown tables): per sink, the cells reached of
/// the sweep's, the ones missed, and the first seed (or point: `by` says which, and of
/// what) that reached each.
pub fn render_coverage(coverage: &[SinkCoverage], by: &str, markdown: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\ncoverage of the sweep's cells (phase: the step's operation and target, numbers as N; fault kind) by {by}:"
    );
    for sink in coverage {
        let missed: Vec<&CellFirstSeed> = sink
            .first_seed
            .iter()
            .filter(|c| c.first_seed.is_none())
            .collect();
        let _ = writeln!(
            out,
            "{}: {} of {} cells reached, {} missed; {} more cells reached beyond the sweep's (faults after a restart)",
            sink.sink,
            sink.reached,
            sink.cells,
            missed.len(),
            sink.beyond_sweep.len()
        );
        if markdown {
            out.push_str("\n| phase | fault | first |\n| --- | --- | --- |\n");
        }
        let width = sink
            .first_seed
            .iter()
            .map(|c| c.phase.len())
            .max()
            .unwrap_or(0);
        for cell in &sink.first_seed {
            let first = cell
                .first_seed
                .map_or("missed".to_string(), |s| s.to_string());
            if markdown {
                let _ = writeln!(
                    out,
                    "| `{}` | {} | {first} |",
                    cell.phase,
                    cell.fault.name()
                );
            } else {
                let _ = writeln!(
                    out,
                    "  {:<width$} {:<18} {first}",
                    cell.phase,
                    cell.fault.name()
                );
            }
        }
        if markdown {
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_masks_every_number() {
        let check = |op: &str, target: &str, expected: &str| {
            assert_eq!(phase_of(op, target, "source.read"), expected);
        };
        check(
            "disk.fsync",
            "state-16.json.tmp",
            "disk.fsync state-N.json.tmp",
        );
        check("sink.write", "13:10", "sink.write N:N");
        check("sink.write", "flush:30", "sink.write flush:N");
        check("disk.list", ".", "disk.list .");
        check("disk.fsync-dir", ".", "disk.fsync-dir . after source.read");
        assert_eq!(phase_of("disk.fsync-dir", ".", ""), "disk.fsync-dir .");
        check("log.commit", "keel-txn-120", "log.commit keel-txn-N");
    }

    #[test]
    fn the_first_seed_is_kept_and_cells_beyond_the_sweep_apart() {
        let cell = |phase: &str, fault| Cell {
            phase: phase.to_string(),
            fault,
        };
        let sweep = BTreeSet::from([
            cell("source.read event N", FaultKind::ProcessCrash),
            cell("disk.fsync sink-append.jsonl", FaultKind::DiskError),
        ]);
        let mut tally = CoverageTally::new(BTreeMap::from([(SinkKind::Append, sweep)]));
        tally.add(
            3,
            SinkKind::Append,
            vec![cell("source.read event N", FaultKind::ProcessCrash)],
        );
        tally.add(
            5,
            SinkKind::Append,
            vec![
                cell("source.read event N", FaultKind::ProcessCrash),
                cell("disk.read state-N.json", FaultKind::ProcessCrash),
            ],
        );
        let coverage = tally.finish();
        assert_eq!(coverage.len(), 1);
        let append = &coverage[0];
        assert_eq!((append.cells, append.reached), (2, 1));
        let firsts: Vec<Option<u64>> = append.first_seed.iter().map(|c| c.first_seed).collect();
        // Cells sort by phase: the sink's fsync first.
        assert_eq!(firsts, vec![None, Some(3)]);
        assert_eq!(append.beyond_sweep.len(), 1);
        assert_eq!(append.beyond_sweep[0].first_seed, Some(5));
    }
}
