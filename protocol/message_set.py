"""Legacy message sets (magic 0 and 1): parsed and validated, given offsets, written.

0.9 and 0.10 clients produce these, and old fetchers can read nothing else. A message
is ``offset int64, size int32, crc uint32 (CRC-32 of the rest), magic int8, attributes
int8, [timestamp int64 if magic 1], key bytes, value bytes``. A compressed message (a
*wrapper*) holds a whole inner message set as its value: in magic 1 the inner offsets
are relative (0..n-1) and the wrapper carries the absolute offset of the last inner
message; in magic 0 inner offsets are absolute, so assigning offsets means rewriting
them and compressing again. Magic 0 LZ4 uses Kafka's old framing with the broken
header checksum (KAFKA-3160), which kafka-python's codec reproduces.

Only the offset field sits outside the CRC, so offsets of uncompressed messages are
assigned in place; anything else (a wrapper's timestamp, recompression) rewrites the
CRC.
"""
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from kafka import codec as codecs

from .error_codes import ErrorCode
from .inflate import DEFAULT_LIMIT, inflate_all
from .record import Record
from .record_batch import CODEC_NAMES, ZSTD, InvalidBatch

_HEAD = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_TIMESTAMP = struct.Struct(">q")
_LENGTH = struct.Struct(">i")
_OFFSET = struct.Struct(">q")
LOG_OVERHEAD = 12  # offset and size: the part of a message its size does not count
_CRC_START = 16
_TIMESTAMP_AT = 18
ATTRIBUTES_AT = 17  # of the first message: its codec says whether the set is compressed
NO_TIMESTAMP = -1
LOG_APPEND_TIME_FLAG = 0x08
CODEC_MASK = 0x07
_GZIP, _SNAPPY, _LZ4 = 1, 2, 3


def _key_offset(magic: int) -> int:
    return 26 if magic == 1 else 18


@dataclass(slots=True)
class Message:
    """One message as read: ``offset`` as found on the wire (relative inside a magic-1 wrapper)."""

    offset: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK


@dataclass(slots=True)
class Shallow:
    """A top-level message of a set: a plain message, or a wrapper with its inner messages."""

    pos: int
    size: int
    message: Message
    inner: list[Message] | None

    @property
    def record_count(self) -> int:
        return 1 if self.inner is None else len(self.inner)


@dataclass(slots=True)
class MessageSet:
    magic: int
    shallow: list[Shallow]
    record_count: int
    max_timestamp: int
    inflated: int = 0  # bytes its wrappers inflated to

    @property
    def stored_magic(self) -> int:
        """The magic the set is stored in: its own, or magic 1 when a magic-0 wrapper holds
        magic-1 messages (their timestamps are kept, as Kafka keeps them)."""
        return max(message.magic for _, message in self.messages())

    def messages(self) -> Iterator[tuple[Shallow, Message]]:
        for entry in self.shallow:
            if entry.inner is None:
                yield entry, entry.message
            else:
                for message in entry.inner:
                    yield entry, message


def parse(data, allow_zstd: bool = False, inflate_limit: int = DEFAULT_LIMIT) -> MessageSet:
    """Validate a produced message set as Kafka's log validator does; raise InvalidBatch.

    Every CRC is checked, wrappers are decompressed and their inner sets validated,
    and all top-level messages must share one magic. Nothing is trusted that a hostile client
    could make lie: sizes, lengths and inner offsets are all bounds-checked, and the
    wrappers of one set inflate to ``inflate_limit`` bytes at most, together.
    """
    shallow = []
    magic = None
    max_timestamp = NO_TIMESTAMP
    count = 0
    inflated = 0
    for pos, size, message in _read_messages(data, "message set"):
        if magic is None:
            magic = message.magic
        elif message.magic != magic:
            raise InvalidBatch(ErrorCode.INVALID_RECORD, f"message set mixes magic {magic} and {message.magic}")
        inner = None
        if message.codec:
            inner, size_inflated = _inner_messages(message, allow_zstd, inflate_limit - inflated)
            inflated += size_inflated
            timestamp = max(m.timestamp for m in inner)
        else:
            timestamp = message.timestamp
        shallow.append(Shallow(pos, size, message, inner))
        count += 1 if inner is None else len(inner)
        max_timestamp = max(max_timestamp, timestamp)
    if magic is None:  # no message read: the set is empty
        raise InvalidBatch(ErrorCode.INVALID_RECORD, "empty message set")
    return MessageSet(magic, shallow, count, max_timestamp, inflated)


def _read_messages(data, where: str) -> Iterator[tuple[int, int, Message]]:
    view = memoryview(data)
    end = len(view)
    pos = 0
    while pos < end:
        if end - pos < LOG_OVERHEAD + 6:
            raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE, f"{where}: truncated message at byte {pos}")
        offset, size, crc, magic, attributes = _HEAD.unpack_from(view, pos)
        if magic not in (0, 1):
            raise InvalidBatch(ErrorCode.INVALID_RECORD if magic == 2 else ErrorCode.CORRUPT_MESSAGE,
                               f"{where}: magic {magic} where a message set (magic 0 or 1) was expected")
        total = LOG_OVERHEAD + size
        if size < _key_offset(magic) - LOG_OVERHEAD + 8 or pos + total > end:
            raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE, f"{where}: message size {size} at byte {pos} does not fit")
        body = view[pos:pos + total]
        actual = zlib.crc32(body[_CRC_START:])
        if actual != crc:
            raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE, f"{where}: message CRC {crc:#010x} at offset {offset} "
                                                  f"does not match computed {actual:#010x}")
        timestamp = _TIMESTAMP.unpack_from(body, _TIMESTAMP_AT)[0] if magic == 1 else NO_TIMESTAMP
        key, after_key = _read_bytes(body, _key_offset(magic), where)
        value, after_value = _read_bytes(body, after_key, where)
        if after_value != total:
            raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE,
                               f"{where}: {total - after_value} stray bytes in message at {pos}")
        if attributes & ~(CODEC_MASK | LOG_APPEND_TIME_FLAG) or (magic == 0 and attributes & LOG_APPEND_TIME_FLAG):
            raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE, f"{where}: unknown attribute bits {attributes:#04x}")
        yield pos, total, Message(offset, magic, attributes, timestamp, key, value)
        pos += total


def from_offset(data, offset: int):
    """The stored message set from the first message holding ``offset`` or a later one.

    Kafka serves legacy messages from the one the fetch asks for: each uncompressed
    message stands alone in its log, and a wrapper's offset is that of its last inner
    message, so whole messages whose offset is below ``offset`` are dropped (a wrapper
    holding it is kept whole, its earlier inner messages for the client to skip).
    Some clients (aiokafka) read again from an earlier message than they asked for.
    Only the offset and size fields are read: the bytes were validated when stored.
    """
    view = memoryview(data)
    pos = 0
    while pos + LOG_OVERHEAD <= len(view):
        found, size = struct.unpack_from(">qi", view, pos)
        if found >= offset:
            break
        pos += LOG_OVERHEAD + size
    return view[pos:]


def _read_bytes(body, pos: int, where: str) -> tuple[bytes | None, int]:
    if len(body) - pos < 4:
        raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE, f"{where}: length field past the end of its message")
    length = _LENGTH.unpack_from(body, pos)[0]
    pos += 4
    if length == -1:
        return None, pos
    if length < 0 or pos + length > len(body):
        raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE, f"{where}: field length {length} does not fit its message")
    return bytes(body[pos:pos + length]), pos + length


def _inner_messages(wrapper: Message, allow_zstd: bool, inflate_limit: int) -> tuple[list[Message], int]:
    """The wrapper's inner messages, validated, and how many bytes they inflated to.

    An inner magic other than the wrapper's is accepted, as Kafka's legacy iterator does
    (0.9-era libraries falling back from ApiVersions wrap magic-1 messages in a magic-0
    wrapper); the wrapper's magic is the set's, and assign_offsets rebuilds such a wrapper.
    """
    codec = wrapper.codec
    if codec == ZSTD and not allow_zstd:
        raise InvalidBatch(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                           f"zstd is not allowed in magic {wrapper.magic} messages")
    if codec not in CODEC_NAMES:
        raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE, f"unknown compression codec id {codec}")
    if wrapper.value is None:
        raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE, "compressed message with a null value")
    raw = inflate_all(codec, wrapper.value, inflate_limit, wrapper.magic)
    inner = [message for _pos, _size, message in _read_messages(raw, "compressed message set")]
    if not inner:
        raise InvalidBatch(ErrorCode.INVALID_RECORD, "compressed message holds no messages")
    for message in inner:
        if message.codec:
            raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE, "nested compression")
        if wrapper.attributes & LOG_APPEND_TIME_FLAG:
            message.timestamp = wrapper.timestamp
    return inner, len(raw)


def compress(codec: int, data: bytes, magic: int) -> bytes:
    if codec == _GZIP:
        return codecs.gzip_encode(data)
    if codec == _SNAPPY:
        return codecs.snappy_encode(data)
    if codec == _LZ4:
        return codecs.lz4_encode_old_kafka(data) if magic == 0 else codecs.lz4_encode(data)
    return codecs.zstd_encode(data)


def assign_offsets(data, parsed: MessageSet, base_offset: int) -> bytearray:
    """The set as stored: offsets from ``base_offset``, wrappers made Kafka-conformant.

    Uncompressed messages get their offset in place. A magic-1 wrapper whose inner
    offsets are already 0..n-1 keeps its compressed bytes and gets the absolute last
    offset and the max inner timestamp (as Kafka sets them); any other wrapper is
    rebuilt in the set's stored magic, since its inner offsets (or inner magics) must
    change. A set holding magic-1 messages in a magic-0 wrapper is stored in magic 1
    whole, its magic-0 messages without a timestamp, as Kafka up-converts them.
    """
    magic = parsed.stored_magic
    out = bytearray()
    next_offset = base_offset
    for entry in parsed.shallow:
        message = entry.message
        if entry.inner is None and message.magic == magic:
            start = len(out)
            out += data[entry.pos:entry.pos + entry.size]
            _OFFSET.pack_into(out, start, next_offset)
        elif entry.inner is not None and message.magic == 1 and all(
                m.offset == i and m.magic == 1 for i, m in enumerate(entry.inner)):
            start = len(out)
            out += data[entry.pos:entry.pos + entry.size]
            _OFFSET.pack_into(out, start, next_offset + entry.record_count - 1)
            if not message.attributes & LOG_APPEND_TIME_FLAG:
                _TIMESTAMP.pack_into(out, start + _TIMESTAMP_AT, max(m.timestamp for m in entry.inner))
                struct.pack_into(">I", out, start + 12, zlib.crc32(memoryview(out)[start + _CRC_START:]))
        else:
            inner = [message] if entry.inner is None else entry.inner
            records = (Record(next_offset + i, m.timestamp, m.key, m.value, ()) for i, m in enumerate(inner))
            out += write(records, magic, message.codec)
        next_offset += entry.record_count
    return out


def read_stored(data, inflate_limit: int = DEFAULT_LIMIT) -> Iterator[tuple[int, list[Record]]]:
    """``(codec, records)`` per top-level message of a stored set, with absolute offsets."""
    for _pos, _size, message in _read_messages(data, "stored message set"):
        if not message.codec:
            yield 0, [Record(message.offset, message.timestamp, message.key, message.value, ())]
            continue
        inner, _inflated = _inner_messages(message, True, inflate_limit)
        shift = message.offset - inner[-1].offset if message.magic == 1 else 0
        yield message.codec, [Record(m.offset + shift, m.timestamp, m.key, m.value, ()) for m in inner]


def write(records: Iterable[Record], magic: int, codec: int) -> bytearray:
    """A message set of ``records`` (absolute offsets), compressed into one wrapper if ``codec``.

    Headers cannot be carried by magic 0/1 and are dropped; magic 0 drops timestamps.
    """
    records = list(records)
    if not codec:
        out = bytearray()
        for record in records:
            _append_message(out, magic, record.offset, 0, record.timestamp, record.key, record.value)
        return out
    inner = bytearray()
    first = records[0].offset
    for record in records:
        offset = record.offset - first if magic == 1 else record.offset
        _append_message(inner, magic, offset, 0, record.timestamp, record.key, record.value)
    out = bytearray()
    max_timestamp = max(record.timestamp for record in records)
    _append_message(out, magic, records[-1].offset, codec, max_timestamp, None, compress(codec, bytes(inner), magic))
    return out


def _append_message(out: bytearray, magic: int, offset: int, attributes: int, timestamp: int, key, value) -> None:
    start = len(out)
    out += bytes(_key_offset(magic))
    for field in (key, value):
        if field is None:
            out += _LENGTH.pack(-1)
        else:
            out += _LENGTH.pack(len(field))
            out += field
    _HEAD.pack_into(out, start, offset, len(out) - start - LOG_OVERHEAD, 0, magic, attributes)
    if magic == 1:
        _TIMESTAMP.pack_into(out, start + _TIMESTAMP_AT, timestamp if timestamp is not None else NO_TIMESTAMP)
    struct.pack_into(">I", out, start + 12, zlib.crc32(memoryview(out)[start + _CRC_START:]))
