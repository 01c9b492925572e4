"""Magic-2 batch header validation and offset assignment, on batches kafka-python built."""
import struct

import pytest
from crc32c import crc32c
from hypothesis import given
from hypothesis import strategies as st

from kgate.protocol.record_batch import (
    CRC_START,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    InvalidBatch,
    assigned_prefix,
    iter_headers,
    validate,
)
from tests.unit.record_batches import BASE_TIMESTAMP, CODECS, build_batch, compressible_values, read_batch

TIMESTAMPS = [BASE_TIMESTAMP + d for d in (5, 1, 9, 3, 7)]  # the maximum is not the last one
PRODUCER = {"producer_id": 4321, "producer_epoch": 3, "base_sequence": 17}


def _batch(codec: str) -> bytes:
    return build_batch(compressible_values(5), codec, timestamps=TIMESTAMPS, **PRODUCER)


BATCHES = {codec: _batch(codec) for codec in CODECS}


def _error(data) -> str | None:
    try:
        validate(data)
    except InvalidBatch as exc:
        return exc.code.name
    return None


def _with_crc_fixed(data: bytearray) -> bytes:
    struct.pack_into(">I", data, CRC_START - 4, crc32c(bytes(data[CRC_START:])))
    return bytes(data)


@pytest.mark.parametrize("codec", CODECS)
def test_validate_reads_the_header(codec):
    data = BATCHES[codec]
    header = validate(data)
    kafka_batch, records = read_batch(data)
    assert header.compression == CODECS[codec] == kafka_batch.compression_type
    assert (header.base_offset, header.magic, header.partition_leader_epoch) == (0, 2, 0)
    assert header.batch_length == len(data) - LOG_OVERHEAD and header.size == len(data)
    assert header.crc == kafka_batch.crc
    assert header.record_count == 5 and header.last_offset_delta == 4 and header.last_offset == 4
    assert header.base_timestamp == TIMESTAMPS[0]
    assert header.max_timestamp == max(TIMESTAMPS) == max(r.timestamp for r in records)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4321, 3, 17)
    assert header.last_sequence == 21
    assert not header.is_transactional and not header.is_control


def test_validate_at_an_offset_into_a_buffer():
    data = b"\xaa" * 7 + BATCHES["none"] + BATCHES["gzip"]
    assert validate(data, 7).size == len(BATCHES["none"])
    assert validate(data, 7 + len(BATCHES["none"])).compression == 1


def test_any_flipped_byte_from_magic_on_is_corrupt_message():
    """CRC-32C catches every single-byte error; Kafka checks the CRC before anything it covers."""
    wrong = {}
    for data in BATCHES.values():
        for index in range(MAGIC_OFFSET, len(data)):
            for mask in (0x01, 0x80, 0xFF):
                flipped = bytearray(data)
                flipped[index] ^= mask
                error = _error(flipped)
                if error != "CORRUPT_MESSAGE":
                    wrong.setdefault(index, set()).add(error)
    assert not wrong, f"flipped byte index -> errors answered instead of CORRUPT_MESSAGE: {wrong}"


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_every_truncation_is_refused(codec):
    data = BATCHES[codec]
    assert {_error(data[:cut]) for cut in range(len(data))} == {"CORRUPT_MESSAGE"}


@pytest.mark.parametrize("batch_length", [-1, 0, HEADER_SIZE - LOG_OVERHEAD - 1, 2**31 - 1])
def test_batch_length_that_does_not_fit_is_refused(batch_length):
    data = bytearray(BATCHES["lz4"])
    struct.pack_into(">i", data, 8, batch_length)
    assert _error(data) == "CORRUPT_MESSAGE"


def test_length_one_past_the_bytes_sent_is_refused():
    data = bytearray(BATCHES["none"])
    struct.pack_into(">i", data, 8, len(data) - LOG_OVERHEAD + 1)
    assert _error(data) == "CORRUPT_MESSAGE"


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_is_refused(codec_id):
    data = bytearray(BATCHES["none"])
    data[CRC_START + 1] = (data[CRC_START + 1] & ~0x07) | codec_id
    assert _error(_with_crc_fixed(data)) == "CORRUPT_MESSAGE"


@pytest.mark.parametrize("count,last_delta", [(0, -1), (5, 3), (-1, 4)])
def test_inconsistent_record_count_with_a_valid_crc_is_invalid_record(count, last_delta):
    data = bytearray(BATCHES["none"])
    struct.pack_into(">i", data, 23, last_delta)
    struct.pack_into(">i", data, HEADER_SIZE - 4, count)
    assert _error(_with_crc_fixed(data)) == "INVALID_RECORD"


@given(codec=st.sampled_from(list(CODECS)), base=st.integers(0, 2**62), epoch=st.integers(-1, 2**31 - 1))
def test_assigned_prefix_keeps_the_batch_readable(codec, base, epoch):
    data = BATCHES[codec]
    header = validate(data)
    stored = assigned_prefix(header, base, epoch) + data[LOG_OVERHEAD + 4:]
    assert len(stored) == len(data)
    rewritten = validate(stored)
    assert (rewritten.base_offset, rewritten.partition_leader_epoch, rewritten.crc) == (base, epoch, header.crc)
    kafka_batch, records = read_batch(stored)
    assert kafka_batch.base_offset == base
    assert [r.offset for r in records] == [base + i for i in range(5)]
    assert [r.value for r in records] == compressible_values(5)
    assert [r.timestamp for r in records] == TIMESTAMPS


def test_iter_headers_stops_at_a_partial_batch():
    data = BATCHES["gzip"] + BATCHES["snappy"] + BATCHES["none"][:100]
    found = [(pos, h.compression) for pos, h in iter_headers(data)]
    assert found == [(0, 1), (len(BATCHES["gzip"]), 2)]
