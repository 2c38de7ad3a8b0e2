//! The two-phase-commit sink, as Flink's TwoPhaseCommitSinkFunction / KafkaSink
//! EXACTLY_ONCE does it on a Kafka-like transactional log.
//!
//! One transaction per checkpoint interval, under the transactional id `keel-txn-<index>`
//! of the checkpoint it started after. On a checkpoint the current transaction is
//! pre-committed (its records are already sent: the flush is a no-op here) and recorded in
//! the checkpoint; only once the checkpoint is committed is the transaction committed and
//! the next one opened. Recovery commits every transaction the restored checkpoint recorded
//! (a commit of an already committed one is a no-op) and re-registers the id of the
//! transaction that followed it, which aborts whatever that transaction held and fences the
//! old process's producer. Any failed log request stops the engine (it is restarted and
//! recovers), as a failed send or commit fails a Flink job.

use crate::checkpoint::PendingTxn;
use crate::record::Record;
use crate::sink::SinkError;
use keel_sim::txlog::{LogError, Producer};
use keel_sim::{Data, Storage, World};

/// The engine's end of the two-phase-commit sink.
#[derive(Clone, Debug)]
pub struct TxSink {
    producer: Producer,
}

fn fatal(what: &str, error: impl std::fmt::Display) -> SinkError {
    SinkError::Fatal(format!("{what}: {error}"))
}

impl TxSink {
    /// Recovery: commit what the restored checkpoint pre-committed, then open the
    /// transaction that follows checkpoint `resume_index`.
    pub fn open<S: Storage>(
        world: &mut World<S>,
        restored: &[PendingTxn],
        resume_index: u64,
    ) -> Result<TxSink, SinkError> {
        for txn in restored {
            let target = format!("{} e{}", txn.id, txn.epoch);
            let reply = world.request("log.commit-resumed", target.clone(), |env| {
                let now_ms = env.clock.now_ms();
                env.txlog.commit_resumed(&txn.id, txn.epoch, now_ms)
            })?;
            match reply.map_err(|e| fatal("log.commit-resumed", e))? {
                Ok(outcome) => world.note(format!("recovery: commit {target}: {outcome:?}")),
                Err(error @ LogError::TransactionAborted { .. }) => world.note(format!(
                    "recovery: {error}: the records it held are lost (its checkpoint is committed, so they are never replayed)"
                )),
                Err(error) => return Err(fatal("log.commit-resumed", error)),
            }
        }
        let producer = Self::begin(world, resume_index)?;
        Ok(TxSink { producer })
    }

    /// Registers `keel-txn-<index>` (fencing any older producer of it) and begins.
    fn begin<S: Storage>(world: &mut World<S>, index: u64) -> Result<Producer, SinkError> {
        let id = format!("keel-txn-{index}");
        let producer = world
            .request("log.init-producer", id.clone(), |env| {
                let now_ms = env.clock.now_ms();
                env.txlog.init_producer(&id, now_ms)
            })?
            .map_err(|e| fatal("log.init-producer", e))?;
        let target = format!("{} e{}", producer.transactional_id, producer.epoch);
        world
            .request("log.begin", target, |env| {
                let now_ms = env.clock.now_ms();
                env.txlog.begin(&producer, now_ms)
            })?
            .map_err(|e| fatal("log.begin", e))?
            .map_err(|e| fatal("log.begin", e))?;
        Ok(producer)
    }

    /// Sends one record inside the current transaction.
    pub fn write<S: Storage>(
        &mut self,
        world: &mut World<S>,
        record: &Record,
        written: &mut u64,
    ) -> Result<(), SinkError> {
        let payload = record.to_json_line();
        let producer = &self.producer;
        world
            .request_data(
                "log.send",
                record.key.as_str(),
                Data::Bytes(payload.as_bytes()),
                |env| {
                    let now_ms = env.clock.now_ms();
                    let sent = env.txlog.send(producer, &payload, now_ms);
                    if sent.is_ok() {
                        *written += 1;
                    }
                    sent
                },
            )?
            .map_err(|e| fatal("log.send", e))?
            .map_err(|e| fatal("log.send", e))?;
        Ok(())
    }

    /// The transaction a checkpoint taken now pre-commits.
    pub fn pending(&self) -> PendingTxn {
        PendingTxn {
            id: self.producer.transactional_id.clone(),
            epoch: self.producer.epoch,
        }
    }

    /// After checkpoint `index` is committed: commit the transaction, then (unless this was
    /// the final checkpoint) open the next one.
    pub fn commit<S: Storage>(
        &mut self,
        world: &mut World<S>,
        index: u64,
        open_next: bool,
    ) -> Result<(), SinkError> {
        let producer = &self.producer;
        let target = format!("{} e{}", producer.transactional_id, producer.epoch);
        world
            .request("log.commit", target, |env| {
                let now_ms = env.clock.now_ms();
                env.txlog.commit(producer, now_ms)
            })?
            .map_err(|e| fatal("log.commit", e))?
            .map_err(|e| fatal("log.commit", e))?;
        if open_next {
            self.producer = Self::begin(world, index)?;
        }
        Ok(())
    }
}
