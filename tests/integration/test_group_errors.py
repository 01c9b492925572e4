"""Bad group input gets Kafka's error code and leaves every other group as it was.

Real clients never send most of this, so the requests go over a raw connection.
"""
import pytest
from kafka.protocol.admin import DeleteTopicsRequest as DeleteTopics
from kafka.protocol.admin import DescribeGroupsRequest as DescribeGroups
from kafka.protocol.consumer import HeartbeatRequest as Heartbeat
from kafka.protocol.consumer import JoinGroupRequest as JoinGroup
from kafka.protocol.consumer import OffsetCommitRequest as OffsetCommit
from kafka.protocol.consumer import OffsetFetchRequest as OffsetFetch
from kafka.protocol.consumer import SyncGroupRequest as SyncGroup
from kafka.protocol.metadata import FindCoordinatorRequest as FindCoordinator
from kafka.protocol.metadata import MetadataRequest as Metadata

from kgate.protocol.error_codes import ErrorCode
from tests.support.clients import create_topic
from tests.support.member_process import wait_for
from tests.support.wire import Wire, encode_request

SESSION_MS = 6000  # the broker's minimum, so expiry tests stay short


@pytest.fixture
def wire(broker_factory):
    broker = broker_factory(**{"group.initial.rebalance.delay.ms": 0, "group.max.size": 3})
    create_topic(broker.bootstrap, "t", 2)
    with Wire(broker.bootstrap) as connection:
        yield connection


def join(wire, group, version, member_id="", instance=None, protocols=(("range", b"meta"),),
         protocol_type="consumer", session_ms=SESSION_MS):
    request = JoinGroup(group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=10_000,
                        member_id=member_id, group_instance_id=instance, protocol_type=protocol_type,
                        protocols=[JoinGroup.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols],
                        reason=None)
    return wire.call(request, version)


def join_stable(wire, group, version=5, instance=None):
    """A one-member group, joined and synced: (member id, generation)."""
    response = join(wire, group, version, instance=instance)
    if response.error_code == ErrorCode.MEMBER_ID_REQUIRED:
        response = join(wire, group, version, member_id=response.member_id, instance=instance)
    assert response.error_code == ErrorCode.NONE
    sync(wire, group, response.generation_id, response.member_id, assignment=b"mine")
    return response.member_id, response.generation_id


def sync(wire, group, generation, member_id, assignment=b"", version=3):
    response = wire.call(SyncGroup(group_id=group, generation_id=generation, member_id=member_id,
                                   group_instance_id=None, protocol_type=None, protocol_name=None,
                                   assignments=[SyncGroup.SyncGroupRequestAssignment(member_id=member_id,
                                                                                     assignment=assignment)]),
                         version)
    return response


def heartbeat(wire, group, generation, member_id, version=3, instance=None):
    return wire.call(Heartbeat(group_id=group, generation_id=generation, member_id=member_id,
                               group_instance_id=instance), version).error_code


def commit(wire, group, offsets, generation=-1, member_id="", version=6):
    topics = {}
    for (topic, partition), (offset, metadata) in offsets.items():
        topics.setdefault(topic, []).append(OffsetCommit.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
            partition_index=partition, committed_offset=offset, committed_leader_epoch=7, commit_timestamp=-1,
            committed_metadata=metadata))
    response = wire.call(OffsetCommit(group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
                                      group_instance_id=None, retention_time_ms=-1, topics=[
                                          OffsetCommit.OffsetCommitRequestTopic(name=t, partitions=p)
                                          for t, p in topics.items()]), version)
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def fetch(wire, group, version=5):
    response = wire.call(OffsetFetch(group_id=group, topics=None, require_stable=False), version)
    assert response.error_code == ErrorCode.NONE
    return {(t.name, p.partition_index): (p.committed_offset, p.metadata) for t in response.topics
            for p in t.partitions}


@pytest.mark.parametrize("version", [0, 3, 4, 6, 9])
def test_join_validates_group_id_and_session_timeout(wire, version):
    assert join(wire, "", version).error_code == ErrorCode.INVALID_GROUP_ID
    assert join(wire, "g", version, session_ms=100).error_code == ErrorCode.INVALID_SESSION_TIMEOUT
    if version >= 6:  # compact strings: the length fits on the wire, the key would not
        assert join(wire, "x" * 300_000, version).error_code == ErrorCode.INVALID_GROUP_ID


@pytest.mark.parametrize("version", [0, 3, 4, 5, 9])
def test_first_join_and_member_id_required(wire, version):
    first = join(wire, f"g{version}", version)
    if version >= 4:
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED and first.member_id
        first = join(wire, f"g{version}", version, member_id=first.member_id)
    assert first.error_code == ErrorCode.NONE
    assert first.generation_id == 1 and first.leader == first.member_id
    assert [m.member_id for m in first.members] == [first.member_id]


def test_unknown_member_stale_generation_and_rebalance_in_progress(wire):
    member, generation = join_stable(wire, "g")
    assert heartbeat(wire, "g", generation, member) == ErrorCode.NONE
    assert heartbeat(wire, "g", generation, "nobody") == ErrorCode.UNKNOWN_MEMBER_ID
    assert heartbeat(wire, "g", generation + 5, member) == ErrorCode.ILLEGAL_GENERATION
    assert sync(wire, "g", generation, "nobody").error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert sync(wire, "g", generation + 5, member).error_code == ErrorCode.ILLEGAL_GENERATION
    assert sync(wire, "g", generation, member).assignment == b"mine"
    # A second member's join puts the group into PreparingRebalance; its answer waits for
    # the rebalance, so it is sent on its own connection and not read.
    with Wire(f"127.0.0.1:{wire.sock.getpeername()[1]}") as other:
        request = JoinGroup(group_id="g", session_timeout_ms=SESSION_MS, rebalance_timeout_ms=10_000, member_id="",
                            group_instance_id=None, protocol_type="consumer", reason=None,
                            protocols=[JoinGroup.JoinGroupRequestProtocol(name="range", metadata=b"")])
        other.sock.sendall(encode_request(request, 3))
        wait_for(lambda: heartbeat(wire, "g", generation, member) == ErrorCode.REBALANCE_IN_PROGRESS, 10,
                 "the group to start rebalancing")


def test_session_expiry_removes_the_member(wire):
    member, generation = join_stable(wire, "expiring")
    wait_for(lambda: heartbeat(wire, "expiring", generation, member) == ErrorCode.UNKNOWN_MEMBER_ID,
             SESSION_MS / 1000 + 10, "the member's session to expire", interval=SESSION_MS / 1000 + 0.5)


def test_inconsistent_protocols_and_group_size(wire):
    join_stable(wire, "p", version=3)
    assert join(wire, "p", 3, protocol_type="connect").error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert join(wire, "p", 3, protocols=(("sticky", b""),)).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_static_member_with_an_old_member_id_is_fenced(wire):
    old, generation = join_stable(wire, "s", version=5, instance="i-1")
    rejoined = join(wire, "s", 5, instance="i-1")
    assert rejoined.error_code == ErrorCode.NONE and rejoined.member_id != old
    assert rejoined.generation_id == generation, "a static rejoin of a Stable group must not rebalance"
    assert heartbeat(wire, "s", generation, old, instance="i-1") == ErrorCode.FENCED_INSTANCE_ID
    assert heartbeat(wire, "s", generation, rejoined.member_id, instance="i-1") == ErrorCode.NONE


def test_commits_partial_errors_and_exact_round_trip(wire):
    results = commit(wire, "c", {("t", 0): (10, "meta-0"), ("t", 1): (11, ""), ("missing", 0): (1, ""),
                                 ("t", 9): (1, "")})
    assert results == {("t", 0): 0, ("t", 1): 0, ("missing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                       ("t", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert commit(wire, "c", {("t", 0): (12, "x" * 5000)}) == {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE}
    assert fetch(wire, "c") == {("t", 0): (10, "meta-0"), ("t", 1): (11, "")}
    response = wire.call(OffsetFetch(groups=[OffsetFetch.OffsetFetchRequestGroup(group_id=g, topics=None)
                                             for g in ("c", "unknown")], require_stable=True), 8)
    assert [(g.group_id, [(t.name, [(p.partition_index, p.committed_offset, p.committed_leader_epoch)
                                    for p in t.partitions]) for t in g.topics]) for g in response.groups] == \
        [("c", [("t", [(0, 10, 7), (1, 11, 7)])]), ("unknown", [])]


def test_simple_commit_refused_on_a_live_group(wire):
    join_stable(wire, "live")
    assert commit(wire, "live", {("t", 0): (1, "")}) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    assert commit(wire, "fresh", {("t", 0): (1, "")}, generation=3, member_id="m") == \
        {("t", 0): ErrorCode.ILLEGAL_GENERATION}


@pytest.mark.parametrize("version", range(7))
def test_find_coordinator_answers_every_version(wire, version):
    host, port = wire.sock.getpeername()
    if version >= 4:
        response = wire.call(FindCoordinator(key_type=0, coordinator_keys=["a", "b"]), version)
        assert [(c.key, c.error_code, c.port) for c in response.coordinators] == [("a", 0, port), ("b", 0, port)]
    else:
        response = wire.call(FindCoordinator(key="a", key_type=0), version)
        assert (response.error_code, response.host, response.port) == (0, host, port)


def test_join_storm_leaves_other_groups_intact(wire):
    member, generation = join_stable(wire, "calm")
    commit(wire, "calm", {("t", 0): (42, "keep")}, generation=generation, member_id=member)
    errors = [join(wire, "storm", 5).error_code for _ in range(200)]
    # group.max.size is 3 here: members waiting to rejoin with their id count against it.
    assert errors == [ErrorCode.MEMBER_ID_REQUIRED] * 3 + [ErrorCode.GROUP_MAX_SIZE_REACHED] * 197
    assert heartbeat(wire, "calm", generation, member) == ErrorCode.NONE
    assert fetch(wire, "calm") == {("t", 0): (42, "keep")}
    described = wire.call(DescribeGroups(groups=["calm"], include_authorized_operations=False), 4).groups[0]
    assert described.group_state == "Stable" and [m.member_id for m in described.members] == [member]


def test_the_offsets_topic_cannot_be_deleted(wire):
    request = DeleteTopics(timeout_ms=10_000, topic_names=["__consumer_offsets"])
    (result,) = wire.call(request, 4).responses
    assert result.error_code == ErrorCode.INVALID_TOPIC
    metadata = wire.call(Metadata(topics=[Metadata.MetadataRequestTopic(name="__consumer_offsets")]), 1)
    assert metadata.topics[0].error_code == ErrorCode.NONE and len(metadata.topics[0].partitions) == 50
