//! A simulated Kafka-like transactional log (one partition): transactional producers with
//! epochs and fencing, commit and abort markers, a transaction timeout, and the two consumer
//! views (read_committed up to the last stable offset, read_uncommitted).
//!
//! Model (Kafka's transactions, simplified to one partition, payloads opaque strings):
//! - **Log**: one append-only sequence of entries numbered from offset 0: data records and
//!   transaction markers (commit, abort). Markers take offsets, as in Kafka. Nothing is ever
//!   removed or rewritten; a transaction's outcome is decided by its marker.
//! - **Producers**: [`TxLog::init_producer`] registers a transactional id and returns a
//!   [`Producer`] with the id's new epoch (0 for the first registration, +1 for each one
//!   after). Registering an id again aborts that id's open transaction (an abort marker,
//!   reason [`AbortReason::Fenced`]) and **fences** every older epoch: a call with an older
//!   epoch returns [`LogError::Fenced`] and changes nothing. A zombie (the process that a
//!   restart replaced) can therefore never commit.
//! - **Transactions**: at most one open transaction per transactional id. [`TxLog::begin`]
//!   opens one, [`TxLog::send`] appends data records to it, [`TxLog::commit`] and
//!   [`TxLog::abort`] append its marker and end it. A transaction with no data records still
//!   gets its marker.
//! - **Resuming after a restart** (a two-phase-commit sink recovering a pre-committed
//!   transaction named by its checkpoint): [`TxLog::commit_resumed`] commits the transaction
//!   of a (transactional id, epoch) without a [`Producer`] handle, and is idempotent. It acts
//!   on the **latest** transaction begun under that (id, epoch), which is what Kafka's
//!   (producer id, epoch) names as well: a sink that runs several transactions under one
//!   epoch must give each checkpoint its own transactional id (as Flink's KafkaSink does),
//!   or a resume of an older checkpoint's transaction commits a newer one.
//! - **Transaction timeout** (`transaction_timeout_ms`): a transaction open for longer is
//!   aborted by the log (an abort marker, reason [`AbortReason::Timeout`]). The log has no
//!   clock of its own: every method that takes `now_ms` first calls [`TxLog::expire`], which
//!   aborts, in begin-time order (ties by transactional id), every open transaction with
//!   `now_ms - started_ms > transaction_timeout_ms`. The producer whose transaction timed
//!   out learns it once, as [`LogError::TransactionTimedOut`] from its next send, commit or
//!   abort (or [`TxLog::commit_resumed`] reports it as [`LogError::TransactionAborted`]).
//!   Time must not go backwards between calls (a violation is a bug in the caller).
//! - **Consumers**: the last stable offset (LSO) is the offset of the first data record of
//!   the earliest open transaction that has one, or the log end offset if there is none.
//!   [`TxLog::read_committed`] returns the data records of committed transactions below the
//!   LSO, in log order: an open transaction hides everything after its first record, even
//!   what other transactions committed since. [`TxLog::read_uncommitted`] returns every data
//!   record, aborted and open ones included, each with its transaction's status (a dirty
//!   read is a record whose status is not committed).
//!
//! Bounds: at most [`TXLOG_ENTRIES_MAX`] entries and [`TRANSACTIONAL_IDS_MAX`] transactional
//! ids; a transactional id is 1 to 255 bytes with no whitespace or control characters, so a
//! log line splits on spaces. A violation is a bug in the caller and panics. Every other
//! structure is bounded by these: there are at most as many transactions as markers plus
//! open transactions (one per id).

use std::collections::BTreeMap;
use std::fmt;
use std::fmt::Write as _;

/// The most entries (data records and markers) a log holds.
pub const TXLOG_ENTRIES_MAX: usize = 1_000_000;
/// The most transactional ids a log registers.
pub const TRANSACTIONAL_IDS_MAX: usize = 10_000;
const TRANSACTIONAL_ID_LEN_MAX_BYTES: usize = 255;

/// A registered transactional producer: the handle every transactional call takes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Producer {
    pub transactional_id: String,
    pub epoch: u32,
}

impl fmt::Display for Producer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} e{}", self.transactional_id, self.epoch)
    }
}

/// Where a transaction stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TxnStatus {
    Open,
    Committed,
    Aborted,
}

impl fmt::Display for TxnStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TxnStatus::Open => "open",
            TxnStatus::Committed => "committed",
            TxnStatus::Aborted => "aborted",
        })
    }
}

/// Why a transaction was aborted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum AbortReason {
    /// Its producer called [`TxLog::abort`].
    Requested,
    /// It was open longer than the transaction timeout.
    Timeout,
    /// Its transactional id was registered again, with epoch `by_epoch`.
    Fenced { by_epoch: u32 },
}

impl fmt::Display for AbortReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AbortReason::Requested => f.write_str("requested"),
            AbortReason::Timeout => f.write_str("timeout"),
            AbortReason::Fenced { by_epoch } => write!(f, "fenced by e{by_epoch}"),
        }
    }
}

/// What an entry of the log is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryKind {
    Data { payload: String },
    Commit,
    Abort { reason: AbortReason },
}

/// One entry of the raw log: a data record or a transaction marker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogEntry {
    pub offset: u64,
    pub transactional_id: String,
    pub epoch: u32,
    pub kind: EntryKind,
    /// Simulated time the entry was appended (for visibility delays).
    pub at_ms: u64,
}

/// One line, e.g. `7 data keel-sink e2 "{\"w\":1}"`, `8 commit keel-sink e2`,
/// `9 abort keel-sink e1 (timeout)`. The payload is quoted with `"` and `\` escaped and
/// control characters written as `\n`, `\r`, `\t` or `\u{..}`, by this file's rules (not
/// `Debug`), so the line is the same on every Rust version.
impl fmt::Display for LogEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let LogEntry {
            offset,
            transactional_id,
            epoch,
            kind,
            at_ms: _,
        } = self;
        match kind {
            EntryKind::Data { payload } => {
                write!(f, "{offset} data {transactional_id} e{epoch} ")?;
                write_quoted(f, payload)
            }
            EntryKind::Commit => write!(f, "{offset} commit {transactional_id} e{epoch}"),
            EntryKind::Abort { reason } => {
                write!(f, "{offset} abort {transactional_id} e{epoch} ({reason})")
            }
        }
    }
}

fn write_quoted(f: &mut fmt::Formatter<'_>, text: &str) -> fmt::Result {
    f.write_char('"')?;
    for c in text.chars() {
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            '\n' => f.write_str("\\n")?,
            '\r' => f.write_str("\\r")?,
            '\t' => f.write_str("\\t")?,
            c if c.is_control() => write!(f, "\\u{{{:x}}}", u32::from(c))?,
            c => f.write_char(c)?,
        }
    }
    f.write_char('"')
}

/// A data record as a consumer sees it, with its transaction's status at the time of the read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogRecord {
    pub offset: u64,
    pub transactional_id: String,
    pub epoch: u32,
    pub payload: String,
    pub status: TxnStatus,
}

/// An open transaction, for reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenTransaction {
    pub transactional_id: String,
    pub epoch: u32,
    pub started_ms: u64,
    /// The offset of its first data record: the LSO if this is the earliest such transaction.
    pub first_offset: Option<u64>,
    pub records: u64,
}

impl fmt::Display for OpenTransaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} e{} open since t={}ms, {} records",
            self.transactional_id, self.epoch, self.started_ms, self.records
        )?;
        if let Some(first_offset) = self.first_offset {
            write!(f, " from offset {first_offset}")?;
        }
        Ok(())
    }
}

/// What [`TxLog::commit_resumed`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResumeOutcome {
    /// The transaction was open; it is committed now.
    Committed,
    /// The transaction had been committed already; nothing changed.
    AlreadyCommitted,
}

/// A transactional call the log refused. A refused call changes nothing in the log, except
/// that [`LogError::TransactionTimedOut`] is reported only once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogError {
    /// `epoch` is older than the id's current epoch: the id was registered again since.
    Fenced {
        transactional_id: String,
        epoch: u32,
        current_epoch: u32,
    },
    /// The id was never registered (`current_epoch` is `None`), or `epoch` was never issued.
    UnknownProducer {
        transactional_id: String,
        epoch: u32,
        current_epoch: Option<u32>,
    },
    TransactionAlreadyOpen {
        transactional_id: String,
        epoch: u32,
        started_ms: u64,
    },
    NoOpenTransaction {
        transactional_id: String,
        epoch: u32,
    },
    /// The producer's open transaction (begun at `started_ms`) was aborted by the log after
    /// the transaction timeout; the producer has no open transaction now.
    TransactionTimedOut {
        transactional_id: String,
        epoch: u32,
        started_ms: u64,
        transaction_timeout_ms: u64,
    },
    /// [`TxLog::commit_resumed`]: the transaction was aborted, it cannot be committed.
    TransactionAborted {
        transactional_id: String,
        epoch: u32,
        reason: AbortReason,
    },
}

impl fmt::Display for LogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LogError::Fenced {
                transactional_id,
                epoch,
                current_epoch,
            } => write!(
                f,
                "producer {transactional_id} e{epoch} is fenced: \
                 {transactional_id} was registered again with e{current_epoch}"
            ),
            LogError::UnknownProducer {
                transactional_id,
                epoch,
                current_epoch: None,
            } => write!(
                f,
                "producer {transactional_id} e{epoch}: transactional id {transactional_id} \
                 is not registered"
            ),
            LogError::UnknownProducer {
                transactional_id,
                epoch,
                current_epoch: Some(current_epoch),
            } => write!(
                f,
                "producer {transactional_id} e{epoch}: epoch never issued \
                 (current epoch of {transactional_id} is e{current_epoch})"
            ),
            LogError::TransactionAlreadyOpen {
                transactional_id,
                epoch,
                started_ms,
            } => write!(
                f,
                "producer {transactional_id} e{epoch} already has a transaction open \
                 (begun at t={started_ms}ms)"
            ),
            LogError::NoOpenTransaction {
                transactional_id,
                epoch,
            } => write!(
                f,
                "producer {transactional_id} e{epoch} has no open transaction"
            ),
            LogError::TransactionTimedOut {
                transactional_id,
                epoch,
                started_ms,
                transaction_timeout_ms,
            } => write!(
                f,
                "the transaction of {transactional_id} e{epoch} begun at t={started_ms}ms was \
                 aborted by the log after the transaction timeout of {transaction_timeout_ms}ms"
            ),
            LogError::TransactionAborted {
                transactional_id,
                epoch,
                reason,
            } => write!(
                f,
                "the transaction of {transactional_id} e{epoch} was aborted ({reason}); \
                 it cannot be committed"
            ),
        }
    }
}

impl std::error::Error for LogError {}

/// One transaction, open or ended.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Transaction {
    transactional_id: String,
    epoch: u32,
    started_ms: u64,
    first_offset: Option<u64>,
    records: u64,
    status: TxnStatus,
    abort_reason: Option<AbortReason>,
}

/// Index into `TxLog::transactions`.
type TxnIndex = usize;

/// What the log knows about one transactional id.
#[derive(Clone, Debug, PartialEq, Eq)]
struct IdState {
    current_epoch: u32,
    open: Option<TxnIndex>,
    /// A transaction of the current epoch that the timeout aborted and whose producer has
    /// not been told yet.
    timed_out: Option<TxnIndex>,
}

/// The simulated transactional log. A plain value: cloning it forks it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxLog {
    transaction_timeout_ms: u64,
    /// The latest `now_ms` any call passed: time must not go backwards.
    now_ms: u64,
    entries: Vec<LogEntry>,
    /// Per entry (same length as `entries`): the transaction it belongs to.
    entry_txns: Vec<TxnIndex>,
    /// Every transaction ever begun, in begin order.
    transactions: Vec<Transaction>,
    ids: BTreeMap<String, IdState>,
    /// Per (transactional id, epoch): the latest transaction begun under it.
    latest_txns: BTreeMap<(String, u32), TxnIndex>,
}

impl TxLog {
    pub fn new(transaction_timeout_ms: u64) -> Self {
        TxLog {
            transaction_timeout_ms,
            now_ms: 0,
            entries: Vec::new(),
            entry_txns: Vec::new(),
            transactions: Vec::new(),
            ids: BTreeMap::new(),
            latest_txns: BTreeMap::new(),
        }
    }

    pub fn transaction_timeout_ms(&self) -> u64 {
        self.transaction_timeout_ms
    }

    /// Registers `transactional_id` (again): bumps its epoch, aborts its open transaction and
    /// fences every older epoch.
    pub fn init_producer(&mut self, transactional_id: &str, now_ms: u64) -> Producer {
        assert!(!transactional_id.is_empty());
        assert!(transactional_id.len() <= TRANSACTIONAL_ID_LEN_MAX_BYTES);
        assert!(!transactional_id
            .chars()
            .any(|c| c.is_whitespace() || c.is_control()));
        self.expire(now_ms);
        let Some(state) = self.ids.get(transactional_id) else {
            assert!(self.ids.len() < TRANSACTIONAL_IDS_MAX);
            self.ids.insert(
                transactional_id.to_string(),
                IdState {
                    current_epoch: 0,
                    open: None,
                    timed_out: None,
                },
            );
            return Producer {
                transactional_id: transactional_id.to_string(),
                epoch: 0,
            };
        };
        let epoch = state
            .current_epoch
            .checked_add(1)
            .expect("producer epoch overflowed u32");
        if let Some(txn) = state.open {
            self.end_aborted(txn, AbortReason::Fenced { by_epoch: epoch });
        }
        let state = self
            .ids
            .get_mut(transactional_id)
            .expect("the id is registered");
        state.current_epoch = epoch;
        state.open = None;
        state.timed_out = None;
        Producer {
            transactional_id: transactional_id.to_string(),
            epoch,
        }
    }

    /// Opens a transaction for `producer`.
    pub fn begin(&mut self, producer: &Producer, now_ms: u64) -> Result<(), LogError> {
        self.expire(now_ms);
        self.check_producer(producer)?;
        let state = self.id_state_mut(&producer.transactional_id);
        // Beginning a new transaction: a timeout of the previous one is no longer news.
        state.timed_out = None;
        if let Some(txn) = state.open {
            return Err(LogError::TransactionAlreadyOpen {
                transactional_id: producer.transactional_id.clone(),
                epoch: producer.epoch,
                started_ms: self.transactions[txn].started_ms,
            });
        }
        let txn = self.transactions.len();
        self.transactions.push(Transaction {
            transactional_id: producer.transactional_id.clone(),
            epoch: producer.epoch,
            started_ms: now_ms,
            first_offset: None,
            records: 0,
            status: TxnStatus::Open,
            abort_reason: None,
        });
        self.id_state_mut(&producer.transactional_id).open = Some(txn);
        self.latest_txns
            .insert((producer.transactional_id.clone(), producer.epoch), txn);
        Ok(())
    }

    /// Appends a data record to `producer`'s open transaction; returns its offset.
    pub fn send(
        &mut self,
        producer: &Producer,
        payload: &str,
        now_ms: u64,
    ) -> Result<u64, LogError> {
        let txn = self.open_txn_of(producer, now_ms)?;
        let offset = self.append(
            txn,
            EntryKind::Data {
                payload: payload.to_string(),
            },
        );
        let transaction = &mut self.transactions[txn];
        transaction.first_offset.get_or_insert(offset);
        transaction.records += 1;
        Ok(offset)
    }

    /// Commits `producer`'s open transaction: appends a commit marker; returns its offset.
    pub fn commit(&mut self, producer: &Producer, now_ms: u64) -> Result<u64, LogError> {
        let txn = self.open_txn_of(producer, now_ms)?;
        Ok(self.end(txn, None))
    }

    /// Aborts `producer`'s open transaction: appends an abort marker; returns its offset.
    pub fn abort(&mut self, producer: &Producer, now_ms: u64) -> Result<u64, LogError> {
        let txn = self.open_txn_of(producer, now_ms)?;
        Ok(self.end_aborted(txn, AbortReason::Requested))
    }

    /// Commits the latest transaction begun under (`transactional_id`, `epoch`) without a
    /// producer handle, as a process restarted from a checkpoint that names it does.
    /// Idempotent: a transaction already committed gives [`ResumeOutcome::AlreadyCommitted`].
    /// An aborted one gives [`LogError::TransactionAborted`] (with why), a stale epoch
    /// without any transaction [`LogError::Fenced`], the current epoch without any
    /// transaction [`LogError::NoOpenTransaction`].
    pub fn commit_resumed(
        &mut self,
        transactional_id: &str,
        epoch: u32,
        now_ms: u64,
    ) -> Result<ResumeOutcome, LogError> {
        self.expire(now_ms);
        let Some(state) = self.ids.get(transactional_id) else {
            return Err(LogError::UnknownProducer {
                transactional_id: transactional_id.to_string(),
                epoch,
                current_epoch: None,
            });
        };
        let current_epoch = state.current_epoch;
        if epoch > current_epoch {
            return Err(LogError::UnknownProducer {
                transactional_id: transactional_id.to_string(),
                epoch,
                current_epoch: Some(current_epoch),
            });
        }
        let key = (transactional_id.to_string(), epoch);
        let Some(&txn) = self.latest_txns.get(&key) else {
            return Err(if epoch < current_epoch {
                LogError::Fenced {
                    transactional_id: transactional_id.to_string(),
                    epoch,
                    current_epoch,
                }
            } else {
                LogError::NoOpenTransaction {
                    transactional_id: transactional_id.to_string(),
                    epoch,
                }
            });
        };
        let transaction = &self.transactions[txn];
        match transaction.status {
            TxnStatus::Committed => Ok(ResumeOutcome::AlreadyCommitted),
            TxnStatus::Aborted => {
                let reason = transaction
                    .abort_reason
                    .expect("an aborted transaction has a reason");
                let state = self.id_state_mut(transactional_id);
                if state.timed_out == Some(txn) {
                    // Reported here: the producer is not told a second time.
                    state.timed_out = None;
                }
                Err(LogError::TransactionAborted {
                    transactional_id: transactional_id.to_string(),
                    epoch,
                    reason,
                })
            }
            TxnStatus::Open => {
                // Registering the id again aborts its open transaction: an open one is current.
                assert_eq!(epoch, current_epoch);
                self.end(txn, None);
                Ok(ResumeOutcome::Committed)
            }
        }
    }

    /// Aborts every transaction open longer than the transaction timeout at `now_ms`, in
    /// begin-time order (ties by transactional id); returns the abort markers appended.
    pub fn expire(&mut self, now_ms: u64) -> Vec<LogEntry> {
        assert!(now_ms >= self.now_ms, "time went backwards");
        self.now_ms = now_ms;
        // `ids` iterates in id order and the sort is stable: ties stay in id order.
        let mut expired: Vec<(u64, TxnIndex)> = Vec::new();
        for state in self.ids.values() {
            if let Some(txn) = state.open {
                let started_ms = self.transactions[txn].started_ms;
                if now_ms - started_ms > self.transaction_timeout_ms {
                    expired.push((started_ms, txn));
                }
            }
        }
        expired.sort_by_key(|&(started_ms, _)| started_ms);
        let mut markers = Vec::with_capacity(expired.len());
        for (_, txn) in expired {
            let offset = self.end_aborted(txn, AbortReason::Timeout);
            let transactional_id = self.transactions[txn].transactional_id.clone();
            self.id_state_mut(&transactional_id).timed_out = Some(txn);
            markers.push(self.entries[offset_index(offset)].clone());
        }
        markers
    }

    /// The offset of the first data record of the earliest open transaction that has one, or
    /// the log end offset: read_committed sees nothing at or after it.
    pub fn last_stable_offset(&self) -> u64 {
        self.ids
            .values()
            .filter_map(|state| state.open)
            .filter_map(|txn| self.transactions[txn].first_offset)
            .min()
            .unwrap_or_else(|| self.log_end_offset())
    }

    /// The offset the next entry will get (= the number of entries).
    pub fn log_end_offset(&self) -> u64 {
        self.entries.len() as u64
    }

    /// The data records of committed transactions below the last stable offset, in log order
    /// (Kafka's `isolation.level=read_committed`).
    pub fn read_committed(&self) -> Vec<LogRecord> {
        let lso = self.last_stable_offset();
        self.records()
            .filter(|record| record.offset < lso)
            .filter(|record| record.status == TxnStatus::Committed)
            .collect()
    }

    /// Every data record in log order, aborted and open ones included, each with its
    /// transaction's status (Kafka's `isolation.level=read_uncommitted`).
    pub fn read_uncommitted(&self) -> Vec<LogRecord> {
        self.records().collect()
    }

    /// The open transactions, in begin-time order (ties by transactional id).
    pub fn open_transactions(&self) -> Vec<OpenTransaction> {
        let mut open: Vec<OpenTransaction> = self
            .ids
            .values()
            .filter_map(|state| state.open)
            .map(|txn| {
                let transaction = &self.transactions[txn];
                OpenTransaction {
                    transactional_id: transaction.transactional_id.clone(),
                    epoch: transaction.epoch,
                    started_ms: transaction.started_ms,
                    first_offset: transaction.first_offset,
                    records: transaction.records,
                }
            })
            .collect();
        open.sort_by_key(|transaction| transaction.started_ms);
        open
    }

    /// The raw log: data records and markers, in offset order (offset = index).
    pub fn entries(&self) -> &[LogEntry] {
        &self.entries
    }

    /// The current epoch of `transactional_id`, if it is registered.
    pub fn current_epoch(&self, transactional_id: &str) -> Option<u32> {
        self.ids
            .get(transactional_id)
            .map(|state| state.current_epoch)
    }

    fn records(&self) -> impl Iterator<Item = LogRecord> + '_ {
        self.entries
            .iter()
            .zip(&self.entry_txns)
            .filter_map(|(entry, &txn)| match &entry.kind {
                EntryKind::Data { payload } => Some(LogRecord {
                    offset: entry.offset,
                    transactional_id: entry.transactional_id.clone(),
                    epoch: entry.epoch,
                    payload: payload.clone(),
                    status: self.transactions[txn].status,
                }),
                EntryKind::Commit | EntryKind::Abort { .. } => None,
            })
    }

    /// Checks that `producer` is the current epoch of a registered id.
    fn check_producer(&self, producer: &Producer) -> Result<(), LogError> {
        let Some(state) = self.ids.get(&producer.transactional_id) else {
            return Err(LogError::UnknownProducer {
                transactional_id: producer.transactional_id.clone(),
                epoch: producer.epoch,
                current_epoch: None,
            });
        };
        if producer.epoch < state.current_epoch {
            return Err(LogError::Fenced {
                transactional_id: producer.transactional_id.clone(),
                epoch: producer.epoch,
                current_epoch: state.current_epoch,
            });
        }
        if producer.epoch > state.current_epoch {
            return Err(LogError::UnknownProducer {
                transactional_id: producer.transactional_id.clone(),
                epoch: producer.epoch,
                current_epoch: Some(state.current_epoch),
            });
        }
        Ok(())
    }

    /// Expires, checks `producer`, reports a timeout once; returns its open transaction.
    fn open_txn_of(&mut self, producer: &Producer, now_ms: u64) -> Result<TxnIndex, LogError> {
        self.expire(now_ms);
        self.check_producer(producer)?;
        let transaction_timeout_ms = self.transaction_timeout_ms;
        let state = self
            .ids
            .get_mut(&producer.transactional_id)
            .expect("a checked producer is registered");
        if let Some(txn) = state.timed_out.take() {
            return Err(LogError::TransactionTimedOut {
                transactional_id: producer.transactional_id.clone(),
                epoch: producer.epoch,
                started_ms: self.transactions[txn].started_ms,
                transaction_timeout_ms,
            });
        }
        state.open.ok_or_else(|| LogError::NoOpenTransaction {
            transactional_id: producer.transactional_id.clone(),
            epoch: producer.epoch,
        })
    }

    fn id_state_mut(&mut self, transactional_id: &str) -> &mut IdState {
        self.ids
            .get_mut(transactional_id)
            .expect("the id is registered")
    }

    /// Appends an entry of transaction `txn`; returns its offset.
    fn append(&mut self, txn: TxnIndex, kind: EntryKind) -> u64 {
        assert!(self.entries.len() < TXLOG_ENTRIES_MAX);
        let transaction = &self.transactions[txn];
        let offset = self.log_end_offset();
        self.entries.push(LogEntry {
            offset,
            transactional_id: transaction.transactional_id.clone(),
            epoch: transaction.epoch,
            kind,
            at_ms: self.now_ms,
        });
        self.entry_txns.push(txn);
        offset
    }

    /// Ends open transaction `txn` with a marker: a commit if `abort_reason` is `None`.
    /// Returns the marker's offset.
    fn end(&mut self, txn: TxnIndex, abort_reason: Option<AbortReason>) -> u64 {
        assert_eq!(self.transactions[txn].status, TxnStatus::Open);
        let (kind, status) = match abort_reason {
            None => (EntryKind::Commit, TxnStatus::Committed),
            Some(reason) => (EntryKind::Abort { reason }, TxnStatus::Aborted),
        };
        let offset = self.append(txn, kind);
        let transaction = &mut self.transactions[txn];
        transaction.status = status;
        transaction.abort_reason = abort_reason;
        let transactional_id = transaction.transactional_id.clone();
        let state = self.id_state_mut(&transactional_id);
        assert_eq!(state.open, Some(txn));
        state.open = None;
        offset
    }

    fn end_aborted(&mut self, txn: TxnIndex, reason: AbortReason) -> u64 {
        self.end(txn, Some(reason))
    }
}

fn offset_index(offset: u64) -> usize {
    usize::try_from(offset).expect("an offset below TXLOG_ENTRIES_MAX fits in usize")
}

#[cfg(test)]
mod tests;
