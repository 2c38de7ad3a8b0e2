//! dm-flakey under a file, inside a user-mode Linux guest: the guest half of `keel fidelity
//! disk-error` (run there as the hidden `keel __disk-error-guest`), and the pure parts it
//! is built from (reading `filefrag -v`, building the device-mapper table).
//!
//! Fault model (what the guest makes the device do): the file system sits from its mount
//! on a device-mapper device `keel` whose table is first one `linear` segment over the
//! whole image (`ubda`), so nothing differs from a plain mount. Just before the fsync the
//! point fails, the table is swapped (`dmsetup load`, `suspend --nolockfs --noflush`,
//! `resume`: no freeze, no flush, so the file's dirty pages stay dirty) for one where every
//! block of the file's extent map is a `flakey` segment with `error_writes` (down for an
//! hour: every write to those blocks fails with EIO, reads pass) and the rest stays
//! `linear`. Every block the fsync writes data to is one of the file's, so every data
//! write of the fsync fails; metadata (inode, journal, extent tree) is elsewhere and
//! succeeds.
//!
//! Two causes ([`Cause`]), because dm-flakey fails more than the writes in its range: with
//! `error_writes` it also fails the empty cache-flush requests device-mapper sends to every
//! target of a table, wherever the target's range lies (measured 2026-12-07: flakey over an
//! unused range gave btrfs an EIO and a read-only file system, and ext4 and xfs an EIO at a
//! second fsync). So `write-and-flush` (flakey, down for the rest of the boot) fails the
//! fsync's data writes *and* every flush after the swap: what the rows measured before
//! 2026-12-07. `write` (the default, the fault the model names: a failed data write) puts
//! device-mapper's `error` target over the same blocks instead, which fails every I/O to
//! its range and receives no flushes (it asks for none), for the one fsync only: right
//! after it the table goes back to one `linear` map (the same `load`, `suspend`, `resume`),
//! so the second fsync, the reads and the power cut see a healthy device: the write failed
//! once, as a transient media or transport error does. To have an extent map at all, the file's unallocated (delayed-allocation)
//! blocks are first allocated with `fallocate(FALLOC_FL_KEEP_SIZE)` over its size, which
//! neither writes nor changes the file's contents or size (they become unwritten extents;
//! `filefrag` without `-s` does not flush). The guest's periodic writeback is switched off
//! (`vm.dirty_writeback_centisecs = 0`) so that nothing writes the dirty pages before the
//! fsync does.
//!
//! btrfs differs in two ways. Its `fallocate` writes the range's dirty pages back first
//! (it waits for ordered extents), so it is not called; and a copy-on-write file system
//! puts each data write in a new place that no extent map shows before the write. So on
//! btrfs every data chunk (block group) of the device fails writes, read from the chunk
//! tree (`btrfs inspect-internal dump-tree -t chunk`, which also maps btrfs's logical
//! addresses, what `filefrag` prints, to the device's): only the fsync writes data then,
//! and it writes only this file's; metadata chunks stay linear. The view's extent map is
//! the file's extents that have a place (on the device's blocks), the delayed ones left out.
//!
//! Modules: the guest kernel has device-mapper as modules (`dm-mod.ko`, `dm-flakey.ko`);
//! the host has no `insmod`, so they are loaded with the `finit_module` system call.

use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The device-mapper device the file system sits on.
pub const DM_NAME: &str = "keel";

/// The image's block device in the guest.
pub const DEVICE: &str = "ubda";

/// The modules device-mapper needs, in load order.
const MODULES: [&str; 2] = ["dm-mod.ko", "dm-flakey.ko"];

/// Bytes per device-mapper sector.
const SECTOR_BYTES: u64 = 512;

/// How long a flakey segment stays down: longer than any point runs.
const DOWN_INTERVAL_S: u64 = 3600;

/// One extent of a file: `length` blocks from logical block `logical` at physical block
/// `physical`, in units of the file system's block size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extent {
    pub logical: u64,
    pub physical: u64,
    pub length: u64,
}

/// A file's extent map as `filefrag -v` prints it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtentMap {
    pub block_size_bytes: u64,
    pub extents: Vec<Extent>,
}

/// Reads `filefrag -v` output: the block size from `File size of F is N (B blocks of S
/// bytes)` (`1 block of S bytes` for one), then one extent per line `  i:  l0..  l1:  p0..  p1:  len:  [expected:] flags`.
/// An extent without a place on disk yet (`delalloc`, `unknown_loc`) is an error: there is
/// no block to put dm-flakey under.
pub fn parse_filefrag(text: &str) -> Result<ExtentMap, String> {
    parse_filefrag_extents(text, false)
}

/// As [`parse_filefrag`], leaving out the extents with no place on disk yet and the inline
/// ones (btrfs keeps a small file's data in its metadata: no data block to fail).
pub fn parse_filefrag_placed(text: &str) -> Result<ExtentMap, String> {
    parse_filefrag_extents(text, true)
}

fn parse_filefrag_extents(text: &str, skip_unplaced: bool) -> Result<ExtentMap, String> {
    let block_size_bytes = text
        .lines()
        .find_map(|line| {
            let rest = line.trim().strip_prefix("File size of ")?;
            // "... (3 blocks of 4096 bytes)" or "... (1 block of 4096 bytes)".
            let tail = rest.rsplit_once(" of ")?.1;
            tail.strip_suffix(" bytes)")?.trim().parse::<u64>().ok()
        })
        .ok_or_else(|| format!("filefrag: no block size in {text:?}"))?;
    if block_size_bytes == 0 || block_size_bytes % SECTOR_BYTES != 0 {
        return Err(format!(
            "filefrag: a block size of {block_size_bytes} bytes is not whole sectors"
        ));
    }
    let mut extents = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split(':').collect();
        let is_extent = fields.len() >= 5
            && !fields[0].trim().is_empty()
            && fields[0].trim().chars().all(|c| c.is_ascii_digit());
        if !is_extent {
            continue;
        }
        let flags = fields.last().expect("at least five fields").trim();
        let unplaced = |f: &str| f == "delalloc" || f == "unknown_loc";
        // An inline extent (btrfs: a small file's data in the metadata) has no block.
        if skip_unplaced && flags.split(',').any(|f| unplaced(f) || f == "inline") {
            continue;
        }
        if flags.split(',').any(unplaced) {
            return Err(format!(
                "filefrag: an extent with no blocks yet ({flags}): {line:?}"
            ));
        }
        let range = |field: &str| -> Result<(u64, u64), String> {
            let (start, end) = field
                .split_once("..")
                .ok_or_else(|| format!("filefrag: not a range {field:?} in {line:?}"))?;
            let number = |s: &str| {
                s.trim()
                    .parse::<u64>()
                    .map_err(|e| format!("filefrag: {s:?} in {line:?}: {e}"))
            };
            Ok((number(start)?, number(end)?))
        };
        let (logical, logical_end) = range(fields[1])?;
        let (physical, physical_end) = range(fields[2])?;
        let length = fields[3]
            .trim()
            .parse::<u64>()
            .map_err(|e| format!("filefrag: length {:?} in {line:?}: {e}", fields[3]))?;
        let consistent = length > 0
            && logical_end + 1 == logical + length
            && physical_end + 1 == physical + length;
        if !consistent {
            return Err(format!("filefrag: an inconsistent extent: {line:?}"));
        }
        extents.push(Extent {
            logical,
            physical,
            length,
        });
    }
    Ok(ExtentMap {
        block_size_bytes,
        extents,
    })
}

/// A btrfs data chunk of a single-device file system: `length` bytes from btrfs's logical
/// address `logical` at byte `physical` of the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataChunk {
    pub logical: u64,
    pub physical: u64,
    pub length: u64,
}

/// Reads the data chunks from `btrfs inspect-internal dump-tree -t chunk` output: each
/// `item N key (FIRST_CHUNK_TREE CHUNK_ITEM L)`, its `length N ... type DATA|single` line
/// and its `stripe 0 devid 1 offset P` line. An error if there is none, or one with more
/// than one stripe (nothing but `single` is made here).
pub fn parse_btrfs_data_chunks(text: &str) -> Result<Vec<DataChunk>, String> {
    let number = |s: &str, line: &str| {
        s.trim()
            .parse::<u64>()
            .map_err(|e| format!("btrfs chunk tree: {s:?} in {line:?}: {e}"))
    };
    let mut chunks = Vec::new();
    // The chunk being read: its logical address, its length if it holds data.
    let mut logical: Option<u64> = None;
    let mut data_length: Option<u64> = None;
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line
            .split_once("CHUNK_ITEM ")
            .filter(|_| line.starts_with("item "))
            .map(|(_, rest)| rest)
        {
            let address = rest
                .split_once(')')
                .ok_or_else(|| format!("btrfs chunk tree: no ')' in {line:?}"))?
                .0;
            logical = Some(number(address, line)?);
            data_length = None;
        } else if let Some(rest) = line.strip_prefix("length ") {
            let length = number(rest.split_whitespace().next().unwrap_or(""), line)?;
            let kind = line
                .split_once(" type ")
                .map_or("", |(_, kind)| kind.trim());
            data_length = None;
            if kind.split('|').any(|k| k == "DATA") {
                if kind != "DATA|single" && kind != "DATA" {
                    return Err(format!(
                        "btrfs chunk tree: a data chunk of type {kind} (only single is made here)"
                    ));
                }
                data_length = Some(length);
            }
        } else if let Some(rest) = line.strip_prefix("stripe 0 devid ") {
            let (Some(logical), Some(length)) = (logical, data_length.take()) else {
                continue;
            };
            let offset = rest
                .split_once(" offset ")
                .ok_or_else(|| format!("btrfs chunk tree: no offset in {line:?}"))?
                .1;
            chunks.push(DataChunk {
                logical,
                physical: number(offset, line)?,
                length,
            });
        }
    }
    if chunks.is_empty() {
        return Err(format!("btrfs chunk tree: no data chunk in {text:?}"));
    }
    Ok(chunks)
}

/// `map` (btrfs's logical addresses, as `filefrag` prints them) on the device's blocks. An
/// error if an extent is outside every data chunk.
pub fn btrfs_on_device(map: &ExtentMap, chunks: &[DataChunk]) -> Result<ExtentMap, String> {
    let block = map.block_size_bytes;
    let extents = map
        .extents
        .iter()
        .map(|e| {
            let (start, end) = (e.physical * block, (e.physical + e.length) * block);
            let chunk = chunks
                .iter()
                .find(|c| c.logical <= start && end <= c.logical + c.length)
                .ok_or_else(|| format!("btrfs: extent {e:?} is in no data chunk"))?;
            Ok(Extent {
                physical: (chunk.physical + (start - chunk.logical)) / block,
                ..*e
            })
        })
        .collect::<Result<Vec<Extent>, String>>()?;
    Ok(ExtentMap {
        block_size_bytes: block,
        extents,
    })
}

/// The data chunks as an extent map on the device (4 KiB blocks), for [`flakey_table`].
pub fn data_chunks_map(chunks: &[DataChunk]) -> Result<ExtentMap, String> {
    const BLOCK: u64 = 4096;
    let extents = chunks
        .iter()
        .map(|c| {
            if c.physical % BLOCK != 0 || c.length % BLOCK != 0 {
                return Err(format!("btrfs: a data chunk not in 4 KiB blocks: {c:?}"));
            }
            Ok(Extent {
                logical: 0,
                physical: c.physical / BLOCK,
                length: c.length / BLOCK,
            })
        })
        .collect::<Result<Vec<Extent>, String>>()?;
    Ok(ExtentMap {
        block_size_bytes: BLOCK,
        extents,
    })
}

/// What the device fails at the fsync a point fails (module header).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Cause {
    /// The fsync's data writes to the failing blocks, once (`error` target; flushes pass).
    #[default]
    Write,
    /// Those writes and every cache flush after them (dm-flakey `error_writes`).
    WriteAndFlush,
}

impl Cause {
    pub fn name(&self) -> &'static str {
        match self {
            Cause::Write => "write",
            Cause::WriteAndFlush => "write-and-flush",
        }
    }
}

/// The device-mapper table of a `device` of `device_sectors` sectors with every block of
/// `map` failing writes and the rest `linear`, in sector order, adjacent extents merged:
/// `cause` `write`, an `error` segment; `write-and-flush`, `flakey ... 0 3600 1
/// error_writes`. An error if the map is empty or leaves the device.
pub fn flakey_table(
    device: &str,
    device_sectors: u64,
    map: &ExtentMap,
    cause: Cause,
) -> Result<String, String> {
    if map.extents.is_empty() {
        return Err("the file has no blocks: nothing for an fsync to fail on".to_string());
    }
    let sectors_per_block = map.block_size_bytes / SECTOR_BYTES;
    let mut spans: Vec<(u64, u64)> = map
        .extents
        .iter()
        .map(|e| {
            (
                e.physical * sectors_per_block,
                (e.physical + e.length) * sectors_per_block,
            )
        })
        .collect();
    spans.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(spans.len());
    for (start, end) in spans {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    let last_end = merged.last().expect("not empty").1;
    if last_end > device_sectors {
        return Err(format!(
            "an extent ends at sector {last_end}, past the device's {device_sectors}"
        ));
    }
    let mut lines = Vec::with_capacity(2 * merged.len() + 1);
    let mut at = 0;
    for (start, end) in merged {
        if start > at {
            lines.push(format!("{at} {} linear {device} {at}", start - at));
        }
        lines.push(match cause {
            Cause::Write => format!("{start} {} error", end - start),
            Cause::WriteAndFlush => format!(
                "{start} {} flakey {device} {start} 0 {DOWN_INTERVAL_S} 1 error_writes",
                end - start
            ),
        });
        at = end;
    }
    if device_sectors > at {
        lines.push(format!("{at} {} linear {device} {at}", device_sectors - at));
    }
    Ok(lines.join("\n"))
}

/// The table that maps the whole device unchanged.
pub fn linear_table(device: &str, device_sectors: u64) -> String {
    format!("0 {device_sectors} linear {device} 0")
}

/// What the guest half of a point needs: where things are in the guest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestSpec {
    /// The directory holding `dm-mod.ko` and `dm-flakey.ko`.
    pub modules_dir: PathBuf,
    /// The guest's devtmpfs (`DM_DEV_DIR`: `mapper/control`, `mapper/keel`).
    pub dev_dir: PathBuf,
    /// The file whose fsync fails.
    pub file: PathBuf,
    /// Where the process's view goes (a hostfs file).
    pub out: PathBuf,
    /// The file system is btrfs: every data chunk fails, no `fallocate` (module header).
    #[serde(default)]
    pub btrfs: bool,
    /// What the device fails.
    #[serde(default)]
    pub cause: Cause,
}

/// What an fsync or a read returned: "ok", or the error ("EIO" for EIO, "EROFS" for a
/// read-only file system: the model's names for them).
pub fn outcome_name(result: &io::Result<()>) -> String {
    match result {
        Ok(()) => "ok".to_string(),
        Err(e) => error_name(e),
    }
}

fn error_name(error: &io::Error) -> String {
    match error.raw_os_error() {
        Some(libc::EIO) => "EIO".to_string(),
        Some(libc::EROFS) => "EROFS".to_string(),
        _ => error.to_string(),
    }
}

/// A read of the whole file: its bytes, or the error.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadOutcome {
    Bytes(Vec<u8>),
    Error(String),
}

impl ReadOutcome {
    fn of(result: io::Result<Vec<u8>>) -> ReadOutcome {
        match result {
            Ok(bytes) => ReadOutcome::Bytes(bytes),
            Err(e) => ReadOutcome::Error(error_name(&e)),
        }
    }
}

/// What the process saw, in order: the file before the fsync (as it reads it, and as the
/// disk holds it), the failing fsync, a read right after, a second fsync, and (after
/// `drop_caches`) a read and the file's size.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessView {
    pub map: ExtentMap,
    pub table: String,
    pub read_before: ReadOutcome,
    /// The file's bytes as the device held them just before the fsync (its blocks read
    /// with `O_DIRECT` from the image's device, zeros where it has none): equal to
    /// `read_before` when the file system had written everything already, and the fsync
    /// has nothing to write for dm-flakey to fail.
    pub on_disk_before: Vec<u8>,
    pub fsync: String,
    pub read: ReadOutcome,
    pub second_fsync: String,
    pub read_after_eviction: ReadOutcome,
    pub size_after_eviction_bytes: u64,
}

/// Guest, before the engine runs: loads the modules, switches periodic writeback off and
/// makes `keel` a linear map of the whole image.
pub fn guest_setup(spec: &GuestSpec) -> Result<(), String> {
    for module in MODULES {
        load_module(&spec.modules_dir.join(module))?;
    }
    fs::write("/proc/sys/vm/dirty_writeback_centisecs", "0")
        .map_err(|e| format!("vm.dirty_writeback_centisecs: {e}"))?;
    let device = spec.dev_dir.join(DEVICE);
    let table = linear_table(&device.display().to_string(), device_sectors()?);
    dmsetup(
        spec,
        &["create", DM_NAME, "--noudevsync", "--table", &table],
    )
}

/// Guest, after the engine was killed before its fsync: dm-flakey under the file, then the
/// fsync and what the process sees, written to `spec.out`.
pub fn guest_fail(spec: &GuestSpec) -> Result<(), String> {
    let file_name = spec.file.display().to_string();
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&spec.file)
        .map_err(|e| format!("{file_name}: {e}"))?;
    let size_bytes = file
        .metadata()
        .map_err(|e| format!("{file_name}: {e}"))?
        .len();
    if !spec.btrfs {
        allocate(&file, size_bytes).map_err(|e| format!("fallocate {file_name}: {e}"))?;
    }
    let output = Command::new("filefrag")
        .arg("-v")
        .arg(&spec.file)
        .output()
        .map_err(|e| format!("cannot run filefrag: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "filefrag {file_name}: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let filefrag = String::from_utf8_lossy(&output.stdout);
    let device = spec.dev_dir.join(DEVICE);
    let (map, failing) = if spec.btrfs {
        let output = Command::new("btrfs")
            .args(["inspect-internal", "dump-tree", "-t", "chunk"])
            .arg(&device)
            .output()
            .map_err(|e| format!("cannot run btrfs: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "btrfs inspect-internal dump-tree: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        let chunks = parse_btrfs_data_chunks(&String::from_utf8_lossy(&output.stdout))?;
        let map = btrfs_on_device(&parse_filefrag_placed(&filefrag)?, &chunks)?;
        (map, data_chunks_map(&chunks)?)
    } else {
        let map = parse_filefrag(&filefrag)?;
        (map.clone(), map)
    };
    let read_before = ReadOutcome::of(fs::read(&spec.file));
    let on_disk_before = read_on_disk(&device, &map, size_bytes)
        .map_err(|e| format!("{}: {e}", device.display()))?;
    let sectors = device_sectors()?;
    let table = flakey_table(&device.display().to_string(), sectors, &failing, spec.cause)?;
    swap_table(spec, &table)?;

    let fsync = outcome_name(&file.sync_all());
    if spec.cause == Cause::Write {
        // The write failed once: the device is healthy again for everything after it.
        swap_table(spec, &linear_table(&device.display().to_string(), sectors))?;
    }
    let read = ReadOutcome::of(fs::read(&spec.file));
    let second_fsync = outcome_name(&file.sync_all());
    fs::write("/proc/sys/vm/drop_caches", "3").map_err(|e| format!("drop_caches: {e}"))?;
    let read_after_eviction = ReadOutcome::of(fs::read(&spec.file));
    let size_after_eviction_bytes = fs::metadata(&spec.file)
        .map_err(|e| format!("{file_name}: {e}"))?
        .len();
    let view = ProcessView {
        map,
        table,
        read_before,
        on_disk_before,
        fsync,
        read,
        second_fsync,
        read_after_eviction,
        size_after_eviction_bytes,
    };
    let mut out = File::create(&spec.out).map_err(|e| format!("{}: {e}", spec.out.display()))?;
    serde_json::to_writer(&mut out, &view).map_err(|e| format!("{}: {e}", spec.out.display()))?;
    out.sync_all()
        .map_err(|e| format!("{}: {e}", spec.out.display()))
}

/// Replaces the device's table without a freeze or a flush (dirty pages stay dirty).
fn swap_table(spec: &GuestSpec, table: &str) -> Result<(), String> {
    dmsetup(spec, &["load", DM_NAME, "--noudevsync", "--table", table])?;
    dmsetup(spec, &["suspend", "--nolockfs", "--noflush", DM_NAME])?;
    dmsetup(spec, &["resume", "--noudevsync", DM_NAME])
}

/// The first `size_bytes` of a file as `device` holds them: each block of `map` read with
/// `O_DIRECT` (past the page cache), zeros where the file has no block.
fn read_on_disk(device: &Path, map: &ExtentMap, size_bytes: u64) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let block = map.block_size_bytes as usize;
    let blocks = size_bytes.div_ceil(map.block_size_bytes) as usize;
    let mut bytes = vec![0u8; blocks * block];
    let device = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(device)?;
    // O_DIRECT wants a buffer aligned to the block: one block more than needed, used from
    // its first aligned byte.
    let mut buffer = vec![0u8; 2 * block];
    let skip = buffer.as_ptr().align_offset(block);
    for extent in &map.extents {
        for i in 0..extent.length {
            let logical = (extent.logical + i) as usize;
            if logical >= blocks {
                break;
            }
            let aligned = &mut buffer[skip..skip + block];
            device.read_exact_at(aligned, (extent.physical + i) * map.block_size_bytes)?;
            bytes[logical * block..(logical + 1) * block].copy_from_slice(aligned);
        }
    }
    bytes.truncate(size_bytes as usize);
    Ok(bytes)
}

/// Allocates the file's blocks up to `size_bytes` without writing or resizing it.
fn allocate(file: &File, size_bytes: u64) -> io::Result<()> {
    if size_bytes == 0 {
        return Ok(());
    }
    let len = libc::off_t::try_from(size_bytes).map_err(io::Error::other)?;
    // SAFETY: fallocate reads no memory; the descriptor is the open file's.
    let result = unsafe { libc::fallocate(file.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, 0, len) };
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Loads a kernel module from its file (`finit_module`); one already loaded is fine.
fn load_module(path: &Path) -> Result<(), String> {
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let params = c"";
    // SAFETY: finit_module reads the NUL-terminated parameter string and the open file.
    let result =
        unsafe { libc::syscall(libc::SYS_finit_module, file.as_raw_fd(), params.as_ptr(), 0) };
    if result == 0 {
        return Ok(());
    }
    let error = io::Error::last_os_error();
    if error.raw_os_error() == Some(libc::EEXIST) {
        return Ok(());
    }
    Err(format!("finit_module {}: {error}", path.display()))
}

/// The image's size in sectors, as the guest's kernel sees it.
fn device_sectors() -> Result<u64, String> {
    let path = format!("/sys/block/{DEVICE}/size");
    let text = fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    text.trim()
        .parse()
        .map_err(|e| format!("{path}: {text:?}: {e}"))
}

fn dmsetup(spec: &GuestSpec, args: &[&str]) -> Result<(), String> {
    let output = Command::new("dmsetup")
        .args(args)
        .env("DM_DEV_DIR", &spec.dev_dir)
        .output()
        .map_err(|e| format!("cannot run dmsetup: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "dmsetup {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `filefrag -v` on ext4 (e2fsprogs 1.47) after `fallocate -k`: the written blocks and
    /// the new unwritten one.
    const EXT4: &str = "Filesystem type is: ef53\n\
File size of /tmp/de/mnt/f is 9196 (3 blocks of 4096 bytes)\n \
ext:     logical_offset:        physical_offset: length:   expected: flags:\n   \
0:        0..       1:       4851..      4852:      2:            \n   \
1:        2..       2:       4853..      4853:      1:             last,unwritten,eof\n\
/tmp/de/mnt/f: 1 extent found\n";

    #[test]
    fn filefrag_output_is_read_as_blocks() {
        assert_eq!(
            parse_filefrag(EXT4),
            Ok(ExtentMap {
                block_size_bytes: 4096,
                extents: vec![
                    Extent {
                        logical: 0,
                        physical: 4851,
                        length: 2
                    },
                    Extent {
                        logical: 2,
                        physical: 4853,
                        length: 1
                    },
                ],
            })
        );
    }

    #[test]
    fn one_block_is_singular() {
        let text = "Filesystem type is: ef53\n\
File size of /m/d/state-8.json.tmp is 117 (1 block of 4096 bytes)\n \
ext:     logical_offset:        physical_offset: length:   expected: flags:\n   \
0:        0..       0:       2066..      2066:      1:             last,unwritten,eof\n\
/m/d/state-8.json.tmp: 1 extent found\n";
        assert_eq!(
            parse_filefrag(text),
            Ok(ExtentMap {
                block_size_bytes: 4096,
                extents: vec![Extent {
                    logical: 0,
                    physical: 2066,
                    length: 1
                }],
            })
        );
    }

    #[test]
    fn an_expected_column_and_wide_numbers_are_read() {
        let text = "File size of f is 20480 (5 blocks of 4096 bytes)\n \
ext:     logical_offset:        physical_offset: length:   expected: flags:\n   \
0:        0..       0:   123456789..123456789:      1:\n   \
1:        1..       4:         10..        13:      4:  123456790: last,eof\n";
        let map = parse_filefrag(text).unwrap();
        assert_eq!(
            map.extents,
            vec![
                Extent {
                    logical: 0,
                    physical: 123_456_789,
                    length: 1
                },
                Extent {
                    logical: 1,
                    physical: 10,
                    length: 4
                },
            ]
        );
    }

    #[test]
    fn a_delayed_allocation_has_no_block_to_fail() {
        let text = "File size of f is 9196 (3 blocks of 4096 bytes)\n   \
0:        0..       1:         10..        11:      2:\n   \
1:        2..       2:          0..         0:      0:             last,unknown_loc,delalloc,eof\n";
        assert_eq!(
            parse_filefrag(text),
            Err("filefrag: an extent with no blocks yet (last,unknown_loc,delalloc,eof): \
                 \"   1:        2..       2:          0..         0:      0:             last,unknown_loc,delalloc,eof\""
                .to_string())
        );
        assert_eq!(
            parse_filefrag("nothing here\n"),
            Err("filefrag: no block size in \"nothing here\\n\"".to_string())
        );
    }

    #[test]
    fn the_table_fails_the_file_blocks_and_maps_the_rest_linearly() {
        let map = parse_filefrag(EXT4).unwrap();
        // Blocks 4851..=4853 (adjacent extents merged) are sectors 38808..38832.
        assert_eq!(
            flakey_table("/d/ubda", 131_072, &map, Cause::WriteAndFlush).unwrap(),
            "0 38808 linear /d/ubda 0\n\
             38808 24 flakey /d/ubda 38808 0 3600 1 error_writes\n\
             38832 92240 linear /d/ubda 38832"
        );
        // A data-write error alone: the `error` target, which receives no flushes.
        assert_eq!(
            flakey_table("/d/ubda", 131_072, &map, Cause::Write).unwrap(),
            "0 38808 linear /d/ubda 0\n\
             38808 24 error\n\
             38832 92240 linear /d/ubda 38832"
        );
        assert_eq!(
            linear_table("/d/ubda", 131_072),
            "0 131072 linear /d/ubda 0"
        );
    }

    #[test]
    fn extents_at_the_edges_and_apart_make_no_empty_segments() {
        let map = ExtentMap {
            block_size_bytes: 4096,
            extents: vec![
                Extent {
                    logical: 1,
                    physical: 15,
                    length: 1,
                },
                Extent {
                    logical: 0,
                    physical: 0,
                    length: 2,
                },
            ],
        };
        assert_eq!(
            flakey_table("u", 128, &map, Cause::WriteAndFlush).unwrap(),
            "0 16 flakey u 0 0 3600 1 error_writes\n\
             16 104 linear u 16\n\
             120 8 flakey u 120 0 3600 1 error_writes"
        );
        assert_eq!(
            flakey_table("u", 100, &map, Cause::Write),
            Err("an extent ends at sector 128, past the device's 100".to_string())
        );
        let empty = ExtentMap {
            block_size_bytes: 4096,
            extents: vec![],
        };
        assert_eq!(
            flakey_table("u", 100, &empty, Cause::Write),
            Err("the file has no blocks: nothing for an fsync to fail on".to_string())
        );
    }

    /// `btrfs inspect-internal dump-tree -t chunk` (btrfs-progs 6.2) on a fresh 128 MiB
    /// image, trimmed: one data chunk, a system and a metadata chunk with two stripes each.
    const CHUNKS: &str = "\
\titem 1 key (FIRST_CHUNK_TREE CHUNK_ITEM 13631488) itemoff 16105 itemsize 80
\t\tlength 8388608 owner 2 stripe_len 65536 type DATA|single
\t\tio_align 65536 io_width 65536 sector_size 4096
\t\tnum_stripes 1 sub_stripes 1
\t\t\tstripe 0 devid 1 offset 13631488
\t\t\tdev_uuid 381031ef-4990-49e0-8891-d88b0fc90c40
\titem 2 key (FIRST_CHUNK_TREE CHUNK_ITEM 22020096) itemoff 15993 itemsize 112
\t\tlength 8388608 owner 2 stripe_len 65536 type SYSTEM|DUP
\t\tnum_stripes 2 sub_stripes 1
\t\t\tstripe 0 devid 1 offset 22020096
\t\t\tstripe 1 devid 1 offset 30408704
\titem 3 key (FIRST_CHUNK_TREE CHUNK_ITEM 30408704) itemoff 15881 itemsize 112
\t\tlength 33554432 owner 2 stripe_len 65536 type METADATA|DUP
\t\tnum_stripes 2 sub_stripes 1
\t\t\tstripe 0 devid 1 offset 38797312
\t\t\tstripe 1 devid 1 offset 72351744
";

    #[test]
    fn btrfs_data_chunks_are_read_from_the_chunk_tree() {
        let chunks = parse_btrfs_data_chunks(CHUNKS).unwrap();
        assert_eq!(
            chunks,
            [DataChunk {
                logical: 13_631_488,
                physical: 13_631_488,
                length: 8_388_608
            }]
        );
        // Every block of the data chunk fails writes, the rest is linear.
        let table = flakey_table(
            "/d/ubda",
            262_144,
            &data_chunks_map(&chunks).unwrap(),
            Cause::WriteAndFlush,
        )
        .unwrap();
        assert_eq!(
            table,
            "0 26624 linear /d/ubda 0\n\
             26624 16384 flakey /d/ubda 26624 0 3600 1 error_writes\n\
             43008 219136 linear /d/ubda 43008"
        );
        assert!(parse_btrfs_data_chunks("no chunks").is_err());
        let raid = CHUNKS.replace("DATA|single", "DATA|RAID1");
        assert_eq!(
            parse_btrfs_data_chunks(&raid),
            Err(
                "btrfs chunk tree: a data chunk of type DATA|RAID1 (only single is made here)"
                    .to_string()
            )
        );
    }

    #[test]
    fn btrfs_extents_are_mapped_to_the_device_and_delayed_ones_left_out() {
        let text = "\
Filesystem type is: 9123683e
File size of /m/d/sink-append.jsonl is 330 (1 block of 4096 bytes)
 ext:     logical_offset:        physical_offset: length:   expected: flags:
   0:        0..       0:       3400..      3400:      1:             last,eof
   1:        1..       1:          0..         0:      1:             last,unknown_loc,delalloc,eof
";
        let inline = "\
File size of /m/d/sink-append.jsonl is 330 (1 block of 4096 bytes)
 ext:     logical_offset:        physical_offset: length:   expected: flags:
   0:        0..    4095:          0..      4095:   4096:             last,not_aligned,inline,eof
";
        assert!(parse_filefrag_placed(inline).unwrap().extents.is_empty());
        assert!(parse_filefrag(text).is_err());
        let placed = parse_filefrag_placed(text).unwrap();
        let chunks = [DataChunk {
            logical: 13_631_488,
            physical: 1_048_576,
            length: 8_388_608,
        }];
        assert_eq!(
            btrfs_on_device(&placed, &chunks).unwrap().extents,
            [Extent {
                logical: 0,
                physical: 3400 - 3328 + 256,
                length: 1
            }]
        );
        let outside = [DataChunk {
            logical: 0,
            physical: 0,
            length: 4096,
        }];
        assert!(btrfs_on_device(&placed, &outside).is_err());
    }
}
