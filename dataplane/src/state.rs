//! The mover's state behind the Python class (`Inner`): its two clients, the
//! partitions it reads (`Part`, a slot per reading, with the record it holds for
//! Python, `Held`) and what it learnt of records carrying reserved headers; made from
//! `Mover(...)`'s arguments, partitions assigned and unassigned, and the lookups from
//! a partition or a record to its slot.

use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::producer::{BaseProducer, Producer};

use crate::clients::{self, lock, Shared, SourceContext, TargetContext};
use crate::error::{Error, RecordAt};
use crate::ledger::{Ledger, Standing};
use crate::order::ReplicaOrder;
use crate::plan::Irregular;
use crate::record::Record;
use crate::slots::Slots;
use crate::source::Source;
use crate::target::TargetTopic;
use crate::transactions::{self, Transactional};
use crate::verdicts::Verdicts;

/// Producer events one `Inner::serve_deliveries` serves at most (each one
/// partition's batch of delivery reports): a bound, not a budget.
const MAX_EVENTS_SERVED: usize = 100_000;

/// A header as Python gives it: (name, value), a null value as None.
pub type OwnedHeader = (String, Option<Vec<u8>>);

/// A record handed back to Python, kept until it is released or skipped.
pub struct Held {
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub timestamp: (i32, i64),
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    pub reason: Irregular,
}

/// One reading of a source partition.
pub struct Part {
    pub topic: String,
    pub partition: i32,
    pub target: String,
    /// The producer's handle on `target`.
    pub handle: TargetTopic,
    /// The largest record its target topic takes (key, value and headers, bytes),
    /// as `Mover.limits` said; a larger one is handed back as too large.
    pub limit: usize,
    pub held: Option<Held>,
    /// Which assignment of this mover it is (the n-th): a partition read again may
    /// take a lower, reused slot than its previous reading's, so `progress` orders
    /// by this, not by slot.
    pub generation: u64,
    /// Where its last `progress` report stood (None: not reported yet): a report that
    /// would tell the same is left out.
    pub reported: Option<Standing>,
}

/// `Mover(...)`'s arguments.
pub struct Arguments {
    pub source_config: HashMap<String, String>,
    pub target_config: HashMap<String, String>,
    pub provenance: Vec<OwnedHeader>,
    pub offset_header: Option<String>,
    pub topic_header: Option<String>,
    pub reserved_headers: Vec<String>,
    pub transactional_id: Option<String>,
    pub offsets_group: Option<String>,
}

/// One Mover's state, behind its lock (`Mover::run`). Fields drop in order: the
/// source consumer before the producer.
pub struct Inner {
    pub source: Source<SourceContext>,
    pub producer: BaseProducer<TargetContext>,
    pub slots: HashMap<String, HashMap<i32, usize>>,
    /// The slot of the last record read, by its topic's id and partition
    /// (`Record::topic_id`): a fetch's records come partition by partition. Cleared
    /// when the assignment changes.
    pub last_slot: Cell<Option<(usize, i32, usize)>>,
    /// `Mover.limits`: the largest record of each target topic.
    pub limits: HashMap<String, usize>,
    pub parts: Vec<Part>,
    /// Which slots of `parts` (and of the ledgers) are in use; freed ones are reused.
    pub slot_table: Slots,
    /// Assignments made so far (`Part::generation`).
    pub assignments: u64,
    pub provenance: Vec<OwnedHeader>,
    pub offset_header: Option<String>,
    pub topic_header: Option<String>,
    pub reserved: Vec<Vec<u8>>,
    /// The same names as C strings, for removing them from a record's headers.
    pub reserved_names: Vec<CString>,
    /// Per topic and partition, the order of our copies read (`Verdict::Loop`): kept
    /// across readings of the partition and handed to a Mover made anew (`adopt`).
    pub orders: HashMap<String, HashMap<i32, ReplicaOrder>>,
    /// Python's verdicts on records carrying reserved headers, by provenance.
    pub verdicts: Verdicts,
    /// Records skipped on a verdict since `skips` was last called: by (slot, reason),
    /// (count, first offset).
    pub skips: HashMap<(usize, Arc<str>), (u64, i64)>,
    pub transactional: Option<Transactional>,
    /// An error met after records were handed back in the same `run`: raised by the
    /// next one, so that Python sees those records first.
    pub deferred: Option<Error>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The target topic handles go before the producer they belong to.
        self.parts.clear();
    }
}

impl Inner {
    /// A mover of `Mover(...)`'s arguments, its two clients made (not connected yet).
    pub fn new(arguments: Arguments) -> Result<Self, Error> {
        let Arguments {
            source_config,
            target_config,
            provenance,
            offset_header,
            topic_header,
            reserved_headers,
            transactional_id,
            offsets_group,
        } = arguments;
        transactions::check_arguments(
            &target_config,
            transactional_id.as_deref(),
            offsets_group.as_deref(),
        )?;
        let (source, producer) =
            clients::make(&source_config, &target_config, transactional_id.as_deref())?;
        let reserved_names = reserved_headers
            .iter()
            .map(|name| CString::new(name.as_str()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| Error::NulInReservedHeader)?;
        let verdicts = Verdicts::new(
            reserved_headers
                .iter()
                .map(|name| name.as_bytes().to_vec())
                .collect(),
            offset_header
                .iter()
                .map(|name| name.as_bytes().to_vec())
                .collect(),
        );
        Ok(Inner {
            source,
            producer,
            slots: HashMap::new(),
            last_slot: Cell::new(None),
            limits: HashMap::new(),
            parts: Vec::new(),
            slot_table: Slots::default(),
            assignments: 0,
            provenance,
            offset_header,
            topic_header,
            orders: HashMap::new(),
            verdicts,
            reserved: reserved_headers
                .into_iter()
                .map(String::into_bytes)
                .collect(),
            reserved_names,
            skips: HashMap::new(),
            deferred: None,
            transactional: transactional_id.map(|_| Transactional::new(offsets_group)),
        })
    }

    /// What the clients' callbacks tell (the producer's context holds it; the
    /// consumer's holds the same).
    pub fn shared(&self) -> &Arc<Shared> {
        &self.producer.context().0
    }

    /// Serve every delivery report ready now, without waiting. The producer's `poll`
    /// serves one event a call, and one event holds one partition's batch of reports:
    /// a worker writing 1,000 partitions learnt of their deliveries a few partitions
    /// a call, and Python's accounting (the offset syncs, what this process wrote for
    /// the checkpoint rounds) trailed the target by 14 s at the end of a copy. Polled
    /// until a call serves no report (`MAX_EVENTS_SERVED` calls at most).
    pub fn serve_deliveries(&self) {
        let served = &self.shared().served;
        for _ in 0..MAX_EVENTS_SERVED {
            let before = served.load(Ordering::Relaxed);
            self.producer.poll(Duration::ZERO);
            if served.load(Ordering::Relaxed) == before {
                break;
            }
        }
    }

    /// The readings whose slots are in use, oldest assignment first: a partition read
    /// more than once comes last with its newest reading, and one given up (stopped,
    /// held for a config sync) keeps answering from its last reading.
    pub fn readings(&self) -> Vec<&Part> {
        let mut parts: Vec<&Part> = self
            .parts
            .iter()
            .enumerate()
            .filter(|(slot, _)| self.slot_table.in_use(*slot))
            .map(|(_, p)| p)
            .collect();
        parts.sort_by_key(|p| p.generation);
        parts
    }

    pub fn slot(&self, topic: &str, partition: i32) -> Option<usize> {
        self.slots
            .get(topic)
            .and_then(|p| p.get(&partition))
            .copied()
    }

    /// The slot of an assigned partition, or why there is none.
    pub fn assigned_slot(&self, topic: &str, partition: i32) -> Result<usize, Error> {
        self.slot(topic, partition)
            .ok_or_else(|| Error::NotAssigned {
                topic: topic.to_string(),
                partition,
            })
    }

    /// The slot of a record (its topic's name read only when the partition differs
    /// from the last record's).
    pub fn slot_of_record(&self, record: &Record<'_>) -> Option<usize> {
        let (topic_id, partition) = (record.topic_id(), record.partition());
        match self.last_slot.get() {
            Some((id, p, slot)) if id == topic_id && p == partition => Some(slot),
            _ => {
                let slot = self.slot(record.topic(), partition)?;
                self.last_slot.set(Some((topic_id, partition, slot)));
                Some(slot)
            }
        }
    }

    /// The record at `offset` of `slot`'s partition, as errors name it.
    pub fn record_at(&self, slot: usize, offset: i64) -> RecordAt {
        let part = &self.parts[slot];
        RecordAt {
            topic: part.topic.clone(),
            partition: part.partition,
            offset,
            target: part.target.clone(),
        }
    }

    /// Read these partitions: (source topic, partition, start offset, target topic).
    pub fn assign(&mut self, partitions: Vec<(String, i32, i64, String)>) -> Result<(), Error> {
        for (topic, partition, _, target) in &partitions {
            if self.slot(topic, *partition).is_some() {
                return Err(Error::AlreadyAssigned {
                    topic: topic.clone(),
                    partition: *partition,
                });
            }
            if target.is_empty() {
                return Err(Error::EmptyTargetTopic {
                    topic: topic.clone(),
                    partition: *partition,
                });
            }
        }
        let list: Vec<(&str, i32, Option<i64>)> = partitions
            .iter()
            .map(|(t, p, o, _)| (t.as_str(), *p, Some(*o)))
            .collect();
        let handles = partitions
            .iter()
            .map(|(_, _, _, target)| TargetTopic::new(&self.producer, target))
            .collect::<Result<Vec<_>, _>>()?;
        self.source.assign(&list)?;
        self.last_slot.set(None);
        for ((topic, partition, _, target), handle) in partitions.into_iter().zip(handles) {
            let slot = self.slot_table.take();
            self.slots
                .entry(topic.clone())
                .or_default()
                .insert(partition, slot);
            let limit = self.limits.get(&target).copied().unwrap_or(usize::MAX);
            let part = Part {
                topic,
                partition,
                target,
                handle,
                limit,
                held: None,
                generation: self.assignments,
                reported: None,
            };
            self.assignments += 1;
            let shared = self.shared().clone();
            let mut ledgers = lock(&shared.ledgers);
            if slot == self.parts.len() {
                ledgers.push(Ledger::new());
                self.parts.push(part);
            } else {
                ledgers[slot] = Ledger::new();
                self.parts[slot] = part;
            }
        }
        Ok(())
    }

    /// Stop reading these partitions: (source topic, partition).
    pub fn unassign(&mut self, partitions: Vec<(String, i32)>) -> Result<(), Error> {
        for (topic, partition) in &partitions {
            self.assigned_slot(topic, *partition)?;
        }
        let list: Vec<(&str, i32, Option<i64>)> = partitions
            .iter()
            .map(|(t, p)| (t.as_str(), *p, None))
            .collect();
        self.source.unassign(&list)?;
        self.last_slot.set(None);
        for (topic, partition) in &partitions {
            if let Some(by_partition) = self.slots.get_mut(topic) {
                by_partition.remove(partition);
            }
        }
        Ok(())
    }

    /// The largest record of each target topic named (`Mover.limits`).
    pub fn set_limits(&mut self, limits: HashMap<String, usize>) {
        for part in &mut self.parts {
            if let Some(limit) = limits.get(&part.target) {
                part.limit = *limit;
            }
        }
        self.limits.extend(limits);
    }
}
