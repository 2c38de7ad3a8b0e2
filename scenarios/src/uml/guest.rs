//! One user-mode Linux guest: a real Linux kernel (`/usr/bin/linux.uml`, Debian's
//! `user-mode-linux` package) run as an ordinary host process on a file-backed disk image.
//!
//! The guest's root is the host's `/` through hostfs, so it runs host binaries (this very
//! `keel`, dynamically linked: the host's libraries are reachable the same way) and writes
//! its results to host files. Its only block device (`ubda`) is the image. An init script
//! does the work and ends the guest with `echo o > /proc/sysrq-trigger`: an immediate
//! power-off with no sync, so the image holds exactly what had reached the virtual disk.
//! Every boot is bounded by a timeout, after which the guest's whole process group is killed.

use std::fs::{self, File};
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian's `user-mode-linux` package puts the kernel.
pub const KERNEL_PATH: &str = "/usr/bin/linux.uml";

/// The one command that installs everything the real-kernel checks need.
pub const INSTALL_COMMAND: &str =
    "apt-get update && apt-get install -y user-mode-linux e2fsprogs xfsprogs btrfs-progs dmsetup";

/// Where the guest's init looks for programs (it runs the host's).
const GUEST_PATH: [&str; 4] = ["/usr/sbin", "/usr/bin", "/sbin", "/bin"];

/// Where Debian's `user-mode-linux` package puts the kernel's modules, one directory per
/// version.
const MODULES_ROOT: &str = "/usr/lib/uml/modules";

/// The guest's memory.
const GUEST_MEMORY: &str = "mem=256M";

/// How often a waiting host looks whether the guest is gone.
const POLL_INTERVAL_MS: u64 = 20;

/// A file system the guest's kernel has built in, and how the host makes an image of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum FileSystem {
    Ext4,
    Xfs,
    Btrfs,
}

impl FileSystem {
    pub fn name(&self) -> &'static str {
        match self {
            FileSystem::Ext4 => "ext4",
            FileSystem::Xfs => "xfs",
            FileSystem::Btrfs => "btrfs",
        }
    }

    /// The file system's own profile of the crash model.
    pub fn profile(&self) -> keel_sim::disk::FsModel {
        match self {
            FileSystem::Ext4 => keel_sim::disk::FsModel::Ext4,
            FileSystem::Xfs => keel_sim::disk::FsModel::Xfs,
            FileSystem::Btrfs => keel_sim::disk::FsModel::Btrfs,
        }
    }

    /// The image size: the smallest each mkfs accepts comfortably (xfs wants 300 MiB).
    fn image_size_bytes(&self) -> u64 {
        match self {
            FileSystem::Ext4 => 64 << 20,
            FileSystem::Xfs => 300 << 20,
            FileSystem::Btrfs => 128 << 20,
        }
    }

    /// The host command that formats an image, and the package it comes from.
    fn mkfs(&self) -> (&'static str, &'static [&'static str], &'static str) {
        match self {
            FileSystem::Ext4 => ("mkfs.ext4", &["-F", "-q", "-b", "4096"], "e2fsprogs"),
            FileSystem::Xfs => ("mkfs.xfs", &["-q", "-f"], "xfsprogs"),
            FileSystem::Btrfs => ("mkfs.btrfs", &["-q", "-f"], "btrfs-progs"),
        }
    }
}

/// The kernel at the package's path, or an error that says how to install it.
pub fn kernel() -> Result<PathBuf, String> {
    kernel_at(Path::new(KERNEL_PATH))
}

fn kernel_at(path: &Path) -> Result<PathBuf, String> {
    if path.is_file() {
        Ok(path.to_path_buf())
    } else {
        Err(format!(
            "no user-mode Linux kernel at {}: install with: {INSTALL_COMMAND}",
            path.display()
        ))
    }
}

/// An error that says how to install `program` (from `package`) unless the guest's init
/// would find it.
pub fn require_program(program: &str, package: &str) -> Result<(), String> {
    require_program_in(&GUEST_PATH, program, package)
}

fn require_program_in(dirs: &[&str], program: &str, package: &str) -> Result<(), String> {
    if dirs
        .iter()
        .any(|dir| Path::new(dir).join(program).is_file())
    {
        Ok(())
    } else {
        Err(format!(
            "no {program} in {}: install {package} with: {INSTALL_COMMAND}",
            dirs.join(":")
        ))
    }
}

/// The kernel's version (`linux.uml --version` prints it), or "unknown".
pub fn kernel_version(kernel: &Path) -> String {
    Command::new(kernel)
        .arg("--version")
        .output()
        .ok()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "unknown".to_string())
}

/// Where the package keeps the device-mapper modules of kernel `version`, or an error if
/// `dm-flakey.ko` is not there.
pub fn dm_modules_dir(version: &str) -> Result<PathBuf, String> {
    let dir = Path::new(MODULES_ROOT)
        .join(version)
        .join("kernel/drivers/md");
    if dir.join("dm-flakey.ko").is_file() {
        Ok(dir)
    } else {
        Err(format!(
            "no dm-flakey.ko in {} (the kernel says it is {version}): install with: {INSTALL_COMMAND}",
            dir.display()
        ))
    }
}

/// A fresh image of `fs` at `path`: a sparse file of the file system's size, formatted.
pub fn make_image(path: &Path, fs: FileSystem) -> Result<(), String> {
    let image = File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    image
        .set_len(fs.image_size_bytes())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    drop(image);
    let (program, args, package) = fs.mkfs();
    let output = Command::new(program)
        .args(args)
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            format!("cannot run {program} ({e}): install {package} with: {INSTALL_COMMAND}")
        })?;
    if !output.status.success() {
        return Err(format!(
            "{program} {} failed: {}",
            path.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(())
}

/// How a boot ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BootEnd {
    /// The kernel process ended by itself (after the init script's power-off).
    Ended,
    /// It was still running at the timeout and was killed.
    TimedOut,
}

/// One guest boot: `kernel` on `image`, running `init` (an executable script on the host),
/// its console going to `log`, its runtime files under `uml_dir`; killed (the whole process
/// group) if it still runs after `timeout`.
pub fn boot(
    kernel: &Path,
    image: &Path,
    init: &Path,
    uml_dir: &Path,
    log: &Path,
    timeout: Duration,
) -> Result<BootEnd, String> {
    fs::create_dir_all(uml_dir).map_err(|e| format!("{}: {e}", uml_dir.display()))?;
    let console = File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let console_err = console
        .try_clone()
        .map_err(|e| format!("{}: {e}", log.display()))?;
    let mut child = Command::new(kernel)
        .arg(GUEST_MEMORY)
        .arg(format!("ubd0={}", image.display()))
        .arg(format!("uml_dir={}", uml_dir.display()))
        .args(["root=/dev/root", "rootfstype=hostfs", "rootflags=/", "rw"])
        .arg(format!("init={}", init.display()))
        .args(["con=null", "con0=null,fd:1"])
        .stdin(Stdio::null())
        .stdout(console)
        .stderr(console_err)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", kernel.display()))?;
    let started = Instant::now();
    let polls_max = timeout.as_millis() as u64 / POLL_INTERVAL_MS + 1;
    for _ in 0..polls_max {
        if child
            .try_wait()
            .map_err(|e| format!("waiting for the guest: {e}"))?
            .is_some()
        {
            return Ok(BootEnd::Ended);
        }
        if started.elapsed() >= timeout {
            break;
        }
        std::thread::sleep(Duration::from_millis(POLL_INTERVAL_MS));
    }
    kill_group(child.id());
    child
        .wait()
        .map_err(|e| format!("waiting for the killed guest: {e}"))?;
    Ok(BootEnd::TimedOut)
}

/// SIGKILL to the guest's process group (the kernel process and the host processes it runs
/// the guest's processes in): the group is the guest's own, made by `process_group(0)`.
fn kill_group(pid: u32) {
    // SAFETY: kill has no memory effects; a negative pid names the process group the guest
    // was started in, which holds only the guest's processes.
    unsafe {
        libc::kill(-(pid as libc::pid_t), libc::SIGKILL);
    }
}

/// Writes `text` to `path` as an executable script.
pub fn write_script(path: &Path, text: &str) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::write(path, text)?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o755))
}

/// Quotes a path for a POSIX shell script (single quotes, `'` escaped).
pub fn shell_quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_kernel_is_an_error_with_the_install_command() {
        assert_eq!(
            kernel_at(Path::new("/nonexistent/linux.uml")),
            Err("no user-mode Linux kernel at /nonexistent/linux.uml: install with: \
                 apt-get update && apt-get install -y user-mode-linux e2fsprogs xfsprogs btrfs-progs dmsetup"
                .to_string())
        );
    }

    #[test]
    fn a_missing_program_is_an_error_with_the_install_command() {
        assert_eq!(require_program_in(&["/nonexistent"], "sh", "dash"),
            Err("no sh in /nonexistent: install dash with: \
                 apt-get update && apt-get install -y user-mode-linux e2fsprogs xfsprogs btrfs-progs dmsetup"
                .to_string()));
        assert_eq!(
            require_program_in(&["/nonexistent", "/bin"], "sh", "dash"),
            Ok(())
        );
    }

    #[test]
    fn a_path_is_quoted_for_the_shell() {
        assert_eq!(shell_quote(Path::new("/tmp/a b")), "'/tmp/a b'");
        assert_eq!(shell_quote(Path::new("/tmp/it's")), r"'/tmp/it'\''s'");
    }
}
