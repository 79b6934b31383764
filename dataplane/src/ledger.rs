//! One source partition's delivery ledger: which records the mover sent, which the
//! target acknowledged, and from that the highest source offset delivered
//! contiguously (every record the mover took up to it is acked, or was skipped on
//! Python's word) with its target offset. Pure data, tested without Kafka.
//!
//! It also notes where the source-to-target mapping stops being a plain shift (the
//! first delivered record, and any record after a gap: transaction markers,
//! compaction, a skipped record, another writer on the target): the pairs Python's
//! offset syncs decide to publish from.

use std::collections::VecDeque;

use crate::error::LedgerError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    InFlight,
    Delivered(i64),
    Skipped,
    Failed,
}

#[derive(Debug, Default, Clone)]
pub struct Ledger {
    pending: VecDeque<(i64, State)>,
    /// Highest source offset delivered (or skipped) contiguously; -1: none yet.
    pub delivered_through: i64,
    /// Target offset of the newest delivered record; -1: none yet.
    pub target_offset: i64,
    last_pair: Option<(i64, i64)>,
    shifts: Vec<(i64, i64)>,
    /// Records and bytes (key + value) acked since the last `take_counts`.
    records: u64,
    bytes: u64,
    /// The timestamp of the last acked record (ms); -1: none yet.
    timestamp_ms: i64,
}

/// Where a partition stood at a report: (delivered through, target offset, in flight).
pub type Standing = (i64, i64, usize);

/// What a ledger reports and forgets (`Ledger::report`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub delivered_through: i64,
    pub target_offset: i64,
    /// The source offset of the record at `target_offset` (-1: none yet): the newest
    /// pair, which `delivered_through` is not when skipped records follow it.
    pub source_offset: i64,
    pub in_flight: usize,
    pub records: u64,
    pub bytes: u64,
    pub shifts: Vec<(i64, i64)>,
    /// The timestamp of the last acked record (ms: the record's own, for its age);
    /// -1: none yet.
    pub timestamp_ms: i64,
}

impl Report {
    /// Nothing delivered yet.
    pub fn empty() -> Self {
        Report {
            delivered_through: -1,
            target_offset: -1,
            source_offset: -1,
            in_flight: 0,
            records: 0,
            bytes: 0,
            shifts: Vec::new(),
            timestamp_ms: -1,
        }
    }

    /// Add a newer report to this one (the positions are the newer report's; counts
    /// and shifts add up): how a transactional mover keeps what committed.
    pub fn absorb(&mut self, newer: Report) {
        self.delivered_through = newer.delivered_through;
        self.target_offset = newer.target_offset;
        self.source_offset = newer.source_offset;
        self.in_flight = newer.in_flight;
        if newer.timestamp_ms >= 0 {
            self.timestamp_ms = newer.timestamp_ms;
        }
        self.records += newer.records;
        self.bytes += newer.bytes;
        self.shifts.extend(newer.shifts);
    }

    /// Fold in the report of the slot that reads the partition after this one's (an
    /// unassign retires a slot, whose records may still be in flight): counts, records
    /// in flight and shifts add up; the positions are the newer slot's once it
    /// delivered anything.
    pub fn followed_by(&mut self, newer: Report) {
        if newer.delivered_through >= 0 {
            self.delivered_through = newer.delivered_through;
            self.target_offset = newer.target_offset;
            self.source_offset = newer.source_offset;
        }
        if newer.timestamp_ms >= 0 {
            self.timestamp_ms = newer.timestamp_ms;
        }
        self.in_flight += newer.in_flight;
        self.records += newer.records;
        self.bytes += newer.bytes;
        self.shifts.extend(newer.shifts);
    }

    /// What a report told of where the partition stands: (delivered through, target
    /// offset, in flight).
    pub fn standing(&self) -> Standing {
        (self.delivered_through, self.target_offset, self.in_flight)
    }

    /// Whether this report tells anything a report that stood at `last` did not
    /// (None: none was given): records delivered, shifts, or a position moved.
    pub fn news_since(&self, last: Option<Standing>) -> bool {
        self.records > 0 || !self.shifts.is_empty() || last != Some(self.standing())
    }

    /// This report, with its counts and shifts taken (they are reported once).
    pub fn take(&mut self) -> Report {
        Report {
            delivered_through: self.delivered_through,
            target_offset: self.target_offset,
            source_offset: self.source_offset,
            in_flight: self.in_flight,
            records: std::mem::take(&mut self.records),
            bytes: std::mem::take(&mut self.bytes),
            shifts: std::mem::take(&mut self.shifts),
            timestamp_ms: self.timestamp_ms,
        }
    }
}

impl Ledger {
    pub fn new() -> Self {
        Ledger {
            delivered_through: -1,
            target_offset: -1,
            timestamp_ms: -1,
            ..Default::default()
        }
    }

    /// The mover handed the record at `source` to the producer. Offsets only grow.
    pub fn sent(&mut self, source: i64) -> Result<(), LedgerError> {
        if let Some(&(last, _)) = self.pending.back() {
            if source <= last {
                return Err(LedgerError::SentAfter {
                    offset: source,
                    last,
                });
            }
        } else if source <= self.delivered_through {
            return Err(LedgerError::SentAfterDelivered {
                offset: source,
                delivered_through: self.delivered_through,
            });
        }
        self.pending.push_back((source, State::InFlight));
        Ok(())
    }

    /// The target acked the record read at `source`, written at `target` with
    /// `timestamp_ms` (-1: none).
    pub fn delivered(
        &mut self,
        source: i64,
        target: i64,
        bytes: u64,
        timestamp_ms: i64,
    ) -> Result<(), LedgerError> {
        self.set(source, State::Delivered(target))?;
        self.records += 1;
        self.bytes += bytes;
        if timestamp_ms >= 0 {
            self.timestamp_ms = timestamp_ms; // the last acked, as the Python loop's
        }
        self.advance();
        Ok(())
    }

    /// Python decided the record at `source` is not replicated (a loop).
    pub fn skipped(&mut self, source: i64) -> Result<(), LedgerError> {
        if self.pending.is_empty() && source > self.delivered_through {
            // Nothing in flight: the skip moves the position on at once.
            self.delivered_through = source;
            return Ok(());
        }
        self.sent(source)?;
        self.set(source, State::Skipped)?;
        self.advance();
        Ok(())
    }

    /// The target refused the record at `source`: the ledger stops before it.
    pub fn failed(&mut self, source: i64) -> Result<(), LedgerError> {
        self.set(source, State::Failed)
    }

    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }

    /// Records acked since the last report (in a transaction: acked, not committed).
    pub fn unreported(&self) -> u64 {
        self.records
    }

    /// The position and what was delivered since the last report (counts and
    /// shifts are reported once).
    pub fn report(&mut self) -> Report {
        Report {
            delivered_through: self.delivered_through,
            target_offset: self.target_offset,
            source_offset: self.last_pair.map_or(-1, |(source, _)| source),
            in_flight: self.pending.len(),
            records: std::mem::take(&mut self.records),
            bytes: std::mem::take(&mut self.bytes),
            shifts: std::mem::take(&mut self.shifts),
            timestamp_ms: self.timestamp_ms,
        }
    }

    fn set(&mut self, source: i64, state: State) -> Result<(), LedgerError> {
        // Acks of one partition come in order, so this is nearly always the front.
        let index = match self.pending.front() {
            Some(&(first, _)) if first == source => 0,
            _ => self
                .pending
                .binary_search_by_key(&source, |&(offset, _)| offset)
                .map_err(|_| LedgerError::NotInFlight(source))?,
        };
        let entry = &mut self.pending[index];
        if entry.1 != State::InFlight && state != State::Skipped {
            return Err(LedgerError::SettledTwice(source));
        }
        entry.1 = state;
        Ok(())
    }

    fn advance(&mut self) {
        while let Some(&(source, state)) = self.pending.front() {
            match state {
                State::InFlight | State::Failed => break,
                State::Skipped => {}
                State::Delivered(target) => {
                    // Plain: the record right after the last on both sides. A gap
                    // on both sides of the same size (a transaction marker on each)
                    // is a shift too: what lies between two pairs is then every
                    // record, one after the other (`replicator.engine.written_runs`).
                    let plain = matches!(self.last_pair,
                        Some((s, t)) if source == s + 1 && target == t + 1);
                    if !plain {
                        self.shifts.push((source, target));
                    }
                    self.last_pair = Some((source, target));
                    self.target_offset = target;
                }
            }
            self.delivered_through = source;
            self.pending.pop_front();
        }
    }
}

/// What a delivery report refers to: the partition's slot and the source offset,
/// packed into the record's opaque pointer-sized word (no allocation per record).
/// Offsets take the low 48 bits (2^48 records a partition), slots the high 16.
#[derive(Clone, Copy)]
pub struct Sent(usize);

const OFFSET_BITS: u32 = 48;

impl Sent {
    /// None when the slot or the offset does not fit its bits (65,536 partitions a
    /// Mover, offsets below 2^48): the caller refuses the record, naming it.
    pub fn new(slot: usize, offset: i64) -> Option<Sent> {
        let fits =
            slot < 1 << (usize::BITS - OFFSET_BITS) && (0..1 << OFFSET_BITS).contains(&offset);
        fits.then_some(Sent(slot << OFFSET_BITS | offset as usize))
    }

    pub fn slot(self) -> usize {
        self.0 >> OFFSET_BITS
    }

    pub fn offset(self) -> i64 {
        (self.0 & ((1 << OFFSET_BITS) - 1)) as i64
    }

    /// The word librdkafka carries as the record's opaque.
    pub fn word(self) -> usize {
        self.0
    }

    /// Back from the word `word()` gave.
    pub fn from_word(word: usize) -> Sent {
        Sent(word)
    }
}

#[cfg(test)]
#[path = "ledger_tests.rs"]
mod tests;
