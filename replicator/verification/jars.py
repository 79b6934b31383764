"""Where the JVM artifact sets resolved from Maven Central are kept: `make setup` (and
the image) put each set's jars in a folder of its own, `spark-kafka/` for the
verification job's Kafka source, `kafka/` for the local stack's brokers and MirrorMaker 2."""

from __future__ import annotations

import os
from pathlib import Path

#: Where `make setup` copies the JVM artifacts (relative to the project root).
DEFAULT_JVM_DIR = Path(".cache/jvm")
#: Another folder (the image's: /opt/replicator/jvm).
JVM_DIR_ENV = "REPLICATOR_JVM_DIR"


def jvm_dir() -> Path:
    """The folder holding the resolved artifact sets (`kafka/`, `spark-kafka/`)."""
    return Path(os.environ.get(JVM_DIR_ENV, DEFAULT_JVM_DIR)).resolve()
