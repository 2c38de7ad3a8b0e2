//! What every real-kernel point shares, whatever it does to the file system: a scratch
//! directory of its own, the spec of the real-mode incarnation the guest runs, one guest
//! boot that must end by itself, and the read-back boot that mounts what survived (as a
//! reboot would: the journal replays), copies the engine's directory out and powers off.
//!
//! The guest's output reaches the host only through hostfs files written with
//! `dd conv=fsync` (or `File::sync_all`), which flushes that one host file and nothing of
//! the image.

use super::guest::{boot, shell_quote, write_script, BootEnd, FileSystem};
use crate::real::incarnation::IncarnationSpec;
use crate::runner::RunSpec;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A guest gets this long to boot, do its work and power off (plus any delay it sleeps).
pub const BOOT_TIMEOUT_S: u64 = 90;

/// The engine's directory inside the file system.
pub const ENGINE_DIR: &str = "d";

/// The child's exit status when it died of its own SIGKILL (128 + 9), as a shell sees it.
pub const STATUS_KILLED: i32 = 137;

/// The files that survived, sorted by name, with their bytes.
pub type Files = Vec<(String, Vec<u8>)>;

/// A fresh scratch directory's path for one point of `kind` (not made yet): under the
/// system's temporary directory, named by this process and a counter.
pub fn fresh_scratch(kind: &str) -> PathBuf {
    static SCRATCH_NEXT: AtomicU64 = AtomicU64::new(0);
    std::env::temp_dir().join(format!(
        "keel-{kind}-{}-{}",
        std::process::id(),
        SCRATCH_NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Makes the directories every guest of a point uses: `dev` (the guest's devtmpfs), `mnt`
/// (where it mounts the image) and `observed` (where the read-back copies to).
pub fn make_scratch_dirs(scratch: &Path) -> Result<(), String> {
    for dir in ["dev", "mnt", "observed"] {
        let path = scratch.join(dir);
        fs::create_dir_all(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// Writes the spec of the guest's one incarnation of `run` (on `mnt/d`, its trace and
/// post-mortem in the scratch directory) and returns its path.
pub fn write_incarnation_spec(scratch: &Path, run: &RunSpec) -> Result<PathBuf, String> {
    let spec = IncarnationSpec {
        events: run.events.to_vec(),
        config: run.config,
        plan: run.plan.to_file(),
        seed: run.seed,
        restart_delay_ms: run.restart_delay_ms,
        transaction_timeout_ms: run.transaction_timeout_ms,
        resume: None,
        dir: scratch.join("mnt").join(ENGINE_DIR),
        trace_file: scratch.join("p0.trace"),
        post_mortem_file: scratch.join("p0.post-mortem.json"),
        pacing: None,
    };
    let spec_file = scratch.join("p0.spec.json");
    fs::write(
        &spec_file,
        serde_json::to_vec(&spec).expect("a spec serializes"),
    )
    .map_err(|e| format!("{}: {e}", spec_file.display()))?;
    Ok(spec_file)
}

/// The shell command that mounts proc, sysfs, the guest's devtmpfs on `dev` and the file
/// system on `dev/<device>` at `mnt`.
pub fn mount_command(scratch: &Path, fs: FileSystem, device: &str) -> String {
    format!(
        "{} && {}",
        mount_system_command(scratch),
        mount_fs_command(scratch, fs, device)
    )
}

/// The shell command that mounts proc, sysfs and the guest's devtmpfs on `dev`.
pub fn mount_system_command(scratch: &Path) -> String {
    let dev = shell_quote(&scratch.join("dev"));
    format!("mount -t proc proc /proc && mount -t sysfs sys /sys && mount -t devtmpfs none {dev}")
}

/// The shell command that mounts the file system on `dev/<device>` at `mnt`.
pub fn mount_fs_command(scratch: &Path, fs: FileSystem, device: &str) -> String {
    let dev = shell_quote(&scratch.join("dev"));
    let mnt = shell_quote(&scratch.join("mnt"));
    format!("mount -t {} {dev}/{device} {mnt}", fs.name())
}

/// Boots one guest on the point's image running `script` as its init; an error if it had
/// to be killed.
pub fn run_guest(
    kernel: &Path,
    scratch: &Path,
    name: &str,
    script: &str,
    timeout: Duration,
) -> Result<(), String> {
    let init = scratch.join(format!("init-{name}.sh"));
    write_script(&init, script).map_err(|e| format!("{}: {e}", init.display()))?;
    let log = scratch.join(format!("{name}.log"));
    match boot(
        kernel,
        &scratch.join("disk.img"),
        &init,
        &scratch.join(format!("uml-{name}")),
        &log,
        timeout,
    )? {
        BootEnd::Ended => Ok(()),
        BootEnd::TimedOut => Err(format!(
            "the {name} guest still ran after {} s and was killed (console: {})",
            timeout.as_secs(),
            log.display()
        )),
    }
}

/// The second boot: mounts the image as a reboot would, copies the engine's directory to
/// `observed` and returns it.
pub fn read_back(kernel: &Path, scratch: &Path, fs: FileSystem) -> Result<Files, String> {
    let observed = scratch.join("observed");
    let status_read = scratch.join("status-read");
    let mnt = shell_quote(&scratch.join("mnt"));
    let read_script = format!(
        "#!/bin/sh\n\
         # keel fidelity: what survived, copied out.\n\
         PATH=/usr/sbin:/usr/bin:/sbin:/bin\n\
         if {mount} && cp -a {mnt}/{ENGINE_DIR}/. {observed}/ && sync; then\n\
         \x20 echo 'read' | dd of={status} conv=fsync status=none\n\
         else\n\
         \x20 echo 'read failed' | dd of={status} conv=fsync status=none\n\
         fi\n\
         echo o > /proc/sysrq-trigger\n",
        mount = mount_command(scratch, fs, "ubda"),
        observed = shell_quote(&observed),
        status = shell_quote(&status_read),
    );
    run_guest(
        kernel,
        scratch,
        "read",
        &read_script,
        Duration::from_secs(BOOT_TIMEOUT_S),
    )?;
    let status = fs::read_to_string(&status_read).unwrap_or_default();
    if status.trim() != "read" {
        return Err(format!(
            "the guest that reads the image back failed (status: {:?}; console: {})",
            status.trim(),
            scratch.join("read.log").display()
        ));
    }
    read_files(&observed)
}

/// Every file of `dir` with its bytes, sorted by name.
pub fn read_files(dir: &Path) -> Result<Files, String> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
        let bytes =
            fs::read(entry.path()).map_err(|e| format!("{}: {e}", entry.path().display()))?;
        files.push((entry.file_name().to_string_lossy().into_owned(), bytes));
    }
    files.sort();
    Ok(files)
}
