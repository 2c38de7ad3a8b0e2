//! A consumer view's records as one value: a list of its own, or a splice of a known file's
//! records (a fault-free run's) around a middle of records of its own and runs of the known
//! file's. A forked point's view is a splice, so building, judging (`verdict/splice.rs`) and
//! digesting it cost what differs from the fault-free run, not the whole file.

use keel_engine::Record;
use keel_sim::{Decimal, Fingerprint};
use std::sync::Arc;

/// The records of a view, in sink order.
#[derive(Clone)]
pub enum Records {
    Own(Vec<Record>),
    Spliced(Splice),
}

/// `known[..head]`, then the middle's segments in order, then `known[tail_from..]`.
#[derive(Clone)]
pub struct Splice {
    pub known: Arc<KnownRecords>,
    pub head: usize,
    pub middle: Vec<Segment>,
    pub tail_from: usize,
}

/// A segment of a splice's middle: records of its own, or a run of the known file's records
/// (a point's file that holds runs of the fault-free file again, as an append sink's replays
/// write them, is read and hashed without parsing or hashing those runs again).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Segment {
    Own(Vec<Record>),
    Known(std::ops::Range<usize>),
}

impl Segment {
    /// The segment's records, `known`'s where it is a run of them.
    pub fn records<'a>(&'a self, known: &'a KnownRecords) -> &'a [Record] {
        match self {
            Segment::Own(records) => records,
            Segment::Known(run) => &known.records[run.clone()],
        }
    }

    fn len(&self) -> usize {
        match self {
            Segment::Own(records) => records.len(),
            Segment::Known(run) => run.len(),
        }
    }
}

/// For the tests of splices: each of `middles` as a middle of its own, every run of a known
/// file of `known_len` records as the middle, and middles of several segments (two runs of
/// it, a run and a middle of its own).
#[cfg(test)]
pub fn own_and_known_middles(known_len: usize, middles: &[Vec<Record>]) -> Vec<Vec<Segment>> {
    let runs = || (0..=known_len).flat_map(|from| (from..=known_len).map(move |to| from..to));
    let own = middles.iter().cloned().map(|m| vec![Segment::Own(m)]);
    let known = runs().map(|run| vec![Segment::Known(run)]);
    let two_runs = runs().flat_map(move |a| {
        runs()
            .filter(|b| b.len() <= 2)
            .map(move |b| vec![Segment::Known(a.clone()), Segment::Known(b)])
    });
    let mixed = middles.iter().take(2).flat_map(move |m| {
        runs().map(move |run| vec![Segment::Known(run), Segment::Own(m.clone())])
    });
    own.chain(known).chain(two_runs).chain(mixed).collect()
}

impl Splice {
    /// How many records the middle holds.
    pub fn middle_len(&self) -> usize {
        self.middle.iter().map(Segment::len).sum()
    }

    /// The middle's records, in order.
    pub fn middle_records(&self) -> impl Iterator<Item = &Record> + Clone {
        self.middle
            .iter()
            .flat_map(|segment| segment.records(&self.known))
    }

    /// Where the record at `known_at` of the known file (kept: before `head` or from
    /// `tail_from` on) stands in the splice.
    pub fn place_of_known(&self, known_at: usize) -> usize {
        assert!(known_at < self.head || known_at >= self.tail_from);
        if known_at < self.head {
            known_at
        } else {
            known_at - self.tail_from + self.head + self.middle_len()
        }
    }

    /// The middle's record at `at`.
    fn middle_get(&self, mut at: usize) -> Option<&Record> {
        // Bounded: one round a segment.
        for segment in &self.middle {
            let records = segment.records(&self.known);
            if at < records.len() {
                return Some(&records[at]);
            }
            at -= records.len();
        }
        None
    }
}

impl Default for Records {
    fn default() -> Records {
        Records::Own(Vec::new())
    }
}

impl From<Vec<Record>> for Records {
    fn from(records: Vec<Record>) -> Records {
        Records::Own(records)
    }
}

impl Records {
    pub fn len(&self) -> usize {
        match self {
            Records::Own(records) => records.len(),
            Records::Spliced(s) => s.head + s.middle_len() + (s.known.records.len() - s.tail_from),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The records in sink order.
    pub fn iter(&self) -> impl Iterator<Item = &Record> + Clone {
        let (own, head, splice, tail): (&[Record], &[Record], Option<&Splice>, &[Record]) =
            match self {
                Records::Own(records) => (records, &[], None, &[]),
                Records::Spliced(s) => (
                    &[],
                    &s.known.records[..s.head],
                    Some(s),
                    &s.known.records[s.tail_from..],
                ),
            };
        let middle = splice.into_iter().flat_map(Splice::middle_records);
        own.iter().chain(head).chain(middle).chain(tail)
    }

    /// The record at place `at` in sink order.
    pub fn get(&self, at: usize) -> Option<&Record> {
        match self {
            Records::Own(records) => records.get(at),
            Records::Spliced(s) => {
                if at < s.head {
                    s.known.records.get(at)
                } else if at < s.head + s.middle_len() {
                    s.middle_get(at - s.head)
                } else {
                    s.known
                        .records
                        .get(at - s.head - s.middle_len() + s.tail_from)
                }
            }
        }
    }

    pub fn to_vec(&self) -> Vec<Record> {
        self.iter().cloned().collect()
    }

    /// The records' sequence hash: of a splice, from the known file's prefix hashes and the
    /// middle's own records alone.
    pub fn hash(&self) -> SequenceHash {
        match self {
            Records::Own(records) => SequenceHash::of(records),
            Records::Spliced(s) => {
                let head = s.known.range_hash(0..s.head);
                let middle = s.middle.iter().fold(head, |hash, segment| {
                    hash.then(match segment {
                        Segment::Own(records) => SequenceHash::of(records),
                        Segment::Known(run) => s.known.range_hash(run.clone()),
                    })
                });
                middle.then(s.known.range_hash(s.tail_from..s.known.records.len()))
            }
        }
    }
}

/// Two views' records are equal when they are the same records in the same order, however
/// each is held.
impl PartialEq for Records {
    fn eq(&self, other: &Records) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Records {}

impl std::fmt::Debug for Records {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A known file's records (a fault-free run's sink), with the sequence hash of every prefix.
#[derive(Debug)]
pub struct KnownRecords {
    pub records: Arc<[Record]>,
    /// `prefix_hashes[i]`: the sequence hash of `records[..i]` (its `hash` field).
    prefix_hashes: Vec<u64>,
}

impl KnownRecords {
    pub fn new(records: Arc<[Record]>) -> KnownRecords {
        let mut prefix_hashes = Vec::with_capacity(records.len() + 1);
        let mut hash = SequenceHash::EMPTY;
        prefix_hashes.push(hash.hash);
        for record in records.iter() {
            hash = hash.then(SequenceHash::of(std::slice::from_ref(record)));
            prefix_hashes.push(hash.hash);
        }
        KnownRecords {
            records,
            prefix_hashes,
        }
    }

    /// The sequence hash of `records[range]`: H(a ++ b) = H(a)·B^|b| + H(b), solved for b.
    fn range_hash(&self, range: std::ops::Range<usize>) -> SequenceHash {
        assert!(range.start <= range.end);
        assert!(range.end <= self.records.len());
        let len = (range.end - range.start) as u64;
        let before = mul_mod(self.prefix_hashes[range.start], base_pow(len));
        SequenceHash {
            hash: (self.prefix_hashes[range.end] + SEQUENCE_MODULUS - before) % SEQUENCE_MODULUS,
            len,
        }
    }
}

/// The Mersenne prime 2^61 - 1: sequence hashes are polynomials over the field it makes.
const SEQUENCE_MODULUS: u64 = (1 << 61) - 1;

/// The polynomial's base: a fixed number below the modulus (the first 61 bits of the golden
/// ratio's fraction), part of every outcome digest's definition.
const SEQUENCE_BASE: u64 = 0x9e37_79b9_7f4a_7c15 >> 3;

/// `a · b` modulo 2^61 - 1, for `a` and `b` below it: as 2^61 is 1 modulo the prime, the
/// product's bits above the 61st fold onto its low ones (no division).
fn mul_mod(a: u64, b: u64) -> u64 {
    debug_assert!(a < SEQUENCE_MODULUS);
    debug_assert!(b < SEQUENCE_MODULUS);
    let product = a as u128 * b as u128;
    let folded = (product as u64 & SEQUENCE_MODULUS) + (product >> 61) as u64;
    let folded = (folded & SEQUENCE_MODULUS) + (folded >> 61);
    if folded >= SEQUENCE_MODULUS {
        folded - SEQUENCE_MODULUS
    } else {
        folded
    }
}

/// [`SEQUENCE_BASE`] to the power `exponent`: one product of two table entries for an
/// exponent below 2^20 (a splice's runs are hashed from prefix hashes, each run one power,
/// and by squaring each cost 40 products), else by squaring.
fn base_pow(exponent: u64) -> u64 {
    const LOW_BITS: u32 = 10;
    const LOW_LEN: usize = 1 << LOW_BITS;
    static TABLES: std::sync::OnceLock<(Vec<u64>, Vec<u64>)> = std::sync::OnceLock::new();
    if exponent >= 1 << (2 * LOW_BITS) {
        return pow_mod(SEQUENCE_BASE, exponent);
    }
    let (low, high) = TABLES.get_or_init(|| {
        let powers = |step: u64| {
            let mut power = 1;
            (0..LOW_LEN)
                .map(|_| {
                    let this = power;
                    power = mul_mod(power, step);
                    this
                })
                .collect::<Vec<u64>>()
        };
        let low = powers(SEQUENCE_BASE);
        let high = powers(pow_mod(SEQUENCE_BASE, LOW_LEN as u64));
        (low, high)
    });
    let (at_low, at_high) = (exponent as usize % LOW_LEN, exponent as usize / LOW_LEN);
    mul_mod(low[at_low], high[at_high])
}

fn pow_mod(mut base: u64, mut exponent: u64) -> u64 {
    let mut result = 1;
    // Bounded: one round a bit of the exponent.
    while exponent > 0 {
        if exponent & 1 == 1 {
            result = mul_mod(result, base);
        }
        base = mul_mod(base, base);
        exponent >>= 1;
    }
    result
}

/// The hash of a sequence of records r_0 .. r_(n-1): sum of v(r_i)·B^(n-1-i) modulo the
/// prime 2^61 - 1, where v(r) is the FNV-1a 64 of r's JSON line (`Record::to_json_line`)
/// modulo the prime, and B is [`SEQUENCE_BASE`]. It composes: the hash of a concatenation
/// comes from its parts' hashes and lengths, so a splice of a known file is hashed from the
/// known file's prefix hashes and its own middle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SequenceHash {
    pub hash: u64,
    pub len: u64,
}

impl SequenceHash {
    pub const EMPTY: SequenceHash = SequenceHash { hash: 0, len: 0 };

    pub fn of(records: &[Record]) -> SequenceHash {
        let mut line = String::new();
        let mut hash = 0;
        for record in records {
            line.clear();
            push_json_line(&mut line, record);
            let value = Fingerprint::of(line.as_bytes()).0 % SEQUENCE_MODULUS;
            hash = (mul_mod(hash, SEQUENCE_BASE) + value) % SEQUENCE_MODULUS;
        }
        SequenceHash {
            hash,
            len: records.len() as u64,
        }
    }

    /// The hash of `self`'s sequence followed by `next`'s.
    pub fn then(self, next: SequenceHash) -> SequenceHash {
        SequenceHash {
            hash: (mul_mod(self.hash, base_pow(next.len)) + next.hash) % SEQUENCE_MODULUS,
            len: self.len + next.len,
        }
    }
}

/// Appends `record.to_json_line()` to `out`, without the allocations of building it apart
/// and without `fmt` where its key needs no escaping in JSON (no '"', no '\\', no control
/// character): a sweep hashes every record of every point's view it does not know.
pub fn push_json_line(out: &mut String, record: &Record) {
    let plain = record
        .key
        .bytes()
        .all(|b| b >= 0x20 && b != b'"' && b != b'\\');
    if !plain {
        out.push_str(&record.to_json_line());
        return;
    }
    out.push_str("{\"key\": \"");
    out.push_str(&record.key);
    out.push_str("\", \"window_end\": ");
    out.push_str(Decimal::signed(i128::from(record.window_end)).as_str());
    out.push_str(", \"sum\": ");
    out.push_str(Decimal::signed(record.sum).as_str());
    out.push_str(", \"watermark\": ");
    out.push_str(Decimal::signed(i128::from(record.watermark)).as_str());
    out.push_str(", \"kind\": \"");
    out.push_str(record.kind.as_str());
    out.push_str("\"}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_engine::RecordKind;

    #[test]
    fn a_json_line_pushed_is_the_records_json_line() {
        let mut checked = 0;
        for key in [
            "13:10",
            "flush:30",
            "pt4500.000:20",
            "",
            "a\"b:1",
            "back\\slash",
            "tab\t:2",
            "\u{1}:3",
            "\u{7f}é中:4",
            "\u{1f}",
        ] {
            for kind in [
                keel_engine::RecordKind::Fire,
                keel_engine::RecordKind::LateUpdate,
                keel_engine::RecordKind::Flush,
            ] {
                let record = Record {
                    key: key.to_string(),
                    window_end: -20,
                    sum: i128::MIN,
                    watermark: i64::MAX,
                    kind,
                };
                let mut line = "before ".to_string();
                push_json_line(&mut line, &record);
                assert_eq!(line, format!("before {}", record.to_json_line()));
                checked += 1;
            }
        }
        assert_eq!(checked, 30);
    }

    fn record(key: &str, window_end: i64, sum: i128) -> Record {
        Record {
            key: key.to_string(),
            window_end,
            sum,
            watermark: window_end + 1,
            kind: RecordKind::Fire,
        }
    }

    /// Every splice of `known` with each of `middles`, and with every run of `known` as its
    /// middle, reads, hashes and compares as the list of its records does. Returns how many
    /// splices were checked.
    fn check(known: &[Record], middles: &[Vec<Record>]) -> u64 {
        let shared = Arc::new(KnownRecords::new(known.to_vec().into()));
        let middles = own_and_known_middles(known.len(), middles);
        let mut checked = 0;
        for head in 0..=known.len() {
            for tail_from in head..=known.len() {
                for middle in &middles {
                    let splice = Splice {
                        known: Arc::clone(&shared),
                        head,
                        middle: middle.clone(),
                        tail_from,
                    };
                    let mut whole = known[..head].to_vec();
                    whole.extend(splice.middle_records().cloned());
                    whole.extend(known[tail_from..].iter().cloned());
                    let spliced = Records::Spliced(splice);
                    let own = Records::Own(whole.clone());
                    assert_eq!(spliced.len(), whole.len());
                    assert_eq!(spliced.to_vec(), whole);
                    assert_eq!(spliced, own);
                    for at in 0..=whole.len() {
                        assert_eq!(spliced.get(at), whole.get(at));
                    }
                    assert_eq!(spliced.hash(), own.hash());
                    assert_eq!(own.hash().len, whole.len() as u64);
                    checked += 1;
                }
            }
        }
        checked
    }

    /// The tables give the powers squaring gives, on each side of each table's edge.
    #[test]
    fn a_power_from_the_tables_is_the_power_by_squaring() {
        let exponents = [
            0,
            1,
            2,
            1_023,
            1_024,
            1_025,
            54_321,
            (1 << 20) - 1,
            1 << 20,
            1 << 40,
        ];
        for exponent in exponents {
            assert_eq!(
                base_pow(exponent),
                pow_mod(SEQUENCE_BASE, exponent),
                "{exponent}"
            );
        }
    }

    #[test]
    fn a_splice_reads_and_hashes_as_its_records_do() {
        let known: Vec<Record> = (0..6)
            .map(|i| record(&format!("{i}:10"), i * 10, i.into()))
            .collect();
        let middles = [
            vec![],
            vec![known[2].clone()],
            vec![known[0].clone(), known[0].clone()],
            vec![record("x", 7, -1), known[5].clone(), record("é\"", 1, 2)],
        ];
        // 28 (head, tail) pairs, each with 4 middles of its own, 28 runs of the known file,
        // 28 × 18 pairs of runs (the second at most 2 long) and 2 × 28 runs with a middle of
        // its own after.
        assert_eq!(check(&known, &middles), 28 * (4 + 28 + 28 * 18 + 2 * 28));
        assert_eq!(check(&[], &middles), 4 + 1 + 1 + 2);
    }

    #[test]
    fn the_sequence_hash_sees_order_and_count() {
        let (a, b) = (record("1:10", 10, 1), record("2:10", 10, 2));
        let hash = |records: &[&Record]| {
            let owned: Vec<Record> = records.iter().map(|&r| r.clone()).collect();
            SequenceHash::of(&owned)
        };
        assert_ne!(hash(&[&a, &b]), hash(&[&b, &a]));
        assert_ne!(hash(&[&a]), hash(&[&a, &a]));
        assert_ne!(hash(&[]), hash(&[&a]));
        assert_eq!(hash(&[&a]).then(hash(&[&b])), hash(&[&a, &b]));
        assert_eq!(hash(&[&a]).then(SequenceHash::EMPTY), hash(&[&a]));
        // The definition, pinned: v(r) is the FNV-1a 64 of r's JSON line modulo 2^61 - 1.
        let v = Fingerprint::of(b.to_json_line().as_bytes()).0 % SEQUENCE_MODULUS;
        assert_eq!(hash(&[&b]).hash, v);
        assert_eq!(
            pow_mod(SEQUENCE_BASE, 2),
            mul_mod(SEQUENCE_BASE, SEQUENCE_BASE)
        );
        // The folded product is the product modulo the prime, at the edges too.
        let m = SEQUENCE_MODULUS;
        for (a, b) in [
            (m - 1, m - 1),
            (m - 1, 2),
            (1 << 60, 4),
            (0, m - 1),
            (SEQUENCE_BASE, 12345),
        ] {
            let want = ((a as u128 * b as u128) % m as u128) as u64;
            assert_eq!(mul_mod(a, b), want, "{a} * {b}");
        }
    }
}
