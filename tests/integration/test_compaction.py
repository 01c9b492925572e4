"""Compacted topics: records without a key are refused as Kafka refuses them, and the log
cleaner keeps the latest record per key without changing an offset."""
import os
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka import KafkaError as ConfluentError
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import InvalidRecordError
from kafka.protocol.producer import ProduceRequest
from kafka.structs import TopicPartition as KTopicPartition

from kgate.protocol import conversion
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.record import Record
from tests.support.clients import create_topic
from tests.support.cluster import SESSION_TIMEOUT_MS, KgateCluster
from tests.support.member_process import wait_for
from tests.support.ports import free_ports
from tests.support.scrape import scrape, value
from tests.support.wire import Wire
from tests.support.zookeeper import ZooKeeperServer

COMPACT = {"cleanup.policy": "compact"}


def _produce_request(topic: str, records: bytes):
    data = ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=records)
    return ProduceRequest(transactional_id=None, acks=-1, timeout_ms=10_000,
                          topic_data=[ProduceRequest.TopicProduceData(name=topic, partition_data=[data])])


def _end_offset(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", [0, 4], ids=["plain", "zstd"])
def test_keyless_records_refuse_the_whole_batch_with_record_errors(broker, codec):
    create_topic(broker.bootstrap, "keys", 1, COMPACT)
    records = [Record(i, 1_700_000_000_000 + i, None if i in (1, 3) else b"k%d" % i, b"v", ()) for i in range(5)]
    with Wire(broker.bootstrap) as wire:
        answer = wire.call(_produce_request("keys", conversion.write(records, 2, codec)), 8)
        partition = answer.responses[0].partition_responses[0]
        assert partition.error_code == ErrorCode.INVALID_RECORD
        assert [e.batch_index for e in partition.record_errors] == [1, 3]
        assert all(e.batch_index_error_message.startswith("Compacted topic cannot accept message without key")
                   for e in partition.record_errors)
        assert partition.error_message.startswith("One or more records have been rejected")
        # Before v8 the answer carries the code alone; the keyed batch after it is stored at offset 0.
        refused = wire.call(_produce_request("keys", conversion.write(records, 2, codec)), 7)
        assert refused.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_RECORD
        keyed = [r._replace(key=b"k") for r in records]
        stored = wire.call(_produce_request("keys", conversion.write(keyed, 2, codec)), 8)
        assert stored.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        assert stored.responses[0].partition_responses[0].base_offset == 0
    assert _end_offset(broker.bootstrap, "keys") == 5


def test_legacy_set_without_keys_is_refused(broker):
    create_topic(broker.bootstrap, "legacy-keys", 1, COMPACT)
    records = [Record(i, 1_700_000_000_000, b"k" if i else None, b"v", ()) for i in range(3)]
    with Wire(broker.bootstrap) as wire:
        answer = wire.call(_produce_request("legacy-keys", conversion.write(records, 1, 1)), 2)
    assert answer.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_RECORD
    assert _end_offset(broker.bootstrap, "legacy-keys") == 0


def test_confluent_producer_gets_invalid_record(broker):
    create_topic(broker.bootstrap, "ck", 1, COMPACT)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50, "acks": "all"})
    errors = []
    for i in range(10):
        producer.produce("ck", key=None if i == 4 else b"k%d" % i, value=b"v",
                         on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(30) == 0
    assert len(errors) == 10
    assert {err.code() for err in errors if err is not None} == {ConfluentError.INVALID_RECORD}
    assert _end_offset(broker.bootstrap, "ck") == 10 - sum(err is not None for err in errors)


def test_kafka_python_producer_gets_invalid_record(broker):

    create_topic(broker.bootstrap, "kp", 1, COMPACT)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", retries=0)
    try:
        with pytest.raises(InvalidRecordError):
            producer.send("kp", key=None, value=b"v").get(timeout=30)
        producer.send("kp", key=b"k", value=b"v").get(timeout=30)
    finally:
        producer.close(timeout=10)
    assert _end_offset(broker.bootstrap, "kp") == 1


def test_pulsar_format_refuses_compaction(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    future = admin.create_topics([NewTopic("pc", 1, 1, config={"cleanup.policy": "compact",
                                                               "kgate.entry.format": "pulsar"})])["pc"]
    with pytest.raises(Exception) as refused:
        future.result(timeout=30)
    assert refused.value.args[0].code() == ConfluentError.INVALID_CONFIG


def _ledger_bytes(broker) -> int:
    directory = os.path.join(broker.data_dir, "ledgers")
    return sum(os.path.getsize(os.path.join(directory, name)) for name in os.listdir(directory))


def _read_to_end(bootstrap: str, topic: str) -> list:
    """Every record from the log start to the end, with a real consumer."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "fetch.max.bytes": 8 << 20})
    try:
        end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list = []
        deadline = time.monotonic() + 60
        while (not out or out[-1].offset() < end - 1) and time.monotonic() < deadline:
            for message in consumer.consume(10_000, timeout=0.5):
                assert not message.error(), message.error()
                out.append(message)
        assert out and out[-1].offset() == end - 1, "the consumer did not reach the end of the log"
        return out
    finally:
        consumer.close()


RECORDS = 1_000_000
KEYS = 10_000
TOMBSTONED = 100


def _key(i: int) -> bytes:
    return b"k%05d" % (i % KEYS)


def test_a_million_records_over_ten_thousand_keys_compact_to_the_latest_values(broker_factory):
    """The issue's test: a million records over 10,000 keys, the last record of 100 keys a
    tombstone; the cleaner leaves exactly the latest value of every other key, at its own
    offset, the tombstones go once delete.retention.ms has passed, and the log shrinks."""
    broker = broker_factory(**{"log.cleaner.backoff.ms": 100, "kgate.metrics.listener": "127.0.0.1:0"})
    create_topic(broker.bootstrap, "million", 1, {"cleanup.policy": "compact", "segment.bytes": str(1 << 19),
                                                  "delete.retention.ms": "2000"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50, "batch.size": 1 << 20,
                         "queue.buffering.max.messages": 200_000, "acks": "all", "compression.type": "lz4"})
    failures = []

    def delivered(err, _msg):
        if err is not None:
            failures.append(err)

    tombstones_from = RECORDS - KEYS
    for i in range(RECORDS):
        payload = None if tombstones_from <= i < tombstones_from + TOMBSTONED else b"%07d" % i
        while True:
            try:
                producer.produce("million", key=_key(i), value=payload, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0  # room in librdkafka's queue for the large record below
    # A record larger than a ledger rolls at (incompressible), then one more, seal the ledger
    # holding the last round.
    producer.produce("million", key=b"seal", value=os.urandom(600_000))
    assert producer.flush(120) == 0
    producer.produce("million", key=b"seal", value=b"end")
    assert producer.flush(30) == 0 and not failures, failures[:1]
    produced_bytes = _ledger_bytes(broker)

    expected = {_key(i): b"%07d" % i for i in range(tombstones_from + TOMBSTONED, RECORDS)}
    expected[b"seal"] = b"end"

    def compacted():
        records = _read_to_end(broker.bootstrap, "million")
        latest = {r.key(): r.value() for r in records}
        return records if latest == expected else None

    records = wait_for(compacted, timeout=120, what="the compacted log", interval=0.5)
    offsets = [r.offset() for r in records]
    assert offsets == sorted(set(offsets)), "offsets must only increase"
    assert [r.offset() for r in records if r.key() != b"seal"] == [
        tombstones_from + TOMBSTONED + i for i in range(KEYS - TOMBSTONED)], "each kept record at its own offset"
    assert len(records) == len(expected) + 1  # the sealing record's predecessor stays, superseded but open
    assert _ledger_bytes(broker) < produced_bytes / 5, (produced_bytes, _ledger_bytes(broker))
    samples = scrape(broker.metrics_url)
    assert value(samples, "kgate_log_cleaner_runs_total") >= 2  # compaction, then the tombstones' pass
    assert value(samples, "kgate_log_cleaner_bytes_read_total") > produced_bytes / 2
    assert value(samples, "kgate_log_cleaner_records_removed_total") >= RECORDS - KEYS
    assert 0 <= value(samples, "kgate_log_cleaner_dirty_ratio", topic="million", partition="0") < 1
    assert "kgate_log_cleaner_max_dirty_percent" in {name for name, _labels in samples}


def _produce_rounds(bootstrap: str, topic: str, rounds: range, keys: int, seal: bool = True) -> None:
    """``keys`` keys per round, value ``r<round>``; then a record larger than a ledger and one
    more, so every round lies in sealed ledgers."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all",
                         "message.timeout.ms": 60_000, "topic.metadata.refresh.interval.ms": 1000})
    for round_ in rounds:
        for i in range(keys):
            producer.produce(topic, key=b"k%d" % i, value=b"r%d" % round_)
        producer.poll(0)
    if seal:
        assert producer.flush(60) == 0
        producer.produce(topic, key=b"seal", value=os.urandom(SMALL_LEDGER + 1))
        assert producer.flush(60) == 0
        producer.produce(topic, key=b"seal", value=b"end")
    assert producer.flush(60) == 0


SMALL_LEDGER = 64 * 1024


def _latest_only(bootstrap: str, topic: str, round_: int, keys: int):
    """The records once every key has only its latest value left (the sealing record's two aside)."""
    def check():
        records = _read_to_end(bootstrap, topic)
        kept = [(r.key(), r.value()) for r in records if r.key() != b"seal"]
        return records if kept == [(b"k%d" % i, b"r%d" % round_) for i in range(keys)] else None
    return check


@pytest.mark.parametrize("entry_format", ["kafka", "mixed_kafka"], indirect=True)
def test_compact_delete_topic_compacts_and_a_restarted_broker_serves_what_was_swapped_in(broker_factory):
    broker = broker_factory(**{"log.cleaner.backoff.ms": 100})
    create_topic(broker.bootstrap, "cd", 1, {"cleanup.policy": "compact,delete", "segment.bytes": str(SMALL_LEDGER),
                                             "compression.type": "gzip"})
    _produce_rounds(broker.bootstrap, "cd", range(3), 500)
    records = wait_for(_latest_only(broker.bootstrap, "cd", 2, 500), 60, "the compacted log")
    before = [(r.offset(), r.key(), r.value()) for r in records]
    broker.kill()
    broker.start()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, group_id=None)
    try:
        consumer.assign([KTopicPartition("cd", 0)])
        consumer.seek_to_beginning()
        after: list = []
        deadline = time.monotonic() + 30
        while len(after) < len(before) and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                after.extend((m.offset, m.key, m.value) for m in batch)
    finally:
        consumer.close()
    assert after == before


def test_only_the_owner_compacts_and_a_new_owner_serves_and_continues_it(tmp_path):
    zookeeper = ZooKeeperServer(str(tmp_path / "zookeeper"), free_ports(1)[0]).start().wait_serving()
    cluster = KgateCluster(str(tmp_path), zookeeper.address, "/kgate", 2,
                           **{"log.cleaner.backoff.ms": 100, "kgate.metrics.listener": "127.0.0.1:0"})
    try:
        cluster.start()
        create_topic(cluster.bootstrap, "owned", 1, {"cleanup.policy": "compact", "segment.bytes": str(SMALL_LEDGER)})
        owner = cluster.wait_leaders("owned", 1, {0, 1})[0]
        other = 1 - owner
        _produce_rounds(cluster.bootstrap, "owned", range(3), 300)
        records = wait_for(_latest_only(cluster.bootstrap, "owned", 2, 300), 60, "the compacted log")
        assert value(scrape(cluster.brokers[owner].metrics_url), "kgate_log_cleaner_runs_total") >= 1
        assert value(scrape(cluster.brokers[other].metrics_url), "kgate_log_cleaner_runs_total") == 0
        cluster.brokers[owner].kill()
        cluster.wait_leaders("owned", 1, {other}, timeout=SESSION_TIMEOUT_MS / 1000 + 30)
        survivor = cluster.brokers[other].bootstrap
        assert [(r.offset(), r.value()) for r in _read_to_end(survivor, "owned")] == [
            (r.offset(), r.value()) for r in records]
        _produce_rounds(survivor, "owned", range(3, 5), 300)
        wait_for(_latest_only(survivor, "owned", 4, 300), 60, "the new owner's compaction")
        assert value(scrape(cluster.brokers[other].metrics_url), "kgate_log_cleaner_runs_total") >= 1
    finally:
        cluster.stop()
        zookeeper.stop()
