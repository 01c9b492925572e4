"""Share-partitions: their leader's live state (gateway/shares/leader.py) over the share
coordinator's persisted state (an in-memory ``__share_group_state`` on the coordinator runtime),
on one fake clock, with no broker.

Lock timers are the leader's: records a member holds past the lock duration are offered
again when the clock reaches the deadline, not before. Every change is written to the
coordinator before it is answered, so a new leader (the topic partition's next owner, or a
restarted broker) loading the share-partition gets the same state, with nothing acquired
and delivery counts kept; and a fresh runtime loading the state partition (its next owner)
rebuilds the same stored state. A leader that lost the partition, or whose state the
offsets administration reset, is fenced.
"""
import uuid
from types import SimpleNamespace

import pytest
from kafka.protocol.api_key import ApiKey

from kgate.gateway.config import Settings
from kgate.gateway.coordinator import CoordinatorRuntime
from kgate.gateway.handlers import _HANDLERS as HANDLERS
from kgate.gateway.shares.coordinator import ShareCoordinator
from kgate.gateway.shares.leader import ShareLeaders
from kgate.gateway.shares.partition_state import (
    AckBatch,
    AckType,
    Acquired,
    DeliveryState,
    ShareConfig,
    Span,
    StateBatch,
)
from kgate.gateway.shares.persister import SharePersister
from kgate.gateway.shares.records import SharePartitionKey
from kgate.gateway.shares.shard import ShareStateShard, StoredState
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError
from kgate.protocol.messages import REQUESTS, RESPONSES
from tests.unit.fake_clock import FakeClock, settle
from tests.unit.memory_partition_writer import MemoryPartitionWriter
from tests.unit.stand_in_cluster import StandInCluster

LOCK_MS = 1000
CONFIGS = {"g": ShareConfig(lock_ms=LOCK_MS, delivery_limit=2, auto_offset_reset="earliest"),
           "late": ShareConfig(lock_ms=LOCK_MS)}
P0 = SharePartitionKey("g", uuid.UUID(int=7), 0)
P1 = SharePartitionKey("g", uuid.UUID(int=7), 1)


class Shares:
    """A broker's share coordinator, owning ``__share_group_state`` partition 0, and its
    share-partition leaders (topic partitions served under ``leader_epoch``)."""

    def __init__(self, writer: MemoryPartitionWriter, clock: FakeClock, leader_epoch: int = 0):
        settings = Settings()
        settings.values.update({"share.coordinator.state.topic.num.partitions": 1,
                                "kgate.offsets.compaction.min.records": 1000})
        self.writer, self.clock, self.leader_epoch = writer, clock, leader_epoch
        self.coordinator = ShareCoordinator(settings, StandInCluster(1), writer, clock)
        self.leaders = self.leader(leader_epoch)

    def leader(self, leader_epoch: int) -> ShareLeaders:
        """Leaders of the topic partitions on another broker (or after a move) using this coordinator."""
        self.leader_epoch = leader_epoch
        return ShareLeaders(SharePersister(self.coordinator, 0, lambda: None, self.clock), self.clock,
                            lambda group_id: CONFIGS[group_id])

    def shard(self) -> ShareStateShard:
        return self.coordinator.runtime.shard(0)

    def live(self, key: SharePartitionKey):
        return self.leaders.held[key].state

    async def close(self) -> None:
        self.leaders.close()
        await self.coordinator.close()


async def runtime(writer=None, clock=None, leader_epoch: int = 0) -> Shares:
    shares = Shares(writer or MemoryPartitionWriter(), clock or FakeClock(), leader_epoch)
    await shares.coordinator.gain(0)
    return shares


def stored(shard):
    return sorted(shard.encode(record) for record in shard.snapshot())


async def fetch(shares, key, member, spans, max_records=100, log_end=10, leaders=None):
    leaders = leaders or shares.leaders
    offset = await leaders.fetch_offset(key, "t", shares.leader_epoch, 0, log_end)
    return offset, await leaders.acquire(key, member, spans, max_records)


async def ack(shares, key, member, first, last, *types, leaders=None):
    await (leaders or shares.leaders).acknowledge(key, member, [AckBatch(first, last, types)])


async def reloaded(shares):
    """What the state partition's next owner loads."""
    fresh = CoordinatorRuntime("__share_group_state", shares.writer, FakeClock(), ShareStateShard, 10**9)
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
    assert shares.live(P0).start_offset == shares.shard().partitions[P0].start_offset == 5
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
    assert shares.live(P0).records[1].member is None, "the renewed lock ran out at 900 + 1000"
    await shares.close()


async def test_records_past_the_delivery_limit_are_archived_after_expiry_and_release():
    clock = FakeClock()
    shares = await runtime(clock=clock)
    await fetch(shares, P0, "a", [Span(0, 1)])
    await clock.advance(LOCK_MS)
    await fetch(shares, P0, "b", [Span(0, 1)])
    await ack(shares, P0, "b", 0, 0, AckType.RELEASE)
    await clock.advance(LOCK_MS)
    for state in (shares.live(P0), shares.shard().partitions[P0]):
        assert (state.start_offset, state.records) == (2, {})
    assert await fetch(shares, P0, "c", [Span(0, 1)]) == (2, [])
    await shares.close()


async def test_a_member_leaving_releases_its_records_in_every_partition_of_its_group():
    shares = await runtime()
    await fetch(shares, P0, "a", [Span(0, 1)])
    await fetch(shares, P1, "a", [Span(0, 0)])
    await fetch(shares, P1, "b", [Span(0, 1)])
    await shares.leaders.release_member("g", "a")
    assert await fetch(shares, P0, "c", [Span(0, 1)]) == (0, [Acquired(0, 1, 2)])
    assert await fetch(shares, P1, "c", [Span(0, 1)]) == (0, [Acquired(0, 0, 2)])
    await shares.close()


async def test_the_next_leader_loads_the_same_share_partitions_with_nothing_acquired():
    clock = FakeClock()
    shares = await runtime(clock=clock)
    await fetch(shares, P0, "a", [Span(0, 5)])
    await ack(shares, P0, "a", 0, 2, AckType.ACCEPT, AckType.REJECT, AckType.RELEASE)
    await fetch(shares, P1, "a", [Span(0, 0)])
    late = SharePartitionKey("late", uuid.UUID(int=7), 0)
    assert await fetch(shares, late, "x", [], log_end=42) == (42, [])
    shard = shares.shard()
    moved = await reloaded(shares)
    assert stored(moved) == stored(shard)
    assert moved.partitions[P0].start_offset == 2
    assert moved.partitions[late].start_offset == 42, "share.auto.offset.reset=latest placed it once"
    assert all(state.next_deadline() is None for state in moved.partitions.values())
    successor = shares.leader(1)  # the topic partition's next owner, under a newer leader epoch
    assert await fetch(shares, P0, "b", [Span(0, 5)], leaders=successor) == (2, [Acquired(2, 5, 2)])
    successor.close()
    await shares.close()


async def test_a_leader_that_lost_the_partition_is_fenced_and_forgets_it():
    shares = await runtime()
    old = shares.leaders
    await fetch(shares, P0, "a", [Span(0, 3)])
    new = shares.leader(1)
    assert await fetch(shares, P0, "b", [Span(0, 3)], leaders=new) == (0, [Acquired(0, 3, 2)])
    with pytest.raises(KafkaError) as fenced:
        await ack(shares, P0, "a", 0, 3, AckType.ACCEPT, leaders=old)
    assert fenced.value.code == ErrorCode.FENCED_LEADER_EPOCH
    assert P0 not in old.held, "its state is the new leader's now"
    assert shares.shard().partitions[P0].state_batches() == [StateBatch(0, 3, DeliveryState.AVAILABLE, 2)], \
        "the stale acknowledgement stored nothing"
    await ack(shares, P0, "b", 0, 3, AckType.ACCEPT, leaders=new)
    assert shares.shard().partitions[P0].start_offset == 4
    new.close()
    await shares.close()


async def test_reset_offsets_fence_the_leader_which_loads_the_new_start():
    clock = FakeClock()
    shares = await runtime(clock=clock)
    await fetch(shares, P0, "a", [Span(0, 5)])
    await shares.coordinator.reset_offsets({P0: 4})
    with pytest.raises(KafkaError) as fenced:
        await ack(shares, P0, "a", 0, 5, AckType.ACCEPT)
    assert fenced.value.code == ErrorCode.FENCED_STATE_EPOCH
    assert clock.armed == 0, "the forgotten state's lock timer went with it"
    assert await fetch(shares, P0, "b", [Span(4, 6)]) == (4, [Acquired(4, 6, 1)]), "delivery counts start again"
    await shares.close()


async def refused(call) -> ErrorCode:
    with pytest.raises(KafkaError) as raised:
        await call
    return raised.value.code


async def test_a_write_merges_its_batches_over_the_stored_ones_and_a_read_gives_them_back():
    """Kafka 4.4's share coordinator: nothing is read or written before it is initialized, the
    written batches win where they overlap and are kept as written (the start moves only when
    the leader says), and older state and leader epochs are fenced."""
    shares = await runtime()
    coordinator = shares.coordinator
    A, K, X = DeliveryState.AVAILABLE, DeliveryState.ACKNOWLEDGED, DeliveryState.ARCHIVED
    assert await refused(coordinator.read(P0, 0)) == ErrorCode.INVALID_REQUEST
    assert await refused(coordinator.write(P0, 1, 0, 3, [])) == ErrorCode.INVALID_REQUEST
    assert coordinator.read_summary(P0, 0).start_offset == -1
    await coordinator.initialize(P0, 1, 5)
    await coordinator.write(P0, 1, 1, 5, [StateBatch(5, 9, A, 1), StateBatch(10, 12, K, 1)])
    await coordinator.write(P0, 1, 1, -1, [StateBatch(7, 8, X, 3), StateBatch(13, 13, A, 2)], delivery_complete=5)
    assert await coordinator.read(P0, 1) == StoredState(1, 5, (
        StateBatch(5, 6, A, 1), StateBatch(7, 8, X, 3), StateBatch(9, 9, A, 1), StateBatch(10, 12, K, 1),
        StateBatch(13, 13, A, 2)))
    assert coordinator.read_summary(P0, 1).delivery_complete == 5, "as the leader wrote it"
    assert await refused(coordinator.write(P0, 0, 1, -1, [])) == ErrorCode.FENCED_STATE_EPOCH
    assert await refused(coordinator.write(P0, 1, 0, -1, [])) == ErrorCode.FENCED_LEADER_EPOCH
    assert await refused(coordinator.write(P0, 1, 1, -1, [StateBatch(10**12, 10**12, A, 1)])) == \
        ErrorCode.INVALID_REQUEST, "a window kgate would keep offset by offset, refused"
    assert await refused(coordinator.read(P0, 0)) == ErrorCode.FENCED_LEADER_EPOCH
    await coordinator.write(P0, 1, 2, 9, [StateBatch(9, 9, K, 1)])
    assert await coordinator.read(P0, 2) == StoredState(1, 9, (StateBatch(9, 12, K, 1), StateBatch(13, 13, A, 2)))
    assert stored(await reloaded(shares)) == stored(shares.shard())
    assert await refused(coordinator.initialize(P0, 0, 3)) == ErrorCode.FENCED_STATE_EPOCH
    await coordinator.initialize(P0, 2, 30)
    assert await coordinator.read(P0, 2) == StoredState(2, 30)
    await coordinator.delete(P0)
    await coordinator.delete(P0)  # none stored: no error
    assert await refused(coordinator.read(P0, 0)) == ErrorCode.INVALID_REQUEST
    await shares.close()


async def test_a_deleted_group_leaves_tombstones_and_the_replay_forgets_it():
    clock = FakeClock()
    shares = await runtime(clock=clock)
    await fetch(shares, P0, "a", [Span(0, 1)])
    await shares.coordinator.delete_group("g")
    shares.leaders.drop_group("g")
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


class StateOwnerLink:
    """The peer link to the broker holding the state (``owner``): each request goes over the wire
    encoding to that broker's share-state handler and its answer comes back decoded."""

    def __init__(self, owner: ShareCoordinator):
        topic = SimpleNamespace(partitions=2)
        self.broker = SimpleNamespace(shares=owner, topic_by_id=lambda topic_id: topic)
        self.asked: list[int] = []

    def allowed(self, *args) -> bool:
        return True  # a peer holds ClusterAction

    async def request(self, node_id: int, request, version: int, timeout: float):
        self.asked.append(request.API_KEY)
        received = REQUESTS[request.API_KEY].decode(request.encode(version=version), version=version)
        answer = await HANDLERS[request.API_KEY](self, received)
        return RESPONSES[request.API_KEY].decode(answer.encode(version=version), version=version)


async def test_a_leader_whose_state_is_on_another_broker_uses_the_share_state_apis():
    clock = FakeClock()
    owner = await runtime(clock=clock)  # broker 1, owning __share_group_state-0
    cluster = StandInCluster(1)
    cluster.moved.add(0)
    settings = Settings()
    settings.values.update({"share.coordinator.state.topic.num.partitions": 1})
    here = ShareCoordinator(settings, cluster, MemoryPartitionWriter(), clock)  # broker 0: the data's owner
    link = StateOwnerLink(owner.coordinator)
    leaders = ShareLeaders(SharePersister(here, 0, lambda: link, clock), clock, lambda group_id: CONFIGS[group_id])
    assert await fetch(owner, P0, "a", [Span(0, 3)], leaders=leaders) == (0, [Acquired(0, 3, 1)])
    await ack(owner, P0, "a", 0, 3, AckType.ACCEPT, AckType.REJECT, AckType.RELEASE, AckType.ACCEPT, leaders=leaders)
    assert link.asked == [ApiKey.ReadShareGroupState, ApiKey.InitializeShareGroupState,
                          ApiKey.WriteShareGroupState, ApiKey.WriteShareGroupState]
    stored_state = owner.shard().partitions[P0]
    assert (stored_state.start_offset, stored_state.state_batches()) == (
        2, [StateBatch(2, 2, DeliveryState.AVAILABLE, 1), StateBatch(3, 3, DeliveryState.ACKNOWLEDGED, 1)])
    assert await here.ensure_topic() is None and here.runtime.shards == {}, "nothing is stored on broker 0"
    summary = await SharePersister(here, 0, lambda: link, clock).summary(P0)
    assert (summary.start_offset, summary.delivery_complete) == (2, 1)
    leaders.close()
    await owner.close()
