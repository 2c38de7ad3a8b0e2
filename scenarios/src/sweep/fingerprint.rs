//! The sweep's fingerprint: each run's sink, faults and outcome digest, folded in point order
//! into one number, so that a span of points with one outcome (composed pairs, `PointSpan`)
//! adds its points where it is made and the tally adds the span in one step.
//!
//! Definition (what `--naive`, a sharded sweep's merge and the default sweep all compute):
//! - a run's term is `mix` chained over its outcome key (the sink's name and the outcome
//!   digest) and then each fault's key (kind, crash point, number, step), in plan order;
//! - the terms of the sweep's runs (a transactional point's read-uncommitted view is the
//!   same run as its read-committed one, so it has no term) are folded in point order as the
//!   polynomial `h = h * FOLD_MULTIPLIER + term`, wrapping at 2^64;
//! - the fingerprint is `mix(h ^ mix(runs))`, printed as 16 hex digits.
//!
//! Only integer arithmetic, no text: the same on every machine, and a few multiplications a
//! point where hashing a line of text byte by byte was a sixth of a depth-2 sweep's time.

use keel_engine::SinkKind;
use keel_sim::{CrashPoint, Fault, Fingerprint, FingerprintBuilder, PlannedFault};
use serde::{Deserialize, Serialize};

/// Odd, so that folding is a bijection of the running value.
const FOLD_MULTIPLIER: u64 = 0x9e37_79b9_7f4a_7c15;

/// A 64-bit finalizer (splitmix64's): every input bit moves every output bit.
fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A digest as the number its 16 lower-case hex digits write (what `Fingerprint` prints);
/// None for a digest of another form (a shard file written by hand).
pub fn digest_number(digest: &str) -> Option<u64> {
    let hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
    (digest.len() == 16 && digest.bytes().all(hex))
        .then(|| u64::from_str_radix(digest, 16).expect("16 hex digits"))
}

/// A digest as a number: [`digest_number`], or else the FNV-1a of its text.
pub fn digest_hash(digest: &str) -> u64 {
    digest_number(digest).unwrap_or_else(|| Fingerprint::of(digest.as_bytes()).0)
}

/// What a run's term starts from: its sink and its outcome, the same for every point of a
/// span.
pub fn outcome_key(sink: SinkKind, digest_hash: u64) -> u64 {
    let mut name = FingerprintBuilder::default();
    name.write(sink.name().as_bytes());
    mix(mix(name.finish().0) ^ digest_hash)
}

/// A run's term: its outcome key, then each of its faults.
pub fn run_term(outcome_key: u64, faults: &[PlannedFault]) -> u64 {
    faults
        .iter()
        .fold(outcome_key, |term, fault| mix(term ^ fault_key(fault)))
}

/// A planned fault as a number: its kind, where it falls in the step, its number (crash
/// state, class or duration) and its step.
fn fault_key(planned: &PlannedFault) -> u64 {
    let at = |at: CrashPoint| match at {
        CrashPoint::Before => 0,
        CrashPoint::After => 1,
    };
    // (kind, crash point, number): a kind's code is its place in this list, never reused.
    let (kind, at, number) = match planned.fault {
        Fault::ProcessCrash { at: a } => (1, at(a), 0),
        Fault::PowerLoss { at: a, state } => (2, at(a), state),
        Fault::PowerLossClass {
            at: a,
            class,
            by_tail: false,
        } => (3, at(a), class),
        // A class split by tail (depth 2) numbers other classes: a code of its own.
        Fault::PowerLossClass {
            at: a,
            class,
            by_tail: true,
        } => (10, at(a), class),
        Fault::DiskError => (4, 0, 0),
        Fault::SinkError => (5, 0, 0),
        Fault::AckLost => (6, 0, 0),
        Fault::SinkUnavailable { duration_ms } => (7, 0, duration_ms),
        Fault::Zombie => (8, 0, 0),
        Fault::PageEviction => (9, 0, 0),
        Fault::MessageLost => (11, 0, 0),
        Fault::SlowDelivery { delay_ms } => (12, 0, delay_ms),
    };
    mix(mix(mix(kind << 1 | at) ^ number) ^ planned.step)
}

/// The terms of consecutive runs, folded: what a span of points adds at once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Folded {
    /// `h` over the runs folded, from 0.
    pub terms: u64,
    pub runs: u64,
}

impl Folded {
    pub fn of(term: u64) -> Folded {
        Folded {
            terms: term,
            runs: 1,
        }
    }

    /// One more run after these.
    pub fn push(&mut self, term: u64) {
        self.terms = self.terms.wrapping_mul(FOLD_MULTIPLIER).wrapping_add(term);
        self.runs += 1;
    }

    /// `after`'s runs after these: as if each of its terms were pushed in turn.
    pub fn append(&mut self, after: Folded) {
        self.terms = self
            .terms
            .wrapping_mul(multiplier_pow(after.runs))
            .wrapping_add(after.terms);
        self.runs += after.runs;
    }

    /// The sweep's fingerprint of these runs.
    pub fn fingerprint(&self) -> Fingerprint {
        Fingerprint(mix(self.terms ^ mix(self.runs)))
    }
}

/// `FOLD_MULTIPLIER` to the `exponent`, wrapping, by squaring.
fn multiplier_pow(mut exponent: u64) -> u64 {
    let (mut base, mut pow) = (FOLD_MULTIPLIER, 1u64);
    while exponent > 0 {
        if exponent & 1 == 1 {
            pow = pow.wrapping_mul(base);
        }
        base = base.wrapping_mul(base);
        exponent >>= 1;
    }
    pow
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crash(step: u64) -> PlannedFault {
        PlannedFault {
            step,
            fault: Fault::ProcessCrash {
                at: CrashPoint::After,
            },
        }
    }

    /// A span folded where it is made and appended at once is the runs pushed one by one;
    /// order, faults, sink and digest each move the fingerprint.
    #[test]
    fn a_span_appended_at_once_is_its_runs_pushed_one_by_one() {
        let key = outcome_key(SinkKind::Append, digest_hash("00000000000000ff"));
        let terms: Vec<u64> = (0..7)
            .map(|i| run_term(key, &[crash(3), crash(10 + i)]))
            .collect();
        let mut one_by_one = Folded::of(terms[0]);
        terms[1..].iter().for_each(|&t| one_by_one.push(t));
        let mut span = Folded::of(terms[2]);
        terms[3..].iter().for_each(|&t| span.push(t));
        let mut at_once = Folded::of(terms[0]);
        at_once.push(terms[1]);
        at_once.append(span);
        assert_eq!(at_once, one_by_one);
        assert_eq!(one_by_one.runs, 7);
        let mut swapped = Folded::of(terms[1]);
        swapped.push(terms[0]);
        let mut in_order = Folded::of(terms[0]);
        in_order.push(terms[1]);
        assert_ne!(swapped.fingerprint(), in_order.fingerprint());
        let idempotent = outcome_key(SinkKind::Idempotent, digest_hash("00000000000000ff"));
        let other_digest = outcome_key(SinkKind::Append, digest_hash("00000000000000fe"));
        let variants = [
            run_term(key, &[crash(3), crash(10)]),
            run_term(key, &[crash(3), crash(11)]),
            run_term(key, &[crash(10), crash(3)]),
            run_term(idempotent, &[crash(3), crash(10)]),
            run_term(other_digest, &[crash(3), crash(10)]),
        ];
        for (i, a) in variants.iter().enumerate() {
            for b in &variants[i + 1..] {
                assert_ne!(a, b);
            }
        }
        // The definition, pinned: a change of it moves every recorded sweep fingerprint.
        assert_eq!(in_order.fingerprint().to_string(), "5d84ba8dd1f4b4a4");
    }

    /// A digest of 16 lower-case hex digits is its number; any other text is hashed.
    #[test]
    fn a_digest_is_its_number_or_the_hash_of_its_text() {
        assert_eq!(digest_hash("00000000000000ff"), 255);
        assert_eq!(digest_hash("ffffffffffffffff"), u64::MAX);
        assert_eq!(
            digest_hash("00000000000000FF"),
            Fingerprint::of(b"00000000000000FF").0
        );
        assert_eq!(digest_hash("ff"), Fingerprint::of(b"ff").0);
    }
}
