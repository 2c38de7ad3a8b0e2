//! The virtual clock: simulated milliseconds, advanced only by the simulation, never read from the host.

use serde::{Deserialize, Serialize};

/// Simulated time since the start of the run, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Clock {
    now_ms: u64,
    /// The last timestamp [`Clock::timestamp_us`] handed out (0 before the first).
    timestamp_us_last: u64,
}

impl Clock {
    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    /// A processing timestamp in microseconds, as a process reads its machine's clock: never
    /// before `now_ms`, and strictly after every timestamp read before it, so two reads never
    /// see the same value (each read takes at least a microsecond). A replay that reads a
    /// backlog within one simulated millisecond still gets a new timestamp per read, as a
    /// real high-resolution clock would give it.
    pub fn timestamp_us(&mut self) -> u64 {
        let floor_us = self
            .now_ms
            .checked_mul(1000)
            .expect("simulated clock overflowed u64 microseconds");
        let timestamp_us = floor_us.max(self.timestamp_us_last + 1);
        assert!(timestamp_us > self.timestamp_us_last);
        assert!(timestamp_us >= floor_us);
        self.timestamp_us_last = timestamp_us;
        timestamp_us
    }

    /// The last timestamp handed out (a process that resumes a run goes on from it).
    pub fn timestamp_us_last(&self) -> u64 {
        self.timestamp_us_last
    }

    /// A clock at `now_ms` whose last timestamp handed out was `timestamp_us_last`.
    pub fn resumed(now_ms: u64, timestamp_us_last: u64) -> Clock {
        Clock {
            now_ms,
            timestamp_us_last,
        }
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

    #[test]
    fn timestamps_never_repeat_within_a_millisecond() {
        let mut clock = Clock::default();
        clock.sleep_until(3);
        assert_eq!(clock.timestamp_us(), 3000);
        assert_eq!(clock.timestamp_us(), 3001);
        assert_eq!(clock.timestamp_us(), 3002);
        clock.sleep_until(4);
        assert_eq!(clock.timestamp_us(), 4000);
        let resumed = Clock::resumed(clock.now_ms(), clock.timestamp_us_last());
        assert_eq!(resumed, clock);
    }
}
