//! A fault-free run's sink file read once, so that a forked point's file, which shares a
//! prefix and a suffix of lines with it, is read as a splice of its records around the lines
//! in between (`records.rs`): the view `observe_file` reads from the whole file.

use super::records::{KnownRecords, Records, Segment, Splice};
use super::{read_file, ViewObservation};
use keel_engine::Record;
use keel_sim::Contents;
use std::sync::{Arc, OnceLock};

/// A file sink's bytes (a fault-free run's) read once, line by line, so that a file sharing a
/// line-aligned prefix and suffix with them (a forked point's) is read from these lines and
/// only the bytes in between are parsed: [`KnownSink::observe`] sees exactly what
/// `observe_file` sees in the whole file.
///
/// Why the parts add up: a consumer's lines are the file's bytes split at every '\n' (a last
/// line without one included, a "\r" before a '\n' dropped), each read as UTF-8 with
/// invalid bytes replaced; no line, and no replaced sequence ('\n' is ASCII, never inside a
/// UTF-8 sequence), spans a '\n'. So where a file's bytes are cut at two line starts (offset
/// 0 or just after a '\n'), its lines are the lines of the three parts, in order, and a part
/// byte for byte equal to a run of the known file's whole lines has those lines.
#[derive(Clone, Debug)]
pub struct KnownSink {
    /// The file's bytes: the run's own chunks, shared, not a copy (19 MB of a
    /// million-event sweep's peak was this copy).
    bytes: Contents,
    /// Per line, in order: the offset where it ends (after its '\n', or the file's end for a
    /// last line without one) and whether it is a whole record.
    lines: Vec<(usize, bool)>,
    /// `records_before[i]`: how many of lines `..i` are whole records.
    records_before: Vec<usize>,
    /// The whole records, in order.
    records: Arc<KnownRecords>,
    /// Each line ending with a '\n' as (its [`line_hash`], its number), sorted:
    /// made the first time a line is looked up by its bytes ([`KnownSink::line_start_of`]).
    line_index: OnceLock<Vec<(u64, u32)>>,
}

impl KnownSink {
    /// Reads `bytes` line by line.
    pub fn new(bytes: Contents) -> KnownSink {
        KnownSink::sharing(bytes, None)
    }

    /// [`KnownSink::new`], its records `shared`'s where the file holds exactly those (a
    /// sweep's reference records: a million-event file read again kept them twice).
    pub fn sharing(bytes: Contents, shared: Option<&Arc<[Record]>>) -> KnownSink {
        let mut lines = Vec::new();
        // None while every record so far is `shared`'s at its place.
        let mut own: Option<Vec<Record>> = shared.is_none().then(Vec::new);
        let mut records_len = 0;
        let mut records_before = vec![0];
        let mut end = 0;
        for piece in lines_of(&bytes) {
            end += piece.len();
            let line = read_file(Some(&piece));
            assert_eq!(
                line.records.len() as u64 + line.corrupt_lines,
                1,
                "a piece up to a '\\n' is one line"
            );
            lines.push((end, line.corrupt_lines == 0));
            for record in line.records {
                match (&mut own, shared) {
                    (Some(own), _) => own.push(record),
                    (None, Some(shared)) if shared.get(records_len) == Some(&record) => {}
                    (None, shared) => {
                        let shared = shared.expect("own records unless shared");
                        let mut copied = shared[..records_len].to_vec();
                        copied.push(record);
                        own = Some(copied);
                    }
                }
                records_len += 1;
            }
            records_before.push(records_len);
        }
        assert_eq!(end, bytes.len());
        let records: Arc<[Record]> = match (own, shared) {
            (Some(own), _) => own.into(),
            (None, Some(shared)) if shared.len() == records_len => Arc::clone(shared),
            (None, shared) => shared.expect("own records unless shared")[..records_len].into(),
        };
        assert_eq!(records.len(), records_len);
        KnownSink {
            bytes,
            lines,
            records_before,
            records: Arc::new(KnownRecords::new(records)),
            line_index: OnceLock::new(),
        }
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &Contents {
        &self.bytes
    }

    /// How many of lines `lines` are not whole records.
    fn corrupt_in(&self, lines: std::ops::Range<usize>) -> u64 {
        let records = self.records_before[lines.end] - self.records_before[lines.start];
        (lines.len() - records) as u64
    }

    /// The lines whose bytes are exactly the known file's `range`, if it runs from a line
    /// start to a line start over whole lines (each ending with its '\n').
    fn whole_lines(&self, range: std::ops::Range<usize>) -> Option<std::ops::Range<usize>> {
        let first = self.lines.partition_point(|&(end, _)| end <= range.start);
        let end = self.lines.partition_point(|&(end, _)| end <= range.end);
        let whole = self.start(first) == range.start
            && self.start(end) == range.end
            && (range.is_empty() || self.bytes.byte_at(range.end - 1) == b'\n');
        whole.then_some(first..end)
    }

    /// How many lines the known file's `range` holds, if it runs from a line start to a
    /// line start over whole lines.
    pub fn whole_lines_count(&self, range: std::ops::Range<usize>) -> Option<usize> {
        self.whole_lines(range).map(|lines| lines.len())
    }

    /// How many records the known file holds before byte `at`, if `at` is a line start
    /// after whole lines.
    pub fn records_before_byte(&self, at: usize) -> Option<usize> {
        let lines = self.whole_lines(0..at)?;
        assert_eq!(lines.start, 0);
        Some(self.records_before[lines.end])
    }

    /// Where the first of the file's lines whose bytes are `line` starts (`line` ending with
    /// its '\n': one whole line).
    pub fn line_start_of(&self, line: &[u8]) -> Option<usize> {
        assert_eq!(line.iter().position(|&b| b == b'\n'), Some(line.len() - 1));
        let index = self.line_index.get_or_init(|| {
            let mut index = Vec::with_capacity(self.lines.len());
            for (i, &(end, _)) in self.lines.iter().enumerate() {
                let start = self.start(i);
                if end > start && self.bytes.byte_at(end - 1) == b'\n' {
                    let bytes = self.bytes.copy_range(start..end);
                    index.push((line_hash(&bytes), small_line(i)));
                }
            }
            index.sort_unstable();
            index
        });
        let hash = line_hash(line);
        let first = index.partition_point(|&(h, _)| h < hash);
        index[first..]
            .iter()
            .take_while(|&&(h, _)| h == hash)
            .map(|&(_, i)| self.start(i as usize))
            .find(|&start| self.bytes.holds_at(start, line))
    }

    /// Where the line that holds the byte at `at` starts (the file's length for `at` at or
    /// past its end, once its last line ends with a '\n').
    pub fn line_start_within(&self, at: usize) -> usize {
        self.start(self.lines.partition_point(|&(end, _)| end <= at))
    }

    /// Where line `i` starts.
    fn start(&self, i: usize) -> usize {
        i.checked_sub(1).map_or(0, |before| self.lines[before].0)
    }

    /// What a consumer sees in a file sink holding `bytes`: what `observe_file` sees, with
    /// the known file's whole lines that `bytes` begins and ends with taken as read.
    pub fn observe(&self, bytes: &[u8]) -> ViewObservation {
        self.observe_pieces(&[Piece::Own(bytes)])
    }

    /// [`KnownSink::observe`] of the file made of `pieces` in order, without making it: a
    /// piece of the known file's bytes lying where it lies in the known file is the same
    /// there without a comparison, so a file made of a prefix of the known file and a
    /// suffix of it costs what differs, not its length.
    pub fn observe_pieces(&self, pieces: &[Piece]) -> ViewObservation {
        let known = &self.bytes;
        let bytes = Laid::new(known, pieces);
        // The whole lines, each ending with a '\n', that both files begin with.
        let common = bytes.common_prefix_len();
        let terminated = self
            .lines
            .len()
            .saturating_sub(usize::from(known.last().is_some_and(|last| last != b'\n')));
        let prefix_lines = self
            .lines
            .partition_point(|&(end, _)| end <= common)
            .min(terminated);
        let prefix_bytes = self.start(prefix_lines);
        // The known file's lines that both end with, from a line start in each: the first
        // line of the known file after the prefix that starts in the common tail.
        let tail = bytes.common_suffix_len(prefix_bytes);
        let tail_start = known.len() - tail;
        let mut suffix_from = prefix_lines;
        if self.start(suffix_from) < tail_start {
            // Past every line that ends before the tail, and the one the tail begins in.
            suffix_from +=
                1 + self.lines[prefix_lines..].partition_point(|&(end, _)| end < tail_start);
        }
        // Where a line starts after the first byte of the tail, the '\n' before it is in the
        // tail, so in `bytes` too; where it starts at the tail's first byte, the byte before
        // it in `bytes` must be checked.
        let at_line_start = |from: usize| {
            let start_in_bytes = bytes.len - (known.len() - self.start(from));
            start_in_bytes == prefix_bytes || bytes.byte_at(start_in_bytes - 1) == b'\n'
        };
        if suffix_from < self.lines.len() && !at_line_start(suffix_from) {
            suffix_from += 1;
        }
        let middle_end = bytes.len - (known.len() - self.start(suffix_from));
        assert!(prefix_bytes <= middle_end && prefix_bytes <= self.start(suffix_from));
        let (middle, middle_corrupt_lines) = self.middle_of(&bytes, prefix_bytes..middle_end);
        ViewObservation {
            records: Records::Spliced(Splice {
                known: Arc::clone(&self.records),
                head: self.records_before[prefix_lines],
                middle,
                tail_from: self.records_before[suffix_from],
            }),
            corrupt_lines: self.corrupt_in(0..prefix_lines)
                + middle_corrupt_lines
                + self.corrupt_in(suffix_from..self.lines.len()),
            ..ViewObservation::default()
        }
    }

    /// The records and the count of corrupt lines of the file's bytes `range` (from a line
    /// start): a piece of the known file's whole lines, at a line start, has their records;
    /// the bytes in between are parsed, cut at line starts only.
    fn middle_of(&self, bytes: &Laid, range: std::ops::Range<usize>) -> (Vec<Segment>, u64) {
        let mut segments = Vec::new();
        let mut corrupt_lines = 0;
        // Bytes of its own not read yet: whole lines but maybe the last.
        let mut own: Vec<u8> = Vec::new();
        let read_own = |own: &mut Vec<u8>, segments: &mut Vec<Segment>, corrupt_lines: &mut u64| {
            if !own.is_empty() {
                let read = read_file(Some(own));
                *corrupt_lines += read.corrupt_lines;
                if !read.records.is_empty() {
                    segments.push(Segment::Own(read.records));
                }
                own.clear();
            }
        };
        for &(start, len, run) in &bytes.pieces {
            let (lo, hi) = (range.start.max(start), range.end.min(start + len));
            if lo >= hi {
                continue;
            }
            let from = match run {
                Run::Own(run) => {
                    own.extend_from_slice(&run[lo - start..hi - start]);
                    continue;
                }
                Run::Known(from) => from,
            };
            let (mut known_lo, known_hi) = (from + lo - start, from + hi - start);
            if own.last().is_some_and(|&last| last != b'\n') {
                // A line of its own runs into the piece: up to the '\n' that ends it.
                let line = self.lines.partition_point(|&(end, _)| end <= known_lo);
                let end = self.lines[line].0.min(known_hi);
                own.extend(self.bytes.copy_range(known_lo..end));
                known_lo = end;
            }
            // The piece's whole lines (each ending with its '\n'), if it starts at a line
            // start of the known file.
            let first = self.lines.partition_point(|&(end, _)| end <= known_lo);
            let mut end = self.lines.partition_point(|&(end, _)| end <= known_hi);
            if end == self.lines.len() && self.bytes.last().is_some_and(|last| last != b'\n') {
                end -= 1;
            }
            if self.start(first) == known_lo && first < end {
                read_own(&mut own, &mut segments, &mut corrupt_lines);
                let records = self.records_before[first]..self.records_before[end];
                corrupt_lines += self.corrupt_in(first..end);
                match segments.last_mut() {
                    Some(Segment::Known(last)) if last.end == records.start => {
                        last.end = records.end
                    }
                    _ => segments.push(Segment::Known(records)),
                }
                known_lo = self.start(end);
            }
            own.extend(self.bytes.copy_range(known_lo..known_hi));
        }
        read_own(&mut own, &mut segments, &mut corrupt_lines);
        (segments, corrupt_lines)
    }
}

/// A hash of a line's bytes to look it up by, eight bytes at a time (FxHash's step): only
/// candidates it finds are compared, so it decides nothing but speed, and no output.
fn line_hash(bytes: &[u8]) -> u64 {
    const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;
    let mut hash = bytes.len() as u64;
    for word in bytes.chunks(8) {
        let mut padded = [0u8; 8];
        padded[..word.len()].copy_from_slice(word);
        hash = (hash.rotate_left(5) ^ u64::from_le_bytes(padded)).wrapping_mul(SEED);
    }
    hash
}

/// `i` as a line number in the index of a file of fewer than 2^32 lines.
fn small_line(i: usize) -> u32 {
    u32::try_from(i).expect("a known file holds fewer than 2^32 lines")
}

/// A run of a file's bytes: the known file's bytes `from..to`, or bytes of its own.
#[derive(Clone, Copy, Debug)]
pub enum Piece<'a> {
    Known { from: usize, to: usize },
    Own(&'a [u8]),
}

/// A file made of pieces, laid end to end: each non-empty piece's offset in the file, its
/// length, and its bytes (where they lie in the known file, or its own).
struct Laid<'a> {
    known: &'a Contents,
    pieces: Vec<(usize, usize, Run<'a>)>,
    len: usize,
}

/// A piece's bytes: the known file's from an offset, or its own.
#[derive(Clone, Copy)]
enum Run<'a> {
    Known(usize),
    Own(&'a [u8]),
}

impl<'a> Laid<'a> {
    fn new(known: &'a Contents, pieces: &[Piece<'a>]) -> Laid<'a> {
        let mut laid = Vec::with_capacity(pieces.len());
        let mut len = 0;
        for piece in pieces {
            let (piece_len, run) = match *piece {
                Piece::Known { from, to } => {
                    assert!(from <= to && to <= known.len());
                    (to - from, Run::Known(from))
                }
                Piece::Own(bytes) => (bytes.len(), Run::Own(bytes)),
            };
            if piece_len > 0 {
                laid.push((len, piece_len, run));
                len += piece_len;
            }
        }
        Laid {
            known,
            pieces: laid,
            len,
        }
    }

    /// Piece `i`'s bytes from `at` (within it) on, at most `max_bytes`, in one run (a
    /// chunk of the known file's holds it whole).
    fn run_from(&self, i: usize, at: usize, max_bytes: usize) -> &'a [u8] {
        let (_, len, run) = self.pieces[i];
        let max_bytes = max_bytes.min(len - at);
        match run {
            Run::Known(from) => self.known.run_from(from + at, max_bytes),
            Run::Own(bytes) => &bytes[at..at + max_bytes],
        }
    }

    /// Piece `i`'s bytes before `end` (within it), at most `max_bytes`, in one run.
    fn run_before(&self, i: usize, end: usize, max_bytes: usize) -> &'a [u8] {
        let (_, _, run) = self.pieces[i];
        let max_bytes = max_bytes.min(end);
        match run {
            Run::Known(from) => self.known.run_before(from + end, max_bytes),
            Run::Own(bytes) => &bytes[end - max_bytes..end],
        }
    }

    /// How many bytes the file and the known file begin with alike.
    fn common_prefix_len(&self) -> usize {
        let mut same = 0;
        for (i, &(start, len, run)) in self.pieces.iter().enumerate() {
            assert_eq!(start, same, "every byte before the piece is alike");
            if matches!(run, Run::Known(at) if at == start) {
                // The known file's bytes where they lie in it.
                same += len;
                continue;
            }
            // Bounded: every round compares at least a byte, or stops.
            let mut at = 0;
            while at < len {
                let theirs = self.known.run_from(start + at, len - at);
                if theirs.is_empty() {
                    return same;
                }
                let ours = self.run_from(i, at, theirs.len());
                let n = common_prefix_len(ours, &theirs[..ours.len()]);
                at += n;
                same += n;
                if n < ours.len() {
                    return same;
                }
            }
        }
        same
    }

    /// How many bytes the file from `from` and the known file from `from` end with alike.
    fn common_suffix_len(&self, from: usize) -> usize {
        assert!(from <= self.len && from <= self.known.len());
        let limit = (self.len - from).min(self.known.len() - from);
        let mut same = 0;
        for (i, &(start, len, run)) in self.pieces.iter().enumerate().rev() {
            if same == limit {
                break;
            }
            let end = start + len;
            assert_eq!(self.len - end, same, "every byte after the piece is alike");
            // How much of the piece lies within the last `limit` bytes of the file.
            let within = end - start.max(self.len - limit);
            // Where the piece's end lies when the two files are aligned at their ends.
            let known_end = self.known.len() - same;
            if matches!(run, Run::Known(at) if at + len == known_end) {
                same += within;
                continue;
            }
            let mut back = 0;
            // Bounded: every round compares at least a byte, or stops.
            while back < within {
                let theirs = self.known.run_before(known_end - back, within - back);
                let ours = self.run_before(i, len - back, theirs.len());
                let n = common_suffix_len(ours, &theirs[theirs.len() - ours.len()..]);
                back += n;
                if n < ours.len() {
                    return same + back;
                }
            }
            same += within;
        }
        assert!(same <= limit);
        same
    }

    fn byte_at(&self, at: usize) -> u8 {
        let i = self.pieces.partition_point(|&(start, _, _)| start <= at) - 1;
        let (start, _, run) = self.pieces[i];
        match run {
            Run::Known(from) => self.known.byte_at(from + at - start),
            Run::Own(bytes) => bytes[at - start],
        }
    }

    /// The file's bytes `range`, made (for the tests: the file the pieces stand for).
    #[cfg(test)]
    fn copy(&self, range: std::ops::Range<usize>) -> Vec<u8> {
        let mut out = Vec::with_capacity(range.len());
        for &(start, len, run) in &self.pieces {
            let (lo, hi) = (range.start.max(start), range.end.min(start + len));
            if lo < hi {
                match run {
                    Run::Known(from) => {
                        out.extend(self.known.copy_range(from + lo - start..from + hi - start))
                    }
                    Run::Own(bytes) => out.extend_from_slice(&bytes[lo - start..hi - start]),
                }
            }
        }
        assert_eq!(out.len(), range.len());
        out
    }
}

/// `bytes` split after every '\n' (a last line without one included), each line copied
/// out (a line may span two chunks; read once, when a sweep sets up).
fn lines_of(bytes: &Contents) -> impl Iterator<Item = Vec<u8>> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        if at == bytes.len() {
            return None;
        }
        let mut out = Vec::new();
        // Bounded: every round takes a run of at least one byte.
        while at < bytes.len() {
            let run = bytes.run_from(at, usize::MAX);
            match run.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    out.extend_from_slice(&run[..=i]);
                    at += i + 1;
                    return Some(out);
                }
                None => {
                    out.extend_from_slice(run);
                    at += run.len();
                }
            }
        }
        Some(out)
    })
}

/// How many bytes `a` and `b` begin with alike (compared a block at a time).
pub(crate) fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    const BLOCK_BYTES: usize = 256;
    let len = a.len().min(b.len());
    let mut same = 0;
    while same + BLOCK_BYTES <= len && a[same..same + BLOCK_BYTES] == b[same..same + BLOCK_BYTES] {
        same += BLOCK_BYTES;
    }
    same + a[same..len]
        .iter()
        .zip(&b[same..len])
        .take_while(|(x, y)| x == y)
        .count()
}

/// How many bytes `a` and `b` end with alike.
fn common_suffix_len(a: &[u8], b: &[u8]) -> usize {
    const BLOCK_BYTES: usize = 256;
    let len = a.len().min(b.len());
    let (a, b) = (&a[a.len() - len..], &b[b.len() - len..]);
    let mut same = 0;
    while same + BLOCK_BYTES <= len
        && a[len - same - BLOCK_BYTES..len - same] == b[len - same - BLOCK_BYTES..len - same]
    {
        same += BLOCK_BYTES;
    }
    same + a[..len - same]
        .iter()
        .rev()
        .zip(b[..len - same].iter().rev())
        .take_while(|(x, y)| x == y)
        .count()
}

#[cfg(test)]
mod tests {
    use super::super::observe_file;
    use super::*;
    use keel_engine::Record;
    use keel_engine::RecordKind;

    /// ch04's fault-free sink file, one record a line.
    fn ch04_sink() -> Vec<u8> {
        let record = |key: &str, window_end, sum, watermark, kind| Record {
            key: key.to_string(),
            window_end,
            sum,
            watermark,
            kind,
        };
        [
            record("13:10", 10, 55, 10, RecordKind::Fire),
            record("24:20", 20, 138, 21, RecordKind::Fire),
            record("25:20", 20, 155, 21, RecordKind::LateUpdate),
            record("flush:30", 30, 255, 24, RecordKind::Flush),
        ]
        .iter()
        .flat_map(|r| format!("{}\n", r.to_json_line()).into_bytes())
        .collect()
    }

    /// Every file made of a cut of `known` at one offset, `insert`, and `known` from another
    /// offset (prefixes, torn tails, lost and repeated lines, garbage between), read from
    /// `known`'s lines where they match, is read as the whole file is. Returns the files.
    #[cfg(feature = "long-tests")]
    fn every_splice_reads_as_the_whole_file(known: &[u8], inserts: &[&[u8]]) -> u64 {
        let offsets: Vec<usize> = (0..=known.len()).collect();
        splices_read_as_the_whole_file(known, &offsets, inserts)
    }

    /// [`every_splice_reads_as_the_whole_file`] with the cuts and the offsets the rest is
    /// taken from limited to `offsets`.
    fn splices_read_as_the_whole_file(known: &[u8], offsets: &[usize], inserts: &[&[u8]]) -> u64 {
        let sink = KnownSink::new(Contents::from(known));
        let mut files = 0;
        for &cut in offsets {
            for &from in offsets {
                for insert in inserts {
                    let mut bytes = known[..cut].to_vec();
                    bytes.extend_from_slice(insert);
                    bytes.extend_from_slice(&known[from..]);
                    let whole = observe_file(Some(&bytes));
                    assert_eq!(
                        sink.observe(&bytes),
                        whole,
                        "{:?}",
                        String::from_utf8_lossy(&bytes)
                    );
                    // The same file in pieces: the known file's where they are its, in
                    // place or not, or its own bytes; cut anywhere.
                    let known_cut = Piece::Known { from: 0, to: cut };
                    let known_rest = Piece::Known {
                        from,
                        to: known.len(),
                    };
                    let own = Piece::Own(insert);
                    let split = cut / 2;
                    let ways: [&[Piece]; 3] = [
                        &[known_cut, own, known_rest],
                        &[Piece::Own(&bytes[..split]), Piece::Own(&bytes[split..])],
                        &[
                            Piece::Known { from: 0, to: split },
                            Piece::Own(&known[split..cut]),
                            own,
                            Piece::Own(&[]),
                            known_rest,
                        ],
                    ];
                    for pieces in ways {
                        assert_eq!(sink.observe_pieces(pieces), whole, "{pieces:?}");
                    }
                    // The insert and the known file's run again after the file (a second
                    // replay): a middle of several pieces, the run inside it.
                    let mut twice = bytes.clone();
                    twice.extend_from_slice(insert);
                    twice.extend_from_slice(&known[from..]);
                    let pieces = [known_cut, own, known_rest, own, known_rest];
                    assert_eq!(
                        sink.observe_pieces(&pieces),
                        observe_file(Some(&twice)),
                        "{pieces:?}"
                    );
                    files += 1;
                }
            }
        }
        files
    }

    #[cfg(feature = "long-tests")]
    #[test]
    fn long_a_known_sink_reads_every_file_as_the_whole_file_is_read() {
        let clean = ch04_sink();
        assert_eq!(clean.len(), 330);
        let inserts: [&[u8]; 5] = [
            b"",
            b"\n",
            b"garbage\n",
            b"\xff\xfe{\"key\": \"13:10\"\r\n",
            b"{\"key\": \"13:10\", \"window_end\": 10",
        ];
        assert_eq!(
            every_splice_reads_as_the_whole_file(&clean, &inserts),
            331 * 331 * 5
        );
        // A known file with a torn last line, a garbage line, a "\r\n" and bytes that are not
        // UTF-8 (a fault-free file has none, but the reader must not care).
        let mut odd = clean[..100].to_vec();
        odd.extend_from_slice(b"\xf0\x9f\n\r\n");
        odd.extend_from_slice(&clean[100..]);
        odd.extend_from_slice(b"{\"key\": \"26:\r");
        assert_eq!(odd.len(), 348);
        assert_eq!(
            every_splice_reads_as_the_whole_file(&odd, &inserts[..3]),
            349 * 349 * 3
        );
        // No known file, and a known file that is only garbage.
        assert_eq!(every_splice_reads_as_the_whole_file(b"", &inserts), 5);
        assert_eq!(
            every_splice_reads_as_the_whole_file(b"\n\nx\n", &inserts),
            5 * 5 * 5
        );
    }

    #[test]
    fn a_known_sink_reads_across_the_chunks_of_its_file() {
        // A known file of three chunks (the simulated disk's chunks: `keel_sim::CHUNK_BYTES`),
        // cut and rejoined at and around their boundaries, where a piece's bytes and the
        // known file's are each read a chunk at a time.
        let chunk = keel_sim::CHUNK_BYTES;
        let line = |i: usize| {
            let record = Record {
                key: format!("{i}:0"),
                window_end: i as i64,
                sum: i as i128 * 7,
                watermark: i as i64,
                kind: RecordKind::Fire,
            };
            format!("{}\n", record.to_json_line()).into_bytes()
        };
        let known: Vec<u8> = (0..).flat_map(line).take(2 * chunk + 1000).collect();
        let known = &known[..known.iter().rposition(|&b| b == b'\n').unwrap() + 1];
        assert!(known.len() > 2 * chunk);
        assert_eq!(Contents::from(known).chunks().count(), 3);
        let line_start_after =
            |at: usize| at + known[at..].iter().position(|&b| b == b'\n').unwrap() + 1;
        let mut offsets = vec![0, 1, known.len() - 1, known.len()];
        for boundary in [chunk, 2 * chunk] {
            offsets.extend([
                boundary - 1,
                boundary,
                boundary + 1,
                line_start_after(boundary),
            ]);
        }
        let inserts: [&[u8]; 3] = [b"", b"garbage\n", b"{\"key\": \"13:10\""];
        assert_eq!(
            splices_read_as_the_whole_file(known, &offsets, &inserts),
            12 * 12 * 3
        );
    }

    #[test]
    fn laid_pieces_compare_with_the_known_file_as_their_bytes_do() {
        // A periodic known file of three chunks, so that a piece of it laid elsewhere (by a
        // multiple of the period) matches it over runs that cross chunk boundaries.
        let chunk = keel_sim::CHUNK_BYTES;
        let known: Vec<u8> = (0..3 * chunk).map(|i| b"abcdefg\n"[i % 8]).collect();
        let contents = Contents::from(&known[..]);
        let cuts = [
            0,
            1,
            chunk - 1,
            chunk,
            chunk + 8,
            2 * chunk - 8,
            2 * chunk + 3,
            3 * chunk,
        ];
        let mut checked = 0;
        for &a in &cuts {
            for &b in &cuts {
                for &c in cuts.iter().filter(|&&c| c >= b) {
                    let head = Piece::Known { from: 0, to: a };
                    let rest = Piece::Known { from: b, to: c };
                    let ways: [&[Piece]; 2] = [&[head, rest], &[head, Piece::Own(b"abc"), rest]];
                    for pieces in ways {
                        let laid = Laid::new(&contents, pieces);
                        let mut bytes = known[..a].to_vec();
                        if pieces.len() == 3 {
                            bytes.extend_from_slice(b"abc");
                        }
                        bytes.extend_from_slice(&known[b..c]);
                        assert_eq!(laid.copy(0..laid.len), bytes);
                        assert_eq!(laid.common_prefix_len(), common_prefix_len(&bytes, &known));
                        for from in [0, a.min(bytes.len())] {
                            assert_eq!(
                                laid.common_suffix_len(from),
                                common_suffix_len(&bytes[from..], &known[from..]),
                                "{pieces:?} from {from}"
                            );
                        }
                        checked += 1;
                    }
                }
            }
        }
        assert_eq!(checked, 8 * 36 * 2);
    }

    #[test]
    fn a_known_sink_holds_its_lines_and_ends() {
        let sink = KnownSink::new(Contents::from(&b"a\n\nb"[..]));
        assert_eq!(sink.lines, [(2, false), (3, false), (4, false)]);
        assert_eq!(sink.records_before, [0, 0, 0, 0]);
        let clean = ch04_sink();
        let sink = KnownSink::new(Contents::from(&clean[..]));
        assert_eq!(sink.lines.len(), 4);
        assert!(sink.lines.iter().all(|&(_, whole)| whole));
        assert_eq!(sink.records_before, [0, 1, 2, 3, 4]);
        assert_eq!(sink.observe(&clean).records.len(), 4);
        assert_eq!(common_prefix_len(&clean, &clean[..300]), 300);
        assert_eq!(common_suffix_len(&clean, &clean[1..]), 329);
    }
}
