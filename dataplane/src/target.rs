//! The target producer's per-record call on librdkafka's public API: a record goes
//! in through `rd_kafka_producev` with a handle kept per target topic
//! (`RD_KAFKA_VTYPE_RKT`), where the crate's `BaseProducer::send` names the topic,
//! which costs a C string and a lookup of the topic by name for every record; and
//! its headers are built on `rd_kafka_header_add` with names as bytes. All `unsafe`
//! of producing is in this module, behind `TargetTopic` and `Headers`.

use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr::{self, NonNull};

use rdkafka::bindings as rd;
use rdkafka::producer::{BaseProducer, Producer, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::util::IntoOpaque;

use crate::error::Error;

/// One record's headers (`rd_kafka_headers_t`), released when dropped unless the
/// producer took them.
pub struct Headers(NonNull<rd::rd_kafka_headers_t>);

// SAFETY: a headers list is owned by one `Headers` (or by librdkafka once produced),
// and librdkafka touches an unproduced list only in the calls made here, so moving
// the owner to another thread is sound; it is not Sync (librdkafka takes no lock).
unsafe impl Send for Headers {}

impl Headers {
    pub fn with_capacity(count: usize) -> Self {
        // SAFETY: no precondition: it allocates a new, empty list, ours to destroy.
        let headers = unsafe { rd::rd_kafka_headers_new(count) };
        // librdkafka's allocations abort the process rather than return NULL.
        Headers(NonNull::new(headers).expect("rd_kafka_headers_new returned NULL"))
    }

    /// Headers a consumed message gave up (`rd_kafka_message_detach_headers`).
    ///
    /// # Safety
    /// `headers` must be a live `rd_kafka_headers_t` the caller owns and hands over.
    pub unsafe fn adopt(headers: NonNull<rd::rd_kafka_headers_t>) -> Self {
        Headers(headers)
    }

    /// The headers in order: (name, value), a null value as None.
    pub fn pairs(&self) -> Vec<(&[u8], Option<&[u8]>)> {
        let mut out = Vec::new();
        loop {
            let (mut name, mut value, mut size) = (ptr::null(), ptr::null(), 0);
            // SAFETY: a live list we own and valid places for the answer; it only
            // reads the list.
            let code = unsafe {
                rd::rd_kafka_header_get_all(
                    self.0.as_ptr(),
                    out.len(),
                    &mut name,
                    &mut value,
                    &mut size,
                )
            };
            if code != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
                return out; // _NOENT: past the last
            }
            // SAFETY: the header's name, NUL-terminated, valid while the list and the
            // header are (rdkafka.h): the returned slices borrow `self`, and only
            // `&mut self` changes or destroys the list.
            let name = unsafe { CStr::from_ptr(name) }.to_bytes();
            // SAFETY: a non-null value of `size` bytes, valid as the name is.
            let value = (!value.is_null())
                .then(|| unsafe { std::slice::from_raw_parts(value as *const u8, size) });
            out.push((name, value));
        }
    }

    /// The first `count` headers (all of them: `usize::MAX`), copied.
    pub fn copied(&self, count: usize) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        self.pairs()
            .into_iter()
            .take(count)
            .map(|(name, value)| (name.to_vec(), value.map(<[u8]>::to_vec)))
            .collect()
    }

    /// Remove every header named `name` (`rd_kafka_header_remove`: the others keep
    /// their order); whether there was one. Headers a consumed message gave up are
    /// the caller's to change.
    pub fn remove(&mut self, name: &CStr) -> Result<bool, Error> {
        // SAFETY: a live list we own (borrowed mutably, so no slice of `pairs` is
        // alive) and a NUL-terminated name alive for the call.
        let code = unsafe { rd::rd_kafka_header_remove(self.0.as_ptr(), name.as_ptr()) };
        match code {
            rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR => Ok(true),
            rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__NOENT => Ok(false),
            // A record must not go on with the reserved header it should have lost.
            code => Err(Error::HeaderNotRemoved {
                name: name.to_owned(),
                code,
            }),
        }
    }

    /// Add a header; `value` None is a null value. The name is taken as bytes
    /// (Kafka's header names are strings, but a record's own are copied as they came).
    pub fn add(&mut self, name: &[u8], value: Option<&[u8]>) -> Result<(), Error> {
        let (value_ptr, value_len) =
            value.map_or((ptr::null(), 0), |v| (v.as_ptr() as *const c_void, v.len()));
        // SAFETY: a live list we own (borrowed mutably); name and value are slices
        // alive for the call with their exact lengths (a slice's length fits isize),
        // which librdkafka copies into the new header.
        let code = unsafe {
            rd::rd_kafka_header_add(
                self.0.as_ptr(),
                name.as_ptr() as *const c_char,
                name.len() as isize,
                value_ptr,
                value_len as isize,
            )
        };
        // The only refusal librdkafka documents is of read-only headers (a consumed
        // message's), never these; should one come, the record must not go out
        // without the header (its provenance), in any build.
        if code != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            return Err(Error::HeaderNotAdded {
                name: name.to_vec(),
                code,
            });
        }
        Ok(())
    }
}

impl Drop for Headers {
    fn drop(&mut self) {
        // SAFETY: the list is ours (a produced list is forgotten, not dropped: see
        // `TargetTopic::produce`), destroyed once; nothing borrowed from it outlives
        // `self`.
        unsafe { rd::rd_kafka_headers_destroy(self.0.as_ptr()) };
    }
}

/// A handle on one target topic of a producer, released when dropped (before the
/// producer: `Inner`'s drop sees to that).
pub struct TargetTopic(NonNull<rd::rd_kafka_topic_t>);

// SAFETY: librdkafka's topic handles are refcounted and locked internally: they may
// be used and released from any thread.
unsafe impl Send for TargetTopic {}

impl TargetTopic {
    pub fn new<C: ProducerContext>(producer: &BaseProducer<C>, name: &str) -> Result<Self, Error> {
        let cname = CString::new(name).map_err(|_| Error::NulInTopicName(name.to_string()))?;
        // SAFETY: a live producer handle (borrowed), a NUL-terminated name alive for
        // the call (librdkafka copies it) and no topic configuration (optional). The
        // handle returned is ours to destroy (`Drop`).
        let rkt = unsafe {
            rd::rd_kafka_topic_new(
                producer.client().native_ptr(),
                cname.as_ptr(),
                ptr::null_mut(),
            )
        };
        NonNull::new(rkt)
            .map(TargetTopic)
            .ok_or_else(|| Error::NoTopicHandle(name.to_string()))
    }

    /// Hand one record to the producer (librdkafka copies key and value, and owns
    /// the headers once it took the record). A refused record gives its headers back.
    #[allow(clippy::too_many_arguments)]
    pub fn produce<C: ProducerContext>(
        &self,
        producer: &BaseProducer<C>,
        partition: i32,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        timestamp_ms: i64,
        headers: Headers,
        opaque: C::DeliveryOpaque,
    ) -> Result<(), (RDKafkaErrorCode, Headers, C::DeliveryOpaque)> {
        fn bytes(data: Option<&[u8]>) -> (*mut c_void, usize) {
            data.map_or((ptr::null_mut(), 0), |d| {
                (d.as_ptr() as *mut c_void, d.len())
            })
        }
        let (key_ptr, key_len) = bytes(key);
        let (value_ptr, value_len) = bytes(value);
        let opaque = opaque.into_ptr();
        // SAFETY: a live producer handle (borrowed) and a live handle on one of its
        // topics (`self`, made by `new` on this producer). Each argument has the type
        // its RD_KAFKA_VTYPE tag announces (rdkafka.h, `rd_kafka_vtype_t`), ended by
        // VTYPE_END. With RD_KAFKA_MSG_F_COPY librdkafka copies key and value, which
        // need only live for the call; the headers are a live list of ours, which
        // librdkafka owns once the call succeeds (`RD_KAFKA_V_HEADERS`); the opaque is
        // a word it hands back in the delivery report.
        let code = unsafe {
            rd::rd_kafka_producev(
                producer.client().native_ptr(),
                rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_RKT,
                self.0.as_ptr(),
                rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_PARTITION,
                partition,
                rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_MSGFLAGS,
                rd::RD_KAFKA_MSG_F_COPY,
                rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_VALUE,
                value_ptr,
                value_len,
                rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_KEY,
                key_ptr,
                key_len,
                rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_OPAQUE,
                opaque,
                rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_TIMESTAMP,
                timestamp_ms,
                rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_HEADERS,
                headers.0.as_ptr(),
                rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_END,
            )
        };
        if code == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            std::mem::forget(headers); // librdkafka's now
            Ok(())
        } else {
            // SAFETY: the pointer `into_ptr` made above, which librdkafka did not keep
            // (the record was refused), turned back once.
            let opaque = unsafe { C::DeliveryOpaque::from_ptr(opaque) };
            Err((RDKafkaErrorCode::from(code), headers, opaque))
        }
    }
}

impl Drop for TargetTopic {
    fn drop(&mut self) {
        // SAFETY: the handle `rd_kafka_topic_new` gave us, released once; its producer
        // is still alive (`Inner`'s drop releases the handles before the producer).
        unsafe { rd::rd_kafka_topic_destroy(self.0.as_ptr()) };
    }
}
