//! `Windows` driven beside a `BTreeMap` through the same operations and forks.

use super::*;

/// One step of [`check`]'s script.
#[derive(Clone, Copy, Debug)]
enum Op {
    /// Sets window `end` to a state made of `value`.
    Insert(i64, i128),
    /// Adds `value` to window `end`, created as the default if absent.
    Add(i64, i128),
    /// Fires window `end` if present.
    Fire(i64),
    Remove(i64),
    PopFirst,
    /// Fires the unfired windows whose end lies in `from..=to`.
    FireRange(i64, i64),
    /// Clones the map: the clone must keep what it holds whatever follows.
    Fork,
}

fn state(value: i128) -> WindowState {
    WindowState {
        sum: value,
        cnt: value.unsigned_abs() as u64,
        fired: value % 2 == 0,
    }
}

/// Runs `ops` on a `Windows` and on a `BTreeMap`, and asserts after every step that
/// they hold the same entries in the same order (and agree on every answer), and at
/// the end that every fork still holds what it held when it was made.
fn check(ops: &[Op]) {
    let mut windows = Windows::new();
    let mut want: BTreeMap<i64, WindowState> = BTreeMap::new();
    let mut forks: Vec<(Windows, BTreeMap<i64, WindowState>)> = Vec::new();
    for (step, &op) in ops.iter().enumerate() {
        match op {
            Op::Insert(end, value) => {
                assert_eq!(
                    windows.insert(end, state(value)),
                    want.insert(end, state(value))
                );
            }
            Op::Add(end, value) => {
                windows.entry_or_default(end).sum += value;
                want.entry(end).or_default().sum += value;
            }
            Op::Fire(end) => {
                if let Some(mut w) = windows.get_mut(&end) {
                    w.fired = true;
                }
                if let Some(w) = want.get_mut(&end) {
                    w.fired = true;
                }
            }
            Op::Remove(end) => assert_eq!(windows.remove(&end), want.remove(&end)),
            Op::PopFirst => assert_eq!(windows.pop_first(), want.pop_first()),
            Op::FireRange(from, to) => {
                let mut fired = Vec::new();
                windows.update_where(
                    from..=to,
                    |w| !w.fired,
                    |end, w| {
                        w.fired = true;
                        fired.push(end);
                    },
                );
                let mut want_fired = Vec::new();
                for (&end, w) in want.range_mut(from..=to).filter(|(_, w)| !w.fired) {
                    w.fired = true;
                    want_fired.push(end);
                }
                assert_eq!(fired, want_fired, "step {step}");
            }
            Op::Fork => forks.push((windows.clone(), want.clone())),
        }
        let entries: Vec<_> = windows.iter().map(|(&end, &w)| (end, w)).collect();
        let want_entries: Vec<_> = want.iter().map(|(&end, &w)| (end, w)).collect();
        assert_eq!(entries, want_entries, "step {step}: {op:?}");
        assert_eq!(windows.len(), want.len());
        assert!(!windows.is_small() || windows.len() <= SMALL_ENTRIES_MAX);
        assert_eq!(windows.iter().len(), want.len());
        assert_eq!(windows.is_empty(), want.is_empty());
        assert_eq!(windows.first_key_value(), want.first_key_value());
        assert_eq!(windows.last_key_value(), want.last_key_value());
        assert_eq!(format!("{windows:?}"), format!("{want:?}"));
        assert_eq!(
            serde_json::to_string(&windows).unwrap(),
            serde_json::to_string(&want).unwrap()
        );
        assert_eq!(windows, want.clone().into_iter().collect::<Windows>());
        // The digest kept along is the one made from the entries.
        let digest = want.iter().fold(0u128, |sum, (&end, w)| {
            sum.wrapping_add(entry_digest(end, w))
        });
        assert_eq!(windows.digest, if windows.is_small() { 0 } else { digest });
        for probe in [-3, 0, 5, 17, 64, 100, 250] {
            assert_eq!(windows.get(&probe), want.get(&probe), "step {step}");
            let got: Vec<_> = windows.range(..=probe).map(|(&e, &w)| (e, w)).collect();
            let expected: Vec<_> = want.range(..=probe).map(|(&e, &w)| (e, w)).collect();
            assert_eq!(got, expected, "step {step}, probe {probe}");
            assert_eq!(
                windows.range(..=probe).next_back(),
                want.range(..=probe).next_back()
            );
            assert_eq!(
                windows.last_at_or_below(probe),
                want.range(..=probe).next_back()
            );
            let above: Vec<_> = windows
                .range((Bound::Excluded(probe), Bound::Unbounded))
                .collect();
            let want_above: Vec<_> = want
                .range((Bound::Excluded(probe), Bound::Unbounded))
                .collect();
            assert_eq!(above, want_above);
        }
    }
    for (fork, want) in &forks {
        let entries: Vec<_> = fork.iter().map(|(&end, &w)| (end, w)).collect();
        let want_entries: Vec<_> = want.iter().map(|(&end, &w)| (end, w)).collect();
        assert_eq!(entries, want_entries);
        assert_eq!(fork, &fork.clone());
    }
    // Equality (by digest between chunked maps) is the entries' equality, between every
    // two of the forks and the map as it ended.
    forks.push((windows, want));
    for (a, want_a) in &forks {
        for (b, want_b) in &forks {
            assert_eq!(a == b, want_a == want_b);
        }
    }
}

/// A deterministic script of `steps` operations over ends in `-span..span`.
fn script(seed: u64, steps: usize, span: i64) -> Vec<Op> {
    let mut x = seed.wrapping_mul(6_364_136_223_846_793_005) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..steps)
        .map(|_| {
            let end = (next() % (2 * span as u64)) as i64 - span;
            let value = (next() % 100) as i128 - 50;
            match next() % 16 {
                0..=4 => Op::Insert(end, value),
                5..=8 => Op::Add(end, value),
                9 => Op::Fire(end),
                10 | 11 => Op::Remove(end),
                12 => Op::PopFirst,
                13 => Op::FireRange(end, end + (value.unsigned_abs() as i64)),
                _ => Op::Fork,
            }
        })
        .collect()
}

#[test]
fn windows_match_a_btree_map() {
    check(&[]);
    check(&[
        Op::PopFirst,
        Op::Remove(3),
        Op::Fire(1),
        Op::FireRange(0, 9),
    ]);
    check(&[
        Op::Insert(5, 1),
        Op::Fork,
        Op::Insert(5, 2),
        Op::Insert(-1, 3),
    ]);
    // Created in order, then purged from the front (a run with allowed lateness).
    let mut in_order: Vec<Op> = (0..300).map(|end| Op::Add(end, 1)).collect();
    in_order.insert(100, Op::Fork);
    in_order.extend([Op::FireRange(10, 200), Op::Fork]);
    in_order.extend((0..310).map(|_| Op::PopFirst));
    check(&in_order);
    // In reverse order: every insert lands below every chunk.
    check(
        &(0..200)
            .rev()
            .map(|end| Op::Insert(end, 2))
            .collect::<Vec<_>>(),
    );
    for seed in 0..12 {
        check(&script(seed, 600, 150));
        check(&script(seed, 300, 20));
    }
    // Wide enough that chunks fill, split and empty again.
    for seed in 0..3 {
        check(&script(seed, 2500, 2 * CHUNK_ENTRIES_MAX as i64));
    }
}

/// Chunks stay within their bounds, and a clone shares them until a write.
#[test]
fn clones_share_chunks_until_written() {
    let mut windows: Windows = (0..1000).map(|end| (end, state(end.into()))).collect();
    assert_eq!(windows.chunks.len(), 1000_usize.div_ceil(CHUNK_ENTRIES_MAX));
    let fork = windows.clone();
    assert_eq!(windows, fork);
    windows.get_mut(&999).unwrap().fired = true;
    windows.insert(1000, state(1));
    let shared = windows
        .chunks
        .values()
        .zip(fork.chunks.values())
        .filter(|(a, b)| Arc::ptr_eq(a, b))
        .count();
    assert_eq!(shared, fork.chunks.len() - 1);
    assert!(fork.get(&1000).is_none());
    assert!(!fork.get(&999).unwrap().fired);
    for chunk in windows.chunks.values() {
        assert!(!chunk.is_empty());
        assert!(chunk.len() <= CHUNK_ENTRIES_MAX);
    }
}
