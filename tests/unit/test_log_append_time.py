"""LogAppendTime stamping: batches and legacy messages dated by the broker, as Kafka's
readers (kafka-python's, here) then read them."""
import pytest
from kafka.record import MemoryRecords
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kgate.protocol import message_set, record_batch
from kgate.storage.entry_formats import ProducedRecords, by_name
from tests.unit.record_batches import CODECS, build_batch, compressible_values, read_batch

NOW = 1_800_000_000_123


@pytest.mark.parametrize("codec", ["none", "gzip", "zstd"])
def test_a_stamped_batch_reads_every_record_at_the_append_time(codec):
    data = build_batch(compressible_values(4), codec=codec, timestamps=[5, 9, 7, 6])
    produced = ProducedRecords.of_batch(memoryview(data), record_batch.validate(data)).stamped(NOW)
    assert produced.max_timestamp == NOW and produced.batch.max_timestamp == NOW
    assert record_batch.validate(produced.data) == produced.batch  # the CRC was computed again
    batch, records = read_batch(bytes(produced.data))
    assert batch.timestamp_type == 1 and batch.compression_type == CODECS[codec]
    assert [r.timestamp for r in records] == [NOW] * 4
    assert [r.value for r in records] == compressible_values(4)


def test_the_stored_entry_keeps_the_stamp_and_the_producer_fields():
    data = build_batch([b"a", b"b"], producer_id=7, producer_epoch=1, base_sequence=3)
    produced = ProducedRecords.of_batch(memoryview(data), record_batch.validate(data)).stamped(NOW)
    stored = b"".join(bytes(part) for part in by_name("kafka").encode(produced, 40, 2, None))
    header = record_batch.validate(stored)
    assert (header.base_offset, header.max_timestamp, header.producer_id, header.base_sequence) == (40, NOW, 7, 3)
    assert header.attributes & record_batch.TIMESTAMP_TYPE_FLAG


def _legacy(values, magic, codec=0):
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i, value in enumerate(values):
        builder.append(i, timestamp=1_000 + i if magic else None, key=None, value=value)
    return bytes(builder.build())


@pytest.mark.parametrize("codec", [0, 1])
def test_magic_1_messages_and_wrappers_get_the_time_and_the_flag(codec):
    data = _legacy([b"x", b"y", b"z"], 1, codec)
    produced = ProducedRecords.of_message_set(memoryview(data), message_set.parse(data)).stamped(NOW)
    assert produced.max_timestamp == NOW
    stored = by_name("kafka").encode(produced, 10, 0, None)[0]
    reparsed = message_set.parse(stored)  # every CRC checked
    assert all(entry.message.attributes & message_set.LOG_APPEND_TIME_FLAG for entry in reparsed.shallow)
    assert [m.timestamp for _, m in reparsed.messages()] == [NOW] * 3
    batches = MemoryRecords(bytes(stored))
    records = [record for batch in iter(batches.next_batch, None) for record in batch]
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in records] == [(10, NOW, 1), (11, NOW, 1), (12, NOW, 1)]


def test_magic_0_has_no_timestamp_to_stamp():
    data = _legacy([b"x"], 0)
    produced = ProducedRecords.of_message_set(memoryview(data), message_set.parse(data)).stamped(NOW)
    assert bytes(produced.data) == data
    assert produced.max_timestamp == message_set.NO_TIMESTAMP


@pytest.mark.parametrize("legacy", [False, True])
def test_mixed_kafka_rebuilds_a_stamped_batch_at_the_append_time(legacy):
    """Recompressed (or up-converted from magic 1), the stored batch keeps the broker's time and type."""
    values = compressible_values(2)
    if legacy:
        data = _legacy(values, 1)
        produced = ProducedRecords.of_message_set(memoryview(data), message_set.parse(data))
    else:
        data = build_batch(values)
        produced = ProducedRecords.of_batch(memoryview(data), record_batch.validate(data))
    stored = bytes(by_name("mixed_kafka").encode(produced.stamped(NOW), 7, 0, CODECS["gzip"])[0])
    batch, records = read_batch(stored)
    assert (batch.timestamp_type, batch.compression_type, batch.base_offset) == (1, CODECS["gzip"], 7)
    assert [(r.timestamp, r.value) for r in records] == [(NOW, value) for value in values]
