//! One real fsync EIO: a fresh image, a guest whose file system sits on a device-mapper
//! device from its mount on, the real-mode engine run on it up to just before the fsync of
//! step N, dm-flakey or the `error` target under that file's blocks (`flakey::Cause`), the
//! fsync and what a process sees after it
//! (`flakey::guest_fail`), then a power cut; a second guest mounts what survived and copies
//! it out (`point::read_back`).
//!
//! The guest's init: mounts proc, sysfs and devtmpfs, runs `keel __disk-error-guest setup`
//! (loads dm-mod and dm-flakey, switches periodic writeback off, makes the device `keel` a
//! linear map of the image), mounts the file system on `/dev/mapper/keel`, makes the
//! engine's directory `d` and syncs; runs `keel __incarnation` with a process crash planned
//! *before* step N (the child does every step before N and sends itself SIGKILL: its writes
//! stay in the page cache, dirty, as a kill -9 leaves them); then `keel __disk-error-guest
//! fail` does the fsync the engine was about to do, on the same file, as a process that
//! opened it before the error (what any process sees of the kernel's page cache is the
//! same; the engine itself would stop at the failed fsync, `Interrupt::Abort`, and its
//! successor would read the page cache as this process does). It records the fsync's
//! result, a read, a second fsync, and, after `echo 3 > /proc/sys/vm/drop_caches`, a read
//! and the size. The init then powers off with `echo o > /proc/sysrq-trigger`: no sync.

use super::flakey::DM_NAME;
use super::flakey::{Cause, GuestSpec, ProcessView};
use super::guest::{make_image, shell_quote, FileSystem};
use super::point::{
    make_scratch_dirs, mount_fs_command, mount_system_command, read_back, run_guest,
    write_incarnation_spec, Files, BOOT_TIMEOUT_S, ENGINE_DIR, STATUS_KILLED,
};
use crate::runner::RunSpec;
use std::fs;
use std::path::PathBuf;
use std::time::Duration;

/// What one point needs besides the run.
#[derive(Clone, Debug)]
pub struct ErrorSetup {
    pub kernel: PathBuf,
    /// The keel binary the guest runs (this one).
    pub exe: PathBuf,
    pub fs: FileSystem,
    /// What the device fails at the fsync.
    pub cause: Cause,
    /// The guest kernel's device-mapper modules (`uml::dm_modules_dir`).
    pub modules_dir: PathBuf,
    /// A fresh directory of this point's own (the image, scripts and copies go there).
    pub scratch: PathBuf,
}

/// What a real point showed: the process's view of the failed fsync, and the directory a
/// reboot found after the power cut.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    pub view: ProcessView,
    pub survived: Files,
}

/// Runs `run` (whose plan crashes the process before the fsync step) in a guest, fails
/// that fsync of `file` with dm-flakey, cuts the power and reads back what survived.
pub fn disk_error(setup: &ErrorSetup, run: &RunSpec, file: &str) -> Result<Observed, String> {
    let scratch = &setup.scratch;
    make_scratch_dirs(scratch)?;
    make_image(&scratch.join("disk.img"), setup.fs)?;
    let spec_file = write_incarnation_spec(scratch, run)?;
    let guest = GuestSpec {
        modules_dir: setup.modules_dir.clone(),
        dev_dir: scratch.join("dev"),
        file: scratch.join("mnt").join(ENGINE_DIR).join(file),
        out: scratch.join("process-view.json"),
        btrfs: setup.fs == FileSystem::Btrfs,
        cause: setup.cause,
    };
    let guest_file = scratch.join("guest.json");
    fs::write(
        &guest_file,
        serde_json::to_vec(&guest).expect("a guest spec serializes"),
    )
    .map_err(|e| format!("{}: {e}", guest_file.display()))?;

    let mnt = shell_quote(&scratch.join("mnt"));
    let status_file = scratch.join("status-fail");
    let errors = shell_quote(&scratch.join("guest-errors.txt"));
    let script = format!(
        "#!/bin/sh\n\
         # keel fidelity disk-error: the engine up to the fsync, dm-flakey under its file, the\n\
         # fsync, what a process sees, then the power.\n\
         export PATH=/usr/sbin:/usr/bin:/sbin:/bin\n\
         if {system} && {exe} __disk-error-guest setup {guest} 2>>{errors} && {mount} \\\n\
         \x20   && mkdir {mnt}/{ENGINE_DIR} && sync; then\n\
         \x20 {exe} __incarnation {spec}\n\
         \x20 child=$?\n\
         \x20 if [ $child = {STATUS_KILLED} ] && {exe} __disk-error-guest fail {guest} 2>>{errors}; then\n\
         \x20   echo 'failed' | dd of={status} conv=fsync status=none\n\
         \x20 else\n\
         \x20   echo \"child $child, no fsync failed\" | dd of={status} conv=fsync status=none\n\
         \x20 fi\n\
         else\n\
         \x20 echo 'setup failed' | dd of={status} conv=fsync status=none\n\
         fi\n\
         echo o > /proc/sysrq-trigger\n",
        system = mount_system_command(scratch),
        mount = mount_fs_command(scratch, setup.fs, &format!("mapper/{DM_NAME}")),
        exe = shell_quote(&setup.exe),
        guest = shell_quote(&guest_file),
        spec = shell_quote(&spec_file),
        status = shell_quote(&status_file),
    );
    run_guest(
        &setup.kernel,
        scratch,
        "fail",
        &script,
        Duration::from_secs(BOOT_TIMEOUT_S),
    )?;
    let status = fs::read_to_string(&status_file).unwrap_or_default();
    if status.trim() != "failed" {
        let errors = fs::read_to_string(scratch.join("guest-errors.txt")).unwrap_or_default();
        return Err(format!(
            "the guest that fails the fsync did not get to it (status: {:?}; errors: {:?}; console: {})",
            status.trim(),
            errors.trim(),
            scratch.join("fail.log").display()
        ));
    }
    let view_bytes = fs::read(&guest.out).map_err(|e| format!("{}: {e}", guest.out.display()))?;
    let view: ProcessView =
        serde_json::from_slice(&view_bytes).map_err(|e| format!("{}: {e}", guest.out.display()))?;
    let survived = read_back(&setup.kernel, scratch, setup.fs)?;
    Ok(Observed { view, survived })
}
