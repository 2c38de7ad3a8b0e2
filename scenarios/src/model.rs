//! An independent reference model of the engine's window semantics: a batch computation over
//! the whole event list, written apart from `engine/src/window.rs` and sharing no code with
//! it, so a bug that the engine's fault-free run agrees with (every window end off by W, say)
//! still shows.
//!
//! The semantics, from the chapter:
//! - window end of `ts` = floor(ts / W) * W + W (the multiple of W strictly above ts);
//! - the watermark after event i is the largest ts among events 0..=i, minus D;
//! - a window fires after the first event i, at or after its own first event, whose
//!   watermark reaches its end; its record carries the sum of its events up to i;
//! - every later event of a fired window emits a late update with the new sum;
//! - within one event, the late update comes first, then the windows that fire, by end;
//! - at the end of input every window that never fired is flushed, by end, with the last
//!   watermark.
//!
//! Allowed lateness L (None: unbounded), as Flink's `allowedLateness`:
//! - event i is dropped when i > 0 and the end of its window plus L is at most the
//!   watermark after event i - 1 (Flink: `maxTimestamp + L <= currentWatermark`, with
//!   maxTimestamp = end - 1 and Flink's watermark one below keel's); a dropped event belongs
//!   to no window, emits nothing and is counted;
//! - a window whose end plus L is at most the last watermark is gone at the end (purged):
//!   it is not among the final windows (it fired long before, so it is never flushed).

use keel_engine::{Event, Record, RecordKind};
use serde::Serialize;
use std::collections::BTreeMap;

/// The records and final window sums the semantics prescribe for `events`, with the
/// chapter's stable keys ("<event index>:<end>", "flush:<end>").
pub fn expected_output(
    events: &[Event],
    window_size: i64,
    out_of_orderness: i64,
    allowed_lateness: Option<i64>,
) -> ModelOutput {
    assert!(window_size > 0);
    assert!(out_of_orderness >= 0);
    let end_of = |ts: i64| -> i64 { ts - ts.rem_euclid(window_size) + window_size };
    // Watermarks: a running maximum, computed once for the whole stream.
    let watermarks: Vec<i64> = events
        .iter()
        .scan(i64::MIN, |max_ts, event| {
            *max_ts = (*max_ts).max(event.ts);
            Some(*max_ts - out_of_orderness)
        })
        .collect();
    // Too late: behind the watermark the previous event left by more than L.
    let dropped: Vec<bool> = (0..events.len())
        .map(|i| match (allowed_lateness, i.checked_sub(1)) {
            (Some(lateness), Some(previous)) => {
                end_of(events[i].ts) + lateness <= watermarks[previous]
            }
            _ => false,
        })
        .collect();
    // Each window's events, by index (dropped events belong to none).
    let mut members: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
    for (i, event) in events.iter().enumerate() {
        if !dropped[i] {
            members.entry(end_of(event.ts)).or_default().push(i);
        }
    }
    // The event each window fires at: watermarks never decrease, so the first index at or
    // after the window's first event whose watermark reaches the end is a binary search.
    let mut fires_at: BTreeMap<usize, Vec<i64>> = BTreeMap::new();
    let mut fire_index: BTreeMap<i64, usize> = BTreeMap::new();
    for (&end, indexes) in &members {
        let first = indexes[0];
        let offset = watermarks[first..].partition_point(|&wm| wm < end);
        if first + offset < events.len() {
            fires_at.entry(first + offset).or_default().push(end);
            fire_index.insert(end, first + offset);
        }
    }
    // Running sums of each window's values, beside its member indexes.
    let running: BTreeMap<i64, Vec<i128>> = members
        .iter()
        .map(|(&end, indexes)| {
            let sums = indexes
                .iter()
                .scan(0i128, |sum, &j| {
                    *sum += i128::from(events[j].value);
                    Some(*sum)
                })
                .collect();
            (end, sums)
        })
        .collect();
    let sum_through = |end: i64, index: usize| -> i128 {
        let count = members[&end].partition_point(|&j| j <= index);
        count.checked_sub(1).map_or(0, |last| running[&end][last])
    };
    let mut records = Vec::new();
    for (i, event) in events.iter().enumerate() {
        let end = end_of(event.ts);
        if !dropped[i] && fire_index.get(&end).is_some_and(|&f| i > f) {
            records.push(record(
                format!("{i}:{end}"),
                end,
                sum_through(end, i),
                watermarks[i],
                RecordKind::LateUpdate,
            ));
        }
        for &end in fires_at.get(&i).map(Vec::as_slice).unwrap_or(&[]) {
            records.push(record(
                format!("{i}:{end}"),
                end,
                sum_through(end, i),
                watermarks[i],
                RecordKind::Fire,
            ));
        }
    }
    let purged = |end: i64| match (allowed_lateness, watermarks.last()) {
        (Some(lateness), Some(&last_watermark)) => end + lateness <= last_watermark,
        _ => false,
    };
    let finals: BTreeMap<i64, i128> = members
        .keys()
        .filter(|&&end| !purged(end))
        .map(|&end| (end, sum_through(end, events.len())))
        .collect();
    if let Some(&last_watermark) = watermarks.last() {
        for (&end, &sum) in finals
            .iter()
            .filter(|(end, _)| !fire_index.contains_key(end))
        {
            records.push(record(
                format!("flush:{end}"),
                end,
                sum,
                last_watermark,
                RecordKind::Flush,
            ));
        }
    }
    ModelOutput {
        records,
        final_windows: finals,
        dropped_late: dropped.iter().filter(|&&d| d).count() as u64,
    }
}

/// What the model prescribes for a stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelOutput {
    /// The records, in emission order, with the chapter's stable keys.
    pub records: Vec<Record>,
    /// Window end -> sum of the windows still held at the end (purged ones are gone).
    pub final_windows: BTreeMap<i64, i128>,
    /// Events dropped as later than the allowed lateness.
    pub dropped_late: u64,
}

fn record(key: String, window_end: i64, sum: i128, watermark: i64, kind: RecordKind) -> Record {
    Record {
        key,
        window_end,
        sum,
        watermark,
        kind,
    }
}

/// Where the engine's fault-free output first departs from the model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ModelMismatch {
    /// The position in the output (records in emission order), or the window, that differs.
    pub at: String,
    /// What the model prescribes there ("none" when it has nothing).
    pub model: String,
    /// What the engine emitted there ("none" when it emitted nothing).
    pub engine: String,
}

impl std::fmt::Display for ModelMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: the model has {}, the engine has {}",
            self.at, self.model, self.engine
        )
    }
}

/// Compares the engine's fault-free records, final windows and dropped events with the
/// model's.
pub fn check(
    engine_records: &[Record],
    engine_final_windows: &BTreeMap<i64, i128>,
    engine_dropped_late: u64,
    model: &ModelOutput,
) -> Option<ModelMismatch> {
    let model_records = &model.records;
    let longest = engine_records.len().max(model_records.len());
    for i in 0..longest {
        let (want, got) = (model_records.get(i), engine_records.get(i));
        if want != got {
            let show = |r: Option<&Record>| r.map_or("none".to_string(), |r| r.to_json_line());
            return Some(ModelMismatch {
                at: format!("record {i}"),
                model: show(want),
                engine: show(got),
            });
        }
    }
    if *engine_final_windows != model.final_windows {
        return Some(ModelMismatch {
            at: "final windows".to_string(),
            model: keel_engine::format_windows(&model.final_windows),
            engine: keel_engine::format_windows(engine_final_windows),
        });
    }
    if engine_dropped_late != model.dropped_late {
        return Some(ModelMismatch {
            at: "dropped late events".to_string(),
            model: model.dropped_late.to_string(),
            engine: engine_dropped_late.to_string(),
        });
    }
    None
}

/// What the fault-free run of one sink counted, from its report (one incarnation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultFreeCounts {
    /// Events the run read (the position it ended at).
    pub events_read: u64,
    /// Records the run says reached the sink.
    pub written: u64,
    /// Records the idempotent sink says it skipped as already present.
    pub skipped: u64,
}

/// Compares the counts a fault-free run reports with what the model prescribes: every event
/// read, every one of the model's records written, nothing skipped (nothing was there
/// before). A report whose figures are wrong teaches the wrong lesson even when the sink
/// is right.
pub fn check_counts(
    counts: FaultFreeCounts,
    events: u64,
    model_records: u64,
) -> Option<ModelMismatch> {
    let want = FaultFreeCounts {
        events_read: events,
        written: model_records,
        skipped: 0,
    };
    (counts != want).then(|| {
        let show = |c: FaultFreeCounts| {
            format!(
                "events_read={} written={} skipped={}",
                c.events_read, c.written, c.skipped
            )
        };
        ModelMismatch {
            at: "the fault-free run's counts".to_string(),
            model: show(want),
            engine: show(counts),
        }
    })
}

/// Where the documented checkpoint cadence puts the newest checkpoint of a fault-free run
/// (docs/design/engine-and-verdicts.md, "The engine, exactly": a checkpoint after event i when (i + 1) % K == 0, named
/// `state-<i+1>.json`; the transactional sink's last transaction commits with one more at the
/// end of input; `in-place` rewrites the one file `state.json`), against the names the run
/// left on its disk (read from the disk, not from the engine). Every numbered checkpoint
/// left must sit on that cadence, and the newest must be the cadence's last.
pub fn check_checkpoint_files(
    files: &[String],
    events: u64,
    checkpoint_every: u64,
    in_place: bool,
    final_checkpoint: bool,
) -> Option<ModelMismatch> {
    assert!(checkpoint_every > 0);
    let on_cadence = |index: u64| {
        index > 0 && (index % checkpoint_every == 0 || (final_checkpoint && index == events))
    };
    let newest = if final_checkpoint && events > 0 {
        Some(events)
    } else {
        Some(events / checkpoint_every * checkpoint_every).filter(|&i| i > 0)
    };
    let (want, have) = if in_place {
        let has = |name: &str| files.iter().any(|f| f == name);
        (
            newest.map(|_| "state.json".to_string()),
            has("state.json").then(|| "state.json".to_string()),
        )
    } else {
        let indices: Vec<u64> = files
            .iter()
            .filter_map(|name| {
                name.strip_prefix("state-")?
                    .strip_suffix(".json")?
                    .parse()
                    .ok()
            })
            .collect();
        if let Some(&off) = indices.iter().find(|&&i| !on_cadence(i)) {
            return Some(ModelMismatch {
                at: "the fault-free run's checkpoints (a checkpoint every K events)".to_string(),
                model: format!("checkpoints at multiples of {checkpoint_every}"),
                engine: format!("state-{off}.json"),
            });
        }
        (
            newest.map(|i| format!("state-{i}.json")),
            indices.iter().max().map(|i| format!("state-{i}.json")),
        )
    };
    (want != have).then(|| ModelMismatch {
        at: "the fault-free run's newest checkpoint (a checkpoint every K events)".to_string(),
        model: want.unwrap_or_else(|| "none".to_string()),
        engine: have.unwrap_or_else(|| "none".to_string()),
    })
}

/// With incremental checkpoints, where the documented cadence puts the newest manifest of a
/// fault-free run: checkpoints are numbered 1, 2, ... in the order they are taken (one after
/// every K events, and the transactional sink's last one at the end of input), so the newest
/// manifest is `manifest-<n>.json` with n the number of checkpoints the cadence takes; read
/// from the names the run left on its disk.
pub fn check_manifest_files(
    files: &[String],
    events: u64,
    checkpoint_every: u64,
    final_checkpoint: bool,
) -> Option<ModelMismatch> {
    assert!(checkpoint_every > 0);
    let taken = events / checkpoint_every + u64::from(final_checkpoint && events > 0);
    let want = (taken > 0).then(|| format!("manifest-{taken}.json"));
    let have = files
        .iter()
        .filter_map(|name| {
            name.strip_prefix("manifest-")?
                .strip_suffix(".json")?
                .parse::<u64>()
                .ok()
        })
        .max()
        .map(|n| format!("manifest-{n}.json"));
    (want != have).then(|| ModelMismatch {
        at: "the fault-free run's newest manifest (a checkpoint every K events)".to_string(),
        model: want.unwrap_or_else(|| "none".to_string()),
        engine: have.unwrap_or_else(|| "none".to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(pairs: &[(i64, i64)]) -> Vec<Event> {
        pairs
            .iter()
            .map(|&(ts, value)| Event { ts, value })
            .collect()
    }

    #[test]
    fn the_model_prescribes_fires_late_updates_and_flushes() {
        let ModelOutput {
            records,
            final_windows: finals,
            dropped_late,
        } = expected_output(
            &events(&[(1, 1), (12, 2), (15, 3), (3, 4), (26, 5)]),
            10,
            5,
            None,
        );
        assert_eq!(dropped_late, 0);
        let lines: Vec<String> = records.iter().map(Record::to_json_line).collect();
        assert_eq!(
            lines,
            [
                r#"{"key": "2:10", "window_end": 10, "sum": 1, "watermark": 10, "kind": "fire"}"#,
                r#"{"key": "3:10", "window_end": 10, "sum": 5, "watermark": 10, "kind": "late-update"}"#,
                r#"{"key": "4:20", "window_end": 20, "sum": 5, "watermark": 21, "kind": "fire"}"#,
                r#"{"key": "flush:30", "window_end": 30, "sum": 5, "watermark": 21, "kind": "flush"}"#,
            ]
        );
        assert_eq!(finals, BTreeMap::from([(10, 5), (20, 5), (30, 5)]));
    }

    #[test]
    fn a_window_first_seen_behind_the_watermark_fires_at_once() {
        // Unbounded, and within the allowed lateness: 10 + 25 > 30.
        for lateness in [None, Some(25)] {
            let records = expected_output(&events(&[(30, 1), (2, 7)]), 10, 0, lateness).records;
            assert_eq!(records[0].key, "1:10");
            assert_eq!(records[0].kind, RecordKind::Fire);
            assert_eq!(records[0].sum, 7);
            assert_eq!(records[1].key, "flush:40");
        }
        // Beyond it (10 + 20 <= 30): dropped, never created.
        let beyond = expected_output(&events(&[(30, 1), (2, 7)]), 10, 0, Some(20));
        assert_eq!(beyond.records.len(), 1);
        assert_eq!(beyond.records[0].key, "flush:40");
        assert_eq!(beyond.final_windows, BTreeMap::from([(40, 1)]));
        assert_eq!(beyond.dropped_late, 1);
    }

    /// One hand-made stream (W = 10, D = 2) under L = 0, L = 2 and unbounded lateness.
    #[test]
    fn allowed_lateness_drops_and_purges_as_flink_does() {
        let stream = events(&[
            (1, 1),
            (12, 2),
            (5, 4),
            (14, 8),
            (3, 16),
            (25, 32),
            (18, 64),
        ]);
        let check =
            |lateness: Option<i64>, lines: &[&str], finals: &[(i64, i128)], dropped: u64| {
                let model = expected_output(&stream, 10, 2, lateness);
                let got: Vec<String> = model.records.iter().map(Record::to_json_line).collect();
                assert_eq!(got, lines, "L = {lateness:?}");
                assert_eq!(
                    model.final_windows,
                    BTreeMap::from_iter(finals.iter().copied())
                );
                assert_eq!(model.dropped_late, dropped, "L = {lateness:?}");
            };
        let fire_10 =
            r#"{"key": "1:10", "window_end": 10, "sum": 1, "watermark": 10, "kind": "fire"}"#;
        let late_2 = r#"{"key": "2:10", "window_end": 10, "sum": 5, "watermark": 10, "kind": "late-update"}"#;
        let late_4 = r#"{"key": "4:10", "window_end": 10, "sum": 21, "watermark": 12, "kind": "late-update"}"#;
        let fire_20 =
            r#"{"key": "5:20", "window_end": 20, "sum": 10, "watermark": 23, "kind": "fire"}"#;
        let late_6 = r#"{"key": "6:20", "window_end": 20, "sum": 74, "watermark": 23, "kind": "late-update"}"#;
        let flush_30 =
            r#"{"key": "flush:30", "window_end": 30, "sum": 32, "watermark": 23, "kind": "flush"}"#;
        // L = 0: window 10 is purged as it fires (watermark 10), so events 2 and 4 are
        // dropped; window 20 likewise at watermark 23, so event 6 is.
        check(Some(0), &[fire_10, fire_20, flush_30], &[(30, 32)], 3);
        // L = 2: event 2 (watermark 10 < 10 + 2) is a late update; window 10 is purged at
        // watermark 12 (event 3), so event 4 is dropped; event 6 is (20 + 2 <= 23).
        check(
            Some(2),
            &[fire_10, late_2, fire_20, flush_30],
            &[(30, 32)],
            2,
        );
        check(
            None,
            &[fire_10, late_2, late_4, fire_20, late_6, flush_30],
            &[(10, 21), (20, 74), (30, 32)],
            0,
        );
    }

    #[test]
    fn every_window_end_off_by_w_is_a_mismatch() {
        let stream = events(&[(1, 1), (12, 2), (15, 3), (3, 4), (26, 5)]);
        let model = expected_output(&stream, 10, 5, None);
        let shifted: Vec<Record> = model
            .records
            .iter()
            .map(|r| Record {
                window_end: r.window_end + 10,
                ..r.clone()
            })
            .collect();
        let mismatch = check(&shifted, &model.final_windows, 0, &model).expect("a mismatch");
        assert_eq!(mismatch.at, "record 0");
        assert!(mismatch.engine.contains("\"window_end\": 20"));
        assert_eq!(check(&model.records, &model.final_windows, 0, &model), None);
        let mut finals = model.final_windows.clone();
        finals.insert(40, 0);
        assert_eq!(
            check(&model.records, &finals, 0, &model).map(|m| m.at),
            Some("final windows".to_string())
        );
        assert_eq!(
            check(&model.records, &model.final_windows, 1, &model).map(|m| m.at),
            Some("dropped late events".to_string())
        );
    }

    #[test]
    fn checkpoints_off_the_documented_cadence_are_a_mismatch() {
        let names = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let check = |files: &[&str], events, every, in_place, last| {
            check_checkpoint_files(&names(files), events, every, in_place, last)
                .map(|m| (m.model, m.engine))
        };
        let sink = "sink-append.jsonl";
        let pair = |model: &str, engine: &str| Some((model.to_string(), engine.to_string()));
        // ch04: 30 events, K = 8: the newest is state-24.json; a temp file is not one.
        assert_eq!(check(&[sink, "state-24.json"], 30, 8, false, false), None);
        assert_eq!(
            check(
                &[sink, "state-16.json", "state-24.json", "state-8.json.tmp"],
                30,
                8,
                false,
                false
            ),
            None
        );
        assert_eq!(
            check(&[sink, "state-16.json"], 30, 8, false, false),
            pair("state-24.json", "state-16.json")
        );
        assert_eq!(
            check(&[sink, "state-25.json"], 30, 8, false, false),
            pair("checkpoints at multiples of 8", "state-25.json")
        );
        assert_eq!(
            check(&[sink], 30, 8, false, false),
            pair("state-24.json", "none")
        );
        // Fewer events than K: no checkpoint at all.
        assert_eq!(check(&[sink], 7, 8, false, false), None);
        assert_eq!(
            check(&[sink, "state-7.json"], 7, 8, false, false),
            pair("checkpoints at multiples of 8", "state-7.json")
        );
        // The transactional sink's last checkpoint, at the end of input.
        assert_eq!(check(&["state-30.json"], 30, 8, false, true), None);
        assert_eq!(
            check(&["state-24.json"], 30, 8, false, true),
            pair("state-30.json", "state-24.json")
        );
        // in-place: the one file, there once a checkpoint is due.
        assert_eq!(check(&[sink, "state.json"], 30, 8, true, false), None);
        assert_eq!(
            check(&[sink], 30, 8, true, false),
            pair("state.json", "none")
        );
        assert_eq!(
            check(&[sink, "state.json"], 7, 8, true, false),
            pair("none", "state.json")
        );
    }

    #[test]
    fn a_fault_free_run_that_miscounts_is_a_mismatch() {
        let counts = |events_read, written, skipped| FaultFreeCounts {
            events_read,
            written,
            skipped,
        };
        assert_eq!(check_counts(counts(30, 4, 0), 30, 4), None);
        for wrong in [counts(29, 4, 0), counts(30, 0, 0), counts(30, 4, 4)] {
            let mismatch = check_counts(wrong, 30, 4).expect("a mismatch");
            assert_eq!(mismatch.at, "the fault-free run's counts");
            assert_eq!(mismatch.model, "events_read=30 written=4 skipped=0");
        }
    }
}
