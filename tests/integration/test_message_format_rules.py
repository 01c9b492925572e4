"""Kafka's rules on message formats, on the wire: what each Produce and Fetch version may carry.

Real clients obey these rules, so the requests are sent raw. Every refusal is checked
to have stored nothing (the log end does not move).
"""
import struct
import zlib

import pytest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record import MemoryRecords
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kgate.protocol import message_set
from kgate.protocol.error_codes import ErrorCode
from kgate.storage import entry_formats
from tests.support.clients import create_topic
from tests.support.wire import Wire
from tests.unit.record_batches import build_batch, compressible_values

TOPIC = "rules"
VALUES = compressible_values(4)

PD = ProduceRequest.TopicProduceData.PartitionProduceData
FT = FetchRequest.FetchTopic
LT = ListOffsetsRequest.ListOffsetsTopic


def legacy(magic: int, codec: int = 0) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i, value in enumerate(VALUES):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=value)
    return bytes(builder.build())


@pytest.fixture
def wire(broker):
    create_topic(broker.bootstrap, TOPIC, 1)
    with Wire(broker.bootstrap) as connection:
        yield connection


def produce(wire, records: bytes, version: int):
    request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=10_000, topic_data=[
        ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[PD(index=0, records=records)])])
    part = wire.call(request, version).responses[0].partition_responses[0]
    return part.error_code, part.base_offset


def log_end(wire) -> int:
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        LT(name=TOPIC, partitions=[LT.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                           timestamp=-1, max_num_offsets=1)])])
    return wire.call(request, 1).topics[0].partitions[0].offset


def fetch(wire, version: int, offset: int = 0):
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                           session_id=0, session_epoch=-1, topics=[
                               FT(topic=TOPIC, partitions=[FT.FetchPartition(
                                   partition=0, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                                   partition_max_bytes=1 << 20)])],
                           forgotten_topics_data=[], rack_id="")
    return wire.call(request, version).responses[0].partitions[0]


@pytest.mark.parametrize("records, version, error", [
    (build_batch(VALUES), 2, ErrorCode.INVALID_RECORD),                           # magic 2 in Produce v2
    (build_batch(VALUES), 0, ErrorCode.INVALID_RECORD),
    (legacy(1), 3, ErrorCode.INVALID_RECORD),                                     # magic 1 in Produce v3
    (legacy(0) + legacy(1), 2, ErrorCode.INVALID_RECORD),                         # mixed magic
    (legacy(1) + build_batch(VALUES), 2, ErrorCode.INVALID_RECORD),
    (build_batch(VALUES, "zstd"), 3, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),     # zstd below Produce v7
    (build_batch(VALUES, "zstd"), 6, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
    (legacy(1)[:-1] + b"\x00", 2, ErrorCode.CORRUPT_MESSAGE),                     # message CRC mismatch
    (legacy(0)[:40], 1, ErrorCode.CORRUPT_MESSAGE),                               # truncated
])
def test_refused_produce_stores_nothing(wire, records, version, error):
    assert produce(wire, records, version) == (error, -1)
    assert log_end(wire) == 0
    assert produce(wire, legacy(1), 2) == (ErrorCode.NONE, 0), "the connection still serves produces"


@pytest.mark.parametrize("version, magic", [(0, 0), (1, 0), (2, 1)])
def test_each_produce_generation_appends_at_the_next_offsets(wire, version, magic):
    for round_ in range(3):
        assert produce(wire, legacy(magic, codec=round_), version) == (ErrorCode.NONE, round_ * len(VALUES))
    assert log_end(wire) == 3 * len(VALUES)


@pytest.mark.parametrize("entry_format", entry_formats.names(), indirect=True)
@pytest.mark.parametrize("version, magic", [(0, 0), (1, 0), (2, 1), (3, 1), (4, 2), (10, 2), (12, 2)])
def test_fetch_returns_the_magic_its_version_reads(wire, entry_format, version, magic):
    assert produce(wire, build_batch(VALUES, "gzip"), 7)[0] == ErrorCode.NONE
    part = fetch(wire, version)
    assert part.error_code == ErrorCode.NONE and part.high_watermark == len(VALUES)
    assert part.records[16] == magic


def test_fetch_v4_and_up_returns_legacy_sets_as_stored(wire):
    stored = legacy(1, codec=1)
    assert produce(wire, stored, 2)[0] == ErrorCode.NONE
    records = fetch(wire, 4).records
    assert records[16] == 1
    assert int.from_bytes(records[:8], "big") == len(VALUES) - 1, "a magic-1 wrapper carries its last offset"
    assert records[26:] == stored[26:], "the compressed bytes are served as produced"


@pytest.mark.parametrize("entry_format", ["kafka", "mixed_kafka"], indirect=True)
def test_zstd_data_is_never_served_below_fetch_v10(wire, entry_format):
    assert produce(wire, build_batch(VALUES, "zstd"), 7)[0] == ErrorCode.NONE
    for version in (0, 2, 4, 9):
        assert fetch(wire, version).error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, f"Fetch v{version}"
    part = fetch(wire, 10)
    assert part.error_code == ErrorCode.NONE and part.records[16] == 2


def shallow_offsets(records: bytes) -> list[int]:
    offsets, pos = [], 0
    while pos + 12 <= len(records):
        offsets.append(int.from_bytes(records[pos:pos + 8], "big"))
        pos += 12 + int.from_bytes(records[pos + 8:pos + 12], "big")
    return offsets


@pytest.mark.parametrize("entry_format", entry_formats.names(), indirect=True)
@pytest.mark.parametrize("version", [0, 2, 3, 4])
def test_uncompressed_legacy_messages_are_served_from_the_offset_asked_for(wire, entry_format, version):
    """As Kafka: a fetch from offset 2 starts at message 2, not at the head of the set it was
    produced in (aiokafka 0.11 reads again from the first message it is given)."""
    assert produce(wire, legacy(0 if version < 2 else 1), 2 if version >= 2 else 0)[0] == ErrorCode.NONE
    records = fetch(wire, version, offset=2).records
    if records[16] < 2:
        assert shallow_offsets(records) == [2, 3]
    else:
        assert int.from_bytes(records[:8], "big") <= 2  # a magic-2 batch is served whole


def test_a_compressed_legacy_wrapper_holding_the_offset_is_served_whole(wire):
    assert produce(wire, legacy(1) + legacy(1, codec=1), 2)[0] == ErrorCode.NONE   # offsets 0-3, then 4-7
    assert shallow_offsets(fetch(wire, 3, offset=5).records) == [7]   # the wrapper carries its last offset
    assert shallow_offsets(fetch(wire, 3, offset=2).records) == [2, 3, 7]


def magic0_wrapper_of_magic1_messages(codec: int = 1) -> bytes:
    """A compressed magic-0 message whose value holds magic-1 messages (relative offsets 0..n-1),
    as some 0.9-era libraries send after falling back from ApiVersions."""
    inner = legacy(1)
    value = message_set.compress(codec, inner, 0)
    body = struct.pack(">bbi", 0, codec, -1) + struct.pack(">i", len(value)) + value
    return struct.pack(">qiI", 0, len(body) + 4, zlib.crc32(body)) + body


@pytest.mark.parametrize("entry_format", entry_formats.names(), indirect=True)
@pytest.mark.parametrize("version", [0, 1])
def test_a_magic0_wrapper_holding_magic1_messages_is_rebuilt_with_new_offsets(wire, entry_format, version):
    """Kafka's legacy iterator does not require the inner magic to match the wrapper's; it
    rebuilds the set, so each produce appends at the next offsets and reads back whole."""
    for round_ in range(2):
        assert produce(wire, magic0_wrapper_of_magic1_messages(), version) == (ErrorCode.NONE, round_ * len(VALUES))
    records = [r for batch in MemoryRecords(bytes(fetch(wire, 0).records)) for r in batch]
    assert [(r.offset, r.key, r.value) for r in records] == [
        (round_ * len(VALUES) + i, b"k%d" % i, value) for round_ in range(2) for i, value in enumerate(VALUES)]


@pytest.mark.parametrize("entry_format", entry_formats.names(), indirect=True)
def test_a_magic0_wrapper_holding_magic1_messages_keeps_their_timestamps(wire, entry_format):
    """The inner magic-1 messages carry timestamps; Kafka keeps them, so every entry format
    serves them to readers of magic 1 and up (Fetch v0-1 readers get magic 0, which has none)."""
    assert produce(wire, magic0_wrapper_of_magic1_messages(), 0)[0] == ErrorCode.NONE
    assert produce(wire, magic0_wrapper_of_magic1_messages(2), 1)[0] == ErrorCode.NONE
    for version in (2, 4):
        records = [r for batch in MemoryRecords(bytes(fetch(wire, version).records)) for r in batch]
        assert [(r.offset, r.timestamp, r.value) for r in records] == [
            (round_ * len(VALUES) + i, 1_700_000_000_000 + i, value) for round_ in range(2)
            for i, value in enumerate(VALUES)], f"Fetch v{version}"
    old = [r for batch in MemoryRecords(bytes(fetch(wire, 0).records)) for r in batch]
    assert [(r.offset, r.value) for r in old] == [(i, VALUES[i % len(VALUES)]) for i in range(2 * len(VALUES))]
