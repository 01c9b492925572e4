"""The one port through which a coordinator touches its internal partitions.

A shard's records go to a partition of ``__consumer_offsets`` or
``__transaction_state`` and come back from it on load; the runtime needs nothing
else of the broker's partitions: read a partition whole, append keyed records, and
roll its ledger and trim behind a snapshot. ``LedgerPartitionWriter`` does it over
the partitions this broker serves; a unit test gives an in-memory writer.
"""
from collections.abc import Awaitable, Mapping
from typing import Protocol

from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError
from kgate.storage.ledger import LedgerFenced, StoreUnavailable

from .. import keyed_log
from ..keyed_log import NO_PRODUCER, Replayed
from ..partition import Partition

KeyedRecord = tuple[bytes, bytes | None]


class PartitionWriter(Protocol):
    async def load(self, index: int) -> Replayed | None:
        """Each key's last committed value, read from the start; None when the partition
        stopped being this broker's while it was read."""

    async def prepare_append(self, index: int) -> None:
        """Await the partition's turn to append; NOT_COORDINATOR when it is not served here,
        COORDINATOR_NOT_AVAILABLE when the store refuses."""

    def append(self, index: int, records: list[KeyedRecord],
               producer: tuple[int, int] = NO_PRODUCER) -> Awaitable[None]:
        """Append after :meth:`prepare_append`, with no await between; await the result for
        durability (COORDINATOR_NOT_AVAILABLE when the store refused the records)."""

    def leader_epoch(self, index: int) -> int:
        """The partition's epoch here: what a transaction's markers carry as the coordinator epoch."""

    async def roll_over(self, index: int) -> int:
        """Start a fresh ledger and take the turn to append; the offset a snapshot appended now starts at."""

    async def trim_before(self, index: int, offset: int) -> None:
        """Drop every record before ``offset``: the snapshot from there holds what they said."""


class LedgerPartitionWriter:
    """The partitions of ``topic`` this broker serves, appended through their managed ledgers."""

    def __init__(self, topic: str, partitions: Mapping[tuple[str, int], Partition]):
        self.topic = topic
        self.partitions = partitions

    def _partition(self, index: int) -> Partition:
        partition = self.partitions.get((self.topic, index))
        if partition is None:
            raise KafkaError(ErrorCode.NOT_COORDINATOR, f"this broker no longer serves {self.topic}-{index}")
        return partition

    async def load(self, index: int) -> Replayed | None:
        partition = self._partition(index)
        replayed = await keyed_log.replay(partition.ledger)
        return replayed if self.partitions.get((self.topic, index)) is partition else None

    async def prepare_append(self, index: int) -> None:
        await _refusal_answered(self._partition(index).ledger.prepare_append())

    def append(self, index: int, records: list[KeyedRecord],
               producer: tuple[int, int] = NO_PRODUCER) -> Awaitable[None]:
        try:
            appended = keyed_log.append(self._partition(index), records, producer)
        except REFUSALS as exc:  # at once: a ledger closed, a write the disk refused
            raise _refused(exc) from None
        return _refusal_answered(keyed_log.durable(appended))

    def leader_epoch(self, index: int) -> int:
        return self._partition(index).leader_epoch

    async def roll_over(self, index: int) -> int:
        ledger = self._partition(index).ledger
        await ledger.roll_over()
        await ledger.prepare_append()
        return ledger.next_offset

    async def trim_before(self, index: int, offset: int) -> None:
        await self._partition(index).ledger.trim_before(offset)


# What a ledger raises when it will not take or keep records: fenced by the partition's next
# owner (or closed), a full disk, the object store out of reach.
REFUSALS = (OSError, LedgerFenced, StoreUnavailable)


def _refused(exc: Exception) -> KafkaError:
    """A refusal as whoever waits hears it: COORDINATOR_NOT_AVAILABLE, which a client retries,
    finding the coordinator again (fault run seed 21: a consumer's heartbeat, whose group record
    met a ledger just released, failed its request and closed the connection)."""
    return KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc))


async def _refusal_answered(durable: Awaitable[None]) -> None:
    try:
        await durable
    except REFUSALS as exc:
        raise _refused(exc) from None
