"""The share coordinator: share-partitions' persisted state, run on the runtime's share shards.

As in Kafka, a share-partition's live state (``SharePartition``: what is acquired, by whom,
until when) is held by the broker serving the topic partition (gateway/shares/leader.py),
which reads and writes its persisted state at the share coordinator owning the
``__share_group_state`` partition placed by ``abs(java_hash("group:topicId:partition")) % N``.
That state is replayed by the state partition's next owner like the other coordinators'.
This is the coordinator's side: the share-state APIs' rules (83-87) on the shard owning a
key, answered NOT_COORDINATOR when another broker owns it, and the share-group offsets
administration. The topic is made on first use.
"""
import logging
from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING

from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError

from ..coordinator import Clock, CoordinatorRuntime, PartitionWriter
from ..coordinator.internal_topics import InternalTopics
from ..coordinator.shard import Result
from ..groups.placement import partition_for
from .partition_state import StateBatch
from .records import SharePartitionKey
from .shard import UNINITIALIZED, ShareRecord, ShareStateShard, ShareSummary, StoredState

if TYPE_CHECKING:
    from kgate.metadata.cluster import BrokerInfo

    from ..config import Settings

log = logging.getLogger(__name__)

SHARE_STATE_TOPIC = "__share_group_state"


class ShareCoordinator:
    def __init__(self, settings: "Settings", cluster: InternalTopics, writer: PartitionWriter, clock: Clock):
        self.cluster = cluster
        self.num_partitions = settings["share.coordinator.state.topic.num.partitions"]
        self.runtime: CoordinatorRuntime[ShareStateShard] = CoordinatorRuntime(
            SHARE_STATE_TOPIC, writer, clock, ShareStateShard, settings["kgate.offsets.compaction.min.records"])

    async def close(self) -> None:
        await self.runtime.close()

    async def ensure_topic(self) -> None:
        if self.cluster.partition_count(SHARE_STATE_TOPIC) is None:
            await self.cluster.create_internal_topic(SHARE_STATE_TOPIC, self.num_partitions)

    async def gain(self, index: int) -> None:
        await self.runtime.load(index)

    def lose(self, index: int) -> None:
        self.runtime.unload(index)

    def partition_of(self, key: SharePartitionKey) -> int:
        count = self.cluster.partition_count(SHARE_STATE_TOPIC)
        return partition_for(key.coordinator_key(), count if count is not None else self.num_partitions)

    def owner_of(self, key: SharePartitionKey) -> "BrokerInfo | None":
        """The broker holding the share-partition's state (None while the topic is not made or has no owner)."""
        if self.cluster.partition_count(SHARE_STATE_TOPIC) is None:
            return None
        return self.cluster.owner(SHARE_STATE_TOPIC, self.partition_of(key))

    def _owned(self, key: SharePartitionKey) -> int:
        """The shard holding the key here; KafkaError as Kafka's share coordinator answers otherwise."""
        index = self.partition_of(key)
        if not self.runtime.owns(index):
            owner = self.owner_of(key)
            if owner is None or owner.node_id == self.cluster.node_id:  # just made, or loading here
                raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            raise KafkaError(ErrorCode.NOT_COORDINATOR, "this broker does not hold the share-partition's state")
        return index

    # -- the share-state APIs (83-87), one share-partition each ------------------------------

    async def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> None:
        await self.runtime.write(self._owned(key), lambda shard, now: shard.initialize(key, state_epoch,
                                                                                         start_offset))

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> StoredState:
        return await self.runtime.write(self._owned(key), lambda shard, now: shard.read(key, leader_epoch))

    async def write(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: list[StateBatch], delivery_complete: int = -1) -> None:
        await self.runtime.write(self._owned(key), lambda shard, now: shard.write(
            key, state_epoch, leader_epoch, start_offset, batches, delivery_complete))

    async def delete(self, key: SharePartitionKey) -> None:
        await self.runtime.write(self._owned(key), lambda shard, now: shard.delete(key))

    def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> ShareSummary:
        return self.runtime.shard(self._owned(key)).read_summary(key, leader_epoch)

    async def delete_group(self, group_id: str) -> None:
        """DeleteGroups removed the group: its share-partitions' state here goes too (tombstones)."""
        for index in list(self.runtime.shards):
            await self.runtime.write(index, lambda shard, now: shard.delete_group(group_id))

    # -- administration: the share-group offsets APIs ------------------------------------------

    def summary(self, key: SharePartitionKey) -> ShareSummary:
        """A share-partition's start offset and finished records; KafkaError when its state is elsewhere."""
        if self.cluster.partition_count(SHARE_STATE_TOPIC) is None:  # no share group has read yet
            return UNINITIALIZED
        return self.runtime.shard(self._owned(key)).summary(key)

    def group_partitions(self, group_id: str) -> list[SharePartitionKey]:
        """The group's started share-partitions whose state this broker holds."""
        return sorted(key for shard in self.runtime.shards.values() for key in shard.group_partitions(group_id))

    async def reset_offsets(self, offsets: dict[SharePartitionKey, int]) -> None:
        """Start each share-partition afresh at its offset (KafkaError, nothing changed, when the
        state of one is elsewhere)."""
        for index, keys in self._by_partition(offsets).items():
            await self.runtime.write(index, partial(_reset, {key: offsets[key] for key in keys}))

    async def delete_offsets(self, keys: list[SharePartitionKey]) -> list[SharePartitionKey]:
        """Drop the share-partitions' state; those that had some (KafkaError, nothing changed,
        when the state of one is elsewhere)."""
        deleted: list[SharePartitionKey] = []
        if self.cluster.partition_count(SHARE_STATE_TOPIC) is None:
            return deleted
        for index, placed in self._by_partition(keys).items():
            gone: list[SharePartitionKey] = await self.runtime.write(index, partial(_delete, placed))
            deleted += gone
        return deleted

    def _by_partition(self, keys: Iterable[SharePartitionKey]) -> dict[int, list[SharePartitionKey]]:
        """The keys by their state partition, every one checked to be here before anything is written."""
        placed: dict[int, list[SharePartitionKey]] = {}
        for key in keys:
            placed.setdefault(self._owned(key), []).append(key)
        return placed


# The rules as the runtime runs them, bound to their arguments (a loop's lambdas would share one).
def _reset(offsets: dict[SharePartitionKey, int], shard: ShareStateShard, now: int) -> Result[None, ShareRecord]:
    return shard.reset_offsets(offsets)


def _delete(keys: list[SharePartitionKey], shard: ShareStateShard,
            now: int) -> Result[list[SharePartitionKey], ShareRecord]:
    return shard.delete_offsets(keys)
