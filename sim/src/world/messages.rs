//! Messages between the tasks of a parallel job (`keel job`), as the world delivers them.
//!
//! Fault model (see `fault.rs`): a step that receives a control message (a checkpoint
//! acknowledgement, a completion notification) may find it lost ([`Fault::MessageLost`]):
//! the receiver goes on as if it had never been sent, and nobody retries it. A step that puts
//! items on a channel may have them delivered late ([`Fault::SlowDelivery`]): the consumer
//! sees them `delay_ms` of simulated time later, and the items behind them wait too (the
//! channel stays FIFO); nothing is lost or reordered. A process crash or power loss aimed at
//! such a step takes effect as at any other step. A message fault aimed at a step that sends
//! no such message leaves no mark, so the plan that ran replays with the same fingerprint.

use super::*;

/// What a step sends, as far as the plan's message faults are concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sends {
    /// Nothing a message fault applies to.
    Nothing,
    /// The step receives a control message, which may be lost.
    Message,
    /// The step puts items on one or more channels, which may be delivered late.
    Channel,
}

/// What became of the message or the items a step sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    Delivered,
    /// It never arrives.
    Lost,
    /// Its consumer sees it this many simulated ms after the step.
    Delayed {
        delay_ms: u64,
    },
}

impl<S: Storage> World<S> {
    /// One step of a parallel job's task that sends (or receives) what `sends` says, as one
    /// numbered step: the plan's crash or power loss for the step takes effect as in
    /// [`World::effect`], and a lost message or a slow delivery where it applies.
    pub fn message(
        &mut self,
        op: &'static str,
        target: impl Into<String>,
        sends: Sends,
    ) -> Result<Delivery, Crash> {
        let (step, fault) = self.begin_step(op, target.into())?;
        self.crash_if_planned(step, fault, CrashPoint::Before)?;
        let delivery = match (fault, sends) {
            (Some(f @ Fault::MessageLost), Sends::Message) => {
                self.injected_at(step, f);
                Delivery::Lost
            }
            (Some(f @ Fault::SlowDelivery { delay_ms }), Sends::Channel) => {
                self.injected_at(step, f);
                Delivery::Delayed { delay_ms }
            }
            (
                Some(
                    Fault::MessageLost
                    | Fault::SlowDelivery { .. }
                    | Fault::DiskError
                    | Fault::SinkError
                    | Fault::AckLost
                    | Fault::SinkUnavailable { .. }
                    | Fault::Zombie,
                ),
                _,
            ) => {
                // Does not apply here: no mark, as in `effect`.
                self.trace.restate_fault(step, None);
                Delivery::Delivered
            }
            _ => Delivery::Delivered,
        };
        self.record_crash_state_count(step);
        self.evict_if_planned(step, fault);
        self.crash_if_planned(step, fault, CrashPoint::After)?;
        self.record_step_line();
        Ok(delivery)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world(step: u64, fault: Fault) -> World {
        World::new(
            1,
            FaultPlan::new([PlannedFault { step, fault }]).expect("one fault"),
        )
    }

    #[test]
    fn a_lost_message_and_a_slow_delivery_apply_only_where_the_step_sends_one() {
        let slow = Fault::SlowDelivery { delay_ms: 30 };
        let cases = [
            (Fault::MessageLost, Sends::Message, Delivery::Lost, true),
            (
                Fault::MessageLost,
                Sends::Channel,
                Delivery::Delivered,
                false,
            ),
            (
                Fault::MessageLost,
                Sends::Nothing,
                Delivery::Delivered,
                false,
            ),
            (
                slow,
                Sends::Channel,
                Delivery::Delayed { delay_ms: 30 },
                true,
            ),
            (slow, Sends::Message, Delivery::Delivered, false),
            (Fault::DiskError, Sends::Channel, Delivery::Delivered, false),
        ];
        for (fault, sends, want, applied) in cases {
            let mut world = world(1, fault);
            let first = world.message("coord.ack", "src0 checkpoint 1", sends);
            assert_eq!(first, Ok(Delivery::Delivered), "{fault} {sends:?}");
            let second = world.message("coord.ack", "src1 checkpoint 1", sends);
            assert_eq!(second, Ok(want), "{fault} {sends:?}");
            assert_eq!(
                world.faults_injected().len(),
                usize::from(applied),
                "{fault} {sends:?}"
            );
            // The plan that ran replays the run: the same fingerprint.
            let mut again = World::new(1, world.plan_that_ran());
            again
                .message("coord.ack", "src0 checkpoint 1", sends)
                .unwrap();
            again
                .message("coord.ack", "src1 checkpoint 1", sends)
                .unwrap();
            assert_eq!(
                again.fingerprint(),
                world.fingerprint(),
                "{fault} {sends:?}"
            );
        }
    }

    #[test]
    fn a_message_step_crashes_as_any_step_and_traces_as_an_effect() {
        let mut crashing = world(
            0,
            Fault::ProcessCrash {
                at: CrashPoint::Before,
            },
        );
        let crash = crashing.message("sink.notified", "checkpoint 1", Sends::Message);
        assert!(crash.is_err());
        // Without a fault, a message step's trace is an effect step's.
        let mut by_message = World::new(1, FaultPlan::none());
        by_message
            .message("sink.notified", "checkpoint 1", Sends::Message)
            .unwrap();
        let mut by_effect = World::new(1, FaultPlan::none());
        by_effect
            .effect("sink.notified", "checkpoint 1", |_| ())
            .unwrap();
        assert_eq!(by_message.fingerprint(), by_effect.fingerprint());
    }
}
