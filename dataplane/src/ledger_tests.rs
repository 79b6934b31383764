//! The ledger's tests (`ledger.rs` keeps to the ledger itself).

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
