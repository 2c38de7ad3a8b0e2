//! keel-sim: the simulated world a keel run lives in. It knows nothing about streams.
//!
//! Everything the system under test does to the outside world goes through [`World`]: each
//! effect is one numbered step with a [`Site`], checked against a [`FaultPlan`] before and
//! after it happens, and recorded in a [`Trace`] whose [`Fingerprint`] is stable across
//! machines and Rust versions. The world is a plain value: cloning it forks the simulation.

pub mod clock;
pub mod decimal;
pub mod digest;
pub mod disk;
pub mod fault;
pub mod rng;
pub mod schedule;
pub mod storage;
pub mod trace;
pub mod txlog;
pub mod world;

pub use clock::Clock;
pub use decimal::Decimal;
pub use digest::{fnv1a64, FileDigest};
pub use disk::{Contents, Disk, DiskError, CHUNK_BYTES};
pub use fault::{CrashPoint, Fault, FaultKind, FaultPlan, PlanError, PlannedFault};
pub use rng::{SeedTree, Subsystem};
pub use schedule::{SchedulePolicy, Scheduler};
pub use storage::Storage;
pub use trace::{hex16, input_line, Fingerprint, FingerprintBuilder, NoteText, Trace, TraceLine};
pub use txlog::{
    AbortReason, EntryKind, LogEntry, LogError, LogRecord, OpenTransaction, Producer,
    ResumeOutcome, TxLog, TxnStatus,
};
pub use world::{
    ClassesAt, ClassesMemo, Crash, CrashCounts, CrashKind, Data, Delivery, Env, FaultSite,
    RequestError, Resume, Sends, Served, Site, World, WrappedState,
};
