//! Sites: the steps of a fault-free run, where faults can be aimed, and the fault kinds that
//! apply at each (`keel sites` prints them; sweeps and swarm plans aim at them).

use std::collections::BTreeMap;

use crate::decimal::count_text;
use crate::runner::{run_recording_crash_states, RunResult, RunSpec};
use crate::table::Table;
use keel_sim::{FaultKind, TraceLine, World};
use num_bigint::BigUint;
use serde::Serialize;
use std::sync::Arc;

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
        // A parallel job's own faults: the one-task engine sends no such message.
        FaultKind::MessageLost | FaultKind::SlowChannel => false,
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
    /// How many disk states a power loss right after this step can leave, exactly (a JSON
    /// number up to 2^53, a decimal string beyond; null only for a step a crash cut short
    /// before its effect, which a fault-free run has none of).
    #[serde(with = "crate::decimal::optional_count")]
    pub power_loss_states: Option<BigUint>,
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
    packed_sites(baseline, true).iter().collect()
}

/// What a sweep reads of a site to draw its points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Aim {
    pub step: u64,
    pub faults: FaultKinds,
    /// The count recorded (crash states, or classes of them): None past a u64, or where
    /// classes are not numbered.
    pub power_loss_states: Option<u64>,
    /// Where `power_loss_states` is None and the step was counted: its crash states, exactly.
    pub power_loss_states_exact: Option<Arc<BigUint>>,
}

impl Aim {
    /// The power-loss points the model admits here, exactly: the count recorded, else the
    /// crash states (which a sweep draws where classes are not numbered). None: not counted.
    pub fn power_loss_admitted(&self) -> Option<BigUint> {
        match (self.power_loss_states, &self.power_loss_states_exact) {
            (Some(count), _) => Some(BigUint::from(count)),
            (None, Some(exact)) => Some((**exact).clone()),
            (None, None) => None,
        }
    }
}

/// Per step whose count is None, its exact crash states (from
/// [`World::crash_state_counts_exact`]), in step order.
#[derive(Clone, Debug, Default)]
struct ExactCounts(Vec<(u64, Arc<BigUint>)>);

impl ExactCounts {
    fn of(world: &World, counted: bool) -> ExactCounts {
        if !counted {
            return ExactCounts::default();
        }
        let exact = world.crash_state_counts_exact();
        ExactCounts(
            exact
                .iter()
                .map(|(step, count)| (*step, Arc::new(count.clone())))
                .collect(),
        )
    }

    fn get(&self, step: u64) -> Option<Arc<BigUint>> {
        let i = self.0.binary_search_by_key(&step, |(s, _)| *s).ok()?;
        Some(Arc::clone(&self.0[i].1))
    }
}

/// A fault-free run's sites, packed: a baseline keeps one per step of its whole run (a
/// sweep of a million-event stream on two sinks, 2.4 million), so a site is 24 bytes, its op
/// a number into a table of the distinct ones and its target a range of one text (targets
/// are mostly distinct: an event's index, a record's key), where a [`SiteRow`] is 80 and
/// an allocation.
#[derive(Clone, Debug, Default)]
pub struct Sites {
    packed: Vec<PackedSite>,
    ops: Vec<&'static str>,
    /// Every site's target, one after the other: site `i`'s ends at its `target_end`.
    targets: String,
    /// Each site's power-loss crash-state count, if counted (else empty).
    power_loss_states: Vec<Option<u64>>,
    /// The exact counts of the sites whose count is None.
    exact: ExactCounts,
}

#[derive(Clone, Copy, Debug)]
struct PackedSite {
    step: u64,
    time_ms: u64,
    /// Where its target ends in [`Sites::targets`] (it starts where the previous one's ends).
    target_end: u32,
    faults: FaultKinds,
    op: u8,
}

const _: () = assert!(std::mem::size_of::<PackedSite>() == 24);

impl Sites {
    /// The sites of `baseline`, with `counts` its steps' crash-state counts (empty: none
    /// counted).
    fn of(baseline: &RunResult, counts: &[Option<u64>], exact: ExactCounts) -> Sites {
        let unpersisted = baseline.world.unpersisted_counts();
        let mut ops: BTreeMap<&'static str, u8> = BTreeMap::new();
        let mut sites = Sites {
            exact,
            ..Sites::default()
        };
        let steps_len = baseline
            .world
            .trace()
            .lines()
            .filter(|line| matches!(line, TraceLine::Step { .. }))
            .count();
        // Kept for the whole sweep: no spare capacity, and no doubling on the way.
        sites.packed.reserve_exact(steps_len);
        if !counts.is_empty() {
            sites.power_loss_states.reserve_exact(steps_len);
        }
        for line in baseline.world.trace().lines() {
            let TraceLine::Step {
                step,
                time_ms,
                op,
                target,
                ..
            } = line
            else {
                continue;
            };
            let op_number = *ops.entry(op).or_insert_with(|| {
                sites.ops.push(op);
                u8::try_from(sites.ops.len() - 1).expect("at most 256 ops")
            });
            sites.targets.push_str(target);
            let target_end = u32::try_from(sites.targets.len()).expect("targets under 4 GiB");
            if !counts.is_empty() {
                // A step cut short by a crash before its effect has no count.
                let count = counts.get(*step as usize).copied().flatten();
                sites.power_loss_states.push(count);
            }
            sites.packed.push(PackedSite {
                step: *step,
                time_ms: *time_ms,
                target_end,
                faults: faults_at(op, *step, unpersisted),
                op: op_number,
            });
        }
        assert_eq!(sites.packed.len(), steps_len);
        sites.targets.shrink_to_fit();
        sites
    }

    pub fn len(&self) -> usize {
        self.packed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.packed.is_empty()
    }

    /// The `i`-th site as a row.
    pub fn get(&self, i: usize) -> SiteRow {
        let packed = &self.packed[i];
        let target_start = i.checked_sub(1).map_or(0, |j| self.packed[j].target_end);
        SiteRow {
            step: packed.step,
            time_ms: packed.time_ms,
            op: self.ops[packed.op as usize],
            target: self.targets[target_start as usize..packed.target_end as usize].to_string(),
            faults: packed.faults,
            power_loss_states: self.aim(i).power_loss_admitted(),
        }
    }

    fn power_loss_states(&self, i: usize) -> Option<u64> {
        self.power_loss_states.get(i).copied().flatten()
    }

    /// What a sweep reads of the `i`-th site.
    pub fn aim(&self, i: usize) -> Aim {
        let packed = &self.packed[i];
        let power_loss_states = self.power_loss_states(i);
        Aim {
            step: packed.step,
            faults: packed.faults,
            power_loss_states,
            power_loss_states_exact: power_loss_states
                .is_none()
                .then(|| self.exact.get(packed.step))
                .flatten(),
        }
    }

    /// Every site as a row, in step order.
    pub fn iter(&self) -> impl Iterator<Item = SiteRow> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    /// What a sweep reads of every site, in step order.
    pub fn aims(&self) -> impl Iterator<Item = Aim> + '_ {
        (0..self.len()).map(|i| self.aim(i))
    }
}

/// The fault kinds that apply at step `step`, whose operation is `op`, of a run that left
/// `unpersisted` bytes in the page cache after each step (a page eviction only where some).
fn faults_at(op: &str, step: u64, unpersisted: &[u64]) -> FaultKinds {
    FaultKind::ALL
        .into_iter()
        .filter(|k| applies(op, *k))
        .filter(|k| {
            *k != FaultKind::PageEviction || unpersisted.get(step as usize).is_some_and(|&b| b > 0)
        })
        .collect()
}

/// What a sweep keeps of a fault-free run's sites: per step, the fault kinds that apply
/// there and, if counted, its power-loss crash-state count. A run numbers its steps one
/// after the other, so a site's step is `first_step` plus its index, and a site costs 2
/// bytes (18 with its count), where [`Sites`] keeps 24 and its target: a sweep of a
/// million-event stream on two sinks kept 87 MB of rows it never read.
#[derive(Clone, Debug, Default)]
pub struct SiteAims {
    /// The first step the run's trace holds: 0, or where a run forked from a snapshot
    /// (which keeps no trace lines) took its first step.
    first_step: u64,
    faults: Vec<FaultKinds>,
    /// Each site's power-loss crash-state count, if counted (else empty).
    power_loss_states: Vec<Option<u64>>,
    /// The exact counts of the sites whose count is None.
    exact: ExactCounts,
}

impl SiteAims {
    /// The aims of `run` (a fault-free run, or one with a first fault: its steps go on
    /// across restarts), with `counts` its steps' crash-state counts (empty: none counted).
    fn of(world: &World, counts: &[Option<u64>], exact: ExactCounts) -> SiteAims {
        let unpersisted = world.unpersisted_counts();
        let mut aims = SiteAims {
            exact,
            ..SiteAims::default()
        };
        let steps = || {
            world.trace().lines().filter_map(|line| match line {
                TraceLine::Step { step, op, .. } => Some((*step, *op)),
                _ => None,
            })
        };
        aims.first_step = steps().next().map_or(0, |(step, _)| step);
        let steps_len = (world.steps_taken() - aims.first_step) as usize;
        // Kept for the whole sweep: no spare capacity, and no doubling on the way.
        aims.faults.reserve_exact(steps_len);
        if !counts.is_empty() {
            aims.power_loss_states.reserve_exact(steps_len);
        }
        for (step, op) in steps() {
            assert_eq!(
                step,
                aims.first_step + aims.faults.len() as u64,
                "steps are numbered in order"
            );
            aims.faults.push(faults_at(op, step, unpersisted));
            if !counts.is_empty() {
                // A step cut short by a crash before its effect has no count.
                aims.power_loss_states
                    .push(counts.get(step as usize).copied().flatten());
            }
        }
        assert_eq!(aims.faults.len(), steps_len);
        aims
    }

    pub fn len(&self) -> usize {
        self.faults.len()
    }

    pub fn is_empty(&self) -> bool {
        self.faults.is_empty()
    }

    /// The first site at or after `step` (`len()` if none): sites are one a step.
    pub fn first_at_or_after(&self, step: u64) -> usize {
        (step.saturating_sub(self.first_step) as usize).min(self.len())
    }

    /// What a sweep reads of the `i`-th site.
    pub fn aim(&self, i: usize) -> Aim {
        let step = self.first_step + i as u64;
        let power_loss_states = self.power_loss_states.get(i).copied().flatten();
        Aim {
            step,
            faults: self.faults[i],
            power_loss_states,
            power_loss_states_exact: power_loss_states
                .is_none()
                .then(|| self.exact.get(step))
                .flatten(),
        }
    }

    /// What a sweep reads of every site, in step order.
    pub fn aims(&self) -> impl Iterator<Item = Aim> + '_ {
        (0..self.len()).map(|i| self.aim(i))
    }
}

/// The aims of a run recorded with [`run_recording_crash_states`] (counted) or not (every
/// count None: a sweep that aims no power loss, `baseline::CrashStates`).
pub fn site_aims(run: &RunResult, crash_states_counted: bool) -> SiteAims {
    site_aims_of_world(&run.world, crash_states_counted)
}

/// [`site_aims`] of a run's world, run to its end or stopped on the way.
pub fn site_aims_of_world(world: &World, crash_states_counted: bool) -> SiteAims {
    SiteAims::of(
        world,
        counts_of(world, crash_states_counted),
        ExactCounts::of(world, crash_states_counted),
    )
}

/// The sites of a fault-free run, counted or not as for [`site_aims`], packed.
pub fn packed_sites(baseline: &RunResult, crash_states_counted: bool) -> Sites {
    Sites::of(
        baseline,
        counts_of(&baseline.world, crash_states_counted),
        ExactCounts::of(&baseline.world, crash_states_counted),
    )
}

/// `run`'s crash-state count per step if `counted` (it must have been recorded with
/// [`run_recording_crash_states`]), else none.
fn counts_of(world: &World, counted: bool) -> &[Option<u64>] {
    let counts = world.crash_state_counts();
    if counted {
        assert!(
            counts.len() as u64 + 1 >= world.steps_taken(),
            "counted sites need a run recorded with run_recording_crash_states"
        );
        counts
    } else {
        assert!(counts.is_empty());
        &[]
    }
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
                .as_ref()
                .map_or("-".to_string(), states_text),
        ]);
    }
    table
}

/// A step's crash states in a text table: the number as it is up to 15 digits, else in
/// scientific notation ([`count_text`]).
fn states_text(states: &BigUint) -> String {
    let decimal = states.to_string();
    if decimal.len() <= 15 {
        decimal
    } else {
        count_text(&decimal)
    }
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
