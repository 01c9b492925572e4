"""Internal partitions held in memory, behind the coordinator runtime's writer port.

Keeps what the ledger-backed writer keeps: records in offset order, producers'
transactional records and the markers that end them, a log start that trimming
moves. A test can hold appends short of durable, make them fail, or take a
partition away, and reads the partition back to load a fresh shard from it (a
restarted or new owner).
"""
import asyncio
from dataclasses import dataclass

from kgate.gateway.keyed_log import NO_PRODUCER, Replayed
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError


@dataclass(frozen=True)
class Entry:
    offset: int
    key: bytes | None  # None: a marker
    value: bytes | None
    producer_id: int = -1
    commit: bool = False  # a marker's result


class MemoryPartitionWriter:
    def __init__(self, served=range(1)):
        self.entries: dict[int, list[Entry]] = {index: [] for index in served}
        self.next_offsets: dict[int, int] = {index: 0 for index in served}
        self.epochs: dict[int, int] = {index: 0 for index in served}
        self.failure: Exception | None = None  # raised by the next appends while set
        self.gate: asyncio.Future | None = None  # appends become durable when it is done
        self.rolls = 0
        self.taken: set[int] = set()  # partitions another broker serves now
        self.moving: set[int] = set()  # partitions another broker takes while they are read

    def take_away(self, index: int) -> None:
        """Another broker serves the partition now (its entries stay, as shared storage keeps them)."""
        self.taken.add(index)

    def _check(self, index: int) -> list[Entry]:
        if index in self.taken or index not in self.entries:
            raise KafkaError(ErrorCode.NOT_COORDINATOR, f"partition {index} is not served here")
        return self.entries[index]

    async def load(self, index: int) -> Replayed | None:
        self._check(index)
        if index in self.moving:
            self.taken.add(index)
            return None
        replayed = Replayed()
        for entry in self._check(index):
            if entry.key is None:
                pending = replayed.open_transactions.pop(entry.producer_id, {})
                if entry.commit:
                    replayed.latest.update(pending)
                continue
            target = (replayed.open_transactions.setdefault(entry.producer_id, {}) if entry.producer_id >= 0
                      else replayed.latest)
            target[entry.key] = entry.value
            replayed.count += 1
        return replayed

    async def prepare_append(self, index: int) -> None:
        self._check(index)
        await asyncio.sleep(0)  # the ledger's turn is awaited: other tasks run meanwhile
        self._check(index)
        if self.failure is not None:  # a store that refuses, as the port answers it
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(self.failure))

    def append(self, index: int, records: list[tuple[bytes, bytes | None]],
               producer: tuple[int, int] = NO_PRODUCER):
        entries = self._check(index)
        for key, value in records:
            entries.append(Entry(self.next_offsets[index], key, value, producer[0]))
            self.next_offsets[index] += 1
        return self._durable()

    async def _durable(self) -> None:
        if self.gate is not None:
            await self.gate

    def end_transaction(self, index: int, producer_id: int, commit: bool) -> None:
        """Append a marker, as a partition's append_marker does."""
        self.entries[index].append(Entry(self.next_offsets[index], None, None, producer_id, commit))
        self.next_offsets[index] += 1

    def leader_epoch(self, index: int) -> int:
        return self.epochs[index]

    async def roll_over(self, index: int) -> int:
        self._check(index)
        self.rolls += 1
        return self.next_offsets[index]

    async def trim_before(self, index: int, offset: int) -> None:
        self.entries[index] = [entry for entry in self._check(index) if entry.offset >= offset]

    def records(self, index: int = 0) -> int:
        return len(self.entries[index])
