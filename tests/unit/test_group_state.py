"""The group state machine, Kafka's placement of groups, and the offsets-topic records."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kgate.gateway.groups import records
from kgate.gateway.groups.group import Group, GroupState, IllegalTransition, Member
from kgate.gateway.groups.placement import java_string_hash, partition_for


def _member(member_id, protocols, instance=None):
    return Member(member_id, instance, "client", "/127.0.0.1", 10_000, 6000, "consumer",
                  [(name, b"meta-" + name.encode()) for name in protocols])


@pytest.mark.parametrize("text, expected", [
    ("", 0), ("hello", 99162322), ("polygenelubricants", -2147483648), ("é", 233), ("😀", 1772899),
])
def test_java_string_hash_matches_java(text, expected):
    assert java_string_hash(text) == expected


def test_placement_maps_int_min_to_partition_zero():
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50


@given(st.text(max_size=40), st.integers(1, 200))
def test_placement_is_within_range(group_id, partitions):
    assert 0 <= partition_for(group_id, partitions) < partitions


def test_transitions_follow_kafkas_state_machine():
    group = Group("g")
    with pytest.raises(IllegalTransition):
        group.transition(GroupState.STABLE, 1)
    for state in (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE, GroupState.STABLE,
                  GroupState.PREPARING_REBALANCE, GroupState.EMPTY, GroupState.DEAD):
        group.transition(state, 2)
    assert group.state is GroupState.DEAD and group.state_timestamp == 2
    with pytest.raises(IllegalTransition):
        group.transition(GroupState.PREPARING_REBALANCE, 3)


def test_protocol_vote_picks_the_common_protocol_most_members_prefer():
    group = Group("g")
    group.add(_member("a", ["roundrobin", "range"]))
    group.add(_member("b", ["range", "roundrobin", "sticky"]))
    group.add(_member("c", ["range", "roundrobin"]))
    assert group.select_protocol() == "range"
    assert group.supports("consumer", ["sticky", "roundrobin"])
    assert not group.supports("consumer", ["sticky"])
    assert not group.supports("connect", ["range"])


def test_leader_moves_when_the_leader_leaves_and_protocol_type_stays():
    group = Group("g")
    group.add(_member("a", ["range"]))
    group.add(_member("b", ["range"]))
    assert group.leader_id == "a"
    group.remove("a")
    assert group.leader_id == "b"
    group.remove("b")
    assert group.leader_id is None and group.protocol_type == "consumer"


def test_static_member_replacement_keeps_assignment_and_fences_the_old_id():
    group = Group("g")
    member = _member("old", ["range"], instance="i1")
    member.assignment = b"assigned"
    group.add(member)
    group.replace_static("old", "new")
    assert group.members["new"].assignment == b"assigned"
    assert group.is_fenced("old", "i1") and not group.is_fenced("new", "i1")
    assert group.leader_id == "new"


def test_subscribed_topics_read_from_consumer_protocol_metadata():
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

    group = Group("g")
    member = _member("a", [])
    member.protocols = [("range", ConsumerProtocolSubscription(topics=["t1", "t2"], user_data=b"").encode(version=0))]
    group.add(member)
    group.protocol = "range"
    assert group.subscribed_topics() == {"t1", "t2"}
    member.protocols = [("range", b"\x00")]
    assert group.subscribed_topics() is None


@given(st.text(max_size=30), st.text(max_size=30), st.integers(0, 2**31 - 1), st.integers(-1, 2**62),
       st.integers(-1, 2**31 - 1), st.text(max_size=50))
def test_offset_records_round_trip(group_id, topic, partition, offset, epoch, metadata):
    committed = records.CommittedOffset(offset, epoch, metadata, 1_700_000_000_000)
    key, value = records.decode(records.offset_key(group_id, topic, partition), records.offset_value(committed))
    assert key == ("offset", group_id, topic, partition)
    assert value == committed


def test_group_record_and_tombstone_decode():
    key, value = records.decode(records.group_key("g"), None)
    assert key == ("group", "g") and value is None


@pytest.mark.parametrize("key", [None, b"", b"\x00", b"\x00\x07abc", b"\x00\x01\x00\x05ab"])
def test_corrupt_keys_raise_corrupt_record(key):
    with pytest.raises(records.CorruptRecord):
        records.decode(key, None)


