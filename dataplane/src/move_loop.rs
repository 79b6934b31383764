//! The move loop (`Inner::run`): records read from the source, Python's verdicts on
//! those carrying reserved headers applied (a loop's copies skipped in their order),
//! each produced to its target partition or handed back to Python (held, its
//! partition paused), `release` of what Python settled, and the verdicts Python
//! teaches (`learn`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::types::RDKafkaRespErr;

use crate::clients::{lock, SourceContext};
use crate::error::Error;
use crate::order::{self, ReplicaOrder};
use crate::plan::{self, Irregular};
use crate::producing::Refused;
use crate::source::Source;
use crate::state::{Held, Inner, OwnedHeader, Part};
use crate::target::Headers;
use crate::transactions::{settled, took};
use crate::verdicts::Verdict;

/// How long a seek (after a released record) may take.
pub const SEEK_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `release` waits for room in a full producer queue before it gives the
/// record back to its caller (held still), who keeps polling its group meanwhile.
const RELEASE_WAIT: Duration = Duration::from_secs(1);

/// Pause `slot`'s partition and keep its record for Python.
fn hold(
    source: &Source<SourceContext>,
    parts: &mut [Part],
    slot: usize,
    held: Held,
) -> Result<(), Error> {
    let part = &mut parts[slot];
    source.pause(&part.topic, part.partition)?;
    part.held = Some(held);
    Ok(())
}

/// The order of our copies in `part`'s partition (a function, not a method: the
/// loop holds a record borrowed from the source).
fn order_of<'a>(
    orders: &'a mut HashMap<String, HashMap<i32, ReplicaOrder>>,
    part: &Part,
) -> &'a mut ReplicaOrder {
    if !orders.contains_key(part.topic.as_str()) {
        orders.insert(part.topic.clone(), HashMap::new());
    }
    let partitions = orders.get_mut(part.topic.as_str()).expect("inserted");
    partitions.entry(part.partition).or_default()
}

impl Inner {
    /// Move up to `max_records` for up to `timeout`: (records moved, slots whose
    /// record was handed back).
    pub fn run(
        &mut self,
        max_records: usize,
        timeout: Duration,
    ) -> Result<(usize, Vec<usize>), Error> {
        if let Some(error) = self.deferred.take() {
            return Err(error);
        }
        self.failures()?;
        self.in_transaction()?;
        let (mut moved, mut handed) = (0, Vec::new());
        match self.pass(max_records, timeout, &mut moved, &mut handed) {
            Ok(()) => Ok((moved, handed)),
            Err(error) if handed.is_empty() => Err(error),
            Err(error) => {
                // The records handed back wait for Python's `release`: returned now,
                // the error raised by the next call (raised now, they were never seen
                // and their partitions waited until assigned again).
                self.deferred = Some(error);
                Ok((moved, handed))
            }
        }
    }

    /// `run`'s reading and producing, counting into `moved` and `handed` as it goes.
    fn pass(
        &mut self,
        max_records: usize,
        timeout: Duration,
        moved: &mut usize,
        handed: &mut Vec<usize>,
    ) -> Result<(), Error> {
        let deadline = Instant::now() + timeout;
        while *moved < max_records {
            let wait = if *moved == 0 && handed.is_empty() {
                deadline.saturating_duration_since(Instant::now())
            } else {
                Duration::ZERO
            };
            let Some(record) = self.source.poll(wait) else {
                break;
            };
            if let Some((code, detail)) = record.error() {
                if code == RDKafkaRespErr::RD_KAFKA_RESP_ERR__PARTITION_EOF {
                    continue;
                }
                return Err(Error::Consuming {
                    topic: record.topic().to_string(),
                    partition: record.partition(),
                    offset: record.offset(),
                    code,
                    detail,
                });
            }
            let offset = record.offset();
            let Some(slot) = self.slot_of_record(&record) else {
                return Err(Error::UnassignedRecord {
                    topic: record.topic().to_string(),
                    partition: record.partition(),
                    offset,
                });
            };
            if self.parts[slot].held.is_some() {
                continue; // read again after the held record is released
            }
            // The record's own headers, taken from it: sent on with our provenance
            // added (not copied header by header), or copied into a record handed back.
            let own = record.take_headers();
            let pairs = own.as_ref().map(Headers::pairs).unwrap_or_default();
            let keep = |reason, headers| Held {
                offset,
                key: record.key().map(<[u8]>::to_vec),
                value: record.value().map(<[u8]>::to_vec),
                timestamp: record.timestamp(),
                headers,
                reason,
            };
            let copied = || {
                own.as_ref()
                    .map_or_else(Vec::new, |own| own.copied(usize::MAX))
            };
            let mut rewrite = None;
            let (irregular, utf8) =
                plan::survey(pairs.iter().map(|(name, _)| *name), &self.reserved);
            if let Some(reason) = irregular {
                let known = (reason == Irregular::ReservedHeader && utf8)
                    .then(|| self.verdicts.get(&self.parts[slot].topic, &pairs))
                    .flatten()
                    .cloned();
                match known {
                    Some(Verdict::Skip(why)) => {
                        self.skip(slot, offset, &why)?;
                        continue;
                    }
                    Some(Verdict::Loop { why, stream }) if self.order_knows(slot, stream) => {
                        let upstream = self.upstream_offset(&pairs);
                        let order = order_of(&mut self.orders, &self.parts[slot]);
                        if order.in_order(stream, offset, upstream) {
                            self.skip(slot, offset, &why)?;
                            continue;
                        }
                        // Out of order: an application's re-drive, copied as its own.
                        rewrite = Some(Arc::from([]));
                    }
                    Some(Verdict::Copy(extra)) => rewrite = Some(extra),
                    // Unknown, or a loop's provenance not yet ordered in this reading
                    // (Python orders the first: it may know our copies before it).
                    Some(Verdict::Loop { .. }) | None => {
                        // Python decides (and teaches the verdict for the next ones).
                        let held = keep(reason, copied());
                        hold(&self.source, &mut self.parts, slot, held)?;
                        took(&mut self.transactional, slot, offset);
                        handed.push(slot);
                        continue;
                    }
                }
            }
            let size = record.key().map_or(0, <[u8]>::len)
                + record.value().map_or(0, <[u8]>::len)
                + pairs
                    .iter()
                    .map(|(n, v)| n.len() + v.map_or(0, <[u8]>::len))
                    .sum::<usize>();
            if size > self.parts[slot].limit {
                // Above its own target topic's limit (which may be below the
                // producer's message.max.bytes, the largest topic's): Python applies
                // oversized.record.policy, as for a record the producer refuses.
                let held = keep(Irregular::TooLarge, copied());
                hold(&self.source, &mut self.parts, slot, held)?;
                took(&mut self.transactional, slot, offset);
                handed.push(slot);
                continue;
            }
            // The record's own headers lead what the producer may give back.
            let own_count = match rewrite {
                Some(_) => pairs
                    .iter()
                    .filter(|(name, _)| !self.verdicts.is_reserved(name))
                    .count(),
                None => pairs.len(),
            };
            drop(pairs);
            let topic = &self.parts[slot].topic;
            let headers = match (rewrite, own) {
                (Some(extra), Some(own)) => self.rewritten(own, &extra, topic, offset)?,
                (_, own) => self.headers(own, topic, offset)?,
            };
            match self.produce(
                slot,
                offset,
                record.key(),
                record.value(),
                record.timestamp(),
                headers,
                Some(deadline),
            ) {
                Ok(()) => {
                    settled(&mut self.transactional, slot, offset);
                    *moved += 1;
                }
                Err(Refused::QueueFull) => {
                    // The target takes nothing now: this record is read again by the
                    // next call, and this one returns, so that the caller keeps
                    // polling its group (a wait here outlived max.poll.interval.ms).
                    let part = &self.parts[slot];
                    self.source
                        .seek(&part.topic, part.partition, offset, SEEK_TIMEOUT)?;
                    break;
                }
                Err(Refused::TooLarge(headers)) => {
                    // Its own headers come first in what the producer gave back.
                    let held = keep(Irregular::TooLarge, headers.copied(own_count));
                    hold(&self.source, &mut self.parts, slot, held)?;
                    took(&mut self.transactional, slot, offset);
                    handed.push(slot);
                }
                Err(Refused::Other(problem)) => {
                    return Err(Error::Producing {
                        record: self.record_at(slot, offset),
                        cause: Box::new(problem),
                    })
                }
            }
            if *moved % 1024 == 0 {
                self.serve_deliveries();
            }
        }
        self.serve_deliveries();
        self.failures()
    }

    /// The record at `offset` of `slot` is not replicated, on Python's verdict
    /// (`reason`): the ledger moves past it, and `skips` reports it.
    fn skip(&mut self, slot: usize, offset: i64, reason: &Arc<str>) -> Result<(), Error> {
        lock(&self.shared().ledgers)[slot].skipped(offset)?;
        settled(&mut self.transactional, slot, offset);
        let counted = self
            .skips
            .entry((slot, reason.clone()))
            .or_insert((0, offset));
        counted.0 += 1;
        Ok(())
    }

    /// Settle `slot`'s held record; false when the producer's queue stayed full for
    /// `RELEASE_WAIT` (the record stays held: release it again later), so that the
    /// caller goes back to polling its group rather than waiting here without end.
    pub fn release(
        &mut self,
        slot: usize,
        headers: Option<Vec<OwnedHeader>>,
    ) -> Result<bool, Error> {
        if self.parts[slot].held.is_some() {
            self.in_transaction()?;
        }
        let Some(held) = self.parts[slot].held.take() else {
            let part = &self.parts[slot];
            return Err(Error::NothingHeld {
                topic: part.topic.clone(),
                partition: part.partition,
            });
        };
        match headers {
            Some(headers) => {
                let mut owned = Headers::with_capacity(headers.len());
                for (key, value) in &headers {
                    if let Err(problem) = owned.add(key.as_bytes(), value.as_deref()) {
                        self.parts[slot].held = Some(held); // still Python's to settle
                        return Err(problem);
                    }
                }
                let produced = self.produce(
                    slot,
                    held.offset,
                    held.key.as_deref(),
                    held.value.as_deref(),
                    held.timestamp,
                    owned,
                    Some(Instant::now() + RELEASE_WAIT),
                );
                if let Err(problem) = produced {
                    let problem = match problem {
                        Refused::TooLarge(_) => Error::TooLargeForProducer,
                        Refused::QueueFull => {
                            self.parts[slot].held = Some(held);
                            return Ok(false);
                        }
                        Refused::Other(problem) => problem,
                    };
                    let record = self.record_at(slot, held.offset);
                    self.parts[slot].held = Some(held);
                    return Err(Error::Producing {
                        record,
                        cause: Box::new(problem),
                    });
                }
            }
            None => {
                lock(&self.shared().ledgers)[slot].skipped(held.offset)?;
                self.order_skipped(slot, &held);
            }
        }
        settled(&mut self.transactional, slot, held.offset);
        let part = &self.parts[slot];
        self.source
            .seek(&part.topic, part.partition, held.offset + 1, SEEK_TIMEOUT)?;
        self.source.resume(&part.topic, part.partition)?;
        Ok(true)
    }

    /// A record Python skipped: if it was our copy of a loop's provenance, the order
    /// of our copies in its partition starts there (`order`).
    fn order_skipped(&mut self, slot: usize, held: &Held) {
        let pairs: Vec<(&[u8], Option<&[u8]>)> = held
            .headers
            .iter()
            .map(|(name, value)| (name.as_slice(), value.as_deref()))
            .collect();
        let topic = &self.parts[slot].topic;
        if let Some(&Verdict::Loop { stream, .. }) = self.verdicts.get(topic, &pairs) {
            let upstream = self.upstream_offset(&pairs);
            order_of(&mut self.orders, &self.parts[slot]).in_order(stream, held.offset, upstream);
        }
    }

    /// Whether a record of `stream` was taken as our copy in `slot`'s partition.
    fn order_knows(&self, slot: usize, stream: u64) -> bool {
        let part = &self.parts[slot];
        self.orders
            .get(part.topic.as_str())
            .and_then(|partitions| partitions.get(&part.partition))
            .is_some_and(|order| order.knows(stream))
    }

    /// The source offset the record's offset header carries (its last value).
    fn upstream_offset(&self, pairs: &[(&[u8], Option<&[u8]>)]) -> Option<i64> {
        let name = self.offset_header.as_deref()?.as_bytes();
        let value = pairs.iter().rev().find(|(n, _)| *n == name)?.1;
        order::upstream_offset(value)
    }

    /// Python's verdict on records of `topic` carrying reserved headers with the
    /// provenance `headers` carry (`Mover.learn`): skip them for `skip` (a loop; with
    /// `in_order`, while they stand in the order of our copies), or copy them with
    /// `extra` added.
    pub fn learn(
        &mut self,
        topic: &str,
        headers: Vec<OwnedHeader>,
        skip: Option<String>,
        extra: Vec<OwnedHeader>,
        in_order: bool,
    ) {
        let bytes = |list: Vec<OwnedHeader>| {
            list.into_iter()
                .map(|(name, value)| (name.into_bytes(), value))
                .collect::<Vec<_>>()
        };
        let verdict = match skip {
            Some(why) if in_order => Verdict::Loop {
                why: why.into(),
                stream: 0,
            },
            Some(reason) => Verdict::Skip(reason.into()),
            None => Verdict::Copy(bytes(extra).into()),
        };
        self.verdicts.learn(topic, &bytes(headers), verdict);
    }
}
