//! `keel teach`: the chapter's tables, and more, each computed live by the simulator, in
//! English or in the chapter's own Chinese; and SVG pictures of them.
//!
//! Nothing here is typed in: every number, in the tables and in the prose around them, comes
//! from a run or a sweep made on the spot, on whatever stream it is given. Where the prose
//! describes something a stream may not show (a window that fires twice, a duplicate), it
//! says what this stream shows instead.

use crate::error::KeelError;
use crate::report::{run_report, CrashRequest, RunReport};
use crate::runner::{
    View, RESTART_DELAY_MS_DEFAULT, SECTOR_SIZE_BYTES_DEFAULT, TRANSACTION_TIMEOUT_MS_DEFAULT,
};
use crate::sites::SiteRow;
use crate::spec::ScenarioSpec;
use crate::sweep::{
    sharing_chunks, sites, PointRecord, SweepPoints, SweepReport, SweepSetup, SweepSpec,
};
use crate::tally::aggregate;
use keel_engine::{CheckpointProtocol, Event, KeyScheme, SinkKind};
use keel_sim::{FaultKind, FaultPlan};
use pictures::{heatmap_svg, timeline_svg};
use std::sync::Arc;

pub mod job;
mod pictures;
mod text;
pub use pictures::FONT_FAMILIES;

/// The language of the tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    En,
    Zh,
}

/// A phrase in both languages; the Chinese is the chapter's own where it has one.
pub(crate) fn t(lang: Lang, en: &'static str, zh: &'static str) -> &'static str {
    match lang {
        Lang::En => en,
        Lang::Zh => zh,
    }
}

/// Restart delays (rows) and transaction timeouts (columns) of the timeout table, in ms.
pub const TIMEOUT_TABLE_RESTART_DELAYS_MS: [u64; 4] = [500, 2_000, 5_000, 10_000];
pub const TIMEOUT_TABLE_TIMEOUTS_MS: [u64; 5] = [1_000, 3_000, 6_000, 15_000, 60_000];

/// The knobs `keel teach` uses on a scenario or an events file: the chapter's own, with a
/// checkpoint every 8 events, the chapter's key, the safe protocol and the default delays.
pub fn teach_spec(scenario: Option<String>, events: Option<String>) -> ScenarioSpec {
    ScenarioSpec {
        scenario,
        events,
        window: 10,
        out_of_orderness: 5,
        checkpoint_every: 8,
        event_interval_ms: 300,
        restart_delay_ms: RESTART_DELAY_MS_DEFAULT,
        protocol: CheckpointProtocol::Safe,
        key: KeyScheme::EventIndex,
        transaction_timeout_ms: TRANSACTION_TIMEOUT_MS_DEFAULT,
        seed: 0,
        sector_size_bytes: SECTOR_SIZE_BYTES_DEFAULT,
        fs_model: keel_sim::disk::FsModel::Posix,
        allowed_lateness: None,
        state_backend: keel_engine::StateBackend::Full,
        events_digest: None,
    }
}

/// Where the lessons crash the engine, and the denser checkpoint interval of the exercise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Knobs {
    /// Sections 3 and 4: a deterministic crash after this event (0-based index).
    pub crash_after_event: u64,
    /// Section 2: kill -9 at this simulated time.
    pub kill_at_ms: u64,
    /// Section 4: the denser checkpoint interval compared with the spec's.
    pub dense_checkpoint_every: u64,
}

impl Knobs {
    /// The chapter's: crash after event 14, kill at 2.6 s, a checkpoint every 3 events.
    pub const CHAPTER: Knobs = Knobs {
        crash_after_event: 14,
        kill_at_ms: 2_600,
        dense_checkpoint_every: 3,
    };

    /// Knobs that teach something on `events`. The crash falls where the chapter's does on its
    /// own stream: after the first record written since a checkpoint, at the last event before
    /// the next checkpoint (or the end of the input), so that what was written gets replayed.
    /// On ch04 that is event 14. Without such a record it is the chapter's 14 where the input
    /// is long enough, else its middle event. The kill is the chapter's 2.6 s where the input
    /// lasts that long, else the arrival of its middle event. The dense interval is the
    /// chapter's 3 for a spec interval above 3, else half the spec's (at least 1).
    pub fn fitted(spec: &ScenarioSpec, events: &[Event]) -> Result<Knobs, KeelError> {
        if events.is_empty() {
            return Err(KeelError::usage("no events to teach with"));
        }
        let len = events.len() as u64;
        let last = len - 1;
        let every = spec.checkpoint_every.max(1);
        let (_, rows) = sites(&spec.run_spec(events, SinkKind::Append, FaultPlan::none())?);
        let mut read: Option<u64> = None;
        let mut crash = None;
        for row in &rows {
            if row.op == "source.read" {
                read = row
                    .target
                    .strip_prefix("event ")
                    .and_then(|i| i.parse().ok());
            } else if row.op == "sink.write" {
                let Some(event) = read else { continue };
                // The first checkpoint after `event`: after event m - 1, m a multiple of K.
                let next_checkpoint = (event / every + 1) * every;
                let candidate = next_checkpoint.saturating_sub(2).min(last);
                if next_checkpoint >= event + 2 || next_checkpoint > len {
                    crash = Some(candidate.max(event));
                    break;
                }
            }
        }
        let chapter = Knobs::CHAPTER;
        let crash_after_event = crash.unwrap_or(if chapter.crash_after_event < last {
            chapter.crash_after_event
        } else {
            last / 2
        });
        let kill_at_ms = if chapter.kill_at_ms <= last.saturating_mul(spec.event_interval_ms) {
            chapter.kill_at_ms
        } else {
            (len / 2).saturating_mul(spec.event_interval_ms)
        };
        let dense_checkpoint_every = if spec.checkpoint_every > chapter.dense_checkpoint_every {
            chapter.dense_checkpoint_every
        } else {
            (spec.checkpoint_every / 2).max(1)
        };
        Ok(Knobs {
            crash_after_event,
            kill_at_ms,
            dense_checkpoint_every,
        })
    }
}

/// Everything `keel teach` computes, ready to print or draw.
pub struct Lessons {
    pub spec: ScenarioSpec,
    pub knobs: Knobs,
    /// The fault-free run on the append sink.
    pub baseline: RunReport,
    /// Killed at `knobs.kill_at_ms`, append sink.
    pub kill: RunReport,
    /// Crashed after `knobs.crash_after_event`: append, idempotent, the dense interval
    /// (append), and the processing-time key (idempotent).
    pub append_crash: RunReport,
    pub idempotent_crash: RunReport,
    pub dense_crash: RunReport,
    pub processing_time_crash: RunReport,
    /// Checkpoints the fault-free append run commits at the spec's interval and at the dense
    /// one: what the denser interval costs.
    pub checkpoints_committed: (u64, u64),
    /// Process crashes at every step, for append, idempotent and transactional.
    pub crash_sweep: SweepReport,
    pub crash_records: Vec<PointRecord>,
    /// [restart delay][timeout]: crash points losing records in the read_committed view.
    pub timeout_losses: Vec<Vec<u64>>,
    /// The steps of each sink's fault-free run (the pictures mark them on their x axis).
    pub fault_free_sites: Vec<(SinkKind, Vec<SiteRow>)>,
    /// The same events as a parallel job: three checkpoint modes, one kill.
    pub job: job::JobLesson,
}

fn run(
    spec: &ScenarioSpec,
    events: &[Event],
    sink: SinkKind,
    crash: Option<CrashRequest>,
) -> Result<RunReport, KeelError> {
    run_report(
        &spec.label(),
        &spec.run_spec(events, sink, FaultPlan::none())?,
        crash,
        &crate::report::Judging::default(),
        String::new(),
    )
}

/// What the lessons tell of their progress as they run: each sweep's points once it knows
/// them, then the points as they finish. `()` tells nobody.
pub trait Tick {
    /// `points` more points to run.
    fn planned(&self, points: u64);
    /// `points` more points ran.
    fn ran(&self, points: u64);
}

impl Tick for () {
    fn planned(&self, _points: u64) {}
    fn ran(&self, _points: u64) {}
}

/// Process crashes at every step of each sink's run, as `keel sweep` runs them: each point
/// forked from a snapshot of the fault-free run and stopped where it converges on it
/// (`crate::fork`), in the sweep's chunks; the records are what `--naive` would make, every
/// point from scratch (which made `keel teach` quadratic in the stream's length).
fn crash_sweep(
    spec: &ScenarioSpec,
    events: &Arc<[Event]>,
    sinks: &[SinkKind],
    tick: &dyn Tick,
) -> Result<(SweepReport, Vec<PointRecord>), KeelError> {
    let sweep = SweepSpec {
        sinks: sinks.to_vec(),
        faults: vec![FaultKind::ProcessCrash],
        depth: 1,
        outage_ms: 2_000,
        expect: None,
        power_loss_states_max: crate::sweep::POWER_LOSS_STATES_MAX_DEFAULT,
        power_loss_points: crate::sweep::PowerLossPoints::States,
    };
    let setup = SweepSetup::new(spec, Arc::clone(events), &sweep, false)?;
    let points = SweepPoints::new(spec, &sweep, &setup.baselines, setup.forks.as_ref());
    tick.planned(points.len());
    let mut records = Vec::new();
    for chunk in sharing_chunks(0..points.len()) {
        let ran = setup.run_chunk(&points, chunk);
        // A point's records, one a view, then the next point's (as `keel sweep` counts them).
        let points_ran = ran.chunk_by(|a, b| a.index == b.index);
        tick.ran(points_ran.map(|records| records[0].points()).sum());
        records.extend(ran);
    }
    Ok((aggregate(spec, &sweep, &records, None), records))
}

/// A step that commits a checkpoint: the rename of a new checkpoint file into place (or, for
/// a protocol that rewrites one file in place, its write).
pub(crate) fn commits_checkpoint(site: &SiteRow) -> bool {
    site.op == "disk.rename" || site.op == "disk.write" && site.target == "state.json"
}

/// Runs everything the lessons show on `events`, with knobs fitted to them.
pub fn lessons(
    spec: &ScenarioSpec,
    events: &[Event],
    tick: &dyn Tick,
) -> Result<Lessons, KeelError> {
    // Refused before any run, not after the file sinks' sweeps: a stream the transactional
    // sink cannot take (`ScenarioSpec::run_spec_on`).
    spec.run_spec(events, SinkKind::Transactional, FaultPlan::none())?;
    lessons_with(spec, events, Knobs::fitted(spec, events)?, tick)
}

/// Runs everything the lessons show on `events`, with the given knobs.
pub fn lessons_with(
    spec: &ScenarioSpec,
    events: &[Event],
    knobs: Knobs,
    tick: &dyn Tick,
) -> Result<Lessons, KeelError> {
    if events.is_empty() {
        return Err(KeelError::usage("no events to teach with"));
    }
    let dense = ScenarioSpec {
        checkpoint_every: knobs.dense_checkpoint_every,
        ..spec.clone()
    };
    let crash = Some(CrashRequest::AfterEvent(knobs.crash_after_event));
    let sinks = [
        SinkKind::Append,
        SinkKind::Idempotent,
        SinkKind::Transactional,
    ];
    // One copy of the events for every sweep's runs.
    let shared: Arc<[Event]> = events.into();
    let (crash_sweep_report, crash_records) = crash_sweep(spec, &shared, &sinks, tick)?;
    let mut timeout_losses = Vec::new();
    for &restart_delay_ms in &TIMEOUT_TABLE_RESTART_DELAYS_MS {
        let mut row = Vec::new();
        for &transaction_timeout_ms in &TIMEOUT_TABLE_TIMEOUTS_MS {
            let cell = ScenarioSpec {
                restart_delay_ms,
                transaction_timeout_ms,
                ..spec.clone()
            };
            let (report, _) = crash_sweep(&cell, &shared, &[SinkKind::Transactional], tick)?;
            let committed = report
                .rows
                .iter()
                .find(|r| r.view.as_deref() == Some(View::ReadCommitted.name()))
                .expect("the transactional sweep has a read_committed row");
            row.push(committed.points_with_loss);
        }
        timeout_losses.push(row);
    }
    let mut fault_free_sites = Vec::new();
    for sink in sinks {
        let (_, rows) = sites(&spec.run_spec(events, sink, FaultPlan::none())?);
        fault_free_sites.push((sink, rows));
    }
    let committed = |spec: &ScenarioSpec| -> Result<u64, KeelError> {
        let (_, rows) = sites(&spec.run_spec(events, SinkKind::Append, FaultPlan::none())?);
        Ok(rows.iter().filter(|s| commits_checkpoint(s)).count() as u64)
    };
    Ok(Lessons {
        baseline: run(spec, events, SinkKind::Append, None)?,
        kill: run(
            spec,
            events,
            SinkKind::Append,
            Some(CrashRequest::AtMs(knobs.kill_at_ms)),
        )?,
        append_crash: run(spec, events, SinkKind::Append, crash)?,
        idempotent_crash: run(spec, events, SinkKind::Idempotent, crash)?,
        dense_crash: run(&dense, events, SinkKind::Append, crash)?,
        processing_time_crash: run(
            &ScenarioSpec {
                key: KeyScheme::ProcessingTime,
                ..spec.clone()
            },
            events,
            SinkKind::Idempotent,
            crash,
        )?,
        checkpoints_committed: (committed(spec)?, committed(&dense)?),
        crash_sweep: crash_sweep_report,
        crash_records,
        timeout_losses,
        fault_free_sites,
        job: job::JobLesson::compute(&job::teach_job_spec(
            events,
            spec.window,
            spec.out_of_orderness,
        )),
        knobs,
        spec: spec.clone(),
    })
}

/// "1 record", "2 records".
fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

impl Lessons {
    /// The simulated time between two checkpoints.
    pub fn checkpoint_interval_ms(&self) -> u64 {
        self.spec.checkpoint_every * self.spec.event_interval_ms
    }

    /// Cells of the timeout table where "records are lost exactly when the timeout is shorter
    /// than the checkpoint interval plus the restart delay" does not hold: (delay, timeout,
    /// crash points losing records).
    pub fn timeout_rule_exceptions(&self) -> Vec<(u64, u64, u64)> {
        let interval_ms = self.checkpoint_interval_ms();
        let mut cells = Vec::new();
        for (&delay, row) in TIMEOUT_TABLE_RESTART_DELAYS_MS
            .iter()
            .zip(&self.timeout_losses)
        {
            for (&timeout, &lost) in TIMEOUT_TABLE_TIMEOUTS_MS.iter().zip(row) {
                if (timeout < interval_ms + delay) != (lost > 0) {
                    cells.push((delay, timeout, lost));
                }
            }
        }
        cells
    }

    /// The pictures, as (file name, SVG text): per sink (and view), duplicates and losses per
    /// crash point along the run, with the fault-free run's checkpoint writes, fsyncs and sink
    /// writes marked under its x axis (and, for read_committed, the visibility delay); and the
    /// timeout heat map.
    pub fn svgs(&self, lang: Lang) -> Vec<(String, String)> {
        let mut files = Vec::new();
        for row in &self.crash_sweep.rows {
            let records: Vec<&PointRecord> = self
                .crash_records
                .iter()
                .filter(|r| {
                    r.sink.name() == row.sink && r.view.map(|v| v.name().to_string()) == row.view
                })
                .collect();
            let sites = self
                .fault_free_sites
                .iter()
                .find(|(sink, _)| sink.name() == row.sink)
                .map(|(_, sites)| sites.as_slice())
                .unwrap_or_default();
            let (name, subject) = match &row.view {
                Some(view) => (
                    format!("crash-points-{}-{view}.svg", row.sink),
                    format!("{} {view}", row.sink),
                ),
                None => (format!("crash-points-{}.svg", row.sink), row.sink.clone()),
            };
            let title = match lang {
                Lang::En => format!("{subject}: duplicates and losses per crash point"),
                Lang::Zh => format!("{subject}：每个崩溃点的重复与丢失"),
            };
            let delay = row.view.as_deref() == Some(View::ReadCommitted.name());
            files.push((name, timeline_svg(&title, &records, sites, delay, lang)));
        }
        files.push((
            "transaction-timeout.svg".to_string(),
            heatmap_svg(&self.timeout_losses, lang),
        ));
        files
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::Scenario;
    use std::cell::Cell;

    /// The points the lessons said they planned and ran.
    #[derive(Default)]
    struct Counted {
        planned: Cell<u64>,
        ran: Cell<u64>,
    }

    impl Tick for Counted {
        fn planned(&self, points: u64) {
            self.planned.set(self.planned.get() + points);
        }

        fn ran(&self, points: u64) {
            self.ran.set(self.ran.get() + points);
        }
    }

    #[test]
    fn the_lessons_run_every_point_they_plan_once() {
        let spec = teach_spec(Some("ch04".to_string()), None);
        let events = Scenario::by_name("ch04").unwrap().events();
        let counted = Counted::default();
        let lessons = lessons(&spec, &events, &counted).unwrap();
        // The crash sweep's points, each counted once however many views judge it.
        let sweep_points: u64 = lessons
            .crash_sweep
            .rows
            .iter()
            .filter(|row| row.view.as_deref() != Some(View::ReadUncommitted.name()))
            .map(|row| row.points)
            .sum();
        // 59 append, 59 idempotent and 71 transactional points.
        assert_eq!(sweep_points, 189);
        // And the timeout table's 20 transactional sweeps: 1,498 points in all (`keel sweep`
        // says as much before each).
        assert_eq!(counted.planned.get(), 189 + 1_498);
        assert_eq!(counted.ran.get(), counted.planned.get());
    }
}
