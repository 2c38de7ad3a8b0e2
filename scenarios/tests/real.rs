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
