//! What the mover tells Python of the partitions it reads: per partition, what was
//! delivered (or, transactional, committed) since the last call, the readings of a
//! partition read again merged into one report (`progress`); the records skipped on
//! a verdict (`skips`); high watermarks and positions, for the partitions' lag; the
//! clients' errors and warnings (`events`).

use std::collections::HashMap;

use crate::clients::lock;
use crate::error::Error;
use crate::ledger::Report;
use crate::state::Inner;

/// What `skips` reports: (topic, partition, reason, count, first offset).
pub type Skipped = (String, i32, String, u64, i64);

/// A source partition as Python names it: (topic, partition).
pub type Partition = (String, i32);

impl Inner {
    /// The partitions with news since the last call, each with its report (see
    /// `Mover.progress`); slots of readings given up and fully reported are freed.
    pub fn progress(&mut self) -> Vec<(Partition, Report)> {
        self.serve_deliveries();
        let shared = self.shared().clone();
        let mut ledgers = lock(&shared.ledgers);
        // The newest reading of each partition: an older one may be freed.
        let mut newest: HashMap<(&str, i32), u64> = HashMap::new();
        for (slot, part) in self.parts.iter().enumerate() {
            if self.slot_table.in_use(slot) {
                let at = newest
                    .entry((part.topic.as_str(), part.partition))
                    .or_default();
                *at = (*at).max(part.generation);
            }
        }
        let retired: Vec<bool> = (self.parts.iter().enumerate())
            .map(|(slot, part)| {
                self.slot_table.in_use(slot)
                    && newest[&(part.topic.as_str(), part.partition)] > part.generation
            })
            .collect();
        drop(newest);
        let mut reports = Vec::with_capacity(self.parts.len());
        let mut done = Vec::new();
        for slot in 0..self.parts.len() {
            if !self.slot_table.in_use(slot) {
                continue;
            }
            let ledger = &mut ledgers[slot];
            let report = match self.transactional.as_mut() {
                // What committed; acked records of the open transaction are in_flight.
                Some(t) => {
                    let mut report = t
                        .committed
                        .get_mut(slot)
                        .map_or_else(Report::empty, Report::take);
                    report.in_flight = ledger.in_flight() + ledger.unreported() as usize;
                    report
                }
                None => {
                    let report = ledger.report();
                    // Read again since, and everything of this reading reported:
                    // its slot is free. (The newest reading of a partition given
                    // up stays: its high watermark and position still count for
                    // its lag. A transactional mover is never reused.)
                    let part = &self.parts[slot];
                    let skipping = self.skips.keys().any(|(s, _)| *s == slot);
                    if retired[slot] && ledger.in_flight() == 0 && part.held.is_none() && !skipping
                    {
                        done.push(slot);
                    }
                    report
                }
            };
            let part = &mut self.parts[slot];
            let news = report.news_since(part.reported);
            part.reported = Some(report.standing());
            reports.push((part.generation, slot, news, report));
        }
        drop(ledgers);
        // A partition read again (unassigned, then assigned) has a slot per
        // reading, oldest first: one report for all, so the retired slot's
        // deliveries and records still in flight are not lost; told when any of
        // them has news.
        reports.sort_by_key(|(generation, ..)| *generation);
        let mut merged: Vec<((&str, i32), bool, Report)> = Vec::new();
        let mut at: HashMap<(&str, i32), usize> = HashMap::new();
        for (_, slot, news, report) in reports {
            let part = &self.parts[slot];
            let key = (part.topic.as_str(), part.partition);
            match at.get(&key) {
                Some(&i) => {
                    merged[i].1 |= news;
                    merged[i].2.followed_by(report);
                }
                None => {
                    at.insert(key, merged.len());
                    merged.push((key, news, report));
                }
            }
        }
        let told: Vec<(Partition, Report)> = merged
            .into_iter()
            .filter(|(_, news, _)| *news)
            .map(|((topic, partition), _, report)| ((topic.to_string(), partition), report))
            .collect();
        for slot in done {
            self.slot_table.free(slot);
        }
        told
    }

    /// The records skipped on a learnt verdict since the last call.
    pub fn skips(&mut self) -> Vec<Skipped> {
        let skips = std::mem::take(&mut self.skips);
        skips
            .into_iter()
            .map(|((slot, reason), (count, first))| {
                let part = &self.parts[slot];
                let reason = reason.to_string();
                (part.topic.clone(), part.partition, reason, count, first)
            })
            .collect()
    }

    /// The high watermark of each partition read, as the consumer last learned it.
    pub fn watermarks(&self) -> Vec<(Partition, i64)> {
        self.readings()
            .into_iter()
            .filter_map(|p| {
                let high = self.source.high_watermark(&p.topic, p.partition)?;
                Some(((p.topic.clone(), p.partition), high))
            })
            .collect()
    }

    /// Where the consumer stands in each partition read (`Source::positions`).
    pub fn positions(&self) -> Result<Vec<(Partition, i64)>, Error> {
        let readings = self.readings();
        let keys: Vec<_> = readings
            .iter()
            .map(|p| (p.topic.as_str(), p.partition))
            .collect();
        let found = self.source.positions(&keys)?;
        Ok(readings
            .into_iter()
            .zip(found)
            .filter_map(|(p, position)| Some(((p.topic.clone(), p.partition), position?)))
            .collect())
    }

    /// Client errors and librdkafka's warnings since the last call: (client, level,
    /// text).
    pub fn events(&self) -> Vec<(String, String, String)> {
        let mut events = lock(&self.shared().events);
        events
            .drain(..)
            .map(|(c, l, t)| (c.to_string(), l, t))
            .collect()
    }
}
