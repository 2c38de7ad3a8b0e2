//! What several integration tests share: a generator of random event streams, the
//! checkpoint protocols, and `keel` run in process.
// Each test crate that includes this module uses some of it.
#![allow(dead_code)]

use clap::Parser;
use keel_scenarios::cli::{execute, Cli};

/// Every checkpoint protocol with a full-checkpoint form (`no-delta-fsync` is incremental
/// only).
pub const PROTOCOLS: [&str; 9] = [
    "safe",
    "trust-page-cache-after-eio",
    "in-place",
    "no-fsync-rename",
    "no-dir-fsync",
    "delete-then-rename",
    "size-only",
    "checkpoint-before-sink-sync",
    "no-tail-repair",
];

/// `keel args` in process: its standard output (a panic names the command if it fails).
pub fn keel_stdout(args: &[String]) -> String {
    let mut argv = vec!["keel".to_string()];
    argv.extend_from_slice(args);
    let out = execute(&Cli::try_parse_from(&argv).expect("valid command line"))
        .unwrap_or_else(|e| panic!("keel {args:?}: {e:?}"));
    out.stdout
}

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
