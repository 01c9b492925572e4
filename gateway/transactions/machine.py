"""The transaction coordinator's rules (KIP-98), with no I/O: state in, a step out.

Each function takes a transactional id's current metadata (or None) and a request,
and returns a :class:`Step`: the error to answer, or the metadata to store (the
coordinator appends it to ``__transaction_state`` and answers once it is durable).
A stored state of PrepareCommit or PrepareAbort tells the coordinator to write the
markers to every partition of the transaction and then store :func:`completed`.

States and their moves, as Kafka's coordinator has them::

    Empty / CompleteCommit / CompleteAbort --AddPartitions--> Ongoing
    Ongoing --EndTxn(commit)--> PrepareCommit --markers--> CompleteCommit
    Ongoing --EndTxn(abort), timeout, InitProducerId--> PrepareAbort --markers--> CompleteAbort
    Empty / Complete* --InitProducerId--> Empty (epoch + 1)

An abort that the producer did not ask for (a timeout, or a new InitProducerId while
a transaction is open) bumps the epoch first, so the old producer is fenced from the
coordinator and, through the markers' epoch, from every partition it wrote to.
"""
import dataclasses
from dataclasses import dataclass
from enum import IntEnum

from kgate.protocol.error_codes import ErrorCode

# Kafka stops bumping an epoch here and hands out a new producer id instead.
MAX_EPOCH = 32767 - 1


class TxnState(IntEnum):
    """Kafka's status codes, as stored in ``__transaction_state`` and named in DescribeTransactions."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return "".join(word.capitalize() for word in self.name.split("_"))

    @property
    def preparing(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


@dataclass(frozen=True, slots=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]] = frozenset()
    start_ms: int = -1
    update_ms: int = -1


@dataclass(frozen=True, slots=True)
class Step:
    error: ErrorCode = ErrorCode.NONE
    store: TxnMetadata | None = None
    # InitProducerId met an open transaction: abort it (store holds PrepareAbort), then ask again.
    retry_after: bool = False


def init_producer(txn: TxnMetadata | None, transactional_id: str, timeout_ms: int, max_timeout_ms: int,
                  expected: tuple[int, int] | None, fresh_producer_id: int, now: int) -> Step:
    """InitProducerId with a transactional id. ``expected`` is the producer id and epoch a
    v3+ client sends to resume (KIP-360); ``fresh_producer_id`` is used when a new id is due."""
    if not 0 < timeout_ms <= max_timeout_ms:
        return Step(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
    if txn is None:
        return Step(store=TxnMetadata(transactional_id, fresh_producer_id, 0, timeout_ms, TxnState.EMPTY,
                                      update_ms=now))
    if expected is not None and (expected[0] != txn.producer_id or expected[1] not in (txn.epoch, txn.epoch - 1)):
        return Step(ErrorCode.PRODUCER_FENCED)
    if txn.state.preparing or txn.state == TxnState.PREPARE_EPOCH_FENCE:
        return Step(ErrorCode.CONCURRENT_TRANSACTIONS)
    if txn.state == TxnState.ONGOING:
        return Step(store=_abort(txn, now, bump=True), retry_after=True)
    if txn.epoch >= MAX_EPOCH:
        return Step(store=dataclasses.replace(txn, producer_id=fresh_producer_id, epoch=0, timeout_ms=timeout_ms,
                                              state=TxnState.EMPTY, partitions=frozenset(), start_ms=-1,
                                              update_ms=now))
    return Step(store=dataclasses.replace(txn, epoch=txn.epoch + 1, timeout_ms=timeout_ms, state=TxnState.EMPTY,
                                          partitions=frozenset(), start_ms=-1, update_ms=now))


def add_partitions(txn: TxnMetadata | None, producer_id: int, epoch: int,
                   partitions: set[tuple[str, int]], now: int) -> Step:
    """AddPartitionsToTxn and AddOffsetsToTxn (which adds the group's offsets partition)."""
    error = _check_producer(txn, producer_id, epoch)
    if error is not None:
        return Step(error)
    assert txn is not None  # _check_producer refuses None
    if txn.state.preparing:
        return Step(ErrorCode.CONCURRENT_TRANSACTIONS)
    if txn.state == TxnState.ONGOING and partitions <= txn.partitions:
        return Step()
    if txn.state not in (TxnState.EMPTY, TxnState.ONGOING, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
        return Step(ErrorCode.INVALID_TXN_STATE)
    ongoing = txn.state == TxnState.ONGOING
    return Step(store=dataclasses.replace(txn, state=TxnState.ONGOING, partitions=txn.partitions | partitions,
                                          start_ms=txn.start_ms if ongoing else now, update_ms=now))


def end(txn: TxnMetadata | None, producer_id: int, epoch: int, commit: bool, now: int) -> Step:
    """EndTxn: an open transaction moves to PrepareCommit or PrepareAbort; a retry of an
    end already done is answered again."""
    error = _check_producer(txn, producer_id, epoch)
    if error is not None:
        return Step(error)
    assert txn is not None
    if txn.state == TxnState.ONGOING:
        return Step(store=dataclasses.replace(
            txn, state=TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT, update_ms=now))
    done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
    if txn.state == done:
        return Step()
    if txn.state == (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT):
        return Step(ErrorCode.CONCURRENT_TRANSACTIONS)
    return Step(ErrorCode.INVALID_TXN_STATE)


def check_in_transaction(txn: TxnMetadata | None, producer_id: int, epoch: int,
                         partition: tuple[str, int] | None = None) -> ErrorCode:
    """Whether a produce to ``partition`` (or a TxnOffsetCommit, with None) belongs to the
    producer's open transaction."""
    error = _check_producer(txn, producer_id, epoch)
    if error is not None:
        return error
    assert txn is not None
    if txn.state != TxnState.ONGOING or (partition is not None and partition not in txn.partitions):
        return ErrorCode.INVALID_TXN_STATE
    return ErrorCode.NONE


def produce_refusal(txn: TxnMetadata | None, transactional_id: str, producer_id: int, epoch: int,
                    partition: tuple[str, int]) -> tuple[ErrorCode, str] | None:
    """Why a transactional produce to ``partition`` is refused, in the partition leader's
    code (a fenced producer gets INVALID_PRODUCER_EPOCH, as from Kafka's leader), or None."""
    error = check_in_transaction(txn, producer_id, epoch, partition)
    if error == ErrorCode.NONE:
        return None
    if error == ErrorCode.PRODUCER_FENCED:
        assert txn is not None
        return ErrorCode.INVALID_PRODUCER_EPOCH, (
            f"producer {producer_id} of transactional id {transactional_id!r} is fenced: its epoch {epoch} "
            f"is not the current epoch {txn.epoch}")
    if error == ErrorCode.INVALID_PRODUCER_ID_MAPPING:
        return error, f"producer {producer_id} is not the current producer of transactional id {transactional_id!r}"
    return error, f"transactional id {transactional_id!r} has not added this partition"


def completed(txn: TxnMetadata, now: int) -> TxnMetadata:
    """The metadata to store once every marker of a prepared transaction is durable."""
    state = TxnState.COMPLETE_COMMIT if txn.state == TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
    return dataclasses.replace(txn, state=state, partitions=frozenset(), update_ms=now)


def timed_out(txn: TxnMetadata, now: int) -> TxnMetadata | None:
    """PrepareAbort with the epoch bumped when an open transaction outlived its timeout."""
    if txn.state == TxnState.ONGOING and now - txn.start_ms > txn.timeout_ms:
        return _abort(txn, now, bump=True)
    return None


def _abort(txn: TxnMetadata, now: int, bump: bool) -> TxnMetadata:
    epoch = txn.epoch + 1 if bump and txn.epoch < MAX_EPOCH else txn.epoch
    return dataclasses.replace(txn, epoch=epoch, state=TxnState.PREPARE_ABORT, update_ms=now)


def _check_producer(txn: TxnMetadata | None, producer_id: int, epoch: int) -> ErrorCode | None:
    if txn is None or txn.producer_id != producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if epoch != txn.epoch:
        return ErrorCode.PRODUCER_FENCED
    return None
