//! Input events and the JSON-lines format they arrive in: `{"ts": <int>, "value": <int>}` per line.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Timestamps, values and window sizes stay within JSON's exactly representable integers, so
/// window arithmetic on i64 can never overflow.
pub const JSON_SAFE_INT_MAX: i64 = (1 << 53) - 1;

/// Inputs are bounded so that a whole run (and a sweep over it) stays in memory.
pub const EVENTS_MAX: usize = 1_000_000;

/// One input event. Its index is its 0-based position in arrival order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub ts: i64,
    pub value: i64,
}

/// A line of an events file that is not an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventParseError {
    /// 1-based line number.
    pub line: usize,
    pub message: String,
}

impl fmt::Display for EventParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for EventParseError {}

/// Parses JSON lines into events. Blank lines are allowed and skipped; anything else that is
/// not exactly an object with integer `ts` and `value` is an error naming the line.
pub fn parse_events(text: &str) -> Result<Vec<Event>, EventParseError> {
    let mut events = Vec::new();
    for (line_index, line) in text.lines().enumerate() {
        let line_number = line_index + 1;
        let error = |message: String| EventParseError {
            line: line_number,
            message,
        };
        if line.trim().is_empty() {
            continue;
        }
        if events.len() == EVENTS_MAX {
            return Err(error(format!("more than {EVENTS_MAX} events")));
        }
        let value: serde_json::Value =
            serde_json::from_str(line).map_err(|e| error(format!("not valid JSON: {e}")))?;
        let object = value.as_object().ok_or_else(|| {
            error(format!(
                "expected a JSON object like {{\"ts\": 0, \"value\": 1}}, found {value}"
            ))
        })?;
        let field = |name: &str| -> Result<i64, EventParseError> {
            let field = object
                .get(name)
                .ok_or_else(|| error(format!("missing field \"{name}\"")))?;
            let int = field.as_i64().ok_or_else(|| {
                error(format!(
                    "field \"{name}\" must be an integer, found {field}"
                ))
            })?;
            if int.abs() > JSON_SAFE_INT_MAX {
                return Err(error(format!(
                    "field \"{name}\" is {int}, outside ±{JSON_SAFE_INT_MAX}"
                )));
            }
            Ok(int)
        };
        let event = Event {
            ts: field("ts")?,
            value: field("value")?,
        };
        if let Some(unknown) = object.keys().find(|k| *k != "ts" && *k != "value") {
            return Err(error(format!(
                "unknown field \"{unknown}\" (an event has only \"ts\" and \"value\")"
            )));
        }
        events.push(event);
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: Result<Vec<(i64, i64)>, (usize, &str)>) {
        let got = parse_events(text);
        match expected {
            Ok(pairs) => {
                let events: Vec<Event> = pairs
                    .into_iter()
                    .map(|(ts, value)| Event { ts, value })
                    .collect();
                assert_eq!(got, Ok(events));
            }
            Err((line, fragment)) => {
                let err = got.expect_err("expected a parse error");
                assert_eq!(err.line, line, "{err}");
                assert!(err.message.contains(fragment), "{err}");
            }
        }
    }

    #[test]
    fn events_parse_or_fail_with_the_line() {
        check(
            "{\"ts\": 1, \"value\": 2}\n\n{\"value\": 3, \"ts\": -4}\n",
            Ok(vec![(1, 2), (-4, 3)]),
        );
        check("", Ok(vec![]));
        check(
            "{\"ts\": 1, \"value\": 2}\n{\"ts\": 1",
            Err((2, "not valid JSON")),
        );
        check("[1, 2]", Err((1, "expected a JSON object")));
        check("{\"ts\": 1}", Err((1, "missing field \"value\"")));
        check(
            "{\"ts\": 1.5, \"value\": 2}",
            Err((1, "field \"ts\" must be an integer")),
        );
        check(
            "{\"ts\": \"1\", \"value\": 2}",
            Err((1, "field \"ts\" must be an integer")),
        );
        check(
            "{\"ts\": 1, \"value\": 2, \"x\": 0}",
            Err((1, "unknown field \"x\"")),
        );
        check(
            "{\"ts\": 9007199254740992, \"value\": 2}",
            Err((1, "outside")),
        );
        check(
            "{\"ts\": 1, \"value\": 18446744073709551615}",
            Err((1, "must be an integer")),
        );
    }
}
