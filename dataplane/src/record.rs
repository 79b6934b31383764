//! One message taken from the source consumer (`rd_kafka_message_t`), owned until
//! dropped: `Taken`, the owning pointer, and `Record`, a record (or an error about a
//! partition) whose borrowed key, value and topic name live as long as it does. All
//! `unsafe` of reading a consumed message is in this module.

use std::ffi::{c_void, CStr};
use std::marker::PhantomData;
use std::ptr::{self, NonNull};
use std::slice;

use rdkafka::bindings as rd;
use rdkafka::types::RDKafkaRespErr;

use crate::target::Headers;

/// A message taken from librdkafka, destroyed when dropped.
pub(crate) struct Taken(NonNull<rd::rd_kafka_message_t>);

// SAFETY: a consumed message is handed over to the application, which alone uses it
// until `rd_kafka_message_destroy`; librdkafka allows that call from any thread, and
// `Taken` gives no shared access across threads (it is not Sync).
unsafe impl Send for Taken {}

impl Taken {
    /// Ownership of a message librdkafka handed out (`rd_kafka_consumer_poll`,
    /// `rd_kafka_consume_batch_queue`); None for null.
    pub(crate) fn new(ptr: *mut rd::rd_kafka_message_t) -> Option<Taken> {
        NonNull::new(ptr).map(Taken)
    }

    /// The message's public fields.
    pub(crate) fn message(&self) -> &rd::rd_kafka_message_t {
        // SAFETY: the pointer is non-null and the message ours until `drop` destroys
        // it, which cannot happen while `self` is borrowed; librdkafka does not write
        // a message's public fields once it handed the message out.
        unsafe { self.0.as_ref() }
    }

    /// Its topic's name, bytes without the NUL; None for a message of no topic.
    pub(crate) fn topic_name(&self) -> Option<&CStr> {
        let rkt = self.message().rkt;
        if rkt.is_null() {
            return None;
        }
        // SAFETY: `rkt` is non-null, and a message holds a reference on its topic
        // handle until destroyed (after this borrow of `self` ends); the name is
        // NUL-terminated and lives as long as the handle.
        Some(unsafe { CStr::from_ptr(rd::rd_kafka_topic_name(rkt)) })
    }

    pub(crate) fn is_of(&self, topic: &str, partition: i32) -> bool {
        self.message().partition == partition
            && self
                .topic_name()
                .is_some_and(|name| name.to_bytes() == topic.as_bytes())
    }

    fn ptr(&self) -> *mut rd::rd_kafka_message_t {
        self.0.as_ptr()
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        // SAFETY: the message was handed to us by librdkafka, which wants it back
        // through this call (rdkafka.h, `rd_kafka_message_t`); `drop` runs once, and
        // nothing borrowed from the message outlives `self`.
        unsafe { rd::rd_kafka_message_destroy(self.0.as_ptr()) };
    }
}

/// One message from the consumer's queue: a record, or an error about a
/// partition (then `error` is Some). Destroyed when dropped.
pub struct Record<'a> {
    taken: Taken,
    _source: PhantomData<&'a ()>,
}

/// How a record's timestamp was set (Kafka's types: 0 none, 1 create, 2 log append).
pub type TimestampType = i32;

impl Record<'_> {
    /// A message the source handed out, as a record borrowed from the source.
    pub(crate) fn new(taken: Taken) -> Self {
        Record {
            taken,
            _source: PhantomData,
        }
    }

    fn msg(&self) -> &rd::rd_kafka_message_t {
        self.taken.message()
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
        // SAFETY: a live consumed message (`rd_kafka_message_errstr` is for consumed
        // messages only, as this is); it only reads the message.
        let detail = unsafe { rd::rd_kafka_message_errstr(self.taken.ptr()) };
        let detail = if detail.is_null() {
            String::new()
        } else {
            // SAFETY: a non-null, NUL-terminated error string held by the message,
            // copied here while the message lives.
            unsafe { CStr::from_ptr(detail) }
                .to_string_lossy()
                .into_owned()
        };
        Some((msg.err, detail))
    }

    /// The topic's name; "" for an error that names no topic.
    pub fn topic(&self) -> &str {
        self.taken
            .topic_name()
            .map_or("", |name| name.to_str().unwrap_or(""))
    }

    pub fn partition(&self) -> i32 {
        self.msg().partition
    }

    pub fn offset(&self) -> i64 {
        self.msg().offset
    }

    /// `len` bytes at `data` of this message (None for null).
    fn bytes(&self, data: *mut c_void, len: usize) -> Option<&[u8]> {
        if data.is_null() {
            None
        } else if len == 0 {
            Some(&[])
        } else {
            // SAFETY: `data` and `len` are a key or payload field of this message
            // (non-null here): `len` bytes librdkafka keeps until the message is
            // destroyed, which cannot happen while `self` is borrowed, and never
            // writes after handing the message out.
            Some(unsafe { slice::from_raw_parts(data as *const u8, len) })
        }
    }

    /// The key: None for a null key, empty for an empty one.
    pub fn key(&self) -> Option<&[u8]> {
        self.bytes(self.msg().key, self.msg().key_len)
    }

    /// The value: None for a null value (a tombstone), empty for an empty one.
    pub fn value(&self) -> Option<&[u8]> {
        self.bytes(self.msg().payload, self.msg().len)
    }

    pub fn timestamp(&self) -> (TimestampType, i64) {
        let mut kind = rd::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
        // SAFETY: a live consumed message, and `kind` a valid place for the type.
        let value = unsafe { rd::rd_kafka_message_timestamp(self.taken.ptr(), &mut kind) };
        (kind as TimestampType, value)
    }

    /// The record's own headers, taken from it (None when it has none): to send on
    /// with the record, where a copy would allocate each header again. `headers`
    /// answers nothing after this.
    pub fn take_headers(&self) -> Option<Headers> {
        let mut headers: *mut rd::rd_kafka_headers_t = ptr::null_mut();
        // SAFETY: a live consumed message, and `headers` a valid out-pointer. The
        // headers live outside the message's public fields, so no reference handed
        // out by `msg` sees them change.
        let err = unsafe { rd::rd_kafka_message_detach_headers(self.taken.ptr(), &mut headers) };
        if err != RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR {
            return None; // _NOENT: no headers
        }
        // Detached, they are ours (librdkafka no longer frees them with the message).
        // SAFETY: `rd_kafka_message_detach_headers` made the application the headers'
        // owner (rdkafka.h), and they are handed over once, here.
        NonNull::new(headers).map(|headers| unsafe { Headers::adopt(headers) })
    }
}
