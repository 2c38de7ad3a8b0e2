//! A channel between two tasks: a bounded FIFO queue of items.
//!
//! A producer may put items on a channel only while it has room for what one action puts
//! there (at most two items: an event and its watermark; a window operator's action, the
//! records one watermark fires, may pass the capacity by those, never more: the bound is
//! capacity plus the windows of one operator). An unaligned barrier is put at the front,
//! overtaking the queue; the overtaken items stay queued behind it, and a copy goes to the
//! producer, which stores it in its snapshot (what a recovery puts back on the channel).
//!
//! A slow delivery (`Fault::SlowDelivery`, applied by `World::message`) holds the channel
//! from one position: the item there and every item behind it become visible to the
//! consumer only at a given simulated time (FIFO: nothing overtakes a held item but an
//! unaligned barrier, which overtakes the whole queue as it always does). A hold lives in
//! memory like the items, and a crash drops it with them. At most one hold a step that
//! delivered into the channel, each removed when its item is taken: bounded by the queue.

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
    /// Slow deliveries: the item at `position` in the queue and those behind it are
    /// visible from `until_ms` on. In position order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holds: Vec<Hold>,
}

/// A slow delivery's hold on a channel (see the module header).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Hold {
    pub position: u32,
    pub until_ms: u64,
}

impl Channel {
    pub fn new(capacity: u32) -> Channel {
        assert!(capacity >= 2);
        Channel {
            queue: VecDeque::new(),
            capacity,
            holds: Vec::new(),
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
        let at = self.overtake_position();
        let overtaken: Vec<Item> = self.queue.iter().skip(at).cloned().collect();
        self.queue.insert(at, barrier);
        // The held items moved back by one; the barrier is not held by their holds.
        for hold in &mut self.holds {
            if hold.position as usize >= at {
                hold.position += 1;
            }
        }
        overtaken
    }

    /// Where an unaligned barrier goes: the front, but never before an older barrier (one of
    /// a declined checkpoint).
    pub fn overtake_position(&self) -> usize {
        self.queue
            .iter()
            .rposition(|item| matches!(item, Item::Barrier { .. }))
            .map_or(0, |last| last + 1)
    }

    /// The head, held or not.
    pub fn head(&self) -> Option<&Item> {
        self.queue.front()
    }

    /// The head, if its consumer can see it at `now_ms` (no slow delivery holds it).
    pub fn visible_head(&self, now_ms: u64) -> Option<&Item> {
        self.held_until_ms(now_ms)
            .is_none()
            .then(|| self.queue.front())
            .flatten()
    }

    /// When the held head becomes visible, if a slow delivery holds it at `now_ms`.
    pub fn held_until_ms(&self, now_ms: u64) -> Option<u64> {
        self.holds
            .iter()
            .filter(|h| h.position == 0 && h.until_ms > now_ms)
            .map(|h| h.until_ms)
            .max()
    }

    /// Holds the item at `position` and every item behind it until `until_ms`.
    pub fn hold_from(&mut self, position: usize, until_ms: u64) {
        assert!(position < self.queue.len(), "a hold is on an item");
        let position = u32::try_from(position).expect("a bounded channel");
        self.holds.push(Hold { position, until_ms });
        self.holds
            .sort_unstable_by_key(|h| (h.position, h.until_ms));
    }

    /// Takes the head (the caller checked it is visible).
    pub fn pop(&mut self) -> Option<Item> {
        let item = self.queue.pop_front()?;
        self.holds.retain(|h| h.position > 0);
        for hold in &mut self.holds {
            hold.position -= 1;
        }
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wm(watermark: i64) -> Item {
        Item::Watermark { watermark }
    }

    #[test]
    fn a_hold_keeps_its_item_and_those_behind_it_until_its_time() {
        let mut channel = Channel::new(8);
        channel.push(wm(1));
        channel.push(wm(2));
        channel.hold_from(1, 50);
        channel.push(wm(3));
        // The item ahead of the hold is visible; the held one is not until t=50.
        assert_eq!(channel.visible_head(10), Some(&wm(1)));
        assert_eq!(channel.pop(), Some(wm(1)));
        assert_eq!(channel.visible_head(10), None);
        assert_eq!(channel.held_until_ms(10), Some(50));
        assert_eq!(channel.visible_head(50), Some(&wm(2)));
        assert_eq!(channel.pop(), Some(wm(2)));
        // Spent: the item behind it is visible at once.
        assert!(channel.holds.is_empty());
        assert_eq!(channel.visible_head(50), Some(&wm(3)));
    }

    #[test]
    fn an_unaligned_barrier_overtakes_held_items_and_a_held_barrier_holds_what_it_overtook() {
        let mut channel = Channel::new(8);
        channel.push(wm(1));
        channel.hold_from(0, 40);
        let at = channel.overtake_position();
        let overtaken = channel.overtake(Item::Barrier { checkpoint: 1 });
        assert_eq!(overtaken, vec![wm(1)]);
        assert_eq!(at, 0);
        // The barrier is not held; the item it overtook still is.
        assert_eq!(
            channel.visible_head(0),
            Some(&Item::Barrier { checkpoint: 1 })
        );
        channel.pop();
        assert_eq!(channel.visible_head(39), None);
        assert_eq!(channel.visible_head(40), Some(&wm(1)));
        // A held barrier (its delivery slow) holds what it overtook too: FIFO.
        let mut slow = Channel::new(8);
        slow.push(wm(1));
        let at = slow.overtake_position();
        slow.overtake(Item::Barrier { checkpoint: 1 });
        slow.hold_from(at, 30);
        assert_eq!(slow.visible_head(29), None);
        assert_eq!(slow.held_until_ms(29), Some(30));
    }
}
