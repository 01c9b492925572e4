"""The ``pulsar`` entry format: each produce stored as one Pulsar batch message.

KoP's ``entryFormat=pulsar``: the entry is what a Pulsar broker writes to a bookie for
a batch message with broker entry metadata, so Pulsar tooling (and KoP's own reader)
can read the records; Kafka fetchers get a magic-2 batch rebuilt per read. It costs
per-record work on both produce and fetch.

Layout (field numbers from Pulsar's ``PulsarApi.proto``; magics and framing from
Pulsar's ``Commands``: ``addBrokerEntryMetadata``, ``serializeMetadataAndPayload``,
``serializeSingleMessageInBatchWithPayload``)::

    uint16 0x0e02  uint32 size  BrokerEntryMetadata
    uint16 0x0e01  uint32 CRC32C of everything after it
    uint32 size    MessageMetadata
    payload        the batch, compressed as MessageMetadata.compression says
    batch          per record: uint32 size, SingleMessageMetadata, value bytes

All integers big-endian. Fields written:

- BrokerEntryMetadata: broker_timestamp=1 (encode time, ms), index=2 (offset of the
  entry's last record, as Pulsar's AppendIndexMetadataInterceptor sets it).
- MessageMetadata: producer_name=1 (``kafka-<producerId>-<producerEpoch>`` for an
  idempotent batch, else ``kafka``), sequence_id=2 (the batch's baseSequence when
  idempotent, else the entry's base offset), publish_time=3 (encode time, ms),
  compression=8 (absent for NONE), uncompressed_size=9, num_messages_in_batch=11,
  event_time=12 (the batch's max timestamp, when not negative).
- SingleMessageMetadata, as KoP maps a record: properties=1 (one KeyValue{key=1,
  value=2} per header, in order, duplicates kept), partition_key=2 (base64 of the
  key) with partition_key_b64_encoded=6, ordering_key=7 (the key's raw bytes),
  payload_size=3, event_time=5 (the record timestamp), null_value=9 for a null value
  (empty payload), null_partition_key=10 for a null key (no key fields at all).

Compression: the topic's ``compression.type`` picks the codec of the batch payload
(gzip as ZLIB: a zlib stream; snappy as SNAPPY: a raw snappy block; lz4 as LZ4: a raw
LZ4 block whose size is uncompressed_size; zstd as ZSTD: a zstd frame). With
``compression.type=producer`` (codec None), as with KoP, the payload is stored
uncompressed (NONE): Pulsar has no way to keep the client's compressed bytes.

Read back: key from ordering_key, else the (base64-decoded when flagged) partition_key,
else null; value null when null_value is set; headers from properties; timestamp from
event_time, -1 when absent; offsets ``index - n + 1 .. index``; producer id, epoch and
base sequence from producer_name and sequence_id. Readers always get an uncompressed
batch (so zstd-incapable fetchers can read any pulsar entry).

What this format does not keep (each is asserted by ``tests/unit/test_pulsar_format``):

- Header values that are not valid UTF-8: Pulsar properties are strings, so the value
  is decoded with U+FFFD replacing each invalid sequence (Python's
  ``bytes.decode("utf-8", "replace")``) and reads back as that string's UTF-8 bytes.
  Valid UTF-8 values, and all header keys (already strings), are kept exactly.
- Null header values: a property value is required, so a null value is stored as ""
  and reads back as ``b""``.
- Negative timestamps: event_time is unsigned and 0 is a real time, so a timestamp
  below 0 is stored without event_time and reads back as -1 (NO_TIMESTAMP). A
  timestamp of 0 is stored as event_time 0 and reads back as 0 here (Pulsar's own
  readers, KoP included, take event_time 0 as unset and use publish_time).
- Timestamp type: the rebuilt batch is always CreateTime. A batch sent with the
  LogAppendTime flag has its records read at the batch's max timestamp (what Kafka
  readers see), and those timestamps are stored as the records' event times.
- Batch framing: the client's codec (served uncompressed), batch CRC, baseTimestamp
  and attributes are rebuilt, not kept; the wrappers of a legacy (magic 0/1) message
  set become one batch; partitionLeaderEpoch reads back as -1.
- Producer state: producer id, epoch and base sequence are kept only for idempotent
  batches (id, epoch and sequence all set); otherwise they read back as -1. They reach
  readers only: stores_batches is False, so a restarted broker does not rebuild
  idempotent-producer state from pulsar entries. A producer known only from them is
  unknown after a restart: its next batch gets UNKNOWN_PRODUCER_ID unless it starts
  at sequence 0, and a retry of a batch stored before the restart is not recognised
  as a duplicate.

Only batch entries (num_messages_in_batch present), as this module writes, are read;
corrupt entries raise ValueError naming what is wrong.
"""
import struct
import time
import zlib
from base64 import b64decode, b64encode
from binascii import Error as Base64Error
from typing import NamedTuple

import cramjam
import lz4.block
import zstandard
from crc32c import crc32c

from kgate.protocol import conversion
from kgate.protocol.inflate import DEFAULT_LIMIT
from kgate.protocol.record import Record

from . import EntryFormat, ProducedRecords, register
from .protobuf_wire import LEN, VARINT, fields, read_varint, tag, varint

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
MAGIC_BROKER_ENTRY_METADATA = 0x0E02
MAGIC_CRC32C = 0x0E01

# Pulsar's CompressionType, and the one used for each Kafka codec id.
NONE, LZ4, ZLIB, ZSTD, SNAPPY = 0, 1, 2, 3, 4
COMPRESSION_NAMES = {NONE: "NONE", LZ4: "LZ4", ZLIB: "ZLIB", ZSTD: "ZSTD", SNAPPY: "SNAPPY"}
PULSAR_CODEC = {0: NONE, 1: ZLIB, 2: SNAPPY, 3: LZ4, 4: ZSTD}

# uncompressed_size is a uint32 but decompression allocates it: refuse more than int32.
_MAX_UNCOMPRESSED = 2**31 - 1
_MAX_OFFSET = 2**63 - 1
# LZ4 and snappy blocks expand at most ~255:1 (LZ4's match-length bytes; snappy far less).
_MAX_BLOCK_RATIO = 255

# BrokerEntryMetadata
_BEM_BROKER_TIMESTAMP, _BEM_INDEX = 1, 2
# MessageMetadata
(_MM_PRODUCER_NAME, _MM_SEQUENCE_ID, _MM_PUBLISH_TIME, _MM_COMPRESSION, _MM_UNCOMPRESSED_SIZE,
 _MM_NUM_MESSAGES, _MM_EVENT_TIME) = 1, 2, 3, 8, 9, 11, 12
# SingleMessageMetadata
(_SM_PROPERTIES, _SM_PARTITION_KEY, _SM_PAYLOAD_SIZE, _SM_EVENT_TIME, _SM_B64, _SM_ORDERING_KEY, _SM_NULL_VALUE,
 _SM_NULL_PARTITION_KEY) = 1, 2, 3, 5, 6, 7, 9, 10
# KeyValue
_KV_KEY, _KV_VALUE = 1, 2

_T_PROPERTY = tag(_SM_PROPERTIES, LEN)
_T_PARTITION_KEY = tag(_SM_PARTITION_KEY, LEN)
_T_PAYLOAD_SIZE = tag(_SM_PAYLOAD_SIZE, VARINT)
_T_EVENT_TIME = tag(_SM_EVENT_TIME, VARINT)
_T_KEY_FIELDS = tag(_SM_B64, VARINT) + b"\x01" + tag(_SM_ORDERING_KEY, LEN)
_T_NULL_VALUE = tag(_SM_NULL_VALUE, VARINT) + b"\x01"
_T_NULL_KEY = tag(_SM_NULL_PARTITION_KEY, VARINT) + b"\x01"
_T_KV_KEY = tag(_KV_KEY, LEN)
_T_KV_VALUE = tag(_KV_VALUE, LEN)
_SIZE_PLACEHOLDER = bytes(4)

_PRODUCER_PREFIX = "kafka-"
_NO_PRODUCER = (-1, -1, -1)


class PulsarEntry(NamedTuple):
    """A decoded entry: records with absolute offsets, and the producer they were sent by."""

    records: list[Record]
    producer: tuple[int, int, int]
    compression: int


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _utf8(value) -> bytes:
    """A header value as a property string's bytes (see the module docstring)."""
    if value is None:
        return b""
    value = bytes(value)
    try:
        value.decode()
    except UnicodeDecodeError:
        return value.decode("utf-8", "replace").encode()
    return value


def _batch(records) -> bytearray:
    out = bytearray()
    pack_size = _U32.pack_into
    encode_varint = varint
    utf8 = _utf8
    for record in records:
        start = len(out)
        out += _SIZE_PLACEHOLDER
        for name, value in record.headers:
            name = name.encode()
            value = utf8(value)
            name_size = encode_varint(len(name))
            value_size = encode_varint(len(value))
            out += _T_PROPERTY  # KeyValue: two one-byte tags, two sizes, key and value
            out += encode_varint(2 + len(name_size) + len(name) + len(value_size) + len(value))
            out += _T_KV_KEY
            out += name_size
            out += name
            out += _T_KV_VALUE
            out += value_size
            out += value
        key = record.key
        if key is not None:
            encoded = b64encode(key)
            out += _T_PARTITION_KEY
            out += encode_varint(len(encoded))
            out += encoded
        value = record.value
        out += _T_PAYLOAD_SIZE
        out += encode_varint(0 if value is None else len(value))
        if record.timestamp >= 0:
            out += _T_EVENT_TIME
            out += encode_varint(record.timestamp)
        if key is not None:
            out += _T_KEY_FIELDS
            out += encode_varint(len(key))
            out += key
        if value is None:
            out += _T_NULL_VALUE
        if key is None:
            out += _T_NULL_KEY
        pack_size(out, start, len(out) - start - 4)
        if value:
            out += value
    return out


def _compress(compression: int, data) -> bytes:
    if compression == LZ4:
        return lz4.block.compress(data, store_size=False)
    if compression == ZLIB:
        return zlib.compress(data)
    if compression == SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    return zstandard.ZstdCompressor().compress(data)


def _field_bytes(field: int, value: bytes) -> bytes:
    return tag(field, LEN) + varint(len(value)) + value


def _field_varint(field: int, value: int) -> bytes:
    return tag(field, VARINT) + varint(value)


class PulsarFormat(EntryFormat):
    name = "pulsar"
    code = 2
    stores_batches = False

    def encode(self, produced: ProducedRecords, base_offset: int, leader_epoch: int, codec: int | None) -> list:
        records = produced.records()
        batch = _batch(records)
        compression = PULSAR_CODEC.get(codec or 0)
        if compression is None:
            raise ValueError(f"pulsar entry: no Pulsar compression for Kafka codec id {codec}")
        payload = _compress(compression, batch) if compression != NONE else batch
        now = _now_ms()
        producer_id, producer_epoch, base_sequence = produced.producer
        if producer_id >= 0 and producer_epoch >= 0 and base_sequence >= 0:
            producer_name, sequence_id = f"{_PRODUCER_PREFIX}{producer_id}-{producer_epoch}", base_sequence
        else:
            producer_name, sequence_id = "kafka", base_offset
        metadata = bytearray()
        metadata += _field_bytes(_MM_PRODUCER_NAME, producer_name.encode())
        metadata += _field_varint(_MM_SEQUENCE_ID, sequence_id)
        metadata += _field_varint(_MM_PUBLISH_TIME, now)
        if compression != NONE:
            metadata += _field_varint(_MM_COMPRESSION, compression)
        metadata += _field_varint(_MM_UNCOMPRESSED_SIZE, len(batch))
        metadata += _field_varint(_MM_NUM_MESSAGES, len(records))
        if produced.max_timestamp >= 0:
            metadata += _field_varint(_MM_EVENT_TIME, produced.max_timestamp)
        broker_metadata = (_field_varint(_BEM_BROKER_TIMESTAMP, now)
                           + _field_varint(_BEM_INDEX, base_offset + len(records) - 1))
        head = bytearray()
        head += _U16.pack(MAGIC_BROKER_ENTRY_METADATA)
        head += _U32.pack(len(broker_metadata))
        head += broker_metadata
        head += _U16.pack(MAGIC_CRC32C)
        checksum_at = len(head)
        head += _SIZE_PLACEHOLDER
        head += _U32.pack(len(metadata))
        head += metadata
        checksum = crc32c(payload, crc32c(memoryview(head)[checksum_at + 4:]))
        _U32.pack_into(head, checksum_at, checksum)
        return [head, payload]

    def decode(self, payload: memoryview, max_magic: int, zstd: bool, inflate_limit: int = DEFAULT_LIMIT):
        # The entry's own uncompressed_size bounds its inflating (_decompress), and what
        # is served is never compressed, so the inflate limit has nothing to add here.
        entry = read_entry(payload)
        return conversion.write(entry.records, min(max_magic, 2), 0, producer=entry.producer, leader_epoch=-1)


def read_entry(payload) -> PulsarEntry:
    """Parse and check a pulsar entry; raise ValueError naming what is wrong."""
    view = memoryview(payload)
    end = len(view)
    if end < 6:
        raise ValueError(f"pulsar entry: truncated broker entry metadata ({end} bytes)")
    magic = _U16.unpack_from(view, 0)[0]
    if magic != MAGIC_BROKER_ENTRY_METADATA:
        raise ValueError(f"pulsar entry: bad magic {magic:#06x} where broker entry metadata "
                         f"({MAGIC_BROKER_ENTRY_METADATA:#06x}) was expected")
    size = _U32.unpack_from(view, 2)[0]
    pos = 6 + size
    if pos > end:
        raise ValueError(f"pulsar entry: truncated broker entry metadata ({size} bytes claimed, {end - 6} present)")
    index = None
    for field, wire_type, value in _fields(view, 6, pos, "broker entry metadata"):
        if field == _BEM_INDEX:
            index = _expect(value, wire_type, VARINT, "broker entry metadata index")
    if index is None:
        raise ValueError("pulsar entry: broker entry metadata has no index")

    if end - pos < 10:
        raise ValueError(f"pulsar entry: truncated metadata ({end - pos} bytes after broker entry metadata)")
    magic = _U16.unpack_from(view, pos)[0]
    if magic != MAGIC_CRC32C:
        raise ValueError(f"pulsar entry: bad magic {magic:#06x} where the checksum magic ({MAGIC_CRC32C:#06x}) "
                         "was expected")
    stored = _U32.unpack_from(view, pos + 2)[0]
    checked = pos + 6
    size = _U32.unpack_from(view, checked)[0]
    metadata_start = checked + 4
    metadata_end = metadata_start + size
    truncated = (f"truncated metadata ({size} bytes claimed, {end - metadata_start} present)"
                 if metadata_end > end else None)
    computed = crc32c(view[checked:])
    if computed != stored:
        raise ValueError(f"pulsar entry: checksum mismatch over {end - checked} bytes "
                         f"(stored {stored:#010x}, computed {computed:#010x}): "
                         + (truncated or "corrupt or truncated"))
    if truncated:
        raise ValueError(f"pulsar entry: {truncated}")

    metadata = _message_metadata(view, metadata_start, metadata_end)
    count = metadata["count"]
    if count is None:
        raise ValueError("pulsar entry: not a batch message (no num_messages_in_batch)")
    if count < 1:
        raise ValueError(f"pulsar entry: num_messages_in_batch {count}")
    base = index - count + 1
    if base < 0 or index > _MAX_OFFSET:
        raise ValueError(f"pulsar entry: index {index} cannot hold {count} records")
    batch = _decompress(metadata["compression"], view[metadata_end:], metadata["uncompressed_size"])
    records = _records(memoryview(batch), count, base)
    return PulsarEntry(records, _producer(metadata["producer_name"], metadata["sequence_id"]),
                       metadata["compression"])


def _fields(data, pos: int, end: int, what: str):
    try:
        yield from fields(data, pos, end)
    except ValueError as exc:
        raise ValueError(f"pulsar entry: corrupt {what}: {exc}") from None


def _expect(value, wire_type: int, wanted: int, what: str):
    if wire_type != wanted:
        raise ValueError(f"pulsar entry: {what} has wire type {wire_type}, not {wanted}")
    return value


def _message_metadata(view, pos: int, end: int) -> dict:
    found: dict[str, bytes | int | None] = {"producer_name": None, "sequence_id": None, "compression": NONE,
                                            "uncompressed_size": None, "count": None}
    for field, wire_type, value in _fields(view, pos, end, "message metadata"):
        if field == _MM_PRODUCER_NAME:
            found["producer_name"] = bytes(_expect(value, wire_type, LEN, "producer_name"))
        elif field == _MM_SEQUENCE_ID:
            found["sequence_id"] = _expect(value, wire_type, VARINT, "sequence_id")
        elif field == _MM_COMPRESSION:
            found["compression"] = _expect(value, wire_type, VARINT, "compression")
        elif field == _MM_UNCOMPRESSED_SIZE:
            found["uncompressed_size"] = _expect(value, wire_type, VARINT, "uncompressed_size")
        elif field == _MM_NUM_MESSAGES:
            found["count"] = _expect(value, wire_type, VARINT, "num_messages_in_batch")
    return found


def _decompress(compression: int, data: memoryview, uncompressed_size: int | None):
    if compression == NONE:
        if uncompressed_size is not None and uncompressed_size != len(data):
            raise ValueError(f"pulsar entry: truncated payload ({len(data)} bytes, uncompressed_size "
                             f"{uncompressed_size})")
        return data
    name = COMPRESSION_NAMES.get(compression)
    if name is None:
        raise ValueError(f"pulsar entry: unknown compression type {compression}")
    if uncompressed_size is None or uncompressed_size > _MAX_UNCOMPRESSED:
        raise ValueError(f"pulsar entry: {name} payload with uncompressed_size {uncompressed_size}")
    if compression in (LZ4, SNAPPY) and uncompressed_size > _MAX_BLOCK_RATIO * len(data) + 64:
        # Both allocate the claimed size up front; neither format expands more than this.
        raise ValueError(f"pulsar entry: {name} payload of {len(data)} bytes cannot hold {uncompressed_size}")
    try:
        if compression == LZ4:
            out = lz4.block.decompress(data, uncompressed_size=uncompressed_size)
        elif compression == ZLIB:
            inflater = zlib.decompressobj()
            out = inflater.decompress(data, uncompressed_size + 1)
            if not inflater.eof:
                raise ValueError("zlib stream does not end where the payload does")
        elif compression == SNAPPY:
            claimed, _ = read_varint(data, 0, len(data))
            if claimed != uncompressed_size:
                raise ValueError(f"snappy block claims {claimed} bytes")
            out = bytes(cramjam.snappy.decompress_raw(data))
        else:
            out = _unzstd(data, uncompressed_size + 1)
    except Exception as exc:  # every codec library raises its own types
        raise ValueError(f"pulsar entry: {name} payload does not decompress: {exc}") from None
    if len(out) != uncompressed_size:
        raise ValueError(f"pulsar entry: {name} payload decompresses to {len(out)} bytes, not {uncompressed_size}")
    return out


def _unzstd(data, limit: int) -> bytearray:
    """At most ``limit`` bytes of the frame, read in chunks: a frame header may claim any size."""
    out = bytearray()
    with zstandard.ZstdDecompressor().stream_reader(bytes(data)) as reader:
        while len(out) < limit:
            chunk = reader.read(min(limit - len(out), 1 << 20))
            if not chunk:
                break
            out += chunk
    return out


def _single_metadata(batch: memoryview, start: int, end: int, i: int) -> tuple[list, bytes | None, int, int, bool]:
    """Message ``i``'s SingleMessageMetadata: (headers, key, payload size, event time, null value)."""
    headers = []
    partition_key = ordering_key = payload_size = None
    b64 = null_value = False
    timestamp = -1
    for field, wire_type, value in _fields(batch, start, end, f"metadata of message {i}"):
        if field == _SM_PROPERTIES:
            headers.append(_property(_expect(value, wire_type, LEN, "property"), i))
        elif field == _SM_PARTITION_KEY:
            partition_key = _expect(value, wire_type, LEN, "partition_key")
        elif field == _SM_PAYLOAD_SIZE:
            payload_size = _expect(value, wire_type, VARINT, "payload_size")
        elif field == _SM_EVENT_TIME:
            timestamp = _expect(value, wire_type, VARINT, "event_time")
        elif field == _SM_B64:
            b64 = bool(_expect(value, wire_type, VARINT, "partition_key_b64_encoded"))
        elif field == _SM_ORDERING_KEY:
            ordering_key = _expect(value, wire_type, LEN, "ordering_key")
        elif field == _SM_NULL_VALUE:
            null_value = bool(_expect(value, wire_type, VARINT, "null_value"))
    if payload_size is None:
        raise ValueError(f"pulsar entry: message {i} has no payload_size")
    if timestamp > _MAX_OFFSET:
        raise ValueError(f"pulsar entry: message {i} has event_time {timestamp} beyond int64")
    return headers, _message_key(ordering_key, partition_key, b64, i), payload_size, timestamp, null_value


def _message_key(ordering_key, partition_key, b64: bool, i: int) -> bytes | None:
    """A message's key: its ordering key, else its partition key (base64-decoded when marked so)."""
    if ordering_key is not None:
        return bytes(ordering_key)
    if partition_key is None:
        return None
    if not b64:
        return bytes(partition_key)
    try:
        return b64decode(bytes(partition_key), validate=True)
    except Base64Error as exc:
        raise ValueError(f"pulsar entry: message {i} partition_key is not base64: {exc}") from None


def _records(batch: memoryview, count: int, base: int) -> list[Record]:
    records = []
    end = len(batch)
    pos = 0
    for i in range(count):
        if end - pos < 4:
            raise ValueError(f"pulsar entry: truncated payload at message {i} of {count}")
        size = _U32.unpack_from(batch, pos)[0]
        start = pos + 4
        pos = start + size
        if pos > end:
            raise ValueError(f"pulsar entry: truncated payload in the metadata of message {i} of {count}")
        headers, key, payload_size, timestamp, null_value = _single_metadata(batch, start, pos, i)
        if payload_size > end - pos:
            raise ValueError(f"pulsar entry: truncated payload: message {i} of {count} needs {payload_size} bytes, "
                             f"{end - pos} left")
        value = None if null_value else bytes(batch[pos:pos + payload_size])
        pos += payload_size
        records.append(Record(base + i, timestamp, key, value, tuple(headers)))
    if pos != end:
        raise ValueError(f"pulsar entry: {end - pos} stray bytes after {count} messages")
    return records


def _property(data, i: int) -> tuple[str, bytes]:
    key = value = None
    for field, wire_type, item in _fields(data, 0, len(data), f"property of message {i}"):
        if field == _KV_KEY:
            key = _expect(item, wire_type, LEN, "property key")
        elif field == _KV_VALUE:
            value = _expect(item, wire_type, LEN, "property value")
    if key is None or value is None:
        raise ValueError(f"pulsar entry: property of message {i} lacks its key or value")
    try:
        return str(key, "utf-8"), bytes(value)
    except UnicodeDecodeError as exc:
        raise ValueError(f"pulsar entry: property key of message {i} is not UTF-8: {exc}") from None


def _producer(name: bytes | None, sequence_id: int | None) -> tuple[int, int, int]:
    """``(producer_id, producer_epoch, base_sequence)`` from an idempotent batch's metadata, else -1s."""
    if name is None or sequence_id is None or not name.startswith(_PRODUCER_PREFIX.encode()):
        return _NO_PRODUCER
    parts = name[len(_PRODUCER_PREFIX):].split(b"-")
    if len(parts) != 2 or not all(part.isdigit() for part in parts):
        return _NO_PRODUCER
    producer_id, producer_epoch = int(parts[0]), int(parts[1])
    if producer_id > _MAX_OFFSET or producer_epoch > 0x7FFF or sequence_id > 0x7FFFFFFF:
        raise ValueError(f"pulsar entry: producer {name!r} with sequence {sequence_id} is out of range")
    return producer_id, producer_epoch, sequence_id


register(PulsarFormat())
