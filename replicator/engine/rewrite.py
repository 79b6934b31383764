"""The record rewrite: what a replica carries in its headers, and which records are
loops, with nothing but data in and data out (no client), so it can be tested
without Kafka.

A replica keeps key, value, timestamp and partition number (the replication loop
copies them), drops the replication headers the record may carry from an earlier
hop, and gets ours: the cluster, topic and offset it was read from (what resume
and offset translation rely on), and the cluster it originated on when it was
itself our copy of a record from elsewhere.

A record is a loop only when it is itself our copy, on the topic being replicated
now, of a record that came from the target (in an active-active pair or a ring).
Our copy: its `__dr_src` / `__dr_topic` name a topic that the flow's policy names
the topic being read now after (`format_remote_topic(src, topic) == topic read`);
then `__dr_origin` (or, for one hop, `__dr_src`) says where it came from. A record
that carries provenance naming another topic was written by someone else (an
application forwarding its input's headers, as Kafka Streams does): it is that
application's data, originated here, and is copied.

Records written before `__dr_topic` existed (an older replicator) carry no topic.
Where the policy names remote topics after their source cluster (Default), the
topic's name tells whether it is a replica from `__dr_src`, as it did before. Where
it does not (Identity), nothing tells, and the record is treated as before: a loop
when it came from the target, counted apart (`loop_legacy`) so such skips show.
They can only be records replicated before the upgrade.

A record with no headers of its own, the common case, gets just ours, and the loop
makes that list itself (`source_entry`, the offset header, the run's topic entry): a
call per record there cost a tenth of the loop's time. `RecordRewrite.headers` is for
the rest.
"""

from __future__ import annotations

from replicator.config.policies import ReplicationPolicy
from replicator.engine.headers import (
    OFFSET_HEADER,
    ORIGIN_HEADER,
    OURS,
    SOURCE_HEADER,
    TOPIC_HEADER,
    Headers,
    encode_offset,
)

#: Bytes a header adds to a record beyond its name and value.
_HEADER_OVERHEAD = 10
#: Why a record is not replicated (the `reason` label of replicator_records_skipped).
LOOP = "loop"
LOOP_LEGACY = "loop_legacy"
#: How many (topic, cluster, topic) answers `_copied_here` keeps.
_CACHE_MAX = 4096


class RecordRewrite:
    """Our headers on the replicas of one flow (`source` -> `target`, cluster aliases,
    topics named by `policy`)."""

    __slots__ = ("_copies", "_policy", "_target", "skip", "source_entry")

    def __init__(self, source: str, target: str, policy: ReplicationPolicy) -> None:
        #: Our source header, the same on every replica of the flow.
        self.source_entry = (SOURCE_HEADER, source.encode())
        self._target = target.encode()
        self._policy = policy
        self._copies: dict[tuple[str, bytes, bytes | None], bool | None] = {}
        #: Why the last record `headers` returned None for is a loop (LOOP or LOOP_LEGACY).
        self.skip = LOOP

    def headers(self, own: Headers, offset: int, topic: str) -> tuple[Headers | None, int]:
        """The headers of the replica of the record at `offset` of `topic` that carries
        `own` headers, and the bytes its own headers add to it (they count against the
        remote topic's max.message.bytes; ours fit in the headroom topic sync adds).
        None for a loop: our copy of a record that came from the target (`skip` says
        which kind)."""
        out: Headers = []
        source = origin = copied_from = None
        own_bytes = 0
        for name, value in own:
            if name in OURS:
                if name == SOURCE_HEADER:
                    source = value
                elif name == ORIGIN_HEADER:
                    origin = value
                elif name == TOPIC_HEADER:
                    copied_from = value
                continue
            out.append((name, value))
            own_bytes += len(name) + (len(value) if value else 0) + _HEADER_OVERHEAD
        if source is not None:
            ours = self._copied_here(topic, source, copied_from)
            if ours is not False:
                # Our copy (or, without a topic, possibly ours): it came from `first`.
                first = origin if origin is not None else source
                if first == self._target:
                    self.skip = LOOP if ours else LOOP_LEGACY
                    return None, 0
                origin = first
            else:
                origin = None  # someone else's provenance: the record originated here
        else:
            origin = None
        out.append(self.source_entry)
        out.append((OFFSET_HEADER, encode_offset(offset)))
        out.append((TOPIC_HEADER, topic.encode()))
        if origin is not None:
            out.append((ORIGIN_HEADER, origin))
        return out, own_bytes

    def _copied_here(self, topic: str, source: bytes, copied_from: bytes | None) -> bool | None:
        """Whether a record of `topic` whose provenance says it was read from
        `copied_from` on cluster `source` is our copy, written into `topic` by the
        replication of that topic. None when it may be: a record written before
        `__dr_topic`, under a policy whose names do not tell."""
        key = (topic, source, copied_from)
        known = self._copies.get(key, key)
        if known is not key:
            return known  # type: ignore[return-value]
        answer = self._decide(topic, source, copied_from)
        if len(self._copies) >= _CACHE_MAX:
            self._copies.clear()
        self._copies[key] = answer
        return answer

    def _decide(self, topic: str, source: bytes, copied_from: bytes | None) -> bool | None:
        policy = self._policy
        alias = source.decode(errors="replace")
        if copied_from is not None:
            upstream = copied_from.decode(errors="replace")
            return policy.format_remote_topic(alias, upstream) == topic
        upstream = policy.upstream_topic(topic)
        if upstream is None or upstream == topic:
            # The name is the source's (Identity), or names no cluster: nothing tells.
            return None if upstream == topic else False
        return policy.topic_source(topic) == alias
