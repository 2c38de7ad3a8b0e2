//! Checkpoints: the operator state plus the input position, their on-disk form and validation.
//!
//! A checkpoint taken after event i has `index = i + 1`: the next event to read on recovery.
//! On disk it is one header line and a JSON body:
//!
//! ```text
//! keel-checkpoint v1 len=<body bytes> crc32=<8 hex digits>
//! {"index":8,"max_ts":9,"windows":[{"end":10,"sum":40,"cnt":8,"fired":false}]}
//! ```
//!
//! The `size-only` protocol writes the header without `crc32=` and trusts any file whose
//! length matches its header: the classic mistake a torn write punishes.
//!
//! A body whose checksum matches is the engine's own writing, byte for byte: if it does not
//! decode (or holds numbers out of range), no fault made it so, the engine wrote what it
//! cannot read. Recovery fails loudly on it (`Invalid::TrustedButCorrupt`) instead of falling
//! back to an older checkpoint, which would hide the defect behind extra replay.

use crate::event::{EVENTS_MAX, EVENT_INT_MAX, EVENT_INT_MIN};
use crate::window::{OperatorState, WindowState};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

const FILE_PREFIX: &str = "state-";
const FILE_SUFFIX: &str = ".json";
pub(crate) const HEADER_MAGIC: &str = "keel-checkpoint v1";
/// A header longer than this is not a header (bounds the scan for its newline).
const HEADER_LEN_MAX_BYTES: usize = 128;

/// A consistent copy of the operator state and how far the input was consumed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The index of the next event to read after restoring this checkpoint.
    pub index: u64,
    pub state: OperatorState,
    /// Pre-committed sink transactions that recovery must commit (two-phase-commit sink).
    pub transactions: Vec<PendingTxn>,
}

/// A sink transaction pre-committed by a checkpoint: (transactional id, producer epoch).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PendingTxn {
    pub id: String,
    pub epoch: u32,
}

/// Why a checkpoint file was not restored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Invalid {
    /// Detected as damaged (torn, empty, bad checksum): skip it and try an older one.
    Rejected(String),
    /// Trusted (its checksum matched, or its length under `size-only`) but unreadable:
    /// recovery cannot go on.
    TrustedButCorrupt(String),
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckpointFile {
    index: u64,
    max_ts: Option<i64>,
    windows: Vec<WindowFile>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    transactions: Vec<PendingTxn>,
    /// Events dropped as too late so far (absent when 0: unbounded lateness never drops, and
    /// its files stay byte for byte what they were).
    #[serde(default, skip_serializing_if = "is_zero")]
    dropped_late: u64,
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}

/// `CheckpointFile` by reference, for writing without a copy of the state's windows.
#[derive(Serialize)]
struct CheckpointFileRef<'a> {
    index: u64,
    max_ts: Option<i64>,
    windows: Vec<WindowFile>,
    #[serde(skip_serializing_if = "<[PendingTxn]>::is_empty")]
    transactions: &'a [PendingTxn],
    #[serde(skip_serializing_if = "is_zero")]
    dropped_late: u64,
}

/// One window as checkpoint files (bases and deltas too) write it.
#[derive(Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WindowFile {
    pub(crate) end: i64,
    pub(crate) sum: i128,
    pub(crate) cnt: u64,
    pub(crate) fired: bool,
}

impl WindowFile {
    /// What serde_json writes for a window (bodies splice them by hand: tests compare).
    #[cfg(test)]
    pub(crate) fn of(end: i64, w: &WindowState) -> WindowFile {
        WindowFile {
            end,
            sum: w.sum,
            cnt: w.cnt,
            fired: w.fired,
        }
    }

    pub(crate) fn state(&self) -> WindowState {
        WindowState {
            sum: self.sum,
            cnt: self.cnt,
            fired: self.fired,
        }
    }
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

    /// The JSON body.
    pub fn encode_body(&self) -> Vec<u8> {
        encode_state_body(self.index, &self.state, &self.transactions)
    }

    /// Header line and body; the header carries a CRC-32 of the body when `checksum` is set.
    pub fn encode_file(&self, checksum: bool) -> Vec<u8> {
        seal(HEADER_MAGIC, &self.encode_body(), checksum)
    }

    /// Validates and decodes a checkpoint file. With `checksum`, a file must carry a CRC that
    /// matches; without, a body of the length the header states is trusted as it is.
    pub fn decode_file(bytes: &[u8], checksum: bool) -> Result<Checkpoint, Invalid> {
        let body = unseal(HEADER_MAGIC, bytes, checksum)?;
        if checksum {
            // Intact: the engine wrote these very bytes (see the file header).
            Checkpoint::decode_body(body)
                .map_err(|why| Invalid::TrustedButCorrupt(format!("passes its checksum but {why}")))
        } else {
            Checkpoint::decode_body(body).map_err(|why| {
                Invalid::TrustedButCorrupt(format!("has the right length but {why}"))
            })
        }
    }

    /// Decodes the JSON body; the error says what is wrong with it.
    pub fn decode_body(bytes: &[u8]) -> Result<Checkpoint, String> {
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
        let state = OperatorState {
            windows: windows.into(),
            max_ts: file.max_ts,
            dropped_late: file.dropped_late,
        };
        check_state(&state)?;
        Ok(Checkpoint {
            index: file.index,
            state,
            transactions: file.transactions,
        })
    }
}

/// The JSON body of a checkpoint (and of an incremental base) of `state` at `index`.
///
/// serde_json writes every field but the windows; they, most of a body's bytes, are
/// written by hand into its `"windows":[]` ([`write_windows_json`]): the same bytes as
/// serde_json's, tested, at a fraction of its cost (a base holds every window).
pub(crate) fn encode_state_body(
    index: u64,
    state: &OperatorState,
    transactions: &[PendingTxn],
) -> Vec<u8> {
    let file = CheckpointFileRef {
        index,
        max_ts: state.max_ts,
        windows: Vec::new(),
        transactions,
        dropped_late: state.dropped_late,
    };
    let frame = serde_json::to_vec(&file).expect("a checkpoint always serializes");
    splice_windows(&frame, state.windows.iter().map(|(&end, w)| (end, w)))
}

/// `frame`, a body serde_json wrote with an empty `windows` field, with `windows` in it.
/// The first `"windows":[]` of the frame must be the field: no string before it may hold
/// those bytes (only numbers and keel's own file names come before it in a body).
pub(crate) fn splice_windows<'a>(
    frame: &[u8],
    windows: impl ExactSizeIterator<Item = (i64, &'a WindowState)>,
) -> Vec<u8> {
    let marker: &[u8] = b"\"windows\":[]";
    let at = frame
        .windows(marker.len())
        .position(|bytes| bytes == marker)
        .expect("the windows field is written")
        + marker.len()
        - 2;
    assert_eq!(&frame[at..at + 2], b"[]");
    let mut body = Vec::with_capacity(frame.len() + windows.len() * 48);
    body.extend_from_slice(&frame[..at]);
    write_windows_json(&mut body, windows);
    body.extend_from_slice(&frame[at + 2..]);
    body
}

/// Appends `windows` as serde_json writes a `[WindowFile]`, compact: `[{"end":E,"sum":S,
/// "cnt":C,"fired":B},...]`.
pub(crate) fn write_windows_json<'a>(
    out: &mut Vec<u8>,
    windows: impl Iterator<Item = (i64, &'a WindowState)>,
) {
    out.push(b'[');
    for (position, (end, w)) in windows.enumerate() {
        if position > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"end\":");
        write_decimal(out, i128::from(end));
        out.extend_from_slice(b",\"sum\":");
        write_decimal(out, w.sum);
        out.extend_from_slice(b",\"cnt\":");
        write_decimal(out, i128::from(w.cnt));
        out.extend_from_slice(if w.fired {
            b",\"fired\":true}"
        } else {
            b",\"fired\":false}"
        });
    }
    out.push(b']');
}

/// Appends `value` in decimal, as `Display` (and serde_json) writes it.
fn write_decimal(out: &mut Vec<u8>, value: i128) {
    out.extend_from_slice(keel_sim::Decimal::signed(value).as_bytes());
}

/// The largest sum a window can reach: every event of the input at the largest value.
const WINDOW_SUM_MAX: i128 = EVENTS_MAX as i128 * EVENT_INT_MAX as i128;

/// Whether one window holds numbers the engine's arithmetic is safe for: what
/// [`check_state`] asks of each.
pub(crate) fn window_in_range(w: &WindowState) -> bool {
    // A window counts at most every event of the input (the next event adds one).
    w.sum.abs() <= WINDOW_SUM_MAX && w.cnt <= EVENTS_MAX as u64
}

/// What a restored state may hold: numbers the engine's arithmetic is safe for.
pub(crate) fn check_state(state: &OperatorState) -> Result<(), String> {
    check_max_ts(state)?;
    if let Some((end, w)) = state
        .windows
        .iter()
        .find(|(_, w)| w.sum.abs() > WINDOW_SUM_MAX)
    {
        return Err(format!("window {end} has sum {}, out of range", w.sum));
    }
    if let Some((end, w)) = state
        .windows
        .iter()
        .find(|(_, w)| w.cnt > EVENTS_MAX as u64)
    {
        return Err(format!("window {end} has count {}, out of range", w.cnt));
    }
    check_dropped_late(state)
}

/// [`check_state`] of a state whose windows are each known to be in range
/// ([`window_in_range`]): the same verdict without reading them. An incremental restore
/// knows so of a base that decoded (its decoding checked every window) and of the deltas
/// it applied, and a chain's base holds every window of the run.
pub(crate) fn check_state_windows_in_range(state: &OperatorState) -> Result<(), String> {
    check_max_ts(state)?;
    check_dropped_late(state)
}

fn check_max_ts(state: &OperatorState) -> Result<(), String> {
    if state.max_ts.is_none() && !state.windows.is_empty() {
        return Err("windows without a max_ts".to_string());
    }
    // The engine's arithmetic is safe for what events can hold (see `JSON_SAFE_INT_MAX`);
    // a trusted but damaged file must not bring it numbers no input can produce.
    if let Some(max_ts) = state
        .max_ts
        .filter(|ts| !(EVENT_INT_MIN..=EVENT_INT_MAX).contains(ts))
    {
        return Err(format!("max_ts {max_ts} is out of range"));
    }
    Ok(())
}

fn check_dropped_late(state: &OperatorState) -> Result<(), String> {
    if state.dropped_late > EVENTS_MAX as u64 {
        return Err(format!(
            "dropped_late {} is out of range",
            state.dropped_late
        ));
    }
    Ok(())
}

/// `<magic> len=<body bytes>[ crc32=<8 hex digits>]\n` and the body.
pub(crate) fn seal(magic: &str, body: &[u8], checksum: bool) -> Vec<u8> {
    let mut header = format!("{magic} len={}", body.len());
    if checksum {
        header.push_str(&format!(" crc32={:08x}", crc32fast::hash(body)));
    }
    header.push('\n');
    let mut bytes = header.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// The body of a file `seal` wrote with `magic`, or why the file is damaged (`Rejected`):
/// no header, a body of another length than the header's, and with `checksum` a missing or
/// mismatching CRC-32.
pub(crate) fn unseal<'a>(
    magic: &str,
    bytes: &'a [u8],
    checksum: bool,
) -> Result<&'a [u8], Invalid> {
    let reject = |why: &str| Invalid::Rejected(why.to_string());
    if bytes.is_empty() {
        return Err(reject("empty file"));
    }
    let newline = bytes
        .iter()
        .take(HEADER_LEN_MAX_BYTES)
        .position(|&b| b == b'\n')
        .ok_or_else(|| reject("no header line"))?;
    let header =
        std::str::from_utf8(&bytes[..newline]).map_err(|_| reject("header is not text"))?;
    let body = &bytes[newline + 1..];
    let fields = header
        .strip_prefix(magic)
        .ok_or_else(|| reject("bad header magic"))?;
    let mut len_bytes = None;
    let mut crc = None;
    for field in fields.split_whitespace() {
        if let Some(v) = field.strip_prefix("len=") {
            len_bytes = v.parse::<usize>().ok();
        } else if let Some(v) = field.strip_prefix("crc32=") {
            crc = u32::from_str_radix(v, 16).ok();
        }
    }
    let len_bytes = len_bytes.ok_or_else(|| reject("header has no length"))?;
    if body.len() != len_bytes {
        return Err(Invalid::Rejected(format!(
            "torn: body is {} bytes, header says {len_bytes}",
            body.len()
        )));
    }
    if checksum {
        let crc = crc.ok_or_else(|| reject("header has no checksum"))?;
        if crc32fast::hash(body) != crc {
            return Err(reject("checksum mismatch"));
        }
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hand-written windows are serde_json's bytes, extremes included, with and without
    /// transactions and a dropped count around them.
    #[test]
    fn a_body_is_the_bytes_serde_json_writes() {
        let mut state = OperatorState::default();
        for body_case in 0..3 {
            // A transaction whose id holds the marker the windows are spliced at.
            let transactions: Vec<PendingTxn> = (0..body_case)
                .map(|epoch| PendingTxn {
                    id: "\"windows\":[]".to_string(),
                    epoch: epoch as u32,
                })
                .collect();
            let file = CheckpointFileRef {
                index: 7,
                max_ts: state.max_ts,
                windows: state
                    .windows
                    .iter()
                    .map(|(&end, w)| WindowFile::of(end, w))
                    .collect(),
                transactions: &transactions,
                dropped_late: state.dropped_late,
            };
            let want = serde_json::to_vec(&file).unwrap();
            let got = encode_state_body(7, &state, &transactions);
            assert_eq!(
                String::from_utf8(got).unwrap(),
                String::from_utf8(want).unwrap(),
                "case {body_case}"
            );
            state.max_ts = Some(i64::MIN);
            state.dropped_late = u64::MAX;
            for (end, sum, cnt, fired) in [
                (i64::MIN, i128::MIN, 0, false),
                (-10, -1, 1, true),
                (0, 0, 9, false),
                (i64::MAX, i128::MAX, u64::MAX, true),
            ] {
                state.windows.insert(
                    end.saturating_sub(body_case),
                    WindowState { sum, cnt, fired },
                );
            }
        }
    }

    fn sample() -> Checkpoint {
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
        Checkpoint {
            index: 8,
            state,
            transactions: Vec::new(),
        }
    }

    #[test]
    fn checkpoints_round_trip_with_a_checksummed_header() {
        let bytes = sample().encode_file(true);
        let text = String::from_utf8(bytes.clone()).unwrap();
        let body =
            r#"{"index":8,"max_ts":9,"windows":[{"end":10,"sum":40,"cnt":8,"fired":false}]}"#;
        assert_eq!(
            text,
            format!(
                "keel-checkpoint v1 len={} crc32={:08x}\n{body}",
                body.len(),
                crc32fast::hash(body.as_bytes())
            )
        );
        assert_eq!(Checkpoint::decode_file(&bytes, true), Ok(sample()));
    }

    #[test]
    fn dropped_late_is_written_only_when_some_event_was_dropped() {
        let mut dropped = sample();
        dropped.state.dropped_late = 3;
        let body = String::from_utf8(dropped.encode_body()).unwrap();
        assert_eq!(
            body,
            r#"{"index":8,"max_ts":9,"windows":[{"end":10,"sum":40,"cnt":8,"fired":false}],"dropped_late":3}"#
        );
        assert_eq!(Checkpoint::decode_body(body.as_bytes()), Ok(dropped));
        let absurd = body.replace(":3}", ":1000001}");
        assert_eq!(
            Checkpoint::decode_body(absurd.as_bytes()),
            Err("dropped_late 1000001 is out of range".to_string())
        );
    }

    #[test]
    fn damaged_files_are_rejected_or_trusted_by_protocol() {
        let good = sample().encode_file(true);
        let rejected = |bytes: &[u8]| {
            matches!(
                Checkpoint::decode_file(bytes, true),
                Err(Invalid::Rejected(_))
            )
        };
        assert!(rejected(b""));
        assert!(rejected(&good[..good.len() - 1]));
        assert!(rejected(&vec![0; good.len()]));
        let mut flipped = good.clone();
        *flipped.last_mut().unwrap() = b' ';
        assert!(rejected(&flipped));

        // size-only: the right length is trusted even when the body is torn to zeros.
        let unchecked = sample().encode_file(false);
        assert_eq!(Checkpoint::decode_file(&unchecked, false), Ok(sample()));
        let header_len = unchecked.iter().position(|&b| b == b'\n').unwrap() + 1;
        let mut torn = unchecked.clone();
        torn[header_len + 5..].fill(0);
        assert!(matches!(
            Checkpoint::decode_file(&torn, false),
            Err(Invalid::TrustedButCorrupt(_))
        ));
    }

    #[test]
    fn an_intact_file_that_does_not_decode_is_the_engines_defect_not_a_fault() {
        // A body the checksum vouches for but that holds a sum no input can produce.
        let body = br#"{"index":8,"max_ts":9,"windows":[{"end":10,"sum":170141183460469231731687303715884105727,"cnt":8,"fired":false}]}"#;
        let mut bytes = format!(
            "keel-checkpoint v1 len={} crc32={:08x}\n",
            body.len(),
            crc32fast::hash(body)
        )
        .into_bytes();
        bytes.extend_from_slice(body);
        assert_eq!(
            Checkpoint::decode_file(&bytes, true),
            Err(Invalid::TrustedButCorrupt(format!(
                "passes its checksum but window 10 has sum {}, out of range",
                i128::MAX
            )))
        );
    }

    #[test]
    fn numbers_no_input_can_produce_are_corrupt() {
        let body = |max_ts: i64, sum: i128| {
            format!(
                r#"{{"index":8,"max_ts":{max_ts},"windows":[{{"end":10,"sum":{sum},"cnt":8,"fired":false}}]}}"#
            )
        };
        assert!(Checkpoint::decode_body(body(9_007_199_254_740_991, 40).as_bytes()).is_ok());
        assert_eq!(
            Checkpoint::decode_body(body(i64::MIN, 40).as_bytes()),
            Err("max_ts -9223372036854775808 is out of range".to_string())
        );
        assert_eq!(
            Checkpoint::decode_body(body(9, i128::MAX).as_bytes()),
            Err(format!("window 10 has sum {}, out of range", i128::MAX))
        );
        // A count the next event would overflow (a panic in debug builds).
        let count = |cnt: u64| {
            format!(
                r#"{{"index":8,"max_ts":9,"windows":[{{"end":10,"sum":40,"cnt":{cnt},"fired":false}}]}}"#
            )
        };
        assert!(Checkpoint::decode_body(count(1_000_000).as_bytes()).is_ok());
        assert_eq!(
            Checkpoint::decode_body(count(u64::MAX).as_bytes()),
            Err("window 10 has count 18446744073709551615, out of range".to_string())
        );
    }

    #[test]
    fn checkpoint_file_names_parse() {
        assert_eq!(Checkpoint::file_name(16), "state-16.json");
        assert_eq!(Checkpoint::index_from_file_name("state-16.json"), Some(16));
        assert_eq!(Checkpoint::index_from_file_name("state-16.json.tmp"), None);
        assert_eq!(Checkpoint::index_from_file_name("state-.json"), None);
        assert_eq!(Checkpoint::index_from_file_name("state-+1.json"), None);
        assert_eq!(Checkpoint::index_from_file_name("sink-append.jsonl"), None);
    }
}
