//! What Python sees of the crate's errors: the exceptions the module raises
//! (`MoverError`, and `TransactionError` under it; ValueError for the caller's
//! arguments) and the one mapping of `Error` to them (`impl From<Error> for PyErr`).
//! Its tests pin the texts the engine and the Python tests match on.

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;

use crate::error::Error;

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

/// The one mapping of the crate's errors to Python's exceptions: the caller's
/// arguments to ValueError, a transactional call's failure to TransactionError
/// (librdkafka's verdict as its attributes), everything else to MoverError.
impl From<Error> for PyErr {
    fn from(error: Error) -> PyErr {
        let text = error.to_string();
        match error {
            Error::Transaction(e) => Python::with_gil(|py| {
                let error = TransactionError::new_err(text);
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
            }),
            other if other.is_argument() => PyValueError::new_err(text),
            _ => MoverError::new_err(text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{LedgerError, RecordAt};
    use crate::group::TxnError;

    fn record() -> RecordAt {
        RecordAt {
            topic: "primary.orders".into(),
            partition: 3,
            offset: 17,
            target: "dr.primary.orders".into(),
        }
    }

    // The engine parses these (`mover_writer._TO_REMOTE`, `_CONSUMING`) and the
    // tests match on them.
    #[test]
    fn a_record_is_named_with_its_target() {
        let error = Error::Producing {
            record: record(),
            cause: Box::new(Error::TooLargeForProducer),
        };
        assert_eq!(
            error.to_string(),
            "producing primary.orders partition 3 offset 17 (to dr.primary.orders): too \
             large for the producer"
        );
        let error = Error::Delivering {
            record: record(),
            cause: Box::new(LedgerError::NotInFlight(17).into()),
        };
        assert_eq!(
            error.to_string(),
            "delivering primary.orders partition 3 offset 17 (to dr.primary.orders): offset \
             17 was not in flight"
        );
    }

    #[test]
    fn a_consume_error_is_named_as_the_engine_parses_it() {
        let error = Error::Consuming {
            topic: "primary.orders".into(),
            partition: 2,
            offset: 40,
            code: rdkafka::types::RDKafkaRespErr::RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET,
            detail: "fetch failed".into(),
        };
        // `mover_writer._CONSUMING`: topic, partition, offset, then the code's name.
        assert!(error.to_string().starts_with(
            "consuming primary.orders partition 2 at offset 40: _AUTO_OFFSET_RESET: "
        ));
        assert!(error.to_string().ends_with(" (fetch failed)"));
    }

    #[test]
    fn the_texts_python_matches_on_stay() {
        let cases: [(Error, &str); 6] = [
            (
                Error::NothingHeld {
                    topic: "t".into(),
                    partition: 0,
                },
                "t partition 0 holds no record",
            ),
            (
                Error::OutsideTransaction,
                "the mover is transactional and no transaction is open: call \
                 begin_transaction() first",
            ),
            (
                Error::LearningPartitions {
                    topics: "a, b".into(),
                    cause: Box::new(Error::NotInAnswer),
                },
                "learning the partitions of a, b on the target: the target's answer does not \
                 name it",
            ),
            (
                Error::OffsetsGroupAlone("g".into()),
                "offsets_group=\"g\": offsets are committed in the mover's transactions; give \
                 transactional_id too, or leave offsets_group out",
            ),
            (
                Error::TransactionalIdSetting,
                "target setting transactional.id: the mover sets it; leave transactional.id \
                 out of the target settings and give Mover(..., transactional_id=...)",
            ),
            (Error::Timeout(-1.0), "timeout=-1: give seconds >= 0"),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text);
        }
    }

    #[test]
    fn a_transactional_call_fails_with_state_for_the_movers_own_errors() {
        let Error::Transaction(e) = Error::NoOpenTransaction.in_transactional_call() else {
            panic!("not a transaction error");
        };
        assert_eq!(e.code, "_STATE");
        assert_eq!(e.message, "no transaction is open");
        assert!(!(e.fatal || e.retriable || e.abortable));
        let fenced = TxnError {
            code: "_FENCED".into(),
            message: "fenced".into(),
            fatal: true,
            retriable: false,
            abortable: false,
        };
        let Error::Transaction(kept) = Error::from(fenced.clone()).in_transactional_call() else {
            panic!("not a transaction error");
        };
        assert_eq!(kept, fenced);
    }

    #[test]
    fn arguments_are_told_apart() {
        assert!(Error::EmptyOffsetsGroup.is_argument());
        assert!(!Error::Closed.is_argument());
        assert!(!Error::NoOpenTransaction.is_argument());
    }
}
