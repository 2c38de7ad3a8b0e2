//! The trace of a run and its fingerprint: a stable 64-bit FNV-1a hash of the trace's text,
//! after a line that names the run's input when it has one ([`Trace::set_input`]).
//!
//! The fingerprint hashes a canonical text rendering that this file owns (not `Debug`, not
//! std's `DefaultHasher`), so the same run has the same fingerprint on every machine and
//! every Rust version. A step that wrote or read bytes shows their digest on its line
//! (`#` and 16 hex digits: a file's running digest, [`crate::digest::FileDigest`], or a sink
//! request's payload's), so the fingerprint covers the data as well as the shape of the run.

use crate::digest::Fnv1a64;
use crate::disk::PowerLossOutcome;
use crate::fault::{CrashPoint, Fault};
use std::fmt;
use std::sync::Arc;

/// One line of the trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceLine {
    /// One effect of the system under test.
    Step {
        step: u64,
        time_ms: u64,
        incarnation: u32,
        op: &'static str,
        target: String,
        /// The digest of the bytes the step wrote or read, once its effect ran: the running
        /// digest of the file it touched, or of the payload of the request it sent.
        data: Option<u64>,
        /// The fault the plan aims at this step, if any (a power loss with the crash state
        /// that ran, when the planned one wrapped).
        fault: Option<Fault>,
    },
    /// The process died at `step` (by a power loss, when its crash state is given).
    Crash {
        step: u64,
        time_ms: u64,
        at: CrashPoint,
        power_loss_state: Option<u64>,
    },
    /// The runner started a fresh process after a crash.
    Restart { time_ms: u64, incarnation: u32 },
    /// A decision or observation worth replaying (what recovery chose, what it skipped).
    Note {
        time_ms: u64,
        incarnation: u32,
        text: NoteText,
    },
}

/// A note's text, written out only when the line is shown or hashed: a power loss's
/// outcome is long to write, and most forked runs of a sweep never show nor hash theirs (a
/// point that stops to share an earlier point's future has no fingerprint). Equal when the
/// texts are.
#[derive(Clone, Debug)]
pub enum NoteText {
    Text(String),
    /// "power loss: <outcome>".
    PowerLoss(Arc<PowerLossOutcome>),
}

impl fmt::Display for NoteText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoteText::Text(text) => f.write_str(text),
            NoteText::PowerLoss(outcome) => write!(f, "power loss: {outcome}"),
        }
    }
}

impl PartialEq for NoteText {
    fn eq(&self, other: &NoteText) -> bool {
        match (self, other) {
            (NoteText::Text(a), NoteText::Text(b)) => a == b,
            (NoteText::PowerLoss(a), NoteText::PowerLoss(b)) => a == b,
            _ => self.to_string() == other.to_string(),
        }
    }
}

impl Eq for NoteText {}

impl From<String> for NoteText {
    fn from(text: String) -> NoteText {
        NoteText::Text(text)
    }
}

impl fmt::Display for TraceLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceLine::Step {
                step,
                time_ms,
                incarnation,
                op,
                target,
                data,
                fault,
            } => {
                write!(f, "step {step} t={time_ms}ms p{incarnation} {op} {target}")?;
                if let Some(data) = data {
                    write!(f, " #{}", hex16(*data).as_str())?;
                }
                if let Some(fault) = fault {
                    write!(f, " !{fault}")?;
                }
                Ok(())
            }
            TraceLine::Crash {
                step,
                time_ms,
                at,
                power_loss_state,
            } => {
                write!(f, "crash t={time_ms}ms {at} step {step}")?;
                if let Some(state) = power_loss_state {
                    write!(f, " power-loss state {state}")?;
                }
                Ok(())
            }
            TraceLine::Restart {
                time_ms,
                incarnation,
            } => write!(f, "restart t={time_ms}ms p{incarnation}"),
            TraceLine::Note {
                time_ms,
                incarnation,
                text,
            } => write!(f, "note t={time_ms}ms p{incarnation} {text}"),
        }
    }
}

/// Everything that happened in one run, in order.
///
/// Kept in chunks of at most `TRACE_CHUNK_LINES` lines: a million-event run has millions of
/// lines, and one `Vec` would hold up to twice their size after its last doubling (and
/// briefly three times, while it moves). Only the first chunk grows by doubling, so a
/// short run allocates no more than before.
///
/// A trace may keep fewer lines than it has: the lines it no longer keeps are *folded*, their
/// text hashed in order into the fingerprint's state (and counted), so its fingerprint is
/// still that of every line, the same bytes hashed in the same order.
/// - A *streamed* trace ([`Trace::stream`]) keeps only the lines from the newest step line on
///   (the only ones [`Trace::restate_fault`] can still change) and folds every earlier line
///   as it goes: the same fingerprint, in memory that does not grow with the run, for a
///   caller that needs nothing else of the trace.
/// - A trace that forgot its lines so far ([`Trace::forget`]) keeps the lines after that:
///   a forked run starts from such a trace instead of copying every line before the fork.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    /// The digest of the run's input (its events and every knob that changes what it does),
    /// when the caller named one: hashed before the first line (see [`Trace::set_input`]).
    input: Option<u64>,
    chunks: Vec<Vec<TraceLine>>,
    /// The lines no longer kept, folded (None: every line is kept).
    folded: Option<Folded>,
    /// Whether every line before a new step line is folded as it comes ([`Trace::stream`]).
    streamed: bool,
}

/// The lines a [`Trace`] no longer keeps: the FNV-1a state over their text, in order, and
/// how many there were.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Folded {
    hash: Fnv1a64,
    lines: u64,
}

/// The lines of one chunk of a [`Trace`] (5 MiB of lines at most).
const TRACE_CHUNK_LINES: usize = 1 << 16;

impl Trace {
    /// Names the run's input by its digest: the fingerprint hashes the line `input <16 hex
    /// digits>` ([`input_line`]) before the trace's first line, so two runs have one
    /// fingerprint only if they ran on the same input. Not a line of the trace (a reader of
    /// the trace sees its steps); set before the first line.
    pub fn set_input(&mut self, digest: u64) {
        assert!(
            self.chunks.is_empty() && self.folded.is_none(),
            "the input is named before the first line"
        );
        self.input = Some(digest);
    }

    /// The input's digest, if named.
    pub fn input(&self) -> Option<u64> {
        self.input
    }

    /// The hash state the fingerprint starts from: the input line's, if any.
    fn start(&self) -> Fnv1a64 {
        let mut hash = Fnv1a64::new();
        if let Some(digest) = self.input {
            hash.write(input_line(digest).as_bytes());
            hash.write(b"\n");
        }
        hash
    }

    /// Streams this trace from now on (see the type's documentation); it must be empty.
    pub fn stream(&mut self) {
        assert!(
            self.chunks.is_empty() && self.folded.is_none(),
            "a trace streams from its first line"
        );
        self.streamed = true;
    }

    /// Whether this trace streams (and so holds only the lines of the current step).
    pub fn is_streamed(&self) -> bool {
        self.streamed
    }

    /// Whether this trace keeps every line of its run (neither streamed nor forgotten).
    pub fn is_whole(&self) -> bool {
        self.folded.is_none() && !self.streamed
    }

    pub fn push(&mut self, line: TraceLine) {
        if self.streamed && matches!(line, TraceLine::Step { .. }) {
            // Every line before a new step is final: fold it in and drop it.
            self.fold_kept();
        }
        match self.chunks.last_mut() {
            Some(chunk) if chunk.len() < TRACE_CHUNK_LINES => chunk.push(line),
            _ => {
                let mut chunk = Vec::with_capacity(if self.chunks.is_empty() {
                    0
                } else {
                    TRACE_CHUNK_LINES
                });
                chunk.push(line);
                self.chunks.push(chunk);
            }
        }
    }

    /// Folds every kept line into the hash state, in order, and drops it.
    fn fold_kept(&mut self) {
        if self.folded.is_none() {
            self.folded = Some(Folded {
                hash: self.start(),
                lines: 0,
            });
        }
        let folded = self.folded.as_mut().expect("made above");
        for done in self.chunks.iter().flatten() {
            hash_line(&mut folded.hash, done);
            folded.lines += 1;
        }
        // The first chunk's allocation is reused.
        self.chunks.truncate(1);
        if let Some(first) = self.chunks.first_mut() {
            first.clear();
        }
    }

    /// Forgets every line kept so far, folding their text into the hash state: the
    /// fingerprint stays that of every line, forgotten or not, and the lines pushed from now
    /// on are kept (unless the trace streams).
    pub fn forget(&mut self) {
        self.fold_kept();
    }

    /// How many lines came before the kept ones (0 unless some were folded).
    pub fn forgotten_lines(&self) -> u64 {
        self.folded.as_ref().map_or(0, |folded| folded.lines)
    }

    /// The lines kept, in order: every line, unless some were folded (of a streamed trace:
    /// those from the newest step line on; of a forgetful one: those since it forgot).
    pub fn lines(&self) -> impl DoubleEndedIterator<Item = &TraceLine> + '_ {
        self.chunks.iter().flatten()
    }

    /// Restates the fault of `step`'s line as the fault that ran: a power loss whose planned
    /// crash state wrapped to one of the step's states, or none for a planned fault that does
    /// not apply to the step (the trace is then that of the run without it).
    pub(crate) fn restate_fault(&mut self, step: u64, ran: Option<Fault>) {
        let line = self
            .chunks
            .iter_mut()
            .flatten()
            .rev()
            .find_map(|line| match line {
                TraceLine::Step { step: s, fault, .. } if *s == step => Some(fault),
                _ => None,
            });
        match line {
            Some(fault) => *fault = ran,
            // A step's faults are restated during the step, while its line is still kept
            // (a trace forgets only between steps, and forks never aim at a forgotten one).
            None => assert!(
                self.folded.is_none(),
                "step {step} is no longer in the trace"
            ),
        }
    }

    /// Sets the data digest of `step`'s line (see [`TraceLine::Step`]), once its effect ran;
    /// the step's line is the newest one, or nearly (a step sets it before any later line).
    pub(crate) fn set_step_data(&mut self, step: u64, digest: u64) {
        let line = self
            .chunks
            .iter_mut()
            .flatten()
            .rev()
            .find_map(|line| match line {
                TraceLine::Step { step: s, data, .. } if *s == step => Some(data),
                _ => None,
            })
            .expect("a step's data is set while its line is kept");
        *line = Some(digest);
    }

    /// Each kept line in its canonical text (what the fingerprint hashes).
    pub fn text_lines(&self) -> Vec<String> {
        self.lines().map(TraceLine::to_string).collect()
    }

    /// The fingerprint of every line, folded ones included.
    pub fn fingerprint(&self) -> Fingerprint {
        // The bytes of `text_lines` (never made: see `hash_line`), after the
        // hash of the lines no longer kept.
        let mut hash = self
            .folded
            .as_ref()
            .map_or_else(|| self.start(), |folded| folded.hash);
        for line in self.lines() {
            hash_line(&mut hash, line);
        }
        Fingerprint(hash.finish())
    }
}

/// The line the fingerprint hashes first for a run whose input has the digest `digest`
/// ([`Trace::set_input`]); a real run's parent hashes it before its children's lines.
pub fn input_line(digest: u64) -> String {
    format!("input {}", hex16(digest).as_str())
}

/// A stable 64-bit hash of a trace, printed as 16 hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Fingerprint(pub u64);

impl Fingerprint {
    /// The fingerprint of any bytes (e.g. a sweep's list of run fingerprints).
    pub fn of(bytes: &[u8]) -> Fingerprint {
        let mut builder = FingerprintBuilder::default();
        builder.write(bytes);
        builder.finish()
    }
}

/// [`Fingerprint::of`] over bytes that arrive in pieces: the same fingerprint as the
/// pieces' concatenation, without keeping it (a sweep hashes a line per point as it goes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FingerprintBuilder(Fnv1a64);

impl Default for FingerprintBuilder {
    fn default() -> Self {
        FingerprintBuilder(Fnv1a64::new())
    }
}

impl FingerprintBuilder {
    pub fn write(&mut self, bytes: &[u8]) {
        self.0.write(bytes);
    }

    pub fn finish(&self) -> Fingerprint {
        Fingerprint(self.0.finish())
    }
}

/// Text written into the builder is hashed as its bytes, never kept.
impl fmt::Write for FingerprintBuilder {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        self.write(text.as_bytes());
        Ok(())
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(hex16(self.0).as_str())
    }
}

/// `value` as 16 lower-case hex digits (what `{:016x}` writes), without the formatting
/// machinery: a sweep writes two or three for every point it tallies.
pub fn hex16(value: u64) -> Hex16 {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut bytes = [0; 16];
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = DIGITS[(value >> (60 - 4 * i)) as usize & 0xf];
    }
    Hex16(bytes)
}

/// 16 hex digits ([`hex16`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hex16([u8; 16]);

impl Hex16 {
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("hex digits are ASCII")
    }
}

/// Hashes `line`'s text (its `Display`) and a newline, without making the text: a step
/// line, nearly every line of a trace, is hashed piece by piece (its numbers in decimal by
/// hand); the rest go through `Display` into the hash. The same bytes either way, tested.
fn hash_line(hash: &mut Fnv1a64, line: &TraceLine) {
    use std::fmt::Write;
    match line {
        TraceLine::Step {
            step,
            time_ms,
            incarnation,
            op,
            target,
            data,
            fault,
        } => {
            hash.write(b"step ");
            hash_decimal(hash, *step);
            hash.write(b" t=");
            hash_decimal(hash, *time_ms);
            hash.write(b"ms p");
            hash_decimal(hash, u64::from(*incarnation));
            hash.write(b" ");
            hash.write(op.as_bytes());
            hash.write(b" ");
            hash.write(target.as_bytes());
            if let Some(data) = data {
                hash.write(b" #");
                hash.write(hex16(*data).as_str().as_bytes());
            }
            if let Some(fault) = fault {
                write!(hash, " !{fault}").expect("hashing cannot fail");
            }
        }
        other => write!(hash, "{other}").expect("hashing cannot fail"),
    }
    hash.write(b"\n");
}

/// Hashes `value` in decimal, as `Display` writes it.
fn hash_decimal(hash: &mut Fnv1a64, value: u64) {
    hash.write(crate::Decimal::of(u128::from(value)).as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `hex16` writes what `{:016x}` writes, and a fingerprint shows as it did, padding
    /// included.
    #[test]
    fn hex16_is_the_formatters_hex() {
        for value in [
            0,
            1,
            0xf,
            0x10,
            0xdead_beef,
            u64::MAX,
            0x0123_4567_89ab_cdef,
        ] {
            assert_eq!(hex16(value).as_str(), format!("{value:016x}"));
            assert_eq!(Fingerprint(value).to_string(), format!("{value:016x}"));
            let padded = format!("{:>18}", format!("{value:016x}"));
            assert_eq!(format!("{:>18}", Fingerprint(value)), padded);
        }
    }

    /// A power loss's note, written out only when needed, shows, equals and hashes as the
    /// note of its text.
    #[test]
    fn a_power_loss_note_is_its_text() {
        let mut disk = crate::Disk::new();
        disk.create("f").unwrap();
        disk.append("f", b"abc").unwrap();
        let outcome = disk.power_loss(1);
        let note = |text| TraceLine::Note {
            time_ms: 7,
            incarnation: 1,
            text,
        };
        let written = note(NoteText::Text(format!("power loss: {outcome}")));
        let lazy = note(NoteText::PowerLoss(Arc::new(outcome)));
        assert_eq!(lazy.to_string(), written.to_string());
        assert!(lazy
            .to_string()
            .starts_with("note t=7ms p1 power loss: state 1/"));
        assert_eq!(lazy, written);
        let (mut a, mut b) = (Trace::default(), Trace::default());
        a.push(lazy);
        b.push(written);
        assert_eq!(a.fingerprint(), b.fingerprint());
    }

    fn fnv(bytes: &[u8]) -> u64 {
        let mut hash = Fnv1a64::new();
        hash.write(bytes);
        hash.finish()
    }

    /// `hash_line` hashes exactly a line's `Display` text and a newline, for every kind of
    /// line and the extremes of each number.
    #[test]
    fn a_line_hashes_as_its_text() {
        let mut lines = Vec::new();
        for (step, time_ms, incarnation) in [(0, 0, 0), (9, 10, 1), (u64::MAX, u64::MAX, u32::MAX)]
        {
            for fault in [
                None,
                Some(Fault::DiskError),
                Some(Fault::ProcessCrash {
                    at: CrashPoint::After,
                }),
            ] {
                for data in [None, Some(0), Some(step ^ 0x0123_4567_89ab_cdef)] {
                    lines.push(TraceLine::Step {
                        step,
                        time_ms,
                        incarnation,
                        op: "disk.write",
                        target: "state-8.json.tmp".to_string(),
                        data,
                        fault,
                    });
                }
            }
            lines.push(TraceLine::Crash {
                step,
                time_ms,
                at: CrashPoint::Before,
                power_loss_state: Some(step),
            });
            lines.push(TraceLine::Restart {
                time_ms,
                incarnation,
            });
            lines.push(TraceLine::Note {
                time_ms,
                incarnation,
                text: "recovery: é".to_string().into(),
            });
        }
        for line in &lines {
            let mut direct = Fnv1a64::new();
            hash_line(&mut direct, line);
            assert_eq!(
                direct.finish(),
                fnv(format!("{line}\n").as_bytes()),
                "{line}"
            );
        }
    }

    #[test]
    fn fnv1a_matches_the_published_test_vectors() {
        // From the FNV reference test suite (Fowler, Noll, Vo).
        assert_eq!(fnv(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv(b"foobar"), 0x8594_4171_f739_67e8);
        let mut pieces = FingerprintBuilder::default();
        pieces.write(b"foo");
        pieces.write(b"");
        pieces.write(b"bar");
        assert_eq!(pieces.finish(), Fingerprint(0x8594_4171_f739_67e8));
        assert_eq!(Fingerprint::of(b"foobar"), pieces.finish());
    }

    #[test]
    fn fingerprint_is_pinned_for_a_fixed_trace() {
        let mut trace = Trace::default();
        trace.push(TraceLine::Step {
            step: 0,
            time_ms: 0,
            incarnation: 0,
            op: "disk.list",
            target: ".".to_string(),
            data: None,
            fault: None,
        });
        trace.push(TraceLine::Crash {
            step: 0,
            time_ms: 0,
            at: CrashPoint::After,
            power_loss_state: None,
        });
        assert_eq!(
            trace.lines().next().unwrap().to_string(),
            "step 0 t=0ms p0 disk.list ."
        );
        let mut forgetful = trace.clone();
        forgetful.forget();
        assert_eq!(forgetful.lines().count(), 0);
        assert_eq!(forgetful.forgotten_lines(), 2);
        assert!(!forgetful.is_whole() && trace.is_whole());
        assert_eq!(forgetful.fingerprint(), trace.fingerprint());
        let pinned = trace.fingerprint();
        // Lines after forgetting are kept, and hashed after the forgotten ones; a streamed
        // trace folds the same bytes in the same order.
        let mut streamed = Trace::default();
        streamed.stream();
        let more = TraceLine::Restart {
            time_ms: 1,
            incarnation: 1,
        };
        for line in trace.lines().chain([&more, &more]) {
            streamed.push(line.clone());
        }
        let mut whole = trace.clone();
        for t in [&mut whole, &mut forgetful] {
            t.push(more.clone());
            t.push(more.clone());
        }
        assert_eq!(forgetful.lines().count(), 2);
        assert_eq!(forgetful.fingerprint(), whole.fingerprint());
        assert_eq!(streamed.fingerprint(), whole.fingerprint());
        assert_eq!(
            pinned,
            Fingerprint(fnv(
                b"step 0 t=0ms p0 disk.list .\ncrash t=0ms after step 0\n"
            ))
        );
    }

    /// A trace that names its input hashes the input's line first, however its lines were
    /// kept; a step's data shows on its line.
    #[test]
    fn the_input_and_a_steps_data_are_hashed() {
        let step = |data| TraceLine::Step {
            step: 3,
            time_ms: 300,
            incarnation: 1,
            op: "disk.read",
            target: "state-8.json".to_string(),
            data,
            fault: Some(Fault::ProcessCrash {
                at: CrashPoint::After,
            }),
        };
        assert_eq!(
            step(Some(0xab)).to_string(),
            "step 3 t=300ms p1 disk.read state-8.json #00000000000000ab !process-crash after"
        );
        let mut named = Trace::default();
        named.set_input(0x0123_4567_89ab_cdef);
        assert_eq!(named.input(), Some(0x0123_4567_89ab_cdef));
        assert_eq!(
            named.fingerprint(),
            Fingerprint(fnv(b"input 0123456789abcdef\n"))
        );
        let mut streamed = named.clone();
        streamed.stream();
        let mut forgetful = named.clone();
        for t in [&mut named, &mut streamed, &mut forgetful] {
            t.push(step(None));
            t.set_step_data(3, 0xab);
            t.push(step(None));
        }
        forgetful.forget();
        let text = format!(
            "input 0123456789abcdef\n{}\n{}\n",
            step(Some(0xab)),
            step(None)
        );
        for t in [&named, &streamed, &forgetful] {
            assert_eq!(t.fingerprint(), Fingerprint(fnv(text.as_bytes())));
        }
        let mut unnamed = Trace::default();
        unnamed.push(step(Some(0xab)));
        unnamed.push(step(None));
        assert_ne!(unnamed.fingerprint(), named.fingerprint());
    }
}
