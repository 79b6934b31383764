"""MirrorMaker 2's binary record formats, byte for byte.

Offset syncs, checkpoints and heartbeats are written in MM2's formats and topic
names so that tools built on MM2 (`RemoteClusterUtils`, monitoring that reads
the heartbeats topic) work unchanged against our replicator. All integers are
big-endian; a STRING is an int16 byte length followed by UTF-8 bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from replicator.errors import ReplicatorError

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_TWO_INT64 = struct.Struct(">qq")
_VERSION = 0


class FormatError(ReplicatorError):
    """A record on an MM2 internal topic cannot be decoded."""


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.pos = 0
        self.what = what

    def take(self, size: int) -> bytes:
        if self.pos + size > len(self.data):
            raise FormatError(
                f"{self.what}: truncated at byte {self.pos} of {len(self.data)} "
                "(not written in MirrorMaker 2's format)"
            )
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def int16(self) -> int:
        value: int = _INT16.unpack(self.take(2))[0]
        return value

    def int32(self) -> int:
        value: int = _INT32.unpack(self.take(4))[0]
        return value

    def int64(self) -> int:
        value: int = _INT64.unpack(self.take(8))[0]
        return value

    def string(self) -> str:
        length = self.int16()
        return self.take(length).decode("utf-8") if length >= 0 else ""

    def version(self) -> None:
        version = self.int16()
        if version != _VERSION:
            raise FormatError(f"{self.what}: unsupported version {version} (expected {_VERSION})")


def _string(value: str) -> bytes:
    encoded = value.encode("utf-8")
    return _INT16.pack(len(encoded)) + encoded


@dataclass(frozen=True)
class OffsetSync:
    """`mm2-offset-syncs.<target>.internal`: source offset `upstream` was written
    at target offset `downstream` of the same partition number."""

    topic: str  # the source topic
    partition: int
    upstream: int
    downstream: int

    def key(self) -> bytes:
        return _string(self.topic) + _INT32.pack(self.partition)

    def value(self) -> bytes:
        return _TWO_INT64.pack(self.upstream, self.downstream)

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> OffsetSync:
        k = _Reader(key, "offset sync key")
        v = _Reader(value, "offset sync value")
        topic, partition = k.string(), k.int32()
        return cls(topic, partition, v.int64(), v.int64())


#: The header this replicator puts on each offset sync it writes (MM2's carry none): MM2
#: and we share the offset-syncs topic, and a takeover must count only MM2's as MM2's
#: state (`mm2_state`), while ours say where our own copy stood (`resume`).
OWN_SYNC_HEADER = ("__dr_writer", b"replicator")


@dataclass(frozen=True)
class Checkpoint:
    """`<source>.checkpoints.internal`: group `group` committed `upstream` on the
    source; on the target the same position is `downstream` of `topic` (the
    target-side topic name)."""

    group: str
    topic: str
    partition: int
    upstream: int
    downstream: int
    metadata: str = ""

    def key(self) -> bytes:
        return _string(self.group) + _string(self.topic) + _INT32.pack(self.partition)

    def value(self) -> bytes:
        return (
            _INT16.pack(_VERSION)
            + _TWO_INT64.pack(self.upstream, self.downstream)
            + _string(self.metadata)
        )

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> Checkpoint:
        group, topic, partition = cls.decode_key(key)
        v = _Reader(value, "checkpoint value")
        v.version()
        return cls(group, topic, partition, v.int64(), v.int64(), v.string())

    @staticmethod
    def decode_key(key: bytes) -> tuple[str, str, int]:
        """(group, topic, partition) of a checkpoint record's key. The status page
        decodes every distinct key of the checkpoints topic (2,000,000 at 10,000
        partitions and 200 groups): a well-formed key is read with three unpacks,
        anything else by the checking reader, which says what is wrong."""
        try:
            (group_end,) = _INT16.unpack_from(key, 0)
            group_end += 2
            (topic_end,) = _INT16.unpack_from(key, group_end)
            topic_end += group_end + 2
            (partition,) = _INT32.unpack_from(key, topic_end)
        except struct.error:
            group_end = topic_end = -1
        if 2 <= group_end <= topic_end - 2:
            return (
                key[2:group_end].decode("utf-8"),
                key[group_end + 2 : topic_end].decode("utf-8"),
                partition,
            )
        k = _Reader(key, "checkpoint key")
        return k.string(), k.string(), k.int32()


@dataclass(frozen=True)
class Heartbeat:
    """`heartbeats`: proof of life of the flow `source -> target` at `timestamp` (ms)."""

    source: str
    target: str
    timestamp: int

    def key(self) -> bytes:
        return _string(self.source) + _string(self.target)

    def value(self) -> bytes:
        return _INT16.pack(_VERSION) + _INT64.pack(self.timestamp)

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> Heartbeat:
        k = _Reader(key, "heartbeat key")
        v = _Reader(value, "heartbeat value")
        source, target = k.string(), k.string()
        v.version()
        return cls(source, target, v.int64())
