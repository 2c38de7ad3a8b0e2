//! Tests of the simulated world (`world.rs`).

use super::*;
use crate::fault::PlannedFault;

fn write_three(world: &mut World) -> Result<(), Crash> {
    world.effect("disk.create", "f", |env| env.disk.create("f").unwrap())?;
    world.effect("disk.append", "f", |env| {
        env.disk.append("f", b"a").unwrap()
    })?;
    world.effect("disk.append", "f", |env| {
        env.disk.append("f", b"b").unwrap()
    })?;
    Ok(())
}

fn crash_at(step: u64, at: CrashPoint) -> FaultPlan {
    FaultPlan::new([PlannedFault {
        step,
        fault: Fault::ProcessCrash { at },
    }])
    .unwrap()
}

/// A run forked after its first fault under a plan that adds a second one goes on as
/// the run of both faults from the start; a plan that rewrites a fault already taken is
/// refused.
#[test]
fn a_run_forked_after_its_first_fault_goes_on_as_the_run_of_both() {
    let second = PlannedFault {
        step: 4,
        fault: Fault::ProcessCrash {
            at: CrashPoint::Before,
        },
    };
    let first = PlannedFault {
        step: 0,
        fault: Fault::ProcessCrash {
            at: CrashPoint::After,
        },
    };
    let both = FaultPlan::new([first, second]).unwrap();
    let mut whole = World::new(0, both.clone());
    let mut forked = World::new(0, FaultPlan::new([first]).unwrap());
    assert!(write_three(&mut whole).is_err());
    assert!(write_three(&mut forked).is_err());
    whole.restart(500);
    forked.restart(500);
    let mut forked = forked.fork_later(both);
    let third = |world: &mut World| {
        world.effect("disk.append", "f", |env| {
            env.disk.append("f", b"c").unwrap()
        })
    };
    for world in [&mut whole, &mut forked] {
        assert!(third(world).is_ok()); // step 1
        assert!(third(world).is_ok()); // step 2
        assert!(third(world).is_ok()); // step 3
        assert!(third(world).is_err()); // step 4: the second fault
    }
    assert_eq!(whole.fingerprint(), forked.fingerprint());
    assert_eq!(whole.env().disk.read("f"), forked.env().disk.read("f"));
    let rewritten = FaultPlan::new([second]).unwrap();
    let refused = std::panic::catch_unwind(|| whole.fork_later(rewritten));
    assert!(refused.is_err(), "the first fault is gone from the plan");
}

#[test]
fn a_crash_before_a_step_skips_its_effect_and_after_keeps_it() {
    let mut before = World::new(0, crash_at(1, CrashPoint::Before));
    let crash = write_three(&mut before).unwrap_err();
    assert_eq!(crash.step, 1);
    assert_eq!(before.env().disk.read("f").unwrap(), b"");

    let mut after = World::new(0, crash_at(1, CrashPoint::After));
    assert_eq!(write_three(&mut after).unwrap_err().step, 1);
    assert_eq!(after.env().disk.read("f").unwrap(), b"a");
}

#[test]
fn restart_advances_the_clock_and_keeps_the_disk() {
    let mut world = World::new(0, crash_at(2, CrashPoint::Before));
    write_three(&mut world).unwrap_err();
    world.restart(1_000);
    assert_eq!(world.now_ms(), 1_000);
    assert_eq!(world.incarnation(), 1);
    assert_eq!(world.env().disk.read("f").unwrap(), b"a");
    assert_eq!(world.steps_taken(), 3);
}

#[test]
fn a_restart_on_a_read_only_btrfs_remounts_it_and_says_so() {
    let plan = FaultPlan::new([PlannedFault {
        step: 3,
        fault: Fault::DiskError,
    }])
    .unwrap();
    let disk = Disk::with_model(512, crate::disk::FsModel::Btrfs);
    let mut world = World::with_disk(0, plan, disk);
    write_three(&mut world).unwrap();
    let failed = world
        .effect("disk.fsync", "f", |env| env.disk.fsync("f"))
        .unwrap();
    assert!(matches!(failed, Err(crate::disk::DiskError::Io { .. })));
    assert!(world.env().disk.is_read_only());
    assert_eq!(world.env().disk.read("f").unwrap(), b"ab");
    world.restart(500);
    assert!(!world.env().disk.is_read_only());
    // Nothing was durable: the create, never logged by a successful fsync, is undone.
    assert!(world.env().disk.list().is_empty());
    let lines: Vec<String> = world.trace().lines().map(|l| l.to_string()).collect();
    assert_eq!(
        lines[lines.len() - 2..],
        [
            "note t=0ms p0 remount: the file system was read-only after a failed fsync; \
             state 0/1: f: 0/2 writes kept, size lost, no name survived; \
             dir: 0/1 ops kept (undone: create f)",
            "restart t=500ms p1",
        ]
    );
}

#[test]
fn a_kill_by_the_clock_happens_while_waiting_and_only_once() {
    let mut world = World::new(0, FaultPlan::kill_at_ms(250));
    world.effect("op", "a", |_| ()).unwrap();
    let crash = world.sleep_until(300).unwrap_err();
    assert_eq!((crash.step, crash.time_ms), (1, 250));
    world.restart(100);
    assert_eq!(world.now_ms(), 350);
    world.sleep_until(400).unwrap();
    world.effect("op", "b", |_| ()).unwrap();

    let mut late = World::new(0, FaultPlan::kill_at_ms(0));
    assert_eq!(late.effect("op", "a", |_| ()).unwrap_err().step, 0);
}

#[test]
fn a_wrapped_crash_state_is_recorded_and_traced_as_the_state_that_ran() {
    let power_loss = |state| {
        FaultPlan::new([PlannedFault {
            step: 2,
            fault: Fault::PowerLoss {
                at: CrashPoint::After,
                state,
            },
        }])
        .unwrap()
    };
    let mut probe = World::new(0, FaultPlan::none());
    write_three(&mut probe).unwrap();
    let count = probe.env().disk.power_loss_states().count().unwrap();
    assert!(count > 1, "the unsynced appends leave several states");

    let run = |plan: FaultPlan| {
        let mut world = World::new(0, plan);
        write_three(&mut world).unwrap_err();
        world
    };
    let drawn = run(power_loss(count + 1));
    let ran = run(power_loss(1));
    assert_eq!(
        drawn.wrapped_states(),
        [WrappedState {
            step: 2,
            planned: count + 1,
            count,
            class: false,
        }]
    );
    assert!(ran.wrapped_states().is_empty());
    assert_eq!(drawn.plan_that_ran(), power_loss(1));
    assert_eq!(drawn.trace().text_lines(), ran.trace().text_lines());
    assert_eq!(drawn.fingerprint(), ran.fingerprint());
}

#[test]
fn a_page_eviction_drops_what_a_failed_fsync_left_and_else_leaves_no_mark() {
    let plan = |faults: &[(u64, Fault)]| {
        FaultPlan::new(
            faults
                .iter()
                .map(|&(step, fault)| PlannedFault { step, fault }),
        )
        .unwrap()
    };
    let sync = |world: &mut World| world.effect("disk.fsync", "f", |env| env.disk.fsync("f"));
    // Steps 0..=2 write "ab"; step 3 fsyncs it, and fails; step 4 evicts.
    let mut world = World::new(0, plan(&[(3, Fault::DiskError), (4, Fault::PageEviction)]));
    write_three(&mut world).unwrap();
    assert!(sync(&mut world).unwrap().is_err());
    assert_eq!(
        world.env().disk.read("f").unwrap(),
        b"ab",
        "clean pages still hold it"
    );
    world.effect("op", "x", |_| ()).unwrap();
    assert_eq!(world.env().disk.read("f").unwrap(), b"\0\0");
    assert_eq!(
        world.plan_that_ran(),
        plan(&[(3, Fault::DiskError), (4, Fault::PageEviction)])
    );
    assert!(world.trace().text_lines().contains(
        &"note t=0ms p0 page eviction (planned): f: 2 unpersisted bytes dropped".to_string()
    ));
    // With nothing unpersisted, the same eviction does nothing and leaves no mark.
    let mut idle = World::new(0, plan(&[(4, Fault::PageEviction)]));
    write_three(&mut idle).unwrap();
    sync(&mut idle).unwrap().unwrap();
    idle.effect("op", "x", |_| ()).unwrap();
    let mut none = World::new(0, FaultPlan::none());
    write_three(&mut none).unwrap();
    sync(&mut none).unwrap().unwrap();
    none.effect("op", "x", |_| ()).unwrap();
    assert_eq!(idle.plan_that_ran(), FaultPlan::none());
    assert_eq!(idle.fingerprint(), none.fingerprint());
}

#[test]
fn same_plan_same_fingerprint() {
    let run = || {
        let mut world = World::new(7, crash_at(1, CrashPoint::After));
        let _ = write_three(&mut world);
        world.restart(10);
        write_three(&mut world).unwrap();
        world.fingerprint()
    };
    assert_eq!(run(), run());
    let mut other = World::new(7, FaultPlan::none());
    write_three(&mut other).unwrap();
    assert_ne!(run(), other.fingerprint());
}

/// A step that wrote or read a file shows the file's running digest on its line once its
/// effect ran (not when a crash came before it); a request shows its payload's digest when
/// the sink served it (not when it refused it); and the input's digest, named before the
/// first step, is hashed first.
#[test]
fn a_steps_line_shows_the_digest_of_its_data() {
    use crate::digest::{fnv1a64, FileDigest};
    let sink_error = FaultPlan::new([PlannedFault {
        step: 3,
        fault: Fault::SinkError,
    }])
    .unwrap();
    let mut world = World::new(0, sink_error);
    world.set_input_digest(7);
    world
        .effect("disk.create", "f", |env| env.disk.create("f"))
        .unwrap()
        .unwrap();
    world
        .effect_data("disk.write", "f", Data::File("f"), |env| {
            env.disk.append("f", b"abc")
        })
        .unwrap()
        .unwrap();
    let send =
        |world: &mut World| world.request_data("log.send", "k", Data::Bytes(b"payload"), |_| ());
    assert!(send(&mut world).unwrap().is_ok());
    assert_eq!(
        send(&mut world).unwrap(),
        Err(RequestError::Refused),
        "the planned sink error"
    );
    let hex = |digest: u64| crate::hex16(digest).as_str().to_string();
    assert_eq!(
        world.trace().text_lines(),
        [
            "step 0 t=0ms p0 disk.create f".to_string(),
            format!(
                "step 1 t=0ms p0 disk.write f #{}",
                hex(FileDigest::of(b"abc").value())
            ),
            format!("step 2 t=0ms p0 log.send k #{}", hex(fnv1a64(b"payload"))),
            "step 3 t=0ms p0 log.send k !sink-error".to_string(),
        ]
    );
    let mut text = "input 0000000000000007\n".to_string();
    for line in world.trace().text_lines() {
        text.push_str(&line);
        text.push('\n');
    }
    assert_eq!(world.fingerprint(), crate::Fingerprint::of(text.as_bytes()));
    // A crash before the effect: the step wrote nothing, and its line shows no data.
    let mut crashed = World::new(0, crash_at(0, CrashPoint::Before));
    let read = crashed.effect_data("disk.read", "f", Data::File("f"), |_| ());
    assert!(read.is_err());
    assert_eq!(
        crashed.trace().text_lines()[0],
        "step 0 t=0ms p0 disk.read f !process-crash before"
    );
}
