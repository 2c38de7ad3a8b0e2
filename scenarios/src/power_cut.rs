//! `keel fidelity power-cut`: does the simulated disk's power-loss model admit what a real
//! power cut leaves? Pure: the command (`commands/power_cut.rs`) cuts the power in a
//! user-mode Linux guest (`uml/`) and hands the surviving directory here.
//!
//! What is compared, per point (step N of the fault-free run, a power cut right after it):
//! - **Admitted**: the directory a reboot finds (every file's name and exact bytes, so its
//!   size too) equals the directory of one of the crash states the model enumerates for a
//!   power loss after step N ([`keel_sim::Disk::power_loss`] on the disk the simulated
//!   first incarnation left at step N). Checked twice: under the file system's own profile
//!   (`--fs-model ext4`, `xfs`, `btrfs`) and under `posix`, the union both claim to be sound
//!   for. Anything either does not admit is an unsoundness of that model; the closest model
//!   state (fewest differing names, then bytes) is shown beside it.
//! - **Agrees**: for an admitted state (the own profile's if it admits one, else posix's),
//!   the oracle's verdict on the simulated run with that power loss, under that profile,
//!   equals its verdict on the real run: the first incarnation (as the simulator ran it:
//!   the guest ran the same steps) followed by real-mode incarnations recovering from a
//!   copy of the observed directory.

use crate::baseline::Baseline;
use crate::observation::Observation;
use crate::real::{ListedFile, RealRun};
use crate::runner::{self, Incarnation, RunSpec};
use crate::table::{Table, TableFormat};
use crate::verdict::{judge_one, Verdict};
use keel_engine::{Engine, Interrupt, SinkKind};
use keel_sim::disk::POWER_LOSS_ENUMERATION_BOUND;
use keel_sim::{
    CrashPoint, Disk, Env, Fault, FaultPlan, Fingerprint, PlannedFault, Resume, TxLog, World,
};
use serde::Serialize;

/// A directory: every file's name and bytes, sorted by name.
pub type Files = Vec<(String, Vec<u8>)>;

/// The point's plan for the guest: a process crash right after `step` (the power goes next).
pub fn cut_plan(step: u64) -> FaultPlan {
    crash_plan(step, CrashPoint::After)
}

/// A process crash at `step`, before or after its effect.
pub fn crash_plan(step: u64, at: CrashPoint) -> FaultPlan {
    FaultPlan::new([PlannedFault {
        step,
        fault: Fault::ProcessCrash { at },
    }])
    .expect("one fault")
}

/// Where the simulated first incarnation stands when the power goes after a step.
#[derive(Clone, Debug)]
pub struct AtStep {
    /// The disk with its pending operations, before the power loss resolves them.
    pub disk: Disk,
    /// Where the next incarnation goes on.
    pub resume: Resume,
}

/// Runs the first incarnation of `spec` (its plan ignored) up to `step` and stops it there;
/// None if the run ends before the step.
pub fn at_step(spec: &RunSpec, step: u64) -> Option<AtStep> {
    stopped_at(spec, step, CrashPoint::After)
}

/// Runs the first incarnation of `spec` (its plan ignored) up to `step` and stops it there,
/// before or after the step's effect; None if the run ends before the step.
pub fn stopped_at(spec: &RunSpec, step: u64, at: CrashPoint) -> Option<AtStep> {
    let mut world = World::with_env(
        spec.seed,
        crash_plan(step, at),
        Env::new(
            Disk::with_model(spec.sector_size_bytes, spec.fs_model),
            TxLog::new(spec.transaction_timeout_ms),
        ),
    );
    let mut engine = Engine::new(spec.config);
    match engine
        .recover(&mut world)
        .and_then(|()| engine.run(&mut world, &spec.events))
    {
        Err(Interrupt::Crash(crash)) if crash.step == step => Some(AtStep {
            disk: world.env().disk.clone(),
            resume: world.resume_point(),
        }),
        _ => None,
    }
}

/// The files a disk shows, as the process reads them.
pub fn files_of(disk: &Disk) -> Files {
    disk.list()
        .into_iter()
        .map(|name| {
            let bytes = disk.read(&name).expect("a listed file exists");
            (name, bytes)
        })
        .collect()
}

/// One crash state the model enumerates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelState {
    pub state: u64,
    pub files: Files,
    /// What the power loss did, as a trace shows it.
    pub description: String,
}

/// Every crash state of a power loss on `disk`, in state order; an error if there are too
/// many to enumerate (more than [`POWER_LOSS_ENUMERATION_BOUND`]).
pub fn model_states(disk: &Disk) -> Result<Vec<ModelState>, String> {
    let states = disk.power_loss_states();
    let count = states
        .count()
        .filter(|&count| count <= POWER_LOSS_ENUMERATION_BOUND)
        .ok_or_else(|| {
            format!("{states} crash states: too many to check an observed directory against")
        })?;
    Ok((0..count)
        .map(|state| {
            let mut disk = disk.clone();
            let outcome = disk.power_loss(state);
            ModelState {
                state,
                files: files_of(&disk),
                description: outcome.to_string(),
            }
        })
        .collect())
}

/// Whether the model has the observed directory among its crash states.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Admission {
    /// The first model state equal to the observed directory.
    Admitted { state: u64 },
    /// No state is; the closest one.
    NotAdmitted { closest: u64 },
}

/// Checks `observed` against `states` (not empty); of equally close states, the closest is
/// the one with the lowest number.
pub fn admit(observed: &Files, states: &[ModelState]) -> Admission {
    if let Some(equal) = states.iter().find(|s| &s.files == observed) {
        return Admission::Admitted { state: equal.state };
    }
    let closest = states
        .iter()
        .min_by_key(|s| distance(observed, &s.files))
        .expect("a power loss has at least one crash state");
    Admission::NotAdmitted {
        closest: closest.state,
    }
}

/// How far two directories are apart: names in one only first, then differing bytes of the
/// common names (a byte in one file only counts as differing).
pub fn distance(a: &Files, b: &Files) -> (u64, u64) {
    let mut names = 0;
    let mut bytes = 0;
    for (name, content) in a {
        match b.iter().find(|(other, _)| other == name) {
            None => names += 1,
            Some((_, other)) => {
                let common = content.len().min(other.len());
                let differ = (0..common).filter(|&i| content[i] != other[i]).count();
                bytes += (differ + content.len().max(other.len()) - common) as u64;
            }
        }
    }
    names += b
        .iter()
        .filter(|(name, _)| !a.iter().any(|(other, _)| other == name))
        .count() as u64;
    (names, bytes)
}

/// A directory's listing (name, size, FNV-1a 64 digest), as real mode prints it.
pub fn listing(files: &Files) -> Vec<ListedFile> {
    files
        .iter()
        .map(|(name, bytes)| ListedFile {
            name: name.clone(),
            size_bytes: bytes.len() as u64,
            digest: Fingerprint::of(bytes).to_string(),
        })
        .collect()
}

/// The simulated run with a power loss after `step` leaving crash state `state`: the
/// verdict, and its first incarnation (the one the power loss ended).
pub fn simulated(baseline: &Baseline, step: u64, state: u64) -> (Verdict, Incarnation) {
    let spec = RunSpec {
        plan: FaultPlan::new([PlannedFault {
            step,
            fault: Fault::PowerLoss {
                at: CrashPoint::After,
                state,
            },
        }])
        .expect("one fault"),
        ..baseline.spec.clone()
    };
    let result = runner::run(&spec);
    let observation = Observation::of(&result, &baseline.spec.config);
    (
        judge_one(&baseline.reference, &observation, None),
        result.incarnations[0].clone(),
    )
}

/// The verdict on a real recovery that followed `first` (the incarnation the cut ended).
pub fn recovered(baseline: &Baseline, first: Incarnation, real: &RealRun) -> Verdict {
    let mut incarnations = vec![first];
    incarnations.extend(real.incarnations.iter().cloned());
    let observation = Observation::of_file_sink(
        &baseline.spec.config,
        real.sink.as_deref(),
        &real.file_names(),
        &incarnations,
        &real.outcome,
        &real.final_state,
    );
    judge_one(&baseline.reference, &observation, None)
}

/// One point, cut for real and checked.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PointResult {
    pub fs: String,
    pub sink: SinkKind,
    pub delay_s: u64,
    pub step: u64,
    /// The file system's own profile of the model (`ext4`, `xfs`, `btrfs`).
    pub profile: String,
    /// How many crash states the own profile has at the step, and what it admits.
    pub states: u64,
    pub admission: Admission,
    /// The same under `posix`.
    pub states_posix: u64,
    pub admission_posix: Admission,
    /// The observed directory and the model state it equals (or the closest one): the own
    /// profile's, unless only posix admits the directory.
    pub observed: Vec<ListedFile>,
    pub model: Vec<ListedFile>,
    pub model_description: String,
    /// Admitted points only: the verdicts, simulated and recovered for real.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simulated_verdict: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub real_verdict: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agree: Option<bool>,
    /// Wall time of the point: image, two boots, read-back, recovery.
    pub seconds: f64,
    pub reproduce: String,
}

impl PointResult {
    /// Admitted under the own profile and under posix: anything less is an unsoundness.
    pub fn admitted(&self) -> bool {
        self.admitted_own() && self.admitted_posix()
    }

    pub fn admitted_own(&self) -> bool {
        matches!(self.admission, Admission::Admitted { .. })
    }

    pub fn admitted_posix(&self) -> bool {
        matches!(self.admission_posix, Admission::Admitted { .. })
    }

    /// The models that do not admit the point, with their closest state, e.g. `posix
    /// (closest state 3)`.
    pub fn not_admitted_by(&self) -> Vec<String> {
        [
            (&self.profile, &self.admission),
            (&"posix".to_string(), &self.admission_posix),
        ]
        .into_iter()
        .filter_map(|(model, admission)| match admission {
            Admission::Admitted { .. } => None,
            Admission::NotAdmitted { closest } => {
                Some(format!("{model} (closest state {closest})"))
            }
        })
        .collect()
    }
}

/// The first point of a row a model (own or posix) does not admit.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NotAdmitted {
    pub step: u64,
    /// The models that do not admit it, with their closest states.
    pub not_admitted_by: Vec<String>,
    pub reproduce: String,
}

/// One row: a file system, a sink and a delay.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PowerCutRow {
    pub fs: String,
    pub sink: String,
    pub protocol: String,
    pub delay_s: u64,
    pub points: u64,
    /// Points the file system's own profile admits, and points posix admits.
    pub admitted_own: u64,
    pub admitted_posix: u64,
    /// Points not admitted by at least one of the two.
    pub not_admitted: u64,
    pub agree: u64,
    pub disagree: u64,
    /// Tightness: crash states the own profile had at the row's points beside the one the
    /// directory matched (or beside the closest), summed; the same under posix.
    pub other_states: u64,
    pub other_states_posix: u64,
    /// Wall time of the row's points, in total and per point.
    pub seconds: f64,
    pub seconds_per_point: f64,
    pub first_not_admitted: Option<NotAdmitted>,
}

/// The whole check.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PowerCutReport {
    pub scenario: String,
    pub protocol: String,
    /// The kernel's version, as `uname -r` in the guest would say.
    pub kernel: String,
    pub rows: Vec<PowerCutRow>,
    pub points: Vec<PointResult>,
}

/// Rows in the order the points first name their (fs, sink, delay).
pub fn aggregate(
    scenario: &str,
    protocol: &str,
    kernel: &str,
    points: Vec<PointResult>,
) -> PowerCutReport {
    let mut rows: Vec<PowerCutRow> = Vec::new();
    for point in &points {
        let index = match rows.iter().position(|r| {
            r.fs == point.fs && r.sink == point.sink.to_string() && r.delay_s == point.delay_s
        }) {
            Some(index) => index,
            None => {
                rows.push(PowerCutRow {
                    fs: point.fs.clone(),
                    sink: point.sink.to_string(),
                    protocol: protocol.to_string(),
                    delay_s: point.delay_s,
                    points: 0,
                    admitted_own: 0,
                    admitted_posix: 0,
                    not_admitted: 0,
                    agree: 0,
                    disagree: 0,
                    other_states: 0,
                    other_states_posix: 0,
                    seconds: 0.0,
                    seconds_per_point: 0.0,
                    first_not_admitted: None,
                });
                rows.len() - 1
            }
        };
        let row = &mut rows[index];
        row.points += 1;
        row.seconds += point.seconds;
        row.admitted_own += u64::from(point.admitted_own());
        row.admitted_posix += u64::from(point.admitted_posix());
        row.other_states += point.states.saturating_sub(1);
        row.other_states_posix += point.states_posix.saturating_sub(1);
        if !point.admitted() {
            row.not_admitted += 1;
            if row.first_not_admitted.is_none() {
                row.first_not_admitted = Some(NotAdmitted {
                    step: point.step,
                    not_admitted_by: point.not_admitted_by(),
                    reproduce: point.reproduce.clone(),
                });
            }
        }
        match point.agree {
            Some(true) => row.agree += 1,
            Some(false) => row.disagree += 1,
            None => {}
        }
    }
    for row in &mut rows {
        row.seconds_per_point = row.seconds / row.points as f64;
    }
    PowerCutReport {
        scenario: scenario.to_string(),
        protocol: protocol.to_string(),
        kernel: kernel.to_string(),
        rows,
        points,
    }
}

impl PowerCutReport {
    /// Points the model does not admit or whose verdicts disagree.
    pub fn failures(&self) -> u64 {
        self.rows.iter().map(|r| r.not_admitted + r.disagree).sum()
    }

    pub fn table(&self) -> Table {
        let mut table = Table::new(&[
            "fs",
            "sink",
            "protocol",
            "delay_s",
            "points",
            "admitted_own",
            "admitted_posix",
            "not_admitted",
            "agree",
            "disagree",
            "other_states",
            "other_states_posix",
            "seconds",
            "s_per_point",
            "first_not_admitted",
        ]);
        for row in &self.rows {
            table.push(vec![
                row.fs.clone(),
                row.sink.clone(),
                row.protocol.clone(),
                row.delay_s.to_string(),
                row.points.to_string(),
                row.admitted_own.to_string(),
                row.admitted_posix.to_string(),
                row.not_admitted.to_string(),
                row.agree.to_string(),
                row.disagree.to_string(),
                row.other_states.to_string(),
                row.other_states_posix.to_string(),
                format!("{:.1}", row.seconds),
                format!("{:.1}", row.seconds_per_point),
                row.first_not_admitted
                    .as_ref()
                    .map_or("-".to_string(), |n| format!("step {}", n.step)),
            ]);
        }
        table
    }

    pub fn render(&self, format: TableFormat) -> String {
        if format == TableFormat::Csv {
            return self.table().render(format);
        }
        let mut out = format!(
            "fidelity power-cut: scenario={} protocol={} kernel={} (each point: a real power cut after the step in a user-mode Linux guest, the surviving directory against the crash states of the file system's own profile and of posix)\n",
            self.scenario, self.protocol, self.kernel
        );
        out.push_str(&self.table().render(format));
        for point in &self.points {
            let mismatch = if !point.admitted() {
                format!("not admitted by {}", point.not_admitted_by().join(", "))
            } else if point.agree == Some(false) {
                let Admission::Admitted { state } = point.admission else {
                    unreachable!("admitted by both");
                };
                format!(
                    "admitted as {} state {state}, verdicts disagree: simulated {}, real {}",
                    point.profile,
                    point.simulated_verdict.as_deref().unwrap_or("-"),
                    point.real_verdict.as_deref().unwrap_or("-")
                )
            } else {
                continue;
            };
            out.push_str(&format!(
                "\n{} {} delay {} s, step {}: {mismatch}\n",
                point.fs, point.sink, point.delay_s, point.step
            ));
            out.push_str(&side_by_side(&point.observed, &point.model));
            out.push_str(&format!(
                "  model state: {}\n  reproduce: {}\n",
                point.model_description, point.reproduce
            ));
        }
        out
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report serializes") + "\n"
    }
}

/// Two listings by name, observed on the left, the model's on the right.
pub fn side_by_side(observed: &[ListedFile], model: &[ListedFile]) -> String {
    let mut names: Vec<&str> = observed
        .iter()
        .chain(model)
        .map(|f| f.name.as_str())
        .collect();
    names.sort();
    names.dedup();
    let describe = |files: &[ListedFile], name: &str| {
        files
            .iter()
            .find(|f| f.name == name)
            .map_or("(absent)".to_string(), |f| {
                format!("size={} digest={}", f.size_bytes, f.digest)
            })
    };
    let mut table = Table::new(&["  file", "observed", "model"]);
    for name in names {
        table.push(vec![
            format!("  {name}"),
            describe(observed, name),
            describe(model, name),
        ]);
    }
    table.render(TableFormat::Table)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> RunSpec {
        RunSpec::ch04_on(keel_sim::disk::FsModel::Posix)
    }

    fn files(list: &[(&str, &[u8])]) -> Files {
        list.iter()
            .map(|(name, bytes)| (name.to_string(), bytes.to_vec()))
            .collect()
    }

    /// After step 15 of ch04 (safe, append: the fsynced state-8.json.tmp renamed to
    /// state-8.json, no directory fsync since the sink's at step 2) the model has three
    /// states, a prefix of the two pending namespace operations each: neither, the create,
    /// the create and the rename. The process's view is the last one.
    #[test]
    fn the_model_states_at_a_rename_are_enumerated_and_the_view_is_admitted_as_the_last() {
        let at = at_step(&spec(), 15).unwrap();
        let states = model_states(&at.disk).unwrap();
        assert_eq!(states.len(), 3);
        let names = |s: &ModelState| -> Vec<String> {
            s.files.iter().map(|(name, _)| name.clone()).collect()
        };
        assert_eq!(names(&states[0]), vec!["sink-append.jsonl"]);
        assert_eq!(
            names(&states[1]),
            vec!["sink-append.jsonl", "state-8.json.tmp"]
        );
        assert_eq!(names(&states[2]), vec!["sink-append.jsonl", "state-8.json"]);
        let view = files_of(&at.disk);
        assert_eq!(admit(&view, &states), Admission::Admitted { state: 2 });
        // A state the model cannot produce: the checkpoint under both names. States 1 and
        // 2 each lack one of its names; the tie goes to the lower state number.
        let mut both = view.clone();
        both.push(("state-8.json.tmp".to_string(), both[1].1.clone()));
        both.sort();
        assert_eq!(distance(&both, &states[1].files), (1, 0));
        assert_eq!(distance(&both, &states[2].files), (1, 0));
        assert_eq!(admit(&both, &states), Admission::NotAdmitted { closest: 1 });
        assert_eq!(at.resume.step_next, 16);
    }

    #[test]
    fn distance_counts_names_first_then_bytes() {
        let a = files(&[("x", b"abcd"), ("y", b"")]);
        let b = files(&[("x", b"abXdef"), ("z", b"")]);
        assert_eq!(distance(&a, &b), (2, 3));
        assert_eq!(distance(&a, &a), (0, 0));
    }

    /// A point of a row: admitted or not under the own profile (ext4) and under posix.
    fn point(step: u64, own: Admission, posix: Admission, agree: Option<bool>) -> PointResult {
        PointResult {
            fs: "ext4".to_string(),
            sink: SinkKind::Append,
            delay_s: 0,
            step,
            profile: "ext4".to_string(),
            states: 2,
            admission: own,
            states_posix: 3,
            admission_posix: posix,
            observed: listing(&files(&[("a", b"12")])),
            model: listing(&files(&[("a", b"1")])),
            model_description: "state 1/2: ...".to_string(),
            simulated_verdict: agree.map(|_| "exactly-once".to_string()),
            real_verdict: agree.map(|_| "exactly-once".to_string()),
            agree,
            seconds: 5.0,
            reproduce: format!("keel fidelity power-cut --points {step}"),
        }
    }

    #[test]
    fn a_not_admitted_point_fails_the_check_and_shows_both_directories() {
        let yes = |state| Admission::Admitted { state };
        let no = |closest| Admission::NotAdmitted { closest };
        let report = aggregate(
            "ch04",
            "safe",
            "6.1",
            vec![
                point(3, yes(0), yes(1), Some(true)),
                point(4, no(1), no(2), None),
            ],
        );
        assert_eq!(report.failures(), 1);
        let row = &report.rows[0];
        assert_eq!(
            (
                row.points,
                row.admitted_own,
                row.admitted_posix,
                row.not_admitted,
                row.agree
            ),
            (2, 1, 1, 1, 1)
        );
        assert_eq!(row.seconds_per_point, 5.0);
        let first = row.first_not_admitted.as_ref().unwrap();
        assert_eq!(first.step, 4);
        assert_eq!(
            first.not_admitted_by,
            ["ext4 (closest state 1)", "posix (closest state 2)"]
        );
        let text = report.render(TableFormat::Table);
        assert!(
            text.contains(
                "\next4 append delay 0 s, step 4: not admitted by ext4 (closest state 1), posix (closest state 2)\n"
            ),
            "{text}"
        );
        assert!(text.contains("size=2 digest="), "{text}");
        assert!(
            text.ends_with("  reproduce: keel fidelity power-cut --points 4\n"),
            "{text}"
        );
    }

    #[test]
    fn a_point_one_model_does_not_admit_is_counted_apart_and_fails_the_check() {
        let yes = |state| Admission::Admitted { state };
        let no = |closest| Admission::NotAdmitted { closest };
        let report = aggregate(
            "ch04",
            "safe",
            "6.1",
            vec![
                point(5, yes(0), no(2), Some(true)),
                point(6, no(1), yes(2), Some(true)),
                point(7, yes(1), yes(2), Some(false)),
            ],
        );
        let row = &report.rows[0];
        assert_eq!(
            (
                row.points,
                row.admitted_own,
                row.admitted_posix,
                row.not_admitted,
                row.agree,
                row.disagree
            ),
            (3, 2, 2, 2, 2, 1)
        );
        assert_eq!(report.failures(), 3);
        assert_eq!(
            row.first_not_admitted.as_ref().unwrap().not_admitted_by,
            ["posix (closest state 2)"]
        );
        let text = report.render(TableFormat::Table);
        assert!(
            text.contains("step 5: not admitted by posix (closest state 2)\n"),
            "{text}"
        );
        assert!(
            text.contains("step 6: not admitted by ext4 (closest state 1)\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "step 7: admitted as ext4 state 1, verdicts disagree: simulated exactly-once, real exactly-once\n"
            ),
            "{text}"
        );
        let header = text.lines().nth(1).unwrap();
        assert!(
            header.contains("points  admitted_own  admitted_posix  not_admitted  agree"),
            "{header}"
        );
        let csv = report.render(TableFormat::Csv);
        assert!(
            csv.starts_with("fs,sink,protocol,delay_s,points,admitted_own,admitted_posix,not_admitted,agree,disagree,"),
            "{csv}"
        );
        assert!(csv.contains("\next4,append,safe,0,3,2,2,2,2,1,"), "{csv}");
        let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
        assert_eq!(json["rows"][0]["admitted_own"], 2);
        assert_eq!(json["rows"][0]["admitted_posix"], 2);
        assert_eq!(
            json["points"][0]["admission_posix"]["not_admitted"]["closest"],
            2
        );
    }
}
