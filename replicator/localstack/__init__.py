"""Everything `make run`, the container image and the tests run locally, as processes
of their own: Apache Kafka clusters (KRaft, loopback; `broker`, `stack`, optionally
secured with a private CA by `security`, `certificates` and `client_config`), the
JVM they need (`jvm`), PostgreSQL for the state store (`postgres`), Airflow
standalone and its REST client (`airflow`, `airflow_client`), demo traffic and the
DR-aware demo application (`demo`, `demo_apps`), the whole embedded system
(`system`) and what the image runs (`container`), and MirrorMaker 2 itself as the
reference to compare with (`mirrormaker`, `mirrormaker_translation`).

It sits in the top layer with `operations` and `procedures` and may import them,
`offsets`, `engine` and everything below (`system` starts the replicator's workers
through `operations.launchers`, `mirrormaker_translation` reads the engine's
formats); only `cli`, the tests and the benchmarks import it.
"""

from replicator.localstack.broker import ClusterSpec
from replicator.localstack.errors import StackError
from replicator.localstack.stack import DEFAULT_CLUSTERS, ClusterStatus, LocalStack

__all__ = ["DEFAULT_CLUSTERS", "ClusterSpec", "ClusterStatus", "LocalStack", "StackError"]
