//! Input events and the JSON-lines format they arrive in: `{"ts": <int>, "value": <int>}` per line.

pub mod json_lines;

pub use json_lines::LINE_LEN_MAX_BYTES;
use json_lines::{integer_of, shown, Fields, Lines};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::io::BufRead;

/// Timestamps, values, window sizes and out-of-orderness stay within JSON's exactly
/// representable integers, ±(2^53 - 1), so no arithmetic on them can overflow:
///
/// - a window end, floor(ts / W) * W + W, lies in [ts + 1, ts + W]: at most 2^54 - 2;
/// - the watermark, max_ts - D, is at least -(2^54 - 2);
/// - a window sum is an i128 of at most `EVENTS_MAX` values: below 2^73 in magnitude.
///
/// Plain i64 would not do: with W = 10 a window end overflows from ts = 9223372036854775800
/// (floor(i64::MAX / W) * W) up, floor(ts / W) * W from ts = -9223372036854775801 down, and
/// with D = 5 the watermark from max_ts = -9223372036854775804 down (debug builds panic).
/// Keel's JSON prints them exactly (serde_json writes every i64 digit); a reader that parses
/// numbers as doubles reads them exactly within ±2^53, so a window end past it (a ts within
/// W of the bound) or a watermark below it (a max_ts within D of the bound) may be rounded
/// there: a reader's limit, stated in `--events`'s help.
pub const JSON_SAFE_INT_MAX: i64 = (1 << 53) - 1;

/// The smallest `ts` or `value` an event may carry.
pub const EVENT_INT_MIN: i64 = -JSON_SAFE_INT_MAX;

/// The largest `ts` or `value` an event may carry.
pub const EVENT_INT_MAX: i64 = JSON_SAFE_INT_MAX;

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

/// Parses JSON lines into events: [`read_events`] of a string.
pub fn parse_events(text: &str) -> Result<Vec<Event>, EventParseError> {
    read_events(text.as_bytes())
}

/// Reads JSON lines into events, a line at a time ([`Lines`]: at most
/// [`LINE_LEN_MAX_BYTES`] a line, and no further than the first line past `EVENTS_MAX`
/// events, so memory stays bounded whatever `reader` holds). Blank lines are allowed and
/// skipped; anything else that is not exactly an object with integer `ts` and `value`, each
/// once, is an error naming the line.
pub fn read_events(reader: impl BufRead) -> Result<Vec<Event>, EventParseError> {
    let mut lines = Lines::new(reader);
    let mut events = Vec::new();
    while let Some((line_number, line)) = lines.next_line()? {
        if line.trim().is_empty() {
            continue;
        }
        if events.len() == EVENTS_MAX {
            return Err(EventParseError {
                line: line_number,
                message: format!("more than {EVENTS_MAX} events"),
            });
        }
        let event = event_of_line(line).map_err(|message| EventParseError {
            line: line_number,
            message,
        })?;
        events.push(event);
    }
    Ok(events)
}

/// The event on one line that is not blank, or what is wrong with it.
fn event_of_line(line: &str) -> Result<Event, String> {
    if let Some(event) = plain_event(line) {
        return Ok(event);
    }
    let object = Fields::of_line(line, "{\"ts\": 0, \"value\": 1}")?;
    let field = |name: &str| -> Result<i64, String> {
        let field = object
            .get(name)
            .ok_or_else(|| format!("missing field \"{name}\""))?;
        let rule = format!("{name} must be an integer from {EVENT_INT_MIN} to {EVENT_INT_MAX}");
        match integer_of(field) {
            Some(Some(int)) if (EVENT_INT_MIN..=EVENT_INT_MAX).contains(&int) => Ok(int),
            Some(_) => Err(format!("{name} {} is out of range: {rule}", shown(field))),
            None => Err(format!("{rule}, found {}", shown(field))),
        }
    };
    let event = Event {
        ts: field("ts")?,
        value: field("value")?,
    };
    if let Some(unknown) = object.keys().find(|k| *k != "ts" && *k != "value") {
        return Err(format!(
            "unknown field \"{unknown}\" (an event has only \"ts\" and \"value\")"
        ));
    }
    Ok(event)
}

/// The fast path of `parse_events`: a line exactly of the form `{"ts": <int>, "value":
/// <int>}` (spaces or tabs around the tokens, integers in JSON's syntax within the events'
/// range), as `keel gen` and most files write it. Anything else, valid or not, is `None` and
/// goes through the full JSON parser, which decides it and words its error; so this only
/// saves a million-line file a `serde_json::Value` per line.
fn plain_event(line: &str) -> Option<Event> {
    let rest = line.trim_matches([' ', '\t']).strip_prefix('{')?;
    let rest = token(rest, "\"ts\"")?;
    let rest = token(rest, ":")?;
    let (ts, rest) = plain_int(rest)?;
    let rest = token(rest, ",")?;
    let rest = token(rest, "\"value\"")?;
    let rest = token(rest, ":")?;
    let (value, rest) = plain_int(rest)?;
    let rest = token(rest, "}")?;
    rest.is_empty().then_some(Event { ts, value })
}

/// `text` after optional spaces or tabs and `expected`.
fn token<'a>(text: &'a str, expected: &str) -> Option<&'a str> {
    text.trim_start_matches([' ', '\t']).strip_prefix(expected)
}

/// A JSON integer (optional minus, no leading zero, at most 16 digits) within the events'
/// range, after optional spaces or tabs, and the text after it.
fn plain_int(text: &str) -> Option<(i64, &str)> {
    let text = text.trim_start_matches([' ', '\t']);
    let (negative, digits_on) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let len = digits_on.bytes().take_while(u8::is_ascii_digit).count();
    let digits = &digits_on[..len];
    if len == 0 || len > 16 || (len > 1 && digits.starts_with('0')) {
        return None;
    }
    let magnitude: i64 = digits.parse().ok()?;
    // serde_json reads "-0" as the double -0.0, which the full path rejects.
    if magnitude > JSON_SAFE_INT_MAX || (negative && magnitude == 0) {
        return None;
    }
    let int = if negative { -magnitude } else { magnitude };
    Some((int, &digits_on[len..]))
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
            "{\"ts\": 1, \"value\": 2, \"x\": 0}",
            Err((1, "unknown field \"x\"")),
        );
    }

    #[test]
    fn a_field_written_twice_is_an_error_naming_it() {
        // serde_json alone keeps the last one: {"ts": 2, "value": 3}.
        check(
            "{\"ts\": 0, \"value\": 0}\n{\"ts\":1,\"ts\":2,\"value\":3}",
            Err((2, "duplicate field \"ts\" (each field appears once)")),
        );
        check(
            "{\"value\": 3, \"ts\": 1, \"value\": 3}",
            Err((1, "duplicate field \"value\"")),
        );
    }

    #[test]
    fn reading_stops_at_the_first_line_too_long_or_past_the_last_event() {
        // An endless input without a newline (`/dev/zero`): refused after one line's worth.
        let endless = std::io::Read::take(std::io::repeat(0), u64::MAX);
        let error = read_events(std::io::BufReader::new(endless)).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("line 1: line longer than {LINE_LEN_MAX_BYTES} bytes (an event takes one short line)")
        );
        // An endless input of events: refused at the first event past the limit.
        let event = b"{\"ts\": 1, \"value\": 2}\n";
        let endless =
            std::io::Read::take(std::io::Read::chain(&event[..], Endless(event)), u64::MAX);
        let error = read_events(std::io::BufReader::new(endless)).unwrap_err();
        assert_eq!(
            error,
            EventParseError {
                line: EVENTS_MAX + 1,
                message: format!("more than {EVENTS_MAX} events"),
            }
        );
    }

    /// The same bytes over and over.
    struct Endless(&'static [u8]);

    impl std::io::Read for Endless {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            Ok(n)
        }
    }

    #[test]
    fn the_fast_path_takes_only_what_the_json_parser_takes_alike() {
        for line in [
            "{\"ts\": 0, \"value\": 1}",
            "{\"ts\":-5,\"value\":-10}",
            " \t{ \"ts\" :\t12 , \"value\" : 9007199254740991 } ",
            "{\"ts\": -9007199254740991, \"value\": 7}",
        ] {
            let fast = plain_event(line).expect(line);
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(value["ts"].as_i64(), Some(fast.ts), "{line}");
            assert_eq!(value["value"].as_i64(), Some(fast.value), "{line}");
        }
        // Left to the full parser: other orders, leading zeros, out of range, fractions,
        // extra fields, trailing text, and -0 (a double to serde_json, rejected there).
        for line in [
            "{\"value\": 1, \"ts\": 0}",
            "{\"ts\": 01, \"value\": 1}",
            "{\"ts\": 9007199254740992, \"value\": 1}",
            "{\"ts\": 1.5, \"value\": 1}",
            "{\"ts\": 1, \"value\": 1, \"x\": 0}",
            "{\"ts\": 1, \"value\": 1}}",
            "{\"ts\": -, \"value\": 1}",
            "{\"ts\": 1e3, \"value\": 1}",
            "{\"ts\": -0, \"value\": 1}",
        ] {
            assert_eq!(plain_event(line), None, "{line}");
        }
    }

    #[test]
    fn ts_and_value_are_integers_within_the_stated_range() {
        let ts_rule = "ts must be an integer from -9007199254740991 to 9007199254740991";
        let value_rule = "value must be an integer from -9007199254740991 to 9007199254740991";
        let rejected = |text: &str, message: String| {
            let err = parse_events(text).expect_err(text);
            assert_eq!(err.to_string(), format!("line 1: {message}"));
        };
        rejected(
            "{\"ts\": 1.5, \"value\": 2}",
            format!("{ts_rule}, found 1.5"),
        );
        rejected(
            "{\"ts\": \"1\", \"value\": 2}",
            format!("{ts_rule}, found \"1\""),
        );
        rejected(
            "{\"ts\": 1, \"value\": 2.0}",
            format!("{value_rule}, found 2.0"),
        );
        rejected(
            "{\"ts\": 1, \"value\": null}",
            format!("{value_rule}, found null"),
        );
        for ts in [
            "9007199254740992",
            "-9007199254740992",
            "9223372036854775807",
            "-9223372036854775808",
            "18446744073709551615",
        ] {
            rejected(
                &format!("{{\"ts\": {ts}, \"value\": 2}}"),
                format!("ts {ts} is out of range: {ts_rule}"),
            );
        }
        // Beyond u64, serde_json keeps only a double: still out of range, not "a fraction",
        // and shown as written, not as the double (1.2345678901234568e+28).
        rejected(
            "{\"ts\": 1, \"value\": 12345678901234567890123456789}",
            format!("value 12345678901234567890123456789 is out of range: {value_rule}"),
        );
        rejected(
            "{\"ts\": 1, \"value\": -1e300}",
            format!("value -1e300 is out of range: {value_rule}"),
        );
        rejected(
            "{\"ts\": 1e3, \"value\": 2}",
            format!("{ts_rule}, found 1e3"),
        );
        assert_eq!(
            parse_events(
                "{\"ts\": 9007199254740991, \"value\": -9007199254740991}\n\
                 {\"ts\": -9007199254740991, \"value\": 9007199254740991}"
            ),
            Ok(vec![
                Event {
                    ts: EVENT_INT_MAX,
                    value: EVENT_INT_MIN
                },
                Event {
                    ts: EVENT_INT_MIN,
                    value: EVENT_INT_MAX
                },
            ])
        );
    }
}
