//! Sites: the steps of a fault-free run, where faults can be aimed, and the fault kinds that
//! apply at each (`keel sites` prints them; sweeps and swarm plans aim at them).

use crate::runner::{run_recording_crash_states, RunResult, RunSpec};
use crate::table::Table;
use keel_sim::{FaultKind, TraceLine};
use serde::Serialize;

/// Whether a fault of `kind` can be aimed at a step doing `op` (a page eviction can be
/// aimed at any step, and takes effect only where a failed fsync left unpersisted bytes:
/// [`sites_from_run`] keeps it where the run had some).
pub fn applies(op: &str, kind: FaultKind) -> bool {
    match kind {
        FaultKind::ProcessCrash | FaultKind::PowerLoss | FaultKind::PageEviction => true,
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
        FaultKind::SinkError
        | FaultKind::AckLost
        | FaultKind::SinkUnavailable
        | FaultKind::Zombie => op == "sink.write" || op.starts_with("log."),
    }
}

/// One step of the fault-free run: where faults can be aimed. A sweep keeps one per step
/// (3 to 4 an event), so a row owns one string, its target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SiteRow {
    pub step: u64,
    pub time_ms: u64,
    pub op: &'static str,
    pub target: String,
    /// The fault kinds that apply here.
    pub faults: FaultKinds,
    /// How many disk states a power loss right after this step can leave (null: > 2^64).
    pub power_loss_states: Option<u64>,
}

/// A set of fault kinds, a bit each in the order of [`FaultKind::ALL`] (the order it lists
/// and serializes them in: as the `Vec` it replaces, a list of names).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultKinds(u16);

impl FaultKinds {
    fn bit(kind: FaultKind) -> u16 {
        const { assert!(FaultKind::ALL.len() <= 16) };
        let position = FaultKind::ALL.iter().position(|k| *k == kind);
        1 << position.expect("every kind is in FaultKind::ALL")
    }

    pub fn contains(&self, kind: &FaultKind) -> bool {
        self.0 & FaultKinds::bit(*kind) != 0
    }

    /// The kinds in the set, in the order of [`FaultKind::ALL`].
    pub fn iter(&self) -> impl Iterator<Item = FaultKind> + '_ {
        FaultKind::ALL
            .into_iter()
            .filter(|kind| self.contains(kind))
    }
}

impl FromIterator<FaultKind> for FaultKinds {
    fn from_iter<I: IntoIterator<Item = FaultKind>>(kinds: I) -> FaultKinds {
        FaultKinds(
            kinds
                .into_iter()
                .fold(0, |bits, kind| bits | FaultKinds::bit(kind)),
        )
    }
}

impl Serialize for FaultKinds {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
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
    assert!(
        counts.len() as u64 + 1 >= baseline.world.steps_taken(),
        "sites need a run recorded with run_recording_crash_states"
    );
    site_rows(baseline, counts)
}

/// The steps of a fault-free run recorded without crash-state counts, as sites whose
/// counts are all None (for a sweep that aims no power loss: `baseline::CrashStates`).
pub fn sites_uncounted(baseline: &RunResult) -> Vec<SiteRow> {
    assert!(baseline.world.crash_state_counts().is_empty());
    site_rows(baseline, &[])
}

/// A site row per step of `baseline`, with `counts` its steps' crash-state counts.
fn site_rows(baseline: &RunResult, counts: &[Option<u64>]) -> Vec<SiteRow> {
    let unpersisted = baseline.world.unpersisted_counts();
    let mut rows: Vec<SiteRow> = baseline
        .world
        .trace()
        .lines()
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
                op,
                target: target.clone(),
                faults: FaultKind::ALL
                    .into_iter()
                    .filter(|k| applies(op, *k))
                    .filter(|k| {
                        *k != FaultKind::PageEviction
                            || unpersisted.get(*step as usize).is_some_and(|&b| b > 0)
                    })
                    .collect(),
                // A step cut short by a crash before its effect has no count.
                power_loss_states: counts.get(*step as usize).copied().flatten(),
            }),
            _ => None,
        })
        .collect();
    // Kept for the whole sweep: no spare capacity.
    rows.shrink_to_fit();
    rows
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
            row.op.to_string(),
            row.target.clone(),
            faults.join(","),
            row.power_loss_states
                .map_or(">2^64".to_string(), |c| c.to_string()),
        ]);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every subset of the kinds: the set holds exactly them, lists them in the order of
    /// `FaultKind::ALL`, and serializes as the list of them did.
    #[test]
    fn a_set_of_fault_kinds_holds_lists_and_serializes_as_the_list() {
        let all = FaultKind::ALL;
        for subset in 0..1u32 << all.len() {
            let kinds: Vec<FaultKind> = (0..all.len())
                .filter(|i| subset & (1 << i) != 0)
                .map(|i| all[i])
                .collect();
            // Built in reverse order, with a repeat: a set.
            let set: FaultKinds = kinds.iter().rev().chain(kinds.first()).copied().collect();
            assert_eq!(set.iter().collect::<Vec<_>>(), kinds);
            for kind in all {
                assert_eq!(set.contains(&kind), kinds.contains(&kind), "{kind:?}");
            }
            assert_eq!(
                serde_json::to_string(&set).unwrap(),
                serde_json::to_string(&kinds).unwrap()
            );
        }
    }
}
