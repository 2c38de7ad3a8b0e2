//! The scenario catalogue: named input streams shipped with keel, and loading user event files.

use crate::error::KeelError;
use keel_engine::{parse_events, Event};
use keel_sim::{Fingerprint, FingerprintBuilder};

/// A named input stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scenario {
    pub name: &'static str,
    pub about: &'static str,
    events_jsonl: &'static str,
}

/// Every scenario keel ships, by name.
pub const SCENARIOS: &[Scenario] = &[Scenario {
    name: "ch04",
    about: "the chapter-04 ev05 stream: 30 events, ts 0..29 out of order, value = ts + 1",
    events_jsonl: include_str!("../data/ch04.jsonl"),
}];

impl Scenario {
    pub fn by_name(name: &str) -> Result<Scenario, KeelError> {
        SCENARIOS
            .iter()
            .find(|s| s.name == name)
            .copied()
            .ok_or_else(|| {
                let known: Vec<&str> = SCENARIOS.iter().map(|s| s.name).collect();
                KeelError::usage(format!(
                    "unknown scenario '{name}' (known: {})",
                    known.join(", ")
                ))
            })
    }

    pub fn events(&self) -> Vec<Event> {
        parse_events(self.events_jsonl).expect("shipped scenarios are valid")
    }
}

/// Parses a user's events file; errors name the file and the line. A file without a single
/// event (empty, or only blank lines) is an error: there would be nothing to test.
pub fn events_from_text(path: &str, text: &str) -> Result<Vec<Event>, KeelError> {
    let events = parse_events(text).map_err(|e| KeelError::usage(format!("{path}: {e}")))?;
    if events.is_empty() {
        return Err(KeelError::usage(format!("no events in {path}")));
    }
    Ok(events)
}

/// The digest of a stream of events, as loaded (FNV-1a 64 of each event's `ts` and `value`,
/// 8 bytes each, little-endian, in order): what plan files, shard headers and counts files
/// name their events by (their `spec` names only a path or a scenario), and what a run's
/// input digest starts from (`RunSpec::input_digest`).
pub fn events_digest(events: &[Event]) -> Fingerprint {
    let mut digest = FingerprintBuilder::default();
    for event in events {
        digest.write(&event.ts.to_le_bytes());
        digest.write(&event.value.to_le_bytes());
    }
    digest.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_scenario_parses() {
        for scenario in SCENARIOS {
            assert!(!scenario.events().is_empty(), "{}", scenario.name);
        }
        let ch04 = Scenario::by_name("ch04").unwrap().events();
        let ts: Vec<i64> = ch04.iter().map(|e| e.ts).collect();
        assert_eq!(
            ts,
            vec![
                0, 1, 2, 3, 4, 5, 8, 9, 6, 7, 10, 11, 12, 15, 13, 14, 17, 18, 19, 20, 21, 22, 23,
                24, 26, 16, 25, 27, 28, 29
            ]
        );
        assert!(ch04.iter().all(|e| e.value == e.ts + 1));
        for blank in ["", "\n", " \n\t\n\n"] {
            let error = events_from_text("e.jsonl", blank).unwrap_err();
            assert_eq!(error, KeelError::usage("no events in e.jsonl"));
        }
        assert!(Scenario::by_name("nope")
            .unwrap_err()
            .message
            .contains("known: ch04"));
    }
}
