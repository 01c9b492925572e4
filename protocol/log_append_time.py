"""LogAppendTime (``message.timestamp.type``): the broker's clock, not the producer's, dates
what a topic stores.

Kafka stamps a magic-2 batch by setting its maxTimestamp to the append time and the
timestamp-type bit of its attributes; the records keep their deltas, and a reader takes
every record's time from maxTimestamp when the bit is set. A magic-1 message (or wrapper)
gets the time itself and the same bit; magic 0 has no timestamp to stamp. Both fields lie
under the checksum, so it is computed again: a pass over the bytes that only topics asking
for the broker's time pay.
"""
import struct
import zlib

from crc32c import crc32c

from .message_set import LOG_APPEND_TIME_FLAG, MessageSet
from .record_batch import CRC_START, LOG_OVERHEAD, TIMESTAMP_TYPE_FLAG, BatchHeader

LOG_APPEND_TIME = "LogAppendTime"
CREATE_TIME = "CreateTime"
TIMESTAMP_TYPES = (CREATE_TIME, LOG_APPEND_TIME)

_BATCH_CRC = struct.Struct(">I")
_BATCH_CRC_AT = CRC_START - 4
_ATTRIBUTES = struct.Struct(">h")
_ATTRIBUTES_AT = CRC_START
_MAX_TIMESTAMP = struct.Struct(">q")
_MAX_TIMESTAMP_AT = 35  # after attributes, lastOffsetDelta and baseTimestamp
# A legacy message: offset int64, size int32, crc uint32, magic int8, attributes int8, timestamp int64.
_MESSAGE_CRC_AT = LOG_OVERHEAD
_MESSAGE_CRC_START = 16
_MESSAGE_ATTRIBUTES_AT = 17
_MESSAGE_TIMESTAMP_AT = 18


def stamp_batch(data, header: BatchHeader, now_ms: int) -> tuple[bytearray, BatchHeader]:
    """The magic-2 batch ``data`` (its header ``header``) as a LogAppendTime topic stores it."""
    out = bytearray(data)
    attributes = header.attributes | TIMESTAMP_TYPE_FLAG
    _ATTRIBUTES.pack_into(out, _ATTRIBUTES_AT, attributes)
    _MAX_TIMESTAMP.pack_into(out, _MAX_TIMESTAMP_AT, now_ms)
    crc = crc32c(memoryview(out)[CRC_START:])
    _BATCH_CRC.pack_into(out, _BATCH_CRC_AT, crc)
    return out, header._replace(attributes=attributes, max_timestamp=now_ms, crc=crc)


def stamp_message_set(data, parsed: MessageSet, now_ms: int) -> bytearray:
    """The legacy set ``data`` with each magic-1 top-level message (plain or wrapper) stamped
    ``now_ms``; ``parsed`` is updated to match (its messages and their inner ones carry the
    time), so offsets are assigned to what is stored."""
    out = bytearray(data)
    for entry in parsed.shallow:
        message = entry.message
        for inner in entry.inner or ():
            if inner.magic == 1:
                inner.timestamp = now_ms
        if message.magic != 1:
            continue
        message.attributes |= LOG_APPEND_TIME_FLAG
        message.timestamp = now_ms
        out[entry.pos + _MESSAGE_ATTRIBUTES_AT] = message.attributes
        _MAX_TIMESTAMP.pack_into(out, entry.pos + _MESSAGE_TIMESTAMP_AT, now_ms)
        crc = zlib.crc32(memoryview(out)[entry.pos + _MESSAGE_CRC_START:entry.pos + entry.size])
        _BATCH_CRC.pack_into(out, entry.pos + _MESSAGE_CRC_AT, crc)
    if parsed.stored_magic == 1:
        parsed.max_timestamp = now_ms
    return out
