//! One real power cut: a fresh image, a guest that runs the real-mode engine on it up to
//! step N and then cuts the power, a second guest that mounts what survived and copies it
//! out, and the surviving directory read back on the host.
//!
//! The cut: the guest's init mounts the image, makes the engine's directory `d` and syncs
//! (so the empty directory is durable, as the simulated disk's starting state is), then
//! runs `keel __incarnation` with a process crash planned after step N: the child does
//! the steps up to N on the real file system and sends itself SIGKILL, so nothing the
//! process did after step N exists. The init then sleeps the delay (0 s: the power goes at
//! once; a few seconds let journal commits and writeback run) and powers off with
//! `echo o > /proc/sysrq-trigger`: no sync, no unmount. Only the child's exit status
//! leaves the guest before the cut, through `dd conv=fsync` on a hostfs file, which flushes
//! that one host file and nothing of the image.
//!
//! The read-back: a second boot mounts the image as a reboot would (the journal replays),
//! copies `d` to a host directory through hostfs, syncs and powers off.

use super::guest::{boot, make_image, shell_quote, write_script, BootEnd, FileSystem};
use crate::real::incarnation::IncarnationSpec;
use crate::runner::RunSpec;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A guest gets this long to boot, do its work and power off, plus the delay.
const BOOT_TIMEOUT_S: u64 = 90;

/// The engine's directory inside the file system.
const ENGINE_DIR: &str = "d";

/// The child's exit status when it died of its own SIGKILL (128 + 9), as a shell sees it.
const STATUS_KILLED: i32 = 137;

/// What one cut needs besides the run.
#[derive(Clone, Debug)]
pub struct CutSetup {
    pub kernel: PathBuf,
    /// The keel binary the guest runs (this one).
    pub exe: PathBuf,
    pub fs: FileSystem,
    /// Seconds between the child's death and the power-off.
    pub delay_s: u64,
    /// A fresh directory of this point's own (the image, scripts and copies go there).
    pub scratch: PathBuf,
}

/// The files that survived, sorted by name, with their bytes.
pub type Files = Vec<(String, Vec<u8>)>;

/// Cuts the power after the step `run`'s plan crashes the process at (a process crash,
/// after its step), and returns the directory a reboot finds.
pub fn power_cut(setup: &CutSetup, run: &RunSpec) -> Result<Files, String> {
    let scratch = &setup.scratch;
    let path = |name: &str| scratch.join(name);
    for dir in ["dev", "mnt", "observed"] {
        fs::create_dir_all(path(dir)).map_err(|e| format!("{}: {e}", path(dir).display()))?;
    }
    let image = path("disk.img");
    make_image(&image, setup.fs)?;

    let spec = IncarnationSpec {
        events: run.events.clone(),
        config: run.config,
        plan: run.plan.to_file(),
        seed: run.seed,
        restart_delay_ms: run.restart_delay_ms,
        transaction_timeout_ms: run.transaction_timeout_ms,
        resume: None,
        dir: path("mnt").join(ENGINE_DIR),
        trace_file: path("p0.trace"),
        post_mortem_file: path("p0.post-mortem.json"),
        pacing: None,
    };
    let spec_file = path("p0.spec.json");
    fs::write(
        &spec_file,
        serde_json::to_vec(&spec).expect("a spec serializes"),
    )
    .map_err(|e| format!("{}: {e}", spec_file.display()))?;

    let fs_name = setup.fs.name();
    let dev = shell_quote(&path("dev"));
    let mnt = shell_quote(&path("mnt"));
    let mount = format!(
        "mount -t proc proc /proc && mount -t sysfs sys /sys && mount -t devtmpfs none {dev} \
         && mount -t {fs_name} {dev}/ubda {mnt}"
    );
    let status_cut = path("status-cut");
    let cut_script = format!(
        "#!/bin/sh\n\
         # keel fidelity power-cut: the engine up to its step, then the power.\n\
         PATH=/usr/sbin:/usr/bin:/sbin:/bin\n\
         if {mount} && mkdir {mnt}/{ENGINE_DIR} && sync; then\n\
         \x20 {exe} __incarnation {spec}\n\
         \x20 echo \"child $?\" | dd of={status} conv=fsync status=none\n\
         \x20 sleep {delay}\n\
         else\n\
         \x20 echo 'setup failed' | dd of={status} conv=fsync status=none\n\
         fi\n\
         echo o > /proc/sysrq-trigger\n",
        exe = shell_quote(&setup.exe),
        spec = shell_quote(&spec_file),
        status = shell_quote(&status_cut),
        delay = setup.delay_s,
    );
    let timeout = Duration::from_secs(BOOT_TIMEOUT_S + setup.delay_s);
    run_guest(setup, "cut", &cut_script, timeout)?;
    let status = fs::read_to_string(&status_cut).unwrap_or_default();
    if status.trim() != format!("child {STATUS_KILLED}") {
        return Err(format!(
            "the guest that cuts the power did not see its child killed at the step (status: {:?}; console: {})",
            status.trim(),
            path("cut.log").display()
        ));
    }

    let observed = path("observed");
    let status_read = path("status-read");
    let read_script = format!(
        "#!/bin/sh\n\
         # keel fidelity power-cut: what survived, copied out.\n\
         PATH=/usr/sbin:/usr/bin:/sbin:/bin\n\
         if {mount} && cp -a {mnt}/{ENGINE_DIR}/. {observed}/ && sync; then\n\
         \x20 echo 'read' | dd of={status} conv=fsync status=none\n\
         else\n\
         \x20 echo 'read failed' | dd of={status} conv=fsync status=none\n\
         fi\n\
         echo o > /proc/sysrq-trigger\n",
        observed = shell_quote(&observed),
        status = shell_quote(&status_read),
    );
    run_guest(
        setup,
        "read",
        &read_script,
        Duration::from_secs(BOOT_TIMEOUT_S),
    )?;
    let status = fs::read_to_string(&status_read).unwrap_or_default();
    if status.trim() != "read" {
        return Err(format!(
            "the guest that reads the image back failed (status: {:?}; console: {})",
            status.trim(),
            path("read.log").display()
        ));
    }
    read_files(&observed)
}

/// Boots one guest running `script` as its init; an error if it had to be killed.
fn run_guest(setup: &CutSetup, name: &str, script: &str, timeout: Duration) -> Result<(), String> {
    let scratch = &setup.scratch;
    let init = scratch.join(format!("init-{name}.sh"));
    write_script(&init, script).map_err(|e| format!("{}: {e}", init.display()))?;
    let log = scratch.join(format!("{name}.log"));
    match boot(
        &setup.kernel,
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
