//! The offsets a transaction commits, on librdkafka's public API (`rdkafka.h`
//! through rdkafka-sys): the group's metadata is made from a group id alone
//! (`rd_kafka_consumer_group_metadata_new`: generation -1, no member id) and
//! `rd_kafka_send_offsets_to_transaction` sends the offsets with it. The rdkafka
//! crate makes a group's metadata only from one of its own consumers, and the group
//! these offsets go to lives on the target cluster, where no consumer of ours is a
//! member (docs/dataplane.md, "Exactly-once": why). All `unsafe` of transactions is
//! in this module. `TxnError`: how a transactional call failed, with librdkafka's
//! verdict on what can be done about it.

use std::ffi::{c_char, CStr, CString};
use std::time::Duration;

use rdkafka::bindings as rd;
use rdkafka::client::{Client, ClientContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::TopicPartitionList;

use crate::error::Error;

/// A transactional call that failed, with what librdkafka says can be done about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnError {
    /// librdkafka's name of the error code, e.g. `_FENCED`, `_TIMED_OUT`.
    pub code: String,
    pub message: String,
    /// The producer is unusable: make a new one (with the same transactional id).
    pub fatal: bool,
    /// The same call may be made again.
    pub retriable: bool,
    /// The transaction must be aborted.
    pub abortable: bool,
}

/// librdkafka's name of an error code (`rd_kafka_err2name`), e.g. `_FENCED`: the name
/// Python's `KafkaError` has for it.
pub fn code_name(code: RDKafkaErrorCode) -> String {
    let Ok(raw) = rd::rd_kafka_resp_err_t::try_from(code as i32) else {
        return format!("{code:?}"); // a code this librdkafka does not know
    };
    // SAFETY: `rd_kafka_err2name` takes any code and returns a static NUL-terminated
    // string (a name, or a placeholder for an unknown code), never null (rdkafka.h).
    unsafe { CStr::from_ptr(rd::rd_kafka_err2name(raw)) }
        .to_string_lossy()
        .into_owned()
}

impl TxnError {
    /// The producer's fatal error (`rd_kafka_fatal_error`) as a transactional call's
    /// failure: fatal, neither retriable nor abortable.
    pub fn fatal(code: RDKafkaErrorCode, reason: String) -> Self {
        TxnError {
            code: code_name(code),
            message: reason,
            fatal: true,
            retriable: false,
            abortable: false,
        }
    }

    /// A failure of the mover's own in a transactional call (not a librdkafka error
    /// object): code `_STATE`, no flags.
    pub fn state(error: &Error) -> Self {
        TxnError {
            code: "_STATE".into(),
            message: error.to_string(),
            fatal: false,
            retriable: false,
            abortable: false,
        }
    }

    /// From the rdkafka crate's error of a transactional call (or of the flush its
    /// commit starts with).
    pub fn from_kafka(error: &KafkaError) -> Self {
        match error {
            KafkaError::Transaction(e) => TxnError {
                code: e.name(),
                message: e.string(),
                fatal: e.is_fatal(),
                retriable: e.is_retriable(),
                abortable: e.txn_requires_abort(),
            },
            other => {
                let code = other.rdkafka_error_code();
                let timed_out = matches!(
                    code,
                    Some(RDKafkaErrorCode::OperationTimedOut | RDKafkaErrorCode::MessageTimedOut)
                );
                TxnError {
                    code: if timed_out {
                        "_TIMED_OUT".into()
                    } else {
                        code.map_or_else(|| "_FAIL".into(), code_name)
                    },
                    message: other.to_string(),
                    fatal: false,
                    retriable: timed_out,
                    abortable: false,
                }
            }
        }
    }
}

/// Turn an `rd_kafka_error_t` into a TxnError (and free it); null is success.
///
/// `error` is null or an error object librdkafka returned to us (ours to destroy,
/// `@remark` of each call that returns one); it is destroyed here.
fn take(error: *mut rd::rd_kafka_error_t) -> Result<(), Error> {
    if error.is_null() {
        return Ok(());
    }
    let text = |ptr: *const c_char| {
        if ptr.is_null() {
            String::new()
        } else {
            // SAFETY: a non-null string of `rd_kafka_error_name`/`_string`, NUL-terminated
            // and alive as long as the error object (rdkafka.h), which is destroyed only
            // after the text is copied out below.
            unsafe { CStr::from_ptr(ptr) }
                .to_string_lossy()
                .into_owned()
        }
    };
    // SAFETY: `error` is a live, non-null error object we own (see above); these
    // accessors only read it.
    let out = unsafe {
        TxnError {
            code: text(rd::rd_kafka_error_name(error)),
            message: text(rd::rd_kafka_error_string(error)),
            fatal: rd::rd_kafka_error_is_fatal(error) != 0,
            retriable: rd::rd_kafka_error_is_retriable(error) != 0,
            abortable: rd::rd_kafka_error_txn_requires_abort(error) != 0,
        }
    };
    // SAFETY: we own the error object (returned to us by librdkafka) and destroy it
    // once; nothing read from it is used after this (the texts were copied).
    unsafe { rd::rd_kafka_error_destroy(error) };
    Err(out.into())
}

/// Send `offsets` to the producer's open transaction as the offsets of `group` (a
/// group on the producer's cluster), to be committed with it. `producer` is the
/// mover's transactional producer's client.
pub fn send_offsets<C: ClientContext>(
    producer: &Client<C>,
    offsets: &TopicPartitionList,
    group: &str,
    timeout: Duration,
) -> Result<(), Error> {
    let group = CString::new(group).map_err(|_| Error::NulInOffsetsGroup(group.to_string()))?;
    // SAFETY: `group` is a NUL-terminated C string that outlives the call (librdkafka
    // copies the group id into the new object).
    let metadata = unsafe { rd::rd_kafka_consumer_group_metadata_new(group.as_ptr()) };
    if metadata.is_null() {
        return Err(Error::NoGroupMetadata);
    }
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: the producer handle is alive while `producer` is borrowed (the rdkafka
    // crate's Client destroys it only on drop); `offsets` is a live list borrowed for
    // the call and `metadata` was just made and is non-null. librdkafka only reads the
    // list and the metadata (both `const` in rdkafka.h) and keeps neither.
    let error = unsafe {
        rd::rd_kafka_send_offsets_to_transaction(producer.native_ptr(), offsets.ptr(), metadata, ms)
    };
    // SAFETY: `metadata` came from `rd_kafka_consumer_group_metadata_new`, which makes
    // it ours to free (rdkafka.h), and it is freed once, after its last use above.
    unsafe { rd::rd_kafka_consumer_group_metadata_destroy(metadata) };
    take(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_named_as_librdkafka_and_python_name_them() {
        assert_eq!(code_name(RDKafkaErrorCode::Fenced), "_FENCED");
        assert_eq!(code_name(RDKafkaErrorCode::OperationTimedOut), "_TIMED_OUT");
        assert_eq!(
            code_name(RDKafkaErrorCode::InvalidProducerEpoch),
            "INVALID_PRODUCER_EPOCH"
        );
    }

    #[test]
    fn a_fatal_error_is_neither_retriable_nor_abortable() {
        let fenced = TxnError::fatal(RDKafkaErrorCode::Fenced, "fenced by a newer one".into());
        assert_eq!(fenced.code, "_FENCED");
        assert!(fenced.fatal && !fenced.retriable && !fenced.abortable);
        // Anything but a transactional call's own error is named the same way.
        let flush = TxnError::from_kafka(&KafkaError::Flush(RDKafkaErrorCode::QueueFull));
        assert_eq!(flush.code, "_QUEUE_FULL");
    }
}
