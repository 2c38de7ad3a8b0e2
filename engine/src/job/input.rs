//! A parallel job's input: keyed events, the partition each is read from, the operator each key goes to.
//!
//! Partition rule: an event that names its `"partition"` is read from that one (it must be
//! below P); any other event `i` (0-based, in file order) from partition `i mod P`. Within a
//! partition, events are read in file order. Key rule: an event without `"key"` has the
//! empty key (one key for all, as the one-task engine has); key k goes to window operator
//! `fnv1a64(k's UTF-8 bytes) mod M` ([`operator_of`]), the same on every machine.

use crate::event::json_lines::{integer_of, shown, Fields, Lines};
use crate::event::{Event, EventParseError, EVENTS_MAX, EVENT_INT_MAX, EVENT_INT_MIN};
use serde::{Deserialize, Serialize};
use std::io::BufRead;

/// The longest key an event may carry, in bytes.
pub const KEY_BYTES_MAX: usize = 256;

/// One input event of a parallel job.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct KeyedEvent {
    pub ts: i64,
    pub key: String,
    pub value: i64,
    /// The source partition that reads it.
    pub partition: u32,
}

impl KeyedEvent {
    /// The one-task engine's events as a keyed job's: the empty key, partition `i mod P`.
    pub fn from_events(events: &[Event], sources: u32) -> Vec<KeyedEvent> {
        assert!(sources >= 1);
        events
            .iter()
            .enumerate()
            .map(|(i, e)| KeyedEvent {
                ts: e.ts,
                key: String::new(),
                value: e.value,
                partition: (i as u64 % u64::from(sources)) as u32,
            })
            .collect()
    }
}

/// The window operator (of `parallelism`) that key `key` goes to: FNV-1a 64 of its bytes,
/// modulo M.
pub fn operator_of(key: &str, parallelism: u32) -> u32 {
    assert!(parallelism >= 1);
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in key.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (hash % u64::from(parallelism)) as u32
}

/// Each partition's events, in the order that partition reads them.
pub fn split_partitions(events: &[KeyedEvent], sources: u32) -> Vec<Vec<KeyedEvent>> {
    let mut partitions = vec![Vec::new(); sources as usize];
    for event in events {
        assert!(event.partition < sources, "partition checked when parsed");
        partitions[event.partition as usize].push(event.clone());
    }
    partitions
}

/// Parses JSON lines into keyed events: [`read_keyed_events`] of a string.
pub fn parse_keyed_events(text: &str, sources: u32) -> Result<Vec<KeyedEvent>, EventParseError> {
    read_keyed_events(text.as_bytes(), sources)
}

/// Reads JSON lines `{"ts": .., "value": .., "key": "..", "partition": ..}` (`key` and
/// `partition` optional, each field once) into keyed events read by `sources` partitions, a
/// line at a time as `read_events` reads them (bounded lines, at most `EVENTS_MAX` events).
/// Blank lines are skipped; anything else that is not such an object is an error naming the
/// line.
pub fn read_keyed_events(
    reader: impl BufRead,
    sources: u32,
) -> Result<Vec<KeyedEvent>, EventParseError> {
    assert!(sources >= 1);
    let mut lines = Lines::new(reader);
    let mut events = Vec::new();
    while let Some((line_number, line)) = lines.next_line()? {
        if line.trim().is_empty() {
            continue;
        }
        let error = |message: String| EventParseError {
            line: line_number,
            message,
        };
        if events.len() == EVENTS_MAX {
            return Err(error(format!("more than {EVENTS_MAX} events")));
        }
        let event = keyed_event_of_line(line, sources, events.len()).map_err(error)?;
        events.push(event);
    }
    Ok(events)
}

/// The keyed event on one line that is not blank, the `index`th of the file, or what is
/// wrong with it.
fn keyed_event_of_line(line: &str, sources: u32, index: usize) -> Result<KeyedEvent, String> {
    let object = Fields::of_line(line, "{\"ts\": 0, \"key\": \"a\", \"value\": 1}")?;
    if let Some(unknown) = object
        .keys()
        .find(|k| !["ts", "value", "key", "partition"].contains(k))
    {
        return Err(format!(
            "unknown field \"{unknown}\" (a keyed event has \"ts\", \"value\" and optionally \"key\" and \"partition\")"
        ));
    }
    let int = |name: &str| -> Result<i64, String> {
        let field = object
            .get(name)
            .ok_or_else(|| format!("missing field \"{name}\""))?;
        match integer_of(field) {
            Some(Some(i)) if (EVENT_INT_MIN..=EVENT_INT_MAX).contains(&i) => Ok(i),
            _ => Err(format!(
                "{name} must be an integer from {EVENT_INT_MIN} to {EVENT_INT_MAX}, found {}",
                shown(field)
            )),
        }
    };
    let key = match object
        .get("key")
        .map(|raw| serde_json::from_str::<serde_json::Value>(raw.get()))
    {
        None => String::new(),
        Some(Ok(serde_json::Value::String(key))) if key.len() <= KEY_BYTES_MAX => key,
        Some(Ok(serde_json::Value::String(_))) => {
            return Err(format!("key is longer than {KEY_BYTES_MAX} bytes"))
        }
        Some(_) => {
            let shown = shown(object.get("key").expect("matched above"));
            return Err(format!("key must be a string, found {shown}"));
        }
    };
    let partition = match object.get("partition") {
        None => (index as u64 % u64::from(sources)) as u32,
        Some(field) => match integer_of(field) {
            Some(Some(p)) if (0..i64::from(sources)).contains(&p) => p as u32,
            _ => {
                return Err(format!(
                    "partition must be an integer from 0 to {} (--sources {sources}), found {}",
                    sources - 1,
                    shown(field)
                ))
            }
        },
    };
    Ok(KeyedEvent {
        ts: int("ts")?,
        key,
        value: int("value")?,
        partition,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_go_to_operators_by_a_stated_hash() {
        // FNV-1a 64 of "" is the offset basis 0xcbf29ce484222325.
        assert_eq!(operator_of("", 4), (0xcbf2_9ce4_8422_2325u64 % 4) as u32);
        assert_eq!(operator_of("a", 1), 0);
        let spread: std::collections::BTreeSet<u32> = (0..64)
            .map(|i| operator_of(&format!("user{i}"), 4))
            .collect();
        assert_eq!(spread.len(), 4);
    }

    #[test]
    fn partitions_follow_the_stated_rule() {
        let text = "{\"ts\": 1, \"value\": 1}\n{\"ts\": 2, \"key\": \"a\", \"value\": 2}\n\n{\"ts\": 3, \"value\": 3, \"partition\": 0}\n{\"ts\": 4, \"value\": 4}\n";
        let events = parse_keyed_events(text, 2).unwrap();
        let partitions: Vec<u32> = events.iter().map(|e| e.partition).collect();
        assert_eq!(partitions, vec![0, 1, 0, 1]);
        assert_eq!(events[1].key, "a");
        assert_eq!(events[0].key, "");
    }

    #[test]
    fn bad_lines_are_named() {
        let check = |text: &str, expected: &str| {
            let error = parse_keyed_events(text, 2).unwrap_err();
            assert_eq!(error.to_string(), expected);
        };
        check(
            "{\"ts\": 1, \"value\": 1, \"partition\": 2}",
            "line 1: partition must be an integer from 0 to 1 (--sources 2), found 2",
        );
        check(
            "\n{\"ts\": 1, \"value\": 1, \"key\": 3}",
            "line 2: key must be a string, found 3",
        );
        check("{\"ts\": 1}", "line 1: missing field \"value\"");
        check(
            "{\"ts\": 1, \"key\": \"a\", \"value\": 1, \"key\": \"b\"}",
            "line 1: duplicate field \"key\" (each field appears once)",
        );
        check(
            "{\"ts\": 1, \"value\": 12345678901234567890123456789}",
            "line 1: value must be an integer from -9007199254740991 to 9007199254740991, found 12345678901234567890123456789",
        );
        check("{\"ts\": 1, \"value\": 1, \"x\": 1}", "line 1: unknown field \"x\" (a keyed event has \"ts\", \"value\" and optionally \"key\" and \"partition\")");
    }
}
