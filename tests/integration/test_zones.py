"""Zone-aware routing: three brokers in zones a, b and c over one ZooKeeper and one shared
ledger directory, with real clients that say their zone (``client.rack``, and a
``kgate_az=`` token in ``client.id``). Record bytes must reach a client from a broker of
its own zone, whichever broker owns the partition, and the metrics must show it.
"""
import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import ProduceRequest

from kgate.protocol.api_versions import KGATE_PRODUCE_REFERENCE, KGATE_READ_END
from kgate.protocol.error_codes import ErrorCode
from kgate.storage.stores.bucket_location import BucketLocation
from kgate.storage.stores.object_client import ObjectClient
from kgate.storage.stores.object_layout import wal_key
from kgate.storage.stores.s3_store import S3LedgerStore
from kgate.storage.stores.wal_object import FRAME
from tests.integration.test_balancing import reassign
from tests.integration.test_peer_link import outcome as appended
from tests.integration.test_peer_link import peer_link, reference
from tests.support import records as R
from tests.support.clients import ConfluentClient
from tests.support.cluster import AckedProducer, KgateCluster, check_delivery, read_all
from tests.support.delay_proxy import DelayProxy
from tests.support.member_process import wait_for
from tests.support.scrape import scrape, value
from tests.support.transactions import read_to_end, transactional
from tests.support.wire import Wire
from tests.support.zookeeper import Ensemble
from tests.unit.record_batches import build_batch

# One worker runs the module, so its module-scoped servers start once (scripts/test: --dist loadgroup).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("zones")]
ZONES = {0: "a", 1: "b", 2: "c"}
PARTITIONS = 6


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory):
    server = Ensemble(str(tmp_path_factory.mktemp("zookeeper")), size=1).start()
    yield server
    server.stop()


def start_zones(cluster: KgateCluster) -> KgateCluster:
    """Brokers 0, 1, 2 in zones a, b, c, each with a metrics endpoint."""
    for node_id, zone in ZONES.items():
        cluster.start_broker(node_id, **{"broker.rack": zone, "kgate.metrics.listener": "127.0.0.1:0"})
    cluster.wait_live(set(ZONES))
    return cluster


@pytest.fixture
def zoned_on_files(tmp_path, zookeeper):
    """Three zones over one shared ledger directory, for this test alone."""
    cluster = KgateCluster(str(tmp_path), zookeeper.address, f"/kgate-{uuid.uuid4().hex[:8]}")
    try:
        yield start_zones(cluster)
    finally:
        cluster.stop()


@contextlib.contextmanager
def cluster_on_s3(base_dir: str, zookeeper, endpoint: str) -> Iterator[KgateCluster]:
    """A cluster (no broker started yet) over a prefix of the session's S3 engine, at ``endpoint``,
    with the S3 WAL: no shared filesystem, so zone reads and produces by reference go through WAL
    objects."""
    from tests.conftest import S3_ACCESS_KEY, S3_BUCKET, S3_SECRET_KEY

    storage = f"s3://{S3_BUCKET}/{uuid.uuid4().hex}?endpoint={endpoint}&region=us-east-1"
    cluster = KgateCluster(base_dir, zookeeper.address, f"/kgate-{uuid.uuid4().hex[:8]}", storage=storage,
                           **{"kgate.s3.wal.commit.interval.ms": S3_COMMIT_INTERVAL_MS})
    try:
        with pytest.MonkeyPatch.context() as env:
            env.setenv("AWS_ACCESS_KEY_ID", S3_ACCESS_KEY)
            env.setenv("AWS_SECRET_ACCESS_KEY", S3_SECRET_KEY)
            yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def zoned_on_s3(tmp_path_factory, zookeeper, s3_engine):
    """Three zones on S3 (:func:`cluster_on_s3`), shared by the module's tests (each uses
    topics of its own and measures what it caused)."""
    with cluster_on_s3(str(tmp_path_factory.mktemp("zoned-s3")), zookeeper, s3_engine.endpoint) as cluster:
        yield start_zones(cluster)


@pytest.fixture
def zoned_behind_a_proxy(tmp_path, zookeeper, s3_engine):
    """Three zones on S3 reached through a proxy, which the test can slow down; (cluster, proxy)."""
    proxy = DelayProxy(s3_engine.endpoint.removeprefix("http://"), str(tmp_path)).start()
    try:
        with cluster_on_s3(str(tmp_path), zookeeper, f"http://{proxy.address}") as cluster:
            yield start_zones(cluster), proxy
    finally:
        proxy.stop()


# The S3 WAL's commit interval in the S3 deployment (the broker's default is 100 ms).
S3_COMMIT_INTERVAL_MS = 50


@pytest.fixture(params=["files", "s3"])
def zoned(request):
    """Three zones over each store that lets another broker read a ledger being written."""
    return request.getfixturevalue(f"zoned_on_{request.param}")


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
    asked_before = zone_a_asked(zoned)
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
    asked = zone_a_asked(zoned) - asked_before
    assert 0 < asked < served[0], f"inter-broker bytes {asked} against {served[0]} bytes of records"


def zone_a_asked(cluster) -> float:
    """Bytes between the zone-a broker and the brokers of zones b and c, both ways."""
    samples = scrape(cluster.brokers[0].metrics_url)
    return sum(value(samples, "kgate_interbroker_bytes_total", direction=direction, local_zone="a", peer_zone=peer)
               for direction in ("sent", "received") for peer in ("b", "c"))


def cross_zone_client_bytes(cluster, among: set[int] | None = None) -> float:
    """Client bytes, both ways, between a client that said its zone and a broker of another
    zone, as the live brokers (of ``among``) count them."""
    total = 0.0
    for node_id, broker in cluster.brokers.items():
        if not broker.alive() or (among is not None and node_id not in among):
            continue
        for (name, labels), sample in scrape(broker.metrics_url).items():
            labels = dict(labels)
            if name == "kgate_client_bytes_total" and labels["client_zone"] not in ("", labels["broker_zone"]):
                total += sample
    return total


def test_producers_write_through_a_broker_of_their_own_zone_by_reference(zoned):
    """kafka-python 3 in zone b and an idempotent librdkafka producer in zone c, each knowing
    only its zone's broker, produce to partitions owned in every zone: every acknowledged
    record is at its offset, offsets run without gaps, no client byte crossed zones, and the
    owners were sent references, not the record bytes."""
    topic = "zoned-writes"
    create(zoned, topic)
    crossed_before = cross_zone_interbroker_bytes(zoned)
    writers = [
        AckedProducer("kafka-python", zoned.brokers[1].bootstrap, topic, 1500, per_second=3000,
                      client_id="writer-b,kgate_az=b"),
        AckedProducer("confluent", zoned.brokers[2].bootstrap, topic, 1500, first=1500, per_second=3000,
                      **{"client.id": "writer-c,kgate_az=c", "enable.idempotence": True}),
    ]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(120)
        assert not writer.failed, writer.failed[:3]
    acked = [record for writer in writers for record in writer.acked]
    assert len(acked) == 3000
    check_delivery(read_all(zoned.bootstrap, topic, PARTITIONS), acked)
    assert cross_zone_client_bytes(zoned) == 0
    payload = sum(value(scrape(b.metrics_url), "kgate_topic_bytes_in_total", topic=topic)
                  for b in zoned.brokers.values())
    crossed = cross_zone_interbroker_bytes(zoned) - crossed_before
    assert 0 < crossed < payload / 4, f"{crossed} inter-broker bytes for {payload} bytes of records"


def coordinated_elsewhere(cluster, zone_broker: int, key_type: int = 0) -> str:
    """A group id (key type 0) or transactional id (1) whose coordinator, as a client with no
    zone is told, is not ``zone_broker``."""
    found: list[str] = []

    def located() -> bool:
        for i in range(20):
            key = f"zoned-{'group' if key_type == 0 else 'tx'}-{i}"
            answer = Wire(cluster.brokers[zone_broker].bootstrap).call(
                FindCoordinatorRequest(key=key, key_type=key_type), 1)
            if answer.error_code == 0 and answer.node_id != zone_broker:
                found.append(key)
                return True
        return False
    wait_for(located, 30, "a key coordinated in another zone")
    return found[0]


def test_a_zoned_consumer_group_consumes_and_commits_with_no_client_byte_leaving_its_zone(zoned):
    """A librdkafka group member in zone a (client.rack and a kgate_az token) whose group's coordinator
    is in another zone: FindCoordinator names the zone-a broker, which forwards the joins, syncs,
    heartbeats, commits and the leave to the coordinator. It reads every record, its commit is
    stored (seen through any broker), and none of its bytes reached a broker of another zone."""
    topic = "zoned-group"
    create(zoned, topic)
    ConfluentClient.produce(zoned.bootstrap, topic, 300)
    group = coordinated_elsewhere(zoned, 0)
    consumer = Consumer({"bootstrap.servers": zoned.brokers[0].bootstrap, "group.id": group,
                         "client.rack": "a", "client.id": "grouped,kgate_az=a", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "fetch.wait.max.ms": 500})
    try:
        consumer.subscribe([topic])
        got = read(consumer, 300)
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    R.check_read_back(got, 300)
    assert cross_zone_client_bytes(zoned) == 0
    checker = Consumer({"bootstrap.servers": zoned.bootstrap, "group.id": group})
    try:
        committed = checker.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
    finally:
        checker.close()
    assert sum(tp.offset for tp in committed) == 300


def test_a_zoned_transactional_producer_commits_and_aborts_through_its_zone(zoned):
    """A librdkafka transactional producer in zone a (a kgate_az token) whose transactional id is
    coordinated in another zone: FindCoordinator names the zone-a broker, which forwards
    InitProducerId, AddPartitionsToTxn and EndTxn to the coordinator, and its records go to the
    owners by reference. A read_committed consumer sees exactly the committed transactions, and
    none of the producer's bytes reached a broker of another zone."""
    topic = "zoned-tx"
    create(zoned, topic)
    transactional_id = coordinated_elsewhere(zoned, 0, key_type=1)
    producer = transactional(zoned.brokers[0].bootstrap, transactional_id, **{"client.id": "tx,kgate_az=a"})
    for outcome, count in (("commit", 30), ("abort", 10), ("commit", 20)):
        producer.begin_transaction()
        for i in range(count):
            producer.produce(topic, value=b"%s-%d" % (outcome.encode(), i), partition=i % PARTITIONS)
        if outcome == "commit":
            producer.commit_transaction(30)
        else:
            producer.flush(30)  # stored, then aborted (librdkafka purges what an abort finds unsent)
            producer.abort_transaction(30)
    committed = read_to_end(zoned.bootstrap, topic, PARTITIONS, "read_committed")
    assert sorted(committed) == sorted([b"commit-%d" % i for i in range(30)] + [b"commit-%d" % i for i in range(20)])
    assert len(read_to_end(zoned.bootstrap, topic, PARTITIONS, "read_uncommitted", group="all")) == 60
    assert cross_zone_client_bytes(zoned) == 0


def test_when_a_zone_loses_its_broker_its_clients_go_to_the_owners_and_lose_nothing(zoned_on_files):
    """kill -9 of the only zone-a broker while a zone-a idempotent producer writes through it:
    the producer falls back to the owners in other zones (counted as fallbacks) and every
    acknowledged record is read back at its offset."""
    zoned = zoned_on_files
    topic = "zone-failover"
    create(zoned, topic)
    bootstrap = ",".join(zoned.brokers[n].bootstrap for n in (0, 1, 2))
    writer = AckedProducer("confluent", bootstrap, topic, 3000, per_second=1000,
                           **{"client.id": "writer-a,kgate_az=a", "enable.idempotence": True}).start()
    wait_for(lambda: len(writer.acked) >= 500, 30, "acknowledgements through the zone-a broker")
    zoned.brokers[0].kill()
    writer.join(150)
    assert not writer.failed, writer.failed[:3]
    assert len(writer.acked) == 3000
    check_delivery(read_all(zoned.bootstrap, topic, PARTITIONS), writer.acked)
    fallbacks = sum(value(scrape(zoned.brokers[n].metrics_url), "kgate_zone_fallbacks_total", client_zone="a")
                    for n in (1, 2))
    assert fallbacks > 0


def test_a_zone_broker_killed_before_its_session_ends_is_not_named_to_its_zones_clients(tmp_path, zookeeper):
    """kill -9 of the only zone-a broker, whose metadata session outlives the test: still
    registered, it must not be what another broker names to a zone-a client (librdkafka,
    told of no other broker, would have nowhere to ask again until its re-bootstrap timer).
    The client is told of every live broker, the dead one included (as Kafka does until its
    session ends), and of each partition's owner as its leader."""
    cluster = KgateCluster(str(tmp_path), zookeeper.address, f"/kgate-{uuid.uuid4().hex[:8]}",
                           **{"zookeeper.session.timeout.ms": 60_000})
    try:
        for node_id, zone in ZONES.items():
            cluster.start_broker(node_id, **{"broker.rack": zone})
        cluster.wait_live(set(ZONES))
        topic = "zone-broker-killed"
        owners = create(cluster, topic)

        def asked_in_zone_a(node_id):
            with Wire(cluster.brokers[node_id].bootstrap, client_id="probe,kgate_az=a") as wire:
                answer = wire.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                                   allow_auto_topic_creation=False), 9)
            [described] = answer.topics
            return {b.node_id for b in answer.brokers}, {p.partition_index: p.leader_id for p in described.partitions}

        assert asked_in_zone_a(2) == ({0}, dict.fromkeys(range(PARTITIONS), 0))  # all through zone a's broker
        cluster.brokers[0].kill()
        for node_id in (1, 2):
            assert asked_in_zone_a(node_id) == ({0, 1, 2}, owners)
    finally:
        cluster.stop()


# The acceptance run: 30 s of paced load, a producer and a consumer in every zone.
# Crossing zones costs a reference per produce sent on to an owner and a standing poll's turn
# per change of an owner's high watermarks, whatever a batch holds. On the shared directory
# the load is batched: 3 MB/s per producer (4 KiB values), linger 250 ms, batches up to 1 MB.
# On S3 it is the small-request setting, 300 x 1 KiB records/s at linger 5 ms, whose
# many small references and poll answers stay under 1% only because links across zones are
# compressed (gateway/link_deflate.py; 1.4-1.7% without).
LOAD_SECONDS = 30
# (records per second per producer, value bytes, linger ms), by store
LOADS = {"files": (750, 4096, 250), "s3": (300, 1024, 5)}


class ZoneReader:
    """A consumer in ``zone`` that knows only its zone's broker, assigned every partition from
    offset 0, reading from a thread until it has ``count`` records or ``timeout`` passes; keeps
    (partition, offset, key) in the order it received them. librdkafka says its zone with
    ``client.rack`` (Fetch's rack_id) and a ``kgate_az=`` token (so Metadata names its zone's
    broker); kafka-python, which sends no rack_id, with the token alone."""

    def __init__(self, client: str, bootstrap: str, topic: str, zone: str, count: int, timeout: float):
        self.client, self.bootstrap, self.topic, self.zone, self.count = client, bootstrap, topic, zone, count
        self.deadline = time.monotonic() + timeout
        self.got: list[tuple[int, int, bytes]] = []
        self.failed: list[str] = []
        self._thread = threading.Thread(target=self._run, name=f"reader-{zone}", daemon=True)

    def start(self) -> "ZoneReader":
        self._thread.start()
        return self

    def join(self) -> None:
        self._thread.join(max(0.0, self.deadline - time.monotonic()) + 30)
        assert not self._thread.is_alive(), f"the zone-{self.zone} reader is still running"

    def _run(self) -> None:
        try:
            (self._run_confluent if self.client == "confluent" else self._run_kafka_python)()
        except Exception as exc:  # noqa: BLE001 - reported by the test through self.failed
            self.failed.append(f"{type(exc).__name__}: {exc}")

    def _reading(self) -> bool:
        return len(self.got) < self.count and time.monotonic() < self.deadline and not self.failed

    def _run_confluent(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"zoned-load-{self.zone}",
                             "enable.auto.commit": False, "client.rack": self.zone,
                             "client.id": f"reader-{self.zone},kgate_az={self.zone}", "fetch.wait.max.ms": 500})
        try:
            consumer.assign([TopicPartition(self.topic, p, 0) for p in range(PARTITIONS)])
            while self._reading():
                for message in consumer.consume(10_000, timeout=0.5):
                    if message.error() is not None:
                        self.failed.append(str(message.error()))
                    else:
                        self.got.append((message.partition(), message.offset(), message.key()))
        finally:
            consumer.close()

    def _run_kafka_python(self) -> None:
        from kafka import KafkaConsumer
        from kafka.structs import TopicPartition as KafkaPartition

        consumer = KafkaConsumer(bootstrap_servers=[self.bootstrap], group_id=None, enable_auto_commit=False,
                                 client_id=f"reader-{self.zone},kgate_az={self.zone}", fetch_max_wait_ms=500)
        try:
            partitions = [KafkaPartition(self.topic, p) for p in range(PARTITIONS)]
            consumer.assign(partitions)
            for partition in partitions:
                consumer.seek(partition, 0)
            while self._reading():
                for partition, records in consumer.poll(timeout_ms=500).items():
                    self.got.extend((partition.partition, record.offset, record.key) for record in records)
        finally:
            consumer.close()


def check_read_once_in_order(got: list[tuple[int, int, bytes]], acked: list[tuple[int, int, int]]) -> None:
    """Each partition's offsets arrived in order, once each, from 0 without gaps, and every
    acknowledged record is at the offset it was acknowledged with (so nothing else was read)."""
    by_partition: dict[int, list[int]] = {}
    for partition, offset, _ in got:
        by_partition.setdefault(partition, []).append(offset)
    for partition, offsets in by_partition.items():
        assert offsets == list(range(len(offsets))), \
            f"partition {partition} read out of order, twice or with gaps, first offsets {offsets[:10]}"
    assert len(got) == len(acked), f"read {len(got)} records, {len(acked)} acknowledged"
    check_delivery({(partition, offset): key for partition, offset, key in got}, acked)


def cross_zone_interbroker_bytes(cluster) -> float:
    """Bytes brokers sent to brokers of other zones (each byte counted once, by its sender)."""
    crossed = 0.0
    for node_id, broker in cluster.brokers.items():
        samples = scrape(broker.metrics_url)
        crossed += sum(value(samples, "kgate_interbroker_bytes_total", direction="sent", local_zone=ZONES[node_id],
                             peer_zone=peer) for peer in ZONES.values() if peer != ZONES[node_id])
    return crossed


def requests_by_api(cluster) -> dict[str, float]:
    """Requests the brokers answered, by API, all brokers together (peers' requests included)."""
    counts: dict[str, float] = {}
    for broker in cluster.brokers.values():
        for (name, labels), sample in scrape(broker.metrics_url).items():
            if name == "kgate_requests_total":
                api = dict(labels)["api"]
                counts[api] = counts.get(api, 0) + sample
    return counts


def test_under_load_in_three_zones_no_client_byte_crosses_zones_and_every_record_is_read_once_in_order(zoned,
                                                                                                      request):
    """The issue's acceptance run. A producer and a consumer in each of zones a, b and c, each
    knowing only its zone's broker: idempotent acks=all producers (librdkafka in a, kafka-python
    in b and c, each with a kgate_az token; see LOADS) paced for 30 s over partitions
    owned in every zone, and consumers (librdkafka with client.rack and the token in a and c,
    kafka-python with the token in b) reading every partition from offset 0 while it is written.
    From the brokers' metrics: no client byte went to or came from a broker of another zone, and
    brokers sent each other across zones at most 1% of the record bytes produced; every consumer
    read every acknowledged record once, in order per partition, at the offset it was acknowledged
    with."""
    topic = "zoned-load"
    leaders = create(zoned, topic)
    crossed_before, requests_before = cross_zone_interbroker_bytes(zoned), requests_by_api(zoned)
    assert set(leaders.values()) == set(ZONES), f"every zone owns some partitions: {leaders}"
    clients = {"a": ("confluent", "confluent"), "b": ("kafka-python", "kafka-python"),
               "c": ("kafka-python", "confluent")}
    home = {zone: zoned.brokers[node_id].bootstrap for node_id, zone in ZONES.items()}
    rate, value_size, linger_ms = LOADS[request.node.callspec.params["zoned"]]
    count = LOAD_SECONDS * rate
    total = count * len(clients)
    readers = [ZoneReader(consumer, home[zone], topic, zone, total, LOAD_SECONDS + 150).start()
               for zone, (_, consumer) in clients.items()]
    writers = []
    for n, (zone, (producer, _)) in enumerate(clients.items()):
        if producer == "confluent":
            config = {"client.id": f"writer-{zone},kgate_az={zone}", "enable.idempotence": True,
                      "linger.ms": linger_ms}
        else:
            config = {"client_id": f"writer-{zone},kgate_az={zone}", "enable_idempotence": True,
                      "linger_ms": linger_ms, "batch_size": 1_000_000}  # librdkafka's default batch.size
        writers.append(AckedProducer(producer, home[zone], topic, count, first=n * count, per_second=rate,
                                     value_size=value_size, **config).start())
    for writer in writers:
        writer.join(LOAD_SECONDS + 150)
        assert not writer.failed, writer.failed[:3]
    acked = [record for writer in writers for record in writer.acked]
    assert len(acked) == total
    for reader in readers:
        reader.join()
        assert not reader.failed, f"zone {reader.zone}: {reader.failed[:3]}"
        check_read_once_in_order(reader.got, acked)
    assert cross_zone_client_bytes(zoned) == 0
    for node_id, zone in ZONES.items():
        samples = scrape(zoned.brokers[node_id].metrics_url)
        for direction in ("in", "out"):
            assert value(samples, "kgate_client_bytes_total", direction=direction, client_zone=zone,
                         broker_zone=zone) > 0, f"the zone-{zone} broker counted no {direction} bytes of its clients"
    payload = sum(value(scrape(b.metrics_url), "kgate_topic_bytes_in_total", topic=topic)
                  for b in zoned.brokers.values())
    assert payload >= total * value_size
    crossed = cross_zone_interbroker_bytes(zoned) - crossed_before
    requests = {api: count - requests_before.get(api, 0) for api, count in requests_by_api(zoned).items()}
    assert 0 < crossed <= payload / 100, \
        f"{crossed:.0f} inter-broker bytes crossed zones for {payload:.0f} bytes of records " \
        f"({crossed / payload:.2%}); requests answered: {requests}"


PASSWORDS = {"admin": "admin-secret", "kgate-broker": "peer-secret", "alice": "alice-secret"}


def login(user: str) -> dict:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user,
            "sasl.password": PASSWORDS[user]}


def test_with_acls_zoned_clients_write_and_read_in_their_zone_as_themselves(tmp_path, zookeeper):
    """ACLs on, SCRAM users, brokers in zones a and b logging in to each other as a super user. alice
    may write and read the topic and her transactional id, nothing more. Her idempotent producer in
    zone a writes through the zone-a broker, which sends the owner in b references that it takes as
    alice; her transaction (a client with no zone) is ended in both brokers' partitions by markers
    sent over the logged-in link; her read_committed consumer in zone a reads everything from the
    zone-a broker, which asks the owner in b for high watermarks over that link: b serves no record byte."""
    cluster = KgateCluster(str(tmp_path), zookeeper.address, f"/kgate-{uuid.uuid4().hex[:8]}", **{
        "authorizer.class.name": "acl", "super.users": "User:admin;User:kgate-broker",
        "kgate.inter.broker.sasl.username": "kgate-broker",
        "kgate.inter.broker.sasl.password": PASSWORDS["kgate-broker"],
        "transaction.state.log.num.partitions": 2, "offsets.topic.num.partitions": 2})
    for user, password in PASSWORDS.items():
        subprocess.run([sys.executable, "-m", "kgate", "users", "--metadata", cluster.metadata, "--create", "add",
                        user, "--password", password, "--mechanism", "SCRAM-SHA-512"],
                       capture_output=True, text=True, timeout=60, check=True)
    try:
        for node_id, zone in ((0, "a"), (1, "b")):
            cluster.start_broker(node_id, listeners=("SASL_PLAINTEXT",),
                                 **{"broker.rack": zone, "kgate.metrics.listener": "127.0.0.1:0"})
        zone_a = cluster.brokers[0].address("SASL_PLAINTEXT")
        admin = AdminClient({"bootstrap.servers": zone_a, **login("admin")})
        topic = "guarded-zones"
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
        grants = [(ResourceType.TOPIC, topic, AclOperation.WRITE), (ResourceType.TOPIC, topic, AclOperation.READ),
                  (ResourceType.TRANSACTIONAL_ID, "tx-alice", AclOperation.WRITE),
                  (ResourceType.GROUP, "alice-reader", AclOperation.READ)]
        for future in admin.create_acls([AclBinding(kind, name, ResourcePatternType.LITERAL, "User:alice", "*",
                                                    operation, AclPermissionType.ALLOW)
                                         for kind, name, operation in grants]).values():
            future.result(30)
        wait_for(lambda: {p.leader for p in admin.list_topics(topic, timeout=10).topics[topic].partitions.values()}
                 == {0, 1}, 60, "a partition owned in each zone")
        writer = AckedProducer("confluent", zone_a, topic, 20, per_second=1000, **{
            "client.id": "alice,kgate_az=a", "enable.idempotence": True, **login("alice")}).start()
        writer.join(60)
        assert not writer.failed and len(writer.acked) == 20, writer.failed[:3]
        owned_in_b = {i for i, p in admin.list_topics(topic, timeout=10).topics[topic].partitions.items()
                      if p.leader == 1}
        assert any(partition in owned_in_b for partition, _, _ in writer.acked), "nothing went by reference"
        both = ",".join(b.address("SASL_PLAINTEXT") for b in cluster.brokers.values())
        producer = transactional(both, "tx-alice", **login("alice"))
        producer.begin_transaction()
        for i in range(20):
            producer.produce(topic, value=b"tx-%d" % i, partition=i % 2)
        producer.commit_transaction(30)
        consumer = Consumer({"bootstrap.servers": zone_a, "group.id": "alice-reader", "enable.auto.commit": False,
                             "isolation.level": "read_committed", "client.rack": "a",
                             "client.id": "alice-reader,kgate_az=a", **login("alice")})
        try:
            consumer.assign([TopicPartition(topic, p, 0) for p in range(2)])
            got = read(consumer, 40)
        finally:
            consumer.close()
        assert len(got) == 40
        assert {r.value for r in got} >= {b"tx-%d" % i for i in range(20)}
        for partition in (0, 1):
            offsets = [r.offset for r in got if r.partition == partition]
            assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
        served = fetched_bytes(cluster, topic)
        assert served[1] == 0 and served[0] > 0, f"the owner in zone b served record bytes: {served}"
    finally:
        cluster.stop()


async def test_on_object_storage_a_reference_to_a_missing_or_damaged_set_is_refused_and_appends_nothing(
        zoned_on_s3):
    """The owner of a partition is sent references over a peer link: one naming a WAL object
    that is not there, one whose object's bytes were damaged since (the frame's CRC32C fails),
    and one whose length is not the set's. Each is refused with KAFKA_STORAGE_ERROR and nothing
    is appended; a sound reference then appends at offset 0, so nothing else stood in the way."""
    cluster = zoned_on_s3
    topic = "zoned-references"
    owner = cluster.brokers[create(cluster, topic, partitions=1)[0]]
    client = ObjectClient(BucketLocation.parse(cluster.storage_at))
    zone_broker = S3LedgerStore(client, "99-1", commit_interval_ms=0)  # writes as another zone's broker would
    records = build_batch([b"referenced"])
    try:
        sound, damaged = [await zone_broker.stage("99-", records) for _ in range(2)]
    finally:
        zone_broker.close()
    writer, seq, start, length = damaged.split("_")
    key = wal_key(writer, int(seq))
    data = bytearray(await client.get(key) or b"")
    data[int(start) + FRAME.size + len(records) // 2] ^= 0xFF  # a byte in the middle of the set's payload
    await client.put(key, bytes(data))
    missing = f"{writer}_{int(seq) + 1000}_{start}_{length}"
    wrong_length = f"{writer}_{sound.split('_')[1]}_{start}_{int(length) - 1}"
    link = peer_link(owner.bootstrap)
    try:
        for name, size in ((missing, len(records)), (damaged, len(records)), (wrong_length, len(records) - 1)):
            answer = await asyncio.wait_for(await link.send(reference(topic, 0, name, size), 0), 30)
            assert appended(answer) == (ErrorCode.KAFKA_STORAGE_ERROR, -1), name
        assert end_offset(cluster, topic) == 0
        answer = await asyncio.wait_for(await link.send(reference(topic, 0, sound, len(records)), 0), 30)
        assert appended(answer) == (ErrorCode.NONE, 0)
    finally:
        link.close()
    assert end_offset(cluster, topic) == 1


def end_offset(cluster, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "end-offsets"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[1]
    finally:
        consumer.close()


@pytest.mark.parametrize("victim", [1, 0], ids=["owner-in-zone-b", "zone-a-broker"])
def test_on_object_storage_a_broker_killed_under_a_zone_producer_loses_nothing_and_stores_each_record_once(
        zoned_on_s3, victim):
    """kill -9 of a broker while an idempotent acks=all producer in zone a writes to partitions
    owned in every zone.

    The owner in zone b: the producer knows only the zone-a broker, which sends zone b's
    partitions by reference, some sent and appended but not yet answered when the owner dies;
    its partitions move to the other brokers, which recover its ledgers from the bucket, and no
    client byte crosses zones. The zone-a broker: the producer knows every broker; references
    the zone-a broker staged in a WAL object and sent may or may not have been appended when it
    dies, and the producer sends those batches again to the owners, which recognise what they
    appended already (idempotence). Either way the producer sees retriable errors only, and
    every record is stored once, each acknowledged one at the offset it was acknowledged with."""
    cluster = zoned_on_s3
    topic = f"zoned-killed-{victim}"
    create(cluster, topic)
    bootstrap = ",".join(cluster.brokers[n].bootstrap for n in ([0] if victim else ZONES))
    survivors = set(ZONES) - {victim}
    crossed_before = cross_zone_client_bytes(cluster, survivors)
    writer = AckedProducer("confluent", bootstrap, topic, 3000, per_second=1000,
                           **{"client.id": "writer-a,kgate_az=a", "enable.idempotence": True}).start()
    wait_for(lambda: len(writer.acked) >= 500, 30, "acknowledgements through the zone-a broker")
    cluster.brokers[victim].kill()
    try:
        writer.join(150)
        assert not writer.failed, writer.failed[:3]
        assert len(writer.acked) == 3000
        stored = read_all(bootstrap, topic, PARTITIONS)
        check_delivery(stored, writer.acked)
        assert len(stored) == 3000, "a record stored twice"
        if victim:
            assert cross_zone_client_bytes(cluster, survivors) == crossed_before
    finally:
        restart(cluster, victim)


def test_on_object_storage_an_outage_under_a_zone_producer_loses_nothing_and_stores_each_record_once(
        zoned_on_s3, seaweedfs):
    """Object storage stopped (SIGSTOP of the engine) for OUTAGE_SECONDS while a zone-a idempotent
    producer writes through the zone-a broker to partitions owned in every zone: references wait
    for their WAL object, or for the owner to read it, and the owners' appends wait for their own
    WAL. Acknowledgements stop, then resume by themselves; the producer sees retriable errors
    only, and every record is stored once, each acknowledged one at its offset."""
    cluster = zoned_on_s3
    topic = "zoned-outage"
    writer, crossed_before = start_zone_writer(cluster, topic)
    wait_for(lambda: len(writer.acked) >= 600, 60, "acknowledgements before the outage")
    seaweedfs.process.send_signal(signal.SIGSTOP)
    try:
        resume_at = time.monotonic() + OUTAGE_SECONDS  # the outage lasts its length whatever happens meanwhile
        while time.monotonic() < resume_at:
            assert all(broker.alive() for broker in cluster.brokers.values()), "a broker exited in the outage"
            time.sleep(0.5)
        acked_during = len(writer.acked)
    finally:
        seaweedfs.process.send_signal(signal.SIGCONT)
    wait_for(lambda: len(writer.acked) > acked_during, 60, "acknowledgements after the outage")
    check_zone_writer(cluster, topic, writer, crossed_before)


OUTAGE_SECONDS = 10
ZONE_WRITES = 3000


def start_zone_writer(cluster: KgateCluster, topic: str) -> tuple[AckedProducer, float]:
    """A fresh topic owned in every zone, written by an idempotent producer of zone a that knows
    only the zone-a broker (300 records a second); and the client bytes that crossed zones so far
    (the module's brokers count from their start)."""
    create(cluster, topic)
    crossed_before = cross_zone_client_bytes(cluster)
    writer = AckedProducer("confluent", cluster.brokers[0].bootstrap, topic, ZONE_WRITES, per_second=300,
                           **{"client.id": "writer-a,kgate_az=a", "enable.idempotence": True}).start()
    return writer, crossed_before


def check_zone_writer(cluster: KgateCluster, topic: str, writer: AckedProducer, crossed_before: float) -> None:
    """Its end: retriable errors only, every record acknowledged and stored once (each acknowledged
    one at its offset), and no more client bytes across zones."""
    writer.join(150)
    assert not writer.failed, writer.failed[:3]
    assert len(writer.acked) == ZONE_WRITES
    stored = read_all(cluster.bootstrap, topic, PARTITIONS)
    check_delivery(stored, writer.acked)
    assert len(stored) == ZONE_WRITES, "a record stored twice"
    assert cross_zone_client_bytes(cluster) == crossed_before


def test_on_object_storage_a_slow_store_under_a_zone_producer_slows_acknowledgements_and_loses_nothing(
        zoned_behind_a_proxy):
    """Object storage slow, not stopped: every piece of every object-store request and answer of
    the brokers held back 200-400 ms (by the proxy they reach it through) while a zone-a
    idempotent producer writes 900 records through the zone-a broker to partitions owned in
    every zone. WAL objects, the owners' reads of staged sets and the zone brokers' reads take
    a second or more each: acknowledgements go on coming all along (never STALL_SECONDS without
    one); the producer sees retriable errors only, and every record is stored once, each
    acknowledged one at its offset, with no client byte crossing zones."""
    cluster, s3_proxy = zoned_behind_a_proxy
    topic = "zoned-slow"
    writer, crossed_before = start_zone_writer(cluster, topic)
    wait_for(lambda: len(writer.acked) >= 300, 60, "acknowledgements before the store slows down")
    s3_proxy.set(delay_ms=200, jitter_ms=200)
    try:
        goal = len(writer.acked) + 900
        while len(writer.acked) < goal:
            before = len(writer.acked)
            wait_for(lambda before=before: len(writer.acked) > before, STALL_SECONDS,
                     "acknowledgements while the store is slow")
    finally:
        s3_proxy.set(delay_ms=0, jitter_ms=0)
    check_zone_writer(cluster, topic, writer, crossed_before)


STALL_SECONDS = 30


def restart(cluster: KgateCluster, node_id: int) -> None:
    """Start a killed broker again and wait until every broker lists all three, for the module's next test."""
    cluster.brokers[node_id].restart(timeout=60)
    cluster.wait_live(set(ZONES), timeout=60)


def owned_by(leaders: dict[int, int], node_id: int, at_least: int) -> list[int]:
    owned = sorted(p for p, leader in leaders.items() if leader == node_id)
    assert len(owned) >= at_least, f"broker {node_id} owns {owned} of {leaders}"
    return owned


def test_several_partitions_of_one_owner_go_in_one_reference_and_are_each_answered_on_their_own(zoned_on_s3):
    """A Produce to the zone-a broker naming three partitions broker b owns, the middle one's
    batch damaged (its CRC fails at the owner): b is sent one reference for the three, appends
    the two good batches and refuses the damaged one, and each partition's answer is its own."""
    cluster, topic = zoned_on_s3, "zoned-grouped"
    owned = owned_by(create(cluster, topic, 9), 1, 3)[:3]
    good = build_batch([b"one", b"two"])
    damaged = bytearray(good)
    damaged[-1] ^= 0xFF
    before = requests_by_api(cluster).get(str(KGATE_PRODUCE_REFERENCE), 0)
    batches = dict(zip(owned, (good, bytes(damaged), good), strict=True))
    with Wire(cluster.brokers[0].bootstrap, client_id="grouped,kgate_az=a") as wire:
        answer = wire.call(ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30_000, topic_data=[
            ProduceRequest.TopicProduceData(name=topic, partition_data=[
                ProduceRequest.TopicProduceData.PartitionProduceData(index=p, records=batches[p]) for p in owned])]), 9)
    got = {p.index: (ErrorCode(p.error_code), p.base_offset) for t in answer.responses for p in t.partition_responses}
    assert got == {owned[0]: (ErrorCode.NONE, 0), owned[1]: (ErrorCode.CORRUPT_MESSAGE, -1),
                   owned[2]: (ErrorCode.NONE, 0)}
    assert requests_by_api(cluster).get(str(KGATE_PRODUCE_REFERENCE), 0) - before == 1
    assert {p: end for p, end in end_offsets(cluster, topic, owned).items()} == {owned[0]: 2, owned[1]: 0,
                                                                                 owned[2]: 2}


def end_offsets(cluster, topic: str, partitions: list[int]) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "ends"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
    finally:
        consumer.close()


def test_pipelined_produces_by_reference_are_appended_in_the_order_they_were_sent(zoned_on_s3):
    """Eight Produce requests to one partition broker b owns, sent to the zone-a broker one after
    the other without waiting for answers: each is appended after the one sent before it."""
    cluster, topic = zoned_on_s3, "zoned-pipelined"
    partition = owned_by(create(cluster, topic, 3), 1, 1)[0]
    with Wire(cluster.brokers[0].bootstrap, client_id="pipelined,kgate_az=a") as wire:
        sent = []
        for n in range(8):
            request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30_000, topic_data=[
                ProduceRequest.TopicProduceData(name=topic, partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(
                        index=partition, records=build_batch([b"%d-%d" % (n, i) for i in range(n + 1)]))])])
            sent.append((request, wire.send(request, 9)))
        offsets = [wire.read(request, 9, correlation).responses[0].partition_responses[0] for request, correlation
                   in sent]
    assert [(ErrorCode(o.error_code), o.base_offset) for o in offsets] == \
        [(ErrorCode.NONE, n * (n + 1) // 2) for n in range(8)]


def consume_for(consumer, seconds: float) -> list:
    """What ``consumer`` receives in ``seconds`` of polling."""
    got = []
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        got += consumer.consume(10_000, timeout=min(left, 0.5))
    return got


def write(cluster, topic: str, records: list[tuple[int, bytes]]) -> None:
    """Each (partition, value) written by a producer with no zone (straight to the owners), acknowledged."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    try:
        for partition, payload in records:
            producer.produce(topic, payload, partition=partition)
        assert producer.flush(30) == 0
    finally:
        producer.close()


def test_a_tail_read_through_the_zone_broker_waits_on_the_owners_standing_poll(zoned_on_s3):
    """A zone-a consumer tails partitions brokers b and c own through the zone-a broker. While
    nothing is written its fetches keep waiting and coming back, but the owners are not asked
    per fetch: one standing poll per owner holds them. Records then written (to the owners) wake it
    and it reads each, none of their bytes from another zone."""
    cluster, topic = zoned_on_s3, "zoned-tail"
    leaders = create(cluster, topic)
    elsewhere = sorted(p for p, leader in leaders.items() if leader != 0)
    consumer = Consumer({"bootstrap.servers": cluster.brokers[0].bootstrap, "group.id": "tail",
                         "client.rack": "a", "client.id": "tail,kgate_az=a", "fetch.wait.max.ms": 50})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in elsewhere])
        assert consume_for(consumer, 1) == []
        asked = requests_by_api(cluster)
        assert consume_for(consumer, 3) == []  # some 60 fetches, each waiting up to 50 ms
        now = requests_by_api(cluster)
        fetches = now["Fetch"] - asked["Fetch"]
        polls = now.get(str(KGATE_READ_END), 0) - asked.get(str(KGATE_READ_END), 0)
        assert fetches >= 10 and polls <= 4, f"{polls} KgateReadEnd requests for {fetches} fetches"
        out_before = fetched_bytes(cluster, topic)
        write(cluster, topic, [(p, b"tail-%d" % n) for n, p in enumerate(elsewhere)])
        got = read(consumer, len(elsewhere), timeout=30)
        assert sorted(m.value for m in got) == sorted(b"tail-%d" % n for n in range(len(elsewhere)))
        out = fetched_bytes(cluster, topic)
        assert out[0] > out_before[0] and all(out[n] == out_before[n] for n in (1, 2))
    finally:
        consumer.close()


def test_after_a_move_the_zone_broker_serves_the_new_owners_high_watermark(zoned_on_s3):
    """A zone-a consumer reads a partition broker b owns through the zone-a broker (its standing
    poll to b holds it); AlterPartitionReassignments moves it to c, and records written there
    afterwards reach the consumer, still through the zone-a broker: the high watermark learned
    from b was dropped and c asked."""
    cluster, topic = zoned_on_s3, "zoned-moved"
    partition = owned_by(create(cluster, topic, 3), 1, 1)[0]
    write(cluster, topic, [(partition, b"before-%d" % n) for n in range(5)])
    consumer = Consumer({"bootstrap.servers": cluster.brokers[0].bootstrap, "group.id": "moved",
                         "client.rack": "a", "client.id": "moved,kgate_az=a", "fetch.wait.max.ms": 100,
                         "topic.metadata.refresh.interval.ms": 1000})
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        assert [m.value for m in read(consumer, 5)] == [b"before-%d" % n for n in range(5)]
        asked_c = value(scrape(cluster.brokers[2].metrics_url), "kgate_requests_total", api=str(KGATE_READ_END),
                        version="0")
        assert reassign(cluster, 0, {(topic, partition): [2]}) == {(topic, partition): ErrorCode.NONE}
        wait_for(lambda: cluster.leaders(topic)[partition] == 2, 30, "the partition on broker c")
        out_before = fetched_bytes(cluster, topic)[0]
        write(cluster, topic, [(partition, b"after-%d" % n) for n in range(5)])
        assert [m.value for m in read(consumer, 5)] == [b"after-%d" % n for n in range(5)]
        assert fetched_bytes(cluster, topic)[0] > out_before
        assert value(scrape(cluster.brokers[2].metrics_url), "kgate_requests_total", api=str(KGATE_READ_END),
                     version="0") > asked_c
    finally:
        consumer.close()


V0_PEER_BROKER = os.path.join(os.path.dirname(os.path.dirname(__file__)), "support", "v0_peer_broker.py")


def test_in_a_rolling_upgrade_a_zone_broker_produces_and_reads_by_version_0_through_an_owner_not_upgraded(
        tmp_path, zookeeper, s3_engine):
    """On S3, broker 1 (zone b) serves only version 0 of KgateProduceReference and KgateReadEnd,
    as a broker not upgraded yet (tests/support/v0_peer_broker.py: the real broker, its table of
    internal versions narrowed). An idempotent producer and a consumer in zone a, knowing only
    broker 0, write and read every partition, broker 1's too: every acknowledged record is read
    once, in order, at its offset; no client byte crossed zones; broker 1 was sent references
    and asked for its high watermarks, and never a version it does not serve."""
    topic = "upgrading"
    with cluster_on_s3(str(tmp_path), zookeeper, s3_engine.endpoint) as cluster:
        cluster.start_broker(0, **{"broker.rack": "a", "kgate.metrics.listener": "127.0.0.1:0"})
        cluster.start_broker(1, wrapper=(sys.executable, V0_PEER_BROKER),
                             **{"broker.rack": "b", "kgate.metrics.listener": "127.0.0.1:0"})
        cluster.wait_live({0, 1})
        owned_by(create(cluster, topic), 1, 1)
        count = 3000
        reader = ZoneReader("confluent", cluster.brokers[0].bootstrap, topic, "a", count, 150).start()
        writer = AckedProducer("confluent", cluster.brokers[0].bootstrap, topic, count, per_second=1500,
                               **{"client.id": "writer-a,kgate_az=a", "enable.idempotence": True,
                                  "linger.ms": 5}).start()
        writer.join(150)
        assert not writer.failed, writer.failed[:3]
        assert len(writer.acked) == count
        reader.join()
        assert not reader.failed, reader.failed[:3]
        check_read_once_in_order(reader.got, writer.acked)
        assert cross_zone_client_bytes(cluster) == 0
        served = {(dict(labels)["api"], dict(labels)["version"]): n
                  for (name, labels), n in scrape(cluster.brokers[1].metrics_url).items()
                  if name == "kgate_requests_total"}
        for api in (str(KGATE_PRODUCE_REFERENCE), str(KGATE_READ_END)):
            assert served.get((api, "0"), 0) > 0 and (api, "1") not in served, served
        with open(cluster.brokers[1].log_path) as log:
            assert "unsupported request" not in log.read()
