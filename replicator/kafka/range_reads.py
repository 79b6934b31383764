"""The consumer every tool-side reader uses to read a known offset range of a
partition and stop at its end (tails, translations, progress, compacted topics).

`fetch.wait.max.ms` is what makes it fast. A reader that reached a partition's end
leaves a fetch waiting at the broker for new records (500 ms by default), and the
fetch for the next range it is assigned queues behind it: a bisection over a
partition, or a scan of a dozen tails on a rebalance, paid half a second per step.
With 10 ms it pays almost nothing (measured: 15 probes after reads to the end took
13.1 s with the default, 0.8 s with 10 ms). Nothing here waits for new records.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from replicator.kafka.clients import Consumer

#: Public so that bench/translation_latency.py can compare it with the default.
FETCH_WAIT_MS = 10


def range_reader(
    base: Mapping[str, object], purpose: str, cluster: str | None = None, **settings: object
) -> Consumer:
    """A consumer on `base` (a cluster's client settings) in a group of its own
    named for `purpose`, never committing, reporting partition ends; `settings`
    add to or override that (e.g. `isolation.level`). `cluster` (the alias) names
    the cluster in the lines about its reachability."""
    return Consumer(
        {
            **base,
            "group.id": f"replicator-{purpose}-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": FETCH_WAIT_MS,
            **settings,
        },
        cluster=cluster,
    )
