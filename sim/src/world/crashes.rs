//! How a planned crash or page eviction takes effect at a step (a process crash, a power
//! loss in a crash state or a class of them, a cache drop), what it leaves in the trace and
//! in the faults that ran, and what a run records for a sweep about the crash states of its
//! steps. The crash model itself (what a power loss may leave) is the disk's
//! (`disk/power_loss.rs`); this is where the world applies it.

use super::*;

impl<S: Storage> World<S> {
    pub(super) fn injected_at(&mut self, step: u64, fault: Fault) {
        self.injected.push(PlannedFault { step, fault });
        let site = self
            .fault_site
            .clone()
            .expect("a fault takes effect only at a step the plan aims it at");
        self.injected_sites.push(site);
    }

    /// Says what the system under test reads of its files after a power loss, by which
    /// [`Fault::PowerLossClass`] and the recorded counts take classes: the caller's claims
    /// (see `disk::power_loss::classes`), made only where they hold.
    pub fn read_after_power_loss(&mut self, readers: CrashReaders) {
        self.crash_readers = Arc::new(readers);
    }

    /// Shares `memo` with other runs for the power-loss classes at `step`: the caller's
    /// claim that every run given the same memo and step reaches it with the same disk (a
    /// sweep's single-fault points forked from one fault-free run do). Class points at one
    /// step then work the step's classes out once, not once each.
    pub fn share_classes_at(&mut self, memo: ClassesMemo, step: u64) {
        self.classes_memo = Some((memo, step));
    }

    /// Keeps, from now on, the disk as it stands just before each planned power loss
    /// ([`Fault::PowerLoss`]) resolves it: a caller that has run a power loss in one crash
    /// state resolves that disk to the step's other states without running to the step
    /// again.
    pub fn keep_disk_before_power_loss(&mut self) {
        self.keeps_disk_before_power_loss = true;
    }

    /// The disk as it stood just before the latest planned power loss, and its step, if
    /// kept ([`World::keep_disk_before_power_loss`]).
    pub fn disk_before_power_loss(&self) -> Option<(u64, &Disk)> {
        self.disk_before_power_loss
            .as_ref()
            .map(|(step, disk)| (*step, disk))
    }

    /// The crash states the class of the planned power-loss class stands for, once it
    /// resolved (None before, or where it ran as a state); with two, the product of theirs
    /// (the pairs of states the run stands for).
    pub fn class_states(&self) -> Option<&num_bigint::BigUint> {
        self.class_states.as_ref()
    }

    /// Records, after each step's effect, how many crash states a power loss there could
    /// leave the disk in (a sweep reads them off the fault-free run), or how many classes of
    /// them by what the system reads ([`World::read_after_power_loss`]; None where they are
    /// not numbered), as `counts` says.
    pub fn record_crash_states(&mut self, counts: CrashCounts) {
        self.crash_state_counts = Some(Vec::new());
        self.crash_state_counts_exact = Vec::new();
        self.counted_as = counts;
    }

    /// Per step: the number of power-loss crash states after its effect (`None`: more than
    /// u64 can count). Empty unless [`World::record_crash_states`] was called.
    pub fn crash_state_counts(&self) -> &[Option<u64>] {
        self.crash_state_counts.as_deref().unwrap_or(&[])
    }

    /// Per step whose [`World::crash_state_counts`] entry is None (more states than a u64
    /// counts, or classes not numbered), in step order: its exact number of crash states
    /// (states, not classes: where classes are not numbered a sweep runs states).
    pub fn crash_state_counts_exact(&self) -> &[(u64, num_bigint::BigUint)] {
        &self.crash_state_counts_exact
    }

    /// Per step: the bytes a failed fsync left unpersisted after its effect, which a page
    /// eviction there would drop (0: an eviction there does nothing). Empty unless
    /// [`World::record_crash_states`] was called.
    pub fn unpersisted_counts(&self) -> &[u64] {
        &self.unpersisted_counts
    }

    pub(super) fn record_crash_state_count(&mut self, step: u64) {
        if let Some(counts) = &mut self.crash_state_counts {
            // A step cut short by a crash before its effect has no count of its own.
            counts.resize(step as usize, None);
            self.unpersisted_counts.resize(step as usize, 0);
            let disk = self.env.disk.simulated().expect(SIMULATION_ONLY);
            let count = match self.counted_as {
                CrashCounts::States => disk.power_loss_states().count(),
                CrashCounts::Classes => disk.power_loss_classes(&self.crash_readers).count(),
                CrashCounts::TailClasses => disk
                    .power_loss_classes(&CrashReaders {
                        split_tails: true,
                        ..(*self.crash_readers).clone()
                    })
                    .count(),
            };
            if count.is_none() {
                self.crash_state_counts_exact
                    .push((step, disk.power_loss_states_exact()));
            }
            counts.push(count);
            self.unpersisted_counts.push(disk.unpersisted_bytes());
        }
    }

    /// The kernel drops every clean page: what a failed fsync left unpersisted reads as the
    /// disk holds it. Traced as a note naming what was dropped; returns whether anything
    /// was (an eviction with nothing to drop leaves no mark).
    pub fn evict_clean_pages(&mut self, why: &str) -> bool {
        let disk = self.env.disk.simulated_mut().expect(SIMULATION_ONLY);
        let dropped = disk.evict_clean_pages();
        if dropped.is_empty() {
            return false;
        }
        let files: Vec<String> = dropped
            .iter()
            .map(|(name, bytes)| format!("{name}: {bytes} unpersisted bytes dropped"))
            .collect();
        self.note(format!("page eviction ({why}): {}", files.join("; ")));
        true
    }

    /// A page eviction the plan puts at this step, after its effect.
    pub(super) fn evict_if_planned(&mut self, step: u64, fault: Option<Fault>) {
        if fault != Some(Fault::PageEviction) {
            return;
        }
        if self.evict_clean_pages("planned") {
            self.injected_at(step, Fault::PageEviction);
        } else {
            // Nothing to drop: no mark, so the plan that ran (which omits it) replays with
            // the same fingerprint.
            self.trace.restate_fault(step, None);
        }
    }

    /// Carries out a crash the plan puts at `at` of this step, if any.
    pub(super) fn crash_if_planned(
        &mut self,
        step: u64,
        fault: Option<Fault>,
        at: CrashPoint,
    ) -> Result<(), Crash> {
        match fault {
            Some(Fault::ProcessCrash { at: planned }) if planned == at => {
                self.injected_at(step, fault.expect("matched"));
                Err(self.crash(step, at, CrashKind::Process))
            }
            Some(Fault::PowerLoss { at: planned, state }) if planned == at => {
                // A state number beyond an enumerable count wraps, so any u64 a generator
                // draws names a state; `keel run --crash-state` and plan files check the
                // range instead (`wrapped_states` says where it happened).
                let disk = self.env.disk.simulated_mut().expect(SIMULATION_ONLY);
                if self.keeps_disk_before_power_loss {
                    self.disk_before_power_loss = Some((step, disk.clone()));
                }
                let outcome = disk.power_loss_wrapping(state);
                if outcome.state != state {
                    self.wrapped.push(WrappedState {
                        step,
                        planned: state,
                        class: false,
                        count: outcome
                            .states
                            .count()
                            .expect("only an enumerable count wraps"),
                    });
                    // The trace shows the state that ran, so the plan that ran replays with
                    // the same fingerprint.
                    self.trace.restate_fault(
                        step,
                        Some(Fault::PowerLoss {
                            at,
                            state: outcome.state,
                        }),
                    );
                }
                let state = outcome.state;
                self.injected_at(step, Fault::PowerLoss { at, state });
                self.trace_push(TraceLine::Note {
                    time_ms: self.now_ms(),
                    incarnation: self.incarnation,
                    text: NoteText::PowerLoss(Arc::new(outcome)),
                });
                Err(self.crash(
                    step,
                    at,
                    CrashKind::PowerLoss {
                        state,
                        class: false,
                    },
                ))
            }
            Some(Fault::PowerLossClass {
                at: planned,
                class: planned_class,
                by_tail,
            }) if planned == at => {
                // As a state does, a class number beyond the step's count wraps (a plan file
                // is checked against `wrapped_states` instead); where the step's classes are
                // not numbered, the number runs as a drawn state.
                let readers = if by_tail {
                    Arc::new(CrashReaders {
                        split_tails: true,
                        ..(*self.crash_readers).clone()
                    })
                } else {
                    Arc::clone(&self.crash_readers)
                };
                let memo = self.classes_memo.clone();
                let disk = self.env.disk.simulated_mut().expect(SIMULATION_ONLY);
                // The classes are worked out once a step where the caller shares a memo
                // between runs that reach it with the same disk, else once here.
                let key = ClassesAt::key_of(step, at, by_tail);
                let classes = match &memo {
                    Some((memo, claimed)) if *claimed == step => {
                        let mut memo = memo.lock().expect("no panic while held");
                        match &*memo {
                            Some(at) if at.key == key => Arc::clone(&at.classes),
                            previous => {
                                let classes = Arc::new(disk.power_loss_classes(&readers));
                                // Between two fsyncs the steps share one durable state: the
                                // same handle, so that its users compare a pointer.
                                let durable = disk.durable_identity();
                                let durable = match previous {
                                    Some(previous) if *previous.durable == durable => {
                                        Arc::clone(&previous.durable)
                                    }
                                    _ => Arc::new(durable),
                                };
                                *memo = Some(ClassesAt {
                                    key,
                                    classes: Arc::clone(&classes),
                                    durable,
                                });
                                classes
                            }
                        }
                    }
                    _ => Arc::new(disk.power_loss_classes(&readers)),
                };
                let count = classes.count();
                let (outcome, ran) = match count {
                    Some(count) => {
                        let class = planned_class % count;
                        let outcome = disk
                            .power_loss_class_of(&classes, class)
                            .expect("a class below the count");
                        (outcome, Fault::PowerLossClass { at, class, by_tail })
                    }
                    None => {
                        let outcome = disk.power_loss_wrapping(planned_class);
                        let state = outcome.state;
                        (outcome, Fault::PowerLoss { at, state })
                    }
                };
                if ran != fault.expect("matched") {
                    self.wrapped.push(WrappedState {
                        step,
                        planned: planned_class,
                        count: count.unwrap_or(0),
                        class: true,
                    });
                    self.trace.restate_fault(step, Some(ran));
                }
                // A run of two class faults stands for every pair of their states.
                if let Some(class) = &outcome.class {
                    self.class_states = Some(match self.class_states.take() {
                        Some(before) => before * &class.states,
                        None => class.states.clone(),
                    });
                }
                let kind = match ran {
                    Fault::PowerLossClass { class, .. } => CrashKind::PowerLoss {
                        state: class,
                        class: true,
                    },
                    _ => CrashKind::PowerLoss {
                        state: outcome.state,
                        class: false,
                    },
                };
                self.injected_at(step, ran);
                self.trace_push(TraceLine::Note {
                    time_ms: self.now_ms(),
                    incarnation: self.incarnation,
                    text: NoteText::PowerLoss(Arc::new(outcome)),
                });
                Err(self.crash(step, at, kind))
            }
            _ => Ok(()),
        }
    }

    pub(super) fn crash(&mut self, step: u64, at: CrashPoint, kind: CrashKind) -> Crash {
        let time_ms = self.now_ms();
        let power_loss_state = match kind {
            CrashKind::Process | CrashKind::Zombie => None,
            CrashKind::PowerLoss { state, .. } => Some(state),
        };
        if kind == CrashKind::Zombie {
            self.note(format!(
                "zombie: p{} is cut off and declared dead",
                self.incarnation
            ));
        }
        self.trace_push(TraceLine::Crash {
            step,
            time_ms,
            at,
            power_loss_state,
        });
        Crash {
            step,
            at,
            time_ms,
            kind,
        }
    }
}
