"""Transaction markers: the control batches that end a transaction in a partition (KIP-98).

A marker is a magic-2 batch with the transactional and control bits set, the
producer's id and epoch, no sequence, and one record whose key says COMMIT or ABORT
(int16 version 0, int16 type) and whose value carries the coordinator's epoch (int16
version 0, int32 epoch). Readers skip control batches; read_committed consumers use
them, with the fetch's aborted-transactions list, to drop aborted data.
"""
import struct

from crc32c import crc32c

from .record_batch import CONTROL_FLAG, CRC_START, HEADER, HEADER_SIZE, LOG_OVERHEAD, TRANSACTIONAL_FLAG

ABORT, COMMIT = 0, 1
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
# The one record, fixed size: length 16 (zigzag 32), attributes, timestamp delta 0,
# offset delta 0, key length 4 (zigzag 8), key, value length 6 (zigzag 12), value, no headers.
_RECORD_BODY_SIZE = 16


def build(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, timestamp_ms: int) -> bytes:
    """One marker batch at offset 0 (the ledger assigns its offset on append)."""
    record = (bytes((_RECORD_BODY_SIZE * 2, 0, 0, 0, 8)) + _KEY.pack(0, COMMIT if commit else ABORT)
              + bytes((12,)) + _VALUE.pack(0, coordinator_epoch) + bytes((0,)))
    batch_length = HEADER_SIZE - LOG_OVERHEAD + len(record)
    data = bytearray(HEADER.pack(0, batch_length, -1, 2, 0, TRANSACTIONAL_FLAG | CONTROL_FLAG, 0, timestamp_ms,
                                 timestamp_ms, producer_id, producer_epoch, -1, 1))
    data += record
    struct.pack_into(">I", data, CRC_START - 4, crc32c(memoryview(data)[CRC_START:]))
    return bytes(data)


def marker_type(data, pos: int = 0) -> int | None:
    """COMMIT or ABORT for the control batch at ``pos``; None when its first record's key
    is not a marker key or lies beyond ``data`` (only its head was read)."""
    at = pos + HEADER_SIZE
    # length, attributes (a byte, always 0, so it skips as a one-byte varint), timestamp delta, offset delta
    for _field in range(4):
        at = _skip_varint(data, at)
        if at < 0:
            return None
    key_length, at = _varint(data, at)
    if key_length != _KEY.size or at + _KEY.size > len(data):
        return None
    version, kind = _KEY.unpack_from(data, at)
    return kind if version == 0 and kind in (ABORT, COMMIT) else None


def _skip_varint(data, at: int) -> int:
    while at < len(data):
        byte = data[at]
        at += 1
        if not byte & 0x80:
            return at
    return -1


def _varint(data, at: int) -> tuple[int, int]:
    """A zigzag varint and the position after it; (-1, at) when truncated."""
    value = shift = 0
    while at < len(data):
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), at
        shift += 7
    return -1, at
