"""The Kafka JVMs' class-data archive (AppCDS), made once by `make setup`:

    python -m replicator_lab.class_archive

starts a throwaway one-node cluster with `-XX:ArchiveClassesAtExit`, waits until it
serves, and stops it; the JVM writes the classes it loaded to the archive as it
exits. Every later broker and storage tool of the local stack maps them from it
(`jvm.archive_options`). Safe to run again: an existing archive is kept; delete it
(or `make clean`) after the Kafka jars or the JDK change. The archive is written
under a temporary name and renamed, so no JVM ever maps half of one.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
from pathlib import Path

from replicator_lab.broker import ClusterSpec, port_in_use
from replicator_lab.errors import StackError
from replicator_lab.jvm import JVM_OPTIONS_ENV, class_archive
from replicator_lab.stack import LocalStack


def _free_port_pair() -> int:
    """A port whose next one is free too (the controller listens on port + 1)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port < 65534 and not port_in_use(port + 1):
            return port
    raise StackError(
        "no two consecutive free ports on 127.0.0.1 after 50 tries; "
        "free some and run `make setup` again"
    )


def build(timeout: float = 180.0) -> Path:
    """The Kafka archive, made if it is not there yet; its path."""
    archive = class_archive("kafka")
    if archive.is_file():
        return archive
    partial = archive.with_name(f"{archive.name}.{os.getpid()}.partial")
    saved = os.environ.get(JVM_OPTIONS_ENV)
    os.environ[JVM_OPTIONS_ENV] = f"{saved or ''} -XX:ArchiveClassesAtExit={partial}".strip()
    try:
        with tempfile.TemporaryDirectory(prefix="kafka-class-archive-") as data_dir:
            stack = LocalStack([ClusterSpec("archive", _free_port_pair())], Path(data_dir))
            try:
                stack.up(timeout=timeout)
            finally:
                stack.down(wipe=True)
    finally:
        if saved is None:
            os.environ.pop(JVM_OPTIONS_ENV, None)
        else:
            os.environ[JVM_OPTIONS_ENV] = saved
    if not partial.is_file():
        raise StackError(
            f"the broker stopped without writing its class archive {partial}: its JVM "
            "needs -XX:ArchiveClassesAtExit (JDK 13 or later); brokers start without it"
        )
    partial.replace(archive)
    return archive


if __name__ == "__main__":
    sys.stdout.write(f"class archive: {build()}\n")
