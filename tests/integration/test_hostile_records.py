"""Hostile record data against a live broker: compression bombs, batches whose records
disagree with their header, garbage records. Each is refused for its partition alone
with Kafka's error, nothing is stored, the connection stays open, and the broker's
memory (VmHWM of the subprocess) and event loop (ApiVersions on another connection)
are not taken by it."""
import select
import struct
import zlib

import pytest
import zstandard
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest

from bench.side_by_side import memory_kib
from kgate.protocol.error_codes import ErrorCode
from tests.support.clients import create_topic
from tests.support.wire import Wire, encode_request, read_response
from tests.unit.record_batches import raw_batch, raw_record
from tests.unit.request_frames import produce_request

MIB = 1024 * 1024
BOMB_MIB = 256  # inflated size of each bomb: four times the default limit of 64 MiB
# What refusing a bomb may add to the broker's peak RSS; inflating it whole would add its size or more.
PEAK_GROWTH_MIB = 100


def _produce(wire: Wire, topic: str, records: bytes, version: int) -> int:
    response = wire.call(produce_request(topic, 0, records, version), version)
    (part,) = response.responses[0].partition_responses
    return part.error_code


def _log_end(wire: Wire, topic: str) -> int:
    part = ListOffsetsRequest.ListOffsetsTopic
    response = wire.call(ListOffsetsRequest(version=1, replica_id=-1, topics=[part(name=topic, partitions=[
        part.ListOffsetsPartition(partition_index=0, timestamp=-1)])]), 1)
    return response.topics[0].partitions[0].offset


def _answers_api_versions(wire: Wire) -> bool:
    return wire.call(ApiVersionsRequest(version=0), 0).error_code == ErrorCode.NONE


def _peak_mib(broker) -> float:
    return memory_kib(broker.process.pid)["VmHWM"] / 1024


def _zstd_bomb() -> bytes:
    """A magic-2 zstd batch of 256 records of 1 MiB of zeros: about 10 KiB on the wire."""
    compressor = zstandard.ZstdCompressor(level=3).compressobj()
    zeros = bytes(MIB)
    parts = [compressor.compress(raw_record(i, zeros)) for i in range(BOMB_MIB)]
    return raw_batch(b"", BOMB_MIB, "zstd", compressed=b"".join(parts) + compressor.flush())


def _legacy_head(value_parts, value_size: int) -> bytes:
    """An uncompressed magic-1 message up to its value, which is given in parts (streamed)."""
    fields = struct.pack(">bbqii", 1, 0, 1_700_000_000_000, -1, value_size)
    crc = zlib.crc32(fields)
    for part in value_parts():
        crc = zlib.crc32(part, crc)
    return struct.pack(">qiI", 0, 4 + len(fields) + value_size, crc) + fields


def _gzip_bomb_message_set() -> bytes:
    """A magic-1 set: one gzip wrapper whose inner message holds 256 MiB of zeros."""
    zeros = bytes(MIB)

    def value_parts():
        return (zeros for _ in range(BOMB_MIB))

    inner_head = _legacy_head(value_parts, BOMB_MIB * MIB)
    stream = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    compressed = stream.compress(inner_head) + b"".join(stream.compress(part) for part in value_parts())
    compressed += stream.flush()
    fields = struct.pack(">bbqii", 1, 1, 1_700_000_000_000, -1, len(compressed)) + compressed
    return struct.pack(">qiI", 0, 4 + len(fields), zlib.crc32(fields)) + fields


@pytest.mark.parametrize("entry_format", ["mixed_kafka"], indirect=True)
def test_a_zstd_bomb_to_a_mixed_kafka_topic_is_refused_in_bounded_memory(broker):
    create_topic(broker.bootstrap, "bombed", 1)
    with Wire(broker.bootstrap) as wire, Wire(broker.bootstrap) as other:
        assert _answers_api_versions(other)
        before = _peak_mib(broker)
        assert _produce(wire, "bombed", _zstd_bomb(), 7) == ErrorCode.MESSAGE_SIZE_TOO_LARGE
        assert _peak_mib(broker) - before < PEAK_GROWTH_MIB
        assert _answers_api_versions(other) and _answers_api_versions(wire)
        assert _log_end(wire, "bombed") == 0


def test_a_gzip_bomb_in_a_magic_1_message_set_is_refused_in_bounded_memory(broker):
    create_topic(broker.bootstrap, "legacy-bombed", 1)
    with Wire(broker.bootstrap) as wire:
        before = _peak_mib(broker)
        assert _produce(wire, "legacy-bombed", _gzip_bomb_message_set(), 2) == ErrorCode.MESSAGE_SIZE_TOO_LARGE
        assert _peak_mib(broker) - before < PEAK_GROWTH_MIB
        assert _answers_api_versions(wire)
        assert _log_end(wire, "legacy-bombed") == 0


@pytest.mark.parametrize("entry_format", ["kafka", "mixed_kafka"], indirect=True)
def test_a_batch_counting_one_record_but_holding_ten_is_refused(broker):
    create_topic(broker.bootstrap, "miscounted", 1)
    records = b"".join(raw_record(i, b"value %d" % i) for i in range(10))
    with Wire(broker.bootstrap) as wire:
        assert _produce(wire, "miscounted", raw_batch(records, 1), 7) == ErrorCode.INVALID_RECORD
        assert _produce(wire, "miscounted", raw_batch(records, 10), 7) == ErrorCode.NONE
        assert _log_end(wire, "miscounted") == 10


@pytest.mark.parametrize("entry_format", ["mixed_kafka"], indirect=True)
@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_garbage_records_to_a_mixed_kafka_topic_are_refused_and_the_connection_stays(broker, codec):
    create_topic(broker.bootstrap, "garbage", 1)
    garbage = bytes(range(7, 250, 3)) * 3
    with Wire(broker.bootstrap) as wire:
        assert _produce(wire, "garbage", raw_batch(garbage, 3, codec), 7) == ErrorCode.INVALID_RECORD
        assert _answers_api_versions(wire)
        assert _log_end(wire, "garbage") == 0


def test_down_converting_a_large_batch_for_fetch_v3_leaves_the_event_loop_serving(broker):
    """50,000 small records in one gzip batch, read by a Fetch v3 (down-converted to magic 1)."""
    create_topic(broker.bootstrap, "old-reader", 1)
    count = 50_000
    records = b"".join(raw_record(i, b"%08d" % i * 12) for i in range(count))
    with Wire(broker.bootstrap) as wire, Wire(broker.bootstrap) as other:
        assert _produce(wire, "old-reader", raw_batch(records, count, "gzip"), 7) == ErrorCode.NONE
        fetch = FetchRequest[3](replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=64 * MIB,
                                topics=[("old-reader", [(0, 0, 64 * MIB)])])
        wire.sock.sendall(encode_request(fetch, 3, correlation_id=99))
        answered_meanwhile = 0
        while not select.select([wire.sock], [], [], 0)[0]:
            assert _answers_api_versions(other)
            answered_meanwhile += 1
        response = read_response(wire.sock, ApiKey.Fetch, 3, 99)
        (part,) = response.responses[0].partitions
        assert part.error_code == ErrorCode.NONE and len(part.records) > 0
        # While the conversion ran (seconds of per-record work), other connections were answered.
        assert answered_meanwhile >= 5
