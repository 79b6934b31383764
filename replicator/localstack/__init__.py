"""Local Apache Kafka clusters (KRaft, loopback) for development, tests and `make run`.

It sits in the top layer with `operations` and `procedures` (`system` starts the
replicator's workers through `operations.launchers`, `mirrormaker_translation` reads
the engine's formats); only `cli`, the tests and the benchmarks import it.
"""

from replicator.localstack.broker import ClusterSpec
from replicator.localstack.errors import StackError
from replicator.localstack.stack import DEFAULT_CLUSTERS, ClusterStatus, LocalStack

__all__ = ["DEFAULT_CLUSTERS", "ClusterSpec", "ClusterStatus", "LocalStack", "StackError"]
