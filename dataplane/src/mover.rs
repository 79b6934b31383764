//! `Mover`: one flow's source consumer and target producer, moving records from
//! source topic T partition p to target topic rename(T) partition p with key, value,
//! timestamp and the record's own headers, plus the caller's provenance headers.
//!
//! Python keeps the decisions: it assigns partitions (with their target topic and
//! start offset), releases or skips the records handed back, reads `progress` for
//! offset syncs and checkpoints. The GIL is released while records move.
//!
//! Transactional (given a `transactional_id`): every record moves inside a
//! transaction Python opens and commits, with the source offsets of what it moved
//! committed in the same transaction (to `offsets_group` on the target); an abort
//! makes the mover read again what the transaction had taken.

use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use rdkafka::client::ClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, DeliveryResult, Producer, ProducerContext, PurgeConfig};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{Message, Offset, TopicPartitionList};

use crate::group::{self, TxnError};
use crate::ledger::{Ledger, Report, Sent, Standing};
use crate::order::{self, ReplicaOrder};
use crate::plan::{self, Irregular};
use crate::slots::Slots;
use crate::source::{describe, Record, Source};
use crate::target::{Headers, TargetTopic};
use crate::txn::Txn;
use crate::verdicts::{Verdict, Verdicts};

create_exception!(
    _dataplane,
    MoverError,
    PyException,
    "A record could not be moved: the message names topic, partition and offset."
);

create_exception!(
    _dataplane,
    TransactionError,
    MoverError,
    "A transactional call failed. Attributes: code (librdkafka's error name, e.g. \
     _FENCED), fatal (make a new Mover), retriable (call it again), txn_requires_abort \
     (abort the transaction)."
);

/// librdkafka log lines kept for Python (`Mover.logs`), the newest ones.
const LOG_LINES: usize = 1000;
/// How long a seek (after a released record) may take.
const SEEK_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `release` waits for room in a full producer queue before it gives the
/// record back to its caller (held still), who keeps polling its group meanwhile.
const RELEASE_WAIT: Duration = Duration::from_secs(1);
/// How long the producer may take to learn a target topic's partitions when a record
/// is refused for a partition it does not know (`Inner::produce`).
const METADATA_TIMEOUT: Duration = Duration::from_secs(10);

impl rdkafka::util::IntoOpaque for Sent {
    fn into_ptr(self) -> *mut std::ffi::c_void {
        self.word() as *mut std::ffi::c_void
    }

    unsafe fn from_ptr(ptr: *mut std::ffi::c_void) -> Self {
        Sent::from_word(ptr as usize)
    }
}

#[derive(Default)]
struct Shared {
    ledgers: Mutex<Vec<Ledger>>,
    /// Deliveries the target refused: (slot, source offset, error).
    failures: Mutex<Vec<(usize, i64, String)>>,
    /// Client-level errors and librdkafka's log lines: (client, level, text).
    events: Mutex<Vec<(&'static str, String, String)>>,
    /// A fatal error of either client, raised by the next call.
    fatal: Mutex<Option<String>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while a lock was held cannot leave these in a state worth refusing.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    fn event(&self, client: &'static str, level: &str, text: String) {
        let mut events = lock(&self.events);
        if events.len() >= LOG_LINES {
            events.remove(0);
        }
        events.push((client, level.to_string(), text));
    }

    fn error(&self, client: &'static str, error: KafkaError, reason: &str) {
        let fatal = matches!(error.rdkafka_error_code(), Some(RDKafkaErrorCode::Fatal));
        let text = format!("{error}: {reason}");
        if fatal {
            lock(&self.fatal).get_or_insert_with(|| format!("the {client} client failed: {text}"));
        }
        self.event(client, if fatal { "fatal" } else { "error" }, text);
    }

    fn log(&self, client: &'static str, level: RDKafkaLogLevel, fac: &str, message: &str) {
        if (level as i32) <= (RDKafkaLogLevel::Warning as i32) {
            self.event(
                client,
                &format!("{level:?}").to_lowercase(),
                format!("{fac} {message}"),
            );
        }
    }
}

pub struct SourceContext(Arc<Shared>);
pub struct TargetContext(Arc<Shared>);

impl ClientContext for SourceContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        self.0.log("source", level, fac, message);
    }
    fn error(&self, error: KafkaError, reason: &str) {
        self.0.error("source", error, reason);
    }
}

impl ClientContext for TargetContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        self.0.log("target", level, fac, message);
    }
    fn error(&self, error: KafkaError, reason: &str) {
        self.0.error("target", error, reason);
    }
}

impl ProducerContext for TargetContext {
    type DeliveryOpaque = Sent;

    fn delivery(&self, result: &DeliveryResult<'_>, sent: Sent) {
        let (slot, offset) = (sent.slot(), sent.offset());
        let outcome = match result {
            Ok(message) => {
                let bytes =
                    message.key().map_or(0, <[u8]>::len) + message.payload().map_or(0, <[u8]>::len);
                let timestamp = message.timestamp().to_millis().unwrap_or(-1);
                lock(&self.0.ledgers)[slot].delivered(
                    offset,
                    message.offset(),
                    bytes as u64,
                    timestamp,
                )
            }
            Err((error, _)) => {
                let _ = lock(&self.0.ledgers)[slot].failed(offset);
                Err(error.to_string())
            }
        };
        if let Err(problem) = outcome {
            lock(&self.0.failures).push((slot, offset, problem));
        }
    }
}

/// Why the producer did not take a record (`Inner::produce`).
enum Refused {
    /// With the record's headers, given back.
    TooLarge(Headers),
    QueueFull,
    Other(String),
}

/// A record handed back to Python, kept until it is released or skipped.
struct Held {
    offset: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    timestamp: (i32, i64),
    headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    reason: Irregular,
}

struct Part {
    topic: String,
    partition: i32,
    target: String,
    /// The producer's handle on `target`.
    handle: TargetTopic,
    /// The largest record its target topic takes (key, value and headers, bytes),
    /// as `Mover.limits` said; a larger one is handed back as too large.
    limit: usize,
    held: Option<Held>,
    /// Which assignment of this mover it is (the n-th): a partition read again may
    /// take a lower, reused slot than its previous reading's, so `progress` orders
    /// by this, not by slot.
    generation: u64,
    /// Where its last `progress` report stood (None: not reported yet): a report that
    /// would tell the same is left out.
    reported: Option<Standing>,
}

/// The transactional mode's state: the open transaction's reach, the ledgers as
/// they were when it began (restored by an abort), and what committed (reported by
/// `progress` instead of what was merely acked).
struct Transactional {
    offsets_group: Option<String>,
    initialized: bool,
    txn: Txn,
    before: Vec<Ledger>,
    committed: Vec<Report>,
}

struct Inner {
    source: Source<SourceContext>,
    producer: BaseProducer<TargetContext>,
    slots: HashMap<String, HashMap<i32, usize>>,
    /// The slot of the last record read, by its topic's id and partition
    /// (`Record::topic_id`): a fetch's records come partition by partition. Cleared
    /// when the assignment changes.
    last_slot: Cell<Option<(usize, i32, usize)>>,
    /// `Mover.limits`: the largest record of each target topic.
    limits: HashMap<String, usize>,
    parts: Vec<Part>,
    /// Which slots of `parts` (and of the ledgers) are in use; freed ones are reused.
    slot_table: Slots,
    /// Assignments made so far (`Part::generation`).
    assignments: u64,
    provenance: Vec<(String, Option<Vec<u8>>)>,
    offset_header: Option<String>,
    topic_header: Option<String>,
    reserved: Vec<Vec<u8>>,
    /// The same names as C strings, for removing them from a record's headers.
    reserved_names: Vec<CString>,
    /// Per topic and partition, the order of our copies read (`Verdict::Loop`): kept
    /// across readings of the partition and handed to a Mover made anew (`adopt`).
    orders: HashMap<String, HashMap<i32, ReplicaOrder>>,
    /// Python's verdicts on records carrying reserved headers, by provenance.
    verdicts: Verdicts,
    /// Records skipped on a verdict since `skips` was last called: by (slot, reason),
    /// (count, first offset).
    skips: HashMap<(usize, Arc<str>), (u64, i64)>,
    transactional: Option<Transactional>,
    /// An error met after records were handed back in the same `run`: raised by the
    /// next one, so that Python sees those records first.
    deferred: Option<String>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The target topic handles go before the producer they belong to.
        self.parts.clear();
    }
}

type OwnedHeader = (String, Option<Vec<u8>>);
/// What `skips` reports: (topic, partition, reason, count, first offset).
type Skipped = (String, i32, String, u64, i64);

fn config(
    side: &str,
    settings: &HashMap<String, String>,
    forced: &[(&str, &str, &str)],
) -> PyResult<ClientConfig> {
    let mut config = ClientConfig::new();
    for (key, value) in settings {
        if let Some((_, wanted, why)) = forced.iter().find(|(k, _, _)| k == key) {
            if value != wanted {
                return Err(PyValueError::new_err(format!(
                    "{side} setting {key}={value}: the mover needs {key}={wanted} ({why}); \
                     leave {key} out of the {side} settings"
                )));
            }
        }
        config.set(key, value);
    }
    for (key, value, _) in forced {
        config.set(*key, *value);
    }
    Ok(config)
}

/// `message` with the values of the secret keys of either settings dict replaced
/// (`plan::redact`): only secrets, so a short ordinary value ("error") leaves the
/// message's words alone.
fn redacted(settings: &[&HashMap<String, String>], message: String) -> String {
    let secrets = plan::secret_values(
        settings
            .iter()
            .flat_map(|s| s.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
    );
    plan::redact(&message, &secrets)
}

/// Pause `slot`'s partition and keep its record for Python.
fn hold(
    source: &Source<SourceContext>,
    parts: &mut [Part],
    slot: usize,
    held: Held,
) -> Result<(), String> {
    let part = &mut parts[slot];
    source.pause(&part.topic, part.partition)?;
    part.held = Some(held);
    Ok(())
}

impl Inner {
    /// The readings whose slots are in use, oldest assignment first: a partition read
    /// more than once comes last with its newest reading, and one given up (stopped,
    /// held for a config sync) keeps answering from its last reading.
    fn readings(&self) -> Vec<&Part> {
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

    fn slot(&self, topic: &str, partition: i32) -> Option<usize> {
        self.slots
            .get(topic)
            .and_then(|p| p.get(&partition))
            .copied()
    }

    /// The slot of a record (its topic's name read only when the partition differs
    /// from the last record's).
    fn slot_of_record(&self, record: &Record<'_>) -> Option<usize> {
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

    /// A record's headers: its own as they came (`own`, taken from the record), then
    /// our provenance.
    fn headers(&self, own: Option<Headers>, topic: &str, offset: i64) -> Result<Headers, String> {
        let mut headers = own.unwrap_or_else(|| Headers::with_capacity(self.provenance.len() + 2));
        for (key, value) in &self.provenance {
            headers.add(key.as_bytes(), value.as_deref())?;
        }
        if let Some(key) = &self.offset_header {
            headers.add(key.as_bytes(), Some(&offset.to_be_bytes()))?;
        }
        if let Some(key) = &self.topic_header {
            headers.add(key.as_bytes(), Some(topic.as_bytes()))?;
        }
        Ok(headers)
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

    /// The headers of a record that carries reserved names, copied on Python's
    /// verdict: its own (`own`, taken from it) less the reserved ones (Python's
    /// rewrite drops them too), ours, then the verdict's (`extra`).
    fn rewritten(
        &self,
        mut own: Headers,
        extra: &[(Vec<u8>, Option<Vec<u8>>)],
        topic: &str,
        offset: i64,
    ) -> Result<Headers, String> {
        for name in &self.reserved_names {
            own.remove(name)?;
        }
        let mut headers = self.headers(Some(own), topic, offset)?;
        for (name, value) in extra {
            headers.add(name, value.as_deref())?;
        }
        Ok(headers)
    }

    /// The record at `offset` of `slot` is not replicated, on Python's verdict
    /// (`reason`): the ledger moves past it, and `skips` reports it.
    fn skip(&mut self, slot: usize, offset: i64, reason: &Arc<str>) -> Result<(), String> {
        lock(&self.source_shared().ledgers)[slot].skipped(offset)?;
        settled(&mut self.transactional, slot, offset);
        let counted = self
            .skips
            .entry((slot, reason.clone()))
            .or_insert((0, offset));
        counted.0 += 1;
        Ok(())
    }

    /// Produce one record to `slot`'s target partition. While the producer's queue
    /// is full it serves delivery reports, until `room_until` (then `Refused::QueueFull`)
    /// or, without one, until it takes the record.
    #[allow(clippy::too_many_arguments)]
    fn produce(
        &self,
        slot: usize,
        offset: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        timestamp: (i32, i64),
        mut headers: Headers,
        room_until: Option<Instant>,
    ) -> Result<(), Refused> {
        let part = &self.parts[slot];
        let Some(mut sent) = Sent::new(slot, offset) else {
            return Err(Refused::Other(format!(
                "slot {slot} or source offset {offset} is beyond what a delivery report can \
                 carry (65,536 partitions a Mover, offsets below 2^48)"
            )));
        };
        // The record's own timestamp; 0 (none: the producer's clock) when it has none.
        let timestamp_ms = if timestamp.0 != 0 && timestamp.1 >= 0 {
            timestamp.1
        } else {
            0
        };
        let mut refreshed = false;
        loop {
            let refused = match part.handle.produce(
                &self.producer,
                part.partition,
                key,
                value,
                timestamp_ms,
                headers,
                sent,
            ) {
                Ok(()) => break,
                Err((code, back, opaque)) => {
                    (headers, sent) = (back, opaque);
                    code
                }
            };
            match refused {
                RDKafkaErrorCode::QueueFull => {
                    if room_until.is_some_and(|until| Instant::now() >= until) {
                        return Err(Refused::QueueFull);
                    }
                    self.producer.poll(Duration::from_millis(100));
                }
                RDKafkaErrorCode::MessageSizeTooLarge => return Err(Refused::TooLarge(headers)),
                RDKafkaErrorCode::UnknownPartition if !refreshed => {
                    // The producer's metadata may predate partitions added to the
                    // target topic (librdkafka refreshes it only every
                    // topic.metadata.refresh.interval.ms): ask the target once.
                    refreshed = true;
                    let target = std::slice::from_ref(&part.target);
                    let count = self
                        .know(target, METADATA_TIMEOUT)
                        .map_err(Refused::Other)?[&part.target];
                    if count <= part.partition as usize {
                        return Err(Refused::Other(format!(
                            "{} has {count} partitions on the target: partition {} does not \
                             exist there (the remote topic must grow with its source topic)",
                            part.target, part.partition
                        )));
                    }
                }
                RDKafkaErrorCode::Fatal => {
                    let fatal = self.producer_fatal();
                    return Err(Refused::Other(fatal.unwrap_or_else(|| "Fatal".into())));
                }
                code => {
                    return Err(Refused::Other(
                        KafkaError::MessageProduction(code).to_string(),
                    ))
                }
            }
        }
        lock(&self.source_shared().ledgers)[slot]
            .sent(offset)
            .map_err(Refused::Other)
    }

    /// Ask the target for the `targets` topics' metadata through the producer's own
    /// handle (`rd_kafka_metadata`: librdkafka updates the partitions the producer
    /// knows from the answer) and return their partition counts. One topic is asked
    /// alone; several in one request for every topic of the cluster: a worker given
    /// thousands of partitions asks once, not once per topic.
    fn know(
        &self,
        targets: &[String],
        timeout: Duration,
    ) -> Result<HashMap<String, usize>, String> {
        let asking = |target: &str| format!("learning the partitions of {target} on the target");
        let single = match targets {
            [one] => Some(one.as_str()),
            _ => None,
        };
        let metadata = self
            .producer
            .client()
            .fetch_metadata(single, timeout)
            .map_err(|e| format!("{}: {e}", asking(&targets.join(", "))))?;
        let answered: HashMap<&str, _> = metadata.topics().iter().map(|t| (t.name(), t)).collect();
        let mut counts = HashMap::with_capacity(targets.len());
        for target in targets {
            let topic = answered.get(target.as_str()).ok_or_else(|| {
                format!("{}: the target's answer does not name it", asking(target))
            })?;
            if let Some(code) = topic.error() {
                return Err(format!("{}: {}", asking(target), describe(code)));
            }
            counts.insert(target.clone(), topic.partitions().len());
        }
        Ok(counts)
    }

    fn source_shared(&self) -> &Arc<Shared> {
        &self.producer.context().0
    }

    fn where_(&self, slot: usize, offset: i64) -> String {
        let part = &self.parts[slot];
        format!(
            "{} partition {} offset {offset} (to {})",
            part.topic, part.partition, part.target
        )
    }

    /// The producer's fatal error with its cause (librdkafka's `rd_kafka_fatal_error`:
    /// the error callback reports the cause's code, e.g. a batch the target refused
    /// tripping the gapless guarantee, and later calls only say "Fatal").
    fn producer_fatal(&self) -> Option<String> {
        let (code, reason) = self.producer.client().fatal_error()?;
        Some(format!(
            "the target client failed fatally: {code:?}: {reason}"
        ))
    }

    /// Raise the first delivery failure or fatal client error.
    fn failures(&self) -> Result<(), String> {
        let shared = self.source_shared();
        if let Some(fatal) = lock(&shared.fatal).clone() {
            return Err(fatal);
        }
        if let Some(fatal) = self.producer_fatal() {
            return Err(fatal);
        }
        let failures = lock(&shared.failures);
        if let Some((slot, offset, problem)) = failures.first() {
            return Err(format!(
                "delivering {}: {problem}",
                self.where_(*slot, *offset)
            ));
        }
        Ok(())
    }

    fn run(
        &mut self,
        max_records: usize,
        timeout: Duration,
    ) -> Result<(usize, Vec<usize>), String> {
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
    ) -> Result<(), String> {
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
                return Err(format!(
                    "consuming {} partition {} at offset {}: {} ({detail})",
                    record.topic(),
                    record.partition(),
                    record.offset(),
                    describe(code)
                ));
            }
            let offset = record.offset();
            let Some(slot) = self.slot_of_record(&record) else {
                return Err(format!(
                    "consuming {} partition {} at offset {offset}: a record of a partition the \
                     mover was not assigned",
                    record.topic(),
                    record.partition()
                ));
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
                    return Err(format!(
                        "producing {}: {problem}",
                        self.where_(slot, offset)
                    ))
                }
            }
            if *moved % 1024 == 0 {
                self.producer.poll(Duration::ZERO);
            }
        }
        self.producer.poll(Duration::ZERO);
        self.failures()
    }

    /// Settle `slot`'s held record; false when the producer's queue stayed full for
    /// `RELEASE_WAIT` (the record stays held: release it again later), so that the
    /// caller goes back to polling its group rather than waiting here without end.
    fn release(&mut self, slot: usize, headers: Option<Vec<OwnedHeader>>) -> Result<bool, String> {
        if self.parts[slot].held.is_some() {
            self.in_transaction()?;
        }
        let Some(held) = self.parts[slot].held.take() else {
            let part = &self.parts[slot];
            return Err(format!(
                "{} partition {} holds no record",
                part.topic, part.partition
            ));
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
                        Refused::TooLarge(_) => "too large for the producer".into(),
                        Refused::QueueFull => {
                            self.parts[slot].held = Some(held);
                            return Ok(false);
                        }
                        Refused::Other(problem) => problem,
                    };
                    let at = self.where_(slot, held.offset);
                    self.parts[slot].held = Some(held);
                    return Err(format!("producing {at}: {problem}"));
                }
            }
            None => {
                lock(&self.source_shared().ledgers)[slot].skipped(held.offset)?;
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

/// A transactional mover's open transaction took the record at `offset` of `slot`
/// (functions, not methods: the loop holds a record borrowed from the source).
fn took(transactional: &mut Option<Transactional>, slot: usize, offset: i64) {
    if let Some(t) = transactional.as_mut() {
        t.txn.took(slot, offset);
    }
}

/// ... and produced it, or skipped it on Python's word.
fn settled(transactional: &mut Option<Transactional>, slot: usize, offset: i64) {
    if let Some(t) = transactional.as_mut() {
        t.txn.settled(slot, offset);
    }
}

/// The transactional mode (`Mover(transactional_id=...)`).
impl Inner {
    /// Transactional and no transaction open: nothing may be produced or skipped.
    fn in_transaction(&self) -> Result<(), String> {
        match &self.transactional {
            Some(t) if !t.txn.is_open() => Err(
                "the mover is transactional and no transaction is open: call \
                 begin_transaction() first"
                    .into(),
            ),
            _ => Ok(()),
        }
    }

    fn txn_state(&mut self) -> Result<&mut Transactional, TxnError> {
        self.transactional.as_mut().ok_or_else(|| {
            TxnError::plain(
                "the mover is not transactional: make it with Mover(..., \
                 transactional_id=...)"
                    .into(),
            )
        })
    }

    fn init_transactions(&mut self, timeout: Duration) -> Result<(), TxnError> {
        self.txn_state()?;
        self.producer
            .init_transactions(timeout)
            .map_err(|e| TxnError::from_kafka(&e))?;
        self.txn_state()?.initialized = true;
        Ok(())
    }

    fn begin_transaction(&mut self) -> Result<(), TxnError> {
        let state = self.txn_state()?;
        if !state.initialized {
            return Err(TxnError::plain(
                "call init_transactions() before the first begin_transaction()".into(),
            ));
        }
        state.txn.begin().map_err(TxnError::plain)?;
        if let Err(e) = self.producer.begin_transaction() {
            self.txn_state()?.txn.end();
            return Err(TxnError::from_kafka(&e));
        }
        let before = lock(&self.source_shared().ledgers).clone();
        self.txn_state()?.before = before;
        Ok(())
    }

    fn open_transaction(&mut self) -> Result<&mut Transactional, TxnError> {
        let state = self.txn_state()?;
        if !state.txn.is_open() {
            return Err(TxnError::plain("no transaction is open".into()));
        }
        Ok(state)
    }

    /// Send the transaction's source offsets (if an offsets group is set) and commit
    /// it; the offsets committed, {slot: next source offset}.
    fn commit_transaction(&mut self, timeout: Duration) -> Result<Vec<(usize, i64)>, TxnError> {
        let deadline = Instant::now() + timeout;
        let state = self.open_transaction()?;
        let positions = state.txn.positions();
        let group_id = state.offsets_group.clone();
        if let (Some(group_id), false) = (group_id, positions.is_empty()) {
            let mut offsets = TopicPartitionList::with_capacity(positions.len());
            for &(slot, next) in &positions {
                let part = &self.parts[slot];
                let mut element = offsets.add_partition(&part.target, part.partition);
                element
                    .set_offset(Offset::Offset(next))
                    .map_err(|e| TxnError::plain(e.to_string()))?;
                // No commit metadata: rdkafka's `set_metadata` stores it without a NUL
                // terminator, and what the target's group then held read past its end
                // (garbage after the 27 bytes written, 2026-11-29); to investigate.
            }
            group::send_offsets(
                self.producer.client().native_ptr(),
                &offsets,
                &group_id,
                deadline.saturating_duration_since(Instant::now()),
            )?;
        }
        self.producer
            .commit_transaction(deadline.saturating_duration_since(Instant::now()))
            .map_err(|e| TxnError::from_kafka(&e))?;
        // The commit flushed: every delivery report of the transaction was served.
        let reports: Vec<Report> = lock(&self.source_shared().ledgers)
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
    fn abort_transaction(&mut self, timeout: Duration) -> Result<Vec<(usize, i64)>, TxnError> {
        let deadline = Instant::now() + timeout;
        self.open_transaction()?;
        // librdkafka's abort waits for the delivery reports of what it purges to be
        // served, and this producer serves them only when polled: purge and serve
        // them first, so the abort does not wait its whole timeout.
        self.producer.purge(PurgeConfig::default().queue());
        self.producer
            .flush(deadline.saturating_duration_since(Instant::now()))
            .map_err(|e| TxnError::from_kafka(&e))?;
        self.producer
            .abort_transaction(deadline.saturating_duration_since(Instant::now()))
            .map_err(|e| TxnError::from_kafka(&e))?;
        let _ = self
            .producer
            .flush(deadline.saturating_duration_since(Instant::now()));
        let shared = self.source_shared().clone();
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
                .map_err(|e| {
                    TxnError::plain(format!(
                        "aborted, but {topic} partition {partition} could not be sought back \
                         to offset {first}: {e}"
                    ))
                })?;
            out.push((slot, first));
        }
        Ok(out)
    }
}

/// What a caught panic says, as a MoverError's text: Python's `except Exception`
/// does not catch pyo3's PanicException, so a panic must never reach it as one.
fn panicked(panic: &(dyn std::any::Any + Send)) -> String {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into());
    format!(
        "the data plane failed on an internal error ({what}); the mover is closed and \
         nothing it had not delivered counts as replicated; please report this with the log"
    )
}

/// Moves records of one flow from the source cluster to the target cluster.
///
/// Mover(source_config, target_config, provenance, offset_header=None,
///       topic_header=None, reserved_headers=(), transactional_id=None,
///       offsets_group=None)
#[pyclass(module = "replicator._dataplane")]
pub struct Mover {
    inner: Mutex<Option<Inner>>,
}

impl Mover {
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Inner) -> Result<T, String> + Send,
    ) -> PyResult<T> {
        py.allow_threads(|| {
            let mut guard = lock(&self.inner);
            let Some(inner) = guard.as_mut() else {
                return Err("the mover is closed".to_string());
            };
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(inner))) {
                Ok(out) => out,
                Err(panic) => {
                    // A bug: the mover's state is not to be trusted. It is closed (its
                    // queue dropped, nothing acknowledged counted), so the caller makes
                    // a new one that resumes from the target, as after any MoverError.
                    *guard = None;
                    Err(panicked(&*panic))
                }
            }
        })
        .map_err(MoverError::new_err)
    }

    /// `with`, for the transactional calls: a failure raises TransactionError with
    /// librdkafka's verdict on it as attributes.
    fn with_txn<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Inner) -> Result<T, TxnError> + Send,
    ) -> PyResult<T> {
        let out = py.allow_threads(|| {
            let mut guard = lock(&self.inner);
            let Some(inner) = guard.as_mut() else {
                return Err(TxnError::plain("the mover is closed".into()));
            };
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(inner))) {
                Ok(out) => out,
                Err(panic) => {
                    *guard = None; // as in `with`
                    Err(TxnError::plain(panicked(&*panic)))
                }
            }
        });
        out.map_err(|e| {
            let error = TransactionError::new_err(format!("{}: {}", e.code, e.message));
            let value = error.value(py);
            for (name, flag) in [
                ("fatal", e.fatal),
                ("retriable", e.retriable),
                ("txn_requires_abort", e.abortable),
            ] {
                if let Err(failed) = value.setattr(name, flag) {
                    return failed;
                }
            }
            if let Err(failed) = value.setattr("code", e.code.as_str()) {
                return failed;
            }
            error
        })
    }
}

fn seconds(timeout: f64) -> PyResult<Duration> {
    if timeout.is_finite() && timeout >= 0.0 {
        Ok(Duration::from_secs_f64(timeout))
    } else {
        Err(PyValueError::new_err(format!(
            "timeout={timeout}: give seconds >= 0"
        )))
    }
}

/// {(source topic, partition): offset} of a transactional call's per-slot answer.
fn by_partition<'py>(
    py: Python<'py>,
    mover: &Mover,
    slots: Vec<(usize, i64)>,
) -> PyResult<Bound<'py, PyDict>> {
    let guard = lock(&mover.inner);
    let out = PyDict::new(py);
    if let Some(inner) = guard.as_ref() {
        for (slot, offset) in slots {
            let part = &inner.parts[slot];
            out.set_item((part.topic.clone(), part.partition), offset)?;
        }
    }
    Ok(out)
}

fn slot_of(inner: &Inner, topic: &str, partition: i32) -> Result<usize, String> {
    inner
        .slot(topic, partition)
        .ok_or_else(|| format!("{topic} partition {partition} is not assigned to the mover"))
}

#[pymethods]
impl Mover {
    #[new]
    #[pyo3(signature = (source_config, target_config, provenance, offset_header=None, topic_header=None, reserved_headers=Vec::new(), transactional_id=None, offsets_group=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        source_config: HashMap<String, String>,
        target_config: HashMap<String, String>,
        provenance: Vec<OwnedHeader>,
        offset_header: Option<String>,
        topic_header: Option<String>,
        reserved_headers: Vec<String>,
        transactional_id: Option<String>,
        offsets_group: Option<String>,
    ) -> PyResult<Self> {
        if target_config.contains_key("transactional.id") {
            return Err(PyValueError::new_err(
                "target setting transactional.id: the mover sets it; leave transactional.id \
                 out of the target settings and give Mover(..., transactional_id=...)",
            ));
        }
        if transactional_id.as_deref() == Some("") {
            return Err(PyValueError::new_err(
                "transactional_id is empty: give the partition's stable transactional id, \
                 or None for an idempotent (non-transactional) mover",
            ));
        }
        if let Some(group) = &offsets_group {
            if transactional_id.is_none() {
                return Err(PyValueError::new_err(format!(
                    "offsets_group={group:?}: offsets are committed in the mover's \
                     transactions; give transactional_id too, or leave offsets_group out"
                )));
            }
            if group.is_empty() {
                return Err(PyValueError::new_err(
                    "offsets_group is empty: give the target group the source offsets are \
                     committed to, or None",
                ));
            }
        }
        let mut source_settings = source_config.clone();
        source_settings
            .entry("group.id".into())
            .or_insert_with(|| "replicator-dataplane".into());
        let source = config(
            "source",
            &source_settings,
            &[
                (
                    "enable.auto.commit",
                    "false",
                    "Python commits what was delivered",
                ),
                (
                    "enable.auto.offset.store",
                    "false",
                    "Python commits what was delivered",
                ),
                (
                    "isolation.level",
                    "read_committed",
                    "aborted records are not replicated",
                ),
                (
                    "enable.partition.eof",
                    "false",
                    "the mover does not report ends",
                ),
            ],
        )?;
        let mut target = config(
            "target",
            &target_config,
            &[(
                "enable.idempotence",
                "true",
                "no duplicates and no reordering on retries",
            )],
        )?;
        if let Some(id) = &transactional_id {
            target.set("transactional.id", id);
        }
        let all = [&source_config, &target_config];
        let shared = Arc::new(Shared::default());
        let source = Source::new(&source, SourceContext(shared.clone())).map_err(|e| {
            PyValueError::new_err(format!("source settings: {}", redacted(&all, e)))
        })?;
        let producer: BaseProducer<TargetContext> = target
            .create_with_context(TargetContext(shared))
            .map_err(|e: KafkaError| {
                PyValueError::new_err(format!(
                    "target settings: {}",
                    redacted(&all, e.to_string())
                ))
            })?;
        let reserved_names = reserved_headers
            .iter()
            .map(|name| CString::new(name.as_str()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| PyValueError::new_err("a reserved header name holds a NUL"))?;
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
        Ok(Mover {
            inner: Mutex::new(Some(Inner {
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
                transactional: transactional_id.map(|_| Transactional {
                    offsets_group,
                    initialized: false,
                    txn: Txn::default(),
                    before: Vec::new(),
                    committed: Vec::new(),
                }),
            })),
        })
    }

    /// Read these partitions: [(source topic, partition, start offset, target topic)].
    /// The start offset may be logical (-2 beginning, -1 end).
    fn assign(&self, py: Python<'_>, partitions: Vec<(String, i32, i64, String)>) -> PyResult<()> {
        self.with(py, move |inner| {
            for (topic, partition, _, target) in &partitions {
                if inner.slot(topic, *partition).is_some() {
                    return Err(format!("{topic} partition {partition} is already assigned"));
                }
                if target.is_empty() {
                    return Err(format!(
                        "{topic} partition {partition}: the target topic is empty"
                    ));
                }
            }
            let list: Vec<(&str, i32, Option<i64>)> = partitions
                .iter()
                .map(|(t, p, o, _)| (t.as_str(), *p, Some(*o)))
                .collect();
            let handles = partitions
                .iter()
                .map(|(_, _, _, target)| TargetTopic::new(&inner.producer, target))
                .collect::<Result<Vec<_>, _>>()?;
            inner.source.assign(&list)?;
            inner.last_slot.set(None);
            for ((topic, partition, _, target), handle) in partitions.into_iter().zip(handles) {
                let slot = inner.slot_table.take();
                inner
                    .slots
                    .entry(topic.clone())
                    .or_default()
                    .insert(partition, slot);
                let limit = inner.limits.get(&target).copied().unwrap_or(usize::MAX);
                let part = Part {
                    topic,
                    partition,
                    target,
                    handle,
                    limit,
                    held: None,
                    generation: inner.assignments,
                    reported: None,
                };
                inner.assignments += 1;
                let shared = inner.source_shared().clone();
                let mut ledgers = lock(&shared.ledgers);
                if slot == inner.parts.len() {
                    ledgers.push(Ledger::new());
                    inner.parts.push(part);
                } else {
                    ledgers[slot] = Ledger::new();
                    inner.parts[slot] = part;
                }
            }
            Ok(())
        })
    }

    /// Stop reading these partitions: [(source topic, partition)]. Records in flight
    /// are still delivered; `progress` reports them.
    fn unassign(&self, py: Python<'_>, partitions: Vec<(String, i32)>) -> PyResult<()> {
        self.with(py, move |inner| {
            for (topic, partition) in &partitions {
                slot_of(inner, topic, *partition)?;
            }
            let list: Vec<(&str, i32, Option<i64>)> = partitions
                .iter()
                .map(|(t, p)| (t.as_str(), *p, None))
                .collect();
            inner.source.unassign(&list)?;
            inner.last_slot.set(None);
            for (topic, partition) in &partitions {
                if let Some(by_partition) = inner.slots.get_mut(topic) {
                    by_partition.remove(partition);
                }
            }
            Ok(())
        })
    }

    /// Move records for up to `timeout` seconds (returning early once records stop
    /// arriving) or `max_records`. Returns (records moved, records handed back); each
    /// handed-back record is (topic, partition, offset, key, value, timestamp_type,
    /// timestamp, headers, reason) and its partition waits for `release`. Raises
    /// MoverError for a refused or failed record, naming topic, partition and offset;
    /// when records were handed back earlier in the call, they are returned and the
    /// next call raises.
    #[pyo3(signature = (max_records=10_000, timeout=0.1))]
    fn move_records<'py>(
        &self,
        py: Python<'py>,
        max_records: usize,
        timeout: f64,
    ) -> PyResult<(usize, Bound<'py, PyList>)> {
        if !(timeout.is_finite() && timeout >= 0.0) {
            return Err(PyValueError::new_err(format!(
                "timeout={timeout}: give seconds >= 0"
            )));
        }
        let (moved, handed) = self.with(py, move |inner| {
            inner.run(max_records, Duration::from_secs_f64(timeout))
        })?;
        let guard = lock(&self.inner);
        let inner = guard.as_ref().expect("open: run succeeded");
        let out = PyList::empty(py);
        for slot in handed {
            let part = &inner.parts[slot];
            let held = part.held.as_ref().expect("held: run handed it back");
            let bytes = |b: &Option<Vec<u8>>| b.as_ref().map(|b| PyBytes::new(py, b).into_any());
            let headers = PyList::empty(py);
            for (name, value) in &held.headers {
                let name = String::from_utf8_lossy(name).into_owned();
                headers.append((name, bytes(value)))?;
            }
            let item = PyTuple::new(
                py,
                [
                    part.topic.clone().into_pyobject(py)?.into_any(),
                    part.partition.into_pyobject(py)?.into_any(),
                    held.offset.into_pyobject(py)?.into_any(),
                    bytes(&held.key).into_pyobject(py)?.into_any(),
                    bytes(&held.value).into_pyobject(py)?.into_any(),
                    held.timestamp.0.into_pyobject(py)?.into_any(),
                    held.timestamp.1.into_pyobject(py)?.into_any(),
                    headers.into_any(),
                    held.reason.as_str().into_pyobject(py)?.into_any(),
                ],
            )?;
            out.append(item)?;
        }
        Ok((moved, out))
    }

    /// Python's verdict on records of `topic` that carry reserved headers with the
    /// provenance `headers` carry (the offset header's value aside): skip them for
    /// `skip` (a loop; with `in_order`, only while they stand in the order of our
    /// copies, `order`: one out of order is an application's re-drive, copied as its
    /// own), or, with None, copy them with their own headers less the reserved ones,
    /// ours, then `extra`. The next such records are settled without being handed
    /// back (`verdicts`).
    #[pyo3(signature = (topic, headers, skip, extra, in_order=false))]
    fn learn(
        &self,
        py: Python<'_>,
        topic: String,
        headers: Vec<OwnedHeader>,
        skip: Option<String>,
        extra: Vec<OwnedHeader>,
        in_order: bool,
    ) -> PyResult<()> {
        self.with(py, move |inner| {
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
            inner.verdicts.learn(&topic, &bytes(headers), verdict);
            Ok(())
        })
    }

    /// Take on what `old` (the Mover this one replaces) learnt of records carrying
    /// reserved headers: Python's verdicts and the order of our copies per partition.
    /// Without them, a Mover made anew (new size limits, a rewind) would hand back
    /// the first record of every provenance again, and Python, which did not see the
    /// copies the old Mover skipped, would order it by older ones.
    fn adopt(&self, py: Python<'_>, old: PyRef<'_, Mover>) -> PyResult<()> {
        let cell = &old.inner;
        let learnt = py.allow_threads(move || {
            lock(cell)
                .as_ref()
                .map(|inner| (inner.verdicts.clone(), inner.orders.clone()))
        });
        let Some((verdicts, orders)) = learnt else {
            return Ok(()); // closed: nothing to take on
        };
        self.with(py, move |inner| {
            inner.verdicts = verdicts;
            inner.orders = orders;
            Ok(())
        })
    }

    /// The records skipped on a learnt verdict since the last call: [(topic,
    /// partition, reason, count, first offset)].
    fn skips(&self, py: Python<'_>) -> PyResult<Vec<Skipped>> {
        self.with(py, |inner| {
            let skips = std::mem::take(&mut inner.skips);
            Ok(skips
                .into_iter()
                .map(|((slot, reason), (count, first))| {
                    let part = &inner.parts[slot];
                    let reason = reason.to_string();
                    (part.topic.clone(), part.partition, reason, count, first)
                })
                .collect())
        })
    }

    /// Settle the record handed back for (topic, partition): produce it with exactly
    /// `headers` (Python's rewrite: its own headers and the provenance), or with None
    /// skip it (a loop). The partition then reads on from the next offset. False when
    /// the producer's queue stayed full for a second: the record is still held, and
    /// the caller releases it again after polling its group.
    #[pyo3(signature = (topic, partition, headers))]
    fn release(
        &self,
        py: Python<'_>,
        topic: String,
        partition: i32,
        headers: Option<Vec<OwnedHeader>>,
    ) -> PyResult<bool> {
        self.with(py, move |inner| {
            let slot = slot_of(inner, &topic, partition)?;
            inner.release(slot, headers)
        })
    }

    /// Per partition, what was delivered since the last call: {(topic, partition):
    /// (delivered_through, target_offset, in_flight, records, bytes, shifts,
    /// timestamp_ms)}, the readings of a partition assigned again added up. Only the
    /// partitions with news are told (records delivered, shifts, or where it stands
    /// moved: delivered_through, target_offset, in_flight); every one the first time:
    /// at rest a call costs nothing per partition on the caller's side.
    /// delivered_through is the highest source offset every record up to which is
    /// acked by the target (or skipped), -1 for none; target_offset that of the newest
    /// acked record; shifts the (source, target) pairs where the mapping stopped being
    /// a plain shift.
    fn progress<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let merged = self.with(py, |inner| {
            inner.producer.poll(Duration::ZERO);
            let shared = inner.source_shared().clone();
            let mut ledgers = lock(&shared.ledgers);
            // The newest reading of each partition: an older one may be freed.
            let mut newest: HashMap<(&str, i32), u64> = HashMap::new();
            for (slot, part) in inner.parts.iter().enumerate() {
                if inner.slot_table.in_use(slot) {
                    let at = newest
                        .entry((part.topic.as_str(), part.partition))
                        .or_default();
                    *at = (*at).max(part.generation);
                }
            }
            let retired: Vec<bool> = (inner.parts.iter().enumerate())
                .map(|(slot, part)| {
                    inner.slot_table.in_use(slot)
                        && newest[&(part.topic.as_str(), part.partition)] > part.generation
                })
                .collect();
            drop(newest);
            let mut reports = Vec::with_capacity(inner.parts.len());
            let mut done = Vec::new();
            for slot in 0..inner.parts.len() {
                if !inner.slot_table.in_use(slot) {
                    continue;
                }
                let ledger = &mut ledgers[slot];
                let report = match inner.transactional.as_mut() {
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
                        let part = &inner.parts[slot];
                        let skipping = inner.skips.keys().any(|(s, _)| *s == slot);
                        if retired[slot]
                            && ledger.in_flight() == 0
                            && part.held.is_none()
                            && !skipping
                        {
                            done.push(slot);
                        }
                        report
                    }
                };
                let part = &mut inner.parts[slot];
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
                let part = &inner.parts[slot];
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
            let told: Vec<((String, i32), Report)> = merged
                .into_iter()
                .filter(|(_, news, _)| *news)
                .map(|((topic, partition), _, report)| ((topic.to_string(), partition), report))
                .collect();
            for slot in done {
                inner.slot_table.free(slot);
            }
            Ok(told)
        })?;
        let out = PyDict::new(py);
        for (key, r) in merged {
            out.set_item(
                key,
                (
                    r.delivered_through,
                    r.target_offset,
                    r.in_flight,
                    r.records,
                    r.bytes,
                    r.shifts,
                    r.timestamp_ms,
                ),
            )?;
        }
        Ok(out)
    }

    /// Have the producer learn the partitions of these target topics now, and return
    /// {target topic: partition count}. Call it before assigning partitions whose
    /// target partitions were just created: the producer refuses a record for a
    /// partition it does not know, and librdkafka refreshes a producer's metadata
    /// only every topic.metadata.refresh.interval.ms (5 minutes by default). Raises
    /// MoverError naming the topic when the target does not answer within `timeout`
    /// seconds or answers with an error for it.
    /// The largest record each target topic takes, {target topic: bytes of key, value
    /// and headers}: a record above its partition's is handed back as too large
    /// (the producer's message.max.bytes is the largest topic's). Topics not named
    /// keep theirs; unknown ones have none but the producer's.
    fn limits(&self, py: Python<'_>, limits: HashMap<String, usize>) -> PyResult<()> {
        self.with(py, move |inner| {
            for part in &mut inner.parts {
                if let Some(limit) = limits.get(&part.target) {
                    part.limit = *limit;
                }
            }
            inner.limits.extend(limits);
            Ok(())
        })
    }

    #[pyo3(signature = (topics, timeout=10.0))]
    fn know(
        &self,
        py: Python<'_>,
        topics: Vec<String>,
        timeout: f64,
    ) -> PyResult<HashMap<String, usize>> {
        let timeout = seconds(timeout)?;
        self.with(py, move |inner| inner.know(&topics, timeout))
    }

    /// Drop what the producer has not sent yet (its queue), keeping what is in flight,
    /// whose fate only the target knows; returns how many records are in flight. A
    /// rewind does this, then waits (`outstanding`) until they settled before any
    /// partition reads the target's tail again: one that lands after that read
    /// would be copied twice.
    fn purge_queue(&self, py: Python<'_>) -> PyResult<i32> {
        self.with(py, |inner| {
            inner.producer.purge(PurgeConfig::default().queue());
            inner.producer.poll(Duration::ZERO);
            Ok(inner.producer.in_flight_count())
        })
    }

    /// Records the producer still has in flight (serving delivery reports first);
    /// errors of those deliveries are not raised here (see `purge_queue`).
    fn outstanding(&self, py: Python<'_>) -> PyResult<i32> {
        self.with(py, |inner| {
            inner.producer.poll(Duration::ZERO);
            Ok(inner.producer.in_flight_count())
        })
    }

    /// Wait up to `timeout` seconds for every record in flight to be acked; returns
    /// how many are still in flight. Raises MoverError for a failed delivery.
    #[pyo3(signature = (timeout=10.0))]
    fn flush(&self, py: Python<'_>, timeout: f64) -> PyResult<i32> {
        self.with(py, move |inner| {
            let _ = inner
                .producer
                .flush(Duration::from_secs_f64(timeout.max(0.0)));
            inner.producer.poll(Duration::ZERO);
            inner.failures()?;
            Ok(inner.producer.in_flight_count())
        })
    }

    /// Transactional mover: initialise the producer's transactions, which fences every
    /// earlier producer with the same transactional id and settles its open
    /// transaction (aborted, or its commit completed), so that what the target and
    /// the offsets group say next is final. Call once, before `begin_transaction`.
    #[pyo3(signature = (timeout=30.0))]
    fn init_transactions(&self, py: Python<'_>, timeout: f64) -> PyResult<()> {
        let timeout = seconds(timeout)?;
        self.with_txn(py, move |inner| inner.init_transactions(timeout))
    }

    /// Open a transaction: `move_records` and `release` work only inside one.
    fn begin_transaction(&self, py: Python<'_>) -> PyResult<()> {
        self.with_txn(py, |inner| inner.begin_transaction())
    }

    /// Commit the open transaction, with the source offsets of what it moved (the
    /// offset after the last record produced or skipped, per partition) committed in
    /// it to `offsets_group` on the target, keyed by target topic and partition.
    /// Returns {(source topic, partition): next source offset} of the partitions the
    /// transaction moved. Raises TransactionError (see its attributes).
    #[pyo3(signature = (timeout=30.0))]
    fn commit_transaction<'py>(
        &self,
        py: Python<'py>,
        timeout: f64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let timeout = seconds(timeout)?;
        let positions = self.with_txn(py, move |inner| inner.commit_transaction(timeout))?;
        by_partition(py, self, positions)
    }

    /// Abort the open transaction: nothing it produced becomes visible, and each
    /// partition it read reads again from the first record it took (records handed
    /// back in it and not released are dropped: they are handed back again).
    /// Returns {(source topic, partition): offset read next} of those partitions.
    #[pyo3(signature = (timeout=30.0))]
    fn abort_transaction<'py>(
        &self,
        py: Python<'py>,
        timeout: f64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let timeout = seconds(timeout)?;
        let rewound = self.with_txn(py, move |inner| inner.abort_transaction(timeout))?;
        by_partition(py, self, rewound)
    }

    /// {(topic, partition): high watermark} of the partitions the Mover reads, as its
    /// consumer last learned them from its fetch responses (no request); a partition
    /// not fetched yet is left out. The source partitions' lag is measured against these.
    fn watermarks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let highs = self.with(py, |inner| {
            Ok(inner
                .readings()
                .into_iter()
                .filter_map(|p| {
                    let high = inner.source.high_watermark(&p.topic, p.partition)?;
                    Some(((p.topic.clone(), p.partition), high))
                })
                .collect::<Vec<_>>())
        })?;
        let out = PyDict::new(py);
        for (key, high) in highs {
            out.set_item(key, high)?;
        }
        Ok(out)
    }

    /// {(topic, partition): position} of the partitions the Mover reads: where its
    /// consumer stands past every record it handed out, control records and aborted
    /// records included (`Source::positions`); a partition not fetched yet is left
    /// out. A partition's lag counts from there, not from its last record.
    fn positions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let positions = self.with(py, |inner| {
            let readings = inner.readings();
            let keys: Vec<_> = readings
                .iter()
                .map(|p| (p.topic.as_str(), p.partition))
                .collect();
            let found = inner.source.positions(&keys)?;
            Ok(readings
                .into_iter()
                .zip(found)
                .filter_map(|(p, position)| Some(((p.topic.clone(), p.partition), position?)))
                .collect::<Vec<_>>())
        })?;
        let out = PyDict::new(py);
        for (key, position) in positions {
            out.set_item(key, position)?;
        }
        Ok(out)
    }

    /// Client errors and librdkafka's warnings since the last call: [(client, level,
    /// text)], client "source" or "target".
    fn events(&self, py: Python<'_>) -> PyResult<Vec<(String, String, String)>> {
        self.with(py, |inner| {
            let mut events = lock(&inner.source_shared().events);
            Ok(events
                .drain(..)
                .map(|(c, l, t)| (c.to_string(), l, t))
                .collect())
        })
    }

    /// Close the consumer and drop both clients (records still in flight are lost:
    /// `flush` first).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.allow_threads(|| {
            let inner = lock(&self.inner).take();
            match inner {
                None => Ok(()),
                Some(inner) => inner.source.close(),
            }
        })
        .map_err(MoverError::new_err)
    }

    fn __repr__(&self) -> String {
        let guard = lock(&self.inner);
        match guard.as_ref() {
            None => "<Mover closed>".into(),
            Some(inner) => format!(
                "<Mover partitions={}{}>",
                inner.parts.len(),
                if inner.transactional.is_some() {
                    " transactional"
                } else {
                    ""
                }
            ),
        }
    }
}
