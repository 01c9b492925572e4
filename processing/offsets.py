"""Which offset of a partition may be committed while records finish out of order.

A consumer hands a partition's records over in increasing offset order, but handlers
finish them in any order (other keys run in parallel, retries and delays come back
later). Committing an offset tells the group that every record before it is done, so
the commit may only move to the end of the longest finished prefix of what was taken.

The structure: the offsets taken but not yet committable, in arrival order (a deque,
already sorted because the consumer delivers in order), and the set of those finished.
Finishing the oldest one pops it and every finished offset right behind it; the commit
position is the last popped offset + 1. Compared with DataLeap's pair of min-heaps
(in-flight and finished, popped while their tops agree) this is O(1) amortized per
record instead of O(log n), and gaps in the offsets (compacted topics, transaction
markers) need no special case: contiguity is over the offsets delivered, not over the
integers.
"""
from collections import deque


class OffsetTracker:
    __slots__ = ("_pending", "_finished", "position", "last_taken")

    def __init__(self) -> None:
        self._pending: deque[int] = deque()
        self._finished: set[int] = set()
        self.position: int | None = None
        """The offset to commit (the next record to hand out after a restart); None until one finishes."""
        self.last_taken: int | None = None

    def take(self, offset: int) -> bool:
        """Track a delivered record; False for an offset at or below one already taken (the
        consumer delivered it again), which the caller must not handle twice."""
        if self.last_taken is not None and offset <= self.last_taken:
            return False
        self.last_taken = offset
        self._pending.append(offset)
        return True

    def finish(self, offset: int) -> None:
        pending = self._pending
        if pending and pending[0] == offset:
            pending.popleft()
            finished = self._finished
            while pending and pending[0] in finished:
                offset = pending.popleft()
                finished.remove(offset)
            self.position = offset + 1
        else:
            self._finished.add(offset)

    @property
    def in_flight(self) -> int:
        """Records taken that hold the commit back (unfinished ones and finished ones behind them)."""
        return len(self._pending)
