"""Where this test session's clusters listen and keep their data.

Test modules and helpers import these from here, never from `conftest`: pytest imports
each folder's conftest.py under the one module name `conftest`, so `from conftest import`
finds whichever was imported first.
"""

from __future__ import annotations

import os
from pathlib import Path

from replicator_lab import ClusterSpec

_PORTS = os.environ.get("REPLICATOR_TEST_PORTS", "18092,28092").split(",")
#: pytest-xdist's worker number (`make test` runs two): each has clusters of its own,
#: 100 ports further on, and a data folder of its own.
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
TEST_CLUSTERS = (
    ClusterSpec("primary", int(_PORTS[0]) + 100 * _WORKER),
    ClusterSpec("dr", int(_PORTS[1]) + 100 * _WORKER),
)
TEST_DATA_DIR = Path(
    os.environ.get("REPLICATOR_TEST_DATA_DIR", ".data/test-stack")
    + (f"-gw{_WORKER}" if _WORKER else "")
)
