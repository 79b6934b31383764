"""The headers every replicated record carries.

`__dr_src` names the cluster the record was read from (provenance), `__dr_off`
holds its offset there (8 bytes, big-endian) and `__dr_topic` the topic it was
read from there (UTF-8). Source cluster and offset make resume, offset
translation and failback exact. A record that has travelled more than one hop
also carries `__dr_origin`, the cluster it was first produced to.

Loops (`replicator.engine.rewrite`): a record is one only when it is itself our
copy, on the topic being replicated now, of a record that came from the target.
Cluster and topic together say that: we wrote it into this topic only if the
policy names this topic after `__dr_topic` on `__dr_src`. A record that carries
someone else's provenance (an application forwarding its input's headers) is
the application's own. Records written before `__dr_topic` existed carry no
topic: see `RecordRewrite` for how they are told.
"""

from __future__ import annotations

import struct

SOURCE_HEADER = "__dr_src"
OFFSET_HEADER = "__dr_off"
ORIGIN_HEADER = "__dr_origin"
TOPIC_HEADER = "__dr_topic"
_OFFSET = struct.Struct(">q")

Headers = list[tuple[str, bytes | None]]
OURS = frozenset({SOURCE_HEADER, OFFSET_HEADER, ORIGIN_HEADER, TOPIC_HEADER})


#: The value of an offset header: the struct's own method, with no Python function
#: around it, as it runs for every replicated record.
encode_offset = _OFFSET.pack


def decode_offset(value: bytes | None) -> int | None:
    if value is None or len(value) != _OFFSET.size:
        return None
    decoded: int = _OFFSET.unpack(value)[0]
    return decoded


def replica_source_offset(headers: Headers | None, source_alias: bytes) -> int | None:
    """The source offset of a record on the target, if `source_alias` wrote it."""
    if not headers:
        return None
    source = offset = None
    for name, value in headers:
        if name == SOURCE_HEADER:
            source = value
        elif name == OFFSET_HEADER:
            offset = value
    if source != source_alias:
        return None
    return decode_offset(offset)
