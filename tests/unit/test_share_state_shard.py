"""Share-partitions on the coordinator runtime: an in-memory ``__share_group_state`` and a fake
clock, with no broker.

Lock timers are the runtime's: records a member holds past the lock duration are offered
again when the clock reaches the deadline, not before. After each step a fresh runtime
loading the partition (the partition's next owner, or a restarted broker) must rebuild the
same share-partitions, with nothing acquired and delivery counts kept.
"""
import uuid

import pytest

from kgate.gateway.coordinator import CoordinatorRuntime
from kgate.gateway.shares.partition_state import AckBatch, AckType, Acquired, ShareConfig, Span
from kgate.gateway.shares.records import SharePartitionKey
from kgate.gateway.shares.shard import ShareStateShard
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError
from tests.unit.fake_clock import FakeClock, settle
from tests.unit.memory_partition_writer import MemoryPartitionWriter

LOCK_MS = 1000
CONFIGS = {"g": ShareConfig(lock_ms=LOCK_MS, delivery_limit=2, auto_offset_reset="earliest"),
           "late": ShareConfig(lock_ms=LOCK_MS)}
P0 = SharePartitionKey("g", uuid.UUID(int=7), 0)
P1 = SharePartitionKey("g", uuid.UUID(int=7), 1)


def new_shard(index):
    return ShareStateShard(index, lambda group_id: CONFIGS[group_id])


async def runtime(writer=None, clock=None):
    shares = CoordinatorRuntime("__share_group_state", writer or MemoryPartitionWriter(), clock or FakeClock(),
                                new_shard, 1000)
    await shares.load(0)
    return shares


def stored(shard):
    return sorted(shard.encode(record) for record in shard.snapshot())


async def fetch(shares, key, member, spans, max_records=100, log_end=10):
    offset = await shares.write(0, lambda shard, now: shard.fetch_offset(key, 0, log_end))
    return offset, await shares.write(0, lambda shard, now: shard.acquire(now, key, member, spans, max_records))


async def ack(shares, key, member, first, last, *types):
    await shares.write(0, lambda shard, now: shard.acknowledge(now, key, member, [AckBatch(first, last, types)]))


async def reloaded(shares):
    """What the partition's next owner loads."""
    fresh = CoordinatorRuntime("__share_group_state", shares.writer, FakeClock(), new_shard, 10**9)
    shard = await fresh.load(0)
    await fresh.close()
    return shard


async def test_a_lock_runs_out_on_the_clock_and_the_records_go_to_another_member():
    clock = FakeClock()
    shares = await runtime(clock=clock)
    assert await fetch(shares, P0, "a", [Span(0, 4)]) == (0, [Acquired(0, 4, 1)])
    await clock.advance(LOCK_MS - 1)
    assert await fetch(shares, P0, "b", [Span(0, 4)]) == (5, [])
    await clock.advance(1)
    assert await fetch(shares, P0, "b", [Span(0, 4)]) == (0, [Acquired(0, 4, 2)])
    with pytest.raises(KafkaError) as late:
        await ack(shares, P0, "a", 0, 4, AckType.ACCEPT)
    assert late.value.code == ErrorCode.INVALID_RECORD_STATE
    await ack(shares, P0, "b", 0, 4, AckType.ACCEPT)
    assert shares.shard(0).partitions[P0].start_offset == 5
    assert clock.armed == 0, "nothing is acquired, so no lock timer is left"
    await shares.close()


async def test_an_acknowledgement_cancels_the_lock_timer_and_a_renewal_moves_it():
    clock = FakeClock()
    shares = await runtime(clock=clock)
    await fetch(shares, P0, "a", [Span(0, 1)])
    await clock.advance(900)
    await ack(shares, P0, "a", 0, 1, AckType.RENEW)
    await clock.advance(900)
    await ack(shares, P0, "a", 0, 0, AckType.ACCEPT)
    await clock.advance(200)
    assert shares.shard(0).partitions[P0].records[1].member is None, "the renewed lock ran out at 900 + 1000"
    await shares.close()


async def test_records_past_the_delivery_limit_are_archived_after_expiry_and_release():
    clock = FakeClock()
    shares = await runtime(clock=clock)
    await fetch(shares, P0, "a", [Span(0, 1)])
    await clock.advance(LOCK_MS)
    await fetch(shares, P0, "b", [Span(0, 1)])
    await ack(shares, P0, "b", 0, 0, AckType.RELEASE)
    await clock.advance(LOCK_MS)
    state = shares.shard(0).partitions[P0]
    assert (state.start_offset, state.records) == (2, {})
    assert await fetch(shares, P0, "c", [Span(0, 1)]) == (2, [])
    await shares.close()


async def test_a_member_leaving_releases_its_records_in_every_partition_of_its_group():
    shares = await runtime()
    await fetch(shares, P0, "a", [Span(0, 1)])
    await fetch(shares, P1, "a", [Span(0, 0)])
    await fetch(shares, P1, "b", [Span(0, 1)])
    await shares.write(0, lambda shard, now: shard.release_member("g", "a"))
    assert await fetch(shares, P0, "c", [Span(0, 1)]) == (0, [Acquired(0, 1, 2)])
    assert await fetch(shares, P1, "c", [Span(0, 1)]) == (0, [Acquired(0, 0, 2)])
    await shares.close()


async def test_the_next_owner_replays_the_same_share_partitions_with_nothing_acquired():
    clock = FakeClock()
    shares = await runtime(clock=clock)
    await fetch(shares, P0, "a", [Span(0, 5)])
    await ack(shares, P0, "a", 0, 2, AckType.ACCEPT, AckType.REJECT, AckType.RELEASE)
    await fetch(shares, P1, "a", [Span(0, 0)])
    late = SharePartitionKey("late", uuid.UUID(int=7), 0)
    assert await fetch(shares, late, "x", [], log_end=42) == (42, [])
    shard = shares.shard(0)
    moved = await reloaded(shares)
    assert stored(moved) == stored(shard)
    assert moved.partitions[P0].start_offset == 2
    assert moved.partitions[late].start_offset == 42, "share.auto.offset.reset=latest placed it once"
    assert all(state.next_deadline() is None for state in moved.partitions.values())
    shares.unload(0)
    assert clock.armed == 0
    successor = await runtime(shares.writer)
    assert await fetch(successor, P0, "b", [Span(0, 5)]) == (2, [Acquired(2, 5, 2)])
    await successor.close()


async def test_a_deleted_group_leaves_tombstones_and_the_replay_forgets_it():
    clock = FakeClock()
    shares = await runtime(clock=clock)
    await fetch(shares, P0, "a", [Span(0, 1)])
    await shares.write(0, lambda shard, now: shard.delete_group("g"))
    await settle()
    assert clock.armed == 0
    assert (await reloaded(shares)).partitions == {}
    await shares.close()


async def test_a_bad_acknowledgement_stores_nothing():
    shares = await runtime()
    await fetch(shares, P0, "a", [Span(0, 1)])
    appended = shares.writer.records()
    for member, batch, error in (("b", AckBatch(0, 1, (1,)), ErrorCode.INVALID_RECORD_STATE),
                                 ("a", AckBatch(1, 0, (1,)), ErrorCode.INVALID_REQUEST)):
        with pytest.raises(KafkaError) as raised:
            await ack(shares, P0, member, batch.first, batch.last, *batch.types)
        assert raised.value.code == error
    with pytest.raises(KafkaError) as unknown:
        await ack(shares, P1, "a", 0, 0, AckType.ACCEPT)
    assert unknown.value.code == ErrorCode.INVALID_RECORD_STATE
    assert shares.writer.records() == appended
    await shares.close()
