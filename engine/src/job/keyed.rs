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
use std::collections::{BTreeMap, BTreeSet};

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
    /// With a state TTL: when each key's state was last accessed (simulated ms of
    /// processing time, as Flink's `StateTtlConfig`). Empty without one, so a snapshot is
    /// what it was.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub last_access_ms: BTreeMap<String, u64>,
    /// With a state TTL: the keys whose state expired at least once.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub expired_keys: BTreeSet<String>,
    /// What the TTL did since the caller last took these (never in a snapshot).
    #[serde(skip)]
    pub ttl_counts: TtlCounts,
}

/// What a state TTL did: the loss it caused, counted so that a report can show it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TtlCounts {
    /// Times a key's state expired (all its windows dropped).
    pub expirations: u64,
    /// Windows dropped with them.
    pub dropped_windows: u64,
    /// Of those, windows not fired yet: their partial sums are lost.
    pub dropped_unfired: u64,
    /// Events for a window behind the watermark of a key whose state had expired: a late
    /// event that found no state, so its record starts over from it alone.
    pub late_after_expiry: u64,
}

impl std::ops::AddAssign for TtlCounts {
    fn add_assign(&mut self, other: TtlCounts) {
        self.expirations += other.expirations;
        self.dropped_windows += other.dropped_windows;
        self.dropped_unfired += other.dropped_unfired;
        self.late_after_expiry += other.late_after_expiry;
    }
}

impl KeyedWindows {
    pub fn new(inputs: usize) -> KeyedWindows {
        KeyedWindows {
            windows: BTreeMap::new(),
            input_watermarks: vec![None; inputs],
            ended: vec![false; inputs],
            flushed: false,
            last_access_ms: BTreeMap::new(),
            expired_keys: BTreeSet::new(),
            ttl_counts: TtlCounts::default(),
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

    /// Applies one event, taken at `now_ms`, and returns what it emits. With a state TTL
    /// (`ttl_ms`), a key not accessed for longer than it has its state dropped first.
    pub fn on_event(
        &mut self,
        key: &str,
        ts: i64,
        value: i64,
        window_size: i64,
        now_ms: u64,
        ttl_ms: Option<u64>,
    ) -> Vec<JobRecord> {
        let end = ts.div_euclid(window_size) * window_size + window_size;
        let watermark = self.watermark();
        if let Some(ttl_ms) = ttl_ms {
            let idle = self
                .last_access_ms
                .get(key)
                .is_some_and(|last| now_ms.saturating_sub(*last) > ttl_ms);
            if idle {
                self.expire(key);
            }
            self.last_access_ms.insert(key.to_string(), now_ms);
            let no_state = !self.windows.contains_key(&(key.to_string(), end));
            if no_state && self.expired_keys.contains(key) && watermark.is_some_and(|w| end <= w) {
                self.ttl_counts.late_after_expiry += 1;
            }
        }
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

    /// Drops the state of every key not accessed for longer than `ttl_ms` at `now_ms` (the
    /// TTL's cleanup, which keeps the state of a stream of ever new keys bounded).
    pub fn expire_idle(&mut self, now_ms: u64, ttl_ms: u64) {
        let idle: Vec<String> = self
            .last_access_ms
            .iter()
            .filter(|(_, last)| now_ms.saturating_sub(**last) > ttl_ms)
            .map(|(key, _)| key.clone())
            .collect();
        for key in idle {
            self.expire(&key);
            self.last_access_ms.remove(&key);
        }
    }

    /// Drops every window of `key`, counting what was lost.
    fn expire(&mut self, key: &str) {
        let ends: Vec<i64> = self
            .windows
            .range((key.to_string(), i64::MIN)..=(key.to_string(), i64::MAX))
            .map(|((_, end), _)| *end)
            .collect();
        for end in &ends {
            let cell = self
                .windows
                .remove(&(key.to_string(), *end))
                .expect("listed");
            self.ttl_counts.dropped_windows += 1;
            self.ttl_counts.dropped_unfired += u64::from(!cell.fired);
        }
        self.ttl_counts.expirations += 1;
        self.expired_keys.insert(key.to_string());
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
        assert!(op.on_event("a", 3, 1, 10, 0, None).is_empty());
        assert!(op.on_event("b", 12, 2, 10, 0, None).is_empty());
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
        let late = op.on_event("a", 5, 4, 10, 0, None);
        assert_eq!(late[0].kind, "late-update");
        assert_eq!(late[0].sum, 5);
        assert_eq!(late[0].seq, 1);
    }

    #[test]
    fn the_end_of_every_input_flushes() {
        let mut op = KeyedWindows::new(2);
        op.on_event("a", 3, 1, 10, 0, None);
        assert!(op.on_end(0).is_empty());
        let flushed = op.on_end(1);
        assert_eq!(flushed.len(), 1);
        assert_eq!(flushed[0].kind, "flush");
        assert!(op.on_end(1).is_empty(), "flushes once");
    }

    #[test]
    fn an_idle_key_expires_and_a_late_event_for_it_is_counted() {
        let mut op = KeyedWindows::new(1);
        let ttl = Some(100);
        op.on_event("a", 3, 1, 10, 0, ttl);
        op.on_event("a", 13, 1, 10, 50, ttl);
        let fired = op.on_watermark(0, 20);
        assert_eq!(fired.len(), 2);
        // 151 ms after its last access, key a's state is gone: window 10's late event
        // starts over (a fire of its own value, seq 0 again) and is counted.
        let late = op.on_event("a", 5, 4, 10, 151, ttl);
        assert_eq!(late.len(), 1);
        assert_eq!(
            (late[0].sum, late[0].seq, late[0].kind.as_str()),
            (4, 0, "fire")
        );
        assert_eq!(
            op.ttl_counts,
            TtlCounts {
                expirations: 1,
                dropped_windows: 2,
                dropped_unfired: 0,
                late_after_expiry: 1,
            }
        );
        // Cleanup of idle keys bounds the state.
        op.expire_idle(400, 100);
        assert!(op.windows.is_empty());
        assert!(op.last_access_ms.is_empty());
        // Without a TTL nothing is tracked: a snapshot is what it was.
        let mut plain = KeyedWindows::new(1);
        plain.on_event("a", 3, 1, 10, 0, None);
        assert!(plain.last_access_ms.is_empty());
        assert_eq!(
            serde_json::to_string(&plain).unwrap(),
            r#"{"windows":[[["a",10],{"sum":1,"fired":false,"emitted":0}]],"input_watermarks":[null],"ended":[false],"flushed":false}"#
        );
    }
}
