//! Real pacing (`keel run --real-dir DIR --real-pacing`): a real child process sleeps until
//! the wall time its simulated clock stands for, so events arrive at their simulated arrival
//! times and a restart waits its restart delay, scaled. The pacer only sleeps: it never
//! feeds a time into the run, so a paced run has the unpaced run's trace, fingerprint and
//! figures.

use keel_sim::TraceLine;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// The most and the least wall milliseconds a simulated millisecond may take.
pub const PACING_SCALE_MIN: f64 = 0.001;
pub const PACING_SCALE_MAX: f64 = 1_000.0;

/// How fast simulated time goes by on the wall clock.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pacing {
    /// Wall milliseconds per simulated millisecond (1: real time; 0.1: ten times faster).
    pub scale: f64,
}

impl Pacing {
    /// `scale` if it is a number from [`PACING_SCALE_MIN`] to [`PACING_SCALE_MAX`].
    pub fn new(scale: f64) -> Result<Pacing, String> {
        if (PACING_SCALE_MIN..=PACING_SCALE_MAX).contains(&scale) {
            Ok(Pacing { scale })
        } else {
            Err(format!(
                "{scale} is not a pacing scale: wall milliseconds per simulated millisecond, from {PACING_SCALE_MIN} to {PACING_SCALE_MAX}"
            ))
        }
    }
}

/// One process's pacer: the simulated time the process started at, anchored to the wall
/// clock when it started (the time a process takes to start comes on top).
#[derive(Debug)]
pub struct Pacer {
    pacing: Pacing,
    start_wall: Instant,
    start_ms: u64,
}

impl Pacer {
    /// A pacer for a process that starts now, at simulated time `start_ms`.
    pub fn new(pacing: Pacing, start_ms: u64) -> Pacer {
        Pacer {
            pacing,
            start_wall: Instant::now(),
            start_ms,
        }
    }

    /// Sleeps until the wall time that the simulated time `time_ms` stands for (returns at
    /// once if it has passed).
    pub fn wait_until(&self, time_ms: u64) {
        let offset_ms = time_ms.saturating_sub(self.start_ms) as f64 * self.pacing.scale;
        let offset = Duration::try_from_secs_f64(offset_ms / 1_000.0).unwrap_or(Duration::MAX);
        if let Some(rest) = offset.checked_sub(self.start_wall.elapsed()) {
            std::thread::sleep(rest);
        }
    }

    /// Sleeps until the simulated time of `line` (every line carries one): a step waits for
    /// its time (an event for its arrival), a restart for its restart delay.
    pub fn wait_for(&self, line: &TraceLine) {
        let (TraceLine::Step { time_ms, .. }
        | TraceLine::Crash { time_ms, .. }
        | TraceLine::Restart { time_ms, .. }
        | TraceLine::Note { time_ms, .. }) = line;
        self.wait_until(*time_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pacing_scale_is_a_number_in_range() {
        assert_eq!(Pacing::new(1.0), Ok(Pacing { scale: 1.0 }));
        assert_eq!(Pacing::new(0.001), Ok(Pacing { scale: 0.001 }));
        assert_eq!(Pacing::new(1_000.0), Ok(Pacing { scale: 1_000.0 }));
        for bad in [0.0, -1.0, 0.0009, 1_000.5, f64::NAN, f64::INFINITY] {
            assert!(Pacing::new(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_pacer_sleeps_until_the_scaled_simulated_time() {
        let pacer = Pacer::new(Pacing { scale: 0.5 }, 1_000);
        // Before the start: no wait. 1,060 ms: 30 ms of wall time after the start.
        pacer.wait_until(900);
        pacer.wait_for(&TraceLine::Restart {
            time_ms: 1_060,
            incarnation: 1,
        });
        assert!(pacer.start_wall.elapsed() >= Duration::from_millis(30));
    }
}
