//! The oracle's judgements of edited and replayed views of ch04, record by record.

use super::identity::{content, slot, upsert, Content, Slot, Trigger};
use super::*;
use crate::observation::ViewObservation;
use keel_engine::RecordKind;

fn rec(key: &str, window_end: i64, sum: i128, watermark: i64, kind: RecordKind) -> Record {
    Record {
        key: key.to_string(),
        window_end,
        sum,
        watermark,
        kind,
    }
}

/// The chapter's fault-free output on ch04.
fn ch04() -> Vec<Record> {
    vec![
        rec("13:10", 10, 55, 10, RecordKind::Fire),
        rec("24:20", 20, 138, 21, RecordKind::Fire),
        rec("25:20", 20, 155, 21, RecordKind::LateUpdate),
        rec("flush:30", 30, 255, 24, RecordKind::Flush),
    ]
}

fn finals() -> BTreeMap<i64, i128> {
    BTreeMap::from([(10, 55), (20, 155), (30, 255)])
}

pub(super) fn reference(records: Vec<Record>) -> Reference {
    Reference {
        records: records.into(),
        final_windows: finals(),
        dropped_late: 0,
        model_mismatch: None,
        found: None,
        prepared: Arc::default(),
    }
}

fn observation(key: KeyScheme, records: Vec<Record>) -> Observation {
    Observation {
        sink: SinkKind::Append,
        key,
        views: vec![ViewObservation {
            view: None,
            records: records.into(),
            ..ViewObservation::default()
        }],
        recovery: Recovery::Ok,
        final_windows: finals().into(),
        dropped_late: 0,
        rolled_back: 0,
        restarts: 1,
        stray_files: Vec::new(),
        sink_writes: None,
        sink_outage: None,
        restart: None,
    }
}

/// Judges `seen` against `want` and compares the figures
/// (delivered, duplicates, lost, wrong, stale_windows) and the broken properties.
fn check(
    key: KeyScheme,
    want: Vec<Record>,
    seen: Vec<Record>,
    figures: (u64, u64, u64, u64, u64),
    broken: &[&str],
) {
    let verdicts = judge(&reference(want), &observation(key, seen));
    let v = &verdicts[0];
    assert_eq!(
        (v.delivered, v.duplicates, v.lost, v.wrong, v.stale_windows),
        figures,
        "{v:?}"
    );
    assert_eq!(
        v.failures(Some(&Expectation::exactly_once()), SinkKind::Append),
        broken,
        "{v:?}"
    );
}

#[test]
fn a_restart_that_forgets_the_dropped_late_count_does_not_recover() {
    // The sink is right, but the final state counts 2 dropped events where the
    // fault-free run counted 3 (a checkpoint that did not carry the count).
    let mut want = reference(ch04());
    want.dropped_late = 3;
    let mut seen = observation(KeyScheme::EventIndex, ch04());
    seen.dropped_late = 2;
    let v = &judge(&want, &seen)[0];
    assert!(!v.final_windows_match);
    assert_eq!(
        v.failures(Some(&Expectation::exactly_once()), SinkKind::Append),
        ["recovers"]
    );
    seen.dropped_late = 3;
    assert!(judge(&want, &seen)[0].final_windows_match);
}

/// The judgement as it was first written (every reference record and every view record
/// in one map, per point): (delivered, duplicates, lost, wrong, stale windows, first
/// wrong record).
fn judged_in_one_map(
    want: &[Record],
    seen: &[Record],
    key: KeyScheme,
) -> (u64, u64, u64, u64, u64, Option<String>) {
    let mut slots: BTreeMap<Slot, BTreeMap<Content, (u64, u64)>> = BTreeMap::new();
    for record in want {
        slots
            .entry(slot(record, key))
            .or_default()
            .entry(content(record))
            .or_default()
            .0 += 1;
    }
    let mut first_wrong = None;
    for record in seen {
        let copies = slots
            .entry(slot(record, key))
            .or_default()
            .entry(content(record))
            .or_default();
        if copies.0 == 0 && first_wrong.is_none() {
            first_wrong = Some(record.to_json_line());
        }
        copies.1 += 1;
    }
    let (mut delivered, mut duplicates, mut wrong, mut lost) = (0, 0, 0, 0);
    for contents in slots.values() {
        let (mut missing, mut foreign) = (0, 0);
        for &(want, got) in contents.values() {
            delivered += want.min(got);
            if want == 0 {
                foreign += got;
            } else {
                duplicates += got.saturating_sub(want);
                missing += want.saturating_sub(got);
            }
        }
        wrong += foreign;
        lost += missing.saturating_sub(foreign);
    }
    let (want, got) = (upsert(want), upsert(seen));
    let mut ends: Vec<i64> = want.keys().chain(got.keys()).copied().collect();
    ends.sort_unstable();
    ends.dedup();
    let stale = ends
        .iter()
        .filter(|end| want.get(end) != got.get(end))
        .count() as u64;
    (delivered, duplicates, lost, wrong, stale, first_wrong)
}

#[test]
fn the_judgement_is_the_one_map_judgement_on_every_edit_of_ch04() {
    // Every view made of ch04's records with one record dropped, repeated at any place,
    // or changed in one field, and then one more such edit, under both key schemes.
    let edits = |records: &[Record]| -> Vec<Vec<Record>> {
        let mut out = Vec::new();
        for i in 0..records.len() {
            let mut dropped = records.to_vec();
            dropped.remove(i);
            out.push(dropped);
            for at in 0..=records.len() {
                let mut repeated = records.to_vec();
                repeated.insert(at, records[i].clone());
                out.push(repeated);
            }
            for change in 0..5 {
                let mut changed = records.to_vec();
                let r = &mut changed[i];
                match change {
                    0 => r.sum += 1,
                    1 => r.watermark += 1,
                    2 => r.window_end += 10,
                    3 => r.key = format!("0{}", r.key),
                    _ => r.kind = RecordKind::LateUpdate,
                }
                out.push(changed);
            }
        }
        out
    };
    let want = ch04();
    let mut judged = 0;
    for key in [KeyScheme::EventIndex, KeyScheme::ProcessingTime] {
        let reference = reference(want.clone());
        for once in edits(&want) {
            for seen in edits(&once) {
                let v = &judge(&reference, &observation(key, seen.clone()))[0];
                assert_eq!(
                    (
                        v.delivered,
                        v.duplicates,
                        v.lost,
                        v.wrong,
                        v.stale_windows,
                        v.first_wrong.clone()
                    ),
                    judged_in_one_map(&want, &seen, key),
                    "{seen:?}"
                );
                judged += 1;
            }
        }
    }
    assert_eq!(judged, 4_400);
}

#[test]
fn triggers_are_equal_exactly_when_their_texts_are() {
    let texts = [
        "0",
        "00",
        "7",
        "07",
        "+7",
        "-7",
        "13",
        "flush",
        "",
        "18446744073709551615",
        "18446744073709551616",
        "1 3",
    ];
    for a in texts {
        for b in texts {
            assert_eq!(Trigger::of(a) == Trigger::of(b), a == b, "{a:?} {b:?}");
        }
    }
    assert_eq!(Trigger::of("13"), Trigger::Index(13));
    assert_eq!(Trigger::of("013"), Trigger::Text("013".to_string()));
    assert_eq!(
        Trigger::of("18446744073709551616"),
        Trigger::Text("18446744073709551616".to_string())
    );
}

#[test]
fn the_fault_free_output_is_exactly_once() {
    check(KeyScheme::EventIndex, ch04(), ch04(), (4, 0, 0, 0, 0), &[]);
}

#[test]
fn a_replayed_record_is_a_duplicate_not_a_loss() {
    let mut seen = ch04();
    seen.insert(1, rec("13:10", 10, 55, 10, RecordKind::Fire));
    check(
        KeyScheme::EventIndex,
        ch04(),
        seen,
        (4, 1, 0, 0, 0),
        &["no-duplicates"],
    );
}

#[test]
fn equal_records_are_a_multiset_not_one_identity() {
    // The twins stream: two late updates with equal content, keyed by processing time.
    let want = vec![
        rec("1:10", 10, 1, 15, RecordKind::Fire),
        rec("2:10", 10, 1, 15, RecordKind::LateUpdate),
        rec("3:10", 10, 1, 15, RecordKind::LateUpdate),
        rec("flush:30", 30, 1, 15, RecordKind::Flush),
    ];
    let seen = vec![
        rec("pt300:10", 10, 1, 15, RecordKind::Fire),
        rec("pt600:10", 10, 1, 15, RecordKind::LateUpdate),
        rec("pt900:10", 10, 1, 15, RecordKind::LateUpdate),
        rec("flush:30", 30, 1, 15, RecordKind::Flush),
    ];
    let mut reference = reference(want.clone());
    reference.final_windows = BTreeMap::from([(10, 1), (30, 1)]);
    let mut seen_obs = observation(KeyScheme::ProcessingTime, seen.clone());
    seen_obs.final_windows = reference.final_windows.clone().into();
    let v = &judge(&reference, &seen_obs)[0];
    assert_eq!((v.delivered, v.duplicates, v.lost, v.wrong), (4, 0, 0, 0));
    // One copy short is one loss; a third copy is one duplicate.
    let mut short = seen_obs.clone();
    let mut fewer = seen.clone();
    fewer.remove(2);
    short.views[0].records = fewer.into();
    let v = &judge(&reference, &short)[0];
    assert_eq!((v.delivered, v.duplicates, v.lost, v.wrong), (3, 0, 1, 0));
    let mut extra = seen_obs;
    let mut more = seen;
    more.push(rec("pt1200:10", 10, 1, 15, RecordKind::LateUpdate));
    extra.views[0].records = more.into();
    let v = &judge(&reference, &extra)[0];
    assert_eq!((v.delivered, v.duplicates, v.lost, v.wrong), (4, 1, 0, 0));
}

#[test]
fn a_watermark_off_by_one_after_recovery_is_wrong() {
    // Mutation: records written after recovery carry watermark + 1.
    let mut seen = ch04();
    seen[2].watermark += 1;
    seen[3].watermark += 1;
    check(
        KeyScheme::EventIndex,
        ch04(),
        seen,
        (2, 0, 0, 2, 0),
        &["no-wrong"],
    );
}

#[test]
fn records_replayed_in_reverse_order_leave_a_stale_window() {
    // Mutation: recovery writes its records in reverse order, so a consumer that keeps
    // the last value per window ends with 138 for window 20.
    let mut seen = ch04()[..1].to_vec();
    seen.extend(ch04()[1..].iter().rev().cloned());
    check(
        KeyScheme::EventIndex,
        ch04(),
        seen,
        (4, 0, 0, 0, 1),
        &["consistent-view"],
    );
}

#[test]
fn a_wrong_sum_is_wrong_not_lost() {
    let mut seen = ch04();
    seen[1].sum = 137;
    check(
        KeyScheme::EventIndex,
        ch04(),
        seen,
        (3, 0, 0, 1, 0),
        &["no-wrong"],
    );
    let mut seen = ch04();
    seen.remove(2);
    check(
        KeyScheme::EventIndex,
        ch04(),
        seen,
        (3, 0, 1, 0, 1),
        &["no-loss", "consistent-view"],
    );
}

#[test]
fn a_model_mismatch_fails_whatever_was_asked() {
    let mut reference = reference(ch04());
    reference.model_mismatch = Some(ModelMismatch {
        at: "record 0".to_string(),
        model: "x".to_string(),
        engine: "y".to_string(),
    });
    let v = &judge(&reference, &observation(KeyScheme::EventIndex, ch04()))[0];
    assert_eq!(
        v.failures(
            Some(&Expectation::parse("no-loss").unwrap()),
            SinkKind::Append
        ),
        ["matches-model"]
    );
    assert!(v.summary().starts_with("model_mismatch("));
}
