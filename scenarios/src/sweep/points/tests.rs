//! Drawing a sweep's points, checked against one pass that lists them whole.

use super::*;
use crate::catalogue::Scenario;
use crate::fork::Forks;
use crate::sweep::sweep_forks;
use keel_engine::CheckpointProtocol;

/// Every point of the sweep in one pass, listed whole: the algorithm before
/// [`SweepPoints`], kept as the reference it is checked against.
fn listed_whole(
    spec: &ScenarioSpec,
    sweep: &SweepSpec,
    baselines: &BTreeMap<SinkKind, Baseline>,
    forks: Option<&BTreeMap<SinkKind, Forks>>,
) -> Vec<SweepPoint> {
    assert!(sweep.depth == 1 || sweep.depth == 2);
    let mut all = Vec::new();
    for &sink in &sweep.sinks {
        let baseline = &baselines[&sink];
        for &first_kind in &sweep.faults {
            let firsts = points(baseline.sites.aims(), first_kind, spec.seed, sweep);
            if sweep.depth == 1 {
                all.extend(firsts.into_iter().map(|(first, sampled)| SweepPoint {
                    sink,
                    row: first_kind.name().into(),
                    faults: Arc::new([first]),
                    sampled: sampled.into_iter().collect(),
                }));
                continue;
            }
            for &second_kind in &sweep.faults {
                let row = format!("{first_kind}+{second_kind}");
                // A sampled first step: where its pairs start in `all`, and what it admits.
                let mut open: Option<(usize, u64)> = None;
                let close = |all: &mut Vec<SweepPoint>, open: Option<(usize, u64)>| {
                    if let Some((start, _)) = open {
                        if start < all.len() {
                            // The pairs of states that were not drawn were never counted.
                            let drawn = (all.len() - start) as u64;
                            all[start].sampled.insert(
                                0,
                                Sampled {
                                    states: None,
                                    drawn,
                                },
                            );
                        }
                    }
                };
                for (first, first_sampled) in &firsts {
                    if first_sampled.is_some() || open.is_some_and(|(_, step)| step != first.step) {
                        close(&mut all, open.take());
                    }
                    if first_sampled.is_some() {
                        open = Some((all.len(), first.step));
                    }
                    // The second fault aims at the steps of the run the first one changed,
                    // recovery included.
                    let how = LaterRun::of(sweep);
                    let later = later_sites(baseline, forks.map(|f| &f[&sink]), *first, how);
                    let later = later.aims(&baseline.sites);
                    for (second, sampled) in points(later, second_kind, spec.seed, sweep) {
                        all.push(SweepPoint {
                            sink,
                            row: row.as_str().into(),
                            faults: Arc::new([*first, second]),
                            sampled: sampled.into_iter().collect(),
                        });
                    }
                }
                close(&mut all, open.take());
            }
        }
    }
    all
}

/// ch04 on `protocol` and both sinks: the points drawn in any cut of the sweep are those
/// of one pass over it, with and without forks. Returns (points, sampled marks).
fn check(protocol: CheckpointProtocol, faults: &[FaultKind], depth: u8, max: u64) -> (u64, u64) {
    let spec = ScenarioSpec {
        protocol,
        ..ScenarioSpec::ch04(3)
    };
    let sweep = SweepSpec {
        sinks: vec![SinkKind::Append, SinkKind::Idempotent],
        faults: faults.to_vec(),
        depth,
        outage_ms: 2_000,
        expect: None,
        power_loss_states_max: max,
        power_loss_points: PowerLossPoints::States,
    };
    let events = Scenario::by_name("ch04").unwrap().events();
    let baselines = crate::baseline::baselines(&spec, &events, &sweep.sinks).unwrap();
    let forks = sweep_forks(&baselines, false);
    let whole = listed_whole(&spec, &sweep, &baselines, None);
    // Counted on one thread and on two (the first faults' runs in either order): the same.
    for (forks, jobs) in [(None, 1), (forks.as_ref(), 1), (forks.as_ref(), 2)] {
        // Counting calls back once a first fault, as many times as the sites say.
        let counted = std::sync::atomic::AtomicU64::new(0);
        let count = || {
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        };
        let points =
            SweepPoints::counting(&spec, &sweep, &baselines, forks, jobs, &count, None).unwrap();
        let first_faults = first_faults_len(&sweep, &baselines);
        assert_eq!(
            counted.load(std::sync::atomic::Ordering::Relaxed),
            first_faults
        );
        assert_eq!(first_faults == 0, depth == 1);
        assert_eq!(points.pair_counts().rows.is_empty(), depth == 1);
        // The same points from the counts alone (`keel sweep --counts`), no first fault run
        // to count them, each run again to draw its pairs.
        let given = points.pair_counts().clone();
        let from_counts =
            SweepPoints::counting(&spec, &sweep, &baselines, forks, jobs, &count, Some(&given))
                .unwrap();
        assert_eq!(counted.into_inner(), first_faults);
        assert_eq!(from_counts.pair_counts(), &given);
        assert_eq!(from_counts.len(), whole.len() as u64);
        assert_eq!(from_counts.all(&baselines, forks), whole);
        assert_eq!(points.len(), whole.len() as u64);
        assert_eq!(points.all(&baselines, forks), whole);
        // Every cut at depth 1; at depth 2 each cut runs its first faults again.
        let cuts: &[u64] = if depth == 1 {
            &[1, 7, 1024]
        } else {
            &[97, 1024]
        };
        for &cut in cuts {
            let mut drawn = Vec::new();
            let mut start = 0;
            while start < points.len() {
                let end = (start + cut).min(points.len());
                drawn.extend(points.get(start..end, &baselines, forks));
                start = end;
            }
            let indices: Vec<u64> = drawn.iter().map(|(i, _)| *i).collect();
            assert_eq!(indices, (0..points.len()).collect::<Vec<_>>());
            let drawn: Vec<SweepPoint> = drawn.into_iter().map(|(_, p)| p).collect();
            assert!(drawn == whole, "cut {cut}");
        }
    }
    let marks = whole.iter().map(|p| p.sampled.len() as u64).sum();
    (whole.len() as u64, marks)
}

#[test]
fn a_chunk_draws_the_points_one_pass_over_the_sweep_lists() {
    use FaultKind::*;
    let all = [
        ProcessCrash,
        PowerLoss,
        DiskError,
        SinkError,
        AckLost,
        SinkUnavailable,
    ];
    assert_eq!(check(CheckpointProtocol::Safe, &all, 1, 65_536), (1154, 0));
    // Sampled at both depths: the first step's mark and the second's on one pair.
    assert_eq!(
        check(
            CheckpointProtocol::NoFsyncRename,
            &[ProcessCrash, PowerLoss],
            1,
            2
        ),
        (314, 86)
    );
    assert_eq!(
        check(
            CheckpointProtocol::NoFsyncRename,
            &[ProcessCrash, PowerLoss],
            2,
            2
        ),
        (41_123, 11_511)
    );
    assert_eq!(
        check(
            CheckpointProtocol::Safe,
            &[ProcessCrash, SinkError],
            2,
            65_536
        ),
        (5_334, 0)
    );
}

#[test]
fn a_step_with_at_most_max_states_runs_every_one() {
    assert_eq!(power_loss_states(Some(5), 5, 0, 3), vec![0, 1, 2, 3, 4]);
    assert_eq!(
        power_loss_states(Some(5), 65_536, 9, 3),
        vec![0, 1, 2, 3, 4]
    );
    assert_eq!(power_loss_states(Some(1), 1, 0, 3), vec![0]);
}

#[test]
fn more_states_than_max_are_drawn_without_repetition_below_the_count() {
    for (count, max) in [(2, 1), (10, 9), (1_000, 100), (65_536, 65_535), (65_536, 4)] {
        let drawn = power_loss_states(Some(count), max, 7, 40);
        assert_eq!(drawn.len() as u64, max, "{count} {max}");
        assert!(drawn.windows(2).all(|w| w[0] < w[1]), "distinct, in order");
        assert!(drawn.iter().all(|&state| state < count), "indices");
        assert_eq!(drawn, power_loss_states(Some(count), max, 7, 40));
    }
    let draw = |seed, step| power_loss_states(Some(1_000), 10, seed, step);
    assert_ne!(draw(7, 40), draw(7, 41), "each step its own draws");
    assert_ne!(draw(7, 40), draw(8, 40), "each seed its own draws");
}

#[test]
fn every_subset_is_drawn_about_equally_often() {
    // 2 of 5 states: 10 subsets, 10,000 seeds, about 1,000 each.
    let mut counts: BTreeMap<Vec<u64>, u64> = BTreeMap::new();
    for seed in 0..10_000 {
        *counts
            .entry(power_loss_states(Some(5), 2, seed, 1))
            .or_default() += 1;
    }
    assert_eq!(counts.len(), 10);
    assert!(
        counts.values().all(|&n| (900..=1_100).contains(&n)),
        "{counts:?}"
    );
}

#[test]
fn above_the_sim_bound_the_states_are_seeds_from_the_disk_crash_stream() {
    let seeds = power_loss_states(Some(POWER_LOSS_ENUMERATION_BOUND + 1), 32, 3, 46);
    let mut stream =
        SeedTree::new(3 ^ 46u64.wrapping_mul(0x9e37_79b9_7f4a_7c15)).stream(Subsystem::DiskCrash);
    let expected: Vec<u64> = (0..32).map(|_| stream.next_u64()).collect();
    assert_eq!(seeds, expected);
    assert_eq!(power_loss_states(None, 32, 3, 46), expected);
    // More draws keep the first ones: --power-loss-states-max 32 draws what 32 drew before.
    assert_eq!(power_loss_states(None, 1_000, 3, 46)[..32], expected[..]);
}
