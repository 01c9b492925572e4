"""Where a share-partition's leader reads and writes its persisted state: Kafka's persister.

The state lives with the owner of the share-partition's ``__share_group_state`` partition,
which is in general not the broker serving the topic partition (each is placed on its own).
When this broker holds the state it runs the share coordinator's rules directly; otherwise
it sends InitializeShareGroupState, ReadShareGroupState or WriteShareGroupState (83-85) to
the owner over the peer
link, as Kafka's share partition leader does through its persister. While the state
partition moves (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS,
or a peer that cannot be reached) it asks again, on the clock, up to ``RETRY_MS``;
anything else is the answer.
"""
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError
from kgate.protocol.messages import (
    DeleteShareGroupStateRequest,
    InitializeShareGroupStateRequest,
    ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest,
    WriteShareGroupStateRequest,
)

from ..coordinator import Clock
from ..peer_links import PeerUnavailable
from .coordinator import ShareCoordinator
from .partition_state import DeliveryState, StateBatch
from .records import SharePartitionKey
from .shard import ShareSummary, StoredState

log = logging.getLogger(__name__)

RETRY_MS = 10_000
BACKOFF_MS = 100
ANSWER_TIMEOUT_S = 10.0
MOVING = (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)


class Peers(Protocol):
    async def request(self, node_id: int, request, version: int, timeout: float): ...


class SharePersister:
    def __init__(self, coordinator: ShareCoordinator, node_id: int, peers: Callable[[], Peers], clock: Clock):
        self.coordinator = coordinator
        self.node_id = node_id
        self._peers = peers
        self.clock = clock

    async def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> None:
        """Place a share-partition never started (InitializeShareGroupState)."""
        IN = InitializeShareGroupStateRequest
        request = IN(group_id=key.group_id, topics=[IN.InitializeStateData(topic_id=key.topic_id, partitions=[
            IN.InitializeStateData.PartitionData(partition=key.partition, state_epoch=state_epoch,
                                                 start_offset=start_offset)])])
        await self._ask(key, lambda: self.coordinator.initialize(key, state_epoch, start_offset), request, 0,
                        _nothing)

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> StoredState:
        """The stored state, start offset -1 if never initialized (the coordinator's INVALID_REQUEST:
        a leader asks with a valid partition, so that is what it means); this leader epoch fences
        older leaders."""
        try:
            return await self._read(key, leader_epoch)
        except KafkaError as exc:
            if exc.code != ErrorCode.INVALID_REQUEST:
                raise
            return StoredState(0, -1)

    async def _read(self, key: SharePartitionKey, leader_epoch: int) -> StoredState:
        R = ReadShareGroupStateRequest
        request = R(group_id=key.group_id, topics=[R.ReadStateData(topic_id=key.topic_id, partitions=[
            R.ReadStateData.PartitionData(partition=key.partition, leader_epoch=leader_epoch)])])

        def answer(result) -> StoredState:
            return StoredState(result.state_epoch, result.start_offset, tuple(
                StateBatch(b.first_offset, b.last_offset, DeliveryState(b.delivery_state), b.delivery_count)
                for b in result.state_batches))
        return await self._ask(key, lambda: self.coordinator.read(key, leader_epoch), request, 0, answer)

    async def write(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: list[StateBatch], delivery_complete: int) -> None:
        W = WriteShareGroupStateRequest
        P = W.WriteStateData.PartitionData
        request = W(group_id=key.group_id, topics=[W.WriteStateData(topic_id=key.topic_id, partitions=[
            P(partition=key.partition, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
              delivery_complete_count=delivery_complete, state_batches=[
                  P.StateBatch(first_offset=b.first, last_offset=b.last, delivery_state=int(b.state),
                               delivery_count=b.delivery_count) for b in batches])])])
        await self._ask(key, lambda: self.coordinator.write(key, state_epoch, leader_epoch, start_offset, batches,
                                                            delivery_complete), request, 1, _nothing)

    # -- the share-group offsets administration, from the group's coordinator --------------------

    async def summary(self, key: SharePartitionKey) -> ShareSummary:
        """What DescribeShareGroupOffsets tells of the share-partition (ReadShareGroupStateSummary);
        the records in flight only when the state is here."""
        S = ReadShareGroupStateSummaryRequest
        request = S(group_id=key.group_id, topics=[S.ReadStateSummaryData(topic_id=key.topic_id, partitions=[
            S.ReadStateSummaryData.PartitionData(partition=key.partition, leader_epoch=-1)])])

        async def here() -> ShareSummary:
            return self.coordinator.summary(key)

        def answer(result) -> ShareSummary:
            return ShareSummary(result.start_offset, result.leader_epoch, result.delivery_complete_count, -1,
                                result.state_epoch)
        return await self._ask(key, here, request, 1, answer)

    async def reset(self, key: SharePartitionKey, offset: int) -> None:
        """AlterShareGroupOffsets: the share-partition starts afresh at ``offset`` under a new state
        epoch (InitializeShareGroupState), which fences its leader's older state."""
        if self._here(key):
            await self._ask(key, lambda: self.coordinator.reset_offsets({key: offset}), None, 0, _nothing)
            return
        await self.initialize(key, (await self.summary(key)).state_epoch + 1, offset)

    async def delete(self, key: SharePartitionKey) -> bool:
        """DeleteShareGroupOffsets: the share-partition's state goes (DeleteShareGroupState);
        whether it had any."""
        if self._here(key):
            return bool(await self._ask(key, lambda: self.coordinator.delete_offsets([key]), None, 0, _nothing))
        if (await self.summary(key)).start_offset < 0:
            return False
        X = DeleteShareGroupStateRequest
        request = X(group_id=key.group_id, topics=[X.DeleteStateData(topic_id=key.topic_id, partitions=[
            X.DeleteStateData.PartitionData(partition=key.partition)])])
        await self._ask(key, lambda: self.coordinator.delete(key), request, 0, _nothing)
        return True

    def _here(self, key: SharePartitionKey) -> bool:
        return self._elsewhere(key) is None

    def _elsewhere(self, key: SharePartitionKey) -> int | None:
        """The broker holding the share-partition's state when it is not this one."""
        owner = self.coordinator.owner_of(key)
        return None if owner is None or owner.node_id == self.node_id else owner.node_id

    async def _ask(self, key: SharePartitionKey, here: Callable[[], Awaitable], request, version: int,
                   answer: Callable):
        await self.coordinator.ensure_topic()
        deadline = self.clock.now_ms() + RETRY_MS
        while True:
            try:
                owner = self._elsewhere(key)
                if owner is None:
                    return await here()
                if request is None:  # the state moved away since the caller looked: asked again
                    raise KafkaError(ErrorCode.NOT_COORDINATOR)
                return answer(await self._remote(owner, request, version))
            except KafkaError as exc:
                if exc.code not in MOVING or self.clock.now_ms() >= deadline:
                    raise
            except (PeerUnavailable, TimeoutError) as exc:
                if self.clock.now_ms() >= deadline:
                    raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc)) from exc
            await self.clock.sleep(BACKOFF_MS)

    async def _remote(self, node_id: int, request, version: int):
        """The one partition result of a share-state request sent to broker ``node_id``."""
        response = await self._peers().request(node_id, request, version, ANSWER_TIMEOUT_S)
        [topic] = response.results
        [result] = topic.partitions
        if result.error_code != ErrorCode.NONE:
            raise KafkaError(result.error_code, result.error_message)
        return result


def _nothing(result) -> None:
    return None
