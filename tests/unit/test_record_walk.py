"""The record walk: a magic-2 batch's records must agree with its header (count, offset
deltas, lengths) through decompression, and nothing but InvalidBatch comes out of it."""
import struct
import zlib

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from kgate.protocol import _record_span, inflate, record_walk
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.record_batch import InvalidBatch, validate
from tests.unit import record_walk_reference
from tests.unit.record_batches import CODECS, raw_batch, raw_record, zigzag

LIMIT = inflate.DEFAULT_LIMIT


def _check(batch: bytes, limit: int = LIMIT) -> None:
    record_walk.check(batch, validate(batch), limit)


def _refused(batch: bytes, limit: int = LIMIT) -> InvalidBatch:
    with pytest.raises(InvalidBatch) as raised:
        _check(batch, limit)
    return raised.value


def _records(count: int, value_size: int = 10) -> bytes:
    return b"".join(raw_record(i, b"v" * value_size) for i in range(count))


@pytest.mark.parametrize("codec", CODECS)
def test_batches_real_producers_make_pass(codec):
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=CODECS[codec], is_transactional=False,
                                        producer_id=7, producer_epoch=0, base_sequence=0, batch_size=1 << 22)
    for i in range(300):  # offset deltas and timestamp deltas past one varint byte
        builder.append(i, timestamp=1_700_000_000_000 + 1000 * i, key=None if i % 3 else b"key-%d" % i,
                       value=None if i % 7 == 0 else b"x" * (i * 11 % 500),
                       headers=[("h", b"1"), ("empty", None)] if i % 5 == 0 else [])
    _check(bytes(builder.build()))


@pytest.mark.parametrize("codec", CODECS)
def test_a_header_counting_one_record_over_ten_is_refused(codec):
    assert _refused(raw_batch(_records(10), 1, codec)).code == ErrorCode.INVALID_RECORD


@pytest.mark.parametrize("codec", CODECS)
def test_a_header_counting_ten_records_over_nine_is_refused(codec):
    assert _refused(raw_batch(_records(9), 10, codec)).code == ErrorCode.INVALID_RECORD


@pytest.mark.parametrize("codec", CODECS)
def test_offset_deltas_out_of_order_are_refused(codec):
    records = raw_record(0, b"a") + raw_record(2, b"b") + raw_record(1, b"c")
    assert "offset delta" in _refused(raw_batch(records, 3, codec)).message


def test_a_key_running_past_its_record_is_refused():
    body = b"\0" + zigzag(0) + zigzag(0) + zigzag(50) + b"short" + zigzag(-1) + zigzag(0)
    assert _refused(raw_batch(zigzag(len(body)) + body, 1)).code == ErrorCode.INVALID_RECORD


def test_a_record_longer_than_its_fields_is_refused():
    body = b"\0" + zigzag(0) + zigzag(0) + zigzag(-1) + zigzag(1) + b"v" + zigzag(0) + b"pad"
    assert "fields take" in _refused(raw_batch(zigzag(len(body)) + body, 1)).message


def test_headers_are_walked_and_a_negative_header_key_is_refused():
    header = zigzag(1) + b"k" + zigzag(-1)
    good = b"\0" + zigzag(0) + zigzag(0) + zigzag(-1) + zigzag(-1) + zigzag(1) + header
    _check(raw_batch(zigzag(len(good)) + good, 1))
    bad = b"\0" + zigzag(0) + zigzag(0) + zigzag(-1) + zigzag(-1) + zigzag(1) + zigzag(-1) + zigzag(-1)
    assert "header key" in _refused(raw_batch(zigzag(len(bad)) + bad, 1)).message


@pytest.mark.parametrize("codec", ["gzip", "zstd", "lz4"])
def test_a_record_spanning_inflated_chunks_is_walked(codec):
    big = inflate.CHUNK * 3 + 17
    records = raw_record(0, b"a") + raw_record(1, b"z" * big) + raw_record(2, b"b")
    _check(raw_batch(records, 3, codec))


def test_a_compression_bomb_stops_at_the_limit_without_inflating_it_all():
    """256 MiB of records behind a few hundred KiB of gzip: refused once 1 MiB is passed."""
    record = raw_record(0, bytes(1024 * 1024))
    stream = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    compressed = b"".join(stream.compress(record) for _ in range(256)) + stream.flush()
    walked = record_walk.Walked()
    batch = raw_batch(b"", 256, "gzip", compressed=compressed)
    with pytest.raises(InvalidBatch) as raised:
        for _ in record_walk.walk(batch, validate(batch), 1024 * 1024, walked):
            pass
    assert raised.value.code == ErrorCode.MESSAGE_SIZE_TOO_LARGE
    assert walked.inflated <= 1024 * 1024 + inflate.CHUNK


def test_the_walk_yields_between_slices():
    count = record_walk.SLICE_RECORDS * 3
    batch = raw_batch(_records(count), count)
    assert sum(1 for _ in record_walk.walk(batch, validate(batch), LIMIT)) == 2


def _with_crc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return bytes(batch)


@settings(max_examples=300, deadline=None)
@given(records=st.binary(max_size=400), count=st.integers(1, 50), codec=st.sampled_from(list(CODECS)))
def test_any_record_bytes_give_a_verdict_or_invalid_batch(records, count, codec):
    try:
        _check(raw_batch(records, count, codec))
    except InvalidBatch:
        pass


@settings(max_examples=300, deadline=None)
@given(data=st.data(), codec=st.sampled_from(list(CODECS)))
def test_a_real_batch_with_bytes_changed_gives_a_verdict_or_invalid_batch(data, codec):
    batch = bytearray(raw_batch(_records(20, 30), 20, codec))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(61, len(batch) - 1))
        batch[at] = data.draw(st.integers(0, 255))
    try:
        _check(_with_crc(batch))
    except InvalidBatch:
        pass


@settings(max_examples=300, deadline=None)
@given(payload=st.binary(max_size=300), count=st.integers(1, 20), codec=st.sampled_from(["gzip", "snappy", "lz4",
                                                                                            "zstd"]))
def test_any_compressed_payload_gives_a_verdict_or_invalid_batch(payload, count, codec):
    """What a codec library raises on garbage (zlib.error, ZstdError, RuntimeError...) never escapes."""
    try:
        _check(raw_batch(b"", count, codec, compressed=payload))
    except InvalidBatch as refused:
        assert refused.code in (ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD, ErrorCode.MESSAGE_SIZE_TOO_LARGE)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_a_truncated_compressed_payload_is_refused(codec):
    batch = raw_batch(_records(50, 100), 50, codec)
    records = batch[61:]
    with pytest.raises(InvalidBatch):
        _check(raw_batch(b"", 50, codec, compressed=records[:len(records) // 2]))


@settings(max_examples=2000, deadline=None)
@given(data=st.data())
def test_the_compiled_loop_agrees_with_the_reference_walk(data):
    """Same verdict, same place, same words as record_walk_reference on any bytes, mostly near-valid ones."""
    records = bytearray(_records(data.draw(st.integers(0, 8)), data.draw(st.integers(0, 200))))
    for _ in range(data.draw(st.integers(0, 4))):
        if records and data.draw(st.booleans()):
            records[data.draw(st.integers(0, len(records) - 1))] = data.draw(st.integers(0, 255))
        else:
            records[len(records):] = data.draw(st.binary(min_size=1, max_size=12))
    cut = data.draw(st.integers(0, len(records)))
    stop = data.draw(st.integers(0, 10))
    compiled = _record_span.span(bytes(records[:cut]), 0, 0, stop)
    reference = record_walk_reference.span(records[:cut], 0, 0, stop)
    assert _verdict(compiled) == _verdict(reference)


def _verdict(walked: tuple[int, int, str | None]) -> tuple:
    """Where a walk stopped and why; after a fault the caller refuses the batch, wherever the walk was."""
    pos, index, problem = walked
    return (index, problem) if problem else (pos, index)


@pytest.mark.parametrize("field", ["length", "timestamp delta", "offset delta", "key"])
def test_varints_longer_than_kafka_allows_are_refused_by_both(field):
    overlong = b"\x80" * 10 + b"\x00"
    record = {"length": overlong,
              "timestamp delta": zigzag(40) + b"\x00" + overlong,
              "offset delta": zigzag(40) + b"\x00\x00" + overlong,
              "key": zigzag(40) + b"\x00\x00\x00" + overlong}[field] + b"\x00" * 40
    verdict = _verdict(_record_span.span(record, 0, 0, 1))
    assert verdict == _verdict(record_walk_reference.span(record, 0, 0, 1))
    assert "is longer than" in str(verdict[-1]), verdict
