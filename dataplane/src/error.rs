//! The crate's errors: `Error`, one variant per way a call fails, whose text is what
//! Python reads (the engine and the tests match on these texts: keep them). The
//! exception each becomes is decided in one place, `exceptions`.

use std::fmt;

#[cfg(feature = "python")]
use std::ffi::CString;

#[cfg(feature = "python")]
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
#[cfg(feature = "python")]
use rdkafka::types::RDKafkaRespErr;

#[cfg(feature = "python")]
use crate::group::TxnError;

/// A delivery ledger's refusal (`Ledger`): a record out of the order it keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LedgerError {
    /// Sent at or below the last record in flight.
    SentAfter { offset: i64, last: i64 },
    /// Sent at or below what was delivered already.
    SentAfterDelivered { offset: i64, delivered_through: i64 },
    /// Settled, but never sent.
    NotInFlight(i64),
    /// Settled a second time.
    SettledTwice(i64),
}

impl fmt::Display for LedgerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::SentAfter { offset, last } => write!(f, "offset {offset} sent after {last}"),
            Self::SentAfterDelivered {
                offset,
                delivered_through,
            } => write!(
                f,
                "offset {offset} sent after {delivered_through} was delivered"
            ),
            Self::NotInFlight(offset) => write!(f, "offset {offset} was not in flight"),
            Self::SettledTwice(offset) => write!(f, "offset {offset} settled twice"),
        }
    }
}

/// A record of the mover: where it was read, and the target topic it goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordAt {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub target: String,
}

impl fmt::Display for RecordAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            topic,
            partition,
            offset,
            target,
        } = self;
        write!(
            f,
            "{topic} partition {partition} offset {offset} (to {target})"
        )
    }
}

/// Why a call of the data plane failed. Python sees the text (`Display`) as the
/// message of the exception `exceptions` picks (by the groups below).
#[derive(Debug, Clone)]
pub enum Error {
    // --- The caller's arguments (ValueError) ---
    /// A setting the mover forces, given another value.
    ForcedSetting {
        side: &'static str,
        key: String,
        value: String,
        wanted: &'static str,
        why: &'static str,
    },
    /// `transactional.id` among the target settings.
    TransactionalIdSetting,
    EmptyTransactionalId,
    /// `offsets_group` without `transactional_id`.
    OffsetsGroupAlone(String),
    EmptyOffsetsGroup,
    /// librdkafka refused a client's settings (its words, secrets redacted).
    Settings {
        side: &'static str,
        refusal: String,
    },
    NulInReservedHeader,
    /// A timeout that is not a number of seconds >= 0.
    Timeout(f64),
    /// `check_client`'s kind, neither consumer nor producer.
    ClientKind(String),
    /// `check_client`: librdkafka refused the client (its words, secrets redacted).
    ClientRefused(String),

    // --- The mover's state (MoverError) ---
    Closed,
    /// A panic caught at the Python boundary (what it said).
    Panicked(String),
    NotAssigned {
        topic: String,
        partition: i32,
    },
    AlreadyAssigned {
        topic: String,
        partition: i32,
    },
    EmptyTargetTopic {
        topic: String,
        partition: i32,
    },
    NothingHeld {
        topic: String,
        partition: i32,
    },
    /// Transactional, and no transaction open to move records in.
    OutsideTransaction,

    // --- Records (MoverError) ---
    /// The source handed out an error for a partition.
    #[cfg(feature = "python")]
    Consuming {
        topic: String,
        partition: i32,
        offset: i64,
        code: RDKafkaRespErr,
        detail: String,
    },
    /// A record of a partition the mover was not assigned.
    UnassignedRecord {
        topic: String,
        partition: i32,
        offset: i64,
    },
    Producing {
        record: RecordAt,
        cause: Box<Error>,
    },
    Delivering {
        record: RecordAt,
        cause: Box<Error>,
    },
    /// A released record the producer refused as too large.
    TooLargeForProducer,
    /// A slot or offset a delivery report's word cannot carry (`Sent`).
    BeyondDeliveryReport {
        slot: usize,
        offset: i64,
    },
    NoSuchTargetPartition {
        target: String,
        count: usize,
        partition: i32,
    },
    /// Asking the target for topics' metadata (`topics`: their names, joined).
    LearningPartitions {
        topics: String,
        cause: Box<Error>,
    },
    /// The target's metadata answer left a topic out.
    NotInAnswer,
    Ledger(LedgerError),

    // --- librdkafka (MoverError) ---
    /// A fatal error of a client, from its error callback.
    #[cfg(feature = "python")]
    ClientFailed {
        client: &'static str,
        error: KafkaError,
        reason: String,
    },
    /// The producer's fatal error with its cause (`rd_kafka_fatal_error`).
    #[cfg(feature = "python")]
    TargetFatal {
        code: RDKafkaErrorCode,
        reason: String,
    },
    /// The producer refused a record as fatal, and librdkafka named no cause.
    FatalWithoutCause,
    /// An error of the rdkafka crate's API.
    #[cfg(feature = "python")]
    Kafka(KafkaError),
    /// An error code of librdkafka's API (its name and description).
    #[cfg(feature = "python")]
    Code(RDKafkaRespErr),
    /// An error object of librdkafka's API (`rd_kafka_error_t`), by its text.
    Librdkafka(String),
    /// The consumer has no queue of its own.
    NoConsumerQueue,
    NulInTopicName(String),
    NoTopicHandle(String),
    #[cfg(feature = "python")]
    HeaderNotAdded {
        name: Vec<u8>,
        code: RDKafkaRespErr,
    },
    #[cfg(feature = "python")]
    HeaderNotRemoved {
        name: CString,
        code: RDKafkaRespErr,
    },

    // --- Transactions (TransactionError: a transactional call raises any failure as one) ---
    /// librdkafka's verdict on a transactional call.
    #[cfg(feature = "python")]
    Transaction(TxnError),
    NotTransactional,
    TransactionsNotInitialized,
    NoOpenTransaction,
    TransactionAlreadyOpen,
    NulInOffsetsGroup(String),
    NoGroupMetadata,
    /// Aborted, but a partition could not be sought back to its first record.
    NotRewound {
        topic: String,
        partition: i32,
        offset: i64,
        cause: Box<Error>,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ForcedSetting {
                side,
                key,
                value,
                wanted,
                why,
            } => write!(
                f,
                "{side} setting {key}={value}: the mover needs {key}={wanted} ({why}); \
                 leave {key} out of the {side} settings"
            ),
            Self::TransactionalIdSetting => f.write_str(
                "target setting transactional.id: the mover sets it; leave transactional.id \
                 out of the target settings and give Mover(..., transactional_id=...)",
            ),
            Self::EmptyTransactionalId => f.write_str(
                "transactional_id is empty: give the partition's stable transactional id, \
                 or None for an idempotent (non-transactional) mover",
            ),
            Self::OffsetsGroupAlone(group) => write!(
                f,
                "offsets_group={group:?}: offsets are committed in the mover's \
                 transactions; give transactional_id too, or leave offsets_group out"
            ),
            Self::EmptyOffsetsGroup => f.write_str(
                "offsets_group is empty: give the target group the source offsets are \
                 committed to, or None",
            ),
            Self::Settings { side, refusal } => write!(f, "{side} settings: {refusal}"),
            Self::NulInReservedHeader => f.write_str("a reserved header name holds a NUL"),
            Self::Timeout(timeout) => write!(f, "timeout={timeout}: give seconds >= 0"),
            Self::ClientKind(kind) => write!(
                f,
                "check_client: kind {kind:?} is neither consumer nor producer"
            ),
            Self::ClientRefused(refusal) => f.write_str(refusal),
            Self::Closed => f.write_str("the mover is closed"),
            Self::Panicked(what) => write!(
                f,
                "the data plane failed on an internal error ({what}); the mover is closed and \
                 nothing it had not delivered counts as replicated; please report this with the log"
            ),
            Self::NotAssigned { topic, partition } => write!(
                f,
                "{topic} partition {partition} is not assigned to the mover"
            ),
            Self::AlreadyAssigned { topic, partition } => {
                write!(f, "{topic} partition {partition} is already assigned")
            }
            Self::EmptyTargetTopic { topic, partition } => write!(
                f,
                "{topic} partition {partition}: the target topic is empty"
            ),
            Self::NothingHeld { topic, partition } => {
                write!(f, "{topic} partition {partition} holds no record")
            }
            Self::OutsideTransaction => f.write_str(
                "the mover is transactional and no transaction is open: call \
                 begin_transaction() first",
            ),
            #[cfg(feature = "python")]
            Self::Consuming {
                topic,
                partition,
                offset,
                code,
                detail,
            } => write!(
                f,
                "consuming {topic} partition {partition} at offset {offset}: {} ({detail})",
                crate::source::describe(*code)
            ),
            Self::UnassignedRecord {
                topic,
                partition,
                offset,
            } => write!(
                f,
                "consuming {topic} partition {partition} at offset {offset}: a record of a \
                 partition the mover was not assigned"
            ),
            Self::Producing { record, cause } => write!(f, "producing {record}: {cause}"),
            Self::Delivering { record, cause } => write!(f, "delivering {record}: {cause}"),
            Self::TooLargeForProducer => f.write_str("too large for the producer"),
            Self::BeyondDeliveryReport { slot, offset } => write!(
                f,
                "slot {slot} or source offset {offset} is beyond what a delivery report can \
                 carry (65,536 partitions a Mover, offsets below 2^48)"
            ),
            Self::NoSuchTargetPartition {
                target,
                count,
                partition,
            } => write!(
                f,
                "{target} has {count} partitions on the target: partition {partition} does \
                 not exist there (the remote topic must grow with its source topic)"
            ),
            Self::LearningPartitions { topics, cause } => {
                write!(
                    f,
                    "learning the partitions of {topics} on the target: {cause}"
                )
            }
            Self::NotInAnswer => f.write_str("the target's answer does not name it"),
            Self::Ledger(error) => write!(f, "{error}"),
            #[cfg(feature = "python")]
            Self::ClientFailed {
                client,
                error,
                reason,
            } => write!(f, "the {client} client failed: {error}: {reason}"),
            #[cfg(feature = "python")]
            Self::TargetFatal { code, reason } => {
                write!(f, "the target client failed fatally: {code:?}: {reason}")
            }
            Self::FatalWithoutCause => f.write_str("Fatal"),
            #[cfg(feature = "python")]
            Self::Kafka(error) => write!(f, "{error}"),
            #[cfg(feature = "python")]
            Self::Code(code) => f.write_str(&crate::source::describe(*code)),
            Self::Librdkafka(text) => f.write_str(text),
            Self::NoConsumerQueue => {
                f.write_str("the consumer has no queue of its own (it needs a group.id)")
            }
            Self::NulInTopicName(name) => write!(f, "topic name {name:?} holds a NUL"),
            Self::NoTopicHandle(name) => {
                write!(f, "librdkafka refused a handle on target topic {name}")
            }
            #[cfg(feature = "python")]
            Self::HeaderNotAdded { name, code } => write!(
                f,
                "adding header {:?} to a record was refused ({code:?}); the record is not sent",
                String::from_utf8_lossy(name)
            ),
            #[cfg(feature = "python")]
            Self::HeaderNotRemoved { name, code } => write!(
                f,
                "removing header {name:?} from a record was refused ({code:?}); the record is \
                 not sent"
            ),
            #[cfg(feature = "python")]
            Self::Transaction(error) => write!(f, "{}: {}", error.code, error.message),
            Self::NotTransactional => f.write_str(
                "the mover is not transactional: make it with Mover(..., \
                 transactional_id=...)",
            ),
            Self::TransactionsNotInitialized => {
                f.write_str("call init_transactions() before the first begin_transaction()")
            }
            Self::NoOpenTransaction => f.write_str("no transaction is open"),
            Self::TransactionAlreadyOpen => {
                f.write_str("a transaction is already open: commit or abort it first")
            }
            Self::NulInOffsetsGroup(group) => {
                write!(f, "offsets group {group:?} contains a NUL byte")
            }
            Self::NoGroupMetadata => f.write_str("librdkafka could not make the group's metadata"),
            Self::NotRewound {
                topic,
                partition,
                offset,
                cause,
            } => write!(
                f,
                "aborted, but {topic} partition {partition} could not be sought back to \
                 offset {offset}: {cause}"
            ),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    /// A ValueError: the caller's arguments, refused before anything moved.
    pub fn is_argument(&self) -> bool {
        matches!(
            self,
            Self::ForcedSetting { .. }
                | Self::TransactionalIdSetting
                | Self::EmptyTransactionalId
                | Self::OffsetsGroupAlone(_)
                | Self::EmptyOffsetsGroup
                | Self::Settings { .. }
                | Self::NulInReservedHeader
                | Self::Timeout(_)
                | Self::ClientKind(_)
                | Self::ClientRefused(_)
        )
    }

    /// As a transactional call raises it: every failure is a TransactionError, the
    /// mover's own ones with code `_STATE` (`TxnError::state`).
    #[cfg(feature = "python")]
    pub fn in_transactional_call(self) -> Self {
        match self {
            Self::Transaction(_) => self,
            other => Self::Transaction(TxnError::state(&other)),
        }
    }
}

impl From<LedgerError> for Error {
    fn from(error: LedgerError) -> Self {
        Self::Ledger(error)
    }
}

#[cfg(feature = "python")]
impl From<TxnError> for Error {
    fn from(error: TxnError) -> Self {
        Self::Transaction(error)
    }
}

#[cfg(feature = "python")]
impl From<KafkaError> for Error {
    fn from(error: KafkaError) -> Self {
        Self::Kafka(error)
    }
}
