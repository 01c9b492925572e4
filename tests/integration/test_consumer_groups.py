"""KIP-848 consumer groups with librdkafka (``group.protocol=consumer``): the broker assigns,
members share and hand over partitions, offsets commit with member epochs, the group
survives a coordinator restart, a group id is either classic or consumer, a static member
restarts into its own partitions, a regex subscription is resolved by the broker, and
confluent-kafka's AdminClient describes the group."""
import collections
import uuid

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupType
from confluent_kafka.admin import AdminClient
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import JoinGroupRequest, OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest
from kafka.protocol.metadata import ApiVersionsRequest

from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.messages import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
from tests.support.clients import ConfluentClient, create_topic
from tests.support.member_process import wait_for
from tests.support.wire import Wire

PARTITIONS = 6
# Short heartbeats keep the tests quick (Kafka's default is 5 s). No test here waits for a
# session to expire, so the session is long enough (Kafka's default is 45 s) that a member
# process starved of CPU on a loaded machine is not expired and made to rejoin meanwhile.
SETTINGS = {"group.consumer.heartbeat.interval.ms": 300, "group.consumer.session.timeout.ms": 20000}


@pytest.fixture
def members(members):
    """Members of the new protocol: librdkafka with group.protocol=consumer."""
    def start(bootstrap, topic, group, assignor=None, instance=None):
        return members("confluent-kafka", bootstrap, topic, group, assignor=assignor, instance=instance,
                       group_protocol="consumer")
    return start


def _describe(bootstrap, group):
    with Wire(bootstrap) as wire:
        [described] = wire.call(ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False),
                                0).groups
    return described


def _settled(bootstrap, group, count):
    """Each member's partitions once the group is Stable with ``count`` members, else None."""
    described = _describe(bootstrap, group)
    if described.group_state != "Stable" or len(described.members) != count:
        return None
    return {m.member_id: sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions)
            for m in described.members}


def _partitioned(assignment):
    return sorted(p for parts in assignment.values() for p in parts) == list(range(PARTITIONS))


def test_a_consumer_of_the_new_protocol_receives_its_records(broker_factory):
    """The issue's case: librdkafka waited 40 s and received nothing."""
    broker = broker_factory(**SETTINGS)
    create_topic(broker.bootstrap, "news", PARTITIONS)
    ConfluentClient.produce(broker.bootstrap, "news", 300)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "readers", "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["news"])
    got = []
    try:
        wait_for(lambda: got.extend(m for m in consumer.consume(300, timeout=0.2) if not m.error()) or len(got) >= 300,
                 30, "300 records")
        consumer.commit(asynchronous=False)
        committed = consumer.committed([tp for tp in consumer.assignment()], timeout=10)
    finally:
        consumer.close()
    assert len({(m.partition(), m.offset()) for m in got}) == 300
    by_partition = collections.Counter(m.partition() for m in got)
    assert {tp.partition: tp.offset for tp in committed} == dict(by_partition), "committed with the member epoch"
    described = _describe(broker.bootstrap, "readers")
    assert (described.error_code, described.group_state, described.members) == (ErrorCode.NONE, "Empty", [])


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_members_share_partitions_and_take_over_from_one_that_leaves(broker_factory, members, assignor):
    broker = broker_factory(**SETTINGS)
    create_topic(broker.bootstrap, "work", PARTITIONS)
    count = 3000
    ConfluentClient.produce(broker.bootstrap, "work", count)
    crew = [members(broker.bootstrap, "work", "crew", assignor) for _ in range(2)]
    assert _partitioned(wait_for(lambda: _settled(broker.bootstrap, "crew", 2), 60, "two members Stable"))
    crew.append(members(broker.bootstrap, "work", "crew", assignor))
    three = wait_for(lambda: _settled(broker.bootstrap, "crew", 3), 60, "three members Stable")
    assert _partitioned(three) and all(three.values()), f"every member works: {three}"
    assert _describe(broker.bootstrap, "crew").assignor_name == assignor
    crew[0].stop()  # a clean close: the member leaves with epoch -1
    two = wait_for(lambda: _settled(broker.bootstrap, "crew", 2), 60, "the others take its partitions")
    assert _partitioned(two)
    wait_for(lambda: len({(p, o) for m in crew for p, o, _ in m.records()}) >= count, 60, "every record")
    consumed = [r for m in crew for r in m.records()]
    assert len({(p, o) for p, o, _ in consumed}) == count
    # Each member commits after each batch, so a partition changing hands is picked up
    # where it was committed: re-deliveries stay under one batch per moved partition.
    assert len(consumed) - count <= 1000 * PARTITIONS


def test_the_group_survives_a_coordinator_restart(broker_factory, members):
    broker = broker_factory(**SETTINGS)
    create_topic(broker.bootstrap, "work", PARTITIONS)
    for _ in range(2):
        members(broker.bootstrap, "work", "crew")
    before = wait_for(lambda: _settled(broker.bootstrap, "crew", 2), 60, "two members Stable")
    described = _describe(broker.bootstrap, "crew")
    broker.stop()
    broker.restart()
    again = _describe(broker.bootstrap, "crew")
    assert (again.group_epoch, again.assignment_epoch) == (described.group_epoch, described.assignment_epoch)
    assert {m.member_id: sorted(p for tp in m.target_assignment.topic_partitions for p in tp.partitions)
            for m in again.members} == before, "members and target assignment replayed from __consumer_offsets"
    assert _partitioned(wait_for(lambda: _settled(broker.bootstrap, "crew", 2), 60, "the members carry on"))


def test_a_group_id_is_classic_or_consumer(broker_factory):
    broker = broker_factory(**SETTINGS)
    create_topic(broker.bootstrap, "t", 1)
    with Wire(broker.bootstrap) as wire:
        versions = {k.api_key: (k.min_version, k.max_version) for k in wire.call(ApiVersionsRequest(), 3).api_keys}
        assert versions[ApiKey.ConsumerGroupHeartbeat] == (0, 1) and versions[ApiKey.ConsumerGroupDescribe] == (0, 0)
        joined = wire.call(JoinGroupRequest(group_id="old", session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                                            member_id="", protocol_type="consumer", protocols=[
                                                JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]),
                           3)
        assert joined.error_code == ErrorCode.NONE
        refused = wire.call(_join_new("old"), 0)
        # A classic group with members is upgraded online only when its members' metadata is the
        # consumer's embedded protocol (tests/integration/test_group_migration.py); empty bytes are not.
        assert refused.error_code == ErrorCode.GROUP_ID_NOT_FOUND, "a classic group that cannot be upgraded"
        assert _describe(broker.bootstrap, "old").error_code == ErrorCode.GROUP_ID_NOT_FOUND
        new = wire.call(_join_new("new"), 1)
        assert (new.error_code, new.member_epoch) == (ErrorCode.NONE, 1)
        assert new.assignment.topic_partitions[0].partitions == [0]
        classic = wire.call(JoinGroupRequest(group_id="new", session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                                             member_id="", protocol_type="consumer", protocols=[
                                                 JoinGroupRequest.JoinGroupRequestProtocol(name="range",
                                                                                           metadata=b"")]), 3)
        assert classic.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "no consumer subscription in the join"


def _join_new(group):
    return ConsumerGroupHeartbeatRequest(group_id=group, member_id=str(uuid.uuid4()), member_epoch=0,
                                         rebalance_timeout_ms=30_000, subscribed_topic_names=["t"], topic_partitions=[])


def _by_instance(described):
    return {m.instance_id: (m.member_id, m.member_epoch, sorted(p for tp in m.assignment.topic_partitions
                                                                for p in tp.partitions))
            for m in described.members}


def test_a_static_member_restarts_into_its_own_partitions_and_nobody_else_moves(broker_factory, members):
    broker = broker_factory(**SETTINGS)
    create_topic(broker.bootstrap, "work", PARTITIONS)
    one = members(broker.bootstrap, "work", "crew", instance="one")
    members(broker.bootstrap, "work", "crew", instance="two")
    assert _partitioned(wait_for(lambda: _settled(broker.bootstrap, "crew", 2), 60, "two members Stable"))
    before = _describe(broker.bootstrap, "crew")
    placed = _by_instance(before)
    one.stop()  # a static member closes with epoch -2: it means to come back
    away = wait_for(lambda: (d := _describe(broker.bootstrap, "crew")) and _by_instance(d)["one"][1] == -2 and d,
                    30, "instance one away with epoch -2")
    assert away.group_epoch == before.group_epoch and _by_instance(away)["two"] == placed["two"]
    assert _by_instance(away)["one"][2] == placed["one"][2], "its partitions wait for it"
    members(broker.bootstrap, "work", "crew", instance="one")
    back = wait_for(lambda: _settled(broker.bootstrap, "crew", 2) and _describe(broker.bootstrap, "crew"), 30,
                    "instance one back")
    again = _by_instance(back)
    assert again["one"][0] != placed["one"][0], "a new process: a new member id"
    assert again["one"][2] == placed["one"][2] and again["two"] == placed["two"]
    assert back.group_epoch == before.group_epoch, "no rebalance of the others"


def test_a_regex_subscription_is_resolved_by_the_broker_and_takes_new_topics(broker_factory):
    broker = broker_factory(**SETTINGS)
    for topic in ("orders-eu", "audit"):
        create_topic(broker.bootstrap, topic, 2)
        ConfluentClient.produce(broker.bootstrap, topic, 50)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "pattern", "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["^orders-.*"])
    got = []

    def read(count):
        got.extend(m for m in consumer.consume(100, timeout=0.2) if not m.error())
        return len(got) >= count
    try:
        wait_for(lambda: read(50), 30, "orders-eu's records")
        create_topic(broker.bootstrap, "orders-us", 2)
        ConfluentClient.produce(broker.bootstrap, "orders-us", 30)
        wait_for(lambda: read(80), 30, "orders-us's records, a topic created after the subscription")
        [member] = _describe(broker.bootstrap, "pattern").members
    finally:
        consumer.close()
    assert {(m.topic(), m.partition(), m.offset()) for m in got} == {
        (m.topic(), m.partition(), m.offset()) for m in got if m.topic() in ("orders-eu", "orders-us")}
    assert len({(m.topic(), m.partition(), m.offset()) for m in got}) == 80
    assert member.subscribed_topic_regex == "(^orders-.*)"
    assert sorted(tp.topic_name for tp in member.assignment.topic_partitions) == ["orders-eu", "orders-us"]


def test_confluent_kafkas_admin_client_describes_a_consumer_group(broker_factory, members):
    broker = broker_factory(**SETTINGS)
    create_topic(broker.bootstrap, "work", PARTITIONS)
    for instance in ("one", "two"):
        members(broker.bootstrap, "work", "crew", instance=instance)
    settled = wait_for(lambda: _settled(broker.bootstrap, "crew", 2), 60, "two members Stable")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    described = admin.describe_consumer_groups(["crew"])["crew"].result(timeout=30)
    assert (described.type, described.state, described.partition_assignor) == (
        ConsumerGroupType.CONSUMER, ConsumerGroupState.STABLE, "uniform")
    assert {m.member_id: sorted(tp.partition for tp in m.assignment.topic_partitions)
            for m in described.members} == settled
    assert {m.group_instance_id for m in described.members} == {"one", "two"}
    assert all(sorted(tp.partition for tp in m.target_assignment.topic_partitions) == settled[m.member_id]
               for m in described.members)


def test_offset_delete_on_a_consumer_group_with_a_member_spares_only_subscribed_topics(broker_factory):
    """Kafka's answer: GROUP_SUBSCRIBED_TO_TOPIC for a subscribed topic's partitions, the
    others deleted (the connection was closed on a TypeError)."""
    broker = broker_factory(**SETTINGS)
    for topic in ("t", "other"):
        create_topic(broker.bootstrap, topic, 1)
    with Wire(broker.bootstrap) as wire:
        joined = wire.call(_join_new("deleting"), 0)
        assert joined.error_code == ErrorCode.NONE
        C = OffsetCommitRequest
        committed = wire.call(C(group_id="deleting", generation_id_or_member_epoch=joined.member_epoch,
                                member_id=joined.member_id, retention_time_ms=-1, topics=[
                                    C.OffsetCommitRequestTopic(name=name, partitions=[
                                        C.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                                            partition_index=0, committed_offset=5, committed_metadata="")])
                                    for name in ("t", "other")]), 7)
        assert {t.partitions[0].error_code for t in committed.topics} == {ErrorCode.NONE}
        D = OffsetDeleteRequest
        deleted = wire.call(D(group_id="deleting", topics=[
            D.OffsetDeleteRequestTopic(name=name, partitions=[D.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(
                partition_index=0)]) for name in ("t", "other")]), 0)
        assert deleted.error_code == ErrorCode.NONE
        assert {t.name: t.partitions[0].error_code for t in deleted.topics} == {
            "t": ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, "other": ErrorCode.NONE}
        F = OffsetFetchRequest
        fetched = wire.call(F(group_id="deleting", topics=[F.OffsetFetchRequestTopic(name=name, partition_indexes=[0])
                                                           for name in ("t", "other")]), 7)
        assert {t.name: t.partitions[0].committed_offset for t in fetched.topics} == {"t": 5, "other": -1}
