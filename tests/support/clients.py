"""Produce and consume with the real client libraries, bounded in count and time.

Each client family gets the same two operations so acceptance tests can be
parametrized over clients instead of copied per client.
"""
import shutil
import subprocess
import time
from pathlib import Path

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from . import records as R
from . import warm_start


def kgate_users(data_dir, *args, check=True) -> subprocess.CompletedProcess:
    """``kgate users ...`` (the CLI that keeps SASL users in a data directory)."""
    return warm_start.run(["users", "--data-dir", data_dir, *args], timeout=60, check=check)


class UserDirectories:
    """Data directories that start with SASL users in them: ``kgate users`` runs once, into a
    template, and each test's broker gets a copy. Each ``kgate users`` is an interpreter start
    and the SCRAM hashing, about 1.5 s of CPU; a module of tests each making its users paid that
    per test and user."""

    def __init__(self, template: Path, users: dict[str, str]):
        for user, password in users.items():
            kgate_users(str(template), "--create", "add", user, "--password", password)
        self.template = template

    def make(self, data_dir: str) -> str:
        shutil.copytree(self.template, data_dir)
        return data_dir


def create_topic(bootstrap: str, name: str, partitions: int, config: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1, config=config or {})]).values():
        future.result(timeout=30)


def end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    """Each partition's log end offset; -1 for a partition (or topic) the cluster does not have yet."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        ends = []
        for p in range(partitions):
            try:
                ends.append(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1])
            except KafkaException:
                ends.append(-1)
        return ends
    finally:
        consumer.close()


class ConfluentClient:
    name = "confluent-kafka"

    @staticmethod
    def produce(bootstrap, topic, count, codec="none", value_size=100, timeout=120, with_headers=True, first=0,
                **config):
        """Records ``first`` .. ``first + count - 1``."""
        producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5,
                             "acks": "all", **config})
        failures = []

        def delivered(err, _msg):
            if err is not None:
                failures.append(err)

        for i in range(first, first + count):
            while True:
                try:
                    producer.produce(topic, key=R.key(i), value=R.value(i, value_size),
                                     headers=R.headers(i) if with_headers else None,
                                     timestamp=R.timestamp(i), on_delivery=delivered)
                    break
                except BufferError:
                    producer.poll(0.05)
            if i % 1000 == 0:
                producer.poll(0)
        remaining = producer.flush(timeout)
        assert remaining == 0, f"{remaining} records undelivered after {timeout} s"
        assert not failures, f"{len(failures)} delivery failures, first: {failures[0]}"

    @staticmethod
    def consume(bootstrap, topic, partitions, count, timeout=120, **config) -> list[R.Consumed]:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                             **config})
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out = []
        deadline = time.monotonic() + timeout
        try:
            while len(out) < count and time.monotonic() < deadline:
                for message in consumer.consume(10_000, timeout=0.5):
                    if message.error():
                        raise KafkaException(message.error())
                    kind, timestamp = message.timestamp()
                    out.append(R.Consumed(message.partition(), message.offset(), message.key(), message.value(),
                                          tuple(message.headers() or ()),
                                          R.NO_TIMESTAMP if kind == TIMESTAMP_NOT_AVAILABLE else timestamp))
        finally:
            consumer.close()
        return out


def consumed(message) -> R.Consumed:
    """A kafka-python ConsumerRecord as a checked record (magic 0 has no timestamp: None)."""
    timestamp = R.NO_TIMESTAMP if message.timestamp is None else message.timestamp
    return R.Consumed(message.partition, message.offset, message.key, message.value,
                      tuple(message.headers or ()), timestamp)


class KafkaPythonClient:
    name = "kafka-python"

    @staticmethod
    def produce(bootstrap, topic, count, codec="none", value_size=100, timeout=120, with_headers=True, **config):
        """``with_headers=False`` for generations without them (``api_version`` below 0.11)."""
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec,
                                 linger_ms=5, acks="all", **config)
        try:
            futures = [producer.send(topic, key=R.key(i), value=R.value(i, value_size),
                                     headers=R.headers(i) if with_headers else None,
                                     timestamp_ms=R.timestamp(i)) for i in range(count)]
            producer.flush(timeout)
            for future in futures:
                future.get(timeout=1)  # raises the delivery error, if any
        finally:
            producer.close(timeout=10)

    @staticmethod
    def consume(bootstrap, topic, partitions, count, timeout=120, **config) -> list[R.Consumed]:
        from kafka import KafkaConsumer
        from kafka.structs import TopicPartition as KTopicPartition

        consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None, **config)
        assigned = [KTopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(assigned)
        consumer.seek_to_beginning(*assigned)
        out = []
        deadline = time.monotonic() + timeout
        try:
            while len(out) < count and time.monotonic() < deadline:
                for messages in consumer.poll(timeout_ms=500, max_records=10_000).values():
                    out.extend(consumed(m) for m in messages)
        finally:
            consumer.close()
        return out


CLIENTS = [ConfluentClient, KafkaPythonClient]
