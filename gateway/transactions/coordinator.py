"""The transaction coordinator: transactional ids' requests, run on the runtime's transaction shards.

A transactional id belongs to partition ``abs(java_string_hash(id)) % N`` of
``__transaction_state`` (placed like ``__consumer_offsets``, so it moves with the
partition's owner in cluster mode); its owner coordinates it. Each partition served
here is a :class:`TransactionShard`; requests for one id run one at a time and are
answered once what they stored is durable.

Ending a transaction: PrepareCommit/PrepareAbort is stored first; then a COMMIT or
ABORT marker goes to every partition of the transaction (``marker_delivery``); then
CompleteCommit/CompleteAbort. A broker that dies in between leaves the Prepare state
for its successor (or itself, restarted), whose shard's first check writes the
markers again, so a transaction ends whole, never half.

The topic is created on the first FindCoordinator for a transactional id, as Kafka
does, so brokers whose clients never use transactions carry no part of it.
"""
import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING

from kgate.metadata.cluster import BrokerInfo
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError

from ..coordinator import Clock, CoordinatorRuntime, PartitionWriter
from ..coordinator.internal_topics import InternalTopics
from ..groups.placement import partition_for
from . import machine
from .machine import Step, TxnMetadata, TxnState
from .marker_delivery import Marker, MarkerDelivery, MarkerWriter
from .shard import TransactionShard

if TYPE_CHECKING:
    from ..config import Settings

log = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"


class TransactionCoordinator:
    def __init__(self, settings: "Settings", cluster: InternalTopics, writer: PartitionWriter, clock: Clock,
                 markers: MarkerWriter, next_producer_id: Callable[[], Awaitable[int]]):
        self.cluster = cluster
        self.writer = writer
        self.next_producer_id = next_producer_id
        self.num_partitions = settings["transaction.state.log.num.partitions"]
        self.max_timeout_ms = settings["transaction.max.timeout.ms"]
        check_interval_ms = settings["transaction.abort.timed.out.transaction.cleanup.interval.ms"]
        self.runtime: CoordinatorRuntime[TransactionShard] = CoordinatorRuntime(
            TRANSACTION_STATE_TOPIC, writer, clock,
            lambda index: TransactionShard(index, check_interval_ms, self.check),
            settings["kgate.offsets.compaction.min.records"])
        self.delivery = MarkerDelivery(markers, clock)
        self._locks: dict[str, asyncio.Lock] = {}

    # -- start-up, placement and loading -----------------------------------------------------

    async def start(self) -> None:
        """Partitions load as they are gained; the topic is made on first use."""

    async def close(self) -> None:
        await self.runtime.close()

    async def ensure_topic(self) -> None:
        """Create ``__transaction_state`` if the cluster has none yet."""
        if self.cluster.partition_count(TRANSACTION_STATE_TOPIC) is None:
            await self.cluster.create_internal_topic(TRANSACTION_STATE_TOPIC, self.num_partitions)

    def partition_of(self, transactional_id: str) -> int:
        """Placed by the topic's partition count once it exists (another broker may have
        created it with its own ``transaction.state.log.num.partitions``)."""
        count = self.cluster.partition_count(TRANSACTION_STATE_TOPIC)
        return partition_for(transactional_id, count if count is not None else self.num_partitions)

    def coordinator_of(self, transactional_id: str) -> BrokerInfo | None:
        if self.cluster.partition_count(TRANSACTION_STATE_TOPIC) is None:
            return None
        return self.cluster.owner(TRANSACTION_STATE_TOPIC, self.partition_of(transactional_id))

    def _check_owned(self, transactional_id: str) -> int:
        index = self.partition_of(transactional_id)
        if not self.runtime.owns(index):
            owner = self.coordinator_of(transactional_id)
            if owner is not None and owner.node_id == self.cluster.node_id:
                raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            raise KafkaError(ErrorCode.NOT_COORDINATOR, "another broker coordinates this transactional id")
        return index

    async def gain(self, index: int) -> None:
        """Serve the transactional ids of partition ``index``: replay it; its shard's first
        check finishes the transactions a previous owner left prepared."""
        await self.runtime.load(index)

    def lose(self, index: int) -> None:
        self.runtime.unload(index)

    @property
    def transactions(self) -> dict[str, TxnMetadata]:
        """Every transactional id this broker coordinates."""
        return {t: txn for shard in self.runtime.shards.values() for t, txn in shard.transactions.items()}

    # -- requests ---------------------------------------------------------------------------

    async def init_producer(self, transactional_id: str, timeout_ms: int,
                            expected: tuple[int, int] | None) -> tuple[int, int]:
        """InitProducerId: the producer id and its new epoch; an open transaction of an
        older epoch is aborted first."""
        index = self._check_owned(transactional_id)
        async with self._lock(transactional_id):
            stored, aborting = await self._init(index, transactional_id, timeout_ms, expected)
            if aborting:
                await self._complete(index, transactional_id)
                # The abort bumped the epoch this request was entitled to; the transaction is complete now.
                stored, _ = await self._init(index, transactional_id, timeout_ms, None)
            return stored.producer_id, stored.epoch

    async def _init(self, index: int, transactional_id: str, timeout_ms: int,
                    expected: tuple[int, int] | None) -> tuple[TxnMetadata, bool]:
        """One InitProducerId step: what it stored, and whether that is the abort of an open transaction."""
        txn = self.runtime.shard(index).transactions.get(transactional_id)
        fresh = await self.next_producer_id() if txn is None or txn.epoch >= machine.MAX_EPOCH else -1
        step = machine.init_producer(txn, transactional_id, timeout_ms, self.max_timeout_ms, expected, fresh,
                                     self.runtime.clock.now_ms())
        stored = await self.runtime.write(index, lambda shard, now: shard.store(step))
        assert stored is not None  # a step with no error stores
        return stored, step.retry_after

    async def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                             partitions: Iterable[tuple[str, int]]) -> None:
        index = self._check_owned(transactional_id)
        added = set(partitions)
        async with self._lock(transactional_id):
            await self.runtime.write(index, lambda shard, now: shard.store(machine.add_partitions(
                shard.transactions.get(transactional_id), producer_id, epoch, added, now)))

    async def end(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> None:
        """EndTxn: answered once the markers are written and the transaction is complete."""
        index = self._check_owned(transactional_id)
        async with self._lock(transactional_id):
            stored = await self.runtime.write(index, lambda shard, now: shard.store(machine.end(
                shard.transactions.get(transactional_id), producer_id, epoch, commit, now)))
            if stored is not None:
                await self._complete(index, transactional_id)

    def check_produce(self, transactional_id: str, producer_id: int, epoch: int, partition: tuple[str, int]) -> None:
        """Refuse a transactional produce to a partition outside the producer's open transaction.

        Only the coordinator knows; a partition whose coordinator is another broker
        takes the batch on the producer's word, as Kafka brokers before 3.6 did.
        """
        shard = self.runtime.shards.get(self.partition_of(transactional_id))
        if shard is None:
            return
        refusal = machine.produce_refusal(shard.transactions.get(transactional_id), transactional_id, producer_id,
                                          epoch, partition)
        if refusal is not None:
            raise KafkaError(*refusal)

    def describe(self, transactional_id: str) -> TxnMetadata | None:
        return self.runtime.shard(self._check_owned(transactional_id)).transactions.get(transactional_id)

    def listed(self) -> list[TxnMetadata]:
        return list(self.transactions.values())

    # -- storing, markers and the periodic check -------------------------------------------------

    def _lock(self, transactional_id: str) -> asyncio.Lock:
        lock = self._locks.get(transactional_id)
        if lock is None:
            lock = self._locks[transactional_id] = asyncio.Lock()
        return lock

    async def _complete(self, index: int, transactional_id: str) -> None:
        """Write the markers of a prepared transaction, then store it complete."""
        txn = self.runtime.shard(index).transactions[transactional_id]
        marker = Marker(txn.producer_id, txn.epoch, txn.state == TxnState.PREPARE_COMMIT,
                        self.writer.leader_epoch(index))
        await self.delivery.deliver(transactional_id, txn.partitions, marker, lambda: self.runtime.owns(index))
        await self.runtime.write(index, lambda shard, now: shard.store(Step(store=machine.completed(txn, now))))

    async def check(self, index: int, now: int) -> None:
        """Abort every open transaction of partition ``index`` past its ``transaction.timeout.ms``
        (fencing its producer), and deliver the markers of prepared ones nobody is ending."""
        for transactional_id, txn in list(self.runtime.shard(index).transactions.items()):
            if machine.timed_out(txn, now) is None and not (txn.state.preparing and
                                                             not self._lock(transactional_id).locked()):
                continue
            try:
                await self._end_stalled(index, transactional_id, now)
            except KafkaError as exc:
                log.warning("ending transaction %s failed, to be tried again: %s", transactional_id, exc)

    async def _end_stalled(self, index: int, transactional_id: str, now: int) -> None:
        async with self._lock(transactional_id):
            current = self.runtime.shard(index).transactions.get(transactional_id)
            if current is None:
                return
            fenced = machine.timed_out(current, now)
            if fenced is not None:
                log.info("transaction %s timed out after %d ms: aborting", transactional_id, current.timeout_ms)
                await self.runtime.write(index, lambda shard, now: shard.store(Step(store=fenced)))
            elif current.state.preparing:
                log.info("transaction %s was left in %s: writing its markers", transactional_id,
                         current.state.kafka_name)
            else:
                return
            await self._complete(index, transactional_id)
