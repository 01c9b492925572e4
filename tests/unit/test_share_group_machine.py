"""Share groups' membership rules (KIP-932), driven without an event loop: joining, the simple
assignor, epochs, leaving, session expiry, Kafka's answers to bad heartbeats and to a group
id of another kind, and the records that rebuild a group after a coordinator move."""
import itertools
import uuid

import pytest

from kgate.gateway.groups import records
from kgate.gateway.groups.consumer_machine import ConsumerGroupMachine, Heartbeat
from kgate.gateway.groups.coordinator import GroupCoordinator
from kgate.gateway.groups.effects import ShareMemberGone, Timer, TimerKey
from kgate.gateway.groups.group import Group
from kgate.gateway.groups.machine import GroupMachine, JoinRequest
from kgate.gateway.groups.share_assignor import assign
from kgate.gateway.groups.share_group import ShareGroup
from kgate.gateway.groups.share_machine import ShareGroupMachine, ShareHeartbeat
from kgate.protocol.error_codes import ErrorCode
from tests.unit.effect_ledger import EffectLedger
from tests.unit.fake_clock import FakeClock, settle
from tests.unit.memory_partition_writer import MemoryPartitionWriter
from tests.unit.stand_in_cluster import StandInCluster
from tests.unit.test_group_shard import PARTITIONS, assert_replays_to_the_same_state, coordinator, settings
from tests.unit.test_group_shard import TOPICS as GROUP_TOPICS

T = uuid.UUID(int=1)
U = uuid.UUID(int=2)
TOPICS = {"t": (T, 2), "u": (U, 3)}
SESSION_MS = 45_000
T_GROUPS = GROUP_TOPICS["t"][0]


class Driver(EffectLedger):
    def __init__(self, max_size=10):
        super().__init__()
        ids = itertools.count(1)
        self.classic = GroupMachine(min_session_ms=6000, max_session_ms=300_000, initial_delay_ms=0, max_size=100,
                                    new_member_id=lambda prefix: f"{prefix}-{next(ids)}")
        self.groups = self.classic.groups
        self.machine = ShareGroupMachine(self.groups, session_ms=SESSION_MS, max_size=max_size)
        self.gone: list[tuple[str, str]] = []

    def other(self, effect):
        if isinstance(effect, ShareMemberGone):
            self.gone.append((effect.group_id, effect.member_id))

    def beat(self, member_id, epoch=0, topics=("t",), group="g", cluster=TOPICS):
        subscribed = list(topics) if topics is not None else None
        step = self.machine.heartbeat(self.now, ShareHeartbeat(group, member_id, epoch, "client", "/10.0.0.1", None,
                                                               subscribed), cluster)
        self.carry_out(step.effects)
        return step.reply

    def fire(self, key):
        self.carry_out(self.machine.timer_fired(self.now, key, TOPICS))

    def share(self, group="g") -> ShareGroup:
        share = self.groups[group].share
        assert share is not None
        return share

    def replayed(self, group="g") -> ShareGroup:
        """The group a coordinator rebuilds from the records stored so far."""
        latest: dict[bytes, bytes | None] = {}
        for key, value in self.stored:
            latest[key] = value
        rebuilt = ShareGroup(group)
        for key, value in latest.items():
            (family, kind, group_id, member_id), decoded = records.decode(key, value)
            assert family == "share" and group_id == group
            if not (kind == "group_epoch" and decoded is None):
                rebuilt.load(kind, member_id, decoded)
        return rebuilt


def partitions(reply):
    return {topic: sorted(parts) for topic, parts in (reply.assignment or {}).items()}


def test_a_member_joins_with_its_own_id_and_is_given_every_partition_of_its_topics():
    driver = Driver()
    reply = driver.beat("m1", topics=("t", "u"))
    assert (reply.error, reply.member_id, reply.member_epoch) == (ErrorCode.NONE, "m1", 1)
    assert partitions(reply) == {T: [0, 1], U: [0, 1, 2]}
    assert driver.groups["g"].protocol_type == "share" and driver.share().state == "Stable"
    again = driver.beat("m1", epoch=1, topics=None)
    assert (again.error, again.member_epoch, again.assignment) == (ErrorCode.NONE, 1, None)


def test_three_members_on_two_partitions_each_read_at_least_one():
    driver = Driver()
    for member in ("m1", "m2", "m3"):
        driver.beat(member)
    for member in ("m1", "m2", "m3"):
        share = driver.share()
        reply = driver.beat(member, epoch=share.members[member].epoch, topics=None)
        assert reply.member_epoch == share.epoch == 3
    held = [driver.share().members[m].assigned.get(T, set()) for m in ("m1", "m2", "m3")]
    assert all(held), held
    assert set().union(*held) == {0, 1}


def test_the_simple_assignor_deals_every_partition_to_one_member_while_there_are_enough_of_them():
    a, b = "member-a", "member-b"
    fresh = assign({a: [U], b: [U]}, {U: 3}, {})
    assert sorted([len(fresh[a][U]), len(fresh[b][U])]) == [1, 2] and fresh[a][U] | fresh[b][U] == {0, 1, 2}
    assert not fresh[a][U] & fresh[b][U], "no partition is shared while there are more partitions than members"
    assert assign({a: [T]}, {T: 2}, {a: {U: {0}}}) == {a: {T: {0, 1}}}, "an unsubscribed topic is dropped"


def test_a_member_holding_every_partition_gives_the_newcomers_their_share_and_keeps_the_rest():
    """The first member of a group takes every partition; those who join after it get an even
    share of them, taken from it, so no member reads from a partition another one drains."""
    first, members = "m0", ["m0", "m1", "m2"]
    held = {first: {U: set(range(16))}}
    balanced = assign({m: [U] for m in members}, {U: 16}, held)
    counts = sorted(len(balanced[m][U]) for m in members)
    assert counts == [5, 5, 6]
    assert set().union(*(balanced[m][U] for m in members)) == set(range(16))
    assert sum(len(balanced[m][U]) for m in members) == 16, "each partition read by one member"
    assert balanced[first][U] <= held[first][U], "the first member keeps part of what it held"
    again = assign({m: [U] for m in members}, {U: 16}, balanced)
    assert again == balanced, "a balanced assignment stays as it is"


def test_more_members_than_partitions_share_each_partition_evenly():
    members = [f"m{i}" for i in range(5)]
    fresh = assign({m: [T] for m in members}, {T: 2}, {})
    assert sorted(len(fresh[m].get(T, ())) for m in members) == [1, 1, 1, 1, 2], "every member reads"
    assert [sum(p in fresh[m][T] for m in members) for p in (0, 1)] == [3, 3], "ceil(5 / 2) readers each"
    shrunk = assign({m: [T] for m in members[:2]}, {T: 2}, {m: fresh[m] for m in members[:2]})
    assert shrunk[members[0]][T] | shrunk[members[1]][T] == {0, 1}, "fewer members: every partition still read"


def test_members_of_different_subscriptions_are_balanced_topic_by_topic():
    both, only_t, only_u = "m-both", "m-t", "m-u"
    result = assign({both: [T, U], only_t: [T], only_u: [U]}, {T: 2, U: 4}, {})
    assert len(result[both][T]) == 1 and len(result[only_t][T]) == 1, "t's two partitions between its two readers"
    assert len(result[both][U]) == 2 and len(result[only_u][U]) == 2
    assert T not in result[only_u] and U not in result[only_t]


def test_a_member_leaving_moves_the_epoch_and_its_partitions_to_the_others():
    driver = Driver()
    driver.beat("m1", topics=("u",))
    driver.beat("m2", topics=("u",))
    left = driver.beat("m2", epoch=2, topics=None)
    assert left.member_epoch == 2
    reply = driver.beat("m2", epoch=-1, topics=None)
    assert (reply.error, reply.member_epoch) == (ErrorCode.NONE, -1)
    assert TimerKey("g", Timer.SHARE_SESSION, "m2") not in driver.timers
    stay = driver.beat("m1", epoch=1, topics=None)
    assert stay.member_epoch == 3 and partitions(stay) == {U: [0, 1, 2]}
    assert driver.gone == [("g", "m2")], "its share sessions end and its records go back"


def test_a_member_whose_session_expires_is_removed():
    driver = Driver()
    driver.beat("m1")
    driver.beat("m2")
    driver.advance(SESSION_MS - 1)
    driver.beat("m1", epoch=1, topics=None)
    driver.advance(1)
    assert set(driver.share().members) == {"m1"} and driver.gone == [("g", "m2")]
    assert driver.beat("m2", epoch=2, topics=None).error == ErrorCode.UNKNOWN_MEMBER_ID
    driver.advance(SESSION_MS)
    assert driver.share().members == {} and driver.share().state == "Empty"


@pytest.mark.parametrize("member, epoch, topics, error", [
    ("", 0, ("t",), ErrorCode.INVALID_REQUEST),
    ("x" * 37, 0, ("t",), ErrorCode.INVALID_REQUEST),
    ("m9", 0, None, ErrorCode.INVALID_REQUEST),
    ("m9", 0, (), ErrorCode.INVALID_REQUEST),
    ("m9", -2, None, ErrorCode.INVALID_REQUEST),
    ("m9", 3, None, ErrorCode.UNKNOWN_MEMBER_ID),
    ("m9", -1, None, ErrorCode.UNKNOWN_MEMBER_ID),
    ("m1", 7, None, ErrorCode.FENCED_MEMBER_EPOCH),
])
def test_bad_heartbeats_get_kafkas_errors_and_change_nothing(member, epoch, topics, error):
    driver = Driver()
    driver.beat("m1")
    stored, share_epoch = list(driver.stored), driver.share().epoch
    assert driver.beat(member, epoch=epoch, topics=topics).error == error
    assert (driver.stored, driver.share().epoch, set(driver.share().members)) == (stored, share_epoch, {"m1"})


def test_the_group_max_size_refuses_one_member_more():
    driver = Driver(max_size=2)
    driver.beat("m1")
    driver.beat("m2")
    assert driver.beat("m3").error == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert driver.beat("m1", epoch=0).error == ErrorCode.NONE, "a member rejoining is not one more"


def test_a_group_id_of_another_kind_is_refused_both_ways_as_kafka_answers():
    driver = Driver()
    driver.groups["classic"] = Group("classic")  # a classic group (committed offsets only, say)
    assert driver.beat("m1", group="classic").error == ErrorCode.GROUP_ID_NOT_FOUND
    driver.beat("m1", group="shared")
    join = driver.classic.join(0, JoinRequest("shared", "", None, "c", "/h", 10_000, 30_000, "consumer",
                                              [("range", b"")], False, False))
    assert join.reply.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    consumers = ConsumerGroupMachine(driver.groups, session_ms=45_000, heartbeat_ms=5000, assignors=["uniform"],
                                     max_size=10, new_member_id=lambda: "c1")
    consumer = consumers.heartbeat(0, Heartbeat("shared", "", 0, "c", "/h", None, None, 60_000, ["t"], None, None,
                                                None), TOPICS)
    assert consumer.reply.error == ErrorCode.GROUP_ID_NOT_FOUND
    assert driver.groups["shared"].consumer is None and driver.share("shared").members.keys() == {"m1"}


def test_the_stored_records_rebuild_the_group_after_a_move():
    driver = Driver()
    driver.beat("m1", topics=("t", "u"))
    driver.beat("m2", topics=("u",))
    driver.beat("m1", epoch=1, topics=None)
    driver.beat("m3")
    driver.beat("m3", epoch=-1, topics=None)
    live, rebuilt = driver.share(), driver.replayed()
    assert (rebuilt.epoch, rebuilt.assignment_epoch) == (live.epoch, live.assignment_epoch)
    assert rebuilt.target == live.target
    assert {m: (x.epoch, x.assigned, x.subscribed) for m, x in rebuilt.members.items()} == \
        {m: (x.epoch, x.assigned, x.subscribed) for m, x in live.members.items()}
    assert sorted(live.snapshot()) == sorted(rebuilt.snapshot())


async def test_share_groups_on_the_group_coordinator_replay_and_expire_on_its_clock():
    clock = FakeClock()
    groups = await coordinator(clock=clock)
    reply = await groups.share_heartbeat(ShareHeartbeat("sg", "m1", 0, "c", "/h", None, ["t"]))
    assert (reply.error, reply.member_epoch, partitions(reply)) == (ErrorCode.NONE, 1, {T_GROUPS: [0, 1, 2, 3]})
    await groups.share_heartbeat(ShareHeartbeat("sg", "m2", 0, "c", "/h", None, ["t"]))
    assert groups.describe("sg").share.epoch == 2
    await assert_replays_to_the_same_state(groups)
    await clock.advance(45_000)
    assert groups.describe("sg").share.members == {}
    await assert_replays_to_the_same_state(groups)
    assert await groups.delete_group("sg") == ErrorCode.NONE
    await assert_replays_to_the_same_state(groups)
    assert [group.group_id for group in groups.list_groups()] == []
    await groups.close()


async def test_the_broker_hears_of_a_share_member_gone_once_its_removal_is_stored():
    clock, writer, told = FakeClock(), MemoryPartitionWriter(range(PARTITIONS)), []

    async def gone(group_id, member_id):
        told.append((group_id, member_id, writer.records(groups.partition_of(group_id))))

    groups = GroupCoordinator(settings(**{"group.share.session.timeout.ms": 45_000}), StandInCluster(PARTITIONS),
                              writer, clock, lambda: GROUP_TOPICS, lambda name: False, share_member_gone=gone)
    await groups.start()
    for index in range(PARTITIONS):
        await groups.gain(index)
    for member in ("m1", "m2"):
        await groups.share_heartbeat(ShareHeartbeat("sg", member, 0, "c", "/h", None, ["t"]))
    await groups.share_heartbeat(ShareHeartbeat("sg", "m1", -1, "c", "/h", None, None))
    await settle()
    stored = writer.records(groups.partition_of("sg"))
    assert told == [("sg", "m1", stored)]
    await clock.advance(45_000)
    assert [t[:2] for t in told] == [("sg", "m1"), ("sg", "m2")]
    await groups.close()
