//! Fuzz target 3: what a process reads back from its disk after a power loss, on arbitrary
//! bytes: the checkpoint decoder and the sink-file readers.
//!
//! The first byte chooses the protocol, the sink and where the bytes go; the rest are the
//! bytes. Checked on every input: decoding never panics; the sink reader of the engine
//! (`readable_prefix_len_bytes`, which tail repair trusts) and the consumer's
//! (`file_sink_records`) agree on every line the engine keeps; a record read back prints
//! as the same line; and a whole run recovering from a disk that holds these bytes as a
//! checkpoint (optionally sealed with a valid header, so the body gets past the CRC) and as
//! the sink file ends, within its bounds, without a panic.
#![no_main]

use keel_engine::checkpoint::Checkpoint;
use keel_engine::sink::readable_prefix_len_bytes;
use keel_engine::{CheckpointProtocol, EngineConfig, Event, KeyScheme, Record, SinkKind};
use keel_scenarios::observation::{file_sink_records, Observation};
use keel_scenarios::runner::{run_on_disk, Outcome, RunSpec, RESTARTS_MAX};
use keel_sim::{Disk, FaultPlan};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, bytes)) = data.split_first() else {
        return;
    };
    for checksum in [false, true] {
        let _ = Checkpoint::decode_file(bytes, checksum);
    }
    let body = Checkpoint::decode_body(bytes);

    // The two sink readers agree on the lines the engine keeps.
    let (records, corrupt) = file_sink_records(bytes);
    let kept = readable_prefix_len_bytes(bytes);
    assert!(kept <= bytes.len());
    let kept_lines = bytes[..kept].iter().filter(|&&b| b == b'\n').count();
    let (kept_records, kept_corrupt) = file_sink_records(&bytes[..kept]);
    assert_eq!(kept_corrupt, 0, "a line the engine keeps is corrupt to the consumer");
    assert_eq!(kept_records.len(), kept_lines);
    assert_eq!(&records[..kept_lines], &kept_records[..]);
    assert!(records.len() as u64 + corrupt >= kept_lines as u64);
    for record in &records {
        assert_eq!(Record::parse_line(&record.to_json_line()).as_ref(), Some(record));
    }

    // Recovery from a disk holding these bytes.
    let protocol = CheckpointProtocol::ALL[usize::from(flags & 7)];
    let sink = SinkKind::ALL[usize::from(flags >> 3 & 3) % 3];
    let seal = flags & 0x20 != 0;
    let as_sink_file = flags & 0x40 != 0;
    let as_checkpoint = flags & 0x80 != 0 || !as_sink_file;
    let mut disk = Disk::new();
    if as_checkpoint {
        let name = if protocol.in_place() {
            keel_engine::engine::IN_PLACE_FILE.to_string()
        } else {
            Checkpoint::file_name(body.as_ref().map_or(8, |c| c.index))
        };
        let mut file = Vec::new();
        if seal {
            let header = if protocol.checksum() {
                format!(
                    "keel-checkpoint v1 len={} crc32={:08x}\n",
                    bytes.len(),
                    crc32(bytes)
                )
            } else {
                format!("keel-checkpoint v1 len={}\n", bytes.len())
            };
            file.extend_from_slice(header.as_bytes());
        }
        file.extend_from_slice(bytes);
        plant(&mut disk, &name, &file);
    }
    if as_sink_file && !sink.is_transactional() {
        plant(&mut disk, &sink.file_name(), bytes);
    }
    let events: Vec<Event> = (0..12)
        .map(|i| Event {
            ts: (i * 7) % 11,
            value: i + 1,
        })
        .collect();
    let config = EngineConfig {
        window_size: 5,
        out_of_orderness: 2,
        checkpoint_every: 4,
        sink,
        protocol,
        key: KeyScheme::EventIndex,
        event_interval_ms: 100,
        allowed_lateness: None,
        state_backend: keel_engine::StateBackend::Full,
    };
    let spec = RunSpec {
        events: events.into(),
        config,
        plan: FaultPlan::none(),
        seed: 0,
        restart_delay_ms: 500,
        sector_size_bytes: disk.sector_size_bytes(),
        fs_model: keel_sim::disk::FsModel::Posix,
        transaction_timeout_ms: 60_000,
    };
    let result = run_on_disk(&spec, disk);
    assert!(result.incarnations.len() <= RESTARTS_MAX as usize + 1);
    if result.outcome == Outcome::Completed {
        assert_eq!(
            result.incarnations.last().unwrap().stats.processed_upto_index,
            spec.events.len() as u64
        );
    }
    let _ = Observation::of(&result, &config);
});

fn plant(disk: &mut Disk, name: &str, bytes: &[u8]) {
    disk.create(name).unwrap();
    disk.write(name, 0, bytes).unwrap();
    disk.fsync(name).unwrap();
    disk.fsync_dir().unwrap();
}

/// CRC-32 (IEEE), as the checkpoint header carries it.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}
