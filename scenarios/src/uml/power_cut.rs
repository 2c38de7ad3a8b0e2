//! One real power cut: a fresh image, a guest that runs the real-mode engine on it up to
//! step N and then cuts the power, a second guest that mounts what survived and copies it
//! out (`point::read_back`), and the surviving directory read back on the host.
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

use super::guest::{make_image, shell_quote, FileSystem};
use super::point::{
    make_scratch_dirs, mount_command, read_back, run_guest, write_incarnation_spec, Files,
    BOOT_TIMEOUT_S, ENGINE_DIR, STATUS_KILLED,
};
use crate::runner::RunSpec;
use std::fs;
use std::path::PathBuf;
use std::time::Duration;

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

/// Cuts the power after the step `run`'s plan crashes the process at (a process crash,
/// after its step), and returns the directory a reboot finds.
pub fn power_cut(setup: &CutSetup, run: &RunSpec) -> Result<Files, String> {
    let scratch = &setup.scratch;
    make_scratch_dirs(scratch)?;
    make_image(&scratch.join("disk.img"), setup.fs)?;
    let spec_file = write_incarnation_spec(scratch, run)?;
    let mnt = shell_quote(&scratch.join("mnt"));
    let status_cut = scratch.join("status-cut");
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
        mount = mount_command(scratch, setup.fs, "ubda"),
        exe = shell_quote(&setup.exe),
        spec = shell_quote(&spec_file),
        status = shell_quote(&status_cut),
        delay = setup.delay_s,
    );
    let timeout = Duration::from_secs(BOOT_TIMEOUT_S + setup.delay_s);
    run_guest(&setup.kernel, scratch, "cut", &cut_script, timeout)?;
    let status = fs::read_to_string(&status_cut).unwrap_or_default();
    if status.trim() != format!("child {STATUS_KILLED}") {
        return Err(format!(
            "the guest that cuts the power did not see its child killed at the step (status: {:?}; console: {})",
            status.trim(),
            scratch.join("cut.log").display()
        ));
    }
    read_back(&setup.kernel, scratch, setup.fs)
}
