//! Reading JSON-lines input a line at a time: bounded lines, objects whose fields appear once, numbers shown as written.
//!
//! Events files can be anything a user points `--events` at (`/dev/zero`, a pipe that never
//! ends): [`Lines`] never holds more than one line of [`LINE_LEN_MAX_BYTES`], and callers stop
//! at `EVENTS_MAX` events, so memory stays bounded whatever the input.

use super::EventParseError;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::collections::BTreeSet;
use std::fmt;
use std::io::{BufRead, ErrorKind};

/// The longest line an events file may hold, in bytes, without its line ending. An event's
/// line is about 50 bytes (a keyed one with the longest key, written with `\u` escapes, under
/// 2,000): this leaves room for any spacing while keeping one line's memory small.
pub const LINE_LEN_MAX_BYTES: usize = 65_536;

/// The lines of a reader, one at a time, each at most [`LINE_LEN_MAX_BYTES`] long and UTF-8;
/// a line ends at `\n` (a `\r` before it is dropped, as `str::lines` does) or at the end.
pub struct Lines<R> {
    reader: R,
    line: Vec<u8>,
    /// 1-based number of the line last returned (0 before the first).
    number: usize,
}

impl<R: BufRead> Lines<R> {
    pub fn new(reader: R) -> Lines<R> {
        Lines {
            reader,
            line: Vec::new(),
            number: 0,
        }
    }

    /// The next line and its 1-based number, None at the end; an error names the line that
    /// is too long, not UTF-8, or could not be read, without reading further.
    pub fn next_line(&mut self) -> Result<Option<(usize, &str)>, EventParseError> {
        self.line.clear();
        let number = self.number + 1;
        let error = |message: String| EventParseError {
            line: number,
            message,
        };
        let mut started = false;
        loop {
            let available = match self.reader.fill_buf() {
                Ok(available) => available,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(error(format!("cannot read: {e}"))),
            };
            if available.is_empty() {
                if !started {
                    return Ok(None);
                }
                break;
            }
            started = true;
            let (take, newline) = match memchr::memchr(b'\n', available) {
                Some(at) => (at, true),
                None => (available.len(), false),
            };
            // One byte past the limit may be the `\r` of a `\r\n`: decided once the line ends.
            if self.line.len() + take > LINE_LEN_MAX_BYTES + 1 {
                return Err(error(too_long()));
            }
            self.line.extend_from_slice(&available[..take]);
            self.reader.consume(take + usize::from(newline));
            if newline {
                break;
            }
        }
        if self.line.last() == Some(&b'\r') {
            self.line.pop();
        }
        if self.line.len() > LINE_LEN_MAX_BYTES {
            return Err(error(too_long()));
        }
        self.number = number;
        let line =
            std::str::from_utf8(&self.line).map_err(|e| error(format!("not UTF-8 text ({e})")))?;
        Ok(Some((number, line)))
    }
}

fn too_long() -> String {
    format!("line longer than {LINE_LEN_MAX_BYTES} bytes (an event takes one short line)")
}

/// A JSON object's fields in the order written, each value as the line holds its text, and
/// the first key written twice, if any (serde_json would keep the last one silently).
pub struct Fields<'a> {
    fields: Vec<(String, &'a RawValue)>,
    duplicate: Option<String>,
}

impl<'a> Fields<'a> {
    /// The object on `line`; an error says what the line is instead (not JSON, not an
    /// object like `example`, an object with a key written twice).
    pub fn of_line(line: &'a str, example: &str) -> Result<Fields<'a>, String> {
        let fields = match serde_json::from_str::<Fields<'a>>(line) {
            Ok(fields) => fields,
            Err(_) => {
                // Not an object: the full parser words what it is.
                let value: serde_json::Value =
                    serde_json::from_str(line).map_err(|e| format!("not valid JSON: {e}"))?;
                return Err(format!(
                    "expected a JSON object like {example}, found {value}"
                ));
            }
        };
        if let Some(key) = &fields.duplicate {
            return Err(format!(
                "duplicate field \"{key}\" (each field appears once)"
            ));
        }
        Ok(fields)
    }

    pub fn get(&self, name: &str) -> Option<&'a RawValue> {
        self.fields
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| *value)
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.fields.iter().map(|(key, _)| key.as_str())
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Fields<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(FieldsVisitor(std::marker::PhantomData))
    }
}

struct FieldsVisitor<'a>(std::marker::PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for FieldsVisitor<'a> {
    type Value = Fields<'a>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields<'a>, A::Error> {
        let mut fields = Vec::new();
        let mut seen = BTreeSet::new();
        let mut duplicate = None;
        while let Some(key) = map.next_key::<String>()? {
            let value: &'a RawValue = map.next_value()?;
            if seen.insert(key.clone()) {
                fields.push((key, value));
            } else if duplicate.is_none() {
                duplicate = Some(key);
            }
        }
        Ok(Fields { fields, duplicate })
    }
}

/// A field's value as an error shows it: a number exactly as written (serde_json would
/// round a long one to a double, `1.2345678901234568e+29`), anything else as JSON.
pub fn shown(value: &RawValue) -> String {
    let text = value.get();
    if text.starts_with(|c: char| c == '-' || c.is_ascii_digit()) {
        return text.to_string();
    }
    serde_json::from_str::<serde_json::Value>(text)
        .map_or_else(|_| text.to_string(), |v| v.to_string())
}

/// `Some(Some(i))` for an integer that fits an i64, `Some(None)` for an integer that does not
/// (beyond i64, or too long for serde_json to keep exact: it reads those as whole doubles),
/// `None` for anything else (a fraction, a string, ...).
pub fn integer_of(value: &RawValue) -> Option<Option<i64>> {
    let number: serde_json::Number = serde_json::from_str(value.get()).ok()?;
    if let Some(int) = number.as_i64() {
        return Some(Some(int));
    }
    if number.is_u64() {
        return Some(None);
    }
    // A whole double beyond ±2^53 can only come from an integer literal too long for i64 or
    // u64, or one written with an exponent: out of range either way.
    let float = number.as_f64()?;
    (float.fract() == 0.0 && float.abs() > super::JSON_SAFE_INT_MAX as f64).then_some(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_lines(bytes: &[u8]) -> Result<Vec<(usize, String)>, EventParseError> {
        let mut lines = Lines::new(bytes);
        let mut out = Vec::new();
        while let Some((number, line)) = lines.next_line()? {
            out.push((number, line.to_string()));
        }
        Ok(out)
    }

    #[test]
    fn lines_end_at_newlines_and_drop_a_carriage_return() {
        let got = all_lines(b"a\r\n\nb\nc").unwrap();
        let want = [(1, "a"), (2, ""), (3, "b"), (4, "c")];
        assert_eq!(got, want.map(|(n, l)| (n, l.to_string())));
        assert_eq!(all_lines(b"").unwrap(), vec![]);
        assert_eq!(all_lines(b"x\n").unwrap(), vec![(1, "x".to_string())]);
    }

    #[test]
    fn a_line_at_the_limit_is_read_and_one_past_it_is_not() {
        let at_limit = vec![b' '; LINE_LEN_MAX_BYTES];
        let mut crlf = at_limit.clone();
        crlf.extend_from_slice(b"\r\n");
        assert_eq!(all_lines(&crlf).unwrap().len(), 1);
        assert_eq!(all_lines(&at_limit).unwrap().len(), 1);
        let mut over = b"{}\n".to_vec();
        over.extend(vec![b' '; LINE_LEN_MAX_BYTES + 1]);
        let error = all_lines(&over).unwrap_err();
        assert_eq!(
            error.to_string(),
            "line 2: line longer than 65536 bytes (an event takes one short line)"
        );
        over.extend_from_slice(b"\n");
        assert_eq!(all_lines(&over).unwrap_err(), error);
    }

    #[test]
    fn a_line_that_is_not_utf8_is_named() {
        let error = all_lines(b"ok\n\xff\n").unwrap_err();
        assert_eq!(error.line, 2);
        assert!(error.message.starts_with("not UTF-8 text"), "{error}");
    }

    #[test]
    fn an_object_names_its_first_duplicate_key_and_keeps_numbers_as_written() {
        let example = "{}";
        let error = |line: &str| Fields::of_line(line, example).err().unwrap();
        assert_eq!(
            error("{\"ts\":1,\"ts\":2,\"value\":3}"),
            "duplicate field \"ts\" (each field appears once)"
        );
        assert_eq!(error("[1]"), "expected a JSON object like {}, found [1]");
        assert!(error("{").starts_with("not valid JSON: "));
        let line = "{\"a\": 12345678901234567890123456789, \"b\": \"x\", \"c\": 1e3}";
        let fields = Fields::of_line(line, example).unwrap();
        assert_eq!(fields.keys().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(
            shown(fields.get("a").unwrap()),
            "12345678901234567890123456789"
        );
        assert_eq!(shown(fields.get("b").unwrap()), "\"x\"");
        assert_eq!(integer_of(fields.get("a").unwrap()), Some(None));
        assert_eq!(integer_of(fields.get("b").unwrap()), None);
        assert_eq!(integer_of(fields.get("c").unwrap()), None);
    }
}
