"""One partition as the broker serves it: its managed ledger, its producer state and its transactions."""
import asyncio
import logging
import time

from kgate.protocol import control_batch
from kgate.protocol.record_batch import HEADER_SIZE, read_header, validate
from kgate.storage import entry_formats
from kgate.storage.entry import EntryHeader
from kgate.storage.entry_formats import EntryFormat, ProducedRecords
from kgate.storage.ledger import LedgerFenced
from kgate.storage.managed_ledger import ManagedLedger

from .partition_transactions import PartitionTransactions
from .producer_state import ProducerStateTable

log = logging.getLogger(__name__)

# What of each stored entry the partition reads when it opens: the batch header, and
# for a transaction marker its record's key (COMMIT or ABORT) right after it.
_OBSERVED_HEAD = HEADER_SIZE + 16


class Partition:
    def __init__(self, topic: str, index: int, ledger: ManagedLedger):
        self.topic = topic
        self.index = index
        self.ledger = ledger
        self.producers = ProducerStateTable()
        self.transactions = PartitionTransactions()
        # [[epoch, start offset], ...]: a new epoch each time a broker takes the partition over.
        self.epochs: list[list[int]] = [[0, 0]]
        # Whether writes fail now (a full disk): said once when they start and once when they stop.
        self.writes_failing = False
        # Why the ledger refused an append as fenced; every later append is refused alike until
        # the partition is opened again (see ``append``).
        self.fenced: LedgerFenced | None = None
        # Record-set bytes appended and fetched since it was opened here: the load it puts on
        # this broker, reported as rates for the balancer (gateway.balancer).
        self.bytes_in = 0
        self.bytes_out = 0
        self.opened_at = time.monotonic()

    @property
    def leader_epoch(self) -> int:
        return self.epochs[-1][0]

    def writes_failed(self, failure: BaseException) -> None:
        if not self.writes_failing:
            log.error("%s-%d: writes fail, answering KAFKA_STORAGE_ERROR until they succeed again: %s",
                      self.topic, self.index, failure)
        self.writes_failing = True

    def writes_succeeded(self) -> None:
        if self.writes_failing:
            log.info("%s-%d: writes succeed again", self.topic, self.index)
            self.writes_failing = False

    async def open(self) -> None:
        await self.ledger.open(observe=self._observe, payload_head=_OBSERVED_HEAD)

    def _observe(self, header: EntryHeader, payload_head: bytes) -> None:
        """Rebuild producer state and open and aborted transactions from stored magic-2
        ``kafka``/``mixed_kafka`` entries."""
        if header.magic != 2 or len(payload_head) < HEADER_SIZE:
            return
        if entry_formats.stores_batches(header.format_code):
            batch = read_header(payload_head)
            if batch.is_control:
                kind = control_batch.marker_type(payload_head)
                if kind is not None:
                    self.producers.end_transaction(batch.producer_id, batch.producer_epoch)
                    self.transactions.marker_appended(batch.producer_id, kind == control_batch.COMMIT,
                                                      header.base_offset)
                return
            if batch.producer_id >= 0 and batch.base_sequence >= 0:
                self.producers.read_back(batch, header.base_offset)
            if batch.is_transactional:
                self.transactions.batch_appended(batch.producer_id, header.base_offset)

    async def append(self, produced: ProducedRecords, entry_format: EntryFormat,
                     codec: int | None = None) -> tuple[int, asyncio.Future]:
        """Store ``produced`` once: a retry of an idempotent batch gets its first offset back.

        Raises SequenceError (with Kafka's error code) for batches to refuse, and
        InvalidBatch when the entry format finds records it cannot store.
        """
        header = produced.batch
        # The batch of an idempotent producer, whose sequence is checked and recorded; None otherwise.
        idempotent = header if header is not None and header.producer_id >= 0 and header.base_sequence >= 0 else None
        if self.fenced is not None:
            # Refused before the sequence check, as a broker that does not lead the partition
            # refuses: checked, the batch after a refused one would be OUT_OF_ORDER_SEQUENCE_NUMBER,
            # and librdkafka answers that with a new epoch, sending again under new sequences
            # records the next owner may recover from storage (duplicates, fault run seed 23).
            raise self.fenced
        try:
            await self.ledger.prepare_append()
            # From here to the append, no await: the sequence check and the append are atomic.
            if idempotent is not None:
                cached = self.producers.check(idempotent, self.ledger.next_offset)
                if cached is not None:
                    return cached.base_offset, cached.durable or _done()
            base, durable = self.ledger.append(
                produced.record_count, produced.max_timestamp, entry_format.stored_magic(produced),
                entry_format.code, lambda base_offset: entry_format.encode(produced, base_offset, self.leader_epoch,
                                                                           codec))
        except LedgerFenced as fenced:
            self.fenced = fenced
            raise
        if idempotent is not None:
            self.producers.record(idempotent, base, durable)
            if idempotent.is_transactional:
                self.transactions.batch_appended(idempotent.producer_id, base)
        return base, durable

    async def append_marker(self, producer_id: int, producer_epoch: int, commit: bool,
                            coordinator_epoch: int, timestamp_ms: int) -> asyncio.Future:
        """End ``producer_id``'s transaction here with a COMMIT or ABORT marker.

        Stored in the ``kafka`` format whatever the topic's (a marker has no records
        to convert); its epoch fences the producer's older epochs from this partition.
        """
        data = control_batch.build(producer_id, producer_epoch, commit, coordinator_epoch, timestamp_ms)
        produced = ProducedRecords.of_batch(memoryview(data), validate(data))
        kafka_format = entry_formats.by_name("kafka")
        await self.ledger.prepare_append()
        base, durable = self.ledger.append(1, timestamp_ms, 2, kafka_format.code,
                                           lambda base_offset: kafka_format.encode(produced, base_offset,
                                                                                   self.leader_epoch, None))
        self.producers.end_transaction(producer_id, producer_epoch)
        self.transactions.marker_appended(producer_id, commit, base)
        return durable


def _done() -> asyncio.Future:
    future = asyncio.get_running_loop().create_future()
    future.set_result(None)
    return future
