"""Apache Kafka's own MirrorMaker 2 (from the Maven jars) in tests: an mm2.properties
both MM2 and the replicator run on, and MM2 started until its herders run."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from replicator_lab.mirrormaker import ONE_BROKER, MirrorMaker

#: MM2's JVM starts in 15 s on an idle machine; under `make test`'s load it took over 120 s.
MM2_START_S = 300


def mm2_properties(
    primary: str, dr: str, topic: str, group: str, *, heartbeats: bool = False
) -> tuple[dict[str, str], str, str]:
    """An mm2.properties for `topic` and `group` from `primary` to `dr`, with the flow's
    source and target aliases; aliases of their own, so MM2's Connect topics
    (`mm2-offsets.<alias>.internal`, ...) and group (`<alias>-mm2`) are this test's."""
    source, target = f"src{uuid.uuid4().hex[:8]}", f"dst{uuid.uuid4().hex[:8]}"
    flow = f"{source}->{target}"
    return (
        {
            "clusters": f"{source}, {target}",
            f"{source}.bootstrap.servers": primary,
            f"{target}.bootstrap.servers": dr,
            f"{flow}.enabled": "true",
            f"{flow}.topics": re.escape(topic),
            f"{flow}.groups": re.escape(group),
            f"{target}->{source}.enabled": "false",
            "emit.heartbeats.enabled": "true" if heartbeats else "false",
            "heartbeats.replication.enabled": "false",
            "emit.checkpoints.interval.seconds": "1",
            "sync.group.offsets.enabled": "true",
            "sync.group.offsets.interval.seconds": "1",
            "sync.topic.acls.enabled": "false",
            "refresh.topics.interval.seconds": "1",
            "refresh.groups.interval.seconds": "1",
            # Connect commits MM2's offsets every second (60 s by default): a kill -9
            # then finds records written past the committed offset, not none committed.
            f"{target}.offset.flush.interval.ms": "1000",  # the worker's: its target's keys
            **ONE_BROKER,
        },
        source,
        target,
    )


@contextmanager
def mirror_maker(properties: dict[str, str], workdir: Path) -> Iterator[MirrorMaker]:
    """MM2 on `properties`, its herders started, stopped at the end of the block."""
    with MirrorMaker(properties, workdir) as node:
        node.wait_started(MM2_START_S)
        yield node
