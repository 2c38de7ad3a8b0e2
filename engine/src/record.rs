//! Output records and their one-line JSON form, byte for byte the chapter's.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Why a record was emitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecordKind {
    /// The watermark passed the window's end.
    Fire,
    /// An event arrived for a window that had already fired.
    LateUpdate,
    /// End of input: the window had not fired yet.
    Flush,
}

impl RecordKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            RecordKind::Fire => "fire",
            RecordKind::LateUpdate => "late-update",
            RecordKind::Flush => "flush",
        }
    }
}

/// One record written to a sink.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// The idempotency key: "<event index>:<window end>" or "flush:<window end>".
    pub key: String,
    pub window_end: i64,
    pub sum: i128,
    pub watermark: i64,
    pub kind: RecordKind,
}

impl Record {
    /// The record as one JSON line without the newline, in the chapter's field order and
    /// spacing: `{"key": "13:10", "window_end": 10, "sum": 55, "watermark": 10, "kind": "fire"}`.
    pub fn to_json_line(&self) -> String {
        let key = serde_json::to_string(&self.key).expect("a string always serializes");
        format!(
            "{{\"key\": {key}, \"window_end\": {}, \"sum\": {}, \"watermark\": {}, \"kind\": \"{}\"}}",
            self.window_end,
            self.sum,
            self.watermark,
            self.kind.as_str()
        )
    }

    /// Parses one sink line; `None` for a line that is not a whole record (torn or garbage).
    /// A line in the form [`Record::to_json_line`] writes is read without serde (recovery
    /// reads every line of a sink, and so does the oracle); serde_json decides every other.
    pub fn parse_line(line: &str) -> Option<Record> {
        parse_canonical(line.as_bytes()).or_else(|| serde_json::from_str(line).ok())
    }

    /// Whether `line` (bytes, without its '\n') reads as a record: `parse_line` of it as
    /// UTF-8 is Some. A line in the engine's own form is checked without building the record
    /// (recovery checks every line of the sink).
    pub fn is_record_line(line: &[u8]) -> bool {
        canonical_parts(line).is_some()
            || std::str::from_utf8(line)
                .ok()
                .and_then(Record::parse_line)
                .is_some()
    }
}

/// The fields of a line in exactly [`Record::to_json_line`]'s form, the key borrowed.
struct CanonicalParts<'a> {
    key: &'a str,
    window_end: i64,
    sum: i128,
    watermark: i64,
    kind: RecordKind,
}

/// A line exactly as [`Record::to_json_line`] writes it, with a key that needs no escape and
/// numbers in JSON's one form for an integer (no leading zero, no "-0"), parsed by hand.
/// None for every other line, also the valid ones (serde_json decides those): so where this
/// gives a record, serde_json gives the same one (tested on every one-byte edit of such
/// lines).
fn parse_canonical(line: &[u8]) -> Option<Record> {
    let parts = canonical_parts(line)?;
    Some(Record {
        key: parts.key.to_string(),
        window_end: parts.window_end,
        sum: parts.sum,
        watermark: parts.watermark,
        kind: parts.kind,
    })
}

/// [`parse_canonical`]'s checks, nothing built: Some exactly where it gives a record (a line
/// it accepts is UTF-8 throughout: ASCII but for the key, which is checked).
fn canonical_parts(line: &[u8]) -> Option<CanonicalParts<'_>> {
    let rest = line.strip_prefix(b"{\"key\": \"")?;
    let key_len_bytes = rest.iter().position(|&b| b == b'"')?;
    let (key, rest) = rest.split_at(key_len_bytes);
    if key.iter().any(|&b| b < 0x20 || b == b'\\') {
        return None;
    }
    let rest = rest.strip_prefix(b"\", \"window_end\": ")?;
    let (window_end, rest) = integer(rest)?;
    let rest = rest.strip_prefix(b", \"sum\": ")?;
    let (sum, rest) = integer(rest)?;
    let rest = rest.strip_prefix(b", \"watermark\": ")?;
    let (watermark, rest) = integer(rest)?;
    let rest = rest.strip_prefix(b", \"kind\": \"")?;
    let kind = [RecordKind::Fire, RecordKind::LateUpdate, RecordKind::Flush]
        .into_iter()
        .find(|kind| rest.strip_prefix(kind.as_str().as_bytes()) == Some(b"\"}"))?;
    Some(CanonicalParts {
        key: std::str::from_utf8(key).ok()?,
        window_end: i64::try_from(window_end).ok()?,
        sum,
        watermark: i64::try_from(watermark).ok()?,
        kind,
    })
}

/// The integer at the start of `bytes` in JSON's form for it, and what follows. At most 38
/// digits (every such number fits an i128; longer ones are left to serde_json).
fn integer(bytes: &[u8]) -> Option<(i128, &[u8])> {
    const DIGITS_MAX: usize = 38;
    let (negative, unsigned) = match bytes.strip_prefix(b"-") {
        Some(unsigned) => (true, unsigned),
        None => (false, bytes),
    };
    let digits_len = unsigned.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits_len == 0 || digits_len > DIGITS_MAX {
        return None;
    }
    let (digits, rest) = unsigned.split_at(digits_len);
    if digits[0] == b'0' && (digits_len > 1 || negative) {
        return None;
    }
    let magnitude = digits
        .iter()
        .fold(0i128, |value, &digit| value * 10 + i128::from(digit - b'0'));
    Some((if negative { -magnitude } else { magnitude }, rest))
}

impl fmt::Display for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json_line())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every line one byte away from a canonical one (deleted, replaced or inserted, from
    /// bytes that matter to JSON), and the canonical lines themselves: where the hand parser
    /// gives a record, serde_json gives the same; and it reads every canonical line.
    #[test]
    fn the_hand_parser_agrees_with_serde_json_wherever_it_reads_a_line() {
        let records = [
            ("13:10", 10, 55, 10, RecordKind::Fire),
            ("flush:-20", -20, -7, i64::MIN, RecordKind::Flush),
            ("0:0", 0, 0, 0, RecordKind::LateUpdate),
            (
                "k\u{e9}y",
                i64::MAX,
                i128::MAX / 10,
                i64::MIN,
                RecordKind::Fire,
            ),
            (
                "9",
                i64::MIN,
                -(i128::MAX / 10),
                i64::MAX,
                RecordKind::LateUpdate,
            ),
        ];
        let bytes: &[u8] = b"0123456789-+.eE \"\\{}:,afkx\x00\x1f\x7f";
        let (mut read, mut edits) = (0, 0);
        for (key, window_end, sum, watermark, kind) in records {
            let record = Record {
                key: key.to_string(),
                window_end,
                sum,
                watermark,
                kind,
            };
            let line = record.to_json_line().into_bytes();
            assert_eq!(parse_canonical(&line), Some(record.clone()), "{record:?}");
            let mut variants = Vec::new();
            for at in 0..=line.len() {
                if at < line.len() {
                    let mut deleted = line.clone();
                    deleted.remove(at);
                    variants.push(deleted);
                }
                for &byte in bytes {
                    if at < line.len() {
                        let mut replaced = line.clone();
                        replaced[at] = byte;
                        variants.push(replaced);
                    }
                    let mut inserted = line.clone();
                    inserted.insert(at, byte);
                    variants.push(inserted);
                }
            }
            for variant in variants {
                // The check recovery makes agrees with parsing, on every edit, UTF-8 or not.
                let parsed = std::str::from_utf8(&variant)
                    .ok()
                    .and_then(Record::parse_line);
                assert_eq!(Record::is_record_line(&variant), parsed.is_some());
                let Ok(text) = std::str::from_utf8(&variant) else {
                    continue;
                };
                edits += 1;
                if let Some(fast) = parse_canonical(&variant) {
                    read += 1;
                    let serde: Option<Record> = serde_json::from_str(text).ok();
                    assert_eq!(Some(fast), serde, "{text}");
                }
            }
        }
        assert_eq!((edits, read), (33155, 3178));
    }

    #[test]
    fn records_round_trip_through_the_chapter_format() {
        let record = Record {
            key: "25:20".to_string(),
            window_end: 20,
            sum: 155,
            watermark: 21,
            kind: RecordKind::LateUpdate,
        };
        let line = record.to_json_line();
        assert_eq!(
            line,
            r#"{"key": "25:20", "window_end": 20, "sum": 155, "watermark": 21, "kind": "late-update"}"#
        );
        assert_eq!(Record::parse_line(&line), Some(record));
        assert_eq!(Record::parse_line(&line[..line.len() - 1]), None);
        assert_eq!(Record::parse_line("\0\0\0"), None);
    }
}
