"""A real verification server (`replicator verification-server`: Spark Connect, local)
for the tests that run the verification job as its client."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from replicator.verification.server import serving

from helpers.kafka import free_port_pair


@contextmanager
def verification_server(log: Path) -> Iterator[str]:
    """`replicator verification-server` (the command operators run) on a free port for
    the block: its `sc://` URL once it listens. Its output goes to `log`."""
    port = free_port_pair()
    replicator = str(Path(sys.executable).with_name("replicator"))
    command = [replicator, "verification-server", "--port", str(port), "--cores", "2"]
    with serving(command, log):
        yield f"sc://127.0.0.1:{port}"
