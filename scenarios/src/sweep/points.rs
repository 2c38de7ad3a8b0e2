//! The points of a sweep: which faults it tries at which steps (every crash state of a power
//! loss, or a seeded draw of them), counted up front and drawn a chunk at a time.

use super::{PowerLossPoints, SweepSpec};
use crate::baseline::{Baseline, CrashStates};
use crate::fork::Forks;
use crate::parallel::{par_fold_until_with, Threads};
use crate::sites::Aim;
use crate::spec::ScenarioSpec;
use keel_engine::SinkKind;
use keel_sim::disk::POWER_LOSS_ENUMERATION_BOUND;
use keel_sim::{CrashPoint, Fault, FaultKind, PlannedFault, SeedTree, Subsystem};
use later::{later_sites, suffix_lens, Later, LaterRun};
use num_bigint::BigUint;
use rand_core::RngCore;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

mod later;

/// A step where the sweep ran only some of the crash states a power loss admits there. It is
/// carried by the first point drawn there; the points drawn there follow it in its row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sampled {
    /// The points the model admits there, exactly: crash states (classes where they are
    /// numbered, with `--power-loss-points classes`). None: unknown, at depth 2, the pairs
    /// that start with a state that was not drawn.
    #[serde(with = "crate::decimal::optional_count")]
    pub states: Option<BigUint>,
    /// How many points were drawn there: this one and the `drawn - 1` after it in its row.
    pub drawn: u64,
}

/// The crash states a sweep runs at a step whose power loss admits `states` of them, at most
/// `max` (at most [`POWER_LOSS_ENUMERATION_BOUND`]): every one when there are at most `max`;
/// else `max` of them drawn without repetition (Floyd's algorithm), in increasing order, when
/// state numbers are indices (at most the bound); else `max` seeds. The draws come from the
/// disk-crash stream of a seed made of the sweep's seed and the step, so one step's draws
/// never depend on another's.
pub fn power_loss_states(states: Option<u64>, max: u64, seed: u64, step: u64) -> Vec<u64> {
    assert!(
        (1..=POWER_LOSS_ENUMERATION_BOUND).contains(&max),
        "at most {POWER_LOSS_ENUMERATION_BOUND} states a step"
    );
    let mut rng =
        SeedTree::new(seed ^ step.wrapping_mul(0x9e37_79b9_7f4a_7c15)).stream(Subsystem::DiskCrash);
    match states {
        Some(count) if count <= max => (0..count).collect(),
        Some(count) if count <= POWER_LOSS_ENUMERATION_BOUND => floyd(count, max, &mut rng),
        _ => (0..max).map(|_| rng.next_u64()).collect(),
    }
}

/// `max` distinct numbers below `count` (more than `max`), drawn from `rng` by Floyd's
/// algorithm, in increasing order.
fn floyd(count: u64, max: u64, rng: &mut impl RngCore) -> Vec<u64> {
    assert!(max < count);
    let mut chosen = BTreeSet::new();
    for j in count - max..count {
        // Uniform in 0..=j, up to a modulo bias of j / 2^64 (below 2^-47 for the states
        // of an enumerable step, j < 2^17).
        let t = rng.next_u64() % (j + 1);
        if !chosen.insert(t) {
            chosen.insert(j);
        }
    }
    chosen.into_iter().collect()
}

/// The classes of crash states a sweep runs at a step with `classes` of them (numbered:
/// `keel_sim::disk::PowerLossClasses`), at most `max`: every one, or `max` drawn without
/// repetition as [`power_loss_states`] draws states, from the same stream.
pub fn power_loss_classes(classes: u64, max: u64, seed: u64, step: u64) -> Vec<u64> {
    assert!(
        (1..=POWER_LOSS_ENUMERATION_BOUND).contains(&max),
        "at most {POWER_LOSS_ENUMERATION_BOUND} classes a step"
    );
    if classes <= max {
        return (0..classes).collect();
    }
    let mut rng =
        SeedTree::new(seed ^ step.wrapping_mul(0x9e37_79b9_7f4a_7c15)).stream(Subsystem::DiskCrash);
    floyd(classes, max, &mut rng)
}

/// Every single fault of `kind` the sweep tries, in step order, each with the sampled step
/// it opens (the first point drawn at a step whose crash states were not all run).
pub fn points(
    sites: impl IntoIterator<Item = Aim>,
    kind: FaultKind,
    seed: u64,
    sweep: &SweepSpec,
) -> Vec<(PlannedFault, Option<Sampled>)> {
    let mut points = Vec::new();
    for site in sites {
        site_points(&site, kind, seed, sweep, &mut points);
    }
    points
}

/// How many points [`site_points`] pushes for `site`, without drawing them.
fn site_points_len(site: &Aim, kind: FaultKind, sweep: &SweepSpec) -> u64 {
    if !site.faults.contains(&kind) {
        return 0;
    }
    match (kind, site.power_loss_states) {
        (FaultKind::PowerLoss, Some(states)) if states <= sweep.power_loss_states_max => states,
        (FaultKind::PowerLoss, _) => sweep.power_loss_states_max,
        _ => 1,
    }
}

/// Pushes the single faults of `kind` the sweep tries at `site` (none if it does not apply
/// there), the first of them carrying the sampled step it opens.
fn site_points(
    site: &Aim,
    kind: FaultKind,
    seed: u64,
    sweep: &SweepSpec,
    points: &mut Vec<(PlannedFault, Option<Sampled>)>,
) {
    if !site.faults.contains(&kind) {
        return;
    }
    let step = site.step;
    let mut push = |fault| points.push((PlannedFault { step, fault }, None));
    match kind {
        FaultKind::ProcessCrash => push(Fault::ProcessCrash {
            at: CrashPoint::After,
        }),
        FaultKind::PowerLoss if sweep.power_loss_points == PowerLossPoints::Classes => {
            // Where the step's classes are numbered, classes; else drawn states, as a
            // sweep of states draws them where there are too many to count.
            let (faults, numbered): (Vec<Fault>, _) = match site.power_loss_states {
                Some(classes) => (
                    power_loss_classes(classes, sweep.power_loss_states_max, seed, step)
                        .into_iter()
                        .map(|class| Fault::PowerLossClass {
                            at: CrashPoint::After,
                            class,
                            // A fault follows it, or is it (`PowerLossPoints::Classes`).
                            by_tail: sweep.depth > 1,
                        })
                        .collect(),
                    Some(classes),
                ),
                None => (
                    power_loss_states(None, sweep.power_loss_states_max, seed, step)
                        .into_iter()
                        .map(|state| Fault::PowerLoss {
                            at: CrashPoint::After,
                            state,
                        })
                        .collect(),
                    None,
                ),
            };
            let first = points.len();
            let drawn = faults.len() as u64;
            points.extend(
                faults
                    .into_iter()
                    .map(|fault| (PlannedFault { step, fault }, None)),
            );
            if numbered != Some(drawn) {
                // Where classes are not numbered, states were drawn: of every state.
                points[first].1 = Some(Sampled {
                    states: site.power_loss_admitted(),
                    drawn,
                });
            }
        }
        FaultKind::PowerLoss => {
            let states = power_loss_states(
                site.power_loss_states,
                sweep.power_loss_states_max,
                seed,
                step,
            );
            let first = points.len();
            let drawn = states.len() as u64;
            for state in states {
                points.push((
                    PlannedFault {
                        step,
                        fault: Fault::PowerLoss {
                            at: CrashPoint::After,
                            state,
                        },
                    },
                    None,
                ));
            }
            if site.power_loss_states != Some(drawn) {
                points[first].1 = Some(Sampled {
                    states: site.power_loss_admitted(),
                    drawn,
                });
            }
        }
        FaultKind::DiskError => push(Fault::DiskError),
        FaultKind::SinkError => push(Fault::SinkError),
        FaultKind::AckLost => push(Fault::AckLost),
        FaultKind::SinkUnavailable => push(Fault::SinkUnavailable {
            duration_ms: sweep.outage_ms,
        }),
        FaultKind::Zombie => push(Fault::Zombie),
        FaultKind::PageEviction => push(Fault::PageEviction),
        // A parallel job's own faults apply to no site of the one-task engine.
        FaultKind::MessageLost | FaultKind::SlowChannel => {}
    }
}

/// One point of a sweep: one or two faults on one sink.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SweepPoint {
    pub sink: SinkKind,
    /// The row it is tallied in: a fault kind, or "first+second" at depth 2 (shared by the
    /// row's points, each of which hands it to its records).
    pub row: Arc<str>,
    /// Shared with the point's records.
    pub faults: Arc<[PlannedFault]>,
    /// The sampled steps this point opens, outermost first (at depth 2, a sampled first
    /// step holds every pair that starts there).
    pub sampled: Vec<Sampled>,
}

/// Every point of a sweep, in report order (sink, row, first step, second step), counted
/// but not drawn: a chunk's points are drawn when it runs ([`SweepPoints::get`]), so memory
/// does not grow with the number of points (a depth-2 sweep of power losses has hundreds of
/// millions: listing them first ran out of memory before any ran).
///
/// Architecture invariant: `get` over any cut of `0..len()` yields what one pass over the
/// whole sweep would, point for point; [`SweepPoints::all`] is that pass.
#[derive(Clone, Debug)]
pub struct SweepPoints {
    groups: Vec<Group>,
    /// Where each group's points start; the last entry is the number of points.
    starts: Vec<u64>,
    seed: u64,
    sweep: SweepSpec,
    /// At depth 2, what counting found (or was given), for `keel sweep --counts` to save.
    pair_counts: PairCounts,
}

/// How many pairs each first fault of a depth-2 sweep starts, per second kind: what counting
/// runs every first fault for. In the order of the sweep's groups: a row per sink and first
/// kind (the sweep's orders), in it a count per first fault and per second kind. Saved and
/// read back by `keel sweep --counts`, so that the shards of one sweep count once.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairCounts {
    pub rows: Vec<Vec<Vec<u64>>>,
}

/// How many sites one count of a depth-1 group covers: drawing a cut reads at most this many
/// sites' counts before its first point.
const SITES_BLOCK_LEN: usize = 1024;

/// Consecutive points that one rule draws.
#[derive(Clone, Debug)]
enum Group {
    /// Depth 1: every single fault of `kind` at the fault-free run's sites; `block_ends[b]`
    /// counts the points at the sites before the end of block `b`, `SITES_BLOCK_LEN` sites a
    /// block (a count per site was 8 bytes a step, 19 MB on a million-event stream's two sinks).
    Singles {
        sink: SinkKind,
        kind: FaultKind,
        block_ends: Vec<u64>,
    },
    /// Depth 2: `first`, then each single fault of `second` at a later step of the run
    /// `first` changed (recovery included), which is run again to draw them.
    Pairs {
        sink: SinkKind,
        first: PlannedFault,
        first_kind: FaultKind,
        second: FaultKind,
        /// The sampled first step this group's first pair opens (it holds every pair that
        /// starts at that step, of this group and the next ones).
        opens: Option<Sampled>,
        len: u64,
        /// The sites after `first` of the run it changed, if kept (`LATER_AIMS_KEPT_MAX`).
        later: KeptLater,
        /// How many points of `second` the fault-free run's sites from each on hold
        /// ([`suffix_lens`]), shared by the row's groups.
        suffix_lens: Arc<[u64]>,
    },
}

/// How many counted first faults may wait, per thread, to be taken in order: each holds its
/// run's later sites (thousands on a long stream), so fewer than a sweep's runs
/// (`parallel::REORDER_WINDOW_ITEMS_PER_JOB`).
const COUNT_WINDOW_FIRSTS_PER_JOB: usize = 16;

/// A first fault's later sites, if kept.
type KeptLater = Option<Arc<Later>>;

/// The most later sites of their own first faults keep from counting their pairs to drawing
/// them (24 MB; a first fault whose run converged keeps only its sites up to there). Past it,
/// a chunk draws its pairs by running its first fault again (first faults that do not
/// converge, or whose sites are counted in crash states, on a long stream).
const LATER_AIMS_KEPT_MAX: usize = 1 << 20;

impl Group {
    fn len(&self) -> u64 {
        match self {
            Group::Singles { block_ends, .. } => block_ends.last().copied().unwrap_or(0),
            Group::Pairs { len, .. } => *len,
        }
    }
}

/// How many first faults a depth-2 sweep runs to count its pairs ([`SweepPoints::counting`]
/// calls back once for each); none at depth 1. Read off the fault-free runs' sites, without
/// drawing a point.
pub fn first_faults_len(sweep: &SweepSpec, baselines: &BTreeMap<SinkKind, Baseline>) -> u64 {
    if sweep.depth == 1 {
        return 0;
    }
    let mut first_faults = 0;
    for sink in &sweep.sinks {
        for site in baselines[sink].sites.aims() {
            for &kind in &sweep.faults {
                first_faults += site_points_len(&site, kind, sweep);
            }
        }
    }
    first_faults
}

/// How many pairs each first fault of `firsts` starts, per second kind of the sweep: its run
/// once, on any thread, in first-fault order. Its later sites are kept while the sweep's
/// kept ones (`later_aims_kept`) fit the bound, so a chunk draws its pairs without running
/// the first fault again.
#[allow(clippy::too_many_arguments)]
fn count_pairs(
    sweep: &SweepSpec,
    baseline: &Baseline,
    forks: Option<&Forks>,
    firsts: &[(PlannedFault, Option<Sampled>)],
    suffixes: &[Arc<[u64]>],
    jobs: usize,
    counted: &(dyn Fn() + Sync),
    later_aims_kept: &mut usize,
) -> (Vec<Vec<u64>>, Vec<KeptLater>) {
    let how = LaterRun::of(sweep);
    let mut lens: Vec<Vec<u64>> = Vec::with_capacity(firsts.len());
    let mut kept: Vec<KeptLater> = Vec::with_capacity(firsts.len());
    let never = AtomicBool::new(false);
    let threads = Threads {
        jobs,
        window_items_per_job: COUNT_WINDOW_FIRSTS_PER_JOB,
    };
    let complete = par_fold_until_with(
        firsts,
        threads,
        |_| (),
        |_, (first, _)| {
            let later = later_sites(baseline, forks, *first, how);
            let first_lens: Vec<u64> = sweep
                .faults
                .iter()
                .zip(suffixes)
                .map(|(&second, suffix)| later.points_len(second, sweep, suffix))
                .collect();
            (first_lens, later)
        },
        &|_| counted(),
        &mut |(first_lens, later): (Vec<u64>, Later)| {
            let keep = *later_aims_kept + later.own.len() <= LATER_AIMS_KEPT_MAX;
            *later_aims_kept += if keep { later.own.len() } else { 0 };
            lens.push(first_lens);
            kept.push(keep.then(|| Arc::new(later)));
        },
        &never,
    );
    assert!(complete, "nothing sets the stop flag");
    assert_eq!(lens.len(), firsts.len());
    assert!(*later_aims_kept <= LATER_AIMS_KEPT_MAX);
    (lens, kept)
}

impl SweepPoints {
    /// Counts the sweep's points: at depth 2 that runs each first fault once (with `forks`,
    /// from a snapshot), keeping only how many pairs it starts.
    pub fn new(
        spec: &ScenarioSpec,
        sweep: &SweepSpec,
        baselines: &BTreeMap<SinkKind, Baseline>,
        forks: Option<&BTreeMap<SinkKind, Forks>>,
    ) -> SweepPoints {
        SweepPoints::counting(spec, sweep, baselines, forks, 1, &|| {}, None)
            .expect("no counts given to disagree with")
    }

    /// [`SweepPoints::new`] on `jobs` threads, calling `counted` once a first fault's run is
    /// counted (at depth 2: [`first_faults_len`] times, from any thread), so that a long
    /// count can show its progress: on a stream of thousands of events it runs thousands of
    /// first faults to their end. The points are the same for any `jobs`: each first fault's
    /// run is its own, and what it counts is taken in first-fault order.
    ///
    /// With `given` (counts an earlier count of this very sweep saved), no first fault runs:
    /// its pairs are drawn by running it when a chunk needs them. An error says how `given`
    /// does not fit the sweep's first faults.
    pub fn counting(
        spec: &ScenarioSpec,
        sweep: &SweepSpec,
        baselines: &BTreeMap<SinkKind, Baseline>,
        forks: Option<&BTreeMap<SinkKind, Forks>>,
        jobs: usize,
        counted: &(dyn Fn() + Sync),
        given: Option<&PairCounts>,
    ) -> Result<SweepPoints, String> {
        assert!(jobs >= 1);
        assert!(sweep.depth == 1 || sweep.depth == 2);
        assert!(
            sweep.crash_states() == CrashStates::NotCounted
                || baselines.values().all(|b| b.crash_states_counted),
            "a power-loss sweep reads every site's crash-state count"
        );
        let mut groups = Vec::new();
        let mut later_aims_kept = 0;
        let mut pair_counts = PairCounts::default();
        let mut given_rows = given.map(|given| given.rows.iter());
        for &sink in &sweep.sinks {
            let baseline = &baselines[&sink];
            for &first_kind in &sweep.faults {
                if sweep.depth == 1 {
                    let mut block_ends = Vec::new();
                    let mut end = 0;
                    for (i, site) in baseline.sites.aims().enumerate() {
                        end += site_points_len(&site, first_kind, sweep);
                        if (i + 1) % SITES_BLOCK_LEN == 0 || i + 1 == baseline.sites.len() {
                            block_ends.push(end);
                        }
                    }
                    groups.push(Group::Singles {
                        sink,
                        kind: first_kind,
                        block_ends,
                    });
                    continue;
                }
                let firsts = points(baseline.sites.aims(), first_kind, spec.seed, sweep);
                let suffixes: Vec<Arc<[u64]>> = sweep
                    .faults
                    .iter()
                    .map(|&second| suffix_lens(&baseline.sites, second, sweep).into())
                    .collect();
                let (lens, kept) = match given_rows.as_mut() {
                    Some(rows) => {
                        let row = rows.next().ok_or_else(|| {
                            format!(
                                "it holds {} rows of first faults, the sweep has more",
                                pair_counts.rows.len()
                            )
                        })?;
                        let shape_ok = row.len() == firsts.len()
                            && row.iter().all(|lens| lens.len() == sweep.faults.len());
                        if !shape_ok {
                            return Err(format!(
                                "its row {} ({sink}, {}) counts {} first faults, the sweep has {} with {} second kinds each",
                                pair_counts.rows.len(),
                                first_kind.name(),
                                row.len(),
                                firsts.len(),
                                sweep.faults.len()
                            ));
                        }
                        (row.clone(), vec![None; row.len()])
                    }
                    None => count_pairs(
                        sweep,
                        baseline,
                        forks.map(|f| &f[&sink]),
                        &firsts,
                        &suffixes,
                        jobs,
                        counted,
                        &mut later_aims_kept,
                    ),
                };
                for (k, &second) in sweep.faults.iter().enumerate() {
                    let opens = sampled_first_steps(&firsts, |i| lens[i][k]);
                    for (((&(first, _), len), opens), later) in
                        firsts.iter().zip(&lens).zip(opens).zip(&kept)
                    {
                        groups.push(Group::Pairs {
                            sink,
                            first,
                            first_kind,
                            second,
                            opens,
                            len: len[k],
                            later: later.clone(),
                            suffix_lens: Arc::clone(&suffixes[k]),
                        });
                    }
                }
                pair_counts.rows.push(lens);
            }
        }
        if let Some(mut rows) = given_rows {
            if rows.next().is_some() {
                return Err(format!(
                    "it holds {} rows of first faults, the sweep has {}",
                    given.map_or(0, |g| g.rows.len()),
                    pair_counts.rows.len()
                ));
            }
        }
        let mut starts = vec![0];
        for group in &groups {
            starts.push(starts.last().expect("starts at 0") + group.len());
        }
        Ok(SweepPoints {
            groups,
            starts,
            seed: spec.seed,
            sweep: sweep.clone(),
            pair_counts,
        })
    }

    /// At depth 2, how many pairs each first fault starts (empty at depth 1).
    pub fn pair_counts(&self) -> &PairCounts {
        &self.pair_counts
    }
    /// How many points the sweep has.
    pub fn len(&self) -> u64 {
        *self.starts.last().expect("starts at 0")
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The points of each row, per sink in report order: (sink, row, points), a row being
    /// a fault kind, or "first+second" at depth 2.
    pub fn row_lens(&self) -> Vec<(SinkKind, String, u64)> {
        let mut rows: Vec<(SinkKind, String, u64)> = Vec::new();
        for group in &self.groups {
            let (sink, row) = match group {
                Group::Singles { sink, kind, .. } => (*sink, kind.to_string()),
                Group::Pairs {
                    sink,
                    first_kind,
                    second,
                    ..
                } => (*sink, format!("{first_kind}+{second}")),
            };
            match rows.last_mut() {
                Some((s, r, len)) if *s == sink && *r == row => *len += group.len(),
                _ => rows.push((sink, row, group.len())),
            }
        }
        rows
    }

    /// Every point, in order (for sweeps small enough to list, as `keel teach` runs).
    pub fn all(
        &self,
        baselines: &BTreeMap<SinkKind, Baseline>,
        forks: Option<&BTreeMap<SinkKind, Forks>>,
    ) -> Vec<SweepPoint> {
        self.get(0..self.len(), baselines, forks)
            .into_iter()
            .map(|(_, point)| point)
            .collect()
    }

    /// The points at indices `range`, with their indices: each group's rule draws them again.
    pub fn get(
        &self,
        range: Range<u64>,
        baselines: &BTreeMap<SinkKind, Baseline>,
        forks: Option<&BTreeMap<SinkKind, Forks>>,
    ) -> Vec<(u64, SweepPoint)> {
        assert!(range.start <= range.end);
        assert!(range.end <= self.len());
        let mut out = Vec::with_capacity((range.end - range.start) as usize);
        // The first group with a point at or after `range.start`.
        let mut g = self.starts.partition_point(|&start| start <= range.start) - 1;
        while out.len() < (range.end - range.start) as usize {
            let (group, start) = (&self.groups[g], self.starts[g]);
            let from = range.start.max(start) - start;
            let to = range.end.min(start + group.len()) - start;
            self.draw(group, from..to, baselines, forks, |offset, point| {
                out.push((start + offset, point))
            });
            g += 1;
        }
        assert_eq!(out.len() as u64, range.end - range.start);
        out
    }

    /// Hands `push` the points of `group` at offsets `range` in it.
    fn draw(
        &self,
        group: &Group,
        range: Range<u64>,
        baselines: &BTreeMap<SinkKind, Baseline>,
        forks: Option<&BTreeMap<SinkKind, Forks>>,
        mut push: impl FnMut(u64, SweepPoint),
    ) {
        if range.is_empty() {
            return;
        }
        match group {
            Group::Singles {
                sink,
                kind,
                block_ends,
            } => {
                let sites = &baselines[sink].sites;
                assert_eq!(sites.len().div_ceil(SITES_BLOCK_LEN), block_ends.len());
                let row: Arc<str> = kind.name().into();
                // The first block with a point at or after `range.start`, from its start.
                let block = block_ends.partition_point(|&end| end <= range.start);
                let mut i = block * SITES_BLOCK_LEN;
                let mut site_start = block.checked_sub(1).map_or(0, |b| block_ends[b]);
                let mut drawn = Vec::new();
                while i < sites.len() {
                    if site_start >= range.end {
                        break;
                    }
                    let site_len = site_points_len(&sites.aim(i), *kind, &self.sweep);
                    if site_start + site_len <= range.start {
                        site_start += site_len;
                        i += 1;
                        continue;
                    }
                    drawn.clear();
                    site_points(&sites.aim(i), *kind, self.seed, &self.sweep, &mut drawn);
                    assert_eq!(drawn.len() as u64, site_len);
                    for (j, (fault, sampled)) in drawn.drain(..).enumerate() {
                        let offset = site_start + j as u64;
                        if range.contains(&offset) {
                            push(
                                offset,
                                SweepPoint {
                                    sink: *sink,
                                    row: Arc::clone(&row),
                                    faults: Arc::new([fault]),
                                    sampled: sampled.into_iter().collect(),
                                },
                            );
                        }
                    }
                    site_start += site_len;
                    i += 1;
                }
            }
            Group::Pairs {
                sink,
                first,
                first_kind,
                second,
                opens,
                len,
                later,
                suffix_lens,
            } => {
                let sites = &baselines[sink].sites;
                let ran_again;
                let (later, whole): (&Later, bool) = match later {
                    Some(later) => (later, false),
                    None => {
                        let how = LaterRun::of(&self.sweep);
                        ran_again =
                            later_sites(&baselines[sink], forks.map(|f| &f[sink]), *first, how);
                        (&ran_again, true)
                    }
                };
                let row: Arc<str> = format!("{first_kind}+{second}").into();
                // Only the sites with a point in `range` are drawn: a group holds a point at
                // every later step, and a chunk takes about a thousand of them. Kept sites are
                // read from the first with a point in `range` to the last; a run made again
                // is read whole, to check that it is the run counted.
                let skip_to = if whole { 0 } else { range.start };
                let (mut site_start, aims) =
                    later.aims_from(sites, suffix_lens, *second, &self.sweep, skip_to);
                let mut drawn = Vec::new();
                for site in aims {
                    if !whole && site_start >= range.end {
                        break;
                    }
                    let site_len = site_points_len(&site, *second, &self.sweep);
                    if site_start < range.end && range.start < site_start + site_len {
                        drawn.clear();
                        site_points(&site, *second, self.seed, &self.sweep, &mut drawn);
                        assert_eq!(drawn.len() as u64, site_len);
                        for (j, (fault, sampled)) in drawn.drain(..).enumerate() {
                            let offset = site_start + j as u64;
                            if !range.contains(&offset) {
                                continue;
                            }
                            let opened = opens.clone().filter(|_| offset == 0);
                            push(
                                offset,
                                SweepPoint {
                                    sink: *sink,
                                    row: row.clone(),
                                    faults: Arc::new([*first, fault]),
                                    sampled: opened.into_iter().chain(sampled).collect(),
                                },
                            );
                        }
                    }
                    site_start += site_len;
                }
                if whole {
                    // The run is deterministic: only a count read from a forged
                    // `--counts` file (whose digest was made to match) can differ.
                    assert_eq!(
                        site_start, *len,
                        "{first:?}: its run has {site_start} later points, its count {len}"
                    );
                }
            }
        }
    }
}

/// For each first fault of a depth-2 row (`pairs(i)` pairs start at `firsts[i]`), the
/// sampled first step its first pair opens: at a step whose crash states were not all run,
/// the first pair there carries how many pairs start there; every other group opens none.
fn sampled_first_steps(
    firsts: &[(PlannedFault, Option<Sampled>)],
    pairs: impl Fn(usize) -> u64,
) -> Vec<Option<Sampled>> {
    let mut opens = vec![None; firsts.len()];
    for (i, (first, sampled)) in firsts.iter().enumerate() {
        if sampled.is_none() {
            continue;
        }
        let at_step = (i..firsts.len()).take_while(|&j| firsts[j].0.step == first.step);
        let drawn = at_step.clone().map(&pairs).sum();
        // None when no pair starts at this step: then nothing was counted there.
        if let Some(carrier) = at_step.into_iter().find(|&j| pairs(j) > 0) {
            opens[carrier] = Some(Sampled {
                states: None,
                drawn,
            });
        }
    }
    opens
}

#[cfg(test)]
mod tests;
