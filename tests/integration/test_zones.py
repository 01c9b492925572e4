"""Zone-aware routing: three brokers in zones a, b and c over one ZooKeeper and one shared
ledger directory, with real clients that say their zone (``client.rack``, and a
``kgate_az=`` token in ``client.id``). Record bytes must reach a client from a broker of
its own zone, whichever broker owns the partition, and the metrics must show it.
"""
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import NewTopic

from tests.support import records as R
from tests.support.clients import ConfluentClient
from tests.support.cluster import KgateCluster
from tests.support.scrape import scrape, value
from tests.support.zookeeper import Ensemble

pytestmark = pytest.mark.slow
ZONES = {0: "a", 1: "b", 2: "c"}
PARTITIONS = 6


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory):
    server = Ensemble(str(tmp_path_factory.mktemp("zookeeper")), size=1).start()
    yield server
    server.stop()


@pytest.fixture
def zoned(tmp_path, zookeeper):
    """Brokers 0, 1, 2 in zones a, b, c, each with a metrics endpoint."""
    cluster = KgateCluster(str(tmp_path), zookeeper.address, f"/kgate-{uuid.uuid4().hex[:8]}")
    try:
        for node_id, zone in ZONES.items():
            cluster.start_broker(node_id, **{"broker.rack": zone, "kgate.metrics.listener": "127.0.0.1:0"})
        cluster.wait_live(set(ZONES))
        yield cluster
    finally:
        cluster.stop()


def create(cluster, name, partitions=PARTITIONS):
    admin = cluster.admin()
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(timeout=30)
    return cluster.wait_leaders(name, partitions, set(cluster.brokers))


def fetched_bytes(cluster, topic) -> dict[int, float]:
    return {node_id: value(scrape(broker.metrics_url), "kgate_topic_bytes_out_total", topic=topic)
            for node_id, broker in cluster.brokers.items()}


def read(consumer, count, timeout=60) -> list[R.Consumed]:
    out: list[R.Consumed] = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        for message in consumer.consume(10_000, timeout=0.5):
            assert message.error() is None, message.error()
            out.append(R.Consumed(message.partition(), message.offset(), message.key(), message.value(),
                                  tuple(message.headers() or ()), message.timestamp()[1]))
    return out


def test_a_consumer_reads_every_partition_from_its_own_zone_through_preferred_read_replica(zoned):
    """A librdkafka consumer in zone a reads partitions owned in zones b and c from the zone-a
    broker, both what was stored before it started and a tail produced while it waits: the
    owners in b and c serve no record bytes, and the zone-a broker asks them only for high
    watermarks (a small share of the payload)."""
    topic = "zoned-reads"
    leaders = create(zoned, topic)
    assert set(leaders.values()) == set(ZONES), f"every zone owns some partitions: {leaders}"
    ConfluentClient.produce(zoned.bootstrap, topic, 1000)
    zone_a = zoned.brokers[0]
    consumer = Consumer({"bootstrap.servers": zone_a.bootstrap, "group.id": "zoned-reader", "enable.auto.commit": False,
                         "client.rack": "a", "client.id": "reader,kgate_az=a", "fetch.wait.max.ms": 500})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        stored = read(consumer, 1000)
        assert len(stored) == 1000
        # The tail: records produced while the consumer waits at the end of every partition.
        ConfluentClient.produce(zoned.bootstrap, topic, 500, first=1000)
        tail = read(consumer, 500)
    finally:
        consumer.close()
    R.check_read_back(stored + tail, 1500)
    served = fetched_bytes(zoned, topic)
    assert served[1] == served[2] == 0, f"owners in other zones served record bytes: {served}"
    assert served[0] > 0
    samples = scrape(zone_a.metrics_url)
    asked = sum(value(samples, "kgate_interbroker_bytes_total", direction=direction, local_zone="a", peer_zone=peer)
                for direction in ("sent", "received") for peer in ("b", "c"))
    assert 0 < asked < served[0], f"inter-broker bytes {asked} against {served[0]} bytes of records"
