"""`replicator run`'s one metrics endpoint: a port already taken stops the run at once,
naming the port and the fix (before, a second worker process died on "Address already in
use" and was restarted again and again)."""

from __future__ import annotations

import socket
from types import SimpleNamespace

import pytest

from replicator.errors import ReplicatorError
from replicator.operations.runner import _serve_metrics


def test_a_metrics_port_already_taken_is_refused_clearly() -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        flows = [SimpleNamespace(metrics_port=port), SimpleNamespace(metrics_port=port)]
        with pytest.raises(ReplicatorError, match=f"metrics.port {port}: cannot serve"):
            _serve_metrics(flows)  # type: ignore[arg-type]


def test_no_port_named_serves_nothing() -> None:
    assert _serve_metrics([SimpleNamespace(metrics_port=None)]) is None  # type: ignore[list-item]
