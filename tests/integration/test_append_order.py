"""A producer's records keep their order in a partition, also while its ledger rolls over.

librdkafka pipelines produce requests on one connection (max.in.flight defaults to a
million without idempotence); Kafka handles a connection's requests one at a time, so
the records of one producer land in the order it sent them. Requests that arrived while
a ledger was rolling over used to be appended after later ones that found the new ledger
already open: a block of records at offsets out of production order.
"""
import pytest
from confluent_kafka import Consumer, Producer

from tests.support.clients import create_topic

COUNT = 4000


@pytest.mark.parametrize("cleanup_policy", ["delete", "compact"])
def test_pipelined_records_keep_their_order_across_ledger_rolls(broker, cleanup_policy):
    topic = f"order-{cleanup_policy}"
    create_topic(broker.bootstrap, topic, 1, {"segment.ms": "100", "segment.bytes": "16384",
                                             "cleanup.policy": cleanup_policy})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 10, "message.max.bytes": 6000,
                         "enable.idempotence": False, "retries": 0, "acks": "all"})
    offsets: dict[int, int] = {}
    errors = []

    def delivered(err, msg):
        if err is not None:
            errors.append(err)
        else:
            offsets[int(msg.value().split(b":")[0])] = msg.offset()

    for n in range(COUNT):
        producer.produce(topic, key=f"k{n % 50}".encode(), value=f"{n}:".encode() + b"x" * 300, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert errors == []
    assert len(offsets) == COUNT
    by_number = [offsets[n] for n in range(COUNT)]
    overtaken = [n for n in range(1, COUNT) if by_number[n] < by_number[n - 1]]
    assert overtaken == [], f"{len(overtaken)} records acknowledged below their predecessor, first at {overtaken[:3]}"

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    read = []
    try:
        while len(read) < COUNT:
            message = consumer.poll(30)
            assert message is not None, f"read {len(read)} of {COUNT}"
            assert message.error() is None, message.error()
            read.append(int(message.value().split(b":")[0]))
    finally:
        consumer.close()
    assert read == sorted(read), "a consumer reads the records in the order they were produced"
