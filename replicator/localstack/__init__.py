"""Local Apache Kafka clusters (KRaft, loopback) for development, tests and `make run`."""

from replicator.localstack.broker import ClusterSpec
from replicator.localstack.errors import StackError
from replicator.localstack.stack import DEFAULT_CLUSTERS, ClusterStatus, LocalStack

__all__ = ["DEFAULT_CLUSTERS", "ClusterSpec", "ClusterStatus", "LocalStack", "StackError"]
