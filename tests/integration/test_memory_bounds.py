"""Back-pressure keeps the broker's memory bounded: a flood of producers against a
small broker-wide request budget all complete with nothing lost, and the broker's RSS
stays under a bound."""
import threading

import confluent_kafka

from bench.workloads import memory_kib
from tests.support.clients import create_topic

PRODUCERS = 8
RECORDS = 4000
VALUE = 1024


def _flood(bootstrap: str, topic: str, index: int, failures: list) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                                         "message.timeout.ms": 120_000})
    errors = []
    for i in range(RECORDS):
        value = f"{index}:{i}:".encode().ljust(VALUE, b"x")
        while True:
            try:
                producer.produce(topic, value, on_delivery=lambda error, _m: error and errors.append(error))
                break
            except BufferError:
                producer.poll(0.1)
    left = producer.flush(180)
    if left or errors:
        failures.append(f"producer {index}: {left} undelivered, errors {errors[:3]}")


def test_a_flood_of_producers_under_a_small_request_budget_loses_nothing(broker_factory):
    broker = broker_factory(**{"queued.max.request.bytes": 256 * 1024,
                               "kgate.queued.max.request.bytes.per.connection": 128 * 1024})
    create_topic(broker.bootstrap, "flood", 4)
    failures = []
    threads = [threading.Thread(target=_flood, args=(broker.bootstrap, "flood", i, failures))
               for i in range(PRODUCERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert not any(thread.is_alive() for thread in threads) and failures == []

    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "flood-check",
                                         "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition("flood", p, 0) for p in range(4)])
    seen = set()
    for _ in range(600):  # bounded: at most 600 polls of up to 0.5 s
        for message in consumer.consume(5000, timeout=0.5):
            assert message.error() is None
            seen.add(message.value()[:16].split(b"x")[0])
        if len(seen) >= PRODUCERS * RECORDS:
            break
    consumer.close()
    assert len(seen) == PRODUCERS * RECORDS
    # 32 MB went through; a broker that buffered it all would pass this bound together with its baseline.
    assert memory_kib(broker.process.pid)["VmHWM"] < 400 * 1024
