"""One partition as the broker serves it: its managed ledger and its producer state."""
import asyncio
import logging

from kgate.protocol.record_batch import HEADER_SIZE, read_header
from kgate.storage import entry_formats
from kgate.storage.entry import EntryHeader
from kgate.storage.entry_formats import EntryFormat, ProducedRecords
from kgate.storage.managed_ledger import ManagedLedger

from .producer_state import ProducerStateTable

log = logging.getLogger(__name__)


class Partition:
    def __init__(self, topic: str, index: int, ledger: ManagedLedger):
        self.topic = topic
        self.index = index
        self.ledger = ledger
        self.producers = ProducerStateTable()
        # [[epoch, start offset], ...]: a new epoch each time a broker takes the partition over.
        self.epochs: list[list[int]] = [[0, 0]]
        # Whether writes fail now (a full disk): said once when they start and once when they stop.
        self.writes_failing = False

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
        await self.ledger.open(observe=self._observe, payload_head=HEADER_SIZE)

    def _observe(self, header: EntryHeader, payload_head: bytes) -> None:
        """Rebuild producer state from stored magic-2 ``kafka``/``mixed_kafka`` entries."""
        if header.magic != 2 or len(payload_head) < HEADER_SIZE:
            return
        if entry_formats.stores_batches(header.format_code):
            batch = read_header(payload_head)
            if batch.producer_id >= 0 and batch.base_sequence >= 0:
                self.producers.record(batch, header.base_offset, None)

    async def append(self, produced: ProducedRecords, entry_format: EntryFormat,
                     codec: int | None = None) -> tuple[int, asyncio.Future]:
        """Store ``produced`` once: a retry of an idempotent batch gets its first offset back.

        Raises SequenceError (with Kafka's error code) for batches to refuse, and
        InvalidBatch when the entry format finds records it cannot store.
        """
        header = produced.batch
        idempotent = header is not None and header.producer_id >= 0 and header.base_sequence >= 0
        await self.ledger.prepare_append()
        # From here to the end, no await: the sequence check and the append are atomic.
        if idempotent:
            cached = self.producers.check(header)
            if cached is not None:
                return cached.base_offset, cached.durable or _done()
        base, durable = self.ledger.append(
            produced.record_count, produced.max_timestamp, entry_format.stored_magic(produced), entry_format.code,
            lambda base_offset: entry_format.encode(produced, base_offset, self.leader_epoch, codec))
        if idempotent:
            self.producers.record(header, base, durable)
        return base, durable


def _done() -> asyncio.Future:
    future = asyncio.get_running_loop().create_future()
    future.set_result(None)
    return future
