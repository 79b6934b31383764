//! The source consumer on librdkafka's public API (`rdkafka.h` through rdkafka-sys):
//! a client made by the rdkafka crate, assigned partitions by hand, polled with
//! `rd_kafka_consumer_poll` so that an error message still names its topic,
//! partition and offset (the crate's BaseConsumer drops them). All `unsafe` of the
//! consumer is in this module, behind `Source` and `Record`.
//!
//! Records are taken from librdkafka's consumer queue in batches
//! (`rd_kafka_consume_batch_queue`: one queue lock and one clock read for up to
//! `BATCH` records, where `rd_kafka_consumer_poll` pays them per record) and handed
//! out one at a time. A batch's records not yet handed out are dropped whenever
//! their partition is sought, paused, assigned or unassigned, as librdkafka drops
//! its own queued records then.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::ptr::{self, NonNull};
use std::slice;
use std::time::Duration;

use rdkafka::bindings as rd;
use rdkafka::client::{Client, ClientContext};
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::error::KafkaError;
use rdkafka::types::{RDKafkaErrorCode, RDKafkaRespErr, RDKafkaType};
use rdkafka::{Offset, TopicPartitionList};

use crate::client_errors::checked_code;
use crate::target::Headers;

/// The name and description of a librdkafka error code.
pub fn describe(code: RDKafkaRespErr) -> String {
    let name = unsafe { CStr::from_ptr(rd::rd_kafka_err2name(code)) }.to_string_lossy();
    format!("{name}: {}", RDKafkaErrorCode::from(code))
}

/// A rd_kafka_error_t turned into a message (and freed).
fn take_error(error: *mut rd::rd_kafka_error_t) -> Result<(), String> {
    if error.is_null() {
        return Ok(());
    }
    let text = unsafe { CStr::from_ptr(rd::rd_kafka_error_string(error)) }
        .to_string_lossy()
        .into_owned();
    unsafe { rd::rd_kafka_error_destroy(error) };
    Err(text)
}

fn check(code: RDKafkaRespErr) -> Result<(), String> {
    if code == RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR {
        Ok(())
    } else {
        Err(describe(code))
    }
}

/// The most records one `rd_kafka_consume_batch_queue` call takes.
const BATCH: usize = 512;

/// A message taken from librdkafka, destroyed when dropped.
struct Taken(NonNull<rd::rd_kafka_message_t>);

// librdkafka's messages may be destroyed from any thread.
unsafe impl Send for Taken {}

impl Taken {
    fn new(ptr: *mut rd::rd_kafka_message_t) -> Option<Taken> {
        NonNull::new(ptr).map(Taken)
    }

    fn is_of(&self, topic: &str, partition: i32) -> bool {
        let msg = unsafe { self.0.as_ref() };
        msg.partition == partition && !msg.rkt.is_null() && {
            let name = unsafe { CStr::from_ptr(rd::rd_kafka_topic_name(msg.rkt)) };
            name.to_bytes() == topic.as_bytes()
        }
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        unsafe { rd::rd_kafka_message_destroy(self.0.as_ptr()) };
    }
}

/// The consumer's queue handle (`rd_kafka_queue_get_consumer`), released when dropped.
struct Queue(NonNull<rd::rd_kafka_queue_t>);

// A queue handle may be used and destroyed from any thread.
unsafe impl Send for Queue {}

impl Drop for Queue {
    fn drop(&mut self) {
        unsafe { rd::rd_kafka_queue_destroy(self.0.as_ptr()) };
    }
}

pub struct Source<C: ClientContext> {
    // Dropped in this order: the batch's records and the queue handle before the
    // client they belong to.
    /// The current batch's records not handed out yet, oldest first.
    fetched: RefCell<VecDeque<Taken>>,
    queue: Queue,
    client: Client<C>,
}

impl<C: ClientContext> Source<C> {
    pub fn new(config: &ClientConfig, context: C) -> Result<Self, String> {
        let native = config.create_native_config().map_err(|e| e.to_string())?;
        // The crate reads logs and errors as events of its own poll, which this
        // consumer does not use: served by `rd_kafka_consumer_poll` instead, they went
        // to librdkafka's defaults, which print to stderr ("%3|...|ERROR|...") past
        // the context. These hand them to the context (the opaque the crate sets).
        unsafe {
            rd::rd_kafka_conf_set_log_cb(native.ptr(), Some(log_cb::<C>));
            rd::rd_kafka_conf_set_error_cb(native.ptr(), Some(error_cb::<C>));
        }
        let client = Client::new(config, native, RDKafkaType::RD_KAFKA_CONSUMER, context)
            .map_err(|e| e.to_string())?;
        // Errors, logs and everything else come through the consumer's queue.
        check(unsafe { rd::rd_kafka_poll_set_consumer(client.native_ptr()) })?;
        let queue = NonNull::new(unsafe { rd::rd_kafka_queue_get_consumer(client.native_ptr()) })
            .map(Queue)
            .ok_or("the consumer has no queue of its own (it needs a group.id)")?;
        Ok(Source {
            fetched: RefCell::new(VecDeque::with_capacity(BATCH)),
            queue,
            client,
        })
    }

    /// Drop the current batch's records of these partitions (all records: None).
    fn drop_fetched(&self, partitions: Option<&[(&str, i32, Option<i64>)]>) {
        let mut fetched = self.fetched.borrow_mut();
        match partitions {
            None => fetched.clear(),
            Some(partitions) => fetched.retain(|taken| {
                !partitions
                    .iter()
                    .any(|&(topic, partition, _)| taken.is_of(topic, partition))
            }),
        }
    }

    fn list(partitions: &[(&str, i32, Option<i64>)]) -> Result<TopicPartitionList, String> {
        let mut tpl = TopicPartitionList::new();
        for &(topic, partition, offset) in partitions {
            match offset {
                Some(offset) => tpl
                    .add_partition_offset(topic, partition, Offset::from_raw(offset))
                    .map_err(|e| e.to_string())?,
                None => {
                    tpl.add_partition(topic, partition);
                }
            }
        }
        Ok(tpl)
    }

    /// Add partitions to the assignment, each to be read from its offset (a logical
    /// offset too: -2 beginning, -1 end).
    pub fn assign(&self, partitions: &[(&str, i32, Option<i64>)]) -> Result<(), String> {
        let tpl = Self::list(partitions)?;
        self.drop_fetched(Some(partitions));
        take_error(unsafe { rd::rd_kafka_incremental_assign(self.client.native_ptr(), tpl.ptr()) })
    }

    pub fn unassign(&self, partitions: &[(&str, i32, Option<i64>)]) -> Result<(), String> {
        let tpl = Self::list(partitions)?;
        self.drop_fetched(Some(partitions));
        take_error(unsafe {
            rd::rd_kafka_incremental_unassign(self.client.native_ptr(), tpl.ptr())
        })
    }

    /// Stop reading the partition; the current batch's records of it are dropped
    /// (read again after the seek that goes with `resume`).
    pub fn pause(&self, topic: &str, partition: i32) -> Result<(), String> {
        let tpl = Self::list(&[(topic, partition, None)])?;
        self.drop_fetched(Some(&[(topic, partition, None)]));
        check(unsafe { rd::rd_kafka_pause_partitions(self.client.native_ptr(), tpl.ptr()) })
    }

    pub fn resume(&self, topic: &str, partition: i32) -> Result<(), String> {
        let tpl = Self::list(&[(topic, partition, None)])?;
        check(unsafe { rd::rd_kafka_resume_partitions(self.client.native_ptr(), tpl.ptr()) })
    }

    /// Read the partition from `offset` next (records already fetched are dropped).
    pub fn seek(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        timeout: Duration,
    ) -> Result<(), String> {
        let tpl = Self::list(&[(topic, partition, Some(offset))])?;
        self.drop_fetched(Some(&[(topic, partition, None)]));
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        take_error(unsafe {
            rd::rd_kafka_seek_partitions(self.client.native_ptr(), tpl.ptr(), ms)
        })?;
        // A partition that could not be sought carries its own error.
        for element in tpl.elements() {
            if let Err(e) = element.error() {
                return Err(e.to_string());
            }
        }
        Ok(())
    }

    /// Where the consumer stands in each of `partitions` past what it handed out:
    /// the first record of the current batch not handed out yet, else librdkafka's
    /// position, which moves past the control records (transaction markers) and
    /// aborted records it never hands out. None where it has none (not fetched yet).
    pub fn positions(&self, partitions: &[(&str, i32)]) -> Result<Vec<Option<i64>>, String> {
        let wanted: Vec<_> = partitions.iter().map(|&(t, p)| (t, p, None)).collect();
        let tpl = Self::list(&wanted)?;
        check(unsafe { rd::rd_kafka_position(self.client.native_ptr(), tpl.ptr()) })?;
        // The first record of each partition still in the local batch: the position
        // stands before it. One pass over the batch, not one per partition.
        let mut first_fetched: HashMap<(&[u8], i32), i64> = HashMap::new();
        let fetched = self.fetched.borrow();
        for taken in fetched.iter() {
            let msg = unsafe { taken.0.as_ref() };
            if msg.rkt.is_null() {
                continue;
            }
            let name = unsafe { CStr::from_ptr(rd::rd_kafka_topic_name(msg.rkt)) };
            first_fetched
                .entry((name.to_bytes(), msg.partition))
                .or_insert(msg.offset);
        }
        // The list keeps the order it was built in: element i is partitions[i]
        // (a search per partition made a call on 5,000 partitions take 0.1 s).
        Ok(partitions
            .iter()
            .zip(tpl.elements())
            .map(|(&(topic, partition), element)| {
                if let Some(&first) = first_fetched.get(&(topic.as_bytes(), partition)) {
                    return Some(first);
                }
                match element.offset() {
                    Offset::Offset(offset) => Some(offset),
                    _ => None,
                }
            })
            .collect())
    }

    /// The partition's high watermark as the consumer last learned it (from its fetch
    /// responses: no request), None before it fetched the partition.
    pub fn high_watermark(&self, topic: &str, partition: i32) -> Option<i64> {
        let topic = CString::new(topic).ok()?;
        let (mut low, mut high) = (-1_i64, -1_i64);
        let code = unsafe {
            rd::rd_kafka_get_watermark_offsets(
                self.client.native_ptr(),
                topic.as_ptr(),
                partition,
                &mut low,
                &mut high,
            )
        };
        (code == RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR && high >= 0).then_some(high)
    }

    /// The next record or error, waiting up to `timeout`; None when there is none.
    pub fn poll(&self, timeout: Duration) -> Option<Record<'_>> {
        let mut fetched = self.fetched.borrow_mut();
        if fetched.is_empty() {
            // What the queue holds now, without waiting: the batch call waits for a
            // whole batch (or its timeout), where a caller that waits wants the first
            // record as soon as it arrives.
            let mut batch = [ptr::null_mut(); BATCH];
            let count = unsafe {
                rd::rd_kafka_consume_batch_queue(
                    self.queue.0.as_ptr(),
                    0,
                    batch.as_mut_ptr(),
                    BATCH,
                )
            };
            // librdkafka returns -1 only for a queue forwarded elsewhere, which the
            // consumer's own queue never is.
            let count = usize::try_from(count).unwrap_or(0).min(BATCH);
            fetched.extend(batch[..count].iter().filter_map(|&ptr| Taken::new(ptr)));
        }
        let taken = match fetched.pop_front() {
            Some(taken) => taken,
            None if timeout.is_zero() => return None,
            None => {
                let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
                Taken::new(unsafe { rd::rd_kafka_consumer_poll(self.client.native_ptr(), ms) })?
            }
        };
        Some(Record {
            taken,
            _source: std::marker::PhantomData,
        })
    }

    pub fn close(&self) -> Result<(), String> {
        self.drop_fetched(None);
        check(unsafe { rd::rd_kafka_consumer_close(self.client.native_ptr()) })
    }
}

/// librdkafka's log line, to the client's context (see `Source::new`).
unsafe extern "C" fn log_cb<C: ClientContext>(
    rk: *const rd::rd_kafka_t,
    level: c_int,
    fac: *const c_char,
    buf: *const c_char,
) {
    let context = unsafe { rd::rd_kafka_opaque(rk) } as *const C;
    if context.is_null() || fac.is_null() || buf.is_null() {
        return;
    }
    let level = match level {
        0 => RDKafkaLogLevel::Emerg,
        1 => RDKafkaLogLevel::Alert,
        2 => RDKafkaLogLevel::Critical,
        3 => RDKafkaLogLevel::Error,
        4 => RDKafkaLogLevel::Warning,
        5 => RDKafkaLogLevel::Notice,
        6 => RDKafkaLogLevel::Info,
        _ => RDKafkaLogLevel::Debug,
    };
    let fac = unsafe { CStr::from_ptr(fac) }.to_string_lossy();
    let buf = unsafe { CStr::from_ptr(buf) }.to_string_lossy();
    unsafe { &*context }.log(level, fac.trim(), buf.trim());
}

/// A client-level error (a broker down, a fatal error), to the client's context.
unsafe extern "C" fn error_cb<C: ClientContext>(
    _rk: *mut rd::rd_kafka_t,
    err: c_int,
    reason: *const c_char,
    opaque: *mut c_void,
) {
    let context = opaque as *const C;
    if context.is_null() {
        return;
    }
    let reason = if reason.is_null() {
        String::new()
    } else {
        unsafe { CStr::from_ptr(reason) }
            .to_string_lossy()
            .into_owned()
    };
    let (code, reason) = global_error(err, reason.trim());
    unsafe { &*context }.error(KafkaError::Global(code), &reason);
}

/// The error code librdkafka passed as a C int, checked against the codes this
/// build knows (`client_errors`): an unknown one is `Unknown`, its number kept in
/// the reason.
fn global_error(err: c_int, reason: &str) -> (RDKafkaErrorCode, String) {
    checked_code(
        err,
        reason,
        |e| RDKafkaRespErr::try_from(e).ok().map(RDKafkaErrorCode::from),
        RDKafkaErrorCode::Unknown,
    )
}

/// One message from the consumer's queue: a record, or an error about a
/// partition (then `error` is Some). Destroyed when dropped.
pub struct Record<'a> {
    taken: Taken,
    _source: std::marker::PhantomData<&'a ()>,
}

/// How a record's timestamp was set (Kafka's types: 0 none, 1 create, 2 log append).
pub type TimestampType = i32;

impl Record<'_> {
    fn msg(&self) -> &rd::rd_kafka_message_t {
        unsafe { self.taken.0.as_ref() }
    }

    fn ptr(&self) -> *mut rd::rd_kafka_message_t {
        self.taken.0.as_ptr()
    }

    /// Which topic the record is of, as a word that stays the same for every record
    /// of the topic while it is assigned (librdkafka's topic handle): for telling
    /// apart records quickly, not for keeping.
    pub fn topic_id(&self) -> usize {
        self.msg().rkt as usize
    }

    /// The error this message carries, with librdkafka's description.
    pub fn error(&self) -> Option<(RDKafkaRespErr, String)> {
        let msg = self.msg();
        if msg.err == RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR {
            return None;
        }
        let detail = unsafe { rd::rd_kafka_message_errstr(self.ptr()) };
        let detail = if detail.is_null() {
            String::new()
        } else {
            unsafe { CStr::from_ptr(detail) }
                .to_string_lossy()
                .into_owned()
        };
        Some((msg.err, detail))
    }

    /// The topic's name; "" for an error that names no topic.
    pub fn topic(&self) -> &str {
        let rkt = self.msg().rkt;
        if rkt.is_null() {
            return "";
        }
        let name: *const c_char = unsafe { rd::rd_kafka_topic_name(rkt) };
        unsafe { CStr::from_ptr(name) }.to_str().unwrap_or("")
    }

    pub fn partition(&self) -> i32 {
        self.msg().partition
    }

    pub fn offset(&self) -> i64 {
        self.msg().offset
    }

    fn bytes<'s>(data: *mut c_void, len: usize) -> Option<&'s [u8]> {
        if data.is_null() {
            None
        } else if len == 0 {
            Some(&[])
        } else {
            Some(unsafe { slice::from_raw_parts(data as *const u8, len) })
        }
    }

    /// The key: None for a null key, empty for an empty one.
    pub fn key(&self) -> Option<&[u8]> {
        Self::bytes(self.msg().key, self.msg().key_len)
    }

    /// The value: None for a null value (a tombstone), empty for an empty one.
    pub fn value(&self) -> Option<&[u8]> {
        Self::bytes(self.msg().payload, self.msg().len)
    }

    pub fn timestamp(&self) -> (TimestampType, i64) {
        let mut kind = rd::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
        let value = unsafe { rd::rd_kafka_message_timestamp(self.ptr(), &mut kind) };
        (kind as TimestampType, value)
    }

    /// The record's own headers, taken from it (None when it has none): to send on
    /// with the record, where a copy would allocate each header again. `headers`
    /// answers nothing after this.
    pub fn take_headers(&self) -> Option<Headers> {
        let mut headers: *mut rd::rd_kafka_headers_t = ptr::null_mut();
        let err = unsafe { rd::rd_kafka_message_detach_headers(self.ptr(), &mut headers) };
        if err != RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR {
            return None; // _NOENT: no headers
        }
        // Detached, they are ours (librdkafka no longer frees them with the message).
        NonNull::new(headers).map(|headers| unsafe { Headers::adopt(headers) })
    }
}
