"""Self-balancing: three brokers over ZooKeeper and one shared ledger directory, one of them
given every hot partition with AlterPartitionReassignments, real producers and a consumer
running while the balancer spreads the partitions.

The load each broker carries is measured from its own Prometheus counters (record-set
bytes in and out of the hot topic over a window), not from the load reports the
balancer plans from.
"""
import json
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaPartition
from kafka.protocol.admin import AlterPartitionReassignmentsRequest as APR
from kazoo.client import KazooClient

from kgate.metadata.assignment import assign
from kgate.protocol.error_codes import ErrorCode
from tests.integration.test_broker_configs import CLUSTER_DEFAULT, SET, alter
from tests.integration.test_cli import client
from tests.support.cluster import AckedProducer, KgateCluster, check_delivery, spread
from tests.support.member_process import wait_for
from tests.support.scrape import scrape, value
from tests.support.wire import Wire
from tests.support.zookeeper import Ensemble

# One worker runs the module, so its module-scoped servers start once (scripts/test: --dist loadgroup).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("balancing")]
HOT_PARTITIONS = 6
# Fast rounds so a test sees several: a report a second, a round a second, two moves a round.
BALANCER = {"kgate.balancer.load.report.interval.ms": 1000, "kgate.balancer.interval.ms": 1000,
            "kgate.balancer.max.moves": 2, "kgate.balancer.move.cooldown.ms": 4000,
            "kgate.balancer.tolerance.percent": 10}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Three brokers with metrics endpoints and the balancer off until a test switches it on."""
    zookeeper = Ensemble(str(tmp_path_factory.mktemp("zookeeper")), size=1).start()
    chroot = f"/kgate-{uuid.uuid4().hex[:8]}"
    cluster = KgateCluster(str(tmp_path_factory.mktemp("balancing")), zookeeper.address, chroot, **BALANCER)
    try:
        for node_id in range(3):
            cluster.start_broker(node_id, **{"kgate.metrics.listener": "127.0.0.1:0"})
        cluster.wait_live({0, 1, 2})
        cluster.zookeeper_chroot = f"{zookeeper.address}{chroot}"
        yield cluster
    finally:
        cluster.stop()
        zookeeper.stop()


@pytest.fixture(scope="module")
def admin(cluster):
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap.split(","), request_timeout_ms=15_000)
    yield client
    client.close()


def create(cluster, name, partitions):
    client = cluster.admin()  # held: a client collected early cancels its futures
    for future in client.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(timeout=30)
    return cluster.wait_leaders(name, partitions, set(cluster.brokers))


def set_balancer(cluster, enabled: bool) -> None:
    """Switch the balancer on or off for every broker (the cluster-wide dynamic default)."""
    with Wire(cluster.bootstrap.split(",")[0]) as wire:
        assert alter(wire, CLUSTER_DEFAULT, ("kgate.balancer.enable", SET, str(enabled).lower())) == ErrorCode.NONE


def balanced(cluster, topic) -> dict[int, float] | None:
    """The brokers' loads over a short window if each is within 20% of their mean, else None."""
    loads = cluster.load_over(topic, 2)
    return loads if spread(loads) <= 0.2 else None


class Reader:
    """A consumer assigned every partition from offset 0, keeping what it reads and every error."""

    def __init__(self, bootstrap: str, topic: str, partitions: int):
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                                  "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000})
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self.read: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        self.errors: list[KafkaError] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="reader", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.is_set():
            for message in self.consumer.consume(1000, timeout=0.2):
                if message.error() is not None:
                    self.errors.append(message.error())
                else:
                    self.read[message.partition()].append((message.offset(), message.key()))

    def has(self, acked) -> bool:
        ends = {}
        for partition, offset, _ in acked:
            ends[partition] = max(ends.get(partition, -1), offset)
        return all(self.read[p] and self.read[p][-1][0] >= end for p, end in ends.items())

    def close(self) -> None:
        self._done.set()
        self._thread.join(10)
        self.consumer.close()


def test_the_balancer_spreads_the_hot_partitions_one_broker_was_given(cluster, admin):
    leaders = create(cluster, "hot", HOT_PARTITIONS)
    assert set(admin.alter_partition_reassignments(
        {KafkaPartition("hot", p): [0] for p in range(HOT_PARTITIONS)}).values()) == {None}
    reassigned = {("hot", p) for p, leader in leaders.items() if leader != 0}
    wait_for(lambda: set(cluster.leaders("hot").values()) == {0}, 30, "every hot partition on broker 0")
    wait_for(lambda: admin.list_partition_reassignments() == {}, 30, "the reassignments to complete")
    producer = AckedProducer("confluent", cluster.bootstrap, "hot", 60_000, per_second=800, value_size=200,
                             **{"enable.idempotence": True}).start()
    reader = Reader(cluster.bootstrap, "hot", HOT_PARTITIONS)
    try:
        wait_for(lambda: len(producer.acked) > 1000, 30, "acknowledgements")
        before = cluster.load_over("hot", 2)
        assert before[0] == sum(before.values()) > 0, before
        set_balancer(cluster, True)
        started = time.monotonic()
        after = wait_for(lambda: balanced(cluster, "hot"), 60, "every broker within 20% of the mean load")
        balanced_in = time.monotonic() - started
    finally:
        set_balancer(cluster, False)
        producer.stop().join(120)
        wait_for(lambda: reader.has(producer.acked), 60, "the reader to reach every acknowledgement")
        reader.close()
    assert not producer.failed, producer.failed[:3]
    assert {partition for partition, _, _ in producer.acked} == set(range(HOT_PARTITIONS))
    # Every acknowledged record read exactly once, in order, in each partition.
    check_delivery({(p, offset): key for p, records in reader.read.items() for offset, key in records},
                   producer.acked)
    for p, records in reader.read.items():
        assert [offset for offset, _ in records] == list(range(len(records))), f"partition {p} read out of order"
    assert all(error.retriable() for error in reader.errors), [e.str() for e in reader.errors if not e.retriable()]
    samples = scrape(cluster.brokers[0].metrics_url)
    moves = value(samples, "kgate_balancer_moves_total", reason="load")
    assert moves >= 2, f"balanced in {balanced_in:.1f} s by {moves} moves: {after}"
    # Visible: `kgate brokers moves` lists the reassignments and the balancer's moves.
    listed = json.loads(client(cluster.brokers[1], "brokers", "moves", "--output", "json").stdout)
    assert listed and {m["reason"] for m in listed} <= {"load", "count", "reassignment"}
    # (It lists the last ten: the balancer's moves for the partition count may push the first out.)
    if moves + value(samples, "kgate_balancer_moves_total", reason="count") + len(reassigned) <= len(listed):
        assert [m["reason"] for m in listed].count("load") == moves
        assert {(m["topic"], m["partition"]) for m in listed if m["reason"] == "reassignment"} == reassigned


def test_brokers_list_shows_each_brokers_load(cluster):
    """Traffic to one partition: its owner lists its bytes in and out, the others none of it."""
    leaders = create(cluster, "shown", 1)
    producer = AckedProducer("confluent", cluster.bootstrap, "shown", 10_000, per_second=250, value_size=1000).start()
    listed = {}

    def reported():
        listed.update({b["id"]: b for b in json.loads(
            client(cluster.brokers[2], "brokers", "list", "--output", "json").stdout)["brokers"]})
        return listed[leaders[0]]["bytes_in_per_second"] > 0 or None
    try:
        wait_for(reported, 30, "the owner's load report to show the produced bytes")
    finally:
        producer.stop().join()
    assert not producer.failed
    assert set(listed) == {0, 1, 2} and all(b["partitions"] is not None for b in listed.values())


def reassign(cluster, version: int, wanted: dict, **fields) -> dict:
    """AlterPartitionReassignments of ``{(topic, partition): replicas}``: each partition's error code."""
    by_topic: dict[str, list] = {}
    for (topic, partition), replicas in wanted.items():
        by_topic.setdefault(topic, []).append(APR.ReassignableTopic.ReassignablePartition(
            partition_index=partition, replicas=replicas))
    with Wire(cluster.bootstrap.split(",")[0]) as wire:
        answer = wire.call(APR(timeout_ms=10_000, topics=[APR.ReassignableTopic(name=name, partitions=parts)
                                                          for name, parts in by_topic.items()], **fields), version)
    assert answer.error_code == ErrorCode.NONE
    return {(t.name, p.partition_index): p.error_code for t in answer.responses for p in t.partitions}


def test_reassignments_are_refused_as_kafka_refuses_them(cluster, admin):
    leaders = create(cluster, "refused", 2)
    assert reassign(cluster, 0, {("refused", 0): [], ("refused", 1): [1, 1], ("refused", 5): [1],
                                 ("no-such-topic", 0): [1]}) == {
        ("refused", 0): ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
        ("refused", 1): ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
        ("refused", 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert reassign(cluster, 0, {("refused", 0): [7], ("refused", 1): None}) == {
        ("refused", 0): ErrorCode.INVALID_REPLICATION_ASSIGNMENT,
        ("refused", 1): ErrorCode.NO_REASSIGNMENT_IN_PROGRESS}
    assert reassign(cluster, 1, {("refused", 0): [0, 1]}, allow_replication_factor_change=False) == {
        ("refused", 0): ErrorCode.INVALID_REPLICATION_FACTOR}
    assert admin.list_partition_reassignments({"refused": [0, 1]}) == {}
    assert cluster.leaders("refused") == leaders  # nothing moved


def placed_topics(zookeeper) -> set[str]:
    """The topics with placement overrides, as the metadata store holds them."""
    return set(json.loads(zookeeper.get("/placements")[0])) if zookeeper.exists("/placements") else set()


def test_a_deleted_topics_overrides_go_with_it(cluster, admin):
    leaders = create(cluster, "gone", 1)
    target = (leaders[0] + 1) % 3
    assert admin.alter_partition_reassignments({KafkaPartition("gone", 0): [target]}) == \
        {KafkaPartition("gone", 0): None}
    wait_for(lambda: cluster.leaders("gone")[0] == target, 30, "the partition on its new broker")
    zookeeper = KazooClient(hosts=cluster.zookeeper_chroot)
    zookeeper.start()
    try:
        assert "gone" in placed_topics(zookeeper)
        client = cluster.admin()
        for future in client.delete_topics(["gone"]).values():
            future.result(timeout=30)
        wait_for(lambda: "gone" not in placed_topics(zookeeper), 30, "the deleted topic's override to go")
    finally:
        zookeeper.stop()


def test_a_partition_placed_on_a_broker_that_dies_falls_back_to_the_hash(cluster, admin):
    """Last in the module: it kills broker 2."""
    leaders = create(cluster, "placed", 3)
    moved = next(p for p, leader in leaders.items() if leader != 2)
    assert admin.alter_partition_reassignments({KafkaPartition("placed", moved): [2]}) == \
        {KafkaPartition("placed", moved): None}
    wait_for(lambda: cluster.leaders("placed")[moved] == 2, 30, "the partition on broker 2")
    zookeeper = KazooClient(hosts=cluster.zookeeper_chroot)
    zookeeper.start()
    try:
        cluster.brokers[2].kill()
        after = cluster.wait_leaders("placed", 3, {0, 1}, timeout=30)
        assert after[moved] == assign("placed", 3, [0, 1])[moved]  # its hashed owner among the live brokers
        # The next balancer round forgets the dead broker's override: it would not pull the
        # partition back when it returns.
        set_balancer(cluster, True)
        wait_for(lambda: "placed" not in placed_topics(zookeeper), 30, "the dead broker's override to be dropped")
    finally:
        set_balancer(cluster, False)
        zookeeper.stop()
