//! A point's sink file described in pieces against the fault-free file: runs of the known
//! file's bytes, wherever they lie in it, and bytes of its own between them. A depth-2
//! point's file departs from the fault-free file at its first fault, and from there holds
//! the known file's lines again (the first fault's replay, then the run going on): described
//! so, its view is read, hashed and judged from the known file's records and its own few
//! (`observation/known.rs`, `observation/records.rs`, `verdict/splice.rs`), not parsed again
//! for every second fault.
//!
//! Describing costs what the file adds to the last file described (kept in
//! [`SharedFutures`](super::SharedFutures)): the points of a first fault come one after the
//! other, and each point's file shares its bytes with the last one's up to about where the
//! two points' second faults fell.

use super::restart::KeptPiece;
use super::Forks;
use crate::observation::{common_prefix_len, KnownSink, Piece};
use keel_sim::Contents;
use std::cell::RefCell;

/// The last sink file described, and its description.
#[derive(Debug, Default)]
pub struct DescribedFile {
    file: Contents,
    /// How many of `file`'s bytes the pieces describe.
    len_bytes: usize,
    pieces: Vec<KeptPiece>,
}

impl Forks {
    /// The first `len_bytes` of `file`, whose first `common_bytes` are the known file's at
    /// its start (measured already), in pieces: runs of the known file's bytes, and bytes of
    /// its own. The pieces of a file the last description shares bytes with (`memo`) are
    /// taken from it up to where the two files differ.
    pub(super) fn describe(
        &self,
        file: &Contents,
        len_bytes: usize,
        common_bytes: usize,
        memo: Option<&RefCell<DescribedFile>>,
    ) -> Vec<KeptPiece> {
        assert!(len_bytes <= file.len());
        assert!(common_bytes <= file.len());
        let Some(known) = self.known.as_deref() else {
            return vec![KeptPiece::Own(file.copy_range(0..len_bytes))];
        };
        // From the start of the line the files first differ in, so that the line is looked
        // up whole (a replay's first line shares a few bytes with the line it follows).
        let common_bytes = known.line_start_within(common_bytes.min(len_bytes));
        let mut pieces = vec![KeptPiece::Known {
            from: 0,
            to: common_bytes,
        }];
        let mut at = common_bytes;
        if let Some(memo) = memo {
            let last = memo.borrow();
            let shared = last
                .file
                .common_prefix_len(file)
                .min(last.len_bytes)
                .min(len_bytes);
            // From the start of the line the two differ in, as for the known prefix.
            let shared = file
                .last_index_of(b'\n', shared)
                .map_or(0, |newline| newline + 1);
            if shared > at {
                pieces = cut(&last.pieces, shared);
                at = shared;
            }
        }
        // The bytes after what is described, in one run (a line may span two chunks).
        push_described(known, &mut pieces, &file.copy_range(at..len_bytes));
        if let Some(memo) = memo {
            *memo.borrow_mut() = DescribedFile {
                file: file.clone(),
                len_bytes,
                pieces: cut(&pieces, len_bytes),
            };
        }
        pieces
    }

    /// `described` (a point's file up to where it stopped) followed by `rest` (what a run
    /// that stood for it appended), with the bytes of its own in `rest` described as
    /// [`Forks::describe`] describes a file: a restart class's run appended its replay as
    /// bytes of its own, which are the known file's lines again.
    pub(super) fn described_with(
        &self,
        mut described: Vec<KeptPiece>,
        rest: &[Piece],
    ) -> Vec<KeptPiece> {
        let Some(known) = self.known.as_deref() else {
            described.extend(rest.iter().map(KeptPiece::of));
            return described;
        };
        for piece in rest {
            match *piece {
                Piece::Known { from, to } => match described.last_mut() {
                    Some(KeptPiece::Known { to: end, .. }) if *end == from => *end = to,
                    _ => described.push(KeptPiece::Known { from, to }),
                },
                Piece::Own(bytes) => push_described(known, &mut described, bytes),
            }
        }
        described
    }
}

/// Appends `bytes` to the file `pieces` describe, described: as long as they run along the
/// known file from where the last piece's run of it ends, that run grows to the end of a
/// known line; a whole line after is looked up in the known file (a run starts there), or
/// is its own.
fn push_described(known: &KnownSink, pieces: &mut Vec<KeptPiece>, mut bytes: &[u8]) {
    // Bounded: every round takes at least one byte.
    while !bytes.is_empty() {
        if let Some(KeptPiece::Known { to, .. }) = pieces.last_mut() {
            let mut same = 0;
            // Bounded: every round compares at least a byte, or stops.
            while same < bytes.len() {
                let theirs = known.bytes().run_from(*to + same, bytes.len() - same);
                if theirs.is_empty() {
                    break;
                }
                let n = common_prefix_len(&bytes[same..same + theirs.len()], theirs);
                same += n;
                if n < theirs.len() {
                    break;
                }
            }
            let end = known.line_start_within(*to + same);
            if end > *to {
                bytes = &bytes[end - *to..];
                *to = end;
                continue;
            }
        }
        let line_len = memchr::memchr(b'\n', bytes).map_or(bytes.len(), |i| i + 1);
        let (line, rest) = bytes.split_at(line_len);
        bytes = rest;
        push_line(known, pieces, line);
    }
}

/// Appends one line (a last one may lack its '\n') that does not continue the last piece's
/// run of the known file: a run starts where the known file has the same whole line, or it
/// is bytes of its own.
fn push_line(known: &KnownSink, pieces: &mut Vec<KeptPiece>, line: &[u8]) {
    let start = (line.last() == Some(&b'\n'))
        .then(|| known.line_start_of(line))
        .flatten();
    match (start, pieces.last_mut()) {
        (Some(from), _) => pieces.push(KeptPiece::Known {
            from,
            to: from + line.len(),
        }),
        (None, Some(KeptPiece::Own(own))) => own.extend_from_slice(line),
        (None, _) => pieces.push(KeptPiece::Own(line.to_vec())),
    }
}

/// The first `len_bytes` of the file `pieces` describe.
fn cut(pieces: &[KeptPiece], len_bytes: usize) -> Vec<KeptPiece> {
    let mut out = Vec::with_capacity(pieces.len());
    let mut left = len_bytes;
    for piece in pieces {
        if left == 0 {
            break;
        }
        let piece = match piece {
            KeptPiece::Known { from, to } => KeptPiece::Known {
                from: *from,
                to: *to.min(&(from + left)),
            },
            KeptPiece::Own(bytes) => KeptPiece::Own(bytes[..bytes.len().min(left)].to_vec()),
        };
        left -= piece.len();
        out.push(piece);
    }
    assert_eq!(left, 0, "the pieces hold the bytes cut");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Six record lines, the known file.
    fn known_lines() -> Vec<Vec<u8>> {
        (0..6)
            .map(|i| format!("{{\"key\": \"{i}:10\", \"window_end\": 10, \"sum\": {i}, \"watermark\": 9, \"kind\": \"fire\"}}\n").into_bytes())
            .collect()
    }

    /// Where line `i` of `lines` starts.
    fn start(lines: &[Vec<u8>], i: usize) -> usize {
        lines[..i].iter().map(Vec::len).sum()
    }

    /// `bytes` appended to `pieces`, described against `lines` (as `(from, to)` for a known
    /// run, the bytes for its own), checked to hold exactly `bytes` after `pieces`.
    fn check(
        lines: &[Vec<u8>],
        mut pieces: Vec<KeptPiece>,
        bytes: &[u8],
    ) -> Vec<Result<(usize, usize), Vec<u8>>> {
        let known_bytes: Vec<u8> = lines.concat();
        let known = KnownSink::new(Contents::from(&known_bytes[..]));
        let before = pieces.len();
        let mut made: Vec<u8> = Vec::new();
        push_described(&known, &mut pieces, bytes);
        for piece in &pieces {
            match piece {
                KeptPiece::Known { from, to } => made.extend_from_slice(&known_bytes[*from..*to]),
                KeptPiece::Own(own) => made.extend_from_slice(own),
            }
        }
        assert!(made.ends_with(bytes));
        pieces
            .into_iter()
            .skip(before.saturating_sub(1))
            .map(|piece| match piece {
                KeptPiece::Known { from, to } => Ok((from, to)),
                KeptPiece::Own(own) => Err(own),
            })
            .collect()
    }

    #[test]
    fn a_replay_is_described_as_runs_of_the_known_file() {
        let lines = known_lines();
        let at = |i| start(&lines, i);
        // Lines 0..4, then 1..6 again (a replay from line 1): two runs.
        let replay: Vec<u8> = [&lines[..4], &lines[1..]].concat().concat();
        assert_eq!(
            check(&lines, Vec::new(), &replay),
            vec![Ok((0, at(4))), Ok((at(1), at(6)))]
        );
        // After a run that ends inside a line, its rest continues the run.
        let mid = at(2) + 5;
        let pieces = vec![KeptPiece::Known { from: 0, to: mid }];
        let rest: Vec<u8> = [&lines.concat()[mid..at(3)], &lines[0][..]].concat();
        assert_eq!(
            check(&lines, pieces, &rest),
            vec![Ok((0, at(3))), Ok((0, at(1)))]
        );
        // A torn line (no '\n') and a line the known file lacks are bytes of their own; the
        // known line after a line of its own starts a run.
        let torn: Vec<u8> = [&lines[2][..10], b"x\n", &lines[5][..]].concat();
        assert_eq!(
            check(&lines, Vec::new(), &torn),
            vec![Err(torn[..12].to_vec()), Ok((at(5), at(6)))]
        );
    }
}
