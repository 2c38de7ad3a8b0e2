//! keel-engine: the system under test, the chapter-04 stream engine (`fault_engine`).
//!
//! Tumbling event-time windows with a bounded-out-of-orderness watermark, a checkpoint every
//! K events, recovery from the newest checkpoint, and sink connectors. The engine reaches the
//! world only through `keel_sim::World` (generic over its `Storage`: the simulated disk or a
//! real directory): no std::fs, no threads, no wall clock.

pub mod chain_memo;
pub mod checkpoint;
pub mod checkpoint_memo;
pub mod encode_memo;
pub mod engine;
pub mod event;
pub mod incremental;
pub mod job;
pub mod known_sink;
pub mod mutants;
pub mod protocol;
pub mod recent;
pub mod record;
pub mod sink;
pub mod txsink;
pub mod window;
pub mod windows_map;

pub use chain_memo::ChainMemo;
pub use checkpoint::{Checkpoint, PendingTxn};
pub use checkpoint_memo::CheckpointMemo;
pub use encode_memo::EncodeMemo;
pub use engine::{
    Engine, EngineCaches, EngineConfig, EngineError, IncarnationStats, Interrupt, KeyScheme,
    IN_PLACE_FILE,
};
pub use event::{
    parse_events, read_events, Event, EventParseError, EVENT_INT_MAX, EVENT_INT_MIN,
    LINE_LEN_MAX_BYTES,
};
pub use known_sink::KnownSinkFile;
pub use protocol::{CheckpointProtocol, StateBackend};
pub use record::{Record, RecordKind};
pub use sink::{SinkKind, SINK_WRITE_OP};
pub use window::{format_windows, OperatorState, WindowState};
pub use windows_map::Windows;
