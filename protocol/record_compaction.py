"""A stored magic-2 batch read record by record for log compaction, and rebuilt without
the records compaction removes.

Offsets never change: the rebuilt batch keeps its base offset, last offset delta,
producer id, epoch and base sequence, so a consumer advances past the removed records
and producer state read from the header is what it was. Kept records are copied as
stored (their offset and timestamp deltas stay relative to the same base), except when
the batch is given a delete horizon: then, as Kafka (KIP-534) does, the horizon goes in
the base timestamp, the delete-horizon attribute is set, and each record's timestamp
delta is rewritten so its timestamp stays the same.
"""
import struct
from typing import NamedTuple

from crc32c import crc32c

from . import message_set
from .answer_writer import uvarint
from .error_codes import ErrorCode
from .inflate import inflate_all
from .record_batch import CRC_START, HEADER, HEADER_SIZE, LOG_OVERHEAD, TIMESTAMP_TYPE_FLAG, BatchHeader, InvalidBatch

DELETE_HORIZON_FLAG = 0x40
_CRC = struct.Struct(">I")
_CRC_AT = CRC_START - _CRC.size


class KeyedRecord(NamedTuple):
    """One record of a stored batch: what compaction decides on, and where its bytes are."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    tombstone: bool
    raw: memoryview  # the whole record, its length prefix included
    body_at: int  # where the attributes byte starts in ``raw``
    tail_at: int  # where the key length starts in ``raw``


def delete_horizon(header: BatchHeader) -> int | None:
    """The time after which the batch's tombstones may go, once a cleaner has set one."""
    return header.base_timestamp if header.attributes & DELETE_HORIZON_FLAG else None


def read_records(batch, header: BatchHeader, inflate_limit: int) -> list[KeyedRecord]:
    """Every record of the stored batch ``batch`` (inflated under ``inflate_limit``).

    Per-record work for the cleaner, so one-byte varints (nearly all record lengths of
    small records, attributes, deltas under 64 and key lengths) are read inline.
    """
    data = memoryview(batch)[HEADER_SIZE:header.size]
    if header.compression:
        data = memoryview(inflate_all(header.compression, data, inflate_limit))
    buf = bytes(data)
    varint = _varint
    records = []
    pos = 0
    end = len(buf)
    make = KeyedRecord
    try:
        for _ in range(header.record_count):
            start = pos
            byte = buf[pos]
            size, pos = ((byte >> 1) ^ -(byte & 1), pos + 1) if byte < 0x80 else varint(buf, pos)
            body_at = pos - start
            stop = pos + size
            if size <= 0 or stop > end:
                raise ValueError(f"record of {size} bytes at {start} runs past the batch")
            byte = buf[pos + 1]
            timestamp_delta, pos = ((byte >> 1) ^ -(byte & 1), pos + 2) if byte < 0x80 else varint(buf, pos + 1)
            byte = buf[pos]
            offset_delta, pos = ((byte >> 1) ^ -(byte & 1), pos + 1) if byte < 0x80 else varint(buf, pos)
            tail_at = pos - start
            byte = buf[pos]
            key_size, pos = ((byte >> 1) ^ -(byte & 1), pos + 1) if byte < 0x80 else varint(buf, pos)
            if key_size >= 0:
                key = buf[pos:pos + key_size]
                pos += key_size
            else:
                key = None
            tombstone = buf[pos] == 1  # a value length of -1
            records.append(make(offset_delta, timestamp_delta, key, tombstone, data[start:stop], body_at, tail_at))
            pos = stop
    except (IndexError, ValueError) as exc:
        raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE, f"stored batch at offset {header.base_offset}: {exc}") from None
    if pos != end:
        raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE, f"stored batch at offset {header.base_offset}: "
                                                      f"{end - pos} bytes after its last record")
    return records


def null_key_indexes(batch, header: BatchHeader, inflate_limit: int) -> list[int]:
    """Indexes of the batch's records that have no key (a produce to a compacted topic)."""
    return [index for index, record in enumerate(read_records(batch, header, inflate_limit)) if record.key is None]


def rebuild(header: BatchHeader, kept: list[KeyedRecord], horizon: int | None) -> bytes:
    """The batch ``header`` heads with only the ``kept`` records, in the same codec.

    ``horizon`` sets a delete horizon on a batch that has none yet.
    """
    base_timestamp = header.base_timestamp
    attributes = header.attributes
    if horizon is not None:
        attributes |= DELETE_HORIZON_FLAG
        records = b"".join(_retimed(record, base_timestamp - horizon) for record in kept)
        base_timestamp = horizon
    else:
        records = b"".join(record.raw for record in kept)
    if header.compression and records:
        records = message_set.compress(header.compression, records, 2)
    max_timestamp = header.max_timestamp
    if kept and not header.attributes & TIMESTAMP_TYPE_FLAG:  # create time: the kept records' latest
        max_timestamp = max(header.base_timestamp + record.timestamp_delta for record in kept)
    out = bytearray(HEADER.pack(header.base_offset, HEADER_SIZE - LOG_OVERHEAD + len(records),
                                header.partition_leader_epoch, 2, 0, attributes, header.last_offset_delta,
                                base_timestamp, max_timestamp, header.producer_id, header.producer_epoch,
                                header.base_sequence, len(kept)))
    out += records
    _CRC.pack_into(out, _CRC_AT, crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


def _retimed(record: KeyedRecord, shift: int) -> bytes:
    """``record`` with ``shift`` added to its timestamp delta (its timestamp unchanged under a new base)."""
    raw = record.raw
    body = (bytes(raw[record.body_at:record.body_at + 1]) + _zigzag(record.timestamp_delta + shift)
            + _zigzag(record.offset_delta) + bytes(raw[record.tail_at:]))
    return _zigzag(len(body)) + body


def _varint(data, pos: int) -> tuple[int, int]:
    """The zigzag varint (or varlong) at ``pos`` and the position after it."""
    raw = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError(f"varint at byte {pos} is too long")


def _zigzag(value: int) -> bytes:
    return uvarint((value << 1) ^ (value >> 63))
