"""The ``pulsar`` entry format: round trips, Pulsar's wire layout, documented losses, corrupt entries.

The layout is checked by a reader written here from Pulsar's public schema
(``PulsarApi.proto`` field numbers, ``Commands`` framing) that shares no code with the
format module: a tiny protobuf parser, the magics, CRC32C, every metadata field.
"""
import base64
import struct
import time
import types
import zlib

import cramjam
import lz4.block
import pytest
import zstandard
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kgate.protocol import conversion, message_set, record_batch
from kgate.protocol.record import Record
from kgate.storage import entry_formats
from kgate.storage.entry import EntryHeader
from kgate.storage.entry_formats import EntryUnreadable, ProducedRecords, decode_entry
from tests.unit.record_batches import BASE_TIMESTAMP, CODECS

FORMAT = entry_formats.by_name("pulsar")
PULSAR_COMPRESSION = {0: 0, 1: 2, 2: 4, 3: 1, 4: 3}  # Kafka codec id -> CompressionType (NONE LZ4 ZLIB ZSTD SNAPPY)
BASE = 1000
PRODUCER = (4321, 3, 17)

# Records in the lossless domain: keys (null, empty, binary), values (null, empty,
# compressible), UTF-8 headers (empty key, duplicates, empty value), timestamps out of order.
RECORDS = [
    (b"key-0", b"kgate record 0 " * 40, [("trace", b"abc"), ("trace", "\u00e9t\u00e9 \U0001f600".encode())],
     BASE_TIMESTAMP + 5),
    (None, b"no key", [], BASE_TIMESTAMP + 1),
    (b"", None, [("", b"")], BASE_TIMESTAMP + 9),
    (bytes(range(256)), b"", [("h", b"1"), ("g", b"2")], 0),
    (b"\xff\xfe", b"kgate record 4 " * 40, [], BASE_TIMESTAMP + 3),
]


# -- building produced records ------------------------------------------------------

def build(records, codec: int = 0, producer=(-1, -1, -1)) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                        producer_id=producer[0], producer_epoch=producer[1],
                                        base_sequence=producer[2], batch_size=1 << 30)
    for i, (key, value, headers, timestamp) in enumerate(records):
        builder.append(i, timestamp=timestamp, key=key, value=value, headers=list(headers))
    return bytes(builder.build())


def produced_batch(data: bytes) -> ProducedRecords:
    return ProducedRecords.of_batch(memoryview(data), record_batch.validate(data))


def encode(produced: ProducedRecords, base: int = BASE, codec=None) -> bytes:
    buffers = FORMAT.encode(produced, base, 7, codec)
    return b"".join(bytes(buffer) for buffer in buffers)


def decode(entry: bytes, magic: int = 2, zstd: bool = True) -> list[Record]:
    return list(conversion.read(FORMAT.decode(memoryview(entry), magic, zstd)))


def as_records(records, base: int) -> list[Record]:
    return [Record(base + i, ts, key, value, tuple(headers)) for i, (key, value, headers, ts) in enumerate(records)]


def documented(records: list[Record], magic: int = 2) -> list[Record]:
    """What the module docstring says a reader gets back for ``records`` (absolute offsets)."""
    out = []
    for record in records:
        headers = tuple((name, b"" if value is None else value.decode("utf-8", "replace").encode())
                        for name, value in record.headers)
        timestamp = record.timestamp if record.timestamp >= 0 else -1
        if magic < 2:
            headers = ()  # magic 0/1 cannot carry headers (conversion's rule, not this format's)
        if magic == 0:
            timestamp = -1
        out.append(Record(record.offset, timestamp, record.key, record.value, headers))
    return out


# -- an independent reader, from Pulsar's public schema ----------------------------

def pb_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def pb_message(data: bytes) -> dict[int, list]:
    """Field number -> values in order; varints as ints, length-delimited as bytes; others skipped."""
    fields: dict[int, list] = {}
    pos = 0
    while pos < len(data):
        key, pos = pb_varint(data, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, pos = pb_varint(data, pos)
        elif wire_type == 2:
            length, pos = pb_varint(data, pos)
            value = data[pos:pos + length]
            assert len(value) == length
            pos += length
        elif wire_type == 1:
            pos += 8
            continue
        elif wire_type == 5:
            pos += 4
            continue
        else:
            raise AssertionError(f"wire type {wire_type}")
        fields.setdefault(number, []).append(value)
    assert pos == len(data)
    return fields


def last(fields: dict, number: int, default=None):
    return fields[number][-1] if number in fields else default


def pulsar_decompress(compression: int, data: bytes, size: int) -> bytes:
    if compression == 0:
        return data
    if compression == 1:  # LZ4: a raw block
        return lz4.block.decompress(data, uncompressed_size=size)
    if compression == 2:  # ZLIB: a zlib stream (java.util.zip.Deflater)
        return zlib.decompress(data)
    if compression == 3:  # ZSTD: a frame
        return zstandard.ZstdDecompressor().decompress(data, max_output_size=size)
    if compression == 4:  # SNAPPY: a raw block
        return bytes(cramjam.snappy.decompress_raw(data))
    raise AssertionError(f"compression {compression}")


def pulsar_read(entry: bytes) -> dict:
    """Read an entry as a Pulsar broker stores it: broker entry metadata, checksum, batch."""
    magic, size = struct.unpack_from(">HI", entry, 0)
    assert magic == 0x0E02  # Commands.magicBrokerEntryMetadata
    broker = pb_message(entry[6:6 + size])
    pos = 6 + size
    magic, checksum = struct.unpack_from(">HI", entry, pos)
    assert magic == 0x0E01  # Commands.magicCrc32c
    assert crc32c(entry[pos + 6:]) == checksum
    pos += 6
    (size,) = struct.unpack_from(">I", entry, pos)
    metadata = pb_message(entry[pos + 4:pos + 4 + size])
    payload = entry[pos + 4 + size:]
    compression = last(metadata, 8, 0)
    batch = pulsar_decompress(compression, payload, last(metadata, 9))
    messages = []
    pos = 0
    for _ in range(last(metadata, 11, 1)):
        (size,) = struct.unpack_from(">I", batch, pos)
        single = pb_message(batch[pos + 4:pos + 4 + size])
        pos += 4 + size
        payload_size = last(single, 3)
        messages.append({
            "properties": [(pb_message(kv)[1][0].decode(), pb_message(kv)[2][0].decode()) for kv in single.get(1, [])],
            "partition_key": last(single, 2),
            "event_time": last(single, 5),
            "b64": bool(last(single, 6, 0)),
            "ordering_key": last(single, 7),
            "null_value": bool(last(single, 9, 0)),
            "null_partition_key": bool(last(single, 10, 0)),
            "payload": batch[pos:pos + payload_size],
        })
        pos += payload_size
    assert pos == len(batch)
    return {"broker_timestamp": last(broker, 1), "index": last(broker, 2),
            "producer_name": last(metadata, 1), "sequence_id": last(metadata, 2), "publish_time": last(metadata, 3),
            "compression": compression, "uncompressed_size": last(metadata, 9),
            "num_messages_in_batch": last(metadata, 11), "event_time": last(metadata, 12),
            "uncompressed": batch, "messages": messages}


def checksum_region(entry: bytes) -> int:
    """Where the CRC32C-covered bytes start: after broker entry metadata, magic and checksum."""
    (size,) = struct.unpack_from(">I", entry, 2)
    return 6 + size + 6


def with_checksum(entry: bytes | bytearray) -> bytes:
    entry = bytearray(entry)
    start = checksum_region(entry)
    struct.pack_into(">I", entry, start - 4, crc32c(bytes(entry[start:])))
    return bytes(entry)


def pb_field(number: int, value) -> bytes:
    def varint(n):
        out = bytearray()
        while True:
            out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
            n >>= 7
            if not n:
                return bytes(out)
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    return varint(number << 3 | 2) + varint(len(value)) + value


def reframed(entry: bytes, metadata: bytes, payload: bytes) -> bytes:
    """``entry``'s broker entry metadata with new message metadata and payload, checksum valid."""
    start = checksum_region(entry)
    return with_checksum(entry[:start] + struct.pack(">I", len(metadata)) + metadata + payload)


# -- round trips ---------------------------------------------------------------------

@pytest.mark.parametrize("topic_codec", [None, *CODECS.values()], ids=lambda c: f"topic-{c}")
@pytest.mark.parametrize("codec", CODECS, ids=lambda c: f"sent-{c}")
def test_round_trip_at_every_magic(codec, topic_codec):
    produced = produced_batch(build(RECORDS, CODECS[codec], PRODUCER))
    entry = encode(produced, BASE, topic_codec)
    expected = as_records(RECORDS, BASE)
    for magic in (2, 1, 0):
        data = FORMAT.decode(memoryview(entry), magic, zstd=magic == 2)
        assert conversion.magic_of(data) == magic
        assert list(conversion.read(data)) == documented(expected, magic)
    assert documented(expected) == expected  # these records lose nothing
    served = FORMAT.decode(memoryview(entry), 2, True)
    header = record_batch.validate(served)
    assert header.size == len(served)
    assert (header.base_offset, header.record_count, header.last_offset) == (BASE, 5, BASE + 4)
    assert header.max_timestamp == produced.max_timestamp
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == PRODUCER
    assert header.compression == 0 and header.partition_leader_epoch == -1
    assert not header.attributes & record_batch.TIMESTAMP_TYPE_FLAG
    batch = DefaultRecordBatch(served)
    assert batch.validate_crc() and batch.timestamp_type == 0


def test_zstd_entries_are_served_uncompressed_to_readers_without_zstd():
    entry = encode(produced_batch(build(RECORDS, CODECS["zstd"])), BASE, CODECS["zstd"])
    assert pulsar_read(entry)["compression"] == 3
    served = FORMAT.decode(memoryview(entry), 2, False)
    assert record_batch.read_header(served).compression == 0
    assert list(conversion.read(served)) == as_records(RECORDS, BASE)


@pytest.mark.parametrize("codec", [0, 1, 2, 3])
@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_message_sets_round_trip(magic, codec):
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i in range(4):
        builder.append(i, timestamp=BASE_TIMESTAMP + i, key=None if i == 2 else b"k%d" % i,
                       value=None if i == 3 else b"legacy %d " % i * 30)
    data = bytes(builder.build())
    produced = ProducedRecords.of_message_set(memoryview(data), message_set.parse(data))
    entry = encode(produced, BASE)
    expected = [Record(BASE + i, BASE_TIMESTAMP + i if magic == 1 else -1, None if i == 2 else b"k%d" % i,
                       None if i == 3 else b"legacy %d " % i * 30, ()) for i in range(4)]
    assert decode(entry) == expected
    assert decode(entry, magic) == documented(expected, magic)
    read = pulsar_read(entry)
    assert read["producer_name"] == b"kafka" and read["sequence_id"] == BASE
    assert [m["event_time"] for m in read["messages"]] == [r.timestamp if magic == 1 else None for r in expected]


headers_strategy = st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=12)), max_size=4)
records_strategy = st.lists(
    st.tuples(st.none() | st.binary(max_size=24), st.none() | st.binary(max_size=64), headers_strategy,
              st.integers(-3, 2**45) | st.sampled_from([0, -1, BASE_TIMESTAMP])),
    min_size=1, max_size=12)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=records_strategy, codec=st.sampled_from(list(CODECS.values())),
       topic_codec=st.sampled_from([None, *CODECS.values()]), base=st.integers(0, 2**40),
       text_headers=st.lists(st.tuples(st.text(max_size=8), st.text(max_size=12)), max_size=3))
def test_round_trip_property(records, codec, topic_codec, base, text_headers):
    # Arbitrary records come back as documented; UTF-8 headers and timestamps >= 0 exactly.
    records = [(k, v, h, ts) for k, v, h, ts in records]
    records[0] = (records[0][0], records[0][1], [(n, v.encode()) for n, v in text_headers], records[0][3])
    entry = encode(produced_batch(build(records, codec)), base, topic_codec)
    sent = as_records(records, base)
    assert decode(entry) == documented(sent)
    assert decode(entry, 1) == documented(sent, 1)
    assert decode(entry, 0) == documented(sent, 0)
    first = decode(entry)[0]
    assert first.headers == tuple((n, v.encode()) for n, v in text_headers)
    if records[0][3] >= 0:
        assert first.timestamp == records[0][3]


# -- Pulsar's layout, read independently ---------------------------------------------

@pytest.mark.parametrize("topic_codec", [None, *CODECS.values()], ids=lambda c: f"topic-{c}")
def test_an_independent_pulsar_reader_finds_every_field(topic_codec):
    produced = produced_batch(build(RECORDS, CODECS["lz4"], PRODUCER))
    before = time.time_ns() // 1_000_000
    entry = encode(produced, BASE, topic_codec)
    after = time.time_ns() // 1_000_000
    read = pulsar_read(entry)
    assert read["index"] == BASE + len(RECORDS) - 1
    assert before <= read["broker_timestamp"] <= after
    assert before <= read["publish_time"] <= after
    assert read["producer_name"] == b"kafka-4321-3" and read["sequence_id"] == 17
    assert read["num_messages_in_batch"] == len(RECORDS)
    assert read["compression"] == PULSAR_COMPRESSION[topic_codec or 0]
    assert read["uncompressed_size"] == len(read["uncompressed"])
    assert read["event_time"] == produced.max_timestamp
    for message, (key, value, headers, timestamp) in zip(read["messages"], RECORDS, strict=True):
        if key is None:
            assert message["null_partition_key"]
            assert message["ordering_key"] is None and message["partition_key"] is None
        else:
            assert not message["null_partition_key"]
            assert message["ordering_key"] == key
            assert message["b64"] and base64.b64decode(message["partition_key"]) == key
        assert message["null_value"] == (value is None)
        assert message["payload"] == (value or b"")
        assert message["properties"] == [(name, v.decode()) for name, v in headers]
        assert message["event_time"] == timestamp


def test_the_reader_rejects_a_wrong_checksum():
    entry = bytearray(encode(produced_batch(build(RECORDS))))
    entry[-1] ^= 0x01
    with pytest.raises(AssertionError):
        pulsar_read(bytes(entry))


def test_non_idempotent_batches_name_the_plain_kafka_producer():
    entry = encode(produced_batch(build(RECORDS)), BASE)
    read = pulsar_read(entry)
    assert read["producer_name"] == b"kafka" and read["sequence_id"] == BASE
    header = record_batch.read_header(FORMAT.decode(memoryview(entry), 2, True))
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (-1, -1, -1)


# -- the documented losses, each exactly as documented ------------------------------

def test_invalid_utf8_header_values_get_replacement_characters():
    headers = [("bad", b"ok\xff\xfe!"), ("truncated", b"\xe2\x82"), ("surrogate", b"\xed\xa0\x80"),
               ("good", "\u20ac".encode())]
    entry = encode(produced_batch(build([(b"k", b"v", headers, 1)])))
    assert pulsar_read(entry)["messages"][0]["properties"] == [
        ("bad", "ok\ufffd\ufffd!"), ("truncated", "\ufffd"), ("surrogate", "\ufffd\ufffd\ufffd"), ("good", "\u20ac")]
    assert decode(entry)[0].headers == (("bad", b"ok\xef\xbf\xbd\xef\xbf\xbd!"), ("truncated", b"\xef\xbf\xbd"),
                                        ("surrogate", b"\xef\xbf\xbd" * 3), ("good", b"\xe2\x82\xac"))


def test_null_header_values_read_back_empty():
    entry = encode(produced_batch(build([(b"k", b"v", [("none", None), ("empty", b"")], 1)])))
    assert pulsar_read(entry)["messages"][0]["properties"] == [("none", ""), ("empty", "")]
    assert decode(entry)[0].headers == (("none", b""), ("empty", b""))


def test_negative_timestamps_read_back_as_no_timestamp_and_zero_is_kept():
    entry = encode(produced_batch(build([(b"a", b"1", [], -1), (b"b", b"2", [], -5), (b"c", b"3", [], 0)])))
    assert [m["event_time"] for m in pulsar_read(entry)["messages"]] == [None, None, 0]
    assert [r.timestamp for r in decode(entry)] == [-1, -1, 0]


def test_log_append_time_batches_come_back_as_create_time_at_the_batch_max_timestamp():
    data = bytearray(build([(b"a", b"1", [], BASE_TIMESTAMP), (b"b", b"2", [], BASE_TIMESTAMP + 7)]))
    attributes = struct.unpack_from(">h", data, record_batch.CRC_START)[0]
    struct.pack_into(">h", data, record_batch.CRC_START, attributes | record_batch.TIMESTAMP_TYPE_FLAG)
    struct.pack_into(">I", data, record_batch.CRC_START - 4, crc32c(bytes(data[record_batch.CRC_START:])))
    entry = encode(produced_batch(bytes(data)))
    assert [m["event_time"] for m in pulsar_read(entry)["messages"]] == [BASE_TIMESTAMP + 7] * 2
    served = FORMAT.decode(memoryview(entry), 2, True)
    assert not record_batch.read_header(served).attributes & record_batch.TIMESTAMP_TYPE_FLAG
    assert [r.timestamp for r in conversion.read(served)] == [BASE_TIMESTAMP + 7] * 2


def test_codec_leader_epoch_and_batch_fields_are_rebuilt():
    sent = build(RECORDS, CODECS["snappy"], PRODUCER)
    entry = encode(produced_batch(sent), BASE, None)  # compression.type=producer
    assert pulsar_read(entry)["compression"] == 0  # stored uncompressed
    served = FORMAT.decode(memoryview(entry), 2, True)
    header = record_batch.read_header(served)
    assert header.compression == 0 and header.partition_leader_epoch == -1  # encoded with epoch 7
    assert header.base_timestamp == RECORDS[0][3]


def test_producer_state_is_kept_only_for_idempotent_batches_and_not_for_restarts():
    assert FORMAT.stores_batches is False and not entry_formats.stores_batches(FORMAT.code)
    for producer, expected in [(PRODUCER, PRODUCER), ((4321, 3, -1), (-1, -1, -1)), ((-1, -1, -1), (-1, -1, -1))]:
        entry = encode(produced_batch(build(RECORDS, 0, producer)))
        header = record_batch.read_header(FORMAT.decode(memoryview(entry), 2, True))
        assert (header.producer_id, header.producer_epoch, header.base_sequence) == expected


def test_legacy_wrappers_become_one_batch():
    sets = b""
    for first in (0, 2):
        builder = LegacyRecordBatchBuilder(magic=1, compression_type=1, batch_size=1 << 20)
        for i in range(2):
            builder.append(i, timestamp=BASE_TIMESTAMP + first + i, key=None, value=b"v%d" % (first + i))
        sets += bytes(builder.build())
    produced = ProducedRecords.of_message_set(memoryview(sets), message_set.parse(sets))
    assert len(produced.message_set.shallow) == 2
    entry = encode(produced, BASE, None)
    assert pulsar_read(entry)["num_messages_in_batch"] == 4
    served = FORMAT.decode(memoryview(entry), 2, True)
    assert [header.compression for _pos, header in record_batch.iter_headers(served)] == [0]
    assert [r.value for r in conversion.read(served)] == [b"v0", b"v1", b"v2", b"v3"]
    legacy = FORMAT.decode(memoryview(entry), 1, False)
    assert [r.offset for r in conversion.read(legacy)] == [BASE + i for i in range(4)]


# -- corrupt entries -----------------------------------------------------------------

GOOD = encode(produced_batch(build(RECORDS, 0, PRODUCER)), BASE, CODECS["lz4"])
GOOD_PLAIN = encode(produced_batch(build(RECORDS, 0, PRODUCER)), BASE, 0)


def stored(payload) -> types.SimpleNamespace:
    return types.SimpleNamespace(header=EntryHeader(BASE, len(RECORDS), BASE_TIMESTAMP, 2, FORMAT.code),
                                 payload=memoryview(payload))


def unreadable(payload) -> str:
    with pytest.raises(EntryUnreadable) as caught:
        decode_entry(stored(payload))
    assert caught.value.code.name == "KAFKA_STORAGE_ERROR"
    return str(caught.value)


def test_decode_entry_serves_a_good_entry():
    assert list(conversion.read(decode_entry(stored(GOOD)))) == as_records(RECORDS, BASE)


@pytest.mark.parametrize("entry", [GOOD, GOOD_PLAIN], ids=["lz4", "none"])
def test_any_flipped_byte_under_the_checksum_is_a_checksum_mismatch(entry):
    start = checksum_region(entry)
    for pos in range(start, len(entry), max(1, (len(entry) - start) // 97)):
        corrupt = bytearray(entry)
        corrupt[pos] ^= 0x40
        with pytest.raises(ValueError, match="checksum mismatch"):
            FORMAT.decode(memoryview(bytes(corrupt)), 2, True)
    assert "checksum mismatch" in unreadable(bytes(corrupt))


def test_a_flipped_checksum_is_a_checksum_mismatch():
    corrupt = bytearray(GOOD)
    corrupt[checksum_region(GOOD) - 1] ^= 0x01
    with pytest.raises(ValueError, match="checksum mismatch"):
        FORMAT.decode(memoryview(bytes(corrupt)), 2, True)


@pytest.mark.parametrize("where", ["broker entry metadata", "checksum"])
def test_bad_magic(where):
    corrupt = bytearray(GOOD)
    pos = 0 if where == "broker entry metadata" else checksum_region(GOOD) - 6
    corrupt[pos:pos + 2] = b"\x0e\x03"
    with pytest.raises(ValueError, match=r"pulsar entry: bad magic 0x0e03"):
        FORMAT.decode(memoryview(bytes(corrupt)), 2, True)
    assert "bad magic" in unreadable(bytes(corrupt))


def test_a_kafka_batch_is_not_a_pulsar_entry():
    with pytest.raises(ValueError, match="bad magic"):
        FORMAT.decode(memoryview(build(RECORDS)), 2, True)


def test_truncated_metadata():
    start = checksum_region(GOOD)
    for cut in (0, 3, 5, 9, start - 3, start + 2, start + 10):
        with pytest.raises(ValueError, match="truncated (broker entry )?metadata"):
            FORMAT.decode(memoryview(GOOD[:cut]), 2, True)
    assert "truncated metadata" in unreadable(GOOD[:start + 10])


def test_truncated_payload():
    # Cut short: the checksum no longer matches.
    with pytest.raises(ValueError, match="checksum mismatch.*truncated"):
        FORMAT.decode(memoryview(GOOD_PLAIN[:-7]), 2, True)
    # Cut short and checksummed again (a writer bug): the payload parser notices.
    with pytest.raises(ValueError, match="truncated payload"):
        FORMAT.decode(memoryview(with_checksum(GOOD_PLAIN[:-7])), 2, True)
    read = pulsar_read(GOOD_PLAIN)
    for cut in (1, 7, len(read["uncompressed"]) // 2, len(read["uncompressed"]) - 2):
        metadata = (pb_field(1, b"kafka") + pb_field(2, 0) + pb_field(3, 1) + pb_field(11, len(RECORDS)))
        entry = reframed(GOOD_PLAIN, metadata, read["uncompressed"][:-cut])
        with pytest.raises(ValueError, match="truncated payload"):
            FORMAT.decode(memoryview(entry), 2, True)
        assert "truncated payload" in unreadable(entry)


def test_compressed_payload_that_does_not_decompress():
    read = pulsar_read(GOOD)
    metadata = (pb_field(1, b"kafka") + pb_field(2, 0) + pb_field(3, 1) + pb_field(8, 1)
                + pb_field(9, read["uncompressed_size"]) + pb_field(11, len(RECORDS)))
    compressed = lz4.block.compress(read["uncompressed"], store_size=False)
    entry = reframed(GOOD, metadata, compressed[:len(compressed) // 2])
    with pytest.raises(ValueError, match="LZ4 payload"):
        FORMAT.decode(memoryview(entry), 2, True)
    lying = reframed(GOOD, metadata.replace(pb_field(9, read["uncompressed_size"]), pb_field(9, 2**31 - 1)),
                     compressed)
    with pytest.raises(ValueError, match="LZ4 payload of"):
        FORMAT.decode(memoryview(lying), 2, True)


def test_metadata_that_is_not_a_batch_or_lies_about_its_count():
    read = pulsar_read(GOOD_PLAIN)
    head = pb_field(1, b"kafka") + pb_field(2, 0) + pb_field(3, 1)
    cases = {
        "not a batch message": head,
        "truncated payload at message 5": head + pb_field(11, len(RECORDS) + 1),
        "stray bytes": head + pb_field(11, len(RECORDS) - 1),
        "num_messages_in_batch 0": head + pb_field(11, 0),
        "unknown compression type 9": head + pb_field(8, 9) + pb_field(9, 10) + pb_field(11, 1),
        "corrupt message metadata": head + b"\x0a\x7f",
    }
    for message, metadata in cases.items():
        with pytest.raises(ValueError, match=message):
            FORMAT.decode(memoryview(reframed(GOOD_PLAIN, metadata, read["uncompressed"])), 2, True)


def test_an_index_too_small_for_the_record_count():
    # Broker entry metadata is outside the checksum: index 2 cannot end five records.
    broker = pb_field(1, 5) + pb_field(2, 2)
    start = checksum_region(GOOD)
    entry = struct.pack(">HI", 0x0E02, len(broker)) + broker + GOOD[start - 6:]
    with pytest.raises(ValueError, match="index 2 cannot hold 5 records"):
        FORMAT.decode(memoryview(entry), 2, True)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=200) | st.binary(max_size=120).map(lambda b: b"\x0e\x02\x00\x00\x00\x00" + b))
def test_random_bytes_raise_only_value_errors(data):
    try:
        FORMAT.decode(memoryview(data), 2, True)
    except ValueError:
        pass
    try:
        decode_entry(stored(data))
    except EntryUnreadable as exc:
        assert exc.code.name == "KAFKA_STORAGE_ERROR"


@settings(max_examples=150, deadline=None)
@given(entry=st.sampled_from([GOOD, GOOD_PLAIN, encode(produced_batch(build(RECORDS)), 0, CODECS["zstd"]),
                              encode(produced_batch(build(RECORDS)), 0, CODECS["snappy"]),
                              encode(produced_batch(build(RECORDS)), 0, CODECS["gzip"])]),
       edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=6),
       cut=st.none() | st.integers(0, 10**6), fix_checksum=st.booleans())
def test_mutated_entries_raise_only_value_errors(entry, edits, cut, fix_checksum):
    data = bytearray(entry)
    for pos, byte in edits:
        data[pos % len(data)] = byte
    if cut is not None:
        del data[cut % len(data):]
    if fix_checksum:
        try:
            data = bytearray(with_checksum(data))
        except (struct.error, IndexError):
            pass  # too short or too mangled to find the checksum
    try:
        FORMAT.decode(memoryview(bytes(data)), 2, True)
    except ValueError:
        pass
    try:
        decode_entry(stored(bytes(data)))
    except EntryUnreadable as exc:
        assert exc.code.name == "KAFKA_STORAGE_ERROR"
