//! Which slot (index into the mover's partitions and ledgers) a newly assigned partition
//! takes. A partition given up keeps its slot while anything of it is still to be
//! reported (records in flight, counts not yet read by `progress`); after that the slot
//! is free and the next assignment reuses it. Without reuse a mover that outlives many
//! rebalances grows without end: `progress` walks every old slot each round, and a
//! delivery report carries the slot in 16 bits (`ledger::Sent`), so the 65,537th
//! assignment could not be moved at all. Pure: tested without Kafka.

#[derive(Debug, Default)]
pub struct Slots {
    /// Slots in use (assigned, or given up with something still to report).
    used: Vec<bool>,
    /// Free slots, the lowest taken first.
    free: Vec<usize>,
}

impl Slots {
    /// A slot for a new assignment: a free one, else a new one at the end.
    pub fn take(&mut self) -> usize {
        match self.free.pop() {
            Some(slot) => {
                self.used[slot] = true;
                slot
            }
            None => {
                self.used.push(true);
                self.used.len() - 1
            }
        }
    }

    /// `slot`'s partition was given up and nothing of it is left to report.
    pub fn free(&mut self, slot: usize) {
        if self.used.get(slot) == Some(&true) {
            self.used[slot] = false;
            self.free.push(slot);
            // Lowest last, so `take` reuses the lowest first.
            self.free.sort_unstable_by(|a, b| b.cmp(a));
        }
    }

    pub fn in_use(&self, slot: usize) -> bool {
        self.used.get(slot) == Some(&true)
    }

    /// How many slots exist (used or free): the length of the per-slot tables.
    pub fn len(&self) -> usize {
        self.used.len()
    }

    pub fn is_empty(&self) -> bool {
        self.used.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::Sent;

    #[test]
    fn seventy_thousand_reassignments_of_a_hundred_partitions_stay_in_a_hundred_slots() {
        let mut slots = Slots::default();
        let mut live: Vec<usize> = (0..100).map(|_| slots.take()).collect();
        for round in 0..70_000 {
            let gone = live.remove(round % live.len());
            slots.free(gone);
            live.push(slots.take());
        }
        assert_eq!(slots.len(), 100);
        assert!(live.iter().all(|&slot| slot < 100 && slots.in_use(slot)));
        // Every slot still fits a delivery report's 16 bits.
        assert!(live.iter().all(|&slot| Sent::new(slot, 1 << 40).is_some()));
    }

    #[test]
    fn a_slot_is_reused_only_once_freed_and_freeing_twice_is_harmless() {
        let mut slots = Slots::default();
        let (a, b) = (slots.take(), slots.take());
        assert_eq!((a, b), (0, 1));
        assert_eq!(slots.take(), 2); // nothing freed: a new one
        slots.free(b);
        slots.free(b);
        slots.free(7); // never taken
        assert!(!slots.in_use(b));
        assert_eq!(slots.take(), b);
        assert_eq!(slots.take(), 3);
    }
}
