"""The share-group offsets rules (DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroupOffsets) on the coordinator runtime with an in-memory ``__share_group_state``
and a fake clock, and the group check that guards altering and deleting.

A described share-partition gives its start offset and how many records past it are
finished (what its lag leaves out); an altered one starts afresh at its offset, with
nothing in flight and no lock timer left; a deleted one leaves a tombstone. The next owner
of the state partition must replay each change.
"""
import uuid

import pytest

from kgate.gateway.groups.group import Group
from kgate.gateway.groups.share_machine import ShareHeartbeat
from kgate.gateway.shares.partition_state import AckType, Acquired, Span
from kgate.gateway.shares.records import SharePartitionKey
from kgate.gateway.shares.shard import UNINITIALIZED, ShareSummary
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError
from tests.unit.fake_clock import FakeClock
from tests.unit.test_group_shard import assert_replays_to_the_same_state, coordinator
from tests.unit.test_share_group_machine import Driver
from tests.unit.test_share_state_shard import LOCK_MS, P0, P1, ack, fetch, reloaded, runtime, stored

OTHER = SharePartitionKey("late", uuid.UUID(int=7), 0)


async def test_a_summary_gives_the_start_offset_and_the_finished_records_past_it():
    shares = await runtime()
    assert shares.shard().summary(P0) == UNINITIALIZED
    await fetch(shares, P0, "a", [Span(0, 5)])
    await ack(shares, P0, "a", 0, 5, AckType.ACCEPT, AckType.RELEASE, AckType.ACCEPT, AckType.REJECT,
              AckType.RELEASE, AckType.ACCEPT)
    # 0 is finished and the start moves past it; 2, 3 and 5 are finished behind the released 1 and 4,
    # which are in flight (to be offered again).
    assert shares.shard().summary(P0) == ShareSummary(1, 0, 3, 2, 1)
    await fetch(shares, P0, "b", [Span(1, 6)])
    assert shares.shard().summary(P0) == ShareSummary(1, 0, 3, 3, 1), "1 and 4 again, and 6 for the first time"
    await shares.close()


async def test_the_group_partitions_are_those_started_for_the_group():
    shares = await runtime()
    await fetch(shares, P1, "a", [])
    await fetch(shares, P0, "a", [])
    await fetch(shares, OTHER, "x", [])
    assert shares.shard().group_partitions("g") == [P0, P1]
    assert shares.shard().group_partitions("nobody") == []
    await shares.close()


async def test_an_altered_share_partition_starts_afresh_and_its_next_owner_agrees():
    clock = FakeClock()
    shares = await runtime(clock=clock)
    await fetch(shares, P0, "a", [Span(0, 5)])
    await ack(shares, P0, "a", 0, 1, AckType.ACCEPT)
    assert clock.armed == 1, "records 2-5 are locked"
    await shares.leaders.release_member("g", "a")  # the group is empty when its offsets are altered
    assert clock.armed == 0, "nothing is in flight, so no lock timer is left"
    epoch = shares.shard().partitions[P0].state_epoch
    await shares.coordinator.reset_offsets({P0: 4, P1: 7})
    state = shares.shard().partitions[P0]
    assert (state.start_offset, state.end_offset, state.records, state.state_epoch) == (4, 4, {}, epoch + 1)
    assert shares.shard().summary(P1) == ShareSummary(7, 0, 0, 0, 1), "a share-partition never read starts there too"
    moved = await reloaded(shares)
    assert stored(moved) == stored(shares.shard())
    assert moved.summary(P0) == ShareSummary(4, 0, 0, 0, epoch + 1)
    assert (await fetch(shares, P0, "b", [Span(2, 6)]))[1] == [], "the leader's older state is fenced, not handed out"
    assert await fetch(shares, P0, "b", [Span(4, 6)]) == (4, [Acquired(4, 6, 1)]), "delivery counts start again"
    await clock.advance(LOCK_MS)
    await shares.close()


async def test_deleted_offsets_leave_tombstones_and_only_the_share_partitions_that_had_state_are_answered():
    shares = await runtime()
    await fetch(shares, P0, "a", [Span(0, 1)])
    await fetch(shares, OTHER, "x", [])
    assert await shares.coordinator.delete_offsets([P0, P1]) == [P0]
    assert shares.shard().summary(P0) == UNINITIALIZED
    moved = await reloaded(shares)
    assert set(moved.partitions) == {OTHER}
    assert await shares.coordinator.delete_offsets([P0]) == []
    await shares.close()


def test_only_an_empty_share_group_may_have_its_offsets_altered_or_deleted():
    driver = Driver()
    check = driver.machine.check_offsets_alterable
    with pytest.raises(KafkaError) as missing:
        check("g")
    assert (missing.value.code, missing.value.message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group g not found.")
    driver.groups["classic"] = Group("classic")
    with pytest.raises(KafkaError) as classic:
        check("classic")
    assert (classic.value.code, classic.value.message) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                           "Group classic is not a share group.")
    assert driver.beat("m1").error == ErrorCode.NONE
    with pytest.raises(KafkaError) as busy:
        check("g")
    assert busy.value.code == ErrorCode.NON_EMPTY_GROUP
    assert driver.beat("m1", epoch=-1).error == ErrorCode.NONE
    check("g")  # empty now: allowed


async def test_altering_the_offsets_of_a_group_id_no_group_has_makes_an_empty_share_group_that_replays():
    groups = await coordinator()
    await groups.prepare_share_offsets_alter("fresh")
    made = groups.describe("fresh")
    assert (made.share.state, made.share.members, made.protocol_type) == ("Empty", {}, "share")
    await assert_replays_to_the_same_state(groups)
    await groups.prepare_share_offsets_alter("fresh")  # empty already: allowed, nothing new
    await groups.share_heartbeat(ShareHeartbeat("fresh", "m1", 0, "c", "/h", None, ["t"]))
    with pytest.raises(KafkaError) as busy:
        await groups.prepare_share_offsets_alter("fresh")
    assert busy.value.code == ErrorCode.NON_EMPTY_GROUP
    with pytest.raises(KafkaError) as missing:
        groups.check_share_offsets_alterable("never")
    assert missing.value.code == ErrorCode.GROUP_ID_NOT_FOUND, "deleting offsets makes no group"
    assert groups.describe("never") is None
    await groups.close()
