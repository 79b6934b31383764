//! One transaction's reach over the mover's partitions (pure data, tested without
//! Kafka): per partition, the first source offset it took (a record produced, skipped
//! or handed back) and the last one it settled (produced or skipped).
//!
//! Commit: the offsets sent in the transaction are `last + 1` of each partition that
//! settled a record, the position a restart resumes from. Abort: every partition
//! that took a record reads again from its `first`, so the next transaction moves
//! what the aborted one had taken.

use crate::error::Error;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Reach {
    first: Option<i64>,
    last: Option<i64>,
}

#[derive(Debug, Default)]
pub struct Txn {
    open: bool,
    reach: Vec<Reach>,
}

impl Txn {
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Open the next transaction (nothing taken yet).
    pub fn begin(&mut self) -> Result<(), Error> {
        if self.open {
            return Err(Error::TransactionAlreadyOpen);
        }
        self.open = true;
        self.reach.clear();
        Ok(())
    }

    fn at(&mut self, slot: usize) -> &mut Reach {
        if self.reach.len() <= slot {
            self.reach.resize(slot + 1, Reach::default());
        }
        &mut self.reach[slot]
    }

    /// The transaction read the record at `offset` of `slot` (produced, skipped or
    /// handed back). Offsets of a slot only grow.
    pub fn took(&mut self, slot: usize, offset: i64) {
        self.at(slot).first.get_or_insert(offset);
    }

    /// The record at `offset` of `slot` is in the transaction: produced, or skipped on
    /// Python's word.
    pub fn settled(&mut self, slot: usize, offset: i64) {
        let reach = self.at(slot);
        reach.first.get_or_insert(offset);
        reach.last = Some(offset);
    }

    /// The offsets to commit with the transaction: (slot, next source offset) of each
    /// slot that settled a record, in slot order.
    pub fn positions(&self) -> Vec<(usize, i64)> {
        self.reach
            .iter()
            .enumerate()
            .filter_map(|(slot, r)| r.last.map(|last| (slot, last + 1)))
            .collect()
    }

    /// Where each slot that took a record reads again after an abort: (slot, first).
    pub fn rewind(&self) -> Vec<(usize, i64)> {
        self.reach
            .iter()
            .enumerate()
            .filter_map(|(slot, r)| r.first.map(|first| (slot, first)))
            .collect()
    }

    /// The transaction is committed or aborted.
    pub fn end(&mut self) {
        self.open = false;
        self.reach.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_positions_follow_the_last_settled_record() {
        let mut t = Txn::default();
        t.begin().unwrap();
        t.settled(0, 10);
        t.settled(0, 11);
        t.settled(2, 5);
        t.took(1, 7); // handed back, not settled
        assert_eq!(t.positions(), vec![(0, 12), (2, 6)]);
        assert_eq!(t.rewind(), vec![(0, 10), (1, 7), (2, 5)]);
    }

    #[test]
    fn a_skip_is_settled_and_a_held_record_rewinds_to_itself() {
        let mut t = Txn::default();
        t.begin().unwrap();
        t.took(0, 3); // handed back
        t.settled(0, 3); // then skipped on release
        t.settled(0, 4);
        assert_eq!(t.positions(), vec![(0, 5)]);
        assert_eq!(t.rewind(), vec![(0, 3)]);
    }

    #[test]
    fn one_transaction_at_a_time_and_each_starts_empty() {
        let mut t = Txn::default();
        assert!(!t.is_open());
        t.begin().unwrap();
        assert!(t.begin().is_err());
        t.settled(4, 1);
        t.end();
        assert!(!t.is_open());
        t.begin().unwrap();
        assert_eq!(t.positions(), vec![]);
        assert_eq!(t.rewind(), vec![]);
    }
}
