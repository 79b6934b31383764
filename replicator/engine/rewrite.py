"""The record rewrite: what a replica carries in its headers, with nothing but data
in and data out (no client), so it can be tested without Kafka.

A replica keeps key, value, timestamp and partition number (the replication loop
copies them), drops the replication headers the record may carry from an earlier
hop, and gets ours: the cluster it was read from and its offset there (what resume
and offset translation rely on), and the cluster it originated on when it was
itself a replica. A record that originated on the target is not replicated back (a
loop, in an active-active pair or a ring).

A record with no headers of its own, the common case, gets just ours, and the loop
makes that list itself (`source_entry`, then the offset header): a call per record
there cost a tenth of the loop's time. `RecordRewrite.headers` is for the rest.
"""

from __future__ import annotations

from replicator.engine.headers import (
    OFFSET_HEADER,
    ORIGIN_HEADER,
    OURS,
    SOURCE_HEADER,
    Headers,
    encode_offset,
)

#: Bytes a header adds to a record beyond its name and value.
_HEADER_OVERHEAD = 10


class RecordRewrite:
    """Our headers on the replicas of one flow (`source` -> `target`, cluster aliases)."""

    __slots__ = ("_target", "source_entry")

    def __init__(self, source: str, target: str) -> None:
        #: Our source header, the same on every replica of the flow.
        self.source_entry = (SOURCE_HEADER, source.encode())
        self._target = target.encode()

    def headers(self, own: Headers, offset: int) -> tuple[Headers | None, int]:
        """The headers of the replica of the record at `offset` that carries `own`
        headers, and the bytes its own headers add to it (they count against the
        remote topic's max.message.bytes; ours fit in the headroom topic sync adds).
        None for a record that originated on the target."""
        out, origin, own_bytes = split_replication_headers(own)
        if origin == self._target:
            return None, 0
        out.append(self.source_entry)
        out.append((OFFSET_HEADER, encode_offset(offset)))
        if origin is not None:
            out.append((ORIGIN_HEADER, origin))
        return out, own_bytes


def split_replication_headers(headers: Headers) -> tuple[Headers, bytes | None, int]:
    """Split a record's headers into its own (ours dropped) and where it originated:
    the cluster of its `__dr_origin` or, failing that, its `__dr_src` header (None
    for a record produced on the source); and the bytes its own headers add to it."""
    own: Headers = []
    origin = None
    size = 0
    for name, value in headers:
        if name in OURS:
            if name == ORIGIN_HEADER or (name == SOURCE_HEADER and origin is None):
                origin = value
            continue
        own.append((name, value))
        size += len(name) + (len(value) if value else 0) + _HEADER_OVERHEAD
    return own, origin, size
