//! Power-loss siblings: the points of one power loss in each of its crash states run the
//! same steps up to it (the same plan but for the state, so the same run), and differ only
//! in the disk the power loss resolves to. A sweep runs them one after another, so the first
//! of them keeps its world at the restart after the power loss, with the disk as it stood
//! just before the power loss ([`keel_sim::World::keep_disk_before_power_loss`]); each
//! sibling after it resolves that disk to its own state and, where its restart joins a
//! remembered one (`fork/restart.rs`), takes the class's future there without forking the
//! run or running to the step. A sibling whose restart joins no class runs as any point
//! does (its own restart is then remembered for the siblings after it).
//!
//! Siblings whose restarts join the same class restart in the same world (the class's
//! disk, sink file and all), so they observe the same run: the observation is made from the
//! kept world (the same for all of them) and the class, once, and shared (the same `Rc`),
//! so a sweep judges it once. Crash states that differ in any byte are never taken for one
//! another on a claim about what recovery reads (`keel_engine::sink::crash_readers` is the
//! engine's claim, used only where a user asks for classes: `--power-loss-points classes`);
//! each resolves its own disk and joins a class only with an equal one.
//!
//! Why it is the sibling's own restart: the world at a restart holds what the crash left,
//! and of that only the disk depends on the state. The rest (the clock, the log, the step
//! counter, the sink's served requests, the incarnations but for the crash's state) is the
//! same in every sibling. The trace also shows the state, but a point that takes on a
//! class's future has no trace fingerprint (`fork.rs`). The state must be the planned one:
//! a state number that wraps runs as the point's own.

use super::restart::RestartClass;
use super::{Forks, PointRun, SharedAt, SharedFutures};
use crate::observation::Observation;
use crate::runner::{Incarnation, IncarnationEnd, Restarting};
use keel_sim::{CrashKind, Disk, Fault, FaultPlan, PlannedFault, World};
use std::rc::Rc;

/// The most observations a kept power-loss restart remembers for its siblings (newest
/// kept). A power loss's siblings mostly keep one of a few sink files.
const SIBLING_OBSERVATIONS_MAX: usize = 8;

/// The run of a power-loss point at the restart just after its power loss, kept for the
/// points of the same power loss in other crash states.
#[derive(Debug)]
pub struct PowerLossRestart {
    /// The point's faults, the power loss's state as 0: what its siblings share.
    faults: Vec<PlannedFault>,
    /// The disk just before the power loss resolved it.
    before: Disk,
    /// The world at the restart.
    world: World,
    /// The incarnations that had ended by the restart.
    incarnations: Vec<Incarnation>,
    /// What siblings observed, by the class their restart joined (held, so that its
    /// address is not reused; at most [`SIBLING_OBSERVATIONS_MAX`]).
    observed: Vec<(Rc<RestartClass>, Rc<Observation>)>,
}

/// `plan`'s faults with its last fault's crash state as 0, if that fault is a power loss in
/// a crash state (every sibling of it has these faults). Lent, not collected: every point
/// of a sweep asks, and most have no power loss last.
fn siblings_key(plan: &FaultPlan) -> Option<impl Iterator<Item = PlannedFault> + '_> {
    let last = plan.iter().next_back()?;
    matches!(last.fault, Fault::PowerLoss { .. }).then(|| {
        plan.iter().map(move |mut fault| {
            if let (true, Fault::PowerLoss { state, .. }) =
                (fault.step == last.step, &mut fault.fault)
            {
                *state = 0;
            }
            fault
        })
    })
}

impl Forks {
    /// Whether points under `plan` keep the disk before their power loss (a plan that ends
    /// with one, in a table that shares restarts).
    pub(super) fn keeps_disk_before_power_loss(plan: &FaultPlan) -> bool {
        siblings_key(plan).is_some()
    }

    /// Keeps the run of a point under `plan` at `restarting`, if that is the restart just
    /// after its last fault, a power loss, for its siblings (unless it keeps one already).
    pub(super) fn keep_power_loss_restart(
        &self,
        plan: &FaultPlan,
        restarting: &Restarting,
        shared: &SharedFutures,
    ) {
        let Some(faults) = siblings_key(plan) else {
            return;
        };
        let last = plan.iter().next_back().expect("a power loss last");
        let world = restarting.world;
        let Some((step, before)) = world.disk_before_power_loss() else {
            return;
        };
        let just_after = matches!(
            restarting.incarnations.last(),
            Some(Incarnation {
                end: IncarnationEnd::Crashed(crash),
                ..
            }) if crash.step == last.step && matches!(crash.kind, CrashKind::PowerLoss { .. })
        );
        if step != last.step || !just_after || !world.plan_spent() {
            return;
        }
        let mut kept = shared.power_loss_restart().borrow_mut();
        let faults: Vec<PlannedFault> = faults.collect();
        if kept.as_ref().is_some_and(|kept| kept.faults == faults) {
            return;
        }
        *kept = Some(PowerLossRestart {
            faults,
            before: before.clone(),
            world: world.clone(),
            incarnations: restarting.incarnations.to_vec(),
            observed: Vec::new(),
        });
    }

    /// The run of a point under `plan` as a sibling of the power-loss run `shared` keeps,
    /// if its restart joins a remembered restart (None: it runs as any point does).
    pub(super) fn power_loss_sibling(
        &self,
        plan: &FaultPlan,
        shared: &SharedFutures,
    ) -> Option<PointRun> {
        let faults = siblings_key(plan)?;
        let Some(PlannedFault {
            fault: Fault::PowerLoss { state, .. },
            ..
        }) = plan.iter().next_back()
        else {
            unreachable!("siblings_key: a power loss last")
        };
        let mut kept = shared.power_loss_restart().borrow_mut();
        let kept = kept
            .as_mut()
            .filter(|kept| kept.faults.iter().copied().eq(faults))?;
        let config = &self.spec.config;
        let mut disk = kept.before.clone();
        if disk.power_loss_wrapping(state).state != state {
            return None;
        }
        // As `World::restart` does.
        if disk.is_read_only() {
            disk.remount();
        }
        let world = &kept.world;
        let candidate = self.restart_state_on(world, kept.incarnations.len(), &disk, shared)?;
        let class = shared.at_restart(config.key, &candidate, |class| {
            self.joins_restart(&candidate, class)
        })?;
        let observed = kept
            .observed
            .iter()
            .find(|(seen, _)| Rc::ptr_eq(seen, &class));
        let observation = match observed {
            Some((_, observation)) => Rc::clone(observation),
            None => {
                let mut incarnations = kept.incarnations.clone();
                match incarnations.last_mut().map(|i| &mut i.end) {
                    Some(IncarnationEnd::Crashed(crash)) => {
                        crash.kind = CrashKind::PowerLoss {
                            state,
                            class: false,
                        }
                    }
                    _ => unreachable!("kept just after the power loss"),
                }
                let observation = Rc::new(self.restarted(
                    world,
                    &incarnations,
                    &candidate,
                    &class,
                    Some(shared.described()),
                ));
                if kept.observed.len() == SIBLING_OBSERVATIONS_MAX {
                    kept.observed.remove(0);
                }
                kept.observed
                    .push((Rc::clone(&class), Rc::clone(&observation)));
                observation
            }
        };
        Some(PointRun {
            observation,
            fingerprint: None,
            shared: Some(SharedAt::SiblingRestart),
            class_states: kept.world.class_states().cloned(),
            converged_at: None,
        })
    }
}
