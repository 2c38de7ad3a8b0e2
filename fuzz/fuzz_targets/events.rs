//! Fuzz target 1: arbitrary bytes as an events file (`--events FILE`).
//!
//! Whatever the bytes, `events_from_text` returns events or an error naming the file and a
//! line; it never panics. Events it accepts are within the stated range and a run of them on
//! the chapter's knobs completes.
#![no_main]

use keel_engine::event::{EVENTS_MAX, EVENT_INT_MAX, EVENT_INT_MIN};
use keel_scenarios::catalogue::events_from_text;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // keel reads events files a line at a time and refuses a line that is not UTF-8 by its
    // number (`keel_engine::event::json_lines`): the rest is this text's.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match events_from_text("fuzz.jsonl", text) {
        Ok(events) => {
            assert!(!events.is_empty() && events.len() <= EVENTS_MAX);
            for event in &events {
                assert!((EVENT_INT_MIN..=EVENT_INT_MAX).contains(&event.ts));
                assert!((EVENT_INT_MIN..=EVENT_INT_MAX).contains(&event.value));
            }
            // The same text parses the same way every time.
            assert_eq!(events_from_text("fuzz.jsonl", text).ok(), Some(events));
        }
        Err(error) => {
            assert_eq!(error.exit_code, 2);
            assert!(
                error.message.starts_with("fuzz.jsonl: line ")
                    || error.message == "no events in fuzz.jsonl",
                "{}",
                error.message
            );
        }
    }
});
