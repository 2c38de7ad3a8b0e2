//! A depth-2 sweep's later sites: where the second faults after a first fault go, found by
//! running the first fault once, up to where it converges (where the sweep counts crash
//! states, only where its whole disk is also alike with the fault-free run's through any
//! power loss), and from there read off the fault-free run's sites, shifted.

use super::site_points_len;
use crate::baseline::Baseline;
use crate::fork::{Forks, UntilConverged};
use crate::runner::{run, run_recording_crash_counts, RunSpec};
use crate::sites::{site_aims, site_aims_of_world, Aim, SiteAims};
use crate::sweep::SweepSpec;
use keel_sim::{CrashCounts, FaultKind, FaultPlan, PlannedFault};

/// The sites of the run a first fault changed, after its step: its own, then, where the run
/// converged on the fault-free run, the fault-free run's from there on, shifted.
#[derive(Debug)]
pub struct Later {
    pub(super) own: Vec<Aim>,
    fault_free: Option<Shifted>,
}

/// The fault-free run's sites from `from` on, each `shift` steps later in a first fault's run
/// (the runs take the same steps from the boundary on: `Forks::run_until_converged`).
#[derive(Clone, Copy, Debug)]
struct Shifted {
    from: usize,
    shift: i64,
}

impl Later {
    /// Every later site, in step order, the fault-free run's read from `sites`.
    #[cfg(test)]
    pub(super) fn aims<'a>(&'a self, sites: &'a SiteAims) -> impl Iterator<Item = Aim> + 'a {
        Later::aims_of(&self.own, self.fault_free, sites)
    }

    /// `own`, then the fault-free run's sites `fault_free` names, shifted: later sites in step
    /// order, the fault-free run's read from `sites`.
    fn aims_of<'a>(
        own: &'a [Aim],
        fault_free: Option<Shifted>,
        sites: &'a SiteAims,
    ) -> impl Iterator<Item = Aim> + 'a {
        let fault_free = fault_free
            .into_iter()
            .flat_map(move |Shifted { from, shift }| {
                (from..sites.len()).map(move |i| {
                    let aim = sites.aim(i);
                    Aim {
                        step: aim.step.checked_add_signed(shift).expect("a step"),
                        ..aim
                    }
                })
            });
        own.iter().cloned().chain(fault_free)
    }

    /// The later sites from the last one whose points start at or before `offset` (of all
    /// the later sites' points of `kind`; 0: from the first), with how many points the sites
    /// before it hold. The fault-free run's sites are found by `suffix_lens` ([`suffix_lens`]
    /// of `kind`), not read one by one: a chunk in the middle of a first fault's pairs starts
    /// where its points are.
    pub(super) fn aims_from<'a>(
        &'a self,
        sites: &'a SiteAims,
        suffix_lens: &[u64],
        kind: FaultKind,
        sweep: &SweepSpec,
        offset: u64,
    ) -> (u64, impl Iterator<Item = Aim> + 'a) {
        let own_len = self.own_points_len(kind, sweep);
        match self.fault_free {
            Some(Shifted { from, shift }) if offset >= own_len => {
                assert_eq!(suffix_lens.len(), sites.len() + 1);
                // The fault-free site `from + k` starts `suffix_lens[from] - suffix_lens[from
                // + k]` points into them; the last to start at or before `offset`.
                let into = offset - own_len;
                let threshold = suffix_lens[from].saturating_sub(into);
                let k = suffix_lens[from..].partition_point(|&rest| rest >= threshold) - 1;
                let start = own_len + suffix_lens[from] - suffix_lens[from + k];
                assert!(start <= offset);
                let shifted = Shifted {
                    from: from + k,
                    shift,
                };
                (start, Later::aims_of(&[], Some(shifted), sites))
            }
            _ => (0, Later::aims_of(&self.own, self.fault_free, sites)),
        }
    }

    /// How many points of `kind` the later sites hold; `suffix_lens[i]`: how many the
    /// fault-free run's sites from `i` on hold.
    pub(super) fn points_len(
        &self,
        kind: FaultKind,
        sweep: &SweepSpec,
        suffix_lens: &[u64],
    ) -> u64 {
        self.own_points_len(kind, sweep)
            + self
                .fault_free
                .map_or(0, |shifted| suffix_lens[shifted.from])
    }

    /// How many points of `kind` the first fault's own later sites hold.
    fn own_points_len(&self, kind: FaultKind, sweep: &SweepSpec) -> u64 {
        self.own
            .iter()
            .map(|site| site_points_len(site, kind, sweep))
            .sum()
    }
}

/// For each site `i` of `sites`, how many points of `kind` the sites from `i` on hold (one
/// more entry, 0, for the end).
pub(super) fn suffix_lens(sites: &SiteAims, kind: FaultKind, sweep: &SweepSpec) -> Vec<u64> {
    let mut lens = vec![0; sites.len() + 1];
    for i in (0..sites.len()).rev() {
        lens[i] = lens[i + 1] + site_points_len(&sites.aim(i), kind, sweep);
    }
    lens
}

/// How a depth-2 sweep runs a first fault to find its later sites: recording crash-state
/// counts (and with them the bytes a failed fsync left unpersisted at each step, where a page
/// eviction applies), and so stopping only where it converges with its whole disk alike
/// with the fault-free run's.
#[derive(Clone, Copy, Debug)]
pub(super) struct LaterRun {
    /// What the run records of each step's crash states (None: nothing).
    record: Option<CrashCounts>,
}

impl LaterRun {
    /// A power loss's count at a step depends on what is durable, and a page eviction's on
    /// what a failed fsync left unpersisted, which converging does not compare: a sweep that
    /// aims either stops a first fault's run only where its whole disk is alike too
    /// (`Disk::alike_through_power_loss`), else runs it to its end.
    pub(super) fn of(sweep: &SweepSpec) -> LaterRun {
        let record = match sweep.crash_states().counts() {
            Some(counts) => Some(counts),
            None if sweep.faults.contains(&FaultKind::PageEviction) => Some(CrashCounts::States),
            None => None,
        };
        LaterRun { record }
    }
}

/// The sites of the run `first` changes, after its step: where its second faults go. With
/// `forks`, the run stops where it converges on the fault-free run (with its disk alike,
/// given `how.record`), and the rest are the fault-free run's sites, shifted.
pub(super) fn later_sites(
    baseline: &Baseline,
    forks: Option<&Forks>,
    first: PlannedFault,
    how: LaterRun,
) -> Later {
    let plan = FaultPlan::new([first]).expect("one fault");
    let own = |aims: SiteAims| -> Vec<Aim> {
        aims.aims().filter(|site| site.step > first.step).collect()
    };
    let ran = match forks {
        Some(forks) => match forks.run_until_converged(&plan, how.record) {
            UntilConverged::Converged { world, at } => {
                let from = baseline.sites.first_at_or_after(at.fault_free_steps);
                let shift = at.run_steps as i64 - at.fault_free_steps as i64;
                return Later {
                    own: own(site_aims_of_world(&world, how.record.is_some())),
                    fault_free: Some(Shifted { from, shift }),
                };
            }
            UntilConverged::Ended(result) => *result,
        },
        None => match how.record {
            Some(counts) => run_recording_crash_counts(
                &RunSpec {
                    plan,
                    ..baseline.spec.clone()
                },
                counts,
            ),
            None => run(&RunSpec {
                plan,
                ..baseline.spec.clone()
            }),
        },
    };
    Later {
        own: own(site_aims(&ran, how.record.is_some())),
        fault_free: None,
    }
}
