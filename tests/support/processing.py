"""Driving kgate.processing in tests: keyed records in, a processor run until a condition, commits read back."""
import asyncio
import time

from confluent_kafka import Consumer, Producer, TopicPartition

BROKER_SETTINGS = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 1000}
"""A group forms at once, and a killed member leaves within its (short) session timeout."""
CONSUMER_CONFIG = {"auto.offset.reset": "earliest", "session.timeout.ms": 3000, "heartbeat.interval.ms": 500}


def key_of(i: int, keys: int) -> bytes:
    return b"key-%d" % (i % keys)


def produce_keyed(bootstrap: str, topic: str, count: int, keys: int, value_size: int = 0) -> None:
    """Record ``i`` has key ``key-<i mod keys>`` (one partition per key, by the default
    partitioner) and a value starting with ``i``, padded to ``value_size``."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    failures = []
    for i in range(count):
        while True:
            try:
                producer.produce(topic, key=key_of(i, keys), value=(b"%d " % i).ljust(value_size, b"x"),
                                 on_delivery=lambda err, _m: err and failures.append(err))
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0 and not failures, failures[:1]


def index_of(record) -> int:
    return int(record.value.split(b" ", 1)[0])


async def run_until(app, done, timeout: float) -> None:
    """Run ``app`` until ``done()`` holds (polled), then stop it; fails if it does not hold in time."""
    task = asyncio.ensure_future(app.run_async())
    deadline = time.monotonic() + timeout
    try:
        while not done():
            if task.done():
                task.result()
                raise AssertionError("the processor stopped by itself")
            assert time.monotonic() < deadline, f"condition not reached within {timeout} s"
            await asyncio.sleep(0.02)
    finally:
        app.stop()
        await asyncio.wait_for(task, 30)


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offset per partition (-1001 where none)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found}
