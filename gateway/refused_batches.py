"""Idempotent batches a connection's produces refused before their sequence check, so that
the batches pipelined behind one are refused alike rather than found out of sequence.

A producer keeps up to five batches per partition in flight. When the first arrives while
the partition is not served here (not yet taken over, its ledger's tail still in another
broker's local WAL, the metadata session suspended), it is refused with a retriable error;
but the partition may be served by the time the next one, sent before the client heard of
the refusal, arrives. Its sequence check then finds the refused batch missing and answers
OUT_OF_ORDER_SEQUENCE_NUMBER. librdkafka answers that, for a batch behind another one not
yet acknowledged, by starting a new epoch once its requests have drained and sending every
record not acknowledged again under new sequences, on every partition: a record that another
partition's owner stored but never acknowledged (a request that timed out) is stored twice
(fault run seed 12: producer 2000's sequences 389-391 refused, 392 and 393 answered "expected
389" just after the partition was served, and a batch of another partition duplicated). Kafka's
broker would say the same in that instant, but kgate's partitions stay refused for seconds
while they change hands, and clients keep pipelining into that moment.

So a batch whose sequence check finds missing exactly the first sequence of a batch this
connection refused (same producer and epoch) gets that refusal's error instead: the client
then sends them all again, in order. (A partition opened since the refusal refuses such a
batch by its producer state alone, which it read back from the log: ``ProducerStateTable.
read_back``. This memory is for the partition that stayed open, its session suspended or its
store out of reach for a moment.) At most ``MAX_CACHED_BATCHES - 1`` batches per refusal
are answered so, the most a producer can have behind it, so a client that really skipped
sequences still hears Kafka's answer.

Transactional batches are left to the check: a transactional producer does skip sequences
after a refusal (librdkafka fails the refused records with the transaction it then aborts, and
goes on from the sequence after them), so the batch after them is not behind a batch to be
sent again, and OUT_OF_ORDER_SEQUENCE_NUMBER only aborts a transaction, which duplicates nothing
(a seed-12 run: a transactional batch answered the refusal's error four times, to no end, before
it heard the check's answer). An idempotent producer that is not transactional skips no sequence
without starting a new epoch (librdkafka, Kafka's Java client).
"""
from dataclasses import dataclass, field

from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError
from kgate.protocol.record_batch import HEADER_SIZE, BatchHeader, read_header

from .producer_state import MAX_CACHED_BATCHES, SequenceError

# Refusals made before the sequence check that ask the client to send the batch again.
_SENT_AGAIN = frozenset({ErrorCode.NOT_LEADER_FOR_PARTITION, ErrorCode.KAFKA_STORAGE_ERROR})


class RefusedBehind(KafkaError):
    """A batch refused because one before it, on the same connection, was."""


@dataclass(slots=True)
class _Refusal:
    producer_id: int
    epoch: int
    error: ErrorCode
    first_sequences: set[int] = field(default_factory=set)
    behind: int = MAX_CACHED_BATCHES - 1  # batches still to be refused alike

    def of(self, header: BatchHeader) -> bool:
        return self.producer_id == header.producer_id and self.epoch == header.producer_epoch


class RefusedBatches:
    def __init__(self) -> None:
        self._by_partition: dict[tuple[str, int], _Refusal] = {}

    def refused(self, key: tuple[str, int], records, refusal: KafkaError) -> None:
        """The batch in ``records`` for partition ``key`` was refused with ``refusal`` before its
        sequence was checked (or recorded): remembered if it is an idempotent batch to be sent again."""
        if refusal.code not in _SENT_AGAIN or isinstance(refusal, RefusedBehind) or len(records) < HEADER_SIZE:
            return
        header = read_header(records)
        if header.magic != 2 or header.producer_id < 0 or header.base_sequence < 0 or header.is_transactional:
            return
        known = self._by_partition.get(key)
        if known is None or not known.of(header):
            known = self._by_partition[key] = _Refusal(header.producer_id, header.producer_epoch, refusal.code)
        known.error = refusal.code
        known.first_sequences.add(header.base_sequence)
        known.behind = MAX_CACHED_BATCHES - 1

    def __bool__(self) -> bool:
        """Whether any refusal is remembered: the produce path asks this before building a key."""
        return bool(self._by_partition)

    def appended(self, key: tuple[str, int], header: BatchHeader | None) -> None:
        """A batch of the producer was taken: the refused ones were sent again (or never will be)."""
        known = self._by_partition.get(key)
        if known is not None and header is not None and known.of(header):
            del self._by_partition[key]

    def answer(self, key: tuple[str, int], header: BatchHeader, out_of_order: SequenceError) -> KafkaError:
        """What to answer a batch its sequence check refused: the error of a refused batch whose
        first sequence is the one it found missing, when there is one; else that check's answer."""
        known = self._by_partition.get(key)
        expected = out_of_order.expected
        if (known is None or expected is None or known.behind == 0 or not known.of(header)
                or expected not in known.first_sequences or header.base_sequence <= expected):
            return out_of_order
        known.behind -= 1
        return RefusedBehind(known.error, f"producer {header.producer_id} sent sequence {header.base_sequence} "
                                          f"behind sequence {expected}, refused on this connection")
