"""Consumer groups with real clients: mixed generations in one group, failures, static
members, restarts, and the admin views of groups."""
import collections

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient
from kafka.errors import InconsistentGroupProtocolError
from kafka.structs import TopicPartition as KTopicPartition

from kgate.storage import entry_formats
from tests.support.clients import ConfluentClient, create_topic
from tests.support.member_process import wait_for

PARTITIONS = 12
# Members must be in the first generation before records flow, so a run without failures
# has no rebalance, hence no re-delivery: wait for them all, then produce.
GROUP_SETTINGS = {"group.initial.rebalance.delay.ms": 1000}
pytestmark = pytest.mark.parametrize("entry_format", entry_formats.names(), indirect=True)




def _describe(bootstrap, group):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group])[group].result(timeout=30)


def _stable_assignment(bootstrap, group, member_count):
    """The group's assignment once it is Stable with ``member_count`` members, else None."""
    description = _describe(bootstrap, group)
    if description.state != ConsumerGroupState.STABLE or len(description.members) != member_count:
        return None
    return {m.member_id: sorted(tp.partition for tp in m.assignment.topic_partitions) for m in description.members}


def _assert_partitioned(assignment, partitions=PARTITIONS):
    owned = [p for parts in assignment.values() for p in parts]
    assert sorted(owned) == list(range(partitions)), f"assignments overlap or miss partitions: {assignment}"


def _consumed(members_):
    return [record for member in members_ for record in member.records()]


@pytest.mark.parametrize("clients, assignor", [
    (["kafka-python", "kafka-python", "confluent-kafka", "confluent-kafka"], None),
    (["confluent-kafka", "confluent-kafka"], "cooperative-sticky"),
], ids=["mixed-eager", "librdkafka-cooperative-sticky"])
def test_group_processes_every_record_once(broker_factory, members, clients, assignor):
    broker = broker_factory(**GROUP_SETTINGS)
    count = 50_000
    create_topic(broker.bootstrap, "work", PARTITIONS)
    # No member fails here, so none may be dropped: a session long enough that a member busy
    # with 50,000 records on a loaded machine (the suite runs tests side by side) keeps it.
    started = [members(client, broker.bootstrap, "work", "workers", assignor=assignor, session_ms=30_000)
               for client in clients]
    assignment = wait_for(lambda: _stable_assignment(broker.bootstrap, "workers", len(clients)), 60,
                          "every member in one Stable generation")
    _assert_partitioned(assignment)
    ConfluentClient.produce(broker.bootstrap, "work", count)
    wait_for(lambda: len(_consumed(started)) >= count, 180, f"{count} records consumed by the group")
    consumed = _consumed(started)
    by_offset = collections.Counter((p, o) for p, o, _ in consumed)
    assert len(consumed) == count and len(by_offset) == count, \
        f"{len(consumed) - len(by_offset)} records processed twice without any member failing"
    assert {k for _, _, k in consumed} == {f"k{i}" for i in range(count)}
    assert _stable_assignment(broker.bootstrap, "workers", len(clients)) == assignment, "the group rebalanced"
    for member in started:
        assert member.records(), f"{member.client} member got nothing"


def test_cooperative_and_eager_members_cannot_share_a_group(broker_factory, members):
    broker = broker_factory(**GROUP_SETTINGS)
    create_topic(broker.bootstrap, "shared", 2)
    members("confluent-kafka", broker.bootstrap, "shared", "mixed", assignor="cooperative-sticky")
    wait_for(lambda: _stable_assignment(broker.bootstrap, "mixed", 1), 60, "the cooperative member's group")
    # kafka-python has no cooperative assignor: no protocol in common, as on Kafka.
    consumer = KafkaConsumer("shared", bootstrap_servers=broker.bootstrap, group_id="mixed",
                             session_timeout_ms=6000, request_timeout_ms=20_000)
    try:
        with pytest.raises(InconsistentGroupProtocolError):
            for _ in range(50):
                consumer.poll(timeout_ms=200)
    finally:
        consumer.close()


def test_killed_member_partitions_move_and_nothing_is_lost(broker_factory, members):
    broker = broker_factory(**GROUP_SETTINGS)
    count = 60_000
    create_topic(broker.bootstrap, "jobs", PARTITIONS)
    victim, *survivors = [members(client, broker.bootstrap, "jobs", "crew")
                          for client in ["confluent-kafka", "kafka-python", "confluent-kafka"]]
    wait_for(lambda: _stable_assignment(broker.bootstrap, "crew", 3), 60, "a Stable group of three")
    ConfluentClient.produce(broker.bootstrap, "jobs", count)
    wait_for(lambda: len(victim.records()) > 1000, 60, "the victim to process records")
    victim.kill()
    # Session timeout (6 s) plus one rebalance: the survivors own everything.
    try:
        assignment = wait_for(lambda: _stable_assignment(broker.bootstrap, "crew", 2), 60,
                              "the survivors to take over the killed member's partitions")
    except AssertionError as exc:  # once, on a machine loaded 10 times over its cores: say where it stood
        found = _describe(broker.bootstrap, "crew")
        exc.add_note(f"the group now: {found.state}, members {[(m.member_id, m.client_id) for m in found.members]}")
        raise
    _assert_partitioned(assignment)
    wait_for(lambda: len({(p, o) for p, o, _ in _consumed([victim, *survivors])}) >= count, 120,
             "every record processed by someone")
    consumed = _consumed([victim, *survivors])
    distinct = {(p, o) for p, o, _ in consumed}
    assert len(distinct) == count
    redelivered = len(consumed) - len(distinct)
    print(f"re-delivered after kill -9: {redelivered} of {count}")


def test_restarted_static_member_gets_its_assignment_back_without_rebalance(broker_factory, members):
    broker = broker_factory(**GROUP_SETTINGS)
    create_topic(broker.bootstrap, "static", 6)
    steady = members("confluent-kafka", broker.bootstrap, "static", "statics", instance="steady", session_ms=30_000)
    restarted = members("confluent-kafka", broker.bootstrap, "static", "statics", instance="restarted",
                        session_ms=30_000)
    before = wait_for(lambda: _stable_assignment(broker.bootstrap, "statics", 2), 60, "a Stable static group")
    wait_for(lambda: steady.assignments() and restarted.assignments(), 30, "both members assigned")
    restarted_partitions = restarted.assignments()[-1]
    restarted.stop()  # a static member does not leave the group on close
    assert _stable_assignment(broker.bootstrap, "statics", 2) is not None, "closing a static member rebalanced"
    again = members("confluent-kafka", broker.bootstrap, "static", "statics", instance="restarted", session_ms=30_000)
    wait_for(lambda: again.assignments(), 30, "the restarted member's assignment")
    assert again.assignments() == [restarted_partitions]
    after = _stable_assignment(broker.bootstrap, "statics", 2)
    assert sorted(after.values()) == sorted(before.values())
    assert len(steady.assignments()) == 1, f"the other member was rebalanced: {steady.assignments()}"


def test_committed_offsets_survive_restart_and_compaction(broker_factory):
    broker = broker_factory(**{"kgate.offsets.compaction.min.records": 200})
    create_topic(broker.bootstrap, "ledger", 4)
    groups = [f"committer-{i}" for i in range(5)]
    expected = {}
    for group in groups:
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
        try:
            # Many commits per group: far more records than live keys, so compaction runs.
            for round_ in range(60):
                offsets = [TopicPartition("ledger", p, round_ * 10 + p, metadata=f"{group}/{round_}/{p}",
                                          leader_epoch=round_ % 3) for p in range(4)]
                consumer.commit(offsets=offsets, asynchronous=False)
            expected[group] = {(tp.partition): (tp.offset, tp.metadata, tp.leader_epoch) for tp in offsets}
        finally:
            consumer.close()
    assert "compacted" in open(broker.log_path).read(), "no offsets partition was compacted"
    broker.stop()
    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for group in groups:
        result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=30)
        fetched = {tp.partition: (tp.offset, tp.metadata, tp.leader_epoch) for tp in result.topic_partitions}
        assert fetched == expected[group], f"{group} offsets changed across restart"


def test_admin_clients_list_describe_and_delete_groups(broker_factory, members):
    broker = broker_factory(**GROUP_SETTINGS)
    create_topic(broker.bootstrap, "admin-t", 3)
    live = members("confluent-kafka", broker.bootstrap, "admin-t", "live-group")
    wait_for(lambda: _stable_assignment(broker.bootstrap, "live-group", 1), 60, "the live group")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "idle-group"})
    consumer.commit(offsets=[TopicPartition("admin-t", 0, 5), TopicPartition("admin-t", 1, 7)], asynchronous=False)
    consumer.close()

    confluent = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = {g.group_id: g.state for g in confluent.list_consumer_groups().result(timeout=30).valid}
    assert listed == {"live-group": ConsumerGroupState.STABLE, "idle-group": ConsumerGroupState.EMPTY}
    kafka_admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        assert {g["group_id"]: g["group_state"] for g in kafka_admin.list_groups()} == \
            {"live-group": "Stable", "idle-group": "Empty"}
        described = kafka_admin.describe_groups(["live-group"])["live-group"]
        assert described["group_state"] == "Stable" and described["protocol_type"] == "consumer"
        [member] = described["members"]
        assert member["member_metadata"]["topics"] == ["admin-t"]
        assert member["member_assignment"]["assigned_partitions"] == [{"topic": "admin-t", "partitions": [0, 1, 2]}]

        assert kafka_admin.delete_groups(["live-group"]) == {"live-group": "NonEmptyGroupError"}
        deleted = confluent.delete_consumer_groups(["idle-group"])["idle-group"]
        assert deleted.result(timeout=30) is None
        assert "idle-group" not in {g["group_id"] for g in kafka_admin.list_groups()}
        with pytest.raises(Exception) as refused:
            confluent.delete_consumer_groups(["live-group"])["live-group"].result(timeout=30)
        assert refused.value.args[0].code() == KafkaError.NON_EMPTY_GROUP

        # OffsetDelete: refused for the topic the live group subscribes to.
        result = kafka_admin.delete_group_offsets("live-group", [KTopicPartition("admin-t", 0)])
        assert result[KTopicPartition("admin-t", 0)].__name__ == "GroupSubscribedToTopicError"
    finally:
        kafka_admin.close()
    live.stop()
