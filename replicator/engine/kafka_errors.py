"""What Kafka errors mean to a replication task: which refuse it access, which reject
the records themselves (sending them again fails the same way), and the one line
naming an error's cause in a log line instead of a librdkafka dump."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

#: The principal may not read or write (or is not who it says): an operator must act.
AUTH_ERRORS = frozenset(
    {
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError._AUTHENTICATION,
    }
)
#: Delivery errors that reject the records themselves: sending them again fails the
#: same way. Any other delivery error means the target did not take them now (it is
#: away, restarting, electing a leader): the partition resumes from the target tail.
REJECTED = frozenset(
    {
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.RECORD_LIST_TOO_LARGE,
        KafkaError.INVALID_RECORD,
        KafkaError.INVALID_TIMESTAMP,
        KafkaError.POLICY_VIOLATION,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    }
)


def reason(error: BaseException | KafkaError | None) -> str:
    """The one-line cause of a Kafka error or exception."""
    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], KafkaError):
        error = error.args[0]
    if isinstance(error, KafkaError):
        return error.str()
    return str(error)
