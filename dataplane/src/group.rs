//! The offsets a transaction commits, on librdkafka's public API (`rdkafka.h`
//! through rdkafka-sys): the group's metadata is made from a group id alone
//! (`rd_kafka_consumer_group_metadata_new`: generation -1, no member id) and
//! `rd_kafka_send_offsets_to_transaction` sends the offsets with it. The rdkafka
//! crate makes a group's metadata only from one of its own consumers, and the group
//! these offsets go to lives on the target cluster, where no consumer of ours is a
//! member (docs/dataplane.md, "Exactly-once": why). All `unsafe` of transactions is
//! in this module.

use std::ffi::{CStr, CString};
use std::time::Duration;

use rdkafka::bindings as rd;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::TopicPartitionList;

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

impl TxnError {
    /// A failure of the mover's own (not a librdkafka error object).
    pub fn plain(message: String) -> Self {
        TxnError {
            code: "_STATE".into(),
            message,
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
                        code.map_or_else(|| "_FAIL".into(), |c| format!("{c:?}"))
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
fn take(error: *mut rd::rd_kafka_error_t) -> Result<(), TxnError> {
    if error.is_null() {
        return Ok(());
    }
    let text = |ptr: *const std::ffi::c_char| {
        if ptr.is_null() {
            String::new()
        } else {
            unsafe { CStr::from_ptr(ptr) }
                .to_string_lossy()
                .into_owned()
        }
    };
    let out = unsafe {
        TxnError {
            code: text(rd::rd_kafka_error_name(error)),
            message: text(rd::rd_kafka_error_string(error)),
            fatal: rd::rd_kafka_error_is_fatal(error) != 0,
            retriable: rd::rd_kafka_error_is_retriable(error) != 0,
            abortable: rd::rd_kafka_error_txn_requires_abort(error) != 0,
        }
    };
    unsafe { rd::rd_kafka_error_destroy(error) };
    Err(out)
}

/// Send `offsets` to the producer's open transaction as the offsets of `group` (a
/// group on the producer's cluster), to be committed with it.
///
/// `producer` must be a live transactional producer handle (the rdkafka crate's
/// `Client::native_ptr` of the mover's producer).
pub fn send_offsets(
    producer: *mut rd::rd_kafka_t,
    offsets: &TopicPartitionList,
    group: &str,
    timeout: Duration,
) -> Result<(), TxnError> {
    let group = CString::new(group)
        .map_err(|_| TxnError::plain(format!("offsets group {group:?} contains a NUL byte")))?;
    let metadata = unsafe { rd::rd_kafka_consumer_group_metadata_new(group.as_ptr()) };
    if metadata.is_null() {
        return Err(TxnError::plain(
            "librdkafka could not make the group's metadata".into(),
        ));
    }
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    let error =
        unsafe { rd::rd_kafka_send_offsets_to_transaction(producer, offsets.ptr(), metadata, ms) };
    unsafe { rd::rd_kafka_consumer_group_metadata_destroy(metadata) };
    take(error)
}
