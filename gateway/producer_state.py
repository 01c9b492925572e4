"""Idempotent-producer state per partition: Kafka's sequence checks (KIP-98).

For each producer id the table keeps its epoch and its last five batches (the most
a producer may have in flight), so a retried batch is recognised and answered with
the offset it was first stored at instead of being stored twice.
"""
import asyncio
from collections import deque
from dataclasses import dataclass, field

from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError
from kgate.protocol.record_batch import BatchHeader

MAX_CACHED_BATCHES = 5


@dataclass(slots=True)
class CachedBatch:
    first_sequence: int
    last_sequence: int
    base_offset: int
    durable: asyncio.Future | None


@dataclass(slots=True)
class _Producer:
    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=MAX_CACHED_BATCHES))
    last_timestamp: int = -1
    # The sequence to expect when every cached batch was given up (see ``forget_failed``).
    resume_at: int = 0
    # Batches still to be refused retriably when they skip ahead of the expected sequence, and
    # why that sequence is missing here (see ``check``).
    gaps_to_refuse: int = 0
    gap_cause: str = ""

    def forget_failed(self, log_end: int) -> None:
        """Drop the newest batches whose entries failed to become durable *and* that the
        ledger gave up (their offsets go to the next appends, from ``log_end``), so their
        retries are new batches. A failed batch the log still counts (a WAL object written
        but not confirmed, its ledger fenced) may yet be recovered by the partition's next
        owner: its retry must keep meeting the cached batch, and the batches after it their
        sequence, or the client is told OUT_OF_ORDER_SEQUENCE_NUMBER, starts a new epoch and
        sends the records again under new sequences, stored twice once that owner recovers
        the first copy."""
        while (self.batches and _failed(self.batches[-1].durable)
               and self.batches[-1].base_offset >= log_end):
            self.resume_at = self.batches.pop().first_sequence
            self.refuse_gaps("whose write failed")

    def refuse_gaps(self, cause: str) -> None:
        self.gaps_to_refuse, self.gap_cause = MAX_CACHED_BATCHES - 1, cause


@dataclass(frozen=True, slots=True)
class ActiveProducer:
    """What DescribeProducers reports of one producer: its last batch's sequence and max timestamp."""

    producer_id: int
    epoch: int
    last_sequence: int
    last_timestamp: int


class SequenceError(KafkaError):
    """An idempotent producer's batch out of sequence or epoch, with Kafka's code for it, and
    the sequence the partition expected when the batch skipped past it."""

    def __init__(self, code: ErrorCode, message: str, expected: int | None = None):
        super().__init__(code, message)
        self.expected = expected


class ProducerStateTable:
    def __init__(self):
        self._producers: dict[int, _Producer] = {}

    def check(self, header: BatchHeader, log_end: int) -> CachedBatch | None:
        """The cached batch when ``header`` is a retry of one; None when it is new.
        ``log_end``: the offset the next append would get.

        Raises SequenceError with Kafka's error code when it must be refused.
        """
        producer = self._producers.get(header.producer_id)
        if producer is None:
            if header.base_sequence != 0:
                raise SequenceError(ErrorCode.UNKNOWN_PRODUCER_ID,
                                    f"producer {header.producer_id} is unknown and starts at sequence "
                                    f"{header.base_sequence}", expected=0)
            return None
        if header.producer_epoch < producer.epoch:
            raise SequenceError(ErrorCode.INVALID_PRODUCER_EPOCH,
                                f"producer {header.producer_id} epoch {header.producer_epoch} "
                                f"< current {producer.epoch}")
        if header.producer_epoch > producer.epoch:
            if header.base_sequence != 0:
                raise SequenceError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                    f"new epoch {header.producer_epoch} must start at sequence 0, "
                                    f"not {header.base_sequence}", expected=0)
            return None
        producer.forget_failed(log_end)
        for cached in producer.batches:
            if cached.first_sequence == header.base_sequence and cached.last_sequence == header.last_sequence:
                return cached
        expected = ((producer.batches[-1].last_sequence + 1) & 0x7FFFFFFF if producer.batches
                    else producer.resume_at)
        if producer.gaps_to_refuse and _ahead(header.base_sequence, expected) and not header.is_transactional:
            # Sent behind a batch this partition has not got: one whose write failed and was given
            # up (its client was answered KAFKA_STORAGE_ERROR), or one sent to it before the log it
            # opened was read back, lost with the partition's last opening here (its client was
            # answered when its write was given up). Either is sent again, so the batches behind it
            # are refused retriably, and the client sends them again in order.
            # OUT_OF_ORDER_SEQUENCE_NUMBER would make librdkafka start a new epoch and send every
            # record not yet acknowledged again, on every partition: a record stored but not
            # answered elsewhere is then stored twice (gateway/refused_batches.py has the same case
            # for batches refused before their check). Transactional producers do skip sequences
            # (after records failed with an aborted transaction), and hear the check's answer.
            producer.gaps_to_refuse -= 1
            raise SequenceError(ErrorCode.KAFKA_STORAGE_ERROR,
                                f"producer {header.producer_id} sent sequence {header.base_sequence} behind "
                                f"sequence {expected}, {producer.gap_cause}", expected=expected)
        if header.base_sequence != expected:
            raise SequenceError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                f"producer {header.producer_id} sent sequence {header.base_sequence}, "
                                f"expected {expected}", expected=expected)
        return None

    def record(self, header: BatchHeader, base_offset: int, durable: asyncio.Future | None) -> _Producer:
        producer = self._producers.get(header.producer_id)
        if producer is None or header.producer_epoch > producer.epoch:
            producer = self._producers[header.producer_id] = _Producer(header.producer_epoch)
        producer.batches.append(CachedBatch(header.base_sequence, header.last_sequence, base_offset, durable))
        producer.last_timestamp = header.max_timestamp
        producer.gaps_to_refuse = 0
        return producer

    def read_back(self, header: BatchHeader, base_offset: int) -> None:
        """A batch found in the log as the partition opened. Batches a client sent before the
        opening and that did not reach the log (a partition dropped here and opened again, its
        unconfirmed writes given up with it) are sent again; the ones pipelined behind them may
        arrive first, and skip ahead of what the log holds: see ``check``."""
        self.record(header, base_offset, None).refuse_gaps("which the log opened here does not hold")

    def end_transaction(self, producer_id: int, epoch: int) -> None:
        """A transaction marker of ``epoch`` was written: batches of older epochs are fenced.

        A marker of a newer epoch (the coordinator bumped it to abort a transaction of a
        producer that timed out or re-initialised) starts the producer afresh at it.
        """
        producer = self._producers.get(producer_id)
        if producer is None or epoch > producer.epoch:
            self._producers[producer_id] = _Producer(epoch)

    def active(self) -> list[ActiveProducer]:
        return [ActiveProducer(producer_id, producer.epoch, producer.batches[-1].last_sequence,
                               producer.last_timestamp)
                for producer_id, producer in self._producers.items() if producer.batches]

    def last_batch_offsets(self) -> dict[int, int]:
        """Each producer's last batch's base offset: the log cleaner keeps that batch even when
        compaction empties it, so the producer's sequence survives a restart."""
        return {producer_id: producer.batches[-1].base_offset
                for producer_id, producer in self._producers.items() if producer.batches}

    def __len__(self) -> int:
        return len(self._producers)


def _ahead(sequence: int, expected: int) -> bool:
    """Whether ``sequence`` lies past ``expected`` (sequences wrap at 2**31)."""
    return 0 < (sequence - expected) & 0x7FFFFFFF < 1 << 30


def _failed(durable: asyncio.Future | None) -> bool:
    return durable is not None and durable.done() and not durable.cancelled() and durable.exception() is not None
