"""MirrorMaker 2 in dedicated mode onto kgate: from one kgate broker to another, and from Apache
Kafka 4.4 to kgate. One MM2 process per route, started once for the module.

Before MM2 starts, the source topic (three partitions, a retention.ms of its own) holds a first
batch of keyed records with headers, which a consumer group has read and committed; a second
batch follows once MM2 has checkpointed the group. On the target, the copy ``source.<topic>``
must have the source's partitions and its retention.ms (and follow a change of it), hold every
record once and in order per partition, MM2's internal topics must be created with the
partitions MM2 asks for and compacted, and the group's offsets, as MM2
syncs them to the target (``sync.group.offsets.enabled``), must be the translation its checkpoint
topic holds: a consumer of the group on the target then reads exactly the second batch.
"""
import uuid
from dataclasses import dataclass

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from kgate.mirror.mm2_formats import Checkpoint, Heartbeat, checkpoints_topic, offset_syncs_topic
from tests.support import records as R
from tests.support.broker_process import BrokerProcess
from tests.support.clients import ConfluentClient, create_topic, end_offsets
from tests.support.kafka_reference import kafka_broker  # noqa: F401 - a fixture
from tests.support.member_process import wait_for
from tests.support.mirror_maker import LIB, SOURCE, TARGET, MirrorMaker

# One worker runs the module, so each route's brokers and MM2 start once (--dist loadgroup).
pytestmark = pytest.mark.xdist_group("mirror_maker")
PARTITIONS = 3
# A century, then two: the test records are dated 2023 (tests/support/records.py), and a shorter
# retention would let the source's retention check delete them before MM2 reads them.
RETENTION_MS, CHANGED_RETENTION_MS = "3155760000000", "6311520000000"
FIRST, SECOND = 90, 60
# Checkpoints, offset syncs to the target group, heartbeats, topic configs, and topic and group
# discovery every second, and the source task's offsets (whose commit writes its delayed offset
# syncs) flushed as often, not MM2's defaults of 60 s and 10 minutes. The worker's settings are the target cluster's
# (MirrorMakerConfig.workerConfig): a top-level offset.flush.interval.ms would not reach it.
MM2_SETTINGS = {
    "emit.checkpoints.interval.seconds": "1",
    "sync.group.offsets.enabled": "true",
    "sync.group.offsets.interval.seconds": "1",
    "emit.heartbeats.interval.seconds": "1",
    "refresh.topics.interval.seconds": "1",
    "refresh.groups.interval.seconds": "1",
    "sync.topic.configs.interval.seconds": "1",
    f"{TARGET}.offset.flush.interval.ms": "1000",
}


@dataclass
class Route:
    source: str
    target: str
    topic: str
    group: str
    mirror_maker: MirrorMaker
    produced: int

    @property
    def copy(self) -> str:
        return f"{SOURCE}.{self.topic}"

    def wait(self, condition, timeout: float, what: str):
        """wait_for, with MM2's ERROR and WARN lines in the message if it times out."""
        try:
            return wait_for(condition, timeout, what)
        except AssertionError as timed_out:
            raise AssertionError(f"{timed_out}\n{self.mirror_maker.errors()[-6000:]}") from None

    def wait_copied(self) -> list[int]:
        """Every record of the source in the copy (by end offsets: the copy is 1-1 here); the ends."""
        ends = end_offsets(self.source, self.topic, PARTITIONS)
        self.wait(lambda: end_offsets(self.target, self.copy, PARTITIONS) == ends, 60, f"{self.copy} at {ends}")
        return ends


def consume_as_group(bootstrap: str, topic: str, group: str, count: int) -> list[R.Consumed]:
    """``count`` records read by a member of ``group`` from its committed offsets, then committed."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    read: list[R.Consumed] = []

    def enough():
        for message in consumer.consume(500, timeout=0.5):
            assert message.error() is None, message.error()
            read.append(R.Consumed(message.partition(), message.offset(), message.key(), message.value(),
                                   tuple(message.headers() or ()), message.timestamp()[1]))
        return len(read) >= count
    try:
        wait_for(enough, 60, f"{count} records of {topic} read by {group}")
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return read


def committed(bootstrap: str, group: str, topic: str) -> list[int]:
    """The group's committed offsets, read with an admin client (-1001: none)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(PARTITIONS)])
    result = admin.list_consumer_group_offsets([request])[group].result(timeout=30)
    return [tp.offset for tp in sorted(result.topic_partitions, key=lambda tp: tp.partition)]


def read_all(bootstrap: str, topic: str) -> list[tuple[bytes, bytes]]:
    """(key, value) of every record of a one-partition topic, to its end."""
    end = end_offsets(bootstrap, topic, 1)[0]
    return [(r.key, r.value) for r in ConfluentClient.consume(bootstrap, topic, 1, end, timeout=30)]


@pytest.fixture(scope="module", params=["kgate-to-kgate", "kafka-to-kgate"])
def route(request, tmp_path_factory):
    """A source (kgate, or Kafka 4.4) holding the first batch, read by the group; a kgate target; MM2."""
    if not LIB.is_dir():
        pytest.fail("MirrorMaker 2 is not installed: run scripts/setup-ecosystem")
    directory = tmp_path_factory.mktemp(request.param)
    brokers = [BrokerProcess(str(directory / "target")).start()]
    try:
        if request.param == "kafka-to-kgate":
            source = request.getfixturevalue("kafka_broker").bootstrap
        else:
            brokers.append(BrokerProcess(str(directory / "source")).start())
            source = brokers[1].bootstrap
        name = uuid.uuid4().hex[:8]
        topic, group = f"orders-{name}", f"billing-{name}"
        create_topic(source, topic, PARTITIONS, {"retention.ms": RETENTION_MS})
        ConfluentClient.produce(source, topic, FIRST)
        consume_as_group(source, topic, group, FIRST)
        mirror_maker = MirrorMaker(directory / "mm2", source, brokers[0].bootstrap, {
            **MM2_SETTINGS, f"{SOURCE}->{TARGET}.topics": topic, f"{SOURCE}->{TARGET}.groups": group}).start()
        try:
            yield Route(source, brokers[0].bootstrap, topic, group, mirror_maker, FIRST)
        finally:
            mirror_maker.stop()
    finally:
        for broker in brokers:
            broker.stop()


def retention_ms(admin: AdminClient, topic: str) -> str:
    resource = ConfigResource("TOPIC", topic)
    return admin.describe_configs([resource])[resource].result(timeout=30)["retention.ms"].value


def test_the_copy_has_the_source_partitions_and_retention_and_follows_a_change_of_it(route):
    route.wait_copied()
    source, target = (AdminClient({"bootstrap.servers": bootstrap}) for bootstrap in (route.source, route.target))
    assert len(target.list_topics(route.copy, timeout=30).topics[route.copy].partitions) == PARTITIONS
    assert retention_ms(source, route.topic) == RETENTION_MS
    assert retention_ms(target, route.copy) == RETENTION_MS
    # MM2 sets the source's configs on the copy, and resets those at their default there, in one
    # IncrementalAlterConfigs per topic: a config the target does not know fails the whole change.
    change = ConfigResource("TOPIC", route.topic, incremental_configs=[
        ConfigEntry("retention.ms", CHANGED_RETENTION_MS, incremental_operation=AlterConfigOpType.SET)])
    source.incremental_alter_configs([change])[change].result(timeout=30)
    route.wait(lambda: retention_ms(target, route.copy) == CHANGED_RETENTION_MS, 30,
               f"retention.ms {CHANGED_RETENTION_MS} on {route.copy}")


def test_every_record_arrives_once_in_order_with_its_key_value_and_headers(route):
    ends = route.wait_copied()
    total = sum(ends)
    source = ConfluentClient.consume(route.source, route.topic, PARTITIONS, total)
    copy = ConfluentClient.consume(route.target, route.copy, PARTITIONS, total)
    assert sorted(R.index_of(r) for r in source) == list(range(route.produced))
    for partition in range(PARTITIONS):
        expected = [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in source if r.partition == partition]
        got = [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in copy if r.partition == partition]
        assert got == expected, f"partition {partition}"


def listing(admin: AdminClient, names) -> dict | None:
    """The cluster's topics, once it has every one of ``names``."""
    topics = admin.list_topics(timeout=30).topics
    return topics if set(names) <= set(topics) else None


def test_internal_topics_are_created_and_compacted(route):
    # Each with the partitions MM2 asks for: one, and Connect's defaults for its offset and status topics.
    on_target = {checkpoints_topic(SOURCE): 1, "heartbeats": 1, f"mm2-configs.{SOURCE}.internal": 1,
                 f"mm2-offsets.{SOURCE}.internal": 25, f"mm2-status.{SOURCE}.internal": 5}
    on_source = {offset_syncs_topic(TARGET): 1}
    for bootstrap, topics in ((route.target, on_target), (route.source, on_source)):
        admin = AdminClient({"bootstrap.servers": bootstrap})
        listed = route.wait(lambda a=admin, t=topics: listing(a, t), 60, f"{list(topics)} created")
        assert {topic: len(listed[topic].partitions) for topic in topics} == topics
        resources = [ConfigResource("TOPIC", topic) for topic in topics]
        for resource, future in admin.describe_configs(resources).items():
            assert future.result(timeout=30)["cleanup.policy"].value == "compact", resource.name

    def beating():
        beats = [Heartbeat.decode(key, value) for key, value in read_all(route.target, "heartbeats")]
        return [beat for beat in beats if (beat.source, beat.target) == (SOURCE, TARGET)]
    route.wait(beating, 30, "a heartbeat from source to target")


def test_the_group_offset_is_translated_and_a_consumer_on_the_target_resumes_after_what_it_read(route):
    route.wait_copied()
    upstream = committed(route.source, route.group, route.topic)
    assert sum(upstream) == FIRST

    def checkpoints():
        """The group's newest checkpoint per partition, once each is of its committed offset."""
        newest: dict[int, Checkpoint] = {}
        for key, value in read_all(route.target, checkpoints_topic(SOURCE)):
            checkpoint = Checkpoint.decode(key, value)
            if checkpoint.group == route.group:
                newest[checkpoint.partition] = checkpoint
        found = [newest.get(p) for p in range(PARTITIONS)]
        return found if all(c is not None and c.upstream == upstream[c.partition] and c.downstream == c.upstream
                            for c in found) else None
    found = route.wait(checkpoints, 60, f"checkpoints of {route.group} at {upstream}")
    assert {checkpoint.topic for checkpoint in found} == {route.copy}
    translated = [checkpoint.downstream for checkpoint in found]
    route.wait(lambda: committed(route.target, route.group, route.copy) == translated, 60,
               f"{route.group} committed at {translated} on the target")

    ConfluentClient.produce(route.source, route.topic, SECOND, first=FIRST)
    route.produced = FIRST + SECOND
    route.wait_copied()
    resumed = consume_as_group(route.target, route.copy, route.group, SECOND)
    assert sorted(R.index_of(r) for r in resumed) == list(range(FIRST, FIRST + SECOND))
