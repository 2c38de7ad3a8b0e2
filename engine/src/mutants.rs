//! Deliberate engine bugs, one at a time, switched at run time: what keel's own claims are
//! tested against (a sweep's shortcuts must report for a buggy engine what running every
//! point from scratch reports; every property of the oracle must catch some bug).
//!
//! Only a build with the `mutants` feature carries them (`cargo build --features
//! keel-scenarios/mutants`); without it [`active`] is a constant `false` and every mutant
//! point compiles to the correct code. In such a build the `keel` binary reads the mutant's
//! name from `KEEL_MUTANT` once at start (`scripts/mutants-switchable.sh` runs them all);
//! nothing in a run changes it, so a run stays a function of its seed.

/// One deliberate bug.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mutant {
    /// Tail repair truncates the sink one byte short of its last whole line (`sink.rs`):
    /// the torn tail keeps a stray byte that swallows the next record.
    TailRepairShort,
    /// A full checkpoint restores every window but the newest (`engine/recovery.rs`): the
    /// recovery succeeds and the final windows are wrong.
    RestoreDropsWindow,
    /// The idempotent sink counts a record it skipped as written (`sink.rs`): the records
    /// the sink shows are right, its written/skipped split is not.
    SkipCountedAsWritten,
    /// A late event updates its fired window's sum but emits no late update
    /// (`window.rs`): the fault-free run disagrees with the model.
    LateUpdateDropped,
    /// An incremental delta leaves out the windows purged since its parent
    /// (`incremental.rs`): a recovery from it brings purged windows back.
    DeltaOmitsPurged,
    /// The append sink reads its whole file before each write and skips a record whose
    /// line it holds already (`sink.rs`): a dedup the append sink never promised, whose
    /// future depends on the file's bytes, which a sweep must then not leave out of a
    /// comparison of two runs.
    AppendSkipsLinesInFile,
}

impl Mutant {
    pub const ALL: [Mutant; 6] = [
        Mutant::TailRepairShort,
        Mutant::RestoreDropsWindow,
        Mutant::SkipCountedAsWritten,
        Mutant::LateUpdateDropped,
        Mutant::DeltaOmitsPurged,
        Mutant::AppendSkipsLinesInFile,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mutant::TailRepairShort => "tail-repair-short",
            Mutant::RestoreDropsWindow => "restore-drops-window",
            Mutant::SkipCountedAsWritten => "skip-counted-as-written",
            Mutant::LateUpdateDropped => "late-update-dropped",
            Mutant::DeltaOmitsPurged => "delta-omits-purged",
            Mutant::AppendSkipsLinesInFile => "append-skips-lines-in-file",
        }
    }

    /// The mutant named `name`, or an error listing the names.
    pub fn parse(name: &str) -> Result<Mutant, String> {
        Mutant::ALL
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Mutant::ALL.iter().map(|m| m.name()).collect();
                format!(
                    "unknown engine mutant '{name}' (known: {})",
                    names.join(", ")
                )
            })
    }
}

#[cfg(feature = "mutants")]
static ACTIVE: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Makes `mutant` the active one (None: the correct engine), for the whole process. Set once,
/// before the first run.
#[cfg(feature = "mutants")]
pub fn set(mutant: Option<Mutant>) {
    let code = mutant.map_or(0, |m| m as u8 + 1);
    ACTIVE.store(code, std::sync::atomic::Ordering::SeqCst);
}

/// Whether `mutant` is the active one: always false without the `mutants` feature.
#[inline]
pub fn active(mutant: Mutant) -> bool {
    #[cfg(feature = "mutants")]
    {
        ACTIVE.load(std::sync::atomic::Ordering::Relaxed) == mutant as u8 + 1
    }
    #[cfg(not(feature = "mutants"))]
    {
        let _ = mutant;
        false
    }
}
