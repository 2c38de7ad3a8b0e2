//! Tumbling event-time windows and the watermark: the operator state and its firing rule.
//!
//! Window end = floor(ts / W) * W + W. Watermark = max_ts - D (Flink's bounded
//! out-of-orderness: its watermark is max_ts - D - 1 and fires at watermark >= end - 1,
//! the same instants). A window fires once the watermark reaches its end; an event for a
//! window that already fired emits a late update with the new sum.
//!
//! Allowed lateness L (event-time units; `None` is unbounded, the chapter's semantics), as
//! Flink's `allowedLateness`. Flink drops an element as late when
//! `window.maxTimestamp() + L <= currentWatermark` and purges a window's state when its
//! cleanup timer at `window.maxTimestamp() + L` fires, i.e. once the watermark is
//! `>= maxTimestamp + L`. With keel's conventions (maxTimestamp = end - 1, Flink's
//! watermark = keel's watermark - 1) both read, in keel's terms:
//!
//! - **purge**: once the watermark reaches `end + L` (`end + L <= watermark`) the window's
//!   state is dropped, right after the event that raised the watermark there has fired what
//!   it fires. A window only purges after it fired (`end <= end + L`).
//! - **drop**: an event whose window has `end + L <= watermark`, the watermark *before* the
//!   event (what Flink's `isWindowLate` reads), is dropped: it changes no window, emits
//!   nothing and counts in `dropped_late`. (Such an event cannot raise max_ts: its ts is
//!   below its end, at most the watermark.) With L = 0 every event for a window that fired
//!   is dropped, and no window is ever created behind the watermark.
//!
//! Everything else is unchanged: an event for a fired window that is not purged emits a
//! late update (Flink's late firing); an event for a window never seen, behind the
//! watermark but within L, creates it and fires it at once. The purge horizon is a function
//! of the watermark alone, so a restored checkpoint (its max_ts and windows) purges and
//! drops exactly as the run that wrote it; `dropped_late` is part of the state and of the
//! checkpoint, so a recovered run ends with the fault-free count.
//!
//! **Invariant**: after every event, every window with `end <= watermark` has fired (and
//! before a flush no other has). The watermark never decreases, so an event can only need
//! to fire its own window (when it creates it behind the watermark, within L) and the
//! windows whose end lies between the watermark before it and the watermark after it:
//! `on_event` looks at nothing else, O(log windows) amortised per event whatever L is.
//! A restored checkpoint must hold it too: recovery refuses one that does not
//! (`unfired_behind_watermark`), since the engine never writes such a state.

use crate::event::Event;
use crate::record::{Record, RecordKind};
pub use crate::windows_map::WindowState;
use crate::windows_map::Windows;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

/// Everything the operator remembers across events: what a checkpoint saves.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorState {
    /// Window end -> state, ordered by end; copies share its chunks (`Windows`).
    pub windows: Windows,
    pub max_ts: Option<i64>,
    /// Events dropped because their window was past its allowed lateness (always 0 with
    /// unbounded lateness).
    #[serde(default)]
    pub dropped_late: u64,
}

impl OperatorState {
    pub fn watermark(&self, out_of_orderness: i64) -> Option<i64> {
        self.max_ts.map(|max_ts| max_ts - out_of_orderness)
    }

    /// Applies an event and returns the records it emits, in emission order. Their keys are
    /// "<key_prefix>:<window end>": the chapter's stable key uses the event index as prefix.
    /// `allowed_lateness`: None is unbounded; see the module header for the rule.
    pub fn on_event(
        &mut self,
        key_prefix: &str,
        event: Event,
        window_size: i64,
        out_of_orderness: i64,
        allowed_lateness: Option<i64>,
    ) -> Vec<Record> {
        self.on_event_noting(
            key_prefix,
            event,
            window_size,
            out_of_orderness,
            allowed_lateness,
            None,
        )
    }

    /// [`OperatorState::on_event`], and adds to `changed` the end of every window the event
    /// created, updated, fired or purged (what an incremental checkpoint must write).
    pub fn on_event_noting(
        &mut self,
        key_prefix: &str,
        event: Event,
        window_size: i64,
        out_of_orderness: i64,
        allowed_lateness: Option<i64>,
        mut changed: Option<&mut BTreeSet<i64>>,
    ) -> Vec<Record> {
        assert!(window_size > 0);
        assert!(out_of_orderness >= 0);
        assert!(allowed_lateness.is_none_or(|l| l >= 0));
        let end = event.ts.div_euclid(window_size) * window_size + window_size;
        let previous_watermark = self.watermark(out_of_orderness);
        if let (Some(lateness), Some(watermark)) = (allowed_lateness, previous_watermark) {
            if end + lateness <= watermark {
                self.dropped_late += 1;
                return Vec::new();
            }
        }
        if let Some(changed) = changed.as_deref_mut() {
            changed.insert(end);
        }
        let (sum, late) = {
            let mut window = self.windows.entry_or_default(end);
            window.sum += i128::from(event.value);
            window.cnt += 1;
            (window.sum, window.fired)
        };
        let max_ts = self.max_ts.map_or(event.ts, |m| m.max(event.ts));
        self.max_ts = Some(max_ts);
        let watermark = max_ts - out_of_orderness;

        let mut records = Vec::new();
        if late && !crate::mutants::active(crate::mutants::Mutant::LateUpdateDropped) {
            records.push(Record {
                key: format!("{key_prefix}:{end}"),
                window_end: end,
                sum,
                watermark,
                kind: RecordKind::LateUpdate,
            });
        }
        // Fire every window with end <= watermark that has not fired, in ascending end
        // order. By the invariant (module header) every window with end <= the previous
        // watermark fired already, but the event's own window if the event created it
        // there: it comes first (its end is below every end above the previous watermark),
        // then the windows above the previous watermark, up to the new one. Each window
        // is in that range for one event only (the watermark never decreases), so a run
        // visits every window here once: O(log windows) amortised per event.
        let above = match previous_watermark {
            Some(previous) => {
                if !late && end <= previous {
                    let mut window = self.windows.get_mut(&end).expect("inserted above");
                    fire(
                        &mut window,
                        end,
                        key_prefix,
                        watermark,
                        RecordKind::Fire,
                        &mut records,
                    );
                    if let Some(changed) = changed.as_deref_mut() {
                        changed.insert(end);
                    }
                }
                (Bound::Excluded(previous), Bound::Included(watermark))
            }
            None => (Bound::Unbounded, Bound::Included(watermark)),
        };
        // Above the previous watermark only a flush fires a window, and no event follows a
        // flush in a run; a fired one is skipped all the same, as the rule says.
        self.windows.update_where(
            above,
            |window| !window.fired,
            |window_end, window| {
                fire(
                    window,
                    window_end,
                    key_prefix,
                    watermark,
                    RecordKind::Fire,
                    &mut records,
                );
                if let Some(changed) = changed.as_deref_mut() {
                    changed.insert(window_end);
                }
            },
        );
        // The invariant: O(log windows) for the newest window at or below the watermark,
        // O(windows) for all of them (debug builds only).
        assert!(self
            .windows
            .last_at_or_below(watermark)
            .is_none_or(|(_, w)| w.fired));
        debug_assert_eq!(self.unfired_behind_watermark(out_of_orderness), None);
        if let Some(lateness) = allowed_lateness {
            // Purge: every window with end + L <= watermark, the oldest first (they fired:
            // end <= end + L <= watermark). Bounded by the number of windows.
            while let Some((&end, window)) = self.windows.first_key_value() {
                if end + lateness > watermark {
                    break;
                }
                debug_assert!(window.fired);
                if let Some(changed) = changed.as_deref_mut() {
                    changed.insert(end);
                }
                self.windows.pop_first();
            }
        }
        records
    }

    /// The first window with end <= watermark that has not fired, if any: `None` in every
    /// state `on_event` and `flush` leave (the invariant in the module header), so in every
    /// checkpoint the engine writes. O(windows): recovery checks a restored state with it.
    pub fn unfired_behind_watermark(&self, out_of_orderness: i64) -> Option<i64> {
        let watermark = self.watermark(out_of_orderness)?;
        self.windows
            .range(..=watermark)
            .find(|(_, w)| !w.fired)
            .map(|(&end, _)| end)
    }

    /// End of input: every window that has not fired is flushed, in ascending end order,
    /// keyed "<key_prefix>:<window end>" (the chapter's key uses "flush").
    pub fn flush(&mut self, key_prefix: &str, out_of_orderness: i64) -> Vec<Record> {
        let Some(watermark) = self.watermark(out_of_orderness) else {
            assert!(self.windows.is_empty());
            return Vec::new();
        };
        let mut records = Vec::new();
        // Copies only the chunks that hold a window to fire (a fork's run ends here).
        self.windows.update_where(
            ..,
            |window| !window.fired,
            |window_end, window| {
                fire(
                    window,
                    window_end,
                    key_prefix,
                    watermark,
                    RecordKind::Flush,
                    &mut records,
                )
            },
        );
        records
    }

    /// Window end -> sum.
    pub fn sums(&self) -> BTreeMap<i64, i128> {
        self.windows.iter().map(|(&end, w)| (end, w.sum)).collect()
    }
}

/// Fires `window` (ending at `window_end`) at `watermark`: marks it and emits its record, of
/// `kind` (a fire, or the flush at the end of input).
fn fire(
    window: &mut WindowState,
    window_end: i64,
    key_prefix: &str,
    watermark: i64,
    kind: RecordKind,
    records: &mut Vec<Record>,
) {
    window.fired = true;
    records.push(Record {
        key: format!("{key_prefix}:{window_end}"),
        window_end,
        sum: window.sum,
        watermark,
        kind,
    });
}

/// Formats window sums as the chapter prints them: `{"10": 55, "20": 155, "30": 255}`.
pub fn format_windows(sums: &BTreeMap<i64, i128>) -> String {
    let body: Vec<String> = sums
        .iter()
        .map(|(end, sum)| format!("\"{end}\": {sum}"))
        .collect();
    format!("{{{}}}", body.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(ts_values: &[(i64, i64)], window: i64, ooo: i64) -> (Vec<String>, OperatorState) {
        let mut state = OperatorState::default();
        let mut out = Vec::new();
        for (i, &(ts, value)) in ts_values.iter().enumerate() {
            out.extend(state.on_event(&i.to_string(), Event { ts, value }, window, ooo, None));
        }
        out.extend(state.flush("flush", ooo));
        (out.iter().map(|r| r.to_json_line()).collect(), state)
    }

    #[test]
    fn fires_at_watermark_late_updates_and_flushes() {
        let (records, state) = run(&[(1, 1), (12, 2), (15, 3), (3, 4), (26, 5)], 10, 5);
        assert_eq!(
            records,
            vec![
                r#"{"key": "2:10", "window_end": 10, "sum": 1, "watermark": 10, "kind": "fire"}"#,
                r#"{"key": "3:10", "window_end": 10, "sum": 5, "watermark": 10, "kind": "late-update"}"#,
                r#"{"key": "4:20", "window_end": 20, "sum": 5, "watermark": 21, "kind": "fire"}"#,
                r#"{"key": "flush:30", "window_end": 30, "sum": 5, "watermark": 21, "kind": "flush"}"#,
            ]
        );
        assert_eq!(
            format_windows(&state.sums()),
            r#"{"10": 5, "20": 5, "30": 5}"#
        );
    }

    #[test]
    fn negative_timestamps_floor_to_their_window() {
        let (records, _) = run(&[(-1, 7)], 10, 0);
        assert_eq!(
            records,
            vec![
                r#"{"key": "flush:0", "window_end": 0, "sum": 7, "watermark": -1, "kind": "flush"}"#
            ]
        );
    }

    #[test]
    fn the_extreme_timestamps_and_knobs_do_not_overflow() {
        use crate::event::{EVENT_INT_MAX as MAX, EVENT_INT_MIN as MIN};
        // Debug builds (tests) panic on overflow: every combination of the extremes runs.
        for (window, ooo) in [(1, 0), (1, MAX), (10, 5), (MAX, 0), (MAX, MAX)] {
            let events = [(MIN, MAX), (MAX, MIN), (MIN, MIN), (0, MAX), (MAX, MAX)];
            let (records, state) = run(&events, window, ooo);
            assert!(!records.is_empty());
            assert_eq!(state.max_ts, Some(MAX));
            let (_, low) = run(&[(MIN, MIN)], window, ooo);
            assert_eq!(low.watermark(ooo), Some(MIN - ooo));
        }
        let (records, _) = run(&[(MAX, MAX), (MIN, MIN)], MAX, MAX);
        assert_eq!(
            records,
            vec![
                r#"{"key": "1:0", "window_end": 0, "sum": -9007199254740991, "watermark": 0, "kind": "fire"}"#,
                r#"{"key": "flush:18014398509481982", "window_end": 18014398509481982, "sum": 9007199254740991, "watermark": 0, "kind": "flush"}"#,
            ]
        );
    }

    /// The limits `JSON_SAFE_INT_MAX` documents for plain i64, with W = 10 and D = 5.
    #[test]
    fn where_plain_i64_would_overflow() {
        let (w, d) = (10_i64, 5_i64);
        let end = |ts: i64| ts.div_euclid(w).checked_mul(w)?.checked_add(w);
        assert_eq!(
            end(9_223_372_036_854_775_799),
            Some(9_223_372_036_854_775_800)
        );
        assert_eq!(end(9_223_372_036_854_775_800), None);
        assert_eq!(
            end(-9_223_372_036_854_775_800),
            Some(-9_223_372_036_854_775_790)
        );
        assert_eq!(end(-9_223_372_036_854_775_801), None);
        assert_eq!(
            (-9_223_372_036_854_775_803_i64).checked_sub(d),
            Some(i64::MIN)
        );
        assert_eq!((-9_223_372_036_854_775_804_i64).checked_sub(d), None);
    }

    /// Every state `on_event` leaves has every window with end <= watermark fired, a late
    /// event's fresh window behind the watermark included; a state without it is found.
    #[test]
    fn every_window_behind_the_watermark_has_fired() {
        let mut state = OperatorState::default();
        let events = [(1, 1), (12, 2), (27, 3), (3, 4), (45, 5), (-20, 6)];
        let mut emitted = Vec::new();
        for (i, &(ts, value)) in events.iter().enumerate() {
            let records = state.on_event(&i.to_string(), Event { ts, value }, 10, 5, None);
            assert_eq!(state.unfired_behind_watermark(5), None);
            emitted.extend(records.iter().map(|r| (r.window_end, r.sum, r.watermark)));
        }
        // (end, sum, watermark): fires, the late update of window 10, and window -10, which
        // event -20 creates behind the watermark (40) and fires at once.
        assert_eq!(
            emitted,
            vec![
                (10, 1, 22),
                (20, 2, 22),
                (10, 5, 22),
                (30, 3, 40),
                (-10, 6, 40)
            ]
        );
        state.windows.get_mut(&30).unwrap().fired = false;
        assert_eq!(state.unfired_behind_watermark(5), Some(30));
        assert_eq!(OperatorState::default().unfired_behind_watermark(5), None);
    }

    #[test]
    fn no_events_no_records() {
        let (records, state) = run(&[], 10, 5);
        assert!(records.is_empty());
        assert_eq!(format_windows(&state.sums()), "{}");
    }
}
