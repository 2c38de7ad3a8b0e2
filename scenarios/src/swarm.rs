//! Seeds to fault plans, swarm style: a seed first draws which fault kinds are on (and how
//! many faults), then the plan itself.
//!
//! As in FoundationDB's and TigerBeetle's simulators, each seed explores a different corner:
//! some seeds only crash processes, some only lose power, some mix everything. Both draws go
//! through `arbitrary` from the bytes of the seed's own ChaCha streams (one stream for the
//! swarm choice, one for the plan), so the same structured generator can be driven by a
//! fuzzer's bytes instead.

use crate::sites::SiteAims;
use arbitrary::{Arbitrary, Unstructured};
use keel_sim::{CrashPoint, Fault, FaultKind, FaultPlan, PlannedFault, SeedTree, Subsystem};
use rand_core::RngCore;
use serde::Serialize;

/// Bytes drawn from a seed's stream for one `Unstructured` (bounds the generator's input).
const SEED_BYTES: usize = 4096;

/// Which fault kinds one seed turns on.
#[derive(Clone, Debug, PartialEq, Eq, Arbitrary, Serialize)]
pub struct Swarm {
    pub process_crash: bool,
    pub power_loss: bool,
    pub disk_error: bool,
    pub sink_error: bool,
    pub ack_lost: bool,
    pub sink_unavailable: bool,
    /// Favour crashes before (rather than after) a step's effect.
    pub crash_before: bool,
    // New kinds go last: an earlier field's draw must not change when one is added.
    pub zombie: bool,
    pub page_eviction: bool,
}

impl Swarm {
    pub fn enabled(&self, kind: FaultKind) -> bool {
        match kind {
            FaultKind::ProcessCrash => self.process_crash,
            FaultKind::PowerLoss => self.power_loss,
            FaultKind::DiskError => self.disk_error,
            FaultKind::SinkError => self.sink_error,
            FaultKind::AckLost => self.ack_lost,
            FaultKind::SinkUnavailable => self.sink_unavailable,
            FaultKind::Zombie => self.zombie,
            FaultKind::PageEviction => self.page_eviction,
            // A parallel job's own faults: never drawn for the one-task engine.
            FaultKind::MessageLost | FaultKind::SlowChannel => false,
        }
    }
}

/// What the generator may use: the fault-free run's sites and the user's limits.
#[derive(Clone, Copy, Debug)]
pub struct PlanContext<'a> {
    pub sites: &'a SiteAims,
    /// The kinds the user allows (`--faults`); the swarm picks among them.
    pub allowed: &'a [FaultKind],
    pub max_faults: usize,
    pub outage_ms: u64,
}

fn seed_bytes(seed: u64, subsystem: Subsystem) -> Vec<u8> {
    let mut bytes = vec![0; SEED_BYTES];
    SeedTree::new(seed).stream(subsystem).fill_bytes(&mut bytes);
    bytes
}

/// The kinds a swarm turns on among the allowed ones (all allowed, if it turns on none).
pub fn swarm_kinds(swarm: &Swarm, allowed: &[FaultKind]) -> Vec<FaultKind> {
    let on: Vec<FaultKind> = allowed
        .iter()
        .copied()
        .filter(|k| swarm.enabled(*k))
        .collect();
    if on.is_empty() {
        allowed.to_vec()
    } else {
        on
    }
}

/// The structured generator: a plan from any bytes. The first fault lands on a site of the
/// fault-free run where its kind applies; later ones land after it (recovery included),
/// where they take effect only if their kind applies to whatever step is there.
pub fn plan_from_unstructured(
    u: &mut Unstructured<'_>,
    kinds: &[FaultKind],
    context: &PlanContext<'_>,
    crash_before: bool,
) -> arbitrary::Result<FaultPlan> {
    assert!(context.max_faults >= 1);
    let run_len_steps = context.sites.len() as u64;
    let fault_count = u.int_in_range(1..=context.max_faults)?;
    let mut faults: Vec<PlannedFault> = Vec::with_capacity(fault_count);
    for _ in 0..fault_count {
        let kind = *u.choose(kinds)?;
        let step = match faults.last() {
            None => {
                let sites: Vec<u64> = context
                    .sites
                    .aims()
                    .filter(|s| s.faults.contains(&kind))
                    .map(|s| s.step)
                    .collect();
                if sites.is_empty() {
                    continue;
                }
                *u.choose(&sites)?
            }
            Some(previous) => previous.step + 1 + u.int_in_range(0..=run_len_steps.max(1) - 1)?,
        };
        let at = if crash_before && u.arbitrary::<bool>()? {
            CrashPoint::Before
        } else {
            CrashPoint::After
        };
        let fault = match kind {
            FaultKind::ProcessCrash => Fault::ProcessCrash { at },
            FaultKind::PowerLoss => Fault::PowerLoss {
                at,
                state: u.arbitrary()?,
            },
            FaultKind::DiskError => Fault::DiskError,
            FaultKind::SinkError => Fault::SinkError,
            FaultKind::AckLost => Fault::AckLost,
            FaultKind::SinkUnavailable => Fault::SinkUnavailable {
                duration_ms: context.outage_ms,
            },
            FaultKind::Zombie => Fault::Zombie,
            FaultKind::PageEviction => Fault::PageEviction,
            // Apply to no step of the one-task engine: no site has them, so never first, and
            // later ones leave no mark.
            FaultKind::MessageLost => Fault::MessageLost,
            FaultKind::SlowChannel => Fault::SlowDelivery {
                delay_ms: context.outage_ms,
            },
        };
        faults.push(PlannedFault { step, fault });
    }
    Ok(FaultPlan::new(faults).expect("steps strictly increase"))
}

/// The swarm choice and the plan of `seed`.
pub fn plan_for_seed(seed: u64, context: &PlanContext<'_>) -> (Swarm, FaultPlan) {
    let swarm_bytes = seed_bytes(seed, Subsystem::Swarm);
    let swarm = Swarm::arbitrary(&mut Unstructured::new(&swarm_bytes))
        .expect("4096 bytes are enough for a swarm choice");
    let kinds = swarm_kinds(&swarm, context.allowed);
    let plan_bytes = seed_bytes(seed, Subsystem::Plan);
    let plan = plan_from_unstructured(
        &mut Unstructured::new(&plan_bytes),
        &kinds,
        context,
        swarm.crash_before,
    )
    .expect("4096 bytes are enough for a plan");
    (swarm, plan)
}
