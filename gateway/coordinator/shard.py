"""What a coordinator shard is to the runtime, and what its rules hand back (Kafka's
``CoordinatorShard`` and ``CoordinatorResult``).

A shard is the state of one partition of an internal topic: built by replaying the
partition's records, changed by rules that take (state, request, now) and return a
:class:`Result`. The runtime appends the result's records, replays them into the
shard as it appends them (so memory and the log agree in order), answers once they
are durable, and arms or cancels the result's timers on its clock.
"""
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from ..keyed_log import NO_PRODUCER

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Arm:
    """Start the shard's timer ``key``, replacing one armed under the same key; when it
    fires, the runtime hands the key to :meth:`Shard.timer_fired`."""
    key: Hashable
    deadline_ms: int


@dataclass(frozen=True, slots=True)
class Cancel:
    key: Hashable


TimerChange = Arm | Cancel


@dataclass(slots=True)
class Result(Generic[T, R]):
    response: T
    records: list[R] = field(default_factory=list)
    timers: list[TimerChange] = field(default_factory=list)
    # Records of a producer's transaction (TxnOffsetCommit): they count once its COMMIT marker follows.
    producer: tuple[int, int] = NO_PRODUCER
    # Work that follows the records once they are durable (a transaction's markers); the
    # runtime runs it as a task of the shard's partition and cancels it when the partition goes.
    then: Callable[[], Awaitable[None]] | None = None


class Shard(Generic[R]):
    """The state of one partition. ``R`` is the shard's record, as decoded from the log."""

    def decode(self, key: bytes, value: bytes | None) -> R | None:
        """The record a stored key and value hold; None (logged) when no schema explains it."""
        raise NotImplementedError

    def encode(self, record: R) -> tuple[bytes, bytes | None]:
        raise NotImplementedError

    def replay(self, record: R, producer_id: int = -1) -> None:
        """Apply a record read on load or being appended; ``producer_id`` >= 0: it belongs to
        that producer's transaction, still open."""
        raise NotImplementedError

    def replay_end_transaction(self, producer_id: int, commit: bool) -> None:
        """A marker ended ``producer_id``'s transaction in this partition."""

    def snapshot(self) -> list[R]:
        """Records that rebuild the whole state when replayed alone: what compaction keeps."""
        raise NotImplementedError

    def live_records(self) -> int:
        """About how many records :meth:`snapshot` would give, to decide when to compact."""
        raise NotImplementedError

    def compactable(self) -> bool:
        """Whether a snapshot holds everything; records of open transactions it would drop."""
        return True

    def on_loaded(self, now: int) -> Result[None, R]:
        """The partition was replayed and is served from now on: timers to arm, work to resume."""
        return Result(None)

    def on_unloaded(self) -> None:
        """Another broker serves the partition now: answer what waits here and forget it."""

    def timer_fired(self, now: int, key: Hashable) -> Result[None, R]:
        return Result(None)
