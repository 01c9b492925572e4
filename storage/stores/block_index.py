"""Where a ledger's entries are in the bucket: its *blocks* (a run in one object, or a piece
of a long one, at most READ_BLOCK_BYTES) and, per entry, its block, position and length.

A block is the unit of a range GET and of the read cache (storage.stores.block_reader).
Compaction swaps a ledger's index for a new one whole, so a read that took the index goes on
with one consistent view.
"""
from array import array
from dataclasses import dataclass, field

from .wal_object import FRAME, Run

# A catch-up reader GETs a ledger's entries in blocks: a run in a WAL object, or up to this
# much of a long run in a compacted object (a few MiB is where a GET's throughput levels
# off here).
READ_BLOCK_BYTES = 2 * 1024 * 1024


@dataclass(eq=False)
class BlockIndex:
    keys: list[str] = field(default_factory=list)
    block_start: array = field(default_factory=lambda: array("q"))
    block_end: array = field(default_factory=lambda: array("q"))
    block_first: array = field(default_factory=lambda: array("q"))  # first entry id of each block
    entry_block: array = field(default_factory=lambda: array("i"))
    entry_pos: array = field(default_factory=lambda: array("q"))
    entry_len: array = field(default_factory=lambda: array("q"))

    def add_run(self, key: str, run: Run) -> range:
        """Take ``run`` (in object ``key``); return the numbers of the blocks it became."""
        first_block = len(self.keys)
        for entry_id, (pos, length) in enumerate(zip(run.positions(), run.lengths), run.first_entry):
            end = pos + FRAME.size + length
            if len(self.keys) == first_block or end - self.block_start[-1] > READ_BLOCK_BYTES:
                self.keys.append(key)
                self.block_start.append(pos)
                self.block_end.append(end)
                self.block_first.append(entry_id)
            else:
                self.block_end[-1] = end
            self.entry_block.append(len(self.keys) - 1)
            self.entry_pos.append(pos - self.block_start[-1])
            self.entry_len.append(length)
        return range(first_block, len(self.keys))

    @property
    def entries(self) -> int:
        return len(self.entry_len)

    def location(self, number: int) -> tuple[str, int, int] | None:
        if number >= len(self.keys):
            return None
        return self.keys[number], self.block_start[number], self.block_end[number]

    def entries_of(self, number: int) -> range:
        stop = self.block_first[number + 1] if number + 1 < len(self.keys) else len(self.entry_len)
        return range(self.block_first[number], stop)
