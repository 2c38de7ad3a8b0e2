//! A window operator's keyed state: per (key, window) sums, per-input watermarks, firing.
//!
//! Window end = floor(ts / W) * W + W, as in the one-task engine. The operator's watermark
//! is the minimum of its inputs' watermarks (none until every input has sent one), as
//! Flink's; an input that ended counts as +infinity. A window fires once the watermark
//! reaches its end (windows firing together go in (end, key) order, so each key's in end
//! order); an event for a window that already fired emits a late update with the new sum;
//! an event for a window behind the watermark that never fired fires it at once. When every
//! input has ended, every window not yet fired is flushed. Lateness is unbounded, so a
//! window's last record always carries the sum of every event for it.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One record a window operator emits, as the sink writes it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct JobRecord {
    pub key: String,
    pub window_end: i64,
    pub sum: i128,
    /// The how-many-th record of this (key, window): 0 for its first, 1 for the next late
    /// update, ... The identity (key, window_end, seq) is stable across a replay that
    /// restores the operator's state.
    pub seq: u32,
    /// "fire", "late-update" or "flush".
    pub kind: String,
}

impl JobRecord {
    /// The record as one JSON line without the newline.
    pub fn to_json_line(&self) -> String {
        let key = serde_json::to_string(&self.key).expect("a string serializes");
        format!(
            "{{\"key\": {key}, \"window_end\": {}, \"sum\": {}, \"seq\": {}, \"kind\": \"{}\"}}",
            self.window_end, self.sum, self.seq, self.kind
        )
    }

    /// Parses one sink line; `None` for a line that is not a whole record.
    pub fn parse_line(line: &str) -> Option<JobRecord> {
        serde_json::from_str(line).ok()
    }

    /// What identifies the record across a replay.
    pub fn identity(&self) -> (String, i64, u32) {
        (self.key.clone(), self.window_end, self.seq)
    }
}

/// One (key, window)'s state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WindowCell {
    pub sum: i128,
    pub fired: bool,
    /// Records emitted for it so far.
    pub emitted: u32,
}

/// A window operator's state: what its snapshot holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KeyedWindows {
    /// (key, window end) -> cell (in JSON: a list of entries; JSON keys are strings).
    #[serde(with = "entries")]
    pub windows: BTreeMap<(String, i64), WindowCell>,
    /// Each input's watermark (None before its first).
    pub input_watermarks: Vec<Option<i64>>,
    /// Each input's end of input.
    pub ended: Vec<bool>,
    /// Whether every window was flushed at the end of every input.
    pub flushed: bool,
}

impl KeyedWindows {
    pub fn new(inputs: usize) -> KeyedWindows {
        KeyedWindows {
            windows: BTreeMap::new(),
            input_watermarks: vec![None; inputs],
            ended: vec![false; inputs],
            flushed: false,
        }
    }

    /// The operator's watermark: the minimum over inputs, an ended input not counting; None
    /// while an input that has not ended has sent none.
    pub fn watermark(&self) -> Option<i64> {
        let mut min: Option<i64> = None;
        for (watermark, ended) in self.input_watermarks.iter().zip(&self.ended) {
            if *ended {
                continue;
            }
            let w = (*watermark)?;
            min = Some(min.map_or(w, |m: i64| m.min(w)));
        }
        min
    }

    /// Applies one event and returns what it emits.
    pub fn on_event(&mut self, key: &str, ts: i64, value: i64, window_size: i64) -> Vec<JobRecord> {
        let end = ts.div_euclid(window_size) * window_size + window_size;
        let watermark = self.watermark();
        let cell = self.windows.entry((key.to_string(), end)).or_default();
        cell.sum += i128::from(value);
        if cell.fired {
            return vec![emit(key, end, cell, "late-update")];
        }
        if watermark.is_some_and(|w| end <= w) {
            cell.fired = true;
            return vec![emit(key, end, cell, "fire")];
        }
        Vec::new()
    }

    /// Input `input`'s watermark moved to `watermark`: fires what the operator's passed.
    pub fn on_watermark(&mut self, input: usize, watermark: i64) -> Vec<JobRecord> {
        let slot = &mut self.input_watermarks[input];
        *slot = Some(slot.map_or(watermark, |w| w.max(watermark)));
        self.fire_behind_watermark()
    }

    /// Input `input` ended: its watermark no longer holds the others back; once every input
    /// ended, every window not fired yet is flushed.
    pub fn on_end(&mut self, input: usize) -> Vec<JobRecord> {
        self.ended[input] = true;
        if !self.ended.iter().all(|e| *e) {
            return self.fire_behind_watermark();
        }
        if self.flushed {
            return Vec::new();
        }
        self.flushed = true;
        let mut unfired: Vec<(i64, String)> = self
            .windows
            .iter()
            .filter(|(_, c)| !c.fired)
            .map(|((k, e), _)| (*e, k.clone()))
            .collect();
        unfired.sort();
        unfired
            .into_iter()
            .map(|(end, key)| {
                let cell = self.windows.get_mut(&(key.clone(), end)).expect("listed");
                cell.fired = true;
                emit(&key, end, cell, "flush")
            })
            .collect()
    }

    fn fire_behind_watermark(&mut self) -> Vec<JobRecord> {
        let Some(watermark) = self.watermark() else {
            return Vec::new();
        };
        let mut due: Vec<(i64, String)> = self
            .windows
            .iter()
            .filter(|((_, end), c)| !c.fired && *end <= watermark)
            .map(|((k, e), _)| (*e, k.clone()))
            .collect();
        due.sort();
        due.into_iter()
            .map(|(end, key)| {
                let cell = self.windows.get_mut(&(key.clone(), end)).expect("listed");
                cell.fired = true;
                emit(&key, end, cell, "fire")
            })
            .collect()
    }
}

/// A map with tuple keys as a JSON list of `[key, value]` entries.
mod entries {
    use super::WindowCell;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::BTreeMap;

    type Map = BTreeMap<(String, i64), WindowCell>;

    pub fn serialize<S: Serializer>(map: &Map, serializer: S) -> Result<S::Ok, S::Error> {
        let entries: Vec<(&(String, i64), &WindowCell)> = map.iter().collect();
        entries.serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Map, D::Error> {
        let entries: Vec<((String, i64), WindowCell)> = Vec::deserialize(deserializer)?;
        Ok(entries.into_iter().collect())
    }
}

fn emit(key: &str, end: i64, cell: &mut WindowCell, kind: &str) -> JobRecord {
    let record = JobRecord {
        key: key.to_string(),
        window_end: end,
        sum: cell.sum,
        seq: cell.emitted,
        kind: kind.to_string(),
    };
    cell.emitted += 1;
    record
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watermark_is_the_minimum_of_the_inputs_and_fires_in_end_order() {
        let mut op = KeyedWindows::new(2);
        assert!(op.on_event("a", 3, 1, 10).is_empty());
        assert!(op.on_event("b", 12, 2, 10).is_empty());
        assert!(
            op.on_watermark(0, 30).is_empty(),
            "input 1 has no watermark yet"
        );
        let fired = op.on_watermark(1, 20);
        let ends: Vec<(String, i64, i128)> = fired
            .iter()
            .map(|r| (r.key.clone(), r.window_end, r.sum))
            .collect();
        assert_eq!(ends, vec![("a".into(), 10, 1), ("b".into(), 20, 2)]);
        let late = op.on_event("a", 5, 4, 10);
        assert_eq!(late[0].kind, "late-update");
        assert_eq!(late[0].sum, 5);
        assert_eq!(late[0].seq, 1);
    }

    #[test]
    fn the_end_of_every_input_flushes() {
        let mut op = KeyedWindows::new(2);
        op.on_event("a", 3, 1, 10);
        assert!(op.on_end(0).is_empty());
        let flushed = op.on_end(1);
        assert_eq!(flushed.len(), 1);
        assert_eq!(flushed[0].kind, "flush");
        assert!(op.on_end(1).is_empty(), "flushes once");
    }
}
