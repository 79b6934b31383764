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
mod tests {
    use super::*;

    #[test]
    fn contiguous_acks_advance_and_note_the_first_pair() {
        let mut l = Ledger::new();
        for o in 10..13 {
            l.sent(o).unwrap();
        }
        l.delivered(10, 100, 5, -1).unwrap();
        l.delivered(11, 101, 5, -1).unwrap();
        let r = l.report();
        assert_eq!(r.delivered_through, 11);
        assert_eq!(r.target_offset, 101);
        assert_eq!(r.in_flight, 1);
        assert_eq!((r.records, r.bytes), (2, 10));
        assert_eq!(r.shifts, vec![(10, 100)]);
        // Reported once.
        assert_eq!(l.report().shifts, vec![]);
    }

    #[test]
    fn an_ack_out_of_order_waits_for_the_gap() {
        let mut l = Ledger::new();
        l.sent(1).unwrap();
        l.sent(2).unwrap();
        l.delivered(2, 21, 0, -1).unwrap();
        assert_eq!(l.delivered_through, -1);
        l.delivered(1, 20, 0, -1).unwrap();
        assert_eq!((l.delivered_through, l.target_offset), (2, 21));
    }

    #[test]
    fn a_source_gap_is_a_shift() {
        let mut l = Ledger::new();
        l.sent(0).unwrap();
        l.sent(1).unwrap();
        l.sent(3).unwrap(); // 2 was a transaction marker
        l.delivered(0, 0, 0, -1).unwrap();
        l.delivered(1, 1, 0, -1).unwrap();
        l.delivered(3, 2, 0, -1).unwrap();
        assert_eq!(l.report().shifts, vec![(0, 0), (3, 2)]);
    }

    #[test]
    fn equal_gaps_on_both_sides_are_a_shift() {
        let mut l = Ledger::new();
        l.sent(0).unwrap();
        l.sent(2).unwrap(); // 1 was a marker on the source, and 1 is one on the target
        l.delivered(0, 0, 0, -1).unwrap();
        l.delivered(2, 2, 0, -1).unwrap();
        assert_eq!(l.report().shifts, vec![(0, 0), (2, 2)]);
    }

    #[test]
    fn a_skip_counts_as_settled_but_not_as_delivered() {
        let mut l = Ledger::new();
        l.sent(5).unwrap();
        l.skipped(6).unwrap();
        l.sent(7).unwrap();
        assert_eq!(l.delivered_through, -1);
        l.delivered(5, 50, 0, -1).unwrap();
        assert_eq!((l.delivered_through, l.target_offset), (6, 50));
        let r = l.report();
        assert_eq!(r.source_offset, 5, "the pair is 5 -> 50, not 6 -> 50");
        assert_eq!(r.shifts, vec![(5, 50)]);
        l.delivered(7, 51, 0, -1).unwrap();
        assert_eq!(l.report().shifts, vec![(7, 51)]);
        // Nothing in flight: a skip moves the position at once.
        l.skipped(8).unwrap();
        assert_eq!(l.delivered_through, 8);
    }

    #[test]
    fn a_failure_stops_the_ledger_before_it() {
        let mut l = Ledger::new();
        l.sent(1).unwrap();
        l.sent(2).unwrap();
        l.sent(3).unwrap();
        l.delivered(1, 1, 0, -1).unwrap();
        l.failed(2).unwrap();
        l.delivered(3, 3, 0, -1).unwrap();
        assert_eq!(l.delivered_through, 1);
        assert_eq!(l.in_flight(), 2);
    }

    #[test]
    fn the_last_acked_records_timestamp_is_reported_and_kept() {
        let mut l = Ledger::new();
        assert_eq!(l.report().timestamp_ms, -1);
        l.sent(0).unwrap();
        l.sent(1).unwrap();
        l.delivered(0, 0, 0, 2_000).unwrap();
        l.delivered(1, 1, 0, 1_000).unwrap(); // an older timestamp, acked last
        l.sent(2).unwrap();
        l.delivered(2, 2, 0, -1).unwrap(); // none: the last known stands
        assert_eq!(l.report().timestamp_ms, 1_000);
        assert_eq!(l.report().timestamp_ms, 1_000, "a position, not a count");
    }

    #[test]
    fn a_retired_slot_still_counts_and_its_records_in_flight_too() {
        let (mut old, mut new) = (Ledger::new(), Ledger::new());
        for o in 0..4 {
            old.sent(o).unwrap();
        }
        old.delivered(0, 0, 1, -1).unwrap();
        old.delivered(1, 1, 1, -1).unwrap();
        let mut r = old.report();
        r.followed_by(new.report()); // the new slot delivered nothing yet
        assert_eq!(
            (r.delivered_through, r.target_offset, r.in_flight),
            (1, 1, 2)
        );
        assert_eq!((r.records, r.bytes), (2, 2));
        old.delivered(2, 2, 1, -1).unwrap();
        new.sent(10).unwrap();
        new.delivered(10, 9, 5, -1).unwrap();
        let mut r = old.report();
        r.followed_by(new.report());
        assert_eq!(
            (r.delivered_through, r.target_offset, r.in_flight),
            (10, 9, 1)
        );
        assert_eq!((r.records, r.bytes), (2, 6));
        assert_eq!(r.shifts, vec![(10, 9)]);
    }

    #[test]
    fn committed_reports_add_up_and_are_taken_once() {
        let mut l = Ledger::new();
        let mut committed = Report::empty();
        l.sent(0).unwrap();
        l.delivered(0, 0, 3, -1).unwrap();
        committed.absorb(l.report());
        l.sent(2).unwrap();
        l.delivered(2, 1, 4, -1).unwrap();
        committed.absorb(l.report());
        let r = committed.take();
        assert_eq!((r.delivered_through, r.target_offset), (2, 1));
        assert_eq!((r.records, r.bytes), (2, 7));
        assert_eq!(r.shifts, vec![(0, 0), (2, 1)]);
        let again = committed.take();
        assert_eq!((again.delivered_through, again.records), (2, 0));
        assert_eq!(again.shifts, vec![]);
    }

    #[test]
    fn a_copy_taken_before_a_transaction_restores_it() {
        let mut l = Ledger::new();
        l.sent(0).unwrap();
        l.delivered(0, 0, 0, -1).unwrap();
        let _ = l.report();
        let before = l.clone();
        l.sent(1).unwrap();
        l.delivered(1, 1, 0, -1).unwrap();
        l = before; // aborted
        assert_eq!((l.delivered_through, l.target_offset), (0, 0));
        l.sent(1).unwrap();
        l.delivered(1, 5, 0, -1).unwrap();
        assert_eq!(l.report().shifts, vec![(1, 5)]);
    }

    #[test]
    fn offsets_must_grow_and_settle_once() {
        let mut l = Ledger::new();
        l.sent(4).unwrap();
        assert!(l.sent(4).is_err());
        assert!(l.delivered(9, 0, 0, -1).is_err());
        l.delivered(4, 0, 0, -1).unwrap();
        assert!(l.sent(3).is_err());
    }
}

#[cfg(test)]
mod sent_tests {
    use super::{Report, Sent};

    #[test]
    fn slot_and_offset_round_trip_and_out_of_range_is_refused() {
        for (slot, offset) in [(0, 0), (3, 17), (65_535, (1 << 48) - 1)] {
            let sent = Sent::new(slot, offset).expect("fits");
            assert_eq!((sent.slot(), sent.offset()), (slot, offset));
        }
        assert!(Sent::new(65_536, 0).is_none());
        assert!(Sent::new(0, 1 << 48).is_none());
        assert!(Sent::new(0, -1).is_none());
    }

    #[test]
    fn a_report_is_news_only_when_something_moved() {
        let mut report = Report::empty();
        assert!(report.news_since(None), "the first report is always told");
        let stood = Some(report.standing());
        assert!(!report.news_since(stood));
        report.in_flight = 3;
        assert!(report.news_since(stood), "records in flight");
        let stood = Some(report.standing());
        report.records = 3;
        assert!(report.news_since(stood), "records delivered");
        report.records = 0;
        report.shifts.push((0, 5));
        assert!(report.news_since(stood), "a shift");
        report.shifts.clear();
        report.delivered_through = 2;
        assert!(report.news_since(stood), "a position");
    }
}
