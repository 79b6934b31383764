"""Everything `make run`, the container image and the tests run locally, as processes
of their own: Apache Kafka clusters (KRaft, loopback; `broker`, `stack`, optionally
secured with a private CA by `security`, `certificates` and `client_config`), the
JVM they need (`jvm`), PostgreSQL for the state store (`postgres`), Airflow
standalone and its REST client (`airflow`, `airflow_client`), demo traffic and the
DR-aware demo application (`demo`, `demo_apps`), the whole embedded system
(`system`) and what the image runs (`container`), and MirrorMaker 2 itself as the
reference to compare with (`mirrormaker`, `mirrormaker_translation`).

The lab, not the product: a distribution of its own (lab/pyproject.toml) that
`make setup` installs beside `replicator`; neither the product's wheel nor the engine
image holds it. It may import any part of `replicator` (`system` starts the
replicator's workers through `operations.launchers`, `mirrormaker_translation` reads
the engine's formats); nothing in `replicator` imports it (tests/test_layering.py).
`cli` adds `replicator stack ...` through the `replicator.cli` entry points.
"""

from replicator_lab.broker import ClusterSpec
from replicator_lab.errors import StackError
from replicator_lab.stack import DEFAULT_CLUSTERS, ClusterStatus, LocalStack

__all__ = ["DEFAULT_CLUSTERS", "ClusterSpec", "ClusterStatus", "LocalStack", "StackError"]
