"""What Kafka errors mean to a replication task: which refuse it access, which reject
the records themselves (sending them again fails the same way), and the one line
naming an error's cause in a log line instead of a librdkafka dump."""

from __future__ import annotations

from confluent_kafka import KafkaError

from replicator.acls.principal import missing_acl
from replicator.config.model import ClusterConfig
from replicator.errors import ReplicatorError
from replicator.kafka.errors import error_text

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


class AccessDenied(ReplicatorError):
    """A cluster refused the task's principal (a missing ACL, refused credentials):
    only an operator can fix that, so starting the task again would fail the same
    way. The message names the principal, the operation, the resource and the fix."""


def missing_on_source(source: ClusterConfig, target: str, code: int, topic: str | None) -> str:
    """The ACL a flow's consumer lacks on `source` (replicating to `target`), for
    its error message."""
    if code == KafkaError.GROUP_AUTHORIZATION_FAILED:
        return missing_acl(source, "READ", f"GROUP replicator-{source.alias}-{target}")
    if code == KafkaError.TOPIC_AUTHORIZATION_FAILED and topic:
        return missing_acl(source, "READ", f"TOPIC {topic}")
    return (
        "check the credentials of the source's client settings, and grant the "
        "replicator's principal READ and DESCRIBE on the topics and its group"
    )


def reason(error: BaseException | KafkaError | None) -> str:
    """The one-line cause of a Kafka error or exception."""
    if isinstance(error, KafkaError):
        return error.str()
    if isinstance(error, BaseException):
        return error_text(error)
    return str(error)
