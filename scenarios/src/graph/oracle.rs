//! The oracle of a parallel job: what its sink shows, judged against an independent model.
//!
//! The model is order-free: with unbounded lateness a window's last record carries the sum
//! of every event for it, whatever the schedule, so the expected output is, per (key,
//! window end), the sum of the values of its events. The properties, each defined once here:
//!
//! - `recovers`: the run completed (recovery neither failed nor looped, no deadlock).
//! - `no-loss`: every (key, window) of the model has a record in the sink.
//! - `no-duplicates`: no record identity (key, window end, seq) is in the sink twice.
//! - `no-wrong`: every line is a whole record of a (key, window) of the model.
//! - `state-exactly-once`: every window's last record (its highest seq) carries the model's
//!   sum: each input event affected the final per-(key, window) sums exactly once. An event
//!   replayed into state (at-least-once checkpoints) makes a sum too big.
//! - `exactly-once` = all of the above; `at-least-once` = `recovers`, `no-loss`, `no-wrong`.

use crate::graph::{GraphOutcome, GraphRun};
use keel_engine::job::sink::visible_lines;
use keel_engine::job::{JobRecord, JobSinkKind, KeyedEvent};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

/// One property of a parallel job's run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum JobProperty {
    Recovers,
    NoLoss,
    NoDuplicates,
    NoWrong,
    StateExactlyOnce,
}

impl JobProperty {
    pub const ALL: [JobProperty; 5] = [
        JobProperty::Recovers,
        JobProperty::NoLoss,
        JobProperty::NoDuplicates,
        JobProperty::NoWrong,
        JobProperty::StateExactlyOnce,
    ];
    pub const EXACTLY_ONCE: [JobProperty; 5] = JobProperty::ALL;
    pub const AT_LEAST_ONCE: [JobProperty; 3] = [
        JobProperty::Recovers,
        JobProperty::NoLoss,
        JobProperty::NoWrong,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            JobProperty::Recovers => "recovers",
            JobProperty::NoLoss => "no-loss",
            JobProperty::NoDuplicates => "no-duplicates",
            JobProperty::NoWrong => "no-wrong",
            JobProperty::StateExactlyOnce => "state-exactly-once",
        }
    }

    /// What `sink` promises: exactly-once but for the append sink (at-least-once).
    pub fn promised_by(sink: JobSinkKind) -> &'static [JobProperty] {
        match sink {
            JobSinkKind::Append => &JobProperty::AT_LEAST_ONCE,
            JobSinkKind::Idempotent | JobSinkKind::Transactional => &JobProperty::EXACTLY_ONCE,
        }
    }

    /// Parses a property name or a shorthand (`exactly-once`, `at-least-once`).
    pub fn parse_list(text: &str) -> Result<Vec<JobProperty>, String> {
        let mut properties = Vec::new();
        for name in text.split(',').map(str::trim) {
            match name {
                "exactly-once" => properties.extend(JobProperty::EXACTLY_ONCE),
                "at-least-once" => properties.extend(JobProperty::AT_LEAST_ONCE),
                _ => properties.push(
                    *JobProperty::ALL.iter().find(|p| p.name() == name).ok_or_else(|| {
                        format!(
                            "unknown property {name:?}: expected recovers, no-loss, no-duplicates, no-wrong, state-exactly-once, exactly-once or at-least-once"
                        )
                    })?,
                ),
            }
        }
        properties.sort();
        properties.dedup();
        Ok(properties)
    }
}

impl fmt::Display for JobProperty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The expected output: per (key, window end), the sum of its events' values.
pub fn model(events: &[KeyedEvent], window_size: i64) -> BTreeMap<(String, i64), i128> {
    let mut windows = BTreeMap::new();
    for event in events {
        let end = event.ts.div_euclid(window_size) * window_size + window_size;
        *windows.entry((event.key.clone(), end)).or_insert(0i128) += i128::from(event.value);
    }
    windows
}

/// What the oracle found in one run's sink.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct JobVerdict {
    pub completed: bool,
    pub records: u64,
    /// Windows of the model with no record.
    pub lost: u64,
    /// Records seen more than once (by identity), counted beyond the first.
    pub duplicates: u64,
    /// Lines that are not whole records, or records of no window of the model.
    pub wrong: u64,
    /// Windows whose last record's sum is above the model's: events counted twice in state.
    pub over_counted: u64,
    /// Windows whose last record's sum is below the model's.
    pub under_counted: u64,
}

impl JobVerdict {
    pub fn holds(&self, property: JobProperty) -> bool {
        match property {
            JobProperty::Recovers => self.completed,
            JobProperty::NoLoss => self.lost == 0,
            JobProperty::NoDuplicates => self.duplicates == 0,
            JobProperty::NoWrong => self.wrong == 0,
            JobProperty::StateExactlyOnce => {
                self.over_counted == 0 && self.under_counted == 0 && self.lost == 0
            }
        }
    }

    /// The properties of `expected` that broke.
    pub fn broken(&self, expected: &[JobProperty]) -> Vec<JobProperty> {
        expected
            .iter()
            .copied()
            .filter(|p| !self.holds(*p))
            .collect()
    }
}

/// The records a consumer sees in `run`'s sink, and the lines that are none.
pub fn sink_records(run: &GraphRun, sink: JobSinkKind) -> (Vec<JobRecord>, u64) {
    let mut records = Vec::new();
    let mut corrupt = 0;
    for line in visible_lines(&run.world.env().disk, sink) {
        match JobRecord::parse_line(&line) {
            Some(record) => records.push(record),
            None => corrupt += 1,
        }
    }
    (records, corrupt)
}

/// Judges `run` against the model of `events`.
pub fn judge(
    run: &GraphRun,
    events: &[KeyedEvent],
    window_size: i64,
    sink: JobSinkKind,
) -> JobVerdict {
    let expected = model(events, window_size);
    let (records, corrupt) = sink_records(run, sink);
    judge_records(
        &records,
        corrupt,
        &expected,
        run.outcome == GraphOutcome::Completed,
    )
}

/// [`judge`] of a run of `spec`: its events, window size and sink.
pub fn judge_spec(spec: &crate::graph::GraphSpec, run: &GraphRun) -> JobVerdict {
    judge(run, &spec.events, spec.config.window_size, spec.config.sink)
}

/// Judges the records a consumer saw against `expected`.
pub fn judge_records(
    records: &[JobRecord],
    corrupt: u64,
    expected: &BTreeMap<(String, i64), i128>,
    completed: bool,
) -> JobVerdict {
    let mut verdict = JobVerdict {
        completed,
        records: records.len() as u64,
        wrong: corrupt,
        ..JobVerdict::default()
    };
    let mut seen: BTreeMap<(String, i64, u32), u64> = BTreeMap::new();
    // (key, window) -> (highest seq, its sum)
    let mut last: BTreeMap<(String, i64), (u32, i128)> = BTreeMap::new();
    for record in records {
        *seen.entry(record.identity()).or_insert(0) += 1;
        if !expected.contains_key(&(record.key.clone(), record.window_end)) {
            verdict.wrong += 1;
            continue;
        }
        let slot = last
            .entry((record.key.clone(), record.window_end))
            .or_insert((record.seq, record.sum));
        if record.seq >= slot.0 {
            *slot = (record.seq, record.sum);
        }
    }
    verdict.duplicates = seen.values().map(|n| n - 1).sum();
    for (window, sum) in expected {
        match last.get(window) {
            None => verdict.lost += 1,
            Some((_, seen_sum)) if seen_sum > sum => verdict.over_counted += 1,
            Some((_, seen_sum)) if seen_sum < sum => verdict.under_counted += 1,
            Some(_) => {}
        }
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(key: &str, end: i64, sum: i128, seq: u32) -> JobRecord {
        JobRecord {
            key: key.to_string(),
            window_end: end,
            sum,
            seq,
            kind: "fire".to_string(),
        }
    }

    fn check(records: &[JobRecord], expected: &[(&str, i64, i128)], want: JobVerdict) {
        let expected: BTreeMap<(String, i64), i128> = expected
            .iter()
            .map(|(k, e, s)| ((k.to_string(), *e), *s))
            .collect();
        assert_eq!(judge_records(records, 0, &expected, true), want);
    }

    #[test]
    fn each_property_breaks_on_its_own_fault() {
        let base = JobVerdict {
            completed: true,
            ..JobVerdict::default()
        };
        check(
            &[record("a", 10, 3, 0)],
            &[("a", 10, 3)],
            JobVerdict {
                records: 1,
                ..base.clone()
            },
        );
        check(
            &[],
            &[("a", 10, 3)],
            JobVerdict {
                lost: 1,
                ..base.clone()
            },
        );
        check(
            &[record("a", 10, 3, 0), record("a", 10, 3, 0)],
            &[("a", 10, 3)],
            JobVerdict {
                records: 2,
                duplicates: 1,
                ..base.clone()
            },
        );
        check(
            &[record("a", 10, 3, 0), record("a", 10, 5, 1)],
            &[("a", 10, 3)],
            JobVerdict {
                records: 2,
                over_counted: 1,
                ..base.clone()
            },
        );
        check(
            &[record("a", 10, 1, 0)],
            &[("a", 10, 3)],
            JobVerdict {
                records: 1,
                under_counted: 1,
                ..base.clone()
            },
        );
        check(
            &[record("b", 10, 1, 0)],
            &[("a", 10, 3)],
            JobVerdict {
                records: 1,
                wrong: 1,
                lost: 1,
                ..base
            },
        );
    }
}
