//! `keel gen`: a synthetic event stream, deterministic per seed, in the JSON-lines form
//! `--events FILE` reads: mostly in order, some out of order within D, some late beyond D.
//!
//! Event i's "arrival time" is i. With probability F (the late fraction) its ts is
//! `i - D - 1 - u`, u uniform in `[0, late_by_max)`: behind the watermark of a stream whose
//! events arrive one time unit apart, so its window may have fired (a late update) or, with a
//! finite allowed lateness, have been purged (dropped). Otherwise its ts is `i - u`, u
//! uniform in `[0, D]`: out of order but never behind the watermark (every earlier ts is at
//! most i - 1, so the watermark before event i is below i - D). Values are uniform in
//! `[1, value_max]`. One ChaCha8 stream, seeded by the seed alone, draws everything in this
//! order per event: the late coin, the offset, the value.

use keel_engine::event::{EVENTS_MAX, EVENT_INT_MAX};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// The largest out-of-orderness and late distance `keel gen` accepts (event-time units):
/// with at most `EVENTS_MAX` events every ts stays far inside the events' range.
pub const GEN_DISTANCE_MAX: i64 = 1_000_000_000_000;

/// What `keel gen` draws, as the command line gave it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GenSpec {
    /// Events to write, 1..=`EVENTS_MAX`.
    pub events: u64,
    pub seed: u64,
    /// D: how far (event-time units) an in-bound event may lag behind its position.
    pub out_of_orderness: i64,
    /// The fraction of events that are late (behind the watermark), in [0, 1].
    pub late_fraction: f64,
    /// How far beyond D a late event may lag (event-time units), at least 1.
    pub late_by_max: i64,
    /// Values are drawn from 1..=value_max.
    pub value_max: i64,
    /// Keys `k0`..`k{keys-1}`, drawn uniformly after the value; 0 writes no key (one key
    /// for all), and the stream is byte for byte what it was without keys.
    pub keys: u64,
}

impl GenSpec {
    /// Checks every option; the error names the option and its bound.
    pub fn validate(&self) -> Result<(), String> {
        if self.events == 0 || self.events > EVENTS_MAX as u64 {
            return Err(format!(
                "--events must be between 1 and {EVENTS_MAX} (the most an events file may hold), got {}",
                self.events
            ));
        }
        if !(0..=GEN_DISTANCE_MAX).contains(&self.out_of_orderness) {
            return Err(format!(
                "--out-of-orderness must be between 0 and {GEN_DISTANCE_MAX}, got {}",
                self.out_of_orderness
            ));
        }
        if !(0.0..=1.0).contains(&self.late_fraction) {
            return Err(format!(
                "--late-fraction must be between 0 and 1, got {}",
                self.late_fraction
            ));
        }
        if !(1..=GEN_DISTANCE_MAX).contains(&self.late_by_max) {
            return Err(format!(
                "--late-by-max must be between 1 and {GEN_DISTANCE_MAX}, got {}",
                self.late_by_max
            ));
        }
        if !(1..=EVENT_INT_MAX).contains(&self.value_max) {
            return Err(format!(
                "--value-max must be between 1 and {EVENT_INT_MAX}, got {}",
                self.value_max
            ));
        }
        if self.keys > GEN_KEYS_MAX {
            return Err(format!(
                "--keys must be between 0 and {GEN_KEYS_MAX}, got {}",
                self.keys
            ));
        }
        Ok(())
    }
}

/// The most distinct keys `keel gen` draws.
pub const GEN_KEYS_MAX: u64 = 1_000_000;

/// A uniform draw from `[0, bound)` (Lemire's multiply-shift: no modulo, no loop).
fn below(rng: &mut ChaCha8Rng, bound: u64) -> u64 {
    assert!(bound > 0);
    ((u128::from(rng.next_u64()) * u128::from(bound)) >> 64) as u64
}

/// A uniform draw from [0, 1) with 53 bits.
fn unit(rng: &mut ChaCha8Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// The stream as JSON lines, `{"ts": <int>, "value": <int>}` each (with `"key": "k<n>"`
/// between them when `keys` is not 0), newline-terminated.
/// `spec` must validate.
pub fn generate(spec: &GenSpec) -> String {
    spec.validate().expect("the command validates the spec");
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    let mut out = String::with_capacity(spec.events as usize * 28);
    for i in 0..spec.events {
        let position = i as i64;
        let late = unit(&mut rng) < spec.late_fraction;
        let ts = if late {
            position - spec.out_of_orderness - 1 - below(&mut rng, spec.late_by_max as u64) as i64
        } else {
            position - below(&mut rng, spec.out_of_orderness as u64 + 1) as i64
        };
        let value = 1 + below(&mut rng, spec.value_max as u64) as i64;
        if spec.keys == 0 {
            out.push_str(&format!("{{\"ts\": {ts}, \"value\": {value}}}\n"));
        } else {
            let key = below(&mut rng, spec.keys);
            out.push_str(&format!(
                "{{\"ts\": {ts}, \"key\": \"k{key}\", \"value\": {value}}}\n"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_engine::parse_events;

    fn spec(events: u64, seed: u64) -> GenSpec {
        GenSpec {
            events,
            seed,
            out_of_orderness: 5,
            late_fraction: 0.1,
            late_by_max: 200,
            value_max: 100,
            keys: 0,
        }
    }

    #[test]
    fn the_stream_parses_and_keeps_its_bounds() {
        let events = parse_events(&generate(&spec(10_000, 3))).expect("valid events");
        assert_eq!(events.len(), 10_000);
        let mut late = 0;
        for (i, event) in events.iter().enumerate() {
            let lag = i as i64 - event.ts;
            assert!((0..=5 + 200).contains(&lag), "event {i}: {event:?}");
            assert!((1..=100).contains(&event.value), "event {i}: {event:?}");
            if lag > 5 {
                late += 1;
            }
        }
        // About one in ten: 10,000 draws at p = 0.1 stay within 850..1150 (5 sigma).
        assert!(late > 850, "{late}");
        assert!(late < 1150, "{late}");
    }

    #[test]
    fn no_late_fraction_no_late_events_and_d_zero_is_in_order() {
        let mut in_order = spec(1_000, 9);
        in_order.late_fraction = 0.0;
        in_order.out_of_orderness = 0;
        let events = parse_events(&generate(&in_order)).unwrap();
        assert!(events.iter().enumerate().all(|(i, e)| e.ts == i as i64));
    }

    #[test]
    fn bad_options_name_themselves() {
        let mut bad = spec(0, 1);
        assert!(bad.validate().unwrap_err().starts_with("--events"));
        bad = spec(1_000_001, 1);
        assert!(bad.validate().unwrap_err().starts_with("--events"));
        bad = spec(1, 1);
        bad.late_fraction = 1.5;
        assert!(bad.validate().unwrap_err().starts_with("--late-fraction"));
        bad.late_fraction = f64::NAN;
        assert!(bad.validate().unwrap_err().starts_with("--late-fraction"));
        bad = spec(1, 1);
        bad.value_max = 0;
        assert!(bad.validate().unwrap_err().starts_with("--value-max"));
        bad = spec(1, 1);
        bad.out_of_orderness = -1;
        assert!(bad
            .validate()
            .unwrap_err()
            .starts_with("--out-of-orderness"));
        bad = spec(1, 1);
        bad.late_by_max = 0;
        assert!(bad.validate().unwrap_err().starts_with("--late-by-max"));
        bad = spec(1, 1);
        bad.keys = GEN_KEYS_MAX + 1;
        assert!(bad.validate().unwrap_err().starts_with("--keys"));
    }

    #[test]
    fn keys_come_after_the_draws_of_an_unkeyed_stream() {
        let unkeyed = parse_events(&generate(&spec(500, 4))).unwrap();
        let keyed_spec = GenSpec {
            keys: 3,
            ..spec(500, 4)
        };
        let text = generate(&keyed_spec);
        let keyed = keel_engine::job::parse_keyed_events(&text, 1).unwrap();
        assert_eq!(keyed.len(), 500);
        let mut seen = std::collections::BTreeSet::new();
        for (i, event) in keyed.iter().enumerate() {
            assert!(
                ["k0", "k1", "k2"].contains(&event.key.as_str()),
                "{event:?}"
            );
            seen.insert(event.key.clone());
            // The key is drawn last, so the stream's first event has the unkeyed one's
            // timestamp and value; later ones differ (one more draw per event).
            if i == 0 {
                assert_eq!((event.ts, event.value), (unkeyed[0].ts, unkeyed[0].value));
            }
        }
        assert_eq!(seen.len(), 3);
    }
}
