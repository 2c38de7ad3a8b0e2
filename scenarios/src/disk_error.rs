//! `keel fidelity disk-error`: does the simulated disk's fsync-EIO model predict what a
//! process sees after a real failed fsync, and admit what survives it? Pure: the command
//! (`commands/disk_error.rs`) fails the fsync in a user-mode Linux guest (`uml/`) and hands
//! what it saw here.
//!
//! The model's side of a point (the fsync of `file` at step N of the fault-free run failing,
//! as `keel sweep --faults disk-error` injects it there), under the real file system's own
//! profile (ext4 and xfs keep the new bytes in clean pages; btrfs turns read-only, its
//! second fsync refused with EROFS): the disk the simulated first
//! incarnation left just before step N, then the failed fsync
//! ([`keel_sim::Disk::fsync_fail`] through an injected error), a read, a second fsync, a
//! page eviction ([`keel_sim::Disk::evict_clean_pages`], what `drop_caches` does) and a
//! read, and every crash state of a power loss after that. Compared, per point:
//! - **Agrees**: the process saw what the model says, in order: the fsync's result (EIO), the
//!   bytes read right after it (the new ones), the second fsync's result (0), the bytes and
//!   size read after the eviction.
//! - **Admitted**: the directory a reboot finds after the power cut (every name and byte)
//!   equals one of the model's crash states; otherwise the closest is shown.

use crate::power_cut::{
    admit, listing, model_states, side_by_side, stopped_at, Admission, ModelState,
};
use crate::real::ListedFile;
use crate::runner::RunSpec;
use crate::table::{Table, TableFormat};
use crate::uml::flakey::{ProcessView, ReadOutcome};
use crate::uml::Files;
use keel_engine::SinkKind;
use keel_sim::CrashPoint;
use serde::Serialize;

/// What the model says a process sees at a failed fsync, and what it lets survive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelPoint {
    pub file: String,
    /// The file as the process read it just before the fsync (the new bytes).
    pub before: Vec<u8>,
    pub fsync: String,
    pub read: Vec<u8>,
    pub second_fsync: String,
    pub read_after_eviction: Vec<u8>,
    /// Every crash state of a power loss after the eviction, in state order.
    pub states: Vec<ModelState>,
    /// How many bytes the file's writes since its last fsync wrote: 0 when nothing was
    /// written (a real device then has no write of it to fail).
    pub dirty_bytes: u64,
}

/// The model's point: `spec`'s first incarnation stopped just before `step`, whose effect
/// is an fsync of `file`.
pub fn model_point(spec: &RunSpec, step: u64, file: &str) -> Result<ModelPoint, String> {
    let at = stopped_at(spec, step, CrashPoint::Before)
        .ok_or_else(|| format!("step {step}: the run ends before it"))?;
    let mut disk = at.disk;
    let before = disk.read(file).map_err(|e| format!("step {step}: {e}"))?;
    let outcome = |result: Result<(), keel_sim::DiskError>| match result {
        Ok(()) => "ok".to_string(),
        Err(keel_sim::DiskError::Io { .. }) => "EIO".to_string(),
        Err(keel_sim::DiskError::ReadOnly { .. }) => "EROFS".to_string(),
        Err(e) => e.to_string(),
    };
    let dirty_bytes = disk
        .dirty_bytes(file)
        .map_err(|e| format!("step {step}: {e}"))?;
    disk.inject_error();
    let fsync = outcome(disk.fsync(file));
    let read = disk.read(file).expect("the file exists");
    let second_fsync = outcome(disk.fsync(file));
    disk.evict_clean_pages();
    let read_after_eviction = disk.read(file).expect("the file exists");
    let states = model_states(&disk).map_err(|e| format!("step {step}: {e}"))?;
    Ok(ModelPoint {
        file: file.to_string(),
        before,
        fsync,
        read,
        second_fsync,
        read_after_eviction,
        states,
        dirty_bytes,
    })
}

/// The aspects in which what the process saw differs from the model, in order.
pub fn differences(view: &ProcessView, model: &ModelPoint) -> Vec<String> {
    let mut differ = Vec::new();
    if view.fsync != model.fsync {
        differ.push("fsync".to_string());
    }
    if view.read != ReadOutcome::Bytes(model.read.clone()) {
        differ.push("read".to_string());
    }
    if view.second_fsync != model.second_fsync {
        differ.push("second-fsync".to_string());
    }
    if view.read_after_eviction != ReadOutcome::Bytes(model.read_after_eviction.clone()) {
        differ.push("read-after-eviction".to_string());
    }
    if view.size_after_eviction_bytes != model.read_after_eviction.len() as u64 {
        differ.push("size-after-eviction".to_string());
    }
    differ
}

/// What a read of the file gave, in words: `new` (the bytes the process wrote, as before
/// the fsync), `old` (what the model reads after the eviction: the disk's bytes where the
/// fsync failed, at the new size), `old, N bytes` (a prefix of that: an older size),
/// `absent`, `EIO`, or `other, N bytes`.
pub fn describe_read(read: Option<&ReadOutcome>, model: &ModelPoint) -> String {
    match read {
        None => "absent".to_string(),
        Some(ReadOutcome::Error(e)) => e.clone(),
        Some(ReadOutcome::Bytes(bytes)) if bytes == &model.before => "new".to_string(),
        Some(ReadOutcome::Bytes(bytes)) if bytes == &model.read_after_eviction => "old".to_string(),
        Some(ReadOutcome::Bytes(bytes)) if model.read_after_eviction.starts_with(bytes) => {
            format!("old, {} bytes", bytes.len())
        }
        Some(ReadOutcome::Bytes(bytes)) => format!("other, {} bytes", bytes.len()),
    }
}

/// One point, failed for real and checked.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DiskErrorPoint {
    pub fs: String,
    pub sink: SinkKind,
    pub step: u64,
    /// What the device failed: `write` or `write-and-flush` (`uml::flakey::Cause`).
    pub cause: &'static str,
    pub file: String,
    /// The file's size before the fsync and the model's size after the eviction.
    pub size_bytes: u64,
    /// What the process saw, in words (see [`describe_read`]), and what the model says.
    pub fsync: String,
    pub read: String,
    pub second_fsync: String,
    pub read_after_eviction: String,
    pub size_after_eviction_bytes: u64,
    pub model_size_after_eviction_bytes: u64,
    /// The file after the power cut, in words.
    pub survived: String,
    pub differences: Vec<String>,
    /// The file system had written the file's bytes before the fsync (the device held
    /// them already): the fsync had nothing for dm-flakey to fail, so the point is not
    /// checked.
    pub written_before_fsync: bool,
    /// How many crash states the model has after the eviction.
    pub states: u64,
    pub admission: Admission,
    /// The observed directory and the model state it equals (or the closest one).
    pub observed: Vec<ListedFile>,
    pub model: Vec<ListedFile>,
    pub model_description: String,
    /// The device-mapper table the fsync ran under.
    pub table: String,
    /// Wall time of the point: image, two boots, read-back.
    pub seconds: f64,
    pub reproduce: String,
}

impl DiskErrorPoint {
    pub fn agrees(&self) -> bool {
        self.differences.is_empty()
    }

    pub fn admitted(&self) -> bool {
        matches!(self.admission, Admission::Admitted { .. })
    }
}

/// Which point a check is of, and what it cost.
#[derive(Clone, Debug, PartialEq)]
pub struct PointLabel {
    pub fs: String,
    pub sink: SinkKind,
    pub step: u64,
    /// What the device failed (`uml::flakey::Cause`).
    pub cause: &'static str,
    /// Wall time of the point: image, two boots, read-back.
    pub seconds: f64,
    pub reproduce: String,
}

/// A point checked: what the process saw against the model, what survived against its
/// crash states.
pub fn check(
    label: PointLabel,
    model: &ModelPoint,
    view: &ProcessView,
    survived: &Files,
) -> DiskErrorPoint {
    let admission = admit(survived, &model.states);
    let state = match admission {
        Admission::Admitted { state } | Admission::NotAdmitted { closest: state } => state,
    };
    let closest = &model.states[state as usize];
    let survived_file = survived
        .iter()
        .find(|(name, _)| name == &model.file)
        .map(|(_, bytes)| ReadOutcome::Bytes(bytes.clone()));
    DiskErrorPoint {
        fs: label.fs,
        sink: label.sink,
        step: label.step,
        cause: label.cause,
        file: model.file.clone(),
        size_bytes: model.before.len() as u64,
        fsync: view.fsync.clone(),
        read: describe_read(Some(&view.read), model),
        second_fsync: view.second_fsync.clone(),
        read_after_eviction: describe_read(Some(&view.read_after_eviction), model),
        size_after_eviction_bytes: view.size_after_eviction_bytes,
        model_size_after_eviction_bytes: model.read_after_eviction.len() as u64,
        survived: describe_read(survived_file.as_ref(), model),
        differences: differences(view, model),
        written_before_fsync: view.read_before == ReadOutcome::Bytes(view.on_disk_before.clone()),
        states: model.states.len() as u64,
        admission,
        observed: listing(survived),
        model: listing(&closest.files),
        model_description: closest.description.clone(),
        table: view.table.clone(),
        seconds: label.seconds,
        reproduce: label.reproduce,
    }
}

/// The first point of a row the model gets wrong.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FirstFailure {
    pub step: u64,
    pub reproduce: String,
}

/// One row: a file system and a sink.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DiskErrorRow {
    pub fs: String,
    pub sink: String,
    pub points: u64,
    pub agree: u64,
    pub disagree: u64,
    pub admitted: u64,
    pub not_admitted: u64,
    pub seconds: f64,
    /// Fsyncs with nothing for dm-flakey to fail, so not checked: nothing written since the
    /// file's last fsync (not run; the model's EIO there stands for a metadata error), or
    /// the file system had written it all before the fsync (run, `written_before_fsync`).
    pub nothing_to_fail: u64,
    /// Tightness: crash states the model had at the checked points beside the one the
    /// directory matched (or beside the closest), summed over the row: 0 when the model
    /// admitted exactly what the kernel left at every point.
    pub other_states: u64,
    pub first_disagreement: Option<FirstFailure>,
    pub first_not_admitted: Option<FirstFailure>,
}

/// The whole check.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DiskErrorReport {
    pub scenario: String,
    /// What the device failed (`write`, `write-and-flush`: `uml::flakey::Cause`).
    pub cause: String,
    pub protocol: String,
    pub kernel: String,
    pub rows: Vec<DiskErrorRow>,
    pub points: Vec<DiskErrorPoint>,
    /// The points not checked, in order: nothing written since the file's last fsync.
    pub nothing_to_fail: Vec<Unchecked>,
}

/// A point with nothing for a real device to fail.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Unchecked {
    pub fs: String,
    pub sink: String,
    pub step: u64,
    pub file: String,
    /// Why nothing would fail: [`NOTHING_WRITTEN`] or [`INLINE`].
    pub reason: &'static str,
}

/// Nothing written since the file's last fsync: no data write for the device to fail (the
/// model's EIO there stands for a metadata error).
pub const NOTHING_WRITTEN: &str = "nothing written since the file's last fsync";

/// btrfs keeps the file's data inline in its metadata (at most 2 KiB): no data write for a
/// data-write error to fail (with `--cause write`).
pub const INLINE: &str = "btrfs keeps the file inline, in its metadata (at most 2 KiB)";

/// The row of (fs, sink), made if it is not there yet.
fn row_of<'a>(rows: &'a mut Vec<DiskErrorRow>, fs: &str, sink: &str) -> &'a mut DiskErrorRow {
    let index = match rows.iter().position(|r| r.fs == fs && r.sink == sink) {
        Some(index) => index,
        None => {
            rows.push(DiskErrorRow {
                fs: fs.to_string(),
                sink: sink.to_string(),
                points: 0,
                agree: 0,
                disagree: 0,
                admitted: 0,
                not_admitted: 0,
                seconds: 0.0,
                nothing_to_fail: 0,
                other_states: 0,
                first_disagreement: None,
                first_not_admitted: None,
            });
            rows.len() - 1
        }
    };
    &mut rows[index]
}

/// Rows in the order the points (checked, then unchecked) first name their (fs, sink).
pub fn aggregate(
    scenario: &str,
    protocol: &str,
    kernel: &str,
    points: Vec<DiskErrorPoint>,
    nothing_to_fail: Vec<Unchecked>,
) -> DiskErrorReport {
    let mut rows: Vec<DiskErrorRow> = Vec::new();
    for point in &points {
        let row = row_of(&mut rows, &point.fs, &point.sink.to_string());
        if point.written_before_fsync {
            row.nothing_to_fail += 1;
            continue;
        }
        let first = || {
            Some(FirstFailure {
                step: point.step,
                reproduce: point.reproduce.clone(),
            })
        };
        row.points += 1;
        row.seconds += point.seconds;
        row.other_states += point.states.saturating_sub(1);
        if point.agrees() {
            row.agree += 1;
        } else {
            row.disagree += 1;
            row.first_disagreement = row.first_disagreement.take().or_else(first);
        }
        if point.admitted() {
            row.admitted += 1;
        } else {
            row.not_admitted += 1;
            row.first_not_admitted = row.first_not_admitted.take().or_else(first);
        }
    }
    for unchecked in &nothing_to_fail {
        row_of(&mut rows, &unchecked.fs, &unchecked.sink).nothing_to_fail += 1;
    }
    DiskErrorReport {
        scenario: scenario.to_string(),
        cause: "write".to_string(),
        protocol: protocol.to_string(),
        kernel: kernel.to_string(),
        rows,
        points,
        nothing_to_fail,
    }
}

impl DiskErrorReport {
    /// Points whose process view disagrees with the model or whose survivors it does not
    /// admit.
    pub fn failures(&self) -> u64 {
        self.points
            .iter()
            .filter(|p| !p.written_before_fsync && (!p.agrees() || !p.admitted()))
            .count() as u64
    }

    pub fn table(&self) -> Table {
        let mut table = Table::new(&[
            "fs",
            "sink",
            "points",
            "agree",
            "disagree",
            "admitted",
            "not_admitted",
            "seconds",
            "nothing_to_fail",
            "other_states",
            "first_disagreement",
            "first_not_admitted",
        ]);
        let step = |f: &Option<FirstFailure>| {
            f.as_ref()
                .map_or("-".to_string(), |f| format!("step {}", f.step))
        };
        for row in &self.rows {
            table.push(vec![
                row.fs.clone(),
                row.sink.clone(),
                row.points.to_string(),
                row.agree.to_string(),
                row.disagree.to_string(),
                row.admitted.to_string(),
                row.not_admitted.to_string(),
                format!("{:.1}", row.seconds),
                row.nothing_to_fail.to_string(),
                row.other_states.to_string(),
                step(&row.first_disagreement),
                step(&row.first_not_admitted),
            ]);
        }
        table
    }

    /// One line per point: what the process saw and what survived.
    pub fn points_table(&self) -> Table {
        let mut table = Table::new(&[
            "fs",
            "sink",
            "step",
            "cause",
            "file",
            "size",
            "fsync",
            "read",
            "second_fsync",
            "read_after_eviction",
            "size_after_eviction",
            "survived",
            "agree",
            "admitted",
        ]);
        let yes = |b: bool| if b { "yes" } else { "no" }.to_string();
        for p in &self.points {
            table.push(vec![
                p.fs.clone(),
                p.sink.to_string(),
                p.step.to_string(),
                p.cause.to_string(),
                p.file.clone(),
                p.size_bytes.to_string(),
                p.fsync.clone(),
                p.read.clone(),
                p.second_fsync.clone(),
                p.read_after_eviction.clone(),
                format!(
                    "{} (model {})",
                    p.size_after_eviction_bytes, p.model_size_after_eviction_bytes
                ),
                p.survived.clone(),
                if p.written_before_fsync {
                    "- (written before the fsync)".to_string()
                } else if p.agrees() {
                    "yes".to_string()
                } else {
                    format!("no: {}", p.differences.join(","))
                },
                if p.written_before_fsync {
                    "-".to_string()
                } else {
                    yes(p.admitted())
                },
            ]);
        }
        table
    }

    pub fn render(&self, format: TableFormat) -> String {
        if format == TableFormat::Csv {
            return self.table().render(format);
        }
        let mut out = format!(
            "fidelity disk-error: scenario={} protocol={} kernel={} cause={} (each point: the fsync of the step failed for real in a user-mode Linux guest, {}, what the process saw and what survived a power cut against the model; other_states: the model's crash states beside the one that survived)\n",
            self.scenario,
            self.protocol,
            self.kernel,
            self.cause,
            match self.cause.as_str() {
                "write" => "its data writes failed once by the `error` target (flushes pass)",
                "write-and-flush" => "dm-flakey failing its data writes and every cache flush after them",
                _ => "the cause the model names: its data writes failed once, or for a file btrfs keeps inline, its flushes",
            }
        );
        out.push_str(&self.table().render(format));
        out.push('\n');
        out.push_str(&self.points_table().render(format));
        for reason in [NOTHING_WRITTEN, INLINE] {
            let list: Vec<String> = self
                .nothing_to_fail
                .iter()
                .filter(|u| u.reason == reason)
                .map(|u| format!("{} {} step {} ({})", u.fs, u.sink, u.step, u.file))
                .collect();
            if !list.is_empty() {
                out.push_str(&format!(
                    "\nnot run, {reason} (no data write for the device to fail): {}\n",
                    list.join(", ")
                ));
            }
        }
        for point in self
            .points
            .iter()
            .filter(|p| !p.written_before_fsync && !p.admitted())
        {
            let Admission::NotAdmitted { closest } = point.admission else {
                continue;
            };
            out.push_str(&format!(
                "\n{} {} step {}: not admitted (closest model state {closest})\n",
                point.fs, point.sink, point.step
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uml::flakey::ExtentMap;
    use keel_sim::disk::FsModel;

    fn spec() -> RunSpec {
        spec_on(FsModel::Ext4)
    }

    fn spec_on(fs_model: FsModel) -> RunSpec {
        RunSpec::ch04_on(fs_model)
    }

    /// What a process sees when the kernel does what the model says (ext4, measured).
    fn view_as_model(model: &ModelPoint) -> ProcessView {
        ProcessView {
            map: ExtentMap {
                block_size_bytes: 4096,
                extents: vec![],
            },
            table: "0 8 flakey u 0 0 3600 1 error_writes".to_string(),
            read_before: ReadOutcome::Bytes(model.before.clone()),
            on_disk_before: vec![0; model.before.len()],
            fsync: "EIO".to_string(),
            read: ReadOutcome::Bytes(model.read.clone()),
            second_fsync: "ok".to_string(),
            read_after_eviction: ReadOutcome::Bytes(model.read_after_eviction.clone()),
            size_after_eviction_bytes: model.read_after_eviction.len() as u64,
        }
    }

    fn label(step: u64) -> PointLabel {
        PointLabel {
            fs: "xfs".to_string(),
            sink: SinkKind::Append,
            step,
            cause: "write",
            seconds: 6.0,
            reproduce: format!("keel fidelity disk-error --points {step}"),
        }
    }

    /// Step 26 of ch04 (safe, append) fsyncs the sink after its first record (79 bytes,
    /// none durable yet). The ext4 profile: EIO, the new bytes read back, a second fsync
    /// that succeeds, 79 zeros after the eviction (the new size persisted, its bytes did
    /// not), and one crash state (nothing pending).
    #[test]
    fn the_model_of_a_failed_sink_fsync() {
        let model = model_point(&spec(), 26, "sink-append.jsonl").unwrap();
        assert_eq!(model.before.len(), 79);
        assert_eq!(model.before[0], b'{');
        assert_eq!(model.fsync, "EIO");
        assert_eq!(model.read, model.before);
        assert_eq!(model.second_fsync, "ok");
        assert_eq!(model.read_after_eviction, vec![0; 79]);
        assert_eq!(model.dirty_bytes, 79);
        assert_eq!(model.states.len(), 1);
        assert_eq!(model.states[0].description, "state 0/1: nothing pending");
        let names: Vec<&str> = model.states[0]
            .files
            .iter()
            .map(|(name, _)| name.as_str())
            .collect();
        assert_eq!(names, vec!["sink-append.jsonl", "state-8.json"]);
        // xfs and posix: the same, and a second crash state where the size stayed at 0.
        for fs_model in [FsModel::Xfs, FsModel::Posix] {
            let other = model_point(&spec_on(fs_model), 26, "sink-append.jsonl").unwrap();
            assert_eq!(other.read_after_eviction, model.read_after_eviction);
            assert_eq!(other.states.len(), 2, "{fs_model}");
            assert_eq!(other.states[0].files, model.states[0].files);
            assert_eq!(
                other.states[1].files[0],
                ("sink-append.jsonl".to_string(), vec![])
            );
            assert_eq!(
                other.states[1].description,
                "state 1/2: sink-append.jsonl: failed fsync's size lost"
            );
        }
        // btrfs: read-only, the new bytes read before and after the eviction, the second
        // fsync refused, and nothing of them survives.
        let btrfs = model_point(&spec_on(FsModel::Btrfs), 26, "sink-append.jsonl").unwrap();
        assert_eq!(
            (btrfs.fsync.as_str(), btrfs.second_fsync.as_str()),
            ("EIO", "EROFS")
        );
        assert_eq!(btrfs.read, model.before);
        assert_eq!(btrfs.read_after_eviction, model.before);
        assert_eq!(btrfs.dirty_bytes, 79);
        assert_eq!(btrfs.states.len(), 1);
        assert_eq!(
            btrfs.states[0].files[0],
            ("sink-append.jsonl".to_string(), vec![])
        );
    }

    /// Step 11 fsyncs the sink before any record: nothing for a device to fail.
    #[test]
    fn an_fsync_with_nothing_written_leaves_nothing_unpersisted() {
        let model = model_point(&spec(), 11, "sink-append.jsonl").unwrap();
        assert_eq!(model.before, b"");
        assert_eq!(model.fsync, "EIO");
        assert_eq!(model.dirty_bytes, 0);
    }

    /// ext4 did what the model says: agrees, admitted. xfs saw the same, but after the
    /// power cut the sink had its old size (0 bytes), a state the ext4 profile does not
    /// have and the xfs profile does.
    #[test]
    fn what_the_kernels_did_at_step_26_checked() {
        let model = model_point(&spec(), 26, "sink-append.jsonl").unwrap();
        let view = view_as_model(&model);
        assert_eq!(differences(&view, &model), Vec::<String>::new());
        let ext4 = check(label(26), &model, &view, &model.states[0].files);
        assert!(ext4.agrees());
        assert!(ext4.admitted());
        assert_eq!(
            (
                ext4.read.as_str(),
                ext4.read_after_eviction.as_str(),
                ext4.survived.as_str()
            ),
            ("new", "old", "old")
        );
        let mut xfs_files = model.states[0].files.clone();
        xfs_files[0].1.clear();
        let xfs_model = model_point(&spec_on(FsModel::Xfs), 26, "sink-append.jsonl").unwrap();
        let xfs_own = check(label(26), &xfs_model, &view, &xfs_files);
        assert!(xfs_own.agrees());
        assert_eq!(xfs_own.admission, Admission::Admitted { state: 1 });
        let xfs = check(label(26), &model, &view, &xfs_files);
        assert!(xfs.agrees());
        assert_eq!(xfs.admission, Admission::NotAdmitted { closest: 0 });
        assert_eq!(xfs.survived, "old, 0 bytes");
        let report = aggregate("ch04", "safe", "6.1.176", vec![ext4, xfs], vec![]);
        assert_eq!(report.failures(), 1);
        let row = &report.rows[0];
        assert_eq!(
            (row.points, row.agree, row.admitted, row.not_admitted),
            (2, 2, 1, 1)
        );
        assert_eq!(row.first_not_admitted.as_ref().unwrap().step, 26);
        let text = report.render(TableFormat::Table);
        assert!(
            text.contains("\nxfs append step 26: not admitted (closest model state 0)\n"),
            "{text}"
        );
        assert!(
            text.contains("sink-append.jsonl  size=0 digest=cbf29ce484222325    size=79 "),
            "{text}"
        );
        assert!(
            text.ends_with("  reproduce: keel fidelity disk-error --points 26\n"),
            "{text}"
        );
    }

    /// Each way the process's view can differ is named, in order; a read that fails is
    /// described by its error.
    #[test]
    fn differences_are_named_in_order() {
        let model = model_point(&spec(), 26, "sink-append.jsonl").unwrap();
        let mut view = view_as_model(&model);
        view.fsync = "ok".to_string();
        view.second_fsync = "EIO".to_string();
        view.read_after_eviction = ReadOutcome::Error("EIO".to_string());
        view.size_after_eviction_bytes = 0;
        assert_eq!(
            differences(&view, &model),
            vec![
                "fsync",
                "second-fsync",
                "read-after-eviction",
                "size-after-eviction"
            ]
        );
        assert_eq!(
            describe_read(Some(&view.read_after_eviction), &model),
            "EIO"
        );
        assert_eq!(describe_read(None, &model), "absent");
        assert_eq!(
            describe_read(Some(&ReadOutcome::Bytes(b"x".to_vec())), &model),
            "other, 1 bytes"
        );
    }

    /// A point whose bytes the file system had written before the fsync (the device held
    /// them) is counted as having nothing to fail, not as a disagreement.
    #[test]
    fn a_point_written_before_the_fsync_is_not_checked() {
        let model = model_point(&spec(), 14, "state-8.json.tmp").unwrap();
        let mut view = view_as_model(&model);
        view.on_disk_before = model.before.clone();
        view.fsync = "ok".to_string();
        view.read_after_eviction = ReadOutcome::Bytes(model.before.clone());
        let point = check(label(14), &model, &view, &model.states[0].files);
        assert!(point.written_before_fsync);
        assert_eq!(point.differences, vec!["fsync", "read-after-eviction"]);
        let report = aggregate(
            "ch04",
            "safe",
            "6.1.176",
            vec![point],
            vec![Unchecked {
                fs: "xfs".to_string(),
                sink: "append".to_string(),
                step: 11,
                file: "sink-append.jsonl".to_string(),
                reason: NOTHING_WRITTEN,
            }],
        );
        assert_eq!(report.failures(), 0);
        let row = &report.rows[0];
        assert_eq!((row.points, row.agree, row.nothing_to_fail), (0, 0, 2));
        let text = report.render(TableFormat::Table);
        assert!(
            text.ends_with(
                "\nnot run, nothing written since the file's last fsync (no data write for the device to fail): xfs append step 11 (sink-append.jsonl)\n"
            ),
            "{text}"
        );
    }
}
