//! Checkpoints: the operator state plus the input position, and their on-disk form.
//!
//! A checkpoint taken after event i has `index = i + 1`: the next event to read on recovery.
//! It is stored as `state-<index>.json`, one JSON object.

use crate::window::{OperatorState, WindowState};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

const FILE_PREFIX: &str = "state-";
const FILE_SUFFIX: &str = ".json";

/// A consistent copy of the operator state and how far the input was consumed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// The index of the next event to read after restoring this checkpoint.
    pub index: u64,
    pub state: OperatorState,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckpointFile {
    index: u64,
    max_ts: Option<i64>,
    windows: Vec<WindowFile>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WindowFile {
    end: i64,
    sum: i128,
    cnt: u64,
    fired: bool,
}

impl Checkpoint {
    /// `state-<index>.json`.
    pub fn file_name(index: u64) -> String {
        format!("{FILE_PREFIX}{index}{FILE_SUFFIX}")
    }

    /// The index named by a checkpoint file name, or `None` for any other file (temp files too).
    pub fn index_from_file_name(name: &str) -> Option<u64> {
        let digits = name.strip_prefix(FILE_PREFIX)?.strip_suffix(FILE_SUFFIX)?;
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok()
    }

    pub fn encode(&self) -> Vec<u8> {
        let file = CheckpointFile {
            index: self.index,
            max_ts: self.state.max_ts,
            windows: self
                .state
                .windows
                .iter()
                .map(|(&end, w)| WindowFile {
                    end,
                    sum: w.sum,
                    cnt: w.cnt,
                    fired: w.fired,
                })
                .collect(),
        };
        serde_json::to_vec(&file).expect("a checkpoint always serializes")
    }

    /// Decodes a checkpoint file; the error says what is wrong with it.
    pub fn decode(bytes: &[u8]) -> Result<Checkpoint, String> {
        let file: CheckpointFile =
            serde_json::from_slice(bytes).map_err(|e| format!("unreadable checkpoint: {e}"))?;
        let mut windows = BTreeMap::new();
        for w in file.windows {
            let state = WindowState {
                sum: w.sum,
                cnt: w.cnt,
                fired: w.fired,
            };
            if windows.insert(w.end, state).is_some() {
                return Err(format!("window {} appears twice", w.end));
            }
        }
        if file.max_ts.is_none() && !windows.is_empty() {
            return Err("windows without a max_ts".to_string());
        }
        Ok(Checkpoint {
            index: file.index,
            state: OperatorState {
                windows,
                max_ts: file.max_ts,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoints_round_trip_and_names_parse() {
        let mut state = OperatorState::default();
        state.windows.insert(
            10,
            WindowState {
                sum: 40,
                cnt: 8,
                fired: false,
            },
        );
        state.max_ts = Some(9);
        let checkpoint = Checkpoint { index: 8, state };
        let bytes = checkpoint.encode();
        assert_eq!(
            String::from_utf8(bytes.clone()).unwrap(),
            r#"{"index":8,"max_ts":9,"windows":[{"end":10,"sum":40,"cnt":8,"fired":false}]}"#
        );
        assert_eq!(Checkpoint::decode(&bytes), Ok(checkpoint));
        assert!(Checkpoint::decode(&bytes[..10]).is_err());
        assert_eq!(Checkpoint::file_name(16), "state-16.json");
        assert_eq!(Checkpoint::index_from_file_name("state-16.json"), Some(16));
        assert_eq!(Checkpoint::index_from_file_name("state-16.json.tmp"), None);
        assert_eq!(Checkpoint::index_from_file_name("state-.json"), None);
        assert_eq!(Checkpoint::index_from_file_name("state-+1.json"), None);
        assert_eq!(Checkpoint::index_from_file_name("sink-append.jsonl"), None);
    }
}
