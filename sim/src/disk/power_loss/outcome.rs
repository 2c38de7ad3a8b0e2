//! What a power loss chose, file by file and for the directory, as a trace shows it.

use super::PowerLossStates;
use num_bigint::BigUint;
use std::fmt;

/// At most this many details (torn sectors, undone operations) per part of a description.
const DESCRIPTION_DETAILS_MAX: usize = 4;

/// What became of one sector piece of a pending write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PieceFate {
    Lost,
    /// Only the first `kept_bytes` of the piece's new bytes reached the disk.
    Torn {
        kept_bytes: u64,
    },
    Kept,
}

/// One sector piece of a pending write and its fate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PieceOutcome {
    /// Which of the file's pending writes (0 = the first one issued) the piece belongs to.
    pub write_index: usize,
    /// The sector of the file the piece lies in (its offset divided by the sector size).
    pub sector: u64,
    pub offset_bytes: u64,
    pub len_bytes: u64,
    pub fate: PieceFate,
}

/// What became of a grown file's new size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeFate {
    /// The file did not grow: there was no choice to make.
    Unchanged,
    Lost,
    Kept,
}

/// What a power loss did to one file with pending data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileOutcome {
    /// The file's name as the process last saw it (else a name it had, else `inode N`).
    pub name: String,
    /// The pending writes with at least one byte, and how many kept at least a piece.
    pub writes_total: usize,
    pub writes_kept: usize,
    /// Every sector piece of those writes, in numbering order.
    pub pieces: Vec<PieceOutcome>,
    pub truncates_total: usize,
    pub truncates_kept: usize,
    pub size: SizeFate,
    /// The file's length after the power loss.
    pub len_bytes: u64,
    /// Whether a surviving name still reaches the file (if not, it is gone).
    pub reachable: bool,
    /// Bytes a failed fsync had left unpersisted: lost, whatever the choices.
    pub unpersisted_lost_bytes: u64,
    /// Bytes of the file's new length that no surviving write wrote and that read as stale
    /// data ([`STALE_BYTE`]) instead of zeros (xfs only).
    pub stale_bytes: u64,
    /// What became of the size a failed fsync's writes gave the file (xfs, posix: rule 5):
    /// `Unchanged` when there was no choice, `Lost` when the file is back at its size before
    /// that fsync.
    pub failed_fsync_size: SizeFate,
}

/// What a power loss did to the directory's pending namespace operations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirOutcome {
    pub ops_total: usize,
    /// How many operations survived: the first `ops_kept` of them, unless an fsync logged
    /// some out of order (btrfs, posix; then `undone` says which were lost).
    pub ops_kept: usize,
    /// The operations undone, in issue order, e.g. `rename a -> b`.
    pub undone: Vec<String>,
}

/// The crash state a power loss chose, for a trace to show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PowerLossOutcome {
    /// The state number: an index when `seeded` is false, else a seed.
    pub state: u64,
    pub states: PowerLossStates,
    /// Whether there were too many states to enumerate, so that `state` was used as a seed.
    pub seeded: bool,
    /// Set when the disk was resolved to a class of crash states ([`super::PowerLossClasses`]),
    /// not to one state: then `state` is the class number and the disk is its representative.
    pub class: Option<ClassOutcome>,
    /// The files that had pending data or a failed fsync, in inode order.
    pub files: Vec<FileOutcome>,
    pub dir: DirOutcome,
}

/// The class of crash states a power loss resolved to, and how many states it stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassOutcome {
    /// The classes at that step.
    pub classes: u64,
    /// The crash states in this class.
    pub states: BigUint,
    /// The crash states at that step, in every class.
    pub states_total: BigUint,
}

impl fmt::Display for PowerLossOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(class) = &self.class {
            write!(
                f,
                "class {}/{} ({} of {} states):",
                self.state, class.classes, class.states, class.states_total
            )?;
        } else if self.seeded {
            write!(f, "seed {} of {} states:", self.state, self.states)?;
        } else {
            write!(f, "state {}/{}:", self.state, self.states)?;
        }
        let mut parts: Vec<String> = self.files.iter().map(describe_file).collect();
        if self.dir.ops_total > 0 {
            let mut part = format!("dir: {}/{} ops kept", self.dir.ops_kept, self.dir.ops_total);
            if !self.dir.undone.is_empty() {
                part.push_str(&format!(" (undone: {})", capped_list(&self.dir.undone)));
            }
            parts.push(part);
        }
        if parts.is_empty() {
            return write!(f, " nothing pending");
        }
        write!(f, " {}", parts.join("; "))
    }
}

fn describe_file(file: &FileOutcome) -> String {
    let mut facts: Vec<String> = Vec::new();
    if file.writes_total > 0 {
        let mut fact = format!("{}/{} writes kept", file.writes_kept, file.writes_total);
        let details = piece_details(file);
        if !details.is_empty() {
            fact.push_str(&format!(" ({})", capped_list(&details)));
        }
        facts.push(fact);
    }
    if file.truncates_total > 0 {
        facts.push(format!(
            "{}/{} truncates kept",
            file.truncates_kept, file.truncates_total
        ));
    }
    match file.size {
        SizeFate::Unchanged => {}
        SizeFate::Lost => facts.push("size lost".to_string()),
        SizeFate::Kept => facts.push("size kept".to_string()),
    }
    if file.stale_bytes > 0 {
        facts.push(format!("{} stale bytes", file.stale_bytes));
    }
    match file.failed_fsync_size {
        SizeFate::Unchanged => {}
        SizeFate::Lost => facts.push("failed fsync's size lost".to_string()),
        SizeFate::Kept => facts.push("failed fsync's size kept".to_string()),
    }
    if file.unpersisted_lost_bytes > 0 {
        facts.push(format!(
            "{} unpersisted bytes lost",
            file.unpersisted_lost_bytes
        ));
    }
    if !file.reachable {
        facts.push("no name survived".to_string());
    }
    format!("{}: {}", file.name, facts.join(", "))
}

/// The torn pieces, and the lost pieces of writes that kept another piece.
fn piece_details(file: &FileOutcome) -> Vec<String> {
    let write_survived = |write_index: usize| {
        file.pieces
            .iter()
            .any(|p| p.write_index == write_index && p.fate != PieceFate::Lost)
    };
    let mut details = Vec::new();
    for piece in &file.pieces {
        let at = if file.writes_total > 1 {
            format!("write {} sector {}", piece.write_index, piece.sector)
        } else {
            format!("sector {}", piece.sector)
        };
        match piece.fate {
            PieceFate::Torn { kept_bytes } => {
                details.push(format!("{at} torn to {kept_bytes} bytes"));
            }
            PieceFate::Lost if write_survived(piece.write_index) => {
                details.push(format!("{at} lost"));
            }
            PieceFate::Lost | PieceFate::Kept => {}
        }
    }
    details
}

/// `items` joined by ", ", the tail past [`DESCRIPTION_DETAILS_MAX`] summed up as a count.
fn capped_list(items: &[String]) -> String {
    let shown = &items[..items.len().min(DESCRIPTION_DETAILS_MAX)];
    let mut list = shown.join(", ");
    if items.len() > shown.len() {
        list.push_str(&format!(", {} more", items.len() - shown.len()));
    }
    list
}
