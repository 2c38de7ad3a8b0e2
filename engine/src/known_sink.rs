//! `KnownSinkFile`: a sink file read once, which a sink connector builds on instead of
//! reading its own file from byte 0.
//!
//! A connector reads its whole file at its open (to find a torn tail) and the idempotent one
//! indexes every key in it (to skip what the sink holds already). In a sweep every point
//! restarts over a file that begins with the fault-free run's bytes, so reading it from 0
//! made each point cost the length of the stream. A harness that has read such a file hands
//! it to the engine ([`crate::Engine::with_known_sink`]); a connector then reads and indexes
//! only the bytes after the whole lines its file shares with it, found by comparing the two
//! files' shared chunks ([`keel_sim::Contents::common_prefix_len`]).
//!
//! It also remembers the last few files connectors found readable, and how far
//! ([`KnownSinkFile::read_lines_len_bytes`]): a depth-2 sweep's pairs with one first fault
//! open files that share that fault's duplicate lines, past where they part from the known
//! file, and checking those lines again at every open was a tenth of a 1,000-event class
//! sweep's time (line parsing, `Record::is_record_line`).
//!
//! It is a cache and nothing else: whatever file it holds, a connector decides exactly what
//! it decides without it (the same readable length, the same keys; debug builds check both
//! against a full read), and it is not process state a crash could lose or keep: no trace
//! line, step or fingerprint depends on it.

use crate::recent::Recent;
use crate::record::Record;
use keel_sim::Contents;
use std::fmt;
use std::sync::OnceLock;

/// How many files read by connectors [`KnownSinkFile`] remembers (the newest): a thread's
/// pairs with one first fault follow each other, and a sweep runs a thread or two.
pub const READ_FILES_MAX: usize = 4;

/// A file a connector read, and the length of its readable prefix (whole record lines).
struct ReadFile {
    contents: Contents,
    readable_len_bytes: usize,
}

/// A file of whole, readable record lines and, made at the first lookup, its keys.
pub struct KnownSinkFile {
    /// Whole lines, each a record line (`Record::is_record_line`).
    contents: Contents,
    /// Each key, sorted, with the end of the first line that holds it.
    keys: OnceLock<Vec<(Box<str>, u64)>>,
    /// Files connectors found readable lately (shared between threads).
    read: Recent<ReadFile, READ_FILES_MAX>,
}

impl KnownSinkFile {
    /// The readable prefix of `contents` (the whole lines before the first that is not a
    /// record), shared with it.
    pub fn new(contents: &Contents) -> KnownSinkFile {
        let bytes = contents.to_vec();
        let readable_len_bytes = readable_prefix_len_bytes(&bytes);
        let mut contents = contents.clone();
        contents.resize(readable_len_bytes);
        KnownSinkFile {
            contents,
            keys: OnceLock::new(),
            read: Recent::default(),
        }
    }

    /// How many bytes at the start of `file` are whole lines that a file read lately holds
    /// within its readable prefix, as far as the two hold the same bytes: every one of them a
    /// record line (a line is judged by its bytes alone), so a connector reads on from there.
    pub fn read_lines_len_bytes(&self, file: &Contents) -> usize {
        let mut lines_len_bytes = 0;
        // Bounded: at most READ_FILES_MAX entries.
        for read in self.read.newest_first() {
            let same_bytes = read
                .contents
                .common_prefix_len(file)
                .min(read.readable_len_bytes);
            if same_bytes > lines_len_bytes {
                let lines_end = file
                    .last_index_of(b'\n', same_bytes)
                    .map_or(0, |newline| newline + 1);
                lines_len_bytes = lines_len_bytes.max(lines_end);
            }
        }
        lines_len_bytes
    }

    /// Remembers that `file` was found readable up to `readable_len_bytes`.
    pub fn note_read(&self, file: &Contents, readable_len_bytes: usize) {
        assert!(readable_len_bytes <= file.len());
        self.read.remember(ReadFile {
            contents: file.clone(),
            readable_len_bytes,
        });
    }

    pub fn len_bytes(&self) -> usize {
        self.contents.len()
    }

    /// The file, shared.
    pub fn contents(&self) -> &Contents {
        &self.contents
    }

    /// How many bytes at the start of `file` are whole lines of this file: each a record
    /// line, with the keys [`Self::first_line_end`] finds.
    pub fn shared_lines_len_bytes(&self, file: &Contents) -> usize {
        self.lines_within(self.contents.common_prefix_len(file))
    }

    /// The bytes held as a file's first `common_bytes` are whole lines of this file: how
    /// many of them are (`shared_lines_len_bytes` of a file whose common prefix with this
    /// one was measured already).
    pub fn lines_within(&self, common_bytes: usize) -> usize {
        assert!(common_bytes <= self.contents.len());
        let shared_bytes = if common_bytes == self.contents.len() {
            // This file's lines are all whole: it ends with a newline (or is empty).
            common_bytes
        } else {
            self.contents
                .last_index_of(b'\n', common_bytes)
                .map_or(0, |newline| newline + 1)
        };
        assert!(shared_bytes <= common_bytes);
        shared_bytes
    }

    /// Whether this file holds `bytes` at `offset_bytes`.
    pub fn holds_at(&self, offset_bytes: usize, bytes: &[u8]) -> bool {
        self.contents.holds_at(offset_bytes, bytes)
    }

    /// Where the first line holding `key` ends (just after its newline), if a line does.
    pub fn first_line_end(&self, key: &str) -> Option<u64> {
        let keys = self.keys.get_or_init(|| keys_of(&self.contents.to_vec()));
        keys.binary_search_by(|(k, _)| (**k).cmp(key))
            .ok()
            .map(|i| keys[i].1)
    }

    /// The keys of the lines ending at or before `len_bytes`, in order.
    pub fn keys_before(&self, len_bytes: u64) -> impl Iterator<Item = &str> + '_ {
        let keys = self.keys.get_or_init(|| keys_of(&self.contents.to_vec()));
        keys.iter()
            .filter(move |(_, end)| *end <= len_bytes)
            .map(|(key, _)| &**key)
    }
}

/// Each key of `bytes`' lines, sorted, with the end of the first line that holds it.
fn keys_of(bytes: &[u8]) -> Vec<(Box<str>, u64)> {
    let mut keys: Vec<(Box<str>, u64)> = Vec::new();
    let mut start = 0;
    // Bounded: one round per line.
    while let Some(newline) = bytes[start..].iter().position(|&b| b == b'\n') {
        let line = &bytes[start..start + newline];
        let end = (start + newline + 1) as u64;
        let record = std::str::from_utf8(line)
            .ok()
            .and_then(Record::parse_line)
            .expect("a known sink file holds record lines only");
        keys.push((record.key.into_boxed_str(), end));
        start += newline + 1;
    }
    // Stable: of a key's lines, the first comes first.
    keys.sort_by(|a, b| a.0.cmp(&b.0));
    keys.dedup_by(|later, first| later.0 == first.0);
    keys
}

/// Its length only: the bytes are a run's sink file.
impl fmt::Debug for KnownSinkFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KnownSinkFile({} bytes)", self.contents.len())
    }
}

/// The length of the longest prefix of `contents` made of complete, readable record lines.
pub fn readable_prefix_len_bytes(contents: &[u8]) -> usize {
    let mut offset = 0;
    while let Some(newline) = contents[offset..].iter().position(|&b| b == b'\n') {
        if !Record::is_record_line(&contents[offset..offset + newline]) {
            break;
        }
        offset += newline + 1;
    }
    offset
}
