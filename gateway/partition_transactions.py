"""A partition's open and aborted transactions: its last stable offset and what to skip.

Kafka's producer-state and aborted-transaction indexes, kept in memory: each
producer's open transaction (from its first transactional batch to its marker) holds
the last stable offset (LSO) back, so read_committed consumers never read past data
whose fate is unknown; each aborted one is kept as (producer id, first offset, last
offset) for the fetch's aborted-transactions list. Both are rebuilt from the stored
batch headers when the partition opens, and aborted ones go with the log they
describe as retention moves the log start, so the index stays as small as the
aborts still readable.
"""
import bisect
from typing import NamedTuple

READ_COMMITTED = 1  # Fetch's and ListOffsets' isolation_level


class AbortedTransaction(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset


class PartitionTransactions:
    __slots__ = ("ongoing", "aborted", "_aborted_ends")

    def __init__(self) -> None:
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self.aborted: list[AbortedTransaction] = []  # in marker (last offset) order
        self._aborted_ends: list[int] = []

    def batch_appended(self, producer_id: int, base_offset: int) -> None:
        """A transactional data batch at ``base_offset``: its producer's transaction is open."""
        self.ongoing.setdefault(producer_id, base_offset)

    def marker_appended(self, producer_id: int, commit: bool, offset: int) -> None:
        first = self.ongoing.pop(producer_id, None)
        if first is not None and not commit:
            self.aborted.append(AbortedTransaction(producer_id, first, offset))
            self._aborted_ends.append(offset)

    def last_stable_offset(self, high_watermark: int) -> int:
        if not self.ongoing:
            return high_watermark
        return min(high_watermark, min(self.ongoing.values()))

    def aborted_between(self, start: int, end: int, log_start: int) -> list[AbortedTransaction]:
        """Aborted transactions with data in [start, end), as a read_committed fetch of that
        range needs them; those wholly before ``log_start`` are forgotten on the way."""
        if self._aborted_ends and self._aborted_ends[0] < log_start:
            gone = bisect.bisect_left(self._aborted_ends, log_start)
            del self.aborted[:gone], self._aborted_ends[:gone]
        found = []
        for aborted in self.aborted[bisect.bisect_left(self._aborted_ends, start):]:
            if aborted.first_offset < end:
                found.append(aborted)
        return found


def committed_view(transactions: PartitionTransactions, entries: list, fetch_offset: int, last_stable_offset: int,
                   log_start: int) -> tuple[list, list[AbortedTransaction]]:
    """What a read_committed fetch from ``fetch_offset`` gets of ``entries``: those below the
    last stable offset (it always falls on an entry boundary: the first batch of an open
    transaction), and the aborted transactions among them, which the client drops."""
    if not entries or entries[-1].header.last_offset < last_stable_offset:
        stable = entries
    else:
        stable = [stored for stored in entries if stored.header.last_offset < last_stable_offset]
    if not stable or not transactions.aborted:
        return stable, []
    return stable, transactions.aborted_between(fetch_offset, stable[-1].header.last_offset + 1, log_start)
