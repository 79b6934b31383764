"""Finding Java and the Kafka jars that `make setup` resolved from Maven Central.

Both are looked up once per command so that a missing JDK or an unresolved
artifact set is reported in one line before any process is started.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from replicator.verification.jars import jvm_dir
from replicator_lab.errors import StackError

#: More options for every JVM the local stack starts (brokers, their storage tool,
#: MirrorMaker 2), split on whitespace: e.g. `-XX:TieredStopAtLevel=1` (the C1 compiler
#: only) where a quick start matters more than peak throughput, as in the tests, whose
#: brokers start in about 40% less CPU with it. Unset: none (the benchmarks' brokers).
JVM_OPTIONS_ENV = "REPLICATOR_STACK_JVM_OPTIONS"


def class_archive(artifact_set: str) -> Path:
    """Where the class-data archive of an artifact set's JVMs is kept (`make setup`
    writes the Kafka one: `python -m replicator_lab.class_archive`)."""
    return jvm_dir() / f"{artifact_set}.jsa"


def archive_options(artifact_set: str) -> list[str]:
    """`-XX:SharedArchiveFile` for the set's archive when there is one: the JVM maps the
    classes a broker loads from it instead of loading and verifying them from the jars
    (a test broker starts in about 40% less CPU: 3.3 s against 5.6 s). An archive
    that does not match (another JDK, other jars) is ignored by the JVM, which then
    loads the classes from the jars as without it."""
    archive = class_archive(artifact_set)
    return [f"-XX:SharedArchiveFile={archive}"] if archive.is_file() else []


def extra_jvm_options() -> list[str]:
    """The options of `$REPLICATOR_STACK_JVM_OPTIONS`, if any."""
    return os.environ.get(JVM_OPTIONS_ENV, "").split()


def find_java() -> Path:
    """The `java` executable: `$JAVA_HOME/bin/java` if set, else the one on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
        raise StackError(
            f"JAVA_HOME={java_home} has no executable bin/java; "
            "point JAVA_HOME at a JDK 17+ or unset it to use java from PATH"
        )
    found = shutil.which("java")
    if found is None:
        raise StackError(
            "java not found on PATH and JAVA_HOME is not set; "
            "install OpenJDK 17+ (Debian: apt-get install openjdk-17-jdk-headless)"
        )
    return Path(found)


def artifact_classpath(artifact_set: str) -> str:
    """A `-cp` value for one resolved artifact set, e.g. ``kafka``."""
    folder = jvm_dir() / artifact_set
    jars = sorted(folder.glob("*.jar"))
    if not jars:
        raise StackError(
            f"no jars in {folder} (artifact set {artifact_set!r}); "
            "run `make setup` to resolve them from Maven Central"
        )
    return os.pathsep.join(str(jar) for jar in jars)
