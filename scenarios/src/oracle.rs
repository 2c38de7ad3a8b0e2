//! The oracle: compares a faulty run with the fault-free run of the same scenario, record by
//! record, by each record's logical identity, and names the properties the run kept.
//!
//! A record's identity is (window end, kind, trigger): the event that emitted it, or the end
//! of input for a flush. It is read from the record, not from the sink's key, which a sink
//! may choose badly (a processing-time key makes every replay look new).
//!
//! Properties, checked after every run:
//! - "no duplicates": no identity reached the sink twice;
//! - "no loss": every record of the fault-free run reached the sink;
//! - "no wrong result": every record has the fault-free run's sum for its identity;
//! - "no corruption": every sink line is a whole record;
//! - "recovered": the run completed (recovery neither failed nor looped), with the
//!   fault-free run's final windows;
//! - "exactly-once": all of the above.
//!
//! "Rolled back" (recovery restored an older checkpoint than the newest one the engine had
//! committed) is reported beside them: harmless for some sinks, fatal for transactional ones.

use crate::runner::{run, Outcome, RunResult, RunSpec, View};
use keel_engine::{EngineConfig, Record, RecordKind};
use keel_engine::{KeyScheme, SinkKind};
use keel_sim::FaultPlan;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

/// What emitted a record.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Trigger {
    Event(u64),
    EndOfInput,
    /// A key this oracle cannot read an event from.
    Unknown(String),
}

/// A record's logical identity.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Identity {
    pub window_end: i64,
    pub kind: RecordKind,
    pub trigger: Trigger,
}

impl Identity {
    pub fn of(record: &Record) -> Identity {
        let prefix = record.key.split(':').next().unwrap_or("");
        let trigger = match (record.kind, prefix.parse::<u64>()) {
            (RecordKind::Flush, _) => Trigger::EndOfInput,
            (_, Ok(index)) => Trigger::Event(index),
            (_, Err(_)) => Trigger::Unknown(prefix.to_string()),
        };
        Identity {
            window_end: record.window_end,
            kind: record.kind,
            trigger,
        }
    }
}

/// What the fault-free run delivered: the reference a faulty run is judged against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expected {
    pub sums: BTreeMap<Identity, i128>,
    /// A record's content -> its identity, to identify records whose key names no event.
    by_content: BTreeMap<(i64, RecordKind, i64, i128), Identity>,
    pub final_windows: BTreeMap<i64, i128>,
}

impl Expected {
    /// What the engine emits for `spec`'s input and knobs when nothing fails: the records of
    /// its fault-free run with the chapter's stable keys on the plain append sink (what any
    /// sink should end up holding, whatever its own keys and mechanics).
    pub fn for_spec(spec: &RunSpec) -> Expected {
        let reference = run(&RunSpec {
            config: EngineConfig {
                sink: SinkKind::Append,
                key: KeyScheme::EventIndex,
                ..spec.config
            },
            plan: FaultPlan::none(),
            ..spec.clone()
        });
        assert_eq!(
            reference.outcome,
            Outcome::Completed,
            "a fault-free append run completes"
        );
        let contents = reference.sink_contents(&reference_config(&spec.config));
        assert_eq!(
            contents.corrupt_lines, 0,
            "a fault-free run writes whole records"
        );
        let mut sums = BTreeMap::new();
        let mut by_content = BTreeMap::new();
        for record in &contents.records {
            let identity = Identity::of(record);
            by_content.insert(
                (record.window_end, record.kind, record.watermark, record.sum),
                identity.clone(),
            );
            let previous = sums.insert(identity, record.sum);
            assert!(
                previous.is_none(),
                "a fault-free run emits each identity once"
            );
        }
        Expected {
            sums,
            by_content,
            final_windows: reference.final_state.sums(),
        }
    }

    /// A record's identity: from its key when the key names the event, else by matching its
    /// content against the fault-free run's records.
    pub fn identity_of(&self, record: &Record) -> Identity {
        let identity = Identity::of(record);
        if !matches!(identity.trigger, Trigger::Unknown(_)) {
            return identity;
        }
        self.by_content
            .get(&(record.window_end, record.kind, record.watermark, record.sum))
            .cloned()
            .unwrap_or(identity)
    }
}

fn reference_config(config: &EngineConfig) -> EngineConfig {
    EngineConfig {
        sink: SinkKind::Append,
        key: KeyScheme::EventIndex,
        ..*config
    }
}

/// How recovery went.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Recovery {
    /// No restart was needed, or every restart recovered.
    Ok,
    /// Recovery gave up (e.g. it trusted a torn checkpoint).
    Failed,
    /// The engine kept restarting.
    Looped,
}

impl fmt::Display for Recovery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Recovery::Ok => "ok",
            Recovery::Failed => "failed",
            Recovery::Looped => "looped",
        })
    }
}

/// The oracle's verdict on one run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// Extra copies of records.
    pub duplicates: u64,
    /// Records of the fault-free run that never reached the sink.
    pub lost: u64,
    /// Records whose sum differs from the fault-free run's (or that it never emitted).
    pub wrong: u64,
    /// Unreadable sink lines.
    pub corrupt: u64,
    /// Restarts that restored an older checkpoint than the newest one committed.
    pub rolled_back: u64,
    pub final_windows_match: bool,
    pub recovery: Recovery,
    pub restarts: u64,
    pub exactly_once: bool,
    /// Transactional sink: records a read_uncommitted consumer saw that never committed.
    pub dirty_reads: u64,
    /// Transactional sink: the longest wait from a record's send to its commit (simulated ms).
    pub visibility_delay_ms_max: u64,
}

impl Verdict {
    pub fn no_loss(&self) -> bool {
        self.lost == 0 && self.recovery == Recovery::Ok
    }

    /// A short account: "exactly-once", or what went wrong ("duplicates=1 rolled_back=1").
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        for (name, value) in [
            ("duplicates", self.duplicates),
            ("lost", self.lost),
            ("wrong", self.wrong),
            ("corrupt", self.corrupt),
            ("rolled_back", self.rolled_back),
        ] {
            if value > 0 {
                parts.push(format!("{name}={value}"));
            }
        }
        if self.recovery != Recovery::Ok {
            parts.push(format!("recovery={}", self.recovery));
        } else if !self.final_windows_match {
            parts.push("final_windows_differ".to_string());
        }
        if parts.is_empty() {
            "exactly-once".to_string()
        } else {
            parts.join(" ")
        }
    }
}

/// Judges `result` against the fault-free run.
pub fn judge(expected: &Expected, result: &RunResult, config: &EngineConfig) -> Verdict {
    judge_view(expected, result, config, View::ReadCommitted)
}

/// Judges what a consumer of `view` sees.
pub fn judge_view(
    expected: &Expected,
    result: &RunResult,
    config: &EngineConfig,
    view: View,
) -> Verdict {
    let contents = result.view_contents(config, view);
    let mut copies: BTreeMap<Identity, Vec<i128>> = BTreeMap::new();
    for record in &contents.records {
        copies
            .entry(expected.identity_of(record))
            .or_default()
            .push(record.sum);
    }
    let mut duplicates = 0;
    let mut wrong = 0;
    for (identity, sums) in &copies {
        duplicates += sums.len() as u64 - 1;
        wrong += match expected.sums.get(identity) {
            Some(want) => sums.iter().filter(|sum| *sum != want).count() as u64,
            None => sums.len() as u64,
        };
    }
    let lost = expected
        .sums
        .keys()
        .filter(|identity| !copies.contains_key(*identity))
        .count() as u64;

    let mut rolled_back = 0;
    let mut newest_committed = 0;
    for (i, incarnation) in result.incarnations.iter().enumerate() {
        let stats = &incarnation.stats;
        if i > 0 && stats.resume_decided && stats.resume_from_index < newest_committed {
            rolled_back += 1;
        }
        let committed = stats.last_committed.as_ref().map_or(0, |c| c.index);
        newest_committed = newest_committed.max(committed).max(stats.resume_from_index);
    }
    let recovery = match result.outcome {
        Outcome::Completed => Recovery::Ok,
        Outcome::RecoveryFailed(_) => Recovery::Failed,
        Outcome::RestartLimit => Recovery::Looped,
    };
    let final_windows_match =
        recovery == Recovery::Ok && result.final_state.sums() == expected.final_windows;
    let corrupt = contents.corrupt_lines;
    Verdict {
        dirty_reads: result.dirty_reads(config),
        visibility_delay_ms_max: result.visibility_delay_ms_max(config),
        duplicates,
        lost,
        wrong,
        corrupt,
        rolled_back,
        final_windows_match,
        exactly_once: duplicates == 0
            && lost == 0
            && wrong == 0
            && corrupt == 0
            && final_windows_match,
        recovery,
        restarts: result.incarnations.len() as u64 - 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_come_from_the_record_not_the_key_alone() {
        let record = |key: &str, kind| Record {
            key: key.to_string(),
            window_end: 20,
            sum: 1,
            watermark: 0,
            kind,
        };
        assert_eq!(
            Identity::of(&record("24:20", RecordKind::Fire)).trigger,
            Trigger::Event(24)
        );
        assert_eq!(
            Identity::of(&record("flush:20", RecordKind::Flush)).trigger,
            Trigger::EndOfInput
        );
        assert_eq!(
            Identity::of(&record("pt4500:20", RecordKind::Fire)).trigger,
            Trigger::Unknown("pt4500".to_string())
        );
    }
}

/// What a user asks a run to hold (`--expect`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Expectation {
    /// No duplicates, no loss, no wrong result, no corruption, recovered, same final windows.
    ExactlyOnce,
    /// Every record of the fault-free run reached the sink, and recovery completed.
    NoLoss,
}

impl Expectation {
    pub fn name(&self) -> &'static str {
        match self {
            Expectation::ExactlyOnce => "exactly-once",
            Expectation::NoLoss => "no-loss",
        }
    }

    pub fn holds(&self, verdict: &Verdict) -> bool {
        match self {
            Expectation::ExactlyOnce => verdict.exactly_once,
            Expectation::NoLoss => verdict.no_loss(),
        }
    }
}
