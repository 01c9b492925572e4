"""A Fetch response encoded around its record bytes, not through them.

kafka-python encodes every field into one buffer and copies that out, so a fetch
answer's record bytes would be copied twice more after they were read (the profile in
bench/PROFILE.md puts response encoding at a fifth of the fetch path). Here each large
``records`` field is swapped for a short random marker, the rest of the response is
encoded by kafka-python as usual, and the encoding is cut at the markers: the frame is
the encoded pieces with the record bytes between them, handed to the socket as they
are. The bytes on the wire are exactly kafka-python's encoding of the original
response.

A partition's records may be given as :class:`RecordChunks`, the buffers they were
read in (one per stored entry): spliced, each goes to the socket as it is, so not even
a join copies them; small ones are joined, which costs less than a buffer each.
"""
import os
from typing import Any

from kafka.protocol.consumer import FetchResponse
from kafka.protocol.schemas.fields.codecs.types import Int32, UnsignedVarInt32

# Records smaller than this are cheaper to copy than to send as a buffer of their own.
SPLICE_MIN_BYTES = 16 * 1024
_MARK_SIZE = 16


class RecordChunks:
    """A partition's record bytes as a list of buffers; ``len`` is their total size."""

    __slots__ = ("buffers", "size")

    def __init__(self, buffers: list):
        self.buffers = buffers
        self.size = sum(map(len, buffers))

    def __len__(self) -> int:
        return self.size

    def join(self) -> bytes:
        return b"".join(self.buffers)


def _length_prefix(size: int, compact: bool) -> bytes:
    """How a non-null ``records`` field of ``size`` bytes starts (COMPACT_RECORDS: varint of size + 1)."""
    return UnsignedVarInt32.encode(size + 1) if compact else Int32.encode(size)


def encode_fetch_body(response, version: int) -> list:
    """The response body as buffers: kafka-python's encoding with large record sets passed through."""
    spliced: list[tuple[Any, Any, bytes]] = []  # (partition data, its record bytes, its marker), in encoding order
    nonce = os.urandom(_MARK_SIZE - 4)
    joined: list[tuple[Any, RecordChunks]] = []
    for topic in response.responses:
        for partition in topic.partitions:
            records = partition.records
            if records is not None and len(records) >= SPLICE_MIN_BYTES:
                mark = nonce + len(spliced).to_bytes(4, "big")
                spliced.append((partition, records, mark))
                partition.records = mark
            elif isinstance(records, RecordChunks):
                joined.append((partition, records))
                partition.records = records.join()
    try:
        encoded = response.encode(version=version)
    finally:
        for partition, records, _mark in spliced:
            partition.records = records
        for partition, chunks in joined:
            partition.records = chunks
    if not spliced:
        return [encoded]
    compact = FetchResponse.flexible_version_q(version)
    mark_prefix = _length_prefix(_MARK_SIZE, compact)
    pieces = []
    start = 0
    for _partition, records, mark in spliced:
        at = encoded.find(mark, start)
        if at < start + len(mark_prefix) or encoded[at - len(mark_prefix):at] != mark_prefix:
            raise AssertionError("a records marker is missing from the encoded Fetch response")
        pieces.append(encoded[start:at - len(mark_prefix)] + _length_prefix(len(records), compact))
        if isinstance(records, RecordChunks):
            pieces.extend(records.buffers)
        else:
            pieces.append(records)
        start = at + _MARK_SIZE
    pieces.append(encoded[start:])
    return pieces
