"""What a cluster's metadata says of topics just created: which are not served yet."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from confluent_kafka.admin import TopicMetadata


def unserved(metadata: Mapping[str, TopicMetadata], topics: Iterable[str]) -> list[str]:
    """Those of `topics` the metadata (`list_topics().topics`) does not show with a
    leader for every partition: a created topic is not produced to, and a pattern
    subscription does not match it, until then."""
    return [
        t
        for t in topics
        if t not in metadata
        or metadata[t].error is not None
        or any(p.leader < 0 for p in metadata[t].partitions.values())
    ]
