//! What several integration tests share: a generator of random event streams.

/// A random stream: ts mostly rising, about one event in five up to 8 late, values 1..=9.
pub fn random_stream(seed: u64, len: usize) -> String {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = |bound: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % bound
    };
    let mut ts: i64 = 0;
    let mut out = String::new();
    for _ in 0..len {
        let event_ts = if next(5) == 0 {
            ts - next(9) as i64
        } else {
            ts += next(4) as i64;
            ts
        };
        out.push_str(&format!(
            "{{\"ts\":{event_ts},\"value\":{}}}\n",
            1 + next(9)
        ));
    }
    out
}
