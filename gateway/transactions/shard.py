"""The transactional ids of one ``__transaction_state`` partition, as a shard of the coordinator runtime.

State is each id's last :class:`TxnMetadata`; a record is an id with its metadata
(None: a tombstone). The rules are ``machine``'s; the shard turns a step into the
record to append. Its one timer is the periodic check that aborts transactions past
their timeout and resumes the markers of prepared ones whose delivery gave up.
"""
import logging
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass

from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError

from ..coordinator.shard import Arm, Result, Shard
from . import records
from .machine import Step, TxnMetadata

log = logging.getLogger(__name__)

TIMEOUT_CHECK = "transaction-timeout-check"


@dataclass(frozen=True, slots=True)
class TxnRecord:
    transactional_id: str
    txn: TxnMetadata | None


class TransactionShard(Shard[TxnRecord]):
    def __init__(self, index: int, check_interval_ms: int, check: Callable[[int, int], Awaitable[None]]):
        self.index = index
        self.check_interval_ms = check_interval_ms
        # (partition, now): abort what timed out and resume prepared transactions; the coordinator's.
        self.check = check
        self.transactions: dict[str, TxnMetadata] = {}

    def decode(self, key: bytes, value: bytes | None) -> TxnRecord | None:
        try:
            return TxnRecord(*records.decode(key, value))
        except records.CorruptRecord as exc:
            log.error("%s-%d: skipped a record: %s", "__transaction_state", self.index, exc)
            return None

    def encode(self, record: TxnRecord) -> tuple[bytes, bytes | None]:
        value = None if record.txn is None else records.value(record.txn)
        return records.key(record.transactional_id), value

    def replay(self, record: TxnRecord, producer_id: int = -1) -> None:
        if record.txn is None:
            self.transactions.pop(record.transactional_id, None)
        else:
            self.transactions[record.transactional_id] = record.txn

    def snapshot(self) -> list[TxnRecord]:
        return [TxnRecord(transactional_id, txn) for transactional_id, txn in self.transactions.items()]

    def live_records(self) -> int:
        return len(self.transactions)

    def on_loaded(self, now: int) -> Result[None, TxnRecord]:
        """The check runs at once: transactions a previous owner left prepared get their markers."""
        return Result(None, timers=[Arm(TIMEOUT_CHECK, now)])

    def timer_fired(self, now: int, key: Hashable) -> Result[None, TxnRecord]:
        return Result(None, timers=[Arm(TIMEOUT_CHECK, now + self.check_interval_ms)],
                      then=lambda: self.check(self.index, now))

    def store(self, step: Step) -> Result[TxnMetadata | None, TxnRecord]:
        """A machine step: its error raised, or its metadata to store (and answer with)."""
        if step.error != ErrorCode.NONE:
            raise KafkaError(step.error)
        if step.store is None:
            return Result(None)
        return Result(step.store, [TxnRecord(step.store.transactional_id, step.store)])
