"""A kgate cluster for tests: brokers as processes over one ZooKeeper chroot and one
shared ledger directory, and producers that keep what was acknowledged to check it.

The delivery property every fault test checks: each acknowledged record is read back
at the offset it was acknowledged with, no offset was acknowledged twice, and each
partition's offsets run without gaps from 0.
"""
import os
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from . import records as R
from .broker_process import BrokerProcess
from .member_process import wait_for
from .ports import free_ports
from .scrape import scrape, value
from .zookeeper import ZooKeeperServer

SESSION_TIMEOUT_MS = 4000


class KgateCluster:
    def __init__(self, base_dir: str, zookeeper: str, chroot: str, size: int = 3, storage: str | None = None,
                 **settings):
        """``storage``: the ledger store every broker names (default: one shared directory)."""
        self.base_dir = base_dir
        self.metadata = f"zookeeper://{zookeeper}{chroot}"
        self.storage = os.path.join(base_dir, "shared-ledgers")
        self.storage_at = storage or f"file:{self.storage}"
        self.settings = {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS, "offsets.topic.num.partitions": 6,
                         "group.initial.rebalance.delay.ms": 0, **settings}
        self.size = size
        self.brokers: dict[int, BrokerProcess] = {}

    def start_broker(self, node_id: int, listeners: tuple[str, ...] = (), wrapper: tuple[str, ...] = (),
                     **settings) -> BrokerProcess:
        """``wrapper``: the command the broker runs under (BrokerProcess)."""
        broker = BrokerProcess(os.path.join(self.base_dir, f"broker-{node_id}"), {
            **self.settings, "kgate.metadata": self.metadata, "kgate.storage": self.storage_at,
            "broker.id": node_id, **settings}, listeners=listeners, wrapper=wrapper)
        self.brokers[node_id] = broker.start(timeout=60)
        return broker

    def start(self) -> "KgateCluster":
        for node_id in range(self.size):
            self.start_broker(node_id)
        self.wait_live(set(range(self.size)))
        return self

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.alive())

    def admin(self, bootstrap: str | None = None) -> AdminClient:
        return AdminClient({"bootstrap.servers": bootstrap or self.bootstrap})

    def live_brokers(self, bootstrap: str | None = None) -> set[int]:
        return set(self.admin(bootstrap).list_topics(timeout=10).brokers)

    def wait_live(self, expected: set[int], timeout: float = 30) -> None:
        """Until every running broker lists exactly ``expected`` as the live brokers."""
        def agreed():
            return all(self.live_brokers(b.bootstrap) == expected for b in self.brokers.values() if b.alive())
        wait_for(agreed, timeout, f"every broker to list brokers {sorted(expected)}")

    def leaders(self, topic: str, bootstrap: str | None = None) -> dict[int, int]:
        """Partition -> leader id, as Metadata reports it; -1 for a partition without one."""
        metadata = self.admin(bootstrap).list_topics(topic, timeout=10).topics[topic]
        return {p.id: p.leader if p.error is None else -1 for p in metadata.partitions.values()}

    def wait_leaders(self, topic: str, partitions: int, among: set[int], timeout: float = 60) -> dict[int, int]:
        """Until every partition of ``topic`` has a leader from ``among``, and every broker of
        ``among`` says so: a client may ask any of them (each learns a topic from the metadata
        store on its own, as Kafka's brokers learn from the controller)."""
        def settled():
            answers = [self.leaders(topic, self.brokers[node_id].bootstrap) for node_id in sorted(among)
                       if node_id in self.brokers and self.brokers[node_id].alive()]
            leaders = answers[0] if answers else {}
            agreed = all(answer == leaders for answer in answers)
            return leaders if agreed and len(leaders) == partitions and set(leaders.values()) <= among else None
        return wait_for(settled, timeout, f"leaders of {topic} among {sorted(among)}", interval=0.25)

    def topic_bytes(self, topic: str) -> dict[int, float]:
        """Record-set bytes each broker has taken in and given out of ``topic`` since it started,
        from its metrics endpoint (brokers started with ``kgate.metrics.listener``)."""
        totals = {}
        for node_id, broker in self.brokers.items():
            samples = scrape(broker.metrics_url)
            totals[node_id] = (value(samples, "kgate_topic_bytes_in_total", topic=topic)
                               + value(samples, "kgate_topic_bytes_out_total", topic=topic))
        return totals

    def load_over(self, topic: str, seconds: float) -> dict[int, float]:
        """Each broker's bytes of ``topic`` per second, in and out, over the next ``seconds``."""
        before = self.topic_bytes(topic)
        time.sleep(seconds)  # a measuring window, not a wait for a condition
        after = self.topic_bytes(topic)
        return {node_id: (after[node_id] - before[node_id]) / seconds for node_id in after}

    def stop(self) -> None:
        for broker in self.brokers.values():
            if broker.alive():
                broker.kill()


def spread(loads: dict[int, float]) -> float:
    """The largest distance of a broker's load from the mean, as a fraction of the mean (0 without load)."""
    mean = sum(loads.values()) / len(loads)
    return max(abs(load - mean) for load in loads.values()) / mean if mean else 0.0


@contextmanager
def object_storage_pair(tmp_path_factory, s3_engine) -> Iterator[KgateCluster]:
    """Two brokers over a prefix of their own in the session's S3 engine, with the S3 WAL and a
    ZooKeeper of their own: the deployment where losing a broker moves ownership, not data."""
    from tests.conftest import S3_ACCESS_KEY, S3_BUCKET, S3_SECRET_KEY

    zookeeper = ZooKeeperServer(str(tmp_path_factory.mktemp("zookeeper")), free_ports(1)[0]).start().wait_serving()
    storage = f"s3://{S3_BUCKET}/{uuid.uuid4().hex}?endpoint={s3_engine.endpoint}&region=us-east-1"
    cluster = KgateCluster(str(tmp_path_factory.mktemp("pair")), zookeeper.address, f"/{uuid.uuid4().hex}",
                           size=2, storage=storage, **{"offsets.topic.num.partitions": 4,
                                                       "transaction.state.log.num.partitions": 4,
                                                       "kgate.s3.wal.commit.interval.ms": 50})
    try:
        with pytest.MonkeyPatch.context() as env:
            env.setenv("AWS_ACCESS_KEY_ID", S3_ACCESS_KEY)
            env.setenv("AWS_SECRET_ACCESS_KEY", S3_SECRET_KEY)
            yield cluster.start()
    finally:
        cluster.stop()
        zookeeper.stop()


def kill_and_restart_leader(cluster: KgateCluster, topic: str, during) -> int:
    """Kill -9 the broker leading partition 0 of ``topic`` (one of two), run ``during`` while
    the other serves alone, then start the victim again and wait until both are live."""
    leaders = cluster.leaders(topic)
    victim = leaders[0]
    cluster.brokers[victim].kill()
    # The survivor opens every partition the victim held (each recovered from the victim's WAL
    # objects): about 10 s for 60 partitions on a quiet machine (a probe of 40 topics, half of
    # them written just before the kill), and past 60 s once in a full run on two busy cores.
    # The bound catches a takeover that never ends, not a slow one.
    cluster.wait_leaders(topic, len(leaders), {1 - victim}, timeout=180)
    during()
    cluster.brokers[victim].restart(timeout=60)
    cluster.wait_live({0, 1}, timeout=60)
    return victim


class AckedProducer:
    """Produce records 0..count-1 from a thread, keeping each acknowledged (partition, offset).

    ``client`` is "confluent" (librdkafka) or "kafka-python"; both retry retriable errors
    (NOT_LEADER_OR_FOLLOWER after an owner moves) until their delivery timeout. Record ``i`` is
    ``R.key(i)``, ``R.value(i, value_size)``; ``config`` overrides the client's settings here.
    """

    def __init__(self, client: str, bootstrap: str, topic: str, count: int, first: int = 0,
                 per_second: int = 2000, value_size: int = 100, **config):
        self.client, self.bootstrap, self.topic = client, bootstrap, topic
        self.indexes = range(first, first + count)
        self.per_second = per_second
        self.value_size = value_size
        self.config = config
        self.acked: list[tuple[int, int, int]] = []  # (partition, offset, record index)
        self.failed: list[str] = []
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"producer-{client}", daemon=True)

    def start(self) -> "AckedProducer":
        self._thread.start()
        return self

    def join(self, timeout: float = 180) -> "AckedProducer":
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"{self.client} producer still running after {timeout} s"
        return self

    def stop(self) -> "AckedProducer":
        """Send nothing more (what was sent is still delivered before ``join`` returns)."""
        self._stopping.set()
        return self

    def _paced(self):
        began = time.monotonic()
        for n, i in enumerate(self.indexes):
            if self._stopping.is_set():
                return
            ahead = began + n / self.per_second - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
            yield i

    def _run(self) -> None:
        try:
            (self._run_confluent if self.client == "confluent" else self._run_kafka_python)()
        except Exception as exc:  # noqa: BLE001 - reported by the test through self.failed
            self.failed.append(f"{type(exc).__name__}: {exc}")

    def _run_confluent(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 5,
                             "message.timeout.ms": 90_000, "topic.metadata.refresh.interval.ms": 1000,
                             **self.config})

        def delivered(err, msg, i):
            if err is None:
                self.acked.append((msg.partition(), msg.offset(), i))
            else:
                self.failed.append(str(err))

        for i in self._paced():
            producer.produce(self.topic, key=R.key(i), value=R.value(i, self.value_size),
                             on_delivery=lambda e, m, i=i: delivered(e, m, i))
            producer.poll(0)
        assert producer.flush(120) == 0, "records undelivered"

    def _run_kafka_python(self) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(**{"bootstrap_servers": self.bootstrap.split(","), "acks": "all", "linger_ms": 5,
                                    "retries": 1000, "retry_backoff_ms": 200, "delivery_timeout_ms": 90_000,
                                    "request_timeout_ms": 10_000, "metadata_max_age_ms": 1000, **self.config})
        try:
            for i in self._paced():
                future = producer.send(self.topic, key=R.key(i), value=R.value(i, self.value_size))
                future.add_callback(lambda md, i=i: self.acked.append((md.partition, md.offset, i)))
                future.add_errback(lambda exc: self.failed.append(repr(exc)))
            producer.flush(120)
        finally:
            producer.close(10)


def read_all(bootstrap: str, topic: str, partitions: int, timeout: float = 60) -> dict[tuple[int, int], bytes]:
    """(partition, offset) -> key of every record in the topic, read up to each partition's end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "read-all", "enable.auto.commit": False})
    deadline = time.monotonic() + timeout
    try:
        ends = {p: log_end(consumer, TopicPartition(topic, p), deadline) for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions) if ends[p] > 0])
        found: dict[tuple[int, int], bytes] = {}
        while len(found) < sum(ends.values()) and time.monotonic() < deadline:
            for message in consumer.consume(10_000, timeout=0.5):
                assert message.error() is None, message.error()
                found[(message.partition(), message.offset())] = message.key()
        assert len(found) == sum(ends.values()), f"read {len(found)} of {sum(ends.values())} records"
        return found
    finally:
        consumer.close()


# What a partition's log end is answered with while its ownership moves between brokers (a
# client that has not yet learnt a partition's leader does not know the partition at all).
_MOVING = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError._TRANSPORT,
           KafkaError._TIMED_OUT, KafkaError._UNKNOWN_PARTITION}


def log_end(consumer: Consumer, partition: TopicPartition, deadline: float) -> int:
    """The partition's log end offset (``watermarks``)."""
    return watermarks(consumer, partition, deadline)[1]


def watermarks(consumer: Consumer, partition: TopicPartition, deadline: float) -> tuple[int, int]:
    """The partition's low and high watermarks, asked again while ownership moves (a retriable
    error, such as NOT_LEADER_FOR_PARTITION from a broker that has just handed the partition on).

    Before asking again it refreshes the topic's metadata: librdkafka takes a cached partition
    without a leader (as answered, by kgate or Kafka, while a leader moves) for a lasting
    _UNKNOWN_PARTITION and does not ask the cluster again on its own."""
    while True:
        try:
            return consumer.get_watermark_offsets(partition, timeout=10)
        except KafkaException as exc:
            leaders = _leaders(consumer, partition.topic)
            if exc.args[0].code() not in _MOVING or time.monotonic() > deadline:
                exc.add_note(f"{partition.topic} leaders now: {leaders}")
                raise
        time.sleep(0.2)


def _leaders(consumer: Consumer, topic: str) -> str:
    """What the cluster answers of a topic's leaders now (which also refreshes the client's
    metadata cache), for a failure's message."""
    try:
        found = consumer.list_topics(topic, timeout=5).topics[topic]
    except KafkaException as exc:
        return f"metadata failed: {exc.args[0]}"
    return f"error {found.error}, " + ", ".join(f"{p}: leader {m.leader} ({m.error})"
                                               for p, m in sorted(found.partitions.items()))


def check_delivery(stored: dict[tuple[int, int], bytes], acked: list[tuple[int, int, int]]) -> None:
    offsets_acked = [(p, o) for p, o, _ in acked]
    assert len(set(offsets_acked)) == len(offsets_acked), "an offset was acknowledged twice"
    missing = [(p, o, i) for p, o, i in acked if stored.get((p, o)) != R.key(i)]
    assert not missing, f"{len(missing)} acknowledged records not at their offsets, first: {missing[:3]}"
    by_partition: dict[int, list[int]] = {}
    for p, o in stored:
        by_partition.setdefault(p, []).append(o)
    for p, offsets in by_partition.items():
        assert sorted(offsets) == list(range(len(offsets))), f"partition {p} has gaps"
