"""Legacy message sets and conversions between magics, checked against kafka-python's readers.

The sets under test are built by kafka-python's legacy builder, the code 0.9/0.10-era
Python producers run; what kgate stores is read back by kafka-python's own readers,
so a wrong offset, CRC or framing shows up as a disagreement with an independent
implementation.
"""
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.codec import gzip_encode
from kafka.record import MemoryRecords
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kgate.protocol import conversion, message_set
from kgate.protocol.inflate import DEFAULT_LIMIT, inflate_all
from kgate.protocol.record import Record
from kgate.protocol.record_batch import InvalidBatch, validate
from tests.unit.record_batches import BASE_TIMESTAMP, build_batch, compressible_values

LEGACY_CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3}
VALUES = compressible_values(6)


def legacy_set(magic: int, codec: str = "none", values=VALUES, keys=True, inner_offsets=None) -> bytes:
    """A set as an old producer sends it: offsets 0..n-1 (or ``inner_offsets``)."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=LEGACY_CODECS[codec], batch_size=1 << 20)
    for i, value in enumerate(values):
        offset = inner_offsets[i] if inner_offsets else i
        builder.append(offset, timestamp=BASE_TIMESTAMP + i * 3, key=b"k%d" % i if keys else None, value=value)
    return bytes(builder.build())


def kafka_python_records(data) -> list:
    """Every record kafka-python's consumer-side reader finds in ``data``, CRCs checked."""
    records = MemoryRecords(bytes(data))
    out = []
    while (batch := records.next_batch()) is not None:
        assert batch.validate_crc()
        out.extend(batch)
    return out


def stored(data, base: int) -> bytes:
    return bytes(message_set.assign_offsets(data, message_set.parse(data), base))


def error_of(data, **kwargs) -> str | None:
    try:
        message_set.parse(data, **kwargs)
    except InvalidBatch as exc:
        return exc.code.name
    return None


@pytest.mark.parametrize("codec", LEGACY_CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_offsets_are_assigned_as_kafka_assigns_them(magic, codec):
    data = legacy_set(magic, codec)
    parsed = message_set.parse(data)
    assert (parsed.magic, parsed.record_count) == (magic, len(VALUES))
    assert parsed.max_timestamp == (BASE_TIMESTAMP + 15 if magic == 1 else -1)
    read = kafka_python_records(stored(data, 1000))
    assert [r.offset for r in read] == list(range(1000, 1000 + len(VALUES)))
    assert [(r.key, r.value) for r in read] == [(b"k%d" % i, v) for i, v in enumerate(VALUES)]
    if magic == 1:
        assert [r.timestamp for r in read] == [BASE_TIMESTAMP + i * 3 for i in range(len(VALUES))]


def test_a_magic1_wrapper_keeps_its_compressed_bytes_and_carries_the_last_offset():
    data = legacy_set(1, "gzip")
    out = stored(data, 500)
    offset, size = struct.unpack_from(">qi", out)
    assert offset == 500 + len(VALUES) - 1
    assert out[-40:] == data[-40:]  # the compressed value is untouched
    assert struct.unpack_from(">q", out, 18)[0] == BASE_TIMESTAMP + 15  # wrapper timestamp = max inner


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4"])
def test_a_magic0_wrapper_is_recompressed_with_absolute_inner_offsets(codec):
    out = stored(legacy_set(0, codec), 77)
    wrapper_offset, = struct.unpack_from(">q", out)
    assert wrapper_offset == 77 + len(VALUES) - 1
    inner = inflate_all(out[17] & 7, _wrapper_value(out), DEFAULT_LIMIT, 0)
    assert [m.offset for _, _, m in message_set._read_messages(inner, "inner")] == list(range(77, 77 + len(VALUES)))


def _wrapper_value(message: bytes) -> bytes:
    key_length, = struct.unpack_from(">i", message, 18)
    pos = 22 + max(key_length, 0)
    length, = struct.unpack_from(">i", message, pos)
    return message[pos + 4:pos + 4 + length]


def test_garbage_inner_offsets_are_replaced_as_kafka_does():
    """Kafka ignores a compressed set's inner offsets and assigns its own; so does kgate."""
    for magic in (0, 1):
        data = legacy_set(magic, "gzip", inner_offsets=[9, 3, 3, -7, 2**40, 0])
        assert [r.offset for r in kafka_python_records(stored(data, 10))] == list(range(10, 16))


def test_several_top_level_messages_and_wrappers_in_one_set():
    data = legacy_set(1) + legacy_set(1, "snappy", values=[b"a", b"b"]) + legacy_set(1, values=[b"z"])
    parsed = message_set.parse(data)
    assert parsed.record_count == len(VALUES) + 3
    read = kafka_python_records(stored(data, 0))
    assert [r.offset for r in read] == list(range(len(VALUES) + 3))
    assert [r.value for r in read][-3:] == [b"a", b"b", b"z"]


def test_null_keys_and_values_survive():
    data = legacy_set(1, values=[None, b"", b"x"], keys=False)
    assert [(r.key, r.value) for r in kafka_python_records(stored(data, 0))] == \
        [(None, None), (None, b""), (None, b"x")]


def _recrc(message: bytearray, start: int = 0) -> bytes:
    struct.pack_into(">I", message, start + 12, zlib.crc32(bytes(message[start + 16:])))
    return bytes(message)


def test_bad_sets_get_kafkas_errors():
    good = legacy_set(1)
    flipped = bytearray(good)
    flipped[-1] ^= 0xFF
    assert error_of(bytes(flipped)) == "CORRUPT_MESSAGE"
    assert error_of(good[:-3]) == "CORRUPT_MESSAGE"
    assert error_of(legacy_set(0) + legacy_set(1)) == "INVALID_RECORD"  # mixed magic
    assert error_of(build_batch()) == "INVALID_RECORD"  # magic 2 is not a message set
    assert error_of(b"") == "INVALID_RECORD"
    zstd = bytearray(legacy_set(1, "gzip"))
    zstd[17] = 4
    assert error_of(_recrc(zstd)) == "UNSUPPORTED_COMPRESSION_TYPE"
    unknown_codec = bytearray(legacy_set(1, "gzip"))
    unknown_codec[17] = 6
    assert error_of(_recrc(unknown_codec)) == "CORRUPT_MESSAGE"
    not_compressed = bytearray(legacy_set(1))
    not_compressed[17] = 1  # claims gzip, holds plain bytes
    assert error_of(_recrc(not_compressed)) == "CORRUPT_MESSAGE"


def test_nested_compression_and_null_wrapper_values_are_corrupt():
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    builder.append(0, timestamp=1, key=None, value=None)
    null_wrapper = bytearray(builder.build())
    null_wrapper[17] = 1
    assert error_of(_recrc(null_wrapper)) == "CORRUPT_MESSAGE"
    nested = bytearray()
    message_set._append_message(nested, 1, 0, 1, 1, None, gzip_encode(legacy_set(1, "gzip")))
    assert error_of(bytes(nested)) == "CORRUPT_MESSAGE"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_random_bytes_are_refused_with_an_error(data):
    assert error_of(data) in ("CORRUPT_MESSAGE", "INVALID_RECORD", "UNSUPPORTED_COMPRESSION_TYPE", None)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([legacy_set(0, "lz4"), legacy_set(1, "snappy"), legacy_set(1)]),
       st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4))
def test_mutated_sets_are_refused_with_an_error_or_store_what_parses(data, flips):
    mutated = bytearray(data)
    for pos, byte in flips:
        mutated[pos % len(mutated)] = byte
    if error_of(bytes(mutated)) is None:
        assert len(kafka_python_records(stored(bytes(mutated), 0))) == message_set.parse(bytes(mutated)).record_count


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4"])
@pytest.mark.parametrize("magic", [0, 1])
def test_down_conversion_keeps_offsets_and_codec_and_drops_headers(magic, codec):
    batch = bytearray(build_batch(VALUES, codec))
    struct.pack_into(">q", batch, 0, 300)  # stored at offset 300
    out = conversion.down_convert(bytes(batch), magic)
    read = kafka_python_records(out)
    assert [r.offset for r in read] == list(range(300, 300 + len(VALUES)))
    assert [r.value for r in read] == VALUES
    assert [r.timestamp for r in read] == ([BASE_TIMESTAMP + i for i in range(len(VALUES))] if magic else [None] * 6)
    assert out[16] == magic and out[17] & 7 == LEGACY_CODECS[codec]


def test_down_conversion_refuses_zstd():
    with pytest.raises(InvalidBatch) as refused:
        conversion.down_convert(build_batch(VALUES, "zstd"), 1)
    assert refused.value.code.name == "UNSUPPORTED_COMPRESSION_TYPE"


def test_stored_magic1_reads_as_magic0_for_the_oldest_fetchers():
    out = conversion.down_convert(stored(legacy_set(1, "gzip"), 40), 0)
    read = kafka_python_records(out)
    assert out[16] == 0 and [r.offset for r in read] == list(range(40, 46)) and read[0].timestamp is None


@pytest.mark.parametrize("codec", ["none", "gzip", "lz4", "zstd"])
def test_writing_magic2_gives_a_valid_batch_at_the_offsets_given(codec):
    records = [Record(70 + i, BASE_TIMESTAMP + i, b"k", v, (("h", b"v"),)) for i, v in enumerate(VALUES)]
    data = conversion.write(records, 2, LEGACY_CODECS.get(codec, 4), (5, 1, 9), leader_epoch=3)
    header = validate(data)
    assert (header.base_offset, header.partition_leader_epoch, header.producer_id,
            header.base_sequence) == (70, 3, 5, 9)
    assert list(conversion.read(data)) == records
