"""A flow's status is read from its target's status topic once per look (issue 41): the
topic holds the partitions' and workers' rows, the runners' thread health and the ACL
sync's last round, and at 10,000 partitions each read of it takes seconds. Nothing
connects: the topic is a dictionary handed out by a stand-in reader."""

from __future__ import annotations

import json
import sys
import time

import pytest

from replicator.acls import status as acl_status
from replicator.engine import status as engine_status
from replicator.operations import thread_status
from replicator.operations.dr_status import AclSyncInfo, CheckpointInfo, flow_status

from helpers.engine_fakes import flow


def _topic(name: str) -> dict[bytes, bytes]:
    now = int(time.time() * 1000)
    worker = {
        "flow": name, "worker": "w1", "state": "running", "host": "h", "pid": 1,
        "partitions": 1, "topics": ["orders"], "error": None,
        "updated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }  # fmt: skip
    threads = {"flow": name, "runner": "h:1", "threads": [], "updated_ms": now}
    return {
        f"{name}|worker|w1".encode(): json.dumps(worker).encode(),
        f"{name}|threads|h:1".encode(): json.dumps(threads).encode(),
        b"someone-else|worker|w9": json.dumps({**worker, "flow": "someone-else"}).encode(),
    }


def test_a_flows_status_reads_its_status_topic_once(monkeypatch: pytest.MonkeyPatch) -> None:
    selected = flow(**{"sync.topic.acls.enabled": "true"})
    reads: list[str] = []

    def read_compacted(cluster: object, topic: str, **_: object) -> dict[bytes, bytes]:
        reads.append(topic)
        return _topic(selected.name)

    for module in (engine_status, thread_status, acl_status):
        monkeypatch.setattr(module, "read_compacted", read_compacted)
    none = CheckpointInfo("primary.checkpoints.internal", None, [], None, None)
    # The package exports a function of the module's name: the module itself.
    dr_status = sys.modules["replicator.operations.dr_status"]
    monkeypatch.setattr(dr_status, "newest_checkpoint", lambda _flow: none)

    status = flow_status(selected, "running", True, count=False)

    assert status.error is None, status.error
    assert reads == [engine_status.STATUS_TOPIC]
    assert [w.worker for w in status.workers] == ["w1"]
    assert [b.runner for b in status.background] == ["h:1"]
    assert status.acl_sync == AclSyncInfo(True)  # looked for in the same read: none yet
