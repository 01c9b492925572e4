"""Groups on the coordinator runtime: the group coordinator over an in-memory
``__consumer_offsets`` and a fake clock, with no broker.

After each step a fresh shard loaded from the partition (a restarted broker, or the
partition's next owner) must hold the same state: its snapshot is compared with the
live shard's. Parked JoinGroup and SyncGroup requests are futures the machine's
steps answer; group records are appended before anyone is answered.
"""
import asyncio
import itertools
import logging
import uuid

import pytest

from kgate.gateway.config import Settings
from kgate.gateway.coordinator import CoordinatorRuntime
from kgate.gateway.groups import GroupCoordinator, JoinRequest, records
from kgate.gateway.groups.consumer_machine import Heartbeat
from kgate.gateway.groups.group import GroupState
from kgate.gateway.groups.records import CommittedOffset
from kgate.gateway.groups.shard import GroupShard
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError
from tests.unit.fake_clock import FakeClock, settle
from tests.unit.memory_partition_writer import MemoryPartitionWriter
from tests.unit.stand_in_cluster import StandInCluster

TOPICS = {"t": (uuid.UUID(int=1), 4)}
PARTITIONS = 2


def settings(**values):
    chosen = Settings()
    chosen.values.update({"offsets.topic.num.partitions": PARTITIONS, "group.initial.rebalance.delay.ms": 0,
                          "kgate.offsets.compaction.min.records": 1000, **values})
    return chosen


async def coordinator(writer=None, clock=None, **values):
    writer = writer or MemoryPartitionWriter(range(PARTITIONS))
    groups = GroupCoordinator(settings(**values), StandInCluster(PARTITIONS), writer, clock or FakeClock(),
                              lambda: TOPICS, lambda name: False)
    await groups.start()
    for index in range(PARTITIONS):
        await groups.gain(index)
    groups.writer, groups.clock = writer, groups.runtime.clock
    return groups


def snapshot(shard: GroupShard) -> list:
    return sorted(shard.encode(record) for record in shard.snapshot())


async def assert_replays_to_the_same_state(groups):
    """A broker that loads the partitions now (a crash here, or a move) rebuilds the same groups."""
    for index, shard in groups.runtime.shards.items():
        fresh = CoordinatorRuntime("__consumer_offsets", groups.writer, FakeClock(), groups.runtime.new_shard, 10**9)
        assert snapshot(await fresh.load(index)) == snapshot(shard)
        await fresh.close()


def join_request(member_id="", client="c", group="g", session_ms=10_000):
    return JoinRequest(group, member_id, None, client, "/10.0.0.1", session_ms, 30_000, "consumer",
                       [("range", b"sub")], False, False)


async def two_members(groups, group="g"):
    """Members a and b joined in one generation (CompletingRebalance): (a, b, generation)."""
    first = await groups.join(join_request(client="a", group=group))
    b_joins = asyncio.ensure_future(groups.join(join_request(client="b", group=group)))
    await settle()
    a_rejoined = await groups.join(join_request(first.member_id, client="a", group=group))
    b_joined = await b_joins
    assert a_rejoined.generation == b_joined.generation == 2
    return a_rejoined.member_id, b_joined.member_id, 2


async def stable(groups, group="g"):
    a, b, generation = await two_members(groups, group)
    follower = asyncio.ensure_future(groups.sync(group, generation, b, None, None, None, {}))
    await groups.sync(group, generation, a, None, None, None, {a: b"A", b: b"B"})
    await follower
    return a, b, generation


def offset(value, now=1):
    return CommittedOffset(value, -1, "", now)


def last_record(writer, index):
    entry = writer.entries[index][-1]
    return records.decode(entry.key, entry.value)


async def test_the_leaders_assignment_is_written_before_anyone_is_answered():
    groups = await coordinator()
    a, b, generation = await two_members(groups)
    groups.writer.gate = asyncio.get_running_loop().create_future()
    follower = asyncio.ensure_future(groups.sync("g", generation, b, None, None, None, {}))
    leader = asyncio.ensure_future(groups.sync("g", generation, a, None, None, None, {a: b"A", b: b"B"}))
    await settle()
    assert not follower.done() and not leader.done()
    key, value = last_record(groups.writer, groups.partition_of("g"))
    assert key == ("group", "g") and value.generation == generation
    assert {m.member_id: m.assignment for m in value.members} == {a: b"A", b: b"B"}
    groups.writer.gate.set_result(None)
    assert await leader == (ErrorCode.NONE, b"A") and await follower == (ErrorCode.NONE, b"B")
    assert groups.describe("g").state is GroupState.STABLE
    await assert_replays_to_the_same_state(groups)
    await groups.close()


async def test_a_failed_assignment_write_answers_coordinator_not_available_and_rebalances(caplog):
    groups = await coordinator()
    a, b, generation = await two_members(groups)
    follower = asyncio.ensure_future(groups.sync("g", generation, b, None, None, None, {}))
    await settle()
    groups.writer.failure = OSError("disk full")
    with caplog.at_level(logging.INFO, logger="kgate.gateway"):
        leader = await groups.sync("g", generation, a, None, None, None, {a: b"A", b: b"B"})
    assert leader == await follower == (ErrorCode.COORDINATOR_NOT_AVAILABLE, b"")
    assert groups.describe("g").state is GroupState.PREPARING_REBALANCE
    assert f"group g: storing generation {generation} failed" in caplog.messages
    assert "group g rebalancing (generation 2): storing the assignment failed" in caplog.messages
    await groups.close()


async def test_losing_the_partition_answers_parked_requests_not_coordinator():
    groups = await coordinator()
    index = groups.partition_of("g")
    neighbour = next(f"h{i}" for i in itertools.count() if groups.partition_of(f"h{i}") == index)
    other = next(f"o{i}" for i in itertools.count() if groups.partition_of(f"o{i}") != index)
    _, b, generation = await two_members(groups)
    await two_members(groups, neighbour)
    await two_members(groups, other)
    parked = [asyncio.ensure_future(groups.sync("g", generation, b, None, None, None, {})),
              asyncio.ensure_future(groups.join(join_request(client="c", group=neighbour)))]
    await settle()
    groups.cluster.moved.add(index)
    groups.lose(index)
    (sync_error, _), join_result = await asyncio.gather(*parked)
    assert sync_error == join_result.error == ErrorCode.NOT_COORDINATOR
    assert set(groups.groups) == {other}
    with pytest.raises(KafkaError) as refused:
        groups.heartbeat("g", generation, b, None)
    assert refused.value.code == ErrorCode.NOT_COORDINATOR
    await groups.clock.advance(60_000)  # no timer of the lost groups is left to fire
    assert set(groups.groups) == {other}
    await groups.close()


async def test_a_cancelled_parked_join_still_counts_and_its_answer_goes_nowhere():
    """A closed connection cancels the parked JoinGroup; the rebalance completes without it."""
    groups = await coordinator()
    a, b, _ = await two_members(groups)
    joining = asyncio.ensure_future(groups.join(join_request(client="c")))
    await settle()
    c = list(groups.describe("g").members)[-1]
    joining.cancel()
    await settle()
    shard = groups.runtime.shard(groups.partition_of("g"))
    assert groups.describe("g").members[c].awaiting_join and shard._parked == {}
    b_rejoins = asyncio.ensure_future(groups.join(join_request(b, client="b")))
    await settle()
    a_rejoined = await groups.join(join_request(a, client="a"))
    assert a_rejoined.generation == (await b_rejoins).generation == 3
    assert [m for m, _, _ in a_rejoined.members] == [a, b, c]
    assert groups.describe("g").state is GroupState.COMPLETING_REBALANCE and shard._parked == {}
    await groups.close()


async def test_a_member_whose_session_runs_out_on_the_clock_is_removed_and_the_group_rebalances():
    groups = await coordinator()
    a, b, generation = await stable(groups)
    await groups.clock.advance(9_000)
    assert groups.heartbeat("g", generation, a, None) == ErrorCode.NONE
    await groups.clock.advance(1_000)  # b's session (10 s) is over; a heartbeated a second ago
    group = groups.describe("g")
    assert set(group.members) == {a} and group.state is GroupState.PREPARING_REBALANCE
    await groups.close()


async def test_offsets_commit_delete_and_the_group_go_through_the_log_step_by_step():
    groups = await coordinator()
    a, b, generation = await stable(groups)
    await assert_replays_to_the_same_state(groups)
    assert groups.check_commit("g", generation, a, None) == ErrorCode.NONE
    await groups.commit("g", {("t", 0): offset(5), ("t", 1): offset(7), ("u", 0): offset(1)})
    assert groups.fetch_offsets("g", [("t", 0), ("t", 3)]) == {("t", 0): offset(5), ("t", 3): None}
    await assert_replays_to_the_same_state(groups)
    with pytest.raises(KafkaError) as refused:  # members whose subscriptions the broker cannot read
        await groups.delete_offsets("g", [("t", 1)])
    assert refused.value.code == ErrorCode.NON_EMPTY_GROUP
    await groups.forget_topic("u")
    assert set(groups.fetch_offsets("g", None)) == {("t", 0), ("t", 1)}
    await assert_replays_to_the_same_state(groups)
    assert await groups.delete_group("g") == ErrorCode.NON_EMPTY_GROUP
    assert await groups.leave("g", [(a, None), (b, None)]) == [ErrorCode.NONE, ErrorCode.NONE]
    await settle()
    await assert_replays_to_the_same_state(groups)
    assert await groups.delete_offsets("g", [("t", 1)]) == {("t", 1): ErrorCode.NONE}
    assert groups.fetch_offsets("g", None) == {("t", 0): offset(5)}
    await assert_replays_to_the_same_state(groups)
    assert await groups.delete_group("g") == ErrorCode.NONE
    assert groups.describe("g") is None and await groups.delete_group("g") == ErrorCode.GROUP_ID_NOT_FOUND
    await assert_replays_to_the_same_state(groups)
    await groups.close()


async def test_an_empty_group_outlives_its_last_offset_until_deleted_or_cleaned_up():
    """As in Kafka: OffsetDelete of the last offset leaves the Empty group (DeleteGroups then
    deletes it); forgetting it at once made it reappear when the partition was replayed."""
    clock = FakeClock()
    groups = await coordinator(clock=clock, **{"offsets.retention.minutes": 1,
                                               "offsets.retention.check.interval.ms": 70_000})
    for group in ("deleted", "cleaned", "expired"):
        a, b, generation = await stable(groups, group)
        await groups.commit(group, {("t", 0): offset(5, now=clock.now)})
        assert await groups.leave(group, [(a, None), (b, None)]) == [ErrorCode.NONE, ErrorCode.NONE]
        await settle()
    for group in ("deleted", "cleaned"):
        assert await groups.delete_offsets(group, [("t", 0)]) == {("t", 0): ErrorCode.NONE}
        assert groups.describe(group) is not None and groups.fetch_offsets(group, None) == {}
    await assert_replays_to_the_same_state(groups)
    assert await groups.delete_group("deleted") == ErrorCode.NONE
    await clock.advance(70_000)  # the cleanup: expired's offset is past retention, cleaned has none
    assert groups.describe("cleaned") is None and groups.describe("expired") is None
    assert await groups.delete_group("cleaned") == ErrorCode.GROUP_ID_NOT_FOUND
    await assert_replays_to_the_same_state(groups)
    await groups.close()


async def test_offsets_of_an_empty_group_expire_on_the_clock():
    clock = FakeClock()
    groups = await coordinator(clock=clock, **{"offsets.retention.minutes": 1,
                                               "offsets.retention.check.interval.ms": 10_000})
    await groups.commit("lonely", {("t", 0): offset(5, now=clock.now)})
    await groups.commit("busy", {("t", 0): offset(5, now=clock.now)})
    await clock.advance(30_000)
    await groups.commit("busy", {("t", 0): offset(6, now=clock.now)})
    await clock.advance(40_000)  # lonely's offset is 70 s old, busy's 40 s
    assert groups.describe("lonely") is None and groups.fetch_offsets("busy", None) == {("t", 0): offset(6, 1_030_000)}
    await assert_replays_to_the_same_state(groups)
    await groups.close()


async def test_transactional_offsets_count_from_the_commit_marker_and_survive_a_restart_before_it():
    groups = await coordinator()
    index = groups.partition_of("g")
    await groups.commit("g", {("t", 0): offset(1)})
    await groups.commit_in_transaction("g", 7, 0, {("t", 0): offset(10)})
    await groups.commit_in_transaction("g", 8, 0, {("t", 1): offset(20)})
    assert groups.fetch_offsets("g", None) == {("t", 0): offset(1)}
    restarted = await coordinator(groups.writer)  # the broker dies before the markers
    for live in (groups, restarted):
        groups.writer.end_transaction(index, 7, commit=True)
        live.transaction_ended(index, 7, True)
        live.transaction_ended(index, 8, False)
        assert live.fetch_offsets("g", None) == {("t", 0): offset(10)}
    groups.writer.end_transaction(index, 8, commit=False)
    await assert_replays_to_the_same_state(groups)
    await groups.close()
    await restarted.close()


async def test_a_consumer_group_is_rebuilt_from_its_records_and_its_member_expires_on_the_clock():
    groups = await coordinator(**{"group.consumer.session.timeout.ms": 45_000})
    reply = await groups.consumer_heartbeat(Heartbeat("cg", "", 0, "client", "/10.0.0.1", None, None, 60_000,
                                                      ["t"], None, None, None))
    assert reply.error == ErrorCode.NONE and reply.member_epoch == 1
    assert {p for parts in reply.assignment.values() for p in parts} == {0, 1, 2, 3}
    await assert_replays_to_the_same_state(groups)
    restarted = await coordinator(groups.writer)
    assert list(restarted.describe("cg").consumer.members) == [reply.member_id]
    await restarted.clock.advance(45_000)  # the member must heartbeat to the new coordinator within a session
    assert restarted.describe("cg").consumer.members == {}
    await assert_replays_to_the_same_state(restarted)
    await groups.close()
    await restarted.close()


async def test_compaction_keeps_every_groups_state():
    groups = await coordinator(**{"kgate.offsets.compaction.min.records": 50})
    a, b, generation = await stable(groups)
    await groups.consumer_heartbeat(Heartbeat("cg", "", 0, "client", "/10.0.0.1", None, None, 60_000, ["t"], None,
                                              None, None))
    for i in range(60):
        for group in ("g", "cg", "other"):
            await groups.commit(group, {("t", i % 4): offset(i)})
    await settle()
    assert groups.writer.rolls >= 1
    for index in range(PARTITIONS):
        assert groups.writer.records(index) < 60
    await assert_replays_to_the_same_state(groups)
    assert groups.fetch_offsets("g", None) == {("t", p): offset(56 + p) for p in range(4)}
    await groups.close()


async def test_the_migration_policy_setting_reaches_every_shard():
    groups = await coordinator(**{"group.consumer.migration.policy": "upgrade"})
    assert {(shard.consumers.upgrade, shard.consumers.downgrade) for shard in groups.runtime.shards.values()} == \
        {(True, False)}
    await groups.close()
