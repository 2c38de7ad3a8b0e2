//! `keel explore --coverage`: on ch04, seeds 0..10000 reach every cell of the sweep (phase ×
//! fault kind) for every protocol, state backend and sink, and the report names the first
//! seed of each; the first seed it names does reach its cell when replayed.

use serde_json::Value;
use std::process::Command;

/// `keel explore --coverage --format json` with `extra`: the report.
fn explore(extra: &[&str]) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_keel"))
        .args([
            "explore",
            "--coverage",
            "--summary-only",
            "--format",
            "json",
            "--sinks",
            "append,idempotent,transactional",
        ])
        .args(extra)
        .output()
        .expect("keel runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{extra:?}: {stderr}");
    serde_json::from_slice(&output.stdout).expect("a JSON report")
}

/// Every cell of every sink reached by `seeds`; returns (cells, the largest first seed).
fn check(protocol: &str, backend: &str, seeds: &str) -> (u64, u64) {
    let report = explore(&[
        "--checkpoint-protocol",
        protocol,
        "--state-backend",
        backend,
        "--seeds",
        seeds,
    ]);
    let coverage = report["coverage"].as_array().expect("coverage per sink");
    assert_eq!(coverage.len(), 3, "{protocol}");
    let (mut cells, mut last_first) = (0, 0);
    for sink in coverage {
        let listed = sink["first_seed"].as_array().expect("cells");
        assert_eq!(sink["cells"].as_u64(), Some(listed.len() as u64));
        let missed: Vec<&Value> = listed
            .iter()
            .filter(|c| c["first_seed"].is_null())
            .collect();
        assert!(
            missed.is_empty(),
            "{protocol} {backend} {}: missed {missed:?}",
            sink["sink"]
        );
        assert_eq!(sink["reached"], sink["cells"]);
        cells += listed.len() as u64;
        let firsts = listed.iter().filter_map(|c| c["first_seed"].as_u64());
        last_first = last_first.max(firsts.max().expect("a cell"));
    }
    (cells, last_first)
}

#[test]
fn seeds_reach_every_cell_of_the_safe_protocols_sweep() {
    // The last cell to be reached, at seed 1316: a transactional sink's.
    assert_eq!(check("safe", "full", "0..1317"), (135, 1316));
    let short = explore(&["--seeds", "0..1316"]);
    let reached: u64 = short["coverage"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["reached"].as_u64().unwrap())
        .sum();
    assert_eq!(reached, 134);
}

#[cfg(feature = "long-tests")]
#[test]
fn long_seeds_reach_every_cell_of_the_sweep_for_every_protocol() {
    for (protocol, backend, cells, last_first) in [
        ("safe", "full", 135, 1316),
        ("in-place", "full", 99, 700),
        ("no-fsync-rename", "full", 126, 925),
        ("no-dir-fsync", "full", 126, 937),
        ("delete-then-rename", "full", 135, 1316),
        ("size-only", "full", 126, 925),
        ("checkpoint-before-sink-sync", "full", 135, 1316),
        ("no-tail-repair", "full", 135, 1316),
        ("trust-page-cache-after-eio", "full", 135, 1316),
        ("safe", "incremental", 216, 983),
        ("no-delta-fsync", "incremental", 198, 1209),
    ] {
        assert_eq!(
            check(protocol, backend, "0..10000"),
            (cells, last_first),
            "{protocol} {backend}"
        );
    }
}

#[test]
fn too_few_seeds_miss_cells_and_say_which() {
    let report = explore(&["--seeds", "0..20"]);
    let append = &report["coverage"][0];
    assert_eq!(append["sink"], "append");
    let missed = append["first_seed"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["first_seed"].is_null())
        .count() as u64;
    assert!(missed > 0);
    assert_eq!(
        append["reached"].as_u64().unwrap() + missed,
        append["cells"].as_u64().unwrap()
    );
}

/// `keel sweep --coverage` with `extra`: the line that counts the append sink's cells.
fn sweep_cells_line(extra: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_keel"))
        .args(["sweep", "--coverage", "--sinks", "append", "--quiet"])
        .args(extra)
        .output()
        .expect("keel runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(output.status.code(), Some(0), "{extra:?}: {stdout}");
    stdout
        .lines()
        .find(|l| l.starts_with("append: "))
        .expect("the coverage line")
        .to_string()
}

#[test]
fn a_sweep_reaches_every_cell_and_a_stopped_one_says_how_many() {
    let all = "append: 43 of 43 cells reached, 0 missed; 0 more cells reached beyond the sweep's (faults after a restart)";
    assert_eq!(sweep_cells_line(&[]), all);
    let stopped = "append: 25 of 43 cells reached, 18 missed; 0 more cells reached beyond the sweep's (faults after a restart)";
    assert_eq!(sweep_cells_line(&["--points-max", "100"]), stopped);
}
