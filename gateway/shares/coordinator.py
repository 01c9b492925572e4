"""The share coordinator: share-partitions' delivery state, run on the runtime's share shards.

Kafka keeps a share-partition's in-memory state (``SharePartition``) on the topic
partition's leader and persists it through the share-state APIs (83-87) to a share
coordinator owning a partition of ``__share_group_state``. kgate keeps the state in the
shard itself, one coordinator runtime over ``__share_group_state``, placed by
``abs(java_hash("group:topicId:partition")) % N`` as Kafka places it, so it is replayed
by the partition's next owner like the other coordinators' state; the share-state
APIs, which only carry that state between two Kafka brokers, have nothing to carry.
ShareFetch and ShareAcknowledge run the rules on the shard directly when this broker
owns the share-partition's state partition (a cluster answers COORDINATOR_NOT_AVAILABLE
per partition otherwise: forwarding is not built). The topic is made on first use.
"""
import logging
from collections.abc import Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING

from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError

from ..coordinator import Clock, CoordinatorRuntime, PartitionWriter
from ..coordinator.internal_topics import InternalTopics
from ..coordinator.shard import Result
from ..groups.placement import partition_for
from .partition_state import AckBatch, Acquired, ShareConfig, Span
from .records import SharePartitionKey
from .shard import UNINITIALIZED, ShareRecord, ShareStateShard, ShareSummary

if TYPE_CHECKING:
    from ..config import Settings

log = logging.getLogger(__name__)

SHARE_STATE_TOPIC = "__share_group_state"


class ShareCoordinator:
    def __init__(self, settings: "Settings", cluster: InternalTopics, writer: PartitionWriter, clock: Clock,
                 config_of: Callable[[str], ShareConfig]):
        self.cluster = cluster
        self.num_partitions = settings["share.coordinator.state.topic.num.partitions"]
        self.config_of = config_of
        self.runtime: CoordinatorRuntime[ShareStateShard] = CoordinatorRuntime(
            SHARE_STATE_TOPIC, writer, clock, lambda index: ShareStateShard(index, config_of),
            settings["kgate.offsets.compaction.min.records"])

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

    def _owned(self, key: SharePartitionKey) -> int:
        index = self.partition_of(key)
        if not self.runtime.owns(index):
            owner = self.cluster.owner(SHARE_STATE_TOPIC, index) if self.cluster.partition_count(
                SHARE_STATE_TOPIC) is not None else None
            if owner is None or owner.node_id == self.cluster.node_id:  # just made, or loading here
                raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "this broker does not hold the share-partition's "
                                                                  "state")
        return index

    # -- the rules, as a fetch and an acknowledgement use them --------------------------------

    async def fetch_offset(self, key: SharePartitionKey, log_start: int, log_end: int) -> int:
        return await self.runtime.write(self._owned(key), lambda shard, now: shard.fetch_offset(key, log_start,
                                                                                                  log_end))

    async def acquire(self, key: SharePartitionKey, member: str, spans: Iterable[Span],
                      max_records: int) -> list[Acquired]:
        return await self.runtime.write(self._owned(key), lambda shard, now: shard.acquire(now, key, member, spans,
                                                                                             max_records))

    async def acknowledge(self, key: SharePartitionKey, member: str, batches: list[AckBatch]) -> None:
        await self.runtime.write(self._owned(key), lambda shard, now: shard.acknowledge(now, key, member, batches))

    async def release_member(self, group_id: str, member: str) -> None:
        """A member's share session closed: what it holds anywhere here goes back to the others."""
        for index in list(self.runtime.shards):
            await self.runtime.write(index, lambda shard, now: shard.release_member(group_id, member))

    async def delete_group(self, group_id: str) -> None:
        """DeleteGroups removed the group: its share-partitions' state goes too (tombstones)."""
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

    def lock_ms(self, group_id: str) -> int:
        return self.config_of(group_id).lock_ms


# The rules as the runtime runs them, bound to their arguments (a loop's lambdas would share one).
def _reset(offsets: dict[SharePartitionKey, int], shard: ShareStateShard, now: int) -> Result[None, ShareRecord]:
    return shard.reset_offsets(offsets)


def _delete(keys: list[SharePartitionKey], shard: ShareStateShard,
            now: int) -> Result[list[SharePartitionKey], ShareRecord]:
    return shard.delete_offsets(keys)
