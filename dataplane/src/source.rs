//! The source consumer on librdkafka's public API (`rdkafka.h` through rdkafka-sys):
//! a client made by the rdkafka crate, assigned partitions by hand, polled with
//! `rd_kafka_consumer_poll` so that an error message still names its topic,
//! partition and offset (the crate's BaseConsumer drops them). All `unsafe` of the
//! consumer is in this module, behind `Source`, and in `record`, behind `Record`.
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
use std::time::Duration;

use rdkafka::bindings as rd;
use rdkafka::client::{Client, ClientContext};
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::error::KafkaError;
use rdkafka::types::{RDKafkaErrorCode, RDKafkaRespErr, RDKafkaType};
use rdkafka::{Offset, TopicPartitionList};

use crate::client_errors::checked_code;
use crate::error::Error;
use crate::record::{Record, Taken};

/// The name and description of a librdkafka error code.
pub fn describe(code: RDKafkaRespErr) -> String {
    // SAFETY: `rd_kafka_err2name` returns a NUL-terminated name for any code (a static
    // one, or for a code it does not know a thread-local buffer), copied here before
    // this thread calls librdkafka again.
    let name = unsafe { CStr::from_ptr(rd::rd_kafka_err2name(code)) }.to_string_lossy();
    format!("{name}: {}", RDKafkaErrorCode::from(code))
}

/// A rd_kafka_error_t turned into a message (and freed).
///
/// `error` is null or an error object librdkafka returned to us (ours to destroy,
/// `@remark` of each call that returns one); it is destroyed here.
fn take_error(error: *mut rd::rd_kafka_error_t) -> Result<(), Error> {
    if error.is_null() {
        return Ok(());
    }
    // SAFETY: `error` is a live, non-null error object; its string is NUL-terminated
    // and lives as long as the object (rdkafka.h), and is copied before it is freed.
    let text = unsafe { CStr::from_ptr(rd::rd_kafka_error_string(error)) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: we own the error object and free it once, after its last use.
    unsafe { rd::rd_kafka_error_destroy(error) };
    Err(Error::Librdkafka(text))
}

fn check(code: RDKafkaRespErr) -> Result<(), Error> {
    if code == RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR {
        Ok(())
    } else {
        Err(Error::Code(code))
    }
}

/// The most records one `rd_kafka_consume_batch_queue` call takes.
const BATCH: usize = 512;

/// The consumer's queue handle (`rd_kafka_queue_get_consumer`), released when dropped.
struct Queue(NonNull<rd::rd_kafka_queue_t>);

// SAFETY: librdkafka's queues are locked internally: a queue handle may be used and
// destroyed from any thread; `Queue` gives no shared access across threads (not Sync).
unsafe impl Send for Queue {}

impl Drop for Queue {
    fn drop(&mut self) {
        // SAFETY: the reference `rd_kafka_queue_get_consumer` gave us, released once,
        // and before the client's handle is destroyed (`Source`'s field order).
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
    pub fn new(config: &ClientConfig, context: C) -> Result<Self, Error> {
        let native = config.create_native_config()?;
        // The crate reads logs and errors as events of its own poll, which this
        // consumer does not use: served by `rd_kafka_consumer_poll` instead, they went
        // to librdkafka's defaults, which print to stderr ("%3|...|ERROR|...") past
        // the context. These hand them to the context (the opaque the crate sets).
        // SAFETY: `native` is a live configuration we own, not yet given to a client;
        // setting callbacks only writes it. The callbacks are instantiated for `C`,
        // the context type of the client this configuration makes (see `log_cb`).
        unsafe {
            rd::rd_kafka_conf_set_log_cb(native.ptr(), Some(log_cb::<C>));
            rd::rd_kafka_conf_set_error_cb(native.ptr(), Some(error_cb::<C>));
        }
        let client = Client::new(config, native, RDKafkaType::RD_KAFKA_CONSUMER, context)?;
        // Errors, logs and everything else come through the consumer's queue.
        // SAFETY: a live consumer handle (`client` owns it); nothing calls
        // `rd_kafka_poll` on it after this (the rdkafka crate's bare Client does not).
        check(unsafe { rd::rd_kafka_poll_set_consumer(client.native_ptr()) })?;
        // SAFETY: a live consumer handle; the reference it returns (null without a
        // group) is owned by `Queue`, which releases it.
        let queue = NonNull::new(unsafe { rd::rd_kafka_queue_get_consumer(client.native_ptr()) })
            .map(Queue)
            .ok_or(Error::NoConsumerQueue)?;
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

    fn list(partitions: &[(&str, i32, Option<i64>)]) -> Result<TopicPartitionList, Error> {
        let mut tpl = TopicPartitionList::new();
        for &(topic, partition, offset) in partitions {
            match offset {
                Some(offset) => {
                    tpl.add_partition_offset(topic, partition, Offset::from_raw(offset))?
                }
                None => {
                    tpl.add_partition(topic, partition);
                }
            }
        }
        Ok(tpl)
    }

    /// Add partitions to the assignment, each to be read from its offset (a logical
    /// offset too: -2 beginning, -1 end).
    pub fn assign(&self, partitions: &[(&str, i32, Option<i64>)]) -> Result<(), Error> {
        let tpl = Self::list(partitions)?;
        self.drop_fetched(Some(partitions));
        // SAFETY: a live consumer handle (`self.client`) and a live list borrowed for
        // the call, which librdkafka only reads (`const`); the error object it may
        // return is ours, freed by `take_error`.
        take_error(unsafe { rd::rd_kafka_incremental_assign(self.client.native_ptr(), tpl.ptr()) })
    }

    pub fn unassign(&self, partitions: &[(&str, i32, Option<i64>)]) -> Result<(), Error> {
        let tpl = Self::list(partitions)?;
        self.drop_fetched(Some(partitions));
        // SAFETY: a live consumer handle and a live list borrowed for the call, which
        // librdkafka only reads; the error object it may return is freed by `take_error`.
        take_error(unsafe {
            rd::rd_kafka_incremental_unassign(self.client.native_ptr(), tpl.ptr())
        })
    }

    /// Stop reading the partition; the current batch's records of it are dropped
    /// (read again after the seek that goes with `resume`).
    pub fn pause(&self, topic: &str, partition: i32) -> Result<(), Error> {
        let tpl = Self::list(&[(topic, partition, None)])?;
        self.drop_fetched(Some(&[(topic, partition, None)]));
        // SAFETY: a live consumer handle and a list we own for the call (librdkafka
        // writes each partition's error into it and keeps no pointer to it).
        check(unsafe { rd::rd_kafka_pause_partitions(self.client.native_ptr(), tpl.ptr()) })
    }

    pub fn resume(&self, topic: &str, partition: i32) -> Result<(), Error> {
        let tpl = Self::list(&[(topic, partition, None)])?;
        // SAFETY: a live consumer handle and a list we own for the call (librdkafka
        // writes each partition's error into it and keeps no pointer to it).
        check(unsafe { rd::rd_kafka_resume_partitions(self.client.native_ptr(), tpl.ptr()) })
    }

    /// Read the partition from `offset` next (records already fetched are dropped).
    pub fn seek(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        timeout: Duration,
    ) -> Result<(), Error> {
        let tpl = Self::list(&[(topic, partition, Some(offset))])?;
        self.drop_fetched(Some(&[(topic, partition, None)]));
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: a live consumer handle and a list we own for the call (librdkafka
        // writes each partition's error into it); the error object it may return is
        // ours, freed by `take_error`.
        take_error(unsafe {
            rd::rd_kafka_seek_partitions(self.client.native_ptr(), tpl.ptr(), ms)
        })?;
        // A partition that could not be sought carries its own error.
        for element in tpl.elements() {
            element.error()?;
        }
        Ok(())
    }

    /// Where the consumer stands in each of `partitions` past what it handed out:
    /// the first record of the current batch not handed out yet, else librdkafka's
    /// position, which moves past the control records (transaction markers) and
    /// aborted records it never hands out. None where it has none (not fetched yet).
    pub fn positions(&self, partitions: &[(&str, i32)]) -> Result<Vec<Option<i64>>, Error> {
        let wanted: Vec<_> = partitions.iter().map(|&(t, p)| (t, p, None)).collect();
        let tpl = Self::list(&wanted)?;
        // SAFETY: a live consumer handle and a list we own for the call (librdkafka
        // writes each partition's offset or error into it and keeps no pointer to it).
        check(unsafe { rd::rd_kafka_position(self.client.native_ptr(), tpl.ptr()) })?;
        // The first record of each partition still in the local batch: the position
        // stands before it. One pass over the batch, not one per partition.
        let mut first_fetched: HashMap<(&[u8], i32), i64> = HashMap::new();
        let fetched = self.fetched.borrow();
        for taken in fetched.iter() {
            let Some(name) = taken.topic_name() else {
                continue;
            };
            let msg = taken.message();
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
        // SAFETY: a live consumer handle, a NUL-terminated topic name alive for the
        // call, and `low` and `high` valid places for the answer.
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
            // SAFETY: the consumer's queue (alive: `self.queue` holds a reference) and
            // an array of `BATCH` writable pointers, of which librdkafka fills at most
            // the `BATCH` it is told; each message it hands out is ours (`Taken`).
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
                // SAFETY: a live consumer handle; the message it hands out (or null)
                // is ours (`Taken`).
                Taken::new(unsafe { rd::rd_kafka_consumer_poll(self.client.native_ptr(), ms) })?
            }
        };
        Some(Record::new(taken))
    }

    pub fn close(&self) -> Result<(), Error> {
        self.drop_fetched(None);
        // SAFETY: a live consumer handle (destroyed only when `self.client` drops).
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
    // SAFETY: `rk` is the live handle librdkafka calls us with; `rd_kafka_opaque`
    // only reads its configuration's opaque.
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
    // SAFETY: non-null, NUL-terminated strings librdkafka keeps alive for the call.
    let fac = unsafe { CStr::from_ptr(fac) }.to_string_lossy();
    // SAFETY: non-null, NUL-terminated, alive for the call, as `fac`.
    let buf = unsafe { CStr::from_ptr(buf) }.to_string_lossy();
    // SAFETY: the opaque is the rdkafka crate's `Arc::as_ptr` of the client's context,
    // of type `C` (this callback is set only on `Source<C>`'s configuration); the
    // client keeps that Arc and destroys the handle (whose callbacks these are)
    // before it, and contexts are only ever shared (`&`, Sync).
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
        // SAFETY: a non-null, NUL-terminated string librdkafka keeps alive for the call.
        unsafe { CStr::from_ptr(reason) }
            .to_string_lossy()
            .into_owned()
    };
    let (code, reason) = global_error(err, reason.trim());
    // SAFETY: `opaque` is the one the crate set, the client's context `C`, alive while
    // the handle whose callback this is lives (see `log_cb`), and only ever shared.
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
