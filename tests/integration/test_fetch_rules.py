"""Fetch answers librdkafka must be able to parse: a deleted topic's partition comes back
with empty records (never null), and a response stays within the request's max_bytes
except for the first batch of the first partition holding data (Kafka's rule)."""
import logging
import os
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.support.clients import create_topic

TIMEOUT = 30


class _Captured(logging.Handler):
    """librdkafka's log lines, as handed to the client's ``logger``."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def _logger(name: str) -> tuple[logging.Logger, _Captured]:
    logger = logging.getLogger(name)
    logger.propagate = False
    captured = _Captured()
    logger.addHandler(captured)
    return logger, captured


def _produce(bootstrap: str, topic: str, values: list[bytes], partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for value in values:
        producer.produce(topic, value=value, partition=partition)
    assert producer.flush(TIMEOUT) == 0


def _consume_until(consumer: Consumer, wanted, timeout: float = TIMEOUT) -> list:
    """Messages until ``wanted(messages)`` holds or ``timeout`` passes."""
    out: list = []
    deadline = time.monotonic() + timeout
    while not wanted(out) and time.monotonic() < deadline:
        out.extend(m for m in consumer.consume(100, timeout=0.2) if not m.error())
    return out


def test_a_deleted_topic_does_not_stop_the_other_topics_of_the_fetch(broker):
    """One fetch reads a kept and a doomed topic; after the doomed one is deleted the kept
    topic's new records still arrive and librdkafka never fails to parse a response."""
    create_topic(broker.bootstrap, "kept", 1)
    create_topic(broker.bootstrap, "doomed", 1)
    _produce(broker.bootstrap, "kept", [b"k-before"])
    _produce(broker.bootstrap, "doomed", [b"d-before"])
    logger, captured = _logger("deleted-topic-consumer")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "logger": logger,
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    try:
        consumer.assign([TopicPartition("kept", 0, 0), TopicPartition("doomed", 0, 0)])
        before = _consume_until(consumer, lambda got: len(got) >= 2)
        assert sorted(m.value() for m in before) == [b"d-before", b"k-before"]

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.delete_topics(["doomed"])["doomed"].result(TIMEOUT)
        after = [b"k-after-%d" % i for i in range(20)]
        for value in after:  # one produce per round trip, so several fetches carry the deleted partition
            _produce(broker.bootstrap, "kept", [value])
        got = _consume_until(consumer, lambda got: len(got) >= len(after))
        assert [m.value() for m in got] == after
    finally:
        consumer.close()
    assert not [line for line in captured.lines if "MessageSetSize" in line], captured.lines[:5]


BATCH_VALUE = 900 * 1024  # one record per batch: ~921 KB on the wire
FETCH_MAX_BYTES = 1_000_000


def test_a_response_goes_past_max_bytes_by_the_first_batch_only(broker):
    """Four partitions each holding one ~921 KB batch, read with fetch.max.bytes 1,000,000 and
    max.partition.fetch.bytes 20 MB: each response carries one batch, so librdkafka (whose
    receive limit follows fetch.max.bytes) reads all four instead of refusing the answer."""
    create_topic(broker.bootstrap, "big", 4)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0})
    for partition in range(4):
        producer.produce("big", value=os.urandom(BATCH_VALUE), partition=partition)
    assert producer.flush(TIMEOUT) == 0
    logger, captured = _logger("max-bytes-consumer")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "logger": logger,
                         "enable.auto.commit": False, "fetch.max.bytes": FETCH_MAX_BYTES,
                         "receive.message.max.bytes": FETCH_MAX_BYTES + 512,
                         "max.partition.fetch.bytes": 20 * 1024 * 1024})
    try:
        consumer.assign([TopicPartition("big", p, 0) for p in range(4)])
        got = _consume_until(consumer, lambda got: len(got) >= 4)
    finally:
        consumer.close()
    assert sorted(m.partition() for m in got) == [0, 1, 2, 3], captured.lines[:5]
    assert not [line for line in captured.lines if "Invalid response size" in line], captured.lines[:5]
