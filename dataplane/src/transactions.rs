//! The transactional mode's state machine (`Mover(transactional_id=...)`): its
//! arguments checked, then init, begin, commit with the source offsets of what the
//! transaction moved, and abort with every partition it read sought back.
//! `Transactional` holds the open transaction's reach (`txn::Txn`), the ledgers as
//! they were when it began, and what committed.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rdkafka::error::KafkaError;
use rdkafka::producer::{Producer, PurgeConfig};
use rdkafka::{Offset, TopicPartitionList};

use crate::clients::lock;
use crate::error::Error;
use crate::group::{self, TxnError};
use crate::ledger::{Ledger, Report};
use crate::move_loop::SEEK_TIMEOUT;
use crate::state::Inner;
use crate::txn::Txn;

/// How often a transaction's wait for its records asks whether the producer failed
/// fatally (fenced, most often).
const FATAL_CHECK_EVERY: Duration = Duration::from_millis(100);

/// The transactional mode's state: the open transaction's reach, the ledgers as
/// they were when it began (restored by an abort), and what committed (reported by
/// `progress` instead of what was merely acked).
pub struct Transactional {
    pub offsets_group: Option<String>,
    pub initialized: bool,
    pub txn: Txn,
    pub before: Vec<Ledger>,
    pub committed: Vec<Report>,
}

impl Transactional {
    pub fn new(offsets_group: Option<String>) -> Self {
        Transactional {
            offsets_group,
            initialized: false,
            txn: Txn::default(),
            before: Vec::new(),
            committed: Vec::new(),
        }
    }
}

/// `Mover(...)`'s transactional arguments: the producer's transactional id is the
/// mover's to set, and an offsets group needs transactions to commit in.
pub fn check_arguments(
    target_config: &HashMap<String, String>,
    transactional_id: Option<&str>,
    offsets_group: Option<&str>,
) -> Result<(), Error> {
    if target_config.contains_key("transactional.id") {
        return Err(Error::TransactionalIdSetting);
    }
    if transactional_id == Some("") {
        return Err(Error::EmptyTransactionalId);
    }
    if let Some(group) = offsets_group {
        if transactional_id.is_none() {
            return Err(Error::OffsetsGroupAlone(group.to_string()));
        }
        if group.is_empty() {
            return Err(Error::EmptyOffsetsGroup);
        }
    }
    Ok(())
}

/// A transactional mover's open transaction took the record at `offset` of `slot`
/// (functions, not methods: the move loop holds a record borrowed from the source).
pub fn took(transactional: &mut Option<Transactional>, slot: usize, offset: i64) {
    if let Some(t) = transactional.as_mut() {
        t.txn.took(slot, offset);
    }
}

/// ... and produced it, or skipped it on Python's word.
pub fn settled(transactional: &mut Option<Transactional>, slot: usize, offset: i64) {
    if let Some(t) = transactional.as_mut() {
        t.txn.settled(slot, offset);
    }
}

/// The transactional mode (`Mover(transactional_id=...)`).
impl Inner {
    /// Transactional and no transaction open: nothing may be produced or skipped.
    pub fn in_transaction(&self) -> Result<(), Error> {
        match &self.transactional {
            Some(t) if !t.txn.is_open() => Err(Error::OutsideTransaction),
            _ => Ok(()),
        }
    }

    /// librdkafka's verdict on a transactional call of the producer, or the
    /// producer's fatal error when it has one: that is what ended the transaction. A
    /// blocking call outlives the fatal error raised while it waits (librdkafka #3079:
    /// a commit's flush waited its whole timeout for records a fenced producer never
    /// sent, then said only `_TIMED_OUT`, and the partition was resumed by a new
    /// producer of the same id, which fenced the partition's new owner in turn).
    fn refused(&self, error: KafkaError) -> Error {
        self.fatal()
            .unwrap_or_else(|| Error::Transaction(TxnError::from_kafka(&error)))
    }

    /// The producer's fatal error (`rd_kafka_fatal_error`), as a transactional failure.
    fn fatal(&self) -> Option<Error> {
        let (code, reason) = self.producer.client().fatal_error()?;
        Some(Error::Transaction(TxnError::fatal(code, reason)))
    }

    /// Wait until `deadline` for the transaction's records to be acknowledged,
    /// serving their delivery reports; the producer's fatal error as soon as it has
    /// one (see `refused`). Records still unacknowledged at the deadline are left to
    /// the commit, whose own flush then reports the timeout.
    fn settle_records(&self, deadline: Instant) -> Result<(), Error> {
        while self.producer.in_flight_count() > 0 {
            if let Some(fatal) = self.fatal() {
                return Err(fatal);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            self.producer.poll(left.min(FATAL_CHECK_EVERY));
        }
        Ok(())
    }

    fn txn_state(&mut self) -> Result<&mut Transactional, Error> {
        self.transactional.as_mut().ok_or(Error::NotTransactional)
    }

    pub fn init_transactions(&mut self, timeout: Duration) -> Result<(), Error> {
        self.txn_state()?;
        self.producer
            .init_transactions(timeout)
            .map_err(|e| self.refused(e))?;
        self.txn_state()?.initialized = true;
        Ok(())
    }

    pub fn begin_transaction(&mut self) -> Result<(), Error> {
        let state = self.txn_state()?;
        if !state.initialized {
            return Err(Error::TransactionsNotInitialized);
        }
        state.txn.begin()?;
        if let Err(e) = self.producer.begin_transaction() {
            let refused = self.refused(e);
            self.txn_state()?.txn.end();
            return Err(refused);
        }
        let before = lock(&self.shared().ledgers).clone();
        self.txn_state()?.before = before;
        Ok(())
    }

    fn open_transaction(&mut self) -> Result<&mut Transactional, Error> {
        let state = self.txn_state()?;
        if !state.txn.is_open() {
            return Err(Error::NoOpenTransaction);
        }
        Ok(state)
    }

    /// Send the transaction's source offsets (if an offsets group is set) and commit
    /// it; the offsets committed, {slot: next source offset}.
    pub fn commit_transaction(&mut self, timeout: Duration) -> Result<Vec<(usize, i64)>, Error> {
        let deadline = Instant::now() + timeout;
        let state = self.open_transaction()?;
        let positions = state.txn.positions();
        let group_id = state.offsets_group.clone();
        if let (Some(group_id), false) = (group_id, positions.is_empty()) {
            let mut offsets = TopicPartitionList::with_capacity(positions.len());
            for &(slot, next) in &positions {
                let part = &self.parts[slot];
                let mut element = offsets.add_partition(&part.target, part.partition);
                element.set_offset(Offset::Offset(next))?;
                // No commit metadata: rdkafka's `set_metadata` stores it without a NUL
                // terminator, and what the target's group then held read past its end
                // (garbage after the 27 bytes written, 2026-11-29); to investigate.
            }
            group::send_offsets(
                self.producer.client(),
                &offsets,
                &group_id,
                deadline.saturating_duration_since(Instant::now()),
            )?;
        }
        self.settle_records(deadline)?;
        self.producer
            .commit_transaction(deadline.saturating_duration_since(Instant::now()))
            .map_err(|e| self.refused(e))?;
        // The commit flushed: every delivery report of the transaction was served.
        let reports: Vec<Report> = lock(&self.shared().ledgers)
            .iter_mut()
            .map(Ledger::report)
            .collect();
        let state = self.txn_state()?;
        for (slot, report) in reports.into_iter().enumerate() {
            if state.committed.len() <= slot {
                state.committed.push(Report::empty());
            }
            state.committed[slot].absorb(report);
        }
        state.txn.end();
        Ok(positions)
    }

    /// Abort the open transaction: nothing it produced becomes visible, and every
    /// partition it took records of reads again from the first of them (records
    /// handed back in it are dropped: they come back). {slot: offset read next}.
    pub fn abort_transaction(&mut self, timeout: Duration) -> Result<Vec<(usize, i64)>, Error> {
        let deadline = Instant::now() + timeout;
        self.open_transaction()?;
        // librdkafka's abort waits for the delivery reports of what it purges to be
        // served, and this producer serves them only when polled: purge and serve
        // them first, so the abort does not wait its whole timeout.
        self.producer.purge(PurgeConfig::default().queue());
        self.producer
            .flush(deadline.saturating_duration_since(Instant::now()))
            .map_err(|e| self.refused(e))?;
        self.producer
            .abort_transaction(deadline.saturating_duration_since(Instant::now()))
            .map_err(|e| self.refused(e))?;
        let _ = self
            .producer
            .flush(deadline.saturating_duration_since(Instant::now()));
        let shared = self.shared().clone();
        let state = self.txn_state()?;
        let rewind = state.txn.rewind();
        {
            let mut ledgers = lock(&shared.ledgers);
            for (slot, ledger) in ledgers.iter_mut().enumerate() {
                *ledger = state.before.get(slot).cloned().unwrap_or_else(Ledger::new);
            }
        }
        lock(&shared.failures).clear();
        state.txn.end();
        let mut out = Vec::new();
        for (slot, first) in rewind {
            let part = &mut self.parts[slot];
            if self
                .slots
                .get(&part.topic)
                .and_then(|p| p.get(&part.partition))
                != Some(&slot)
            {
                continue; // unassigned meanwhile
            }
            part.held = None;
            let (topic, partition) = (part.topic.clone(), part.partition);
            self.source
                .seek(&topic, partition, first, SEEK_TIMEOUT)
                .and_then(|()| self.source.resume(&topic, partition))
                .map_err(|e| Error::NotRewound {
                    topic: topic.clone(),
                    partition,
                    offset: first,
                    cause: Box::new(e),
                })?;
            out.push((slot, first));
        }
        Ok(out)
    }
}
