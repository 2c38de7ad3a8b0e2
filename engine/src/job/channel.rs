//! A channel between two tasks: a bounded FIFO queue of items.
//!
//! A producer may put items on a channel only while it has room for what one action puts
//! there (at most two items: an event and its watermark; a window operator's action, the
//! records one watermark fires, may pass the capacity by those, never more: the bound is
//! capacity plus the windows of one operator). An unaligned barrier is put at the front,
//! overtaking the queue; the overtaken items stay queued behind it, and a copy goes to the
//! producer, which stores it in its snapshot (what a recovery puts back on the channel).

use crate::job::keyed::JobRecord;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// What travels on a channel.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
// Externally tagged: an internally tagged enum buffers its fields, and the buffer has no
// i128 (a window sum).
#[serde(rename_all = "kebab-case")]
pub enum Item {
    /// An input event (source to operator): its key, time, value, and where it was read.
    Event {
        key: String,
        ts: i64,
        value: i64,
        partition: u32,
        offset: u64,
    },
    /// The producer's watermark moved here.
    Watermark { watermark: i64 },
    /// The producer's input ended.
    End,
    /// Checkpoint barrier n.
    Barrier { checkpoint: u64 },
    /// An output record (operator to sink).
    Record { record: JobRecord },
}

impl Item {
    /// A short text for the trace.
    pub fn describe(&self) -> String {
        match self {
            Item::Event {
                partition,
                offset,
                key,
                ..
            } if key.is_empty() => {
                format!("event {partition}:{offset}")
            }
            Item::Event {
                partition,
                offset,
                key,
                ..
            } => format!("event {partition}:{offset} key {key}"),
            Item::Watermark { watermark } => format!("watermark {watermark}"),
            Item::End => "end".to_string(),
            Item::Barrier { checkpoint } => format!("barrier {checkpoint}"),
            Item::Record { record } => {
                format!("record {}:{}#{}", record.key, record.window_end, record.seq)
            }
        }
    }
}

/// A bounded FIFO queue of items.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Channel {
    pub queue: VecDeque<Item>,
    pub capacity: u32,
}

impl Channel {
    pub fn new(capacity: u32) -> Channel {
        assert!(capacity >= 2);
        Channel {
            queue: VecDeque::new(),
            capacity,
        }
    }

    /// Whether `items` more fit.
    pub fn has_room(&self, items: usize) -> bool {
        self.queue.len() + items <= self.capacity as usize
    }

    pub fn push(&mut self, item: Item) {
        self.queue.push_back(item);
    }

    /// Puts `barrier` at the front and returns a copy of the items it overtook, in order
    /// (they stay queued behind it: the consumer still gets them, after its snapshot).
    pub fn overtake(&mut self, barrier: Item) -> Vec<Item> {
        assert!(matches!(barrier, Item::Barrier { .. }));
        // A barrier never overtakes an older barrier (one of a declined checkpoint).
        let at = self
            .queue
            .iter()
            .rposition(|item| matches!(item, Item::Barrier { .. }))
            .map_or(0, |last| last + 1);
        let overtaken: Vec<Item> = self.queue.iter().skip(at).cloned().collect();
        self.queue.insert(at, barrier);
        overtaken
    }

    pub fn head(&self) -> Option<&Item> {
        self.queue.front()
    }

    pub fn pop(&mut self) -> Option<Item> {
        self.queue.pop_front()
    }
}
