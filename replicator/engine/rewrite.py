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

Headers alone cannot tell our copy from an application's re-drive of it into the same
topic (a retry or dead-letter re-drive into `orders` under Identity, headers kept):
both name the same cluster, topic and source offset. Their positions can. One flow
copies each source partition once and in order into the same partition here, so in
a partition the source offsets (`__dr_off`) of our copies of one provenance only
grow; an application can re-drive a copy only after it was written, so the re-drive
stands after it with a source offset that does not grow. Such a record is the
application's own, originated here, and is copied (`_in_order`). The order is known
from the copies read since the process started: the first record of a provenance read
after a restart is taken as our copy (a restart resumes after the flow's last record
on the target, so the copies skipped since are read again first: docs/engine.md).

A record with no headers of its own, the common case, gets just ours, and the loop
makes that list itself (`source_entry`, the offset header, the run's topic entry): a
call per record there cost a tenth of the loop's time. `RecordRewrite.headers` is for
the rest.
"""

from __future__ import annotations

from typing import cast

from replicator.config.policies import ReplicationPolicy
from replicator.engine.headers import (
    OFFSET_HEADER,
    ORIGIN_HEADER,
    OURS,
    SOURCE_HEADER,
    TOPIC_HEADER,
    Headers,
    decode_offset,
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

    __slots__ = (
        "_copies",
        "_order",
        "_policy",
        "_target",
        "loop_provenance",
        "skip",
        "source_entry",
    )

    def __init__(self, source: str, target: str, policy: ReplicationPolicy) -> None:
        #: Our source header, the same on every replica of the flow.
        self.source_entry = (SOURCE_HEADER, source.encode())
        self._target = target.encode()
        self._policy = policy
        self._copies: dict[tuple[str, bytes, bytes | None], bool | None] = {}
        #: Why the last record `headers` returned None for is a loop (LOOP or LOOP_LEGACY).
        self.skip = LOOP
        #: Whether the last record's provenance is a loop's: its copies are skipped in
        #: order and what stands out of order is copied (the last record may be such a
        #: re-drive, copied; its provenance's verdict is still the loop's).
        self.loop_provenance = False
        #: Per (topic, partition, provenance): (offset, source offset) of the last
        #: record taken as our copy of a record from the target (`_in_order`).
        self._order: dict[tuple[str, int, bytes, bytes | None, bytes | None], tuple[int, int]] = {}

    def headers(
        self, own: Headers, offset: int, topic: str, partition: int
    ) -> tuple[Headers | None, int]:
        """The headers of the replica of the record at `offset` of `topic` (`partition`)
        that carries `own` headers, and the bytes its own headers add to it (they count
        against the remote topic's max.message.bytes; ours fit in the headroom topic
        sync adds). None for a loop: our copy of a record that came from the target
        (`skip` says which kind)."""
        out: Headers = []
        mine: dict[str, bytes | None] = {}
        own_bytes = 0
        for name, value in own:
            if name in OURS:
                mine[name] = value  # the last value of a name counts
                continue
            out.append((name, value))
            own_bytes += len(name) + (len(value) if value else 0) + _HEADER_OVERHEAD
        self.loop_provenance = False
        origin = None
        if mine.get(SOURCE_HEADER) is not None:
            skip, origin = self._provenance(topic, partition, offset, mine)
            if skip is not None:
                self.skip = skip
                return None, 0
        out.append(self.source_entry)
        out.append((OFFSET_HEADER, encode_offset(offset)))
        out.append((TOPIC_HEADER, topic.encode()))
        if origin is not None:
            out.append((ORIGIN_HEADER, origin))
        return out, own_bytes

    def _provenance(
        self, topic: str, partition: int, offset: int, mine: dict[str, bytes | None]
    ) -> tuple[str | None, bytes | None]:
        """What the record's provenance (`mine`: our header names it carries) makes
        of it: (why it is a loop, or None; the origin its replica names)."""
        # headers() calls this only when the source header has a value.
        source, origin = cast("bytes", mine[SOURCE_HEADER]), mine.get(ORIGIN_HEADER)
        copied_from = mine.get(TOPIC_HEADER)
        ours = self._copied_here(topic, source, copied_from)
        if ours is False:
            return None, None  # someone else's provenance: the record originated here
        # Our copy (or, without a topic, possibly ours): it came from `first`.
        first = origin if origin is not None else source
        if first != self._target:
            return None, first
        if ours is None:
            return LOOP_LEGACY, None
        self.loop_provenance = True
        stream = (topic, partition, source, copied_from, origin)
        if self._in_order(stream, offset, decode_offset(mine.get(OFFSET_HEADER))):
            return LOOP, None
        return None, None  # re-driven here by an application: its own record

    def _in_order(
        self,
        stream: tuple[str, int, bytes, bytes | None, bytes | None],
        offset: int,
        upstream_offset: int | None,
    ) -> bool:
        """Whether the record at `offset` that names `upstream_offset` stands in the
        order of our copies of its provenance in its partition (`stream`): after the
        last one read, with a greater source offset. A record read again (at or
        before the last one: the partition was rewound) or without a readable source
        offset is taken as our copy, as is the first of a stream."""
        last = self._order.get(stream)
        if (
            last is not None
            and upstream_offset is not None
            and offset > last[0]
            and upstream_offset <= last[1]
        ):
            return False
        if upstream_offset is not None:
            if len(self._order) >= _CACHE_MAX:
                self._order.clear()
            self._order[stream] = (offset, upstream_offset)
        return True

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
            copied = copied_from.decode(errors="replace")
            return policy.format_remote_topic(alias, copied) == topic
        upstream = policy.upstream_topic(topic)
        if upstream is None or upstream == topic:
            # The name is the source's (Identity), or names no cluster: nothing tells.
            return None if upstream == topic else False
        return policy.topic_source(topic) == alias
