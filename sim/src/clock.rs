//! The virtual clock: simulated milliseconds, advanced only by the simulation, never read from the host.

use serde::{Deserialize, Serialize};

/// Simulated time since the start of the run, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Clock {
    now_ms: u64,
}

impl Clock {
    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    /// Waits (in simulated time) until `deadline_ms`; a deadline in the past costs nothing.
    pub fn sleep_until(&mut self, deadline_ms: u64) {
        self.now_ms = self.now_ms.max(deadline_ms);
    }

    /// Lets `duration_ms` of simulated time pass.
    pub fn advance(&mut self, duration_ms: u64) {
        self.now_ms = self
            .now_ms
            .checked_add(duration_ms)
            .expect("simulated clock overflowed u64 milliseconds");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_only_moves_forward() {
        let mut clock = Clock::default();
        clock.sleep_until(300);
        assert_eq!(clock.now_ms(), 300);
        clock.sleep_until(100);
        assert_eq!(clock.now_ms(), 300);
        clock.advance(50);
        assert_eq!(clock.now_ms(), 350);
    }
}
