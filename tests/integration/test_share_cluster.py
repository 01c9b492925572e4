"""Share groups on a cluster of three kgate brokers, with librdkafka's ``ShareConsumer`` (confluent-kafka).

A share-partition lives in three places, each placed on its own: its records and live
delivery state with the owner of the topic partition, its persisted state with the owner of
its ``__share_group_state`` partition, and the group's membership with the owner of its
``__consumer_offsets`` partition. The group is chosen so that the three are different
brokers. A consumer acquires records and is killed holding them; then the topic partition's
owner is killed too (kill -9). The next owner loads the state the dead one wrote through
the share-state APIs and hands the unfinished records out again, before their lock (a
minute) could have run out, and every record is accepted exactly once; the group's
coordinator describes the offsets from the state's owner. Then the state's
owner is killed, and the records produced after are still accepted exactly once, their
state written to the state partition's next owner.

What the coordinator decides reaches the topic partition's owner: a member killed holding
records is removed when its session expires, and what it held goes back at once, well
before its lock runs out; a deleted group is forgotten there, so a group made again under
its id starts afresh.
"""
import json
import select
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka import KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType
from kafka.protocol.metadata import MetadataRequest

from kgate.gateway.groups.placement import partition_for
from kgate.gateway.shares.records import SharePartitionKey
from kgate.metadata.assignment import assign
from kgate.protocol.messages import DescribeShareGroupOffsetsRequest
from tests.support.broker_process import terminate
from tests.support.cluster import KgateCluster
from tests.support.member_process import wait_for
from tests.support.wire import Wire
from tests.support.zookeeper import ensemble  # noqa: F401 - a fixture

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("share-cluster")]

STATE_PARTITIONS, OFFSETS_PARTITIONS = 3, 6
RECORDS = 200
LOCK_MS = 60_000  # the group's lock: records come back sooner only because their owner moved
SETTINGS = {"share.coordinator.state.topic.num.partitions": STATE_PARTITIONS,
            "offsets.topic.num.partitions": OFFSETS_PARTITIONS,
            "group.share.heartbeat.interval.ms": 500, "group.share.min.heartbeat.interval.ms": 500,
            "group.share.session.timeout.ms": 6000, "group.share.min.session.timeout.ms": 6000}

# A consumer that acquires a batch, says which, and holds it unacknowledged until it is killed.
HOLDER = """
import json, sys, threading
from confluent_kafka import ShareConsumer
consumer = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                          "share.acknowledgement.mode": "explicit"})
consumer.subscribe([sys.argv[3]])
while True:
    held = [(m.partition(), m.offset(), m.delivery_count()) for m in consumer.poll(1.0) if m.error() is None]
    if held:
        print(json.dumps(held), flush=True)
        threading.Event().wait()
"""


@pytest.fixture
def cluster(tmp_path, ensemble):  # noqa: F811
    started = KgateCluster(str(tmp_path), ensemble.address, f"/kgate-{uuid.uuid4().hex[:8]}", 3, **SETTINGS).start()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def steady_cluster(tmp_path_factory, ensemble):  # noqa: F811
    """A cluster no test kills a broker of."""
    started = KgateCluster(str(tmp_path_factory.mktemp("steady")), ensemble.address,
                           f"/kgate-{uuid.uuid4().hex[:8]}", 3, **SETTINGS).start()
    yield started
    started.stop()


class Accepter:
    """A share consumer accepting every record it gets; an acceptance counts once its commit succeeded."""

    def __init__(self, bootstrap: str, group: str, topic: str):
        self.consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                                       "share.acknowledgement.mode": "explicit",
                                       "topic.metadata.refresh.interval.ms": 1000})
        self.consumer.subscribe([topic])
        self.accepted: Counter[int] = Counter()
        self.delivery_counts: dict[int, int] = {}

    def __enter__(self) -> "Accepter":
        return self

    def __exit__(self, *exc) -> None:
        self.consumer.close()

    def round(self) -> int:
        """One poll and its acknowledgements; how many records came."""
        records = [m for m in self.consumer.poll(1.0) if m.error() is None]
        for record in records:
            self.consumer.acknowledge(record)
            self.delivery_counts[record.offset()] = max(self.delivery_counts.get(record.offset(), 0),
                                                        record.delivery_count())
        if records:
            try:
                committed = self.consumer.commit_sync(30)
            except KafkaException:
                return len(records)  # not known to be accepted: they come again
            done = {tp.partition for tp, error in committed.items() if error is None}
            self.accepted.update(record.offset() for record in records if record.partition() in done)
        return len(records)

    def until_quiet(self, quiet_rounds: int = 3, timeout: float = 60) -> None:
        """Until no record came for ``quiet_rounds`` polls in a row (what is left is held elsewhere)."""
        deadline, quiet = time.monotonic() + timeout, 0
        while quiet < quiet_rounds:
            assert time.monotonic() < deadline, f"records kept coming for {timeout} s"
            quiet = 0 if self.round() else quiet + 1

    def until_accepted(self, offsets: range, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not set(offsets) <= set(self.accepted) and time.monotonic() < deadline:
            self.round()
        missing = sorted(set(offsets) - set(self.accepted))
        assert not missing, f"{len(missing)} records never accepted, the first {missing[:10]}"


def placed(cluster: KgateCluster, topic: str) -> tuple[str, SharePartitionKey, dict[str, int]]:
    """A group whose share-partition of ``topic``-0 has its data, its state and its group
    coordinator on three different brokers, as every broker computes the owners."""
    def led():
        with Wire(cluster.bootstrap.split(",")[0]) as wire:
            [found] = wire.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                                allow_auto_topic_creation=False), 12).topics
        return found if not found.error_code and found.partitions[0].leader_id in cluster.brokers else None
    # One answer gives both the topic's id and its leader: a broker that has not yet seen the
    # new topic answers without either, and two asks may reach two brokers.
    described = wait_for(led, 60, f"a leader of {topic}", interval=0.25)
    brokers = sorted(cluster.brokers)
    data = described.partitions[0].leader_id
    for n in range(1000):
        group = f"sg-{topic}-{n}"
        key = SharePartitionKey(group, described.topic_id, 0)
        state = assign("__share_group_state", STATE_PARTITIONS, brokers)[
            partition_for(key.coordinator_key(), STATE_PARTITIONS)]
        coordinator = assign("__consumer_offsets", OFFSETS_PARTITIONS, brokers)[
            partition_for(group, OFFSETS_PARTITIONS)]
        if len({data, state, coordinator}) == 3:
            return group, key, {"data": data, "state": state, "coordinator": coordinator}
    raise AssertionError("no group places its share-partition on three brokers")


def produce(bootstrap: str, topic: str, first: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 60_000})
    for i in range(first, first + count):
        producer.produce(topic, key=str(i).encode(), value=b"v%d" % i, partition=0)
    assert producer.flush(60) == 0, "records undelivered"


def configure(cluster: KgateCluster, group: str) -> None:
    """The group reads from the start of the log, and locks records for LOCK_MS."""
    admin = cluster.admin()  # held: its futures fail once it is gone
    for future in admin.incremental_alter_configs([ConfigResource(
            ResourceType.GROUP, group, incremental_configs=[
                ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET),
                ConfigEntry("share.record.lock.duration.ms", str(LOCK_MS),
                            incremental_operation=AlterConfigOpType.SET)])]).values():
        future.result(timeout=30)


def placed_group(cluster: KgateCluster) -> tuple[str, str, SharePartitionKey, dict[str, int]]:
    """A fresh one-partition topic with RECORDS records, and a configured group placed by :func:`placed`."""
    topic = f"work-{uuid.uuid4().hex[:6]}"
    admin = cluster.admin()  # held: its futures fail once it is gone
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(timeout=30)
    group, key, owners = placed(cluster, topic)
    configure(cluster, group)
    produce(cluster.bootstrap, topic, 0, RECORDS)
    return topic, group, key, owners


@contextmanager
def holding(cluster: KgateCluster, group: str, topic: str) -> Iterator[tuple[subprocess.Popen, list[int]]]:
    """A HOLDER process and the offsets it holds; stopped by PID on the way out."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, cluster.bootstrap, group, topic],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([holder.stdout], [], [], 60)
        held = [offset for _, offset, _ in json.loads((holder.stdout.readline() if ready else "") or "[]")]
        assert held, f"the holder got nothing: {holder.stderr.read() if holder.poll() is not None else ''}"
        yield holder, held
    finally:
        terminate(holder, 5)


def test_unfinished_records_of_a_killed_owner_are_redelivered_by_the_next_and_each_is_accepted_once(cluster):
    topic, group, key, owners = placed_group(cluster)
    with holding(cluster, group, topic) as (holder, held):
        assert cluster.leaders("__share_group_state")[partition_for(key.coordinator_key(), STATE_PARTITIONS)] \
            == owners["state"], "the state partition's owner is the one every broker computes"
        with Accepter(cluster.bootstrap, group, topic) as accepter:
            accepter.until_quiet()
            assert not set(held) & set(accepter.accepted), "locked records went to nobody else"
            assert len(accepter.accepted) < RECORDS

            holder.kill()  # kill -9: what it holds stays acquired at the topic partition's owner
            holder.wait(10)
            cluster.brokers[owners["data"]].kill()
            survivors = set(cluster.brokers) - {owners["data"]}
            cluster.wait_live(survivors)
            accepter.until_accepted(range(RECORDS), timeout=LOCK_MS / 1000 * 0.75)
            assert cluster.leaders(topic)[0] in survivors
            assert set(accepter.accepted.values()) == {1}, "every record accepted exactly once"
            assert all(accepter.delivery_counts[offset] >= 2 for offset in held), \
                "the killed consumer's records came again, counted as delivered twice"

            # Asked of the group's coordinator, the offsets come from the state's owner (another broker).
            with Wire(cluster.brokers[owners["coordinator"]].bootstrap) as wire:
                D = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
                [described] = wire.call(DescribeShareGroupOffsetsRequest(groups=[D(group_id=group, topics=[
                    D.DescribeShareGroupOffsetsRequestTopic(topic_name=topic, partitions=[0])])]), 1).groups
            [[offsets]] = [t.partitions for t in described.topics]
            assert (offsets.error_code, offsets.start_offset, offsets.lag) == (0, RECORDS, 0)

            # The state's owner goes too: the records produced now are written to its next owner.
            cluster.brokers[owners["state"]].kill()
            cluster.wait_live(survivors - {owners["state"]})
            produce(cluster.bootstrap, topic, RECORDS, RECORDS)
            accepter.until_accepted(range(2 * RECORDS), timeout=60)
            assert set(accepter.accepted.values()) == {1}, "every record accepted exactly once"


def test_records_of_a_member_whose_session_expired_go_back_at_the_partition_owner(steady_cluster):
    """The member is removed by the group's coordinator, the records are held by another broker."""
    cluster = steady_cluster
    topic, group, _, owners = placed_group(cluster)
    with holding(cluster, group, topic) as (holder, held):
        holder.kill()  # kill -9: no leave; its session (6 s) expires at the coordinator
        holder.wait(10)
        with Accepter(cluster.bootstrap, group, topic) as accepter:
            # Half the lock: only the coordinator's word can have freed them so soon.
            accepter.until_accepted(range(RECORDS), timeout=LOCK_MS / 1000 / 2)
    assert set(accepter.accepted.values()) == {1}, "every record accepted exactly once"
    assert all(accepter.delivery_counts[offset] == 2 for offset in held), "the held records came again"
    assert cluster.leaders(topic)[0] == owners["data"] != owners["coordinator"]


def test_a_deleted_group_made_again_starts_afresh_at_the_partition_owner(steady_cluster):
    cluster = steady_cluster
    topic, group, _, owners = placed_group(cluster)
    with Accepter(cluster.bootstrap, group, topic) as first:
        first.until_accepted(range(RECORDS), timeout=60)
    # Its consumer closed, it left the group: the group is empty, so it may be deleted.
    admin = cluster.admin(cluster.brokers[owners["coordinator"]].bootstrap)
    deadline = time.monotonic() + 30
    while True:
        try:
            admin.delete_consumer_groups([group])[group].result(timeout=30)
            break
        except KafkaException as error:  # NON_EMPTY_GROUP until the leave is applied
            assert time.monotonic() < deadline, f"the group could not be deleted: {error}"
            time.sleep(0.2)
    configure(cluster, group)
    with Accepter(cluster.bootstrap, group, topic) as again:
        again.until_accepted(range(RECORDS), timeout=60)
    assert set(again.accepted.values()) == {1}
    assert set(again.delivery_counts.values()) == {1}, "the new group's first deliveries"
