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
    pub fn parse_line(line: &str) -> Option<Record> {
        serde_json::from_str(line).ok()
    }
}

impl fmt::Display for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json_line())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
