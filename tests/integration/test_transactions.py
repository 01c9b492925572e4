"""Transactions with confluent-kafka's transactional producer against a real broker.

Each test checks what a read_committed consumer sees against what was committed, and
what a read_uncommitted one sees against everything written.
"""
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kafka import KafkaProducer

from tests.support.clients import create_topic
from tests.support.transactions import TIMEOUT, read_to_end, transactional

SETTINGS = {"transaction.state.log.num.partitions": 4, "offsets.topic.num.partitions": 4,
            "group.initial.rebalance.delay.ms": 0,
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": 300}


def end_offsets(bootstrap, topic, partitions, isolation) -> list[int]:
    """ListOffsets latest per partition as a consumer of ``isolation`` asks it."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "offsets", "isolation.level": isolation})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT, cached=False)[1]
                for p in range(partitions)]
    finally:
        consumer.close()


def _begin_with(producer, topic: str, prefix: str, count: int, spread: bool = False) -> None:
    """Begin a transaction and produce ``prefix-0`` .. ``prefix-<count-1>`` in it (over partitions 0
    and 1 when ``spread``)."""
    producer.begin_transaction()
    for i in range(count):
        producer.produce(topic, value=b"%s-%d" % (prefix.encode(), i), **({"partition": i % 2} if spread else {}))


def test_committed_aborted_and_open_transactions(broker_factory):
    broker = broker_factory(**SETTINGS)
    create_topic(broker.bootstrap, "t", 2)
    producer = transactional(broker.bootstrap, "tx-basic")
    _begin_with(producer, "t", "committed", 10, spread=True)
    producer.commit_transaction(TIMEOUT)
    _begin_with(producer, "t", "aborted", 6, spread=True)
    producer.flush(TIMEOUT)  # stored, so the abort has data to mark
    producer.abort_transaction(TIMEOUT)
    _begin_with(producer, "t", "open", 4, spread=True)
    producer.flush(TIMEOUT)

    committed = sorted(b"committed-%d" % i for i in range(10))
    everything = committed + sorted([b"aborted-%d" % i for i in range(6)] + [b"open-%d" % i for i in range(4)])
    assert sorted(read_to_end(broker.bootstrap, "t", 2, "read_committed")) == committed
    assert sorted(read_to_end(broker.bootstrap, "t", 2, "read_uncommitted")) == sorted(everything)
    stable = end_offsets(broker.bootstrap, "t", 2, "read_committed")
    assert all(s < h for s, h in zip(stable, end_offsets(broker.bootstrap, "t", 2, "read_uncommitted"), strict=True))

    producer.commit_transaction(TIMEOUT)
    assert sorted(read_to_end(broker.bootstrap, "t", 2, "read_committed")) == sorted(
        committed + [b"open-%d" % i for i in range(4)])
    assert end_offsets(broker.bootstrap, "t", 2, "read_committed") == end_offsets(
        broker.bootstrap, "t", 2, "read_uncommitted")


def test_consume_transform_produce_commits_output_and_offsets_together(broker_factory):
    broker = broker_factory(**SETTINGS)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "in", 2)
    create_topic(bootstrap, "out", 2)
    feeder = Producer({"bootstrap.servers": bootstrap})
    for i in range(120):
        feeder.produce("in", value=b"%d" % i, partition=i % 2)
    assert feeder.flush(TIMEOUT) == 0

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ctp", "isolation.level": "read_committed",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe(["in"])
    producer = transactional(bootstrap, "tx-ctp")
    done, batches = 0, 0
    deadline = time.monotonic() + TIMEOUT
    try:
        while done < 120 and time.monotonic() < deadline:
            messages = [m for m in consumer.consume(25, timeout=0.5) if m.error() is None]
            if not messages:
                continue
            producer.begin_transaction()
            for message in messages:
                producer.produce("out", value=b"x" + message.value(), partition=message.partition())
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), TIMEOUT)
            batches += 1
            if batches == 2:  # one transaction aborted: its input is processed again
                producer.abort_transaction(TIMEOUT)
                for tp in consumer.committed(consumer.assignment(), timeout=TIMEOUT):
                    consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))
                continue
            producer.commit_transaction(TIMEOUT)
            done += len(messages)
        committed = consumer.committed([TopicPartition("in", p) for p in range(2)], timeout=TIMEOUT)
    finally:
        consumer.close()
    assert done == 120
    assert sorted(read_to_end(bootstrap, "out", 2, "read_committed")) == sorted(b"x%d" % i for i in range(120))
    assert [tp.offset for tp in committed] == end_offsets(bootstrap, "in", 2, "read_uncommitted") == [60, 60]


def test_a_second_producer_with_the_same_id_fences_the_first(broker_factory):
    broker = broker_factory(**SETTINGS)
    create_topic(broker.bootstrap, "z", 1)
    zombie = transactional(broker.bootstrap, "tx-zombie")
    _begin_with(zombie, "z", "zombie", 5)
    zombie.flush(TIMEOUT)

    successor = transactional(broker.bootstrap, "tx-zombie")  # aborts the zombie's open transaction
    _begin_with(successor, "z", "successor", 3)
    successor.commit_transaction(TIMEOUT)

    with pytest.raises(KafkaException) as refused:
        zombie.commit_transaction(TIMEOUT)
    assert refused.value.args[0].fatal() or refused.value.args[0].code() == KafkaError._FENCED
    assert sorted(read_to_end(broker.bootstrap, "z", 1, "read_committed")) == [b"successor-%d" % i for i in range(3)]
    assert len(read_to_end(broker.bootstrap, "z", 1, "read_uncommitted")) == 8


def test_a_broker_killed_mid_transaction_restarts_with_it_aborted_by_its_timeout(broker_factory):
    broker = broker_factory(**SETTINGS)
    create_topic(broker.bootstrap, "k", 2)
    producer = transactional(broker.bootstrap, "tx-kill", **{"transaction.timeout.ms": 3000})
    _begin_with(producer, "k", "kept", 8, spread=True)
    producer.commit_transaction(TIMEOUT)
    _begin_with(producer, "k", "lost", 8, spread=True)
    producer.flush(TIMEOUT)
    broker.kill()
    broker.restart()

    # The open transaction survives the restart as open (the LSO holds back) until its
    # timeout aborts it; then read_committed reads to the end and sees only the commit.
    deadline = time.monotonic() + TIMEOUT
    while end_offsets(broker.bootstrap, "k", 2, "read_committed") != end_offsets(
            broker.bootstrap, "k", 2, "read_uncommitted"):
        assert time.monotonic() < deadline, "the transaction open at the kill was never aborted"
        time.sleep(0.2)
    assert sorted(read_to_end(broker.bootstrap, "k", 2, "read_committed")) == sorted(
        b"kept-%d" % i for i in range(8))
    assert len(read_to_end(broker.bootstrap, "k", 2, "read_uncommitted")) == 16


def test_kafka_python_transactional_producer_commits_and_aborts(broker_factory):
    broker = broker_factory(**SETTINGS)
    create_topic(broker.bootstrap, "kp", 2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="tx-kafka-python")
    try:
        producer.init_transactions()
        for outcome, count in (("commit", 4), ("abort", 3)):
            producer.begin_transaction()
            for i in range(count):
                producer.send("kp", value=f"{outcome}-{i}".encode(), partition=i % 2)
            producer.flush(TIMEOUT)
            if outcome == "commit":
                producer.commit_transaction()
            else:
                producer.abort_transaction()
    finally:
        producer.close(timeout=TIMEOUT)
    assert sorted(read_to_end(broker.bootstrap, "kp", 2, "read_committed")) == [b"commit-%d" % i for i in range(4)]
    assert len(read_to_end(broker.bootstrap, "kp", 2, "read_uncommitted")) == 7
