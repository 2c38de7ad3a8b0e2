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
use crate::observation::common_prefix_len;
use keel_engine::sink::readable_prefix_len_bytes;
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
            if shared > at {
                pieces = cut(&last.pieces, shared);
                at = shared;
            }
        }
        // Runs of the known file's whole lines, as long as the file runs along it, and
        // between them line by line (a last line may lack its '\n'): a line that is not the
        // next of the run before it starts a run where the known file has the same line, or
        // is its own.
        let mut line = Vec::new();
        // Bounded: every round takes at least one byte.
        while at < len_bytes {
            if let Some(KeptPiece::Known { to, .. }) = pieces.last_mut() {
                let same = common_len(file, at, known.bytes(), *to, len_bytes - at);
                let end = known.line_start_within(*to + same);
                if end > *to {
                    at += end - *to;
                    *to = end;
                    continue;
                }
            }
            line.clear();
            while at + line.len() < len_bytes && line.last() != Some(&b'\n') {
                let run = file.run_from(at + line.len(), len_bytes - at - line.len());
                let take = memchr::memchr(b'\n', run).map_or(run.len(), |i| i + 1);
                line.extend_from_slice(&run[..take]);
            }
            at += line.len();
            let start = (line.last() == Some(&b'\n'))
                .then(|| known.line_start_of(&line))
                .flatten();
            match (start, pieces.last_mut()) {
                (Some(from), _) => pieces.push(KeptPiece::Known {
                    from,
                    to: from + line.len(),
                }),
                (None, Some(KeptPiece::Own(own))) => own.extend_from_slice(&line),
                (None, _) => pieces.push(KeptPiece::Own(line.clone())),
            }
        }
        if let Some(memo) = memo {
            *memo.borrow_mut() = DescribedFile {
                file: file.clone(),
                len_bytes,
                pieces: cut(&pieces, len_bytes),
            };
        }
        pieces
    }

    /// The length of the longest prefix of `file` made of whole record lines (what the
    /// connector's open keeps: `keel_engine::sink::readable_prefix_len_bytes`), where
    /// `pieces` describe it and every line of the known file is a record line: the runs of
    /// the known file's whole lines it starts with are taken as read, and only the bytes
    /// after them are read.
    pub(super) fn readable_len_bytes(&self, pieces: &[KeptPiece], file: &Contents) -> usize {
        let known = self.known.as_deref().expect("pieces of a known file");
        let mut whole_bytes = 0;
        for piece in pieces {
            match *piece {
                KeptPiece::Known { from, to } if known.whole_lines_count(from..to).is_some() => {
                    whole_bytes += to - from
                }
                _ => break,
            }
        }
        let rest = file.copy_range(whole_bytes..file.len());
        let readable_bytes = whole_bytes + readable_prefix_len_bytes(&rest);
        debug_assert_eq!(readable_bytes, readable_prefix_len_bytes(&file.to_vec()));
        readable_bytes
    }
}

/// How many bytes `a` from `a_at` and `b` from `b_at` begin with alike, at most `max_bytes`
/// (compared a run of each at a time).
fn common_len(a: &Contents, a_at: usize, b: &Contents, b_at: usize, max_bytes: usize) -> usize {
    let mut same = 0;
    // Bounded: every round compares at least a byte, or stops.
    while same < max_bytes {
        let ours = a.run_from(a_at + same, max_bytes - same);
        let theirs = b.run_from(b_at + same, ours.len());
        if theirs.is_empty() {
            break;
        }
        let n = common_prefix_len(&ours[..theirs.len()], theirs);
        same += n;
        if n < theirs.len() {
            break;
        }
    }
    same
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
