//! Real mode: the same engine on a real directory agrees with the simulated disk.

use keel_engine::{CheckpointProtocol, Engine, EngineConfig, SinkKind};
use keel_scenarios::catalogue::Scenario;
use keel_scenarios::real::{disk_listing, listing, RealDir};
use keel_scenarios::runner::{run, RunSpec};
use keel_sim::{Env, FaultPlan, TxLog, World};
use std::path::PathBuf;

/// A fresh, empty directory under cargo's per-test temporary directory.
fn fresh_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn spec(config: EngineConfig) -> RunSpec {
    RunSpec {
        events: Scenario::by_name("ch04").unwrap().events(),
        config,
        plan: FaultPlan::none(),
        seed: 0,
        restart_delay_ms: 500,
        sector_size_bytes: 512,
        transaction_timeout_ms: 60_000,
    }
}

#[test]
fn a_fault_free_run_on_a_real_directory_has_the_simulated_trace_and_files() {
    for sink in [SinkKind::Append, SinkKind::Idempotent] {
        for protocol in [CheckpointProtocol::Safe, CheckpointProtocol::InPlace] {
            let config = EngineConfig {
                sink,
                protocol,
                ..EngineConfig::default()
            };
            let spec = spec(config);
            let simulated = run(&spec);

            let dir = fresh_dir(&format!("fault-free-{sink}-{protocol}"));
            let env = Env::new(RealDir::new(&dir), TxLog::new(60_000));
            let mut world = World::with_env(0, FaultPlan::none(), env);
            let mut engine = Engine::new(config);
            engine.recover(&mut world).unwrap();
            engine.run(&mut world, &spec.events).unwrap();

            assert_eq!(
                world.trace().text_lines(),
                simulated.world.trace().text_lines()
            );
            assert_eq!(world.fingerprint(), simulated.world.fingerprint());
            assert_eq!(
                listing(&dir).unwrap(),
                disk_listing(&simulated.world.env().disk)
            );
            assert_eq!(engine.state().sums(), simulated.final_state.sums());
        }
    }
}

/// Runs the real `keel` binary; returns (stdout, stderr, exit code).
fn keel(args: &[&str]) -> (String, String, i32) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_keel"))
        .args(args)
        .output()
        .unwrap();
    (
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
        output.status.code().unwrap(),
    )
}

fn json_of(args: &[&str]) -> serde_json::Value {
    let (stdout, stderr, code) = keel(args);
    assert_eq!(code, 0, "keel {args:?}: {stderr}");
    serde_json::from_str(&stdout).unwrap()
}

/// `keel run --real-dir <fresh dir> <args>` and the same run simulated: the real report is
/// the simulated one, field for field, plus the real mode's own fields.
fn real_and_simulated(name: &str, args: &[&str]) -> serde_json::Value {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
    let mut real_args = vec![
        "run",
        "--format",
        "json",
        "--real-dir",
        dir.to_str().unwrap(),
    ];
    real_args.extend_from_slice(args);
    let mut real = json_of(&real_args);
    let mut simulated_args = vec!["run", "--format", "json"];
    simulated_args.extend_from_slice(args);
    let simulated = json_of(&simulated_args);

    let fields = real.as_object_mut().unwrap();
    assert_eq!(fields.remove("mode").unwrap(), "real");
    let directory = fields.remove("directory").unwrap();
    let children = fields.remove("children").unwrap();
    fields.remove("reproduce").unwrap();
    let mut simulated = simulated.as_object().unwrap().clone();
    simulated.remove("reproduce").unwrap();
    assert_eq!(fields, &simulated);
    serde_json::json!({"report": real, "directory": directory, "children": children})
}

fn killed_then_completed() -> serde_json::Value {
    serde_json::json!([
        {"incarnation": 0, "signal": "SIGKILL", "exit_code": null},
        {"incarnation": 1, "signal": null, "exit_code": 0},
    ])
}

#[test]
fn the_chapters_crash_after_event_14_for_real_append_sink() {
    let run = real_and_simulated(
        "chapter-append",
        &["--crash-after-event", "14", "--sink", "append"],
    );
    let report = &run["report"];
    assert_eq!(
        report["tally"],
        serde_json::json!({"total_records": 5, "unique_keys": 4, "duplicates": 1, "lost": 0, "corrupt": 0})
    );
    assert_eq!(report["crash"]["written"], 1);
    assert_eq!(report["crash"]["checkpoint"]["index"], 8);
    assert_eq!(report["recovery"]["resume_from_index"], 8);
    assert_eq!(report["fingerprint"], "8c5181a916ed86b9");
    assert_eq!(run["children"], killed_then_completed());
    assert_eq!(
        run["directory"],
        serde_json::json!([
            {"name": "sink-append.jsonl", "size_bytes": 409, "digest": "ceb5e47efb6b85c3"},
            {"name": "state-24.json", "size_bytes": 206, "digest": "79ae31755ebbb3ba"},
        ])
    );
}

#[test]
fn the_chapters_crash_after_event_14_for_real_idempotent_sink() {
    let run = real_and_simulated(
        "chapter-idempotent",
        &["--crash-after-event", "14", "--sink", "idempotent"],
    );
    let report = &run["report"];
    assert_eq!(
        report["tally"],
        serde_json::json!({"total_records": 4, "unique_keys": 4, "duplicates": 0, "lost": 0, "corrupt": 0})
    );
    assert_eq!(report["crash"]["written"], 1);
    assert_eq!(report["crash"]["checkpoint"]["index"], 8);
    assert_eq!(report["recovery"]["skipped"], 1);
    assert_eq!(run["children"], killed_then_completed());
}

#[test]
fn the_chapters_kill_after_2600_ms_for_real() {
    let run = real_and_simulated(
        "chapter-2600ms",
        &["--crash-at-ms", "2600", "--event-interval-ms", "300"],
    );
    let report = &run["report"];
    assert_eq!(report["crash"]["at_ms"], 2600);
    assert_eq!(report["crash"]["after_event"], 8);
    assert_eq!(report["crash"]["written"], 0);
    assert_eq!(report["crash"]["checkpoint"]["index"], 8);
    assert_eq!(report["recovery"]["resume_from_index"], 8);
    assert_eq!(report["tally"]["duplicates"], 0);
    assert_eq!(
        report["plan"],
        serde_json::json!({"faults": [], "kill_at_ms": 2600})
    );
    assert_eq!(run["children"], killed_then_completed());
}

#[test]
fn a_real_dir_that_is_not_empty_is_refused_and_left_alone() {
    let dir = fresh_dir("not-empty");
    std::fs::write(dir.join("mine.txt"), b"keep me").unwrap();
    let (stdout, stderr, code) = keel(&["run", "--real-dir", dir.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert_eq!(stdout, "");
    assert_eq!(
        stderr,
        format!(
            "error: --real-dir {}: the directory is not empty (keel never deletes your files; give an empty or absent one)\n",
            dir.display()
        )
    );
    assert_eq!(std::fs::read(dir.join("mine.txt")).unwrap(), b"keep me");
}

#[test]
fn simulation_only_sinks_and_faults_are_refused_in_real_mode() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("refused");
    let dir = dir.to_str().unwrap();
    let (_, stderr, code) = keel(&["run", "--real-dir", dir, "--sink", "transactional"]);
    assert_eq!(code, 2);
    assert_eq!(
        stderr,
        "error: --real-dir: the transactional sink is simulation-only (its log is simulated)\n"
    );
    let (_, stderr, code) = keel(&[
        "run",
        "--real-dir",
        dir,
        "--fault",
        "power-loss",
        "--at-step",
        "20",
    ]);
    assert_eq!(code, 2);
    assert_eq!(
        stderr,
        "error: --real-dir supports process crashes only; power-loss is simulation-only\n"
    );
}

#[test]
fn a_rollback_the_simulator_predicts_happens_for_real() {
    let run = real_and_simulated(
        "in-place-rollback",
        &[
            "--checkpoint-protocol",
            "in-place",
            "--fault",
            "process-crash",
            "--at-step",
            "24",
        ],
    );
    assert_eq!(
        run["report"]["failures"],
        serde_json::json!(["no-rollback"])
    );
    assert_eq!(run["children"], killed_then_completed());
}

/// `keel fidelity kill` on ch04: every process-crash point agrees, for the safe protocol and
/// for the two unsafe ones a process crash breaks (their rollbacks included).
#[test]
fn fidelity_kill_on_ch04_agrees_at_every_point() {
    for (protocol, points) in [("safe", 59), ("in-place", 48), ("delete-then-rename", 59)] {
        let (stdout, stderr, code) = keel(&[
            "fidelity",
            "kill",
            "--scenario",
            "ch04",
            "--sinks",
            "append,idempotent",
            "--checkpoint-protocol",
            protocol,
            "--format",
            "json",
        ]);
        assert_eq!(code, 0, "{protocol}: {stdout}{stderr}");
        let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(report["protocol"], protocol);
        let rows = report["rows"].as_array().unwrap();
        let figures: Vec<_> = rows
            .iter()
            .map(|row| {
                (
                    row["sink"].as_str().unwrap().to_string(),
                    row["points"].as_u64().unwrap(),
                    row["agree"].as_u64().unwrap(),
                    row["disagree"].as_u64().unwrap(),
                    row["first_disagreement"].is_null(),
                )
            })
            .collect();
        assert_eq!(
            figures,
            vec![
                ("append".to_string(), points, points, 0, true),
                ("idempotent".to_string(), points, points, 0, true),
            ],
            "{protocol}"
        );
    }
}

#[test]
fn fidelity_kill_csv_is_the_table_alone() {
    let (stdout, stderr, code) = keel(&[
        "fidelity",
        "kill",
        "--scenario",
        "ch04",
        "--sinks",
        "idempotent",
        "--format",
        "csv",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(
        lines[0],
        "sink,points,agree,disagree,sim_us_per_point,real_us_per_point,real/sim,first_disagreement"
    );
    assert!(lines[1].starts_with("idempotent,59,59,0,"), "{}", lines[1]);
    assert!(lines[1].ends_with(",-"), "{}", lines[1]);
}
