//! Tests of incremental checkpoints (`incremental.rs`).

use super::*;
use crate::chain_memo::{self, ChainMemo};
use crate::window::WindowState;

#[test]
fn a_chain_holds_1024_deltas_or_one_per_256_bytes_of_its_base() {
    assert_eq!(chain_deltas_max(0), 1024);
    assert_eq!(chain_deltas_max(1024 * 256 + 255), 1024);
    assert_eq!(chain_deltas_max(5_000 * 256), 5_000);
}

/// A delta's spliced windows are the bytes serde_json writes for the whole `DeltaFile`.
#[test]
fn a_delta_body_is_the_bytes_serde_json_writes() {
    let windows = [
        (
            i64::MIN,
            WindowState {
                sum: i128::MIN,
                cnt: 0,
                fired: false,
            },
        ),
        (
            20,
            WindowState {
                sum: -5,
                cnt: 3,
                fired: true,
            },
        ),
    ];
    let delta = |windows: Vec<WindowFile>| DeltaFile {
        index: 16,
        parent: FileRef {
            file: FileKind::Base.file_name(1),
            number: 1,
            index: 8,
            len: 99,
            crc32: "0badf00d".to_string(),
        },
        max_ts: Some(-3),
        windows,
        removed: vec![10, i64::MAX],
        transactions: vec![PendingTxn {
            id: "\"windows\":[]".to_string(),
            epoch: 2,
        }],
        dropped_late: 4,
    };
    let whole = delta(
        windows
            .iter()
            .map(|(end, w)| WindowFile::of(*end, w))
            .collect(),
    );
    let frame = serde_json::to_vec(&delta(Vec::new())).unwrap();
    let spliced = splice_windows(&frame, windows.iter().map(|(end, w)| (*end, w)));
    assert_eq!(
        String::from_utf8(spliced).unwrap(),
        serde_json::to_string(&whole).unwrap()
    );
}

struct Files(BTreeMap<String, Vec<u8>>);

impl ReadFile for Files {
    type Error = ();
    fn read_file(&mut self, name: &str) -> Result<Option<Contents>, ()> {
        Ok(self.0.get(name).map(|bytes| Contents::from(&bytes[..])))
    }
}

fn state(windows: &[(i64, i128, bool)], max_ts: i64) -> OperatorState {
    OperatorState {
        windows: windows
            .iter()
            .map(|&(end, sum, fired)| (end, WindowState { sum, cnt: 1, fired }))
            .collect(),
        max_ts: Some(max_ts),
        dropped_late: 0,
    }
}

/// Commits `state` at `index` with `dirty` windows changed: the files it writes.
fn commit(
    inc: &mut Incremental,
    files: &mut Files,
    index: u64,
    state: &OperatorState,
    dirty: &[i64],
) -> (FileKind, String) {
    inc.dirty = dirty.iter().copied().collect();
    let written = inc.prepare(index, state, &[], true, None);
    files
        .0
        .insert(written.name.clone(), written.bytes.contents.to_vec());
    let (number, kind) = (written.number, written.kind);
    let manifest = FileKind::Manifest.file_name(number);
    files.0.insert(manifest.clone(), written.manifest.clone());
    inc.loose.insert((number, kind));
    inc.loose.insert((number, FileKind::Manifest));
    for (i, stale_kind) in inc.stale(&written) {
        files.0.remove(&stale_kind.file_name(i));
        inc.loose.remove(&(i, stale_kind));
    }
    inc.commit(written);
    inc.dirty.clear();
    (kind, manifest)
}

#[test]
fn a_chain_restores_the_state_and_compacts_when_deltas_outgrow_the_base() {
    let mut inc = Incremental::default();
    let mut files = Files(BTreeMap::new());
    let s8 = state(&[(10, 40, false)], 9);
    assert_eq!(
        commit(&mut inc, &mut files, 8, &s8, &[10]).0,
        FileKind::Base
    );
    let s16 = state(&[(10, 41, true), (20, 7, false)], 17);
    assert_eq!(
        commit(&mut inc, &mut files, 16, &s16, &[10, 20]).0,
        FileKind::Delta
    );
    let names: Vec<&String> = files.0.keys().collect();
    assert_eq!(names, ["base-1.json", "delta-2.json", "manifest-2.json"]);
    let restored = restore(
        "manifest-2.json",
        &files.0["manifest-2.json"].clone(),
        true,
        &mut files,
        None,
    )
    .ok()
    .unwrap();
    assert_eq!(restored.checkpoint.index, 16);
    assert_eq!(restored.checkpoint.state, s16);
    assert_eq!(Some(restored.chain), inc.chain);
    // The delta is larger than the base: the next checkpoint compacts, and the old
    // chain goes once the new manifest is written.
    let s24 = state(&[(20, 9, true)], 27);
    assert_eq!(
        commit(&mut inc, &mut files, 24, &s24, &[10, 20]).0,
        FileKind::Base
    );
    let names: Vec<&String> = files.0.keys().collect();
    assert_eq!(names, ["base-3.json", "manifest-3.json"]);
    let restored = restore(
        "manifest-3.json",
        &files.0["manifest-3.json"].clone(),
        true,
        &mut files,
        None,
    )
    .ok()
    .unwrap();
    assert_eq!(restored.checkpoint.state, s24);
}

/// A base at index 8 and a delta on it at 16 (`manifest-2.json`), and the state at 16.
fn base_and_delta() -> (Files, OperatorState) {
    let mut inc = Incremental::default();
    let mut files = Files(BTreeMap::new());
    let s8 = state(&[(10, 40, false)], 9);
    commit(&mut inc, &mut files, 8, &s8, &[10]);
    let s16 = state(&[(10, 41, true), (20, 7, false)], 17);
    commit(&mut inc, &mut files, 16, &s16, &[10, 20]);
    (files, s16)
}

#[test]
fn a_manifest_naming_a_missing_or_damaged_delta_is_rejected() {
    let (mut files, _) = base_and_delta();
    let manifest = files.0["manifest-2.json"].clone();
    let delta = files.0.remove("delta-2.json").unwrap();
    let why = |files: &mut Files| match restore("manifest-2.json", &manifest, true, files, None) {
        Err(NotRestored::Invalid(Invalid::Rejected(why))) => why,
        _ => panic!("rejected"),
    };
    assert_eq!(
        why(&mut files),
        "names delta-2.json, which is missing (named by manifest-2.json)"
    );
    let mut torn = delta.clone();
    torn.truncate(delta.len() - 1);
    files.0.insert("delta-2.json".to_string(), torn);
    assert_eq!(
        why(&mut files),
        format!(
            "names delta-2.json, which is not the file manifest-2.json recorded ({} bytes)",
            delta.len() - 1
        )
    );
    let mut flipped = delta.clone();
    *flipped.last_mut().unwrap() = b' ';
    files.0.insert("delta-2.json".to_string(), flipped);
    assert!(why(&mut files).starts_with("names delta-2.json, which is not the file"));
    files.0.insert("delta-2.json".to_string(), delta);
    files.0.remove("base-1.json");
    assert_eq!(
        why(&mut files),
        "names base-1.json, which is missing (named by delta-2.json)"
    );
}

/// A reader that logs the names it reads.
struct Logged<'f>(&'f mut Files, Vec<String>);

impl ReadFile for Logged<'_> {
    type Error = ();
    fn read_file(&mut self, name: &str) -> Result<Option<Contents>, ()> {
        self.1.push(name.to_string());
        self.0.read_file(name)
    }
}

/// What a restore of manifest-2.json returns and the files it reads, without the memo
/// and then twice through `memo`: all three the same. Returns the result.
fn check_memo(files: &mut Files, memo: &ChainMemo) -> Result<(Checkpoint, Chain), Invalid> {
    let manifest = Contents::from(&files.0["manifest-2.json"][..]);
    let outcome = |result: Result<Restored, NotRestored<()>>| match result {
        Ok(restored) => Ok((restored.checkpoint, restored.chain)),
        Err(NotRestored::Invalid(invalid)) => Err(invalid),
        Err(NotRestored::Io(())) => unreachable!("the files are in memory"),
    };
    let mut direct = Logged(files, Vec::new());
    let expected = outcome(restore(
        "manifest-2.json",
        &manifest.to_vec(),
        true,
        &mut direct,
        None,
    ));
    let expected_reads = direct.1;
    for _ in 0..2 {
        let mut memoized = Logged(files, Vec::new());
        let result = chain_memo::restore(
            "manifest-2.json",
            &manifest,
            true,
            &mut memoized,
            Some(memo),
        );
        assert_eq!(outcome(result), expected);
        assert_eq!(memoized.1, expected_reads);
    }
    expected
}

/// A chain that grows one delta a checkpoint, restored after each through one memo
/// (each a new manifest: the memo's entries miss, its decoded files do not), as a
/// restore without it restores it, reading the same files; then a delta rewritten under
/// its name with other bytes is decoded again, not taken.
#[test]
fn a_longer_chain_through_the_memo_returns_what_a_restore_returns() {
    let mut inc = Incremental::default();
    let mut files = Files(BTreeMap::new());
    let memo = ChainMemo::default();
    let wide: Vec<(i64, i128, bool)> = (1..=20).map(|i| (i * 10, i as i128, true)).collect();
    commit(&mut inc, &mut files, 8, &state(&wide, 9), &[]);
    let mut windows = wide.clone();
    let restore_both = |files: &mut Files, manifest: &str| {
        let bytes = Contents::from(&files.0[manifest][..]);
        let mut direct = Logged(files, Vec::new());
        let expected = restore(manifest, &bytes.to_vec(), true, &mut direct, None)
            .ok()
            .unwrap();
        let expected_reads = direct.1;
        let mut memoized = Logged(files, Vec::new());
        let got = chain_memo::restore(manifest, &bytes, true, &mut memoized, Some(&memo))
            .ok()
            .unwrap();
        assert_eq!(memoized.1, expected_reads, "{manifest}");
        assert_eq!(got.checkpoint, expected.checkpoint, "{manifest}");
        assert_eq!(got.chain, expected.chain, "{manifest}");
        got
    };
    for step in 1..=4_u64 {
        windows[step as usize].1 += 100;
        let index = 8 + 8 * step;
        let (kind, _) = commit(
            &mut inc,
            &mut files,
            index,
            &state(&windows, 9),
            &[windows[step as usize].0],
        );
        assert_eq!(kind, FileKind::Delta);
        let manifest = FileKind::Manifest.file_name(step + 1);
        let restored = restore_both(&mut files, &manifest);
        assert_eq!(restored.checkpoint.state, state(&windows, 9));
        assert_eq!(restored.chain.deltas.len() as u64, step);
    }
    // delta-3.json holds other bytes: its manifest's restore now fails in both.
    let mut other = files.0["delta-3.json"].clone();
    *other.last_mut().unwrap() = b' ';
    files.0.insert("delta-3.json".to_string(), other);
    let manifest = Contents::from(&files.0["manifest-5.json"][..]);
    let direct = restore(
        "manifest-5.json",
        &manifest.to_vec(),
        true,
        &mut files,
        None,
    );
    let memoized = chain_memo::restore("manifest-5.json", &manifest, true, &mut files, Some(&memo));
    assert!(matches!(
        direct,
        Err(NotRestored::Invalid(Invalid::Rejected(_)))
    ));
    assert!(matches!(
        memoized,
        Err(NotRestored::Invalid(Invalid::Rejected(_)))
    ));
}

#[test]
fn a_memoized_restore_reads_what_a_restore_reads_and_returns_what_it_returns() {
    let (mut files, s16) = base_and_delta();
    let memo = ChainMemo::default();
    assert_eq!(check_memo(&mut files, &memo).unwrap().0.state, s16);
    // A delta torn, flipped or missing, then the base missing: each read until it
    // differs from what the memo's restore read, then restored in full.
    let delta = files.0["delta-2.json"].clone();
    let mut torn = delta.clone();
    torn.truncate(delta.len() - 1);
    let mut flipped = delta.clone();
    *flipped.last_mut().unwrap() = b' ';
    for damaged in [Some(torn), Some(flipped), None] {
        match damaged {
            Some(bytes) => files.0.insert("delta-2.json".to_string(), bytes),
            None => files.0.remove("delta-2.json"),
        };
        assert!(matches!(
            check_memo(&mut files, &memo),
            Err(Invalid::Rejected(_))
        ));
    }
    files.0.insert("delta-2.json".to_string(), delta);
    assert_eq!(check_memo(&mut files, &memo).unwrap().0.state, s16);
    files.0.remove("base-1.json");
    let why = check_memo(&mut files, &memo).unwrap_err();
    assert_eq!(
        why,
        Invalid::Rejected("names base-1.json, which is missing (named by delta-2.json)".into())
    );
}

#[test]
fn file_names_parse() {
    assert_eq!(parse_file_name("base-1.json"), Some((FileKind::Base, 1)));
    assert_eq!(parse_file_name("delta-2.json"), Some((FileKind::Delta, 2)));
    assert_eq!(
        parse_file_name("manifest-2.json"),
        Some((FileKind::Manifest, 2))
    );
    assert_eq!(parse_file_name("manifest-2.json.tmp"), None);
    assert_eq!(parse_file_name("state-16.json"), None);
    assert_eq!(parse_file_name("delta-.json"), None);
    assert_eq!(parse_file_name("delta-07.json"), Some((FileKind::Delta, 7)));
    // Canonical: as `file_name` makes them, and only those.
    for kind in [FileKind::Base, FileKind::Delta, FileKind::Manifest] {
        for index in [0, 1, 9, 10, 99, 100, 12_345, u64::MAX] {
            let name = kind.file_name(index);
            assert_eq!(parse_canonical_file_name(&name), Some((kind, index)));
            let padded = name.replacen('-', "-0", 1);
            assert_eq!(parse_file_name(&padded), Some((kind, index)), "{padded}");
            assert_eq!(parse_canonical_file_name(&padded), None, "{padded}");
        }
    }
    assert_eq!(parse_canonical_file_name("state-16.json"), None);
}

/// A restore checks the numbers of the state it builds as a full decode does, reading the
/// windows only where a delta brought one out of range (the base's were checked when it
/// decoded): the same verdict, word for word, either way, with and without decoded files.
#[test]
fn a_restored_state_out_of_range_is_named_as_a_full_check_names_it() {
    // (the delta's windows, its max_ts, what restoring says)
    let sum_max = crate::event::EVENTS_MAX as i128 * crate::event::EVENT_INT_MAX as i128;
    type Case<'a> = (&'a [(i64, i128, bool)], i64, Result<(), String>);
    let cases: [Case; 4] = [
        (&[(20, 7, false)], 17, Ok(())),
        (&[(20, sum_max, false)], 17, Ok(())),
        (
            &[(20, sum_max + 1, false)],
            17,
            Err(format!("window 20 has sum {}, out of range", sum_max + 1)),
        ),
        (
            &[(20, 7, false)],
            i64::MAX,
            Err(format!("max_ts {} is out of range", i64::MAX)),
        ),
    ];
    for (windows, max_ts, verdict) in cases {
        for memo in [None, Some(DecodedFiles::default())] {
            let mut inc = Incremental::default();
            let mut files = Files(BTreeMap::new());
            commit(
                &mut inc,
                &mut files,
                8,
                &state(&[(10, 40, false)], 9),
                &[10],
            );
            let mut s16 = state(windows, max_ts);
            s16.windows.insert(
                10,
                WindowState {
                    sum: 40,
                    cnt: 1,
                    fired: false,
                },
            );
            let (kind, manifest) = commit(&mut inc, &mut files, 16, &s16, &[20]);
            assert_eq!(kind, FileKind::Delta);
            assert_eq!(check_state(&s16), verdict);
            let bytes = files.0[&manifest].clone();
            let restored = restore(&manifest, &bytes, true, &mut files, memo.as_ref());
            match (restored, &verdict) {
                (Ok(restored), Ok(())) => assert_eq!(restored.checkpoint.state, s16),
                (Err(NotRestored::Invalid(Invalid::TrustedButCorrupt(why))), Err(named)) => {
                    assert_eq!(
                        why,
                        format!("passes its checksum but has a chain whose state {named}")
                    )
                }
                (Ok(_), _) => panic!("{windows:?} {max_ts}: restored"),
                (Err(_), _) => panic!("{windows:?} {max_ts}: not restored as {verdict:?}"),
            }
        }
    }
}
