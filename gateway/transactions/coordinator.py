"""The transaction coordinator: drives ``machine`` and keeps its state in ``__transaction_state``.

A transactional id belongs to partition ``abs(java_string_hash(id)) % N`` of
``__transaction_state`` (placed like ``__consumer_offsets``, so it moves with the
partition's owner in cluster mode); its owner coordinates it. Every change is
appended to that partition and applied to memory in the same step, and requests are
answered once the append is durable. Requests for one id run one at a time.

Ending a transaction: PrepareCommit/PrepareAbort is stored first; then a COMMIT or
ABORT marker goes to every partition of the transaction; then CompleteCommit/
CompleteAbort. A broker that dies in between finds the Prepare state when its
successor (or itself, restarted) replays the partition, and that one writes the
markers again (a second marker for a transaction already ended is harmless: no data
of that producer is open there any more), so a transaction ends whole, never half.

The topic is created on the first FindCoordinator for a transactional id, as Kafka
does, so brokers whose clients never use transactions carry no part of it.
"""
import asyncio
import logging
import time
from collections.abc import Iterable

from kgate.metadata.cluster import TopicExists
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError
from kgate.storage.ledger import LedgerFenced

from .. import keyed_log
from ..groups import OFFSETS_TOPIC
from ..groups.placement import partition_for
from . import machine, records
from .machine import Step, TxnMetadata, TxnState
from .marker_sender import send_marker

log = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"
# How long a failed marker write waits before the next attempt (the owner may be moving).
MARKER_RETRY_S = 0.5


class TransactionCoordinator:
    def __init__(self, broker):
        self.broker = broker
        settings = broker.settings
        self.num_partitions = settings["transaction.state.log.num.partitions"]
        self.max_timeout_ms = settings["transaction.max.timeout.ms"]
        self.check_interval_s = settings["transaction.abort.timed.out.transaction.cleanup.interval.ms"] / 1000
        self.compaction_min_records = settings["kgate.offsets.compaction.min.records"]
        self.transactions: dict[str, TxnMetadata] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._owned: set[int] = set()
        self._appended: dict[int, int] = {}
        self._completing: set[asyncio.Task] = set()
        self._timeout_task: asyncio.Task | None = None

    # -- start-up, placement and replay -----------------------------------------------------

    async def start(self) -> None:
        self._timeout_task = asyncio.create_task(self._timeout_loop())

    async def close(self) -> None:
        for task in [self._timeout_task, *self._completing]:
            if task is not None:
                task.cancel()

    async def ensure_topic(self) -> None:
        """Create ``__transaction_state`` if the cluster has none yet."""
        broker = self.broker
        if TRANSACTION_STATE_TOPIC not in broker.cluster.topics:
            try:
                await broker.create_topic(TRANSACTION_STATE_TOPIC, self.num_partitions, {
                    "cleanup.policy": "compact", "retention.ms": "-1", "retention.bytes": "-1",
                    "kgate.entry.format": "kafka"})
            except TopicExists:
                pass

    def partition_of(self, transactional_id: str) -> int:
        """Placed by the topic's partition count once it exists (another broker may have
        created it with its own ``transaction.state.log.num.partitions``)."""
        topic = self.broker.cluster.topics.get(TRANSACTION_STATE_TOPIC)
        return partition_for(transactional_id, topic.partitions if topic is not None else self.num_partitions)

    def coordinator_of(self, transactional_id: str):
        topic = self.broker.cluster.topics.get(TRANSACTION_STATE_TOPIC)
        return self.broker.leader(topic, self.partition_of(transactional_id)) if topic is not None else None

    def _check_owned(self, transactional_id: str) -> None:
        if self.partition_of(transactional_id) not in self._owned:
            owner = self.coordinator_of(transactional_id)
            if owner is not None and owner.node_id == self.broker.node_id:
                raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            raise KafkaError(ErrorCode.NOT_COORDINATOR, "another broker coordinates this transactional id")

    async def gain(self, index: int) -> None:
        """Serve the transactional ids of partition ``index``: replay it, then finish the
        transactions a previous owner left prepared."""
        partition = self._partition(index)
        replayed = await keyed_log.replay(partition.ledger)
        if self.broker.partitions.get((TRANSACTION_STATE_TOPIC, index)) is not partition:
            return
        for key, value in replayed.latest.items():
            try:
                transactional_id, txn = records.decode(key, value)
            except records.CorruptRecord as exc:
                log.error("%s-%d: skipped a record: %s", TRANSACTION_STATE_TOPIC, index, exc)
                continue
            if txn is None:
                self.transactions.pop(transactional_id, None)
            else:
                self.transactions[transactional_id] = txn
        self._appended[index] = replayed.count
        self._owned.add(index)
        prepared = [txn for txn in self.transactions.values()
                    if txn.state.preparing and self.partition_of(txn.transactional_id) == index]
        for txn in prepared:
            log.info("transaction %s was left in %s: writing its markers", txn.transactional_id,
                     txn.state.kafka_name)
            self._complete_later(txn.transactional_id)

    def lose(self, index: int) -> None:
        self._owned.discard(index)
        for transactional_id in [t for t in self.transactions if self.partition_of(t) == index]:
            del self.transactions[transactional_id]

    def _partition(self, index: int):
        partition = self.broker.partitions.get((TRANSACTION_STATE_TOPIC, index))
        if partition is None:
            raise KafkaError(ErrorCode.NOT_COORDINATOR, "this broker no longer owns the transactional id's partition")
        return partition

    # -- requests ---------------------------------------------------------------------------

    async def init_producer(self, transactional_id: str, timeout_ms: int,
                            expected: tuple[int, int] | None) -> tuple[int, int]:
        """InitProducerId: the producer id and its new epoch; an open transaction of an
        older epoch is aborted first."""
        self._check_owned(transactional_id)
        async with self._lock(transactional_id):
            while True:
                txn = self.transactions.get(transactional_id)
                fresh = await self.broker.next_producer_id() if txn is None or txn.epoch >= machine.MAX_EPOCH else -1
                step = machine.init_producer(txn, transactional_id, timeout_ms, self.max_timeout_ms, expected,
                                             fresh, _now())
                stored = await self._carry_out(transactional_id, step)
                if not step.retry_after:
                    return stored.producer_id, stored.epoch
                await self._complete(transactional_id)
                expected = None  # the abort bumped the epoch this request was entitled to

    async def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                             partitions: Iterable[tuple[str, int]]) -> None:
        self._check_owned(transactional_id)
        async with self._lock(transactional_id):
            await self._carry_out(transactional_id, machine.add_partitions(
                self.transactions.get(transactional_id), producer_id, epoch, set(partitions), _now()))

    async def end(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> None:
        """EndTxn: answered once the markers are written and the transaction is complete."""
        self._check_owned(transactional_id)
        async with self._lock(transactional_id):
            step = machine.end(self.transactions.get(transactional_id), producer_id, epoch, commit, _now())
            await self._carry_out(transactional_id, step)
            if step.store is not None:
                await self._complete(transactional_id)

    def check_produce(self, transactional_id: str, producer_id: int, epoch: int, partition: tuple[str, int]) -> None:
        """Refuse a transactional produce to a partition outside the producer's open transaction.

        Only the coordinator knows; a partition whose coordinator is another broker
        takes the batch on the producer's word, as Kafka brokers before 3.6 did.
        """
        if self.partition_of(transactional_id) not in self._owned:
            return
        refusal = machine.produce_refusal(self.transactions.get(transactional_id), transactional_id, producer_id,
                                          epoch, partition)
        if refusal is not None:
            raise KafkaError(*refusal)

    def describe(self, transactional_id: str) -> TxnMetadata | None:
        self._check_owned(transactional_id)
        return self.transactions.get(transactional_id)

    def listed(self) -> list[TxnMetadata]:
        return list(self.transactions.values())

    # -- carrying out steps -------------------------------------------------------------------

    def _lock(self, transactional_id: str) -> asyncio.Lock:
        lock = self._locks.get(transactional_id)
        if lock is None:
            lock = self._locks[transactional_id] = asyncio.Lock()
        return lock

    async def _carry_out(self, transactional_id: str, step: Step) -> TxnMetadata:
        if step.error != ErrorCode.NONE:
            raise KafkaError(step.error)
        if step.store is not None:
            await self._store(step.store)
        return self.transactions[transactional_id]

    async def _store(self, txn: TxnMetadata) -> None:
        """Append ``txn`` and apply it; return once durable. A store that refuses the write
        is COORDINATOR_NOT_AVAILABLE to the client, which retries (and finds the new owner)."""
        index = self.partition_of(txn.transactional_id)
        partition = self._partition(index)
        try:
            await partition.ledger.prepare_append()
            durable = keyed_log.append(partition, [(records.key(txn.transactional_id), records.value(txn))])
            self.transactions[txn.transactional_id] = txn
            self._appended[index] = self._appended.get(index, 0) + 1
            await keyed_log.durable(durable)
        except (OSError, LedgerFenced) as exc:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"storing the transaction failed: {exc}") from None
        self._maybe_compact(index, partition)

    async def _complete(self, transactional_id: str) -> None:
        """Write the markers of a prepared transaction, then store it complete."""
        txn = self.transactions[transactional_id]
        coordinator_epoch = self._partition(self.partition_of(transactional_id)).leader_epoch
        commit = txn.state == TxnState.PREPARE_COMMIT
        for topic, index in sorted(txn.partitions):
            await self._write_marker(txn, topic, index, commit, coordinator_epoch)
        await self._store(machine.completed(txn, _now()))

    async def _write_marker(self, txn: TxnMetadata, topic: str, index: int, commit: bool,
                            coordinator_epoch: int) -> None:
        """One marker, retried until it is durable or the partition is gone with its topic:
        appended here when this broker serves the partition, else sent to its owner."""
        broker = self.broker
        while True:
            known = broker.cluster.topics.get(topic)
            if known is None:
                return
            try:
                partition = broker.partitions.get((topic, index))
                if partition is not None:
                    await write_marker(broker, partition, txn.producer_id, txn.epoch, commit, coordinator_epoch)
                    return
                owner = broker.leader(known, index)
                if owner is None or owner.node_id == broker.node_id:
                    raise KafkaError(ErrorCode.NOT_LEADER_FOR_PARTITION, "no broker to take it")
                error = await send_marker(broker.peers, owner.node_id, txn.producer_id, txn.epoch, commit,
                                          coordinator_epoch, topic, index)
                if error == ErrorCode.NONE:
                    return
                raise KafkaError(error, f"broker {owner.node_id} answered {error.name}")
            except Exception as exc:
                log.warning("marker for %s to %s-%d failed, retrying: %s", txn.transactional_id, topic, index, exc)
            await asyncio.sleep(MARKER_RETRY_S)
            self._check_owned(txn.transactional_id)

    def _complete_later(self, transactional_id: str) -> None:
        async def complete():
            async with self._lock(transactional_id):
                txn = self.transactions.get(transactional_id)
                if txn is not None and txn.state.preparing:
                    await self._complete(transactional_id)

        task = asyncio.create_task(complete())
        self._completing.add(task)
        task.add_done_callback(self._completed)

    def _completed(self, task: asyncio.Task) -> None:
        self._completing.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("completing a transaction failed: %s", task.exception())

    async def _timeout_loop(self) -> None:
        while True:
            await asyncio.sleep(self.check_interval_s)
            try:
                await self.abort_timed_out(_now())
            except Exception:
                log.exception("aborting timed-out transactions failed")

    async def abort_timed_out(self, now: int) -> int:
        """Abort every open transaction past its ``transaction.timeout.ms`` (fencing its producer)."""
        aborted = 0
        for transactional_id, txn in list(self.transactions.items()):
            if machine.timed_out(txn, now) is None:
                continue
            async with self._lock(transactional_id):
                current = self.transactions.get(transactional_id)
                fenced = machine.timed_out(current, now) if current is not None else None
                if fenced is None:
                    continue
                log.info("transaction %s timed out after %d ms: aborting", transactional_id, current.timeout_ms)
                await self._store(fenced)
                await self._complete(transactional_id)
                aborted += 1
        return aborted

    # -- compaction ---------------------------------------------------------------------------

    def _maybe_compact(self, index: int, partition) -> None:
        """Re-append the live state after a ledger boundary and trim before it once the
        partition holds many more records than ids (as the group coordinator does)."""
        live = [txn for txn in self.transactions.values() if self.partition_of(txn.transactional_id) == index]
        if self._appended[index] <= max(self.compaction_min_records, 2 * len(live)):
            return
        self._appended[index] = len(live)
        task = asyncio.create_task(self._compact(index, partition))
        self._completing.add(task)
        task.add_done_callback(self._completed)

    async def _compact(self, index: int, partition) -> None:
        ledger = partition.ledger
        await ledger.roll_over()
        await ledger.prepare_append()
        start = ledger.next_offset
        live = [txn for txn in self.transactions.values() if self.partition_of(txn.transactional_id) == index]
        await keyed_log.durable(keyed_log.append(partition, [(records.key(t.transactional_id), records.value(t))
                                                           for t in live]))
        await ledger.trim_before(start)
        log.info("%s-%d compacted: %d live records from offset %d", TRANSACTION_STATE_TOPIC, index, len(live), start)


async def write_marker(broker, partition, producer_id: int, epoch: int, commit: bool, coordinator_epoch: int) -> None:
    """Append a marker to a partition this broker serves and wait until it is durable; an
    offsets partition's group coordinator applies or drops the transaction's offsets."""
    durable = await partition.append_marker(producer_id, epoch, commit, coordinator_epoch, _now())
    if partition.topic == OFFSETS_TOPIC:
        broker.groups.transaction_ended(partition.index, producer_id, commit)
    await durable


def _now() -> int:
    return int(time.time() * 1000)
