//! Two disks side by side: whether a run's disk is the same as another run's, as the
//! process sees it or through any power loss (what a sweep's converging and composing ask,
//! `scenarios/src/fork.rs`), and the disks of two runs made to share their bytes.
//! Comparisons read no chunk both disks share.

use super::inode::DataOp;
use super::{Contents, DirOp, Disk, DiskError, InodeId};
use std::collections::BTreeMap;
use std::sync::Arc;

impl Disk {
    /// A copy of the disk with `name` truncated to nothing and synced: what `truncate(name,
    /// 0)` then `fsync(name)` leave on a copy, without copying or replaying the file's
    /// pending writes (a comparison of two disks that must not see one file's bytes: an
    /// append sink's). The same result: a truncate to 0 after the pending operations leaves
    /// nothing of them, and a completed truncate settles the size a failed fsync left in
    /// doubt; the fsync finds data to write either way.
    pub fn with_file_emptied(&self, name: &str) -> Result<Disk, DiskError> {
        let mut disk = self.clone();
        disk.inode(name)?;
        disk.injected("truncate", name)?;
        let inode = disk.inode_mut(name)?;
        inode.current = Contents::default();
        inode.unpersisted.clear();
        inode.pending = Arc::new(vec![DataOp::SetLen { len_bytes: 0 }]);
        disk.fsync(name)?;
        Ok(disk)
    }

    /// Holds `later`'s chunks instead of its own copies wherever a file's bytes (the process's
    /// view or the durable ones) are the first bytes of the same file in `later`, a disk this
    /// one became (a snapshot of a run, and the run's end): the same disk, byte for byte,
    /// whose growing files' last chunks are not copies. How many contents now share.
    pub fn share_prefixes_of(&mut self, later: &Disk) -> usize {
        let worth_sharing = |ours: &Contents, theirs: &Contents| {
            !ours.is_empty() && ours.len() < theirs.len() && theirs.starts_with(ours)
        };
        // Looked at first, so that a disk with nothing to share keeps its table shared.
        let ids: Vec<InodeId> = self
            .inodes
            .iter()
            .filter(|(id, inode)| {
                later.inodes.get(id).is_some_and(|theirs| {
                    worth_sharing(&inode.current, &theirs.current)
                        || worth_sharing(&inode.durable, &theirs.current)
                })
            })
            .map(|(id, _)| *id)
            .collect();
        let mut shared = 0;
        let inodes = Arc::make_mut(&mut self.inodes);
        for id in ids {
            let theirs = &later.inodes[&id].current;
            let inode = inodes.get_mut(&id).expect("listed above");
            shared += usize::from(inode.current.share_prefix_of(theirs));
            shared += usize::from(inode.durable.share_prefix_of(theirs));
        }
        shared
    }

    /// Whether the process sees the same disk in both: the same names, each with the same
    /// bytes, and the same read-only state (and profile and sector). What is durable and
    /// what is pending is not compared: only a fault tells them apart (a power loss, a
    /// failed fsync, a page eviction), so two disks the same here go on alike through any
    /// operations when no fault is to come (what converging runs have: see the sweep's
    /// `fork.rs`). Bytes a failed fsync left unpersisted read from the page cache until an
    /// eviction: disks holding any are never the same here. Chunks both share are not read.
    pub fn same_view_as(&self, other: &Disk) -> bool {
        self.same_view_but(other, None)
    }

    /// [`Disk::same_view_as`] with the bytes of the file `name` left out: the same names
    /// (`name` among them in both or in neither), and every other file with the same bytes.
    /// What comparing copies with that file emptied answers, without the copies.
    pub fn same_view_except(&self, other: &Disk, name: &str) -> bool {
        self.same_view_but(other, Some(name))
    }

    fn same_view_but(&self, other: &Disk, except: Option<&str>) -> bool {
        // One name a file (no hard links): names and their bytes are the whole view.
        self.sector_size_bytes == other.sector_size_bytes
            && self.model == other.model
            && self.read_only == other.read_only
            && self.io_error_armed == other.io_error_armed
            && self.unpersisted_bytes_but(except) == 0
            && other.unpersisted_bytes_but(except) == 0
            && self.names.len() == other.names.len()
            && ((Arc::ptr_eq(&self.names, &other.names)
                && Arc::ptr_eq(&self.inodes, &other.inodes))
                || self.same_inodes_but(other, except)
                || self
                    .names
                    .iter()
                    .zip(other.names.iter())
                    .all(|((a, a_inode), (b, b_inode))| {
                        a == b
                            && (except == Some(a.as_str())
                                || self.inodes[a_inode].current == other.inodes[b_inode].current)
                    }))
    }

    /// Whether the two disks' views are the same, proved cheaply where they are: the same
    /// names for the same inodes, and every inode but `except`'s with the same bytes, the
    /// two tables walked side by side (no lookup a file; a file two runs did not both write
    /// since they parted is one shared pointer). From the newest inode, where two runs'
    /// disks differ if they do. False proves nothing (an inode no name reaches, the same
    /// file under another inode): [`Disk::same_view_but`] then compares name by name. A
    /// sweep's point proves its restart the same as an earlier one's this way, over every
    /// file of a checkpoint chain hundreds long.
    fn same_inodes_but(&self, other: &Disk, except: Option<&str>) -> bool {
        if self.inodes.len() != other.inodes.len()
            || !(Arc::ptr_eq(&self.names, &other.names) || self.names == other.names)
        {
            return false;
        }
        let skipped = except.and_then(|name| self.names.get(name)).copied();
        self.inodes
            .iter()
            .rev()
            .zip(other.inodes.iter().rev())
            .all(|((a_id, a), (b_id, b))| {
                a_id == b_id && (Some(*a_id) == skipped || a.current == b.current)
            })
    }

    /// Whether the two disks go on alike through any operations and any fault, a power loss
    /// included: the same files under the same names, in the process's view and in the
    /// durable directory; each file with the same durable and current bytes, pending
    /// operations, unpersisted ranges and size in doubt; the same namespace operations
    /// pending, in the same order; and the files in the same order. Inode numbers are
    /// matched by rank, not compared: a run that made and removed more files than another
    /// numbers the same files higher, and a number decides nothing but the files' order
    /// (a power loss numbers its crash states over files in inode order, `power_loss.rs`;
    /// a new file takes a number above every kept one on both disks).
    /// A depth-2 sweep composes a second power loss from the fault-free run's only where the
    /// first fault's disk is alike with it so.
    pub fn alike_through_power_loss(&self, other: &Disk) -> bool {
        let same_shape = self.sector_size_bytes == other.sector_size_bytes
            && self.model == other.model
            && self.read_only == other.read_only
            && self.io_error_armed == other.io_error_armed
            && self.inodes.len() == other.inodes.len()
            && self.names.len() == other.names.len()
            && self.durable_names.len() == other.durable_names.len()
            && self.pending_dir_logged == other.pending_dir_logged;
        if !same_shape {
            return false;
        }
        assert_eq!(self.pending_dir.len(), self.pending_dir_logged.len());
        assert_eq!(other.pending_dir.len(), other.pending_dir_logged.len());
        // The other disk's inode of the same rank.
        let rank: BTreeMap<InodeId, InodeId> = self
            .inodes
            .keys()
            .copied()
            .zip(other.inodes.keys().copied())
            .collect();
        let same = |a: InodeId, b: InodeId| rank.get(&a) == Some(&b);
        let same_names = |a: &BTreeMap<String, InodeId>, b: &BTreeMap<String, InodeId>| {
            a.iter()
                .zip(b.iter())
                .all(|((a_name, a), (b_name, b))| a_name == b_name && same(*a, *b))
        };
        let same_op = |a: &DirOp, b: &DirOp| match (a, b) {
            (DirOp::Create { name, inode }, DirOp::Create { name: n, inode: i })
            | (DirOp::Unlink { name, inode }, DirOp::Unlink { name: n, inode: i }) => {
                name == n && same(*inode, *i)
            }
            (
                DirOp::Rename { from, to, inode },
                DirOp::Rename {
                    from: f,
                    to: t,
                    inode: i,
                },
            ) => from == f && to == t && same(*inode, *i),
            _ => false,
        };
        same_names(&self.names, &other.names)
            && same_names(&self.durable_names, &other.durable_names)
            && self
                .pending_dir
                .iter()
                .zip(&other.pending_dir)
                .all(|(a, b)| same_op(a, b))
            // From the newest, where two runs' disks differ if they do.
            && (Arc::ptr_eq(&self.inodes, &other.inodes)
                || self
                    .inodes
                    .values()
                    .rev()
                    .zip(other.inodes.values().rev())
                    .all(|(a, b)| a == b))
    }
}
