//! The oracle's own test, as `cargo mutants` runs it once per mutant of `engine/` (see
//! `.cargo/mutants.toml`): `scripts/mutants-oracle.sh` sweeps and explores ch04 and three
//! generated random streams with every sink held to its promise by `--expect`, and checks
//! that every unsafe protocol is still flagged. No pinned figures, no snapshots: on the
//! correct engine every check holds, and a mutant is caught when one does not.

use std::path::Path;
use std::process::Command;

#[test]
fn sweeps_and_explorations_of_random_streams_keep_every_promise() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let output = Command::new("bash")
        .arg(root.join("scripts/mutants-oracle.sh"))
        .arg(env!("CARGO_BIN_EXE_keel"))
        .current_dir(&root)
        .output()
        .expect("bash runs scripts/mutants-oracle.sh");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "scripts/mutants-oracle.sh exited with {}\n{stdout}{stderr}",
        output.status
    );
    assert!(stdout.contains("every check held"), "{stdout}{stderr}");
}
