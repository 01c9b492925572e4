"""A ledger of the object store: its entries are where its BlockIndex says, each added
entry waits in a WAL (storage.stores.wal_seam) until an object holding it is confirmed.

The ledger reaches its store only through ``LedgerHome``, so the WALs, the index records
and the store can each import it without importing one another.
"""
import asyncio
from collections.abc import Iterable
from typing import Protocol

from ..ledger import CorruptLedger, Ledger, LedgerFenced
from . import wal_object
from .block_cache import BlockCache
from .block_index import BlockIndex
from .object_layout import MissingObject
from .wal_object import HEAD_BYTES, Run


class LedgerHome(Protocol):
    """What an object ledger asks of its store."""

    cache: BlockCache

    async def block_bytes(self, ledger_id: int, index: BlockIndex, number: int) -> memoryview: ...

    async def refresh_index(self, ledger: "S3Ledger") -> None: ...

    async def write_piece(self, ledger: "S3Ledger", sealed: bool) -> None: ...

    def forget(self, ledger: "S3Ledger") -> None: ...


class Appender(Protocol):
    """The WAL a writable ledger's entries wait in (storage.stores.s3_wal)."""

    def add(self, ledger: "S3Ledger", entry_id: int, chunks) -> int: ...


class S3Ledger(Ledger):
    def __init__(self, store: LedgerHome, ledger_id: int, appender: Appender | None = None):
        self.ledger_id = ledger_id
        self.home = store
        self._appender = appender
        self._writable = appender is not None
        self.index = BlockIndex()  # where each confirmed entry is
        self.sealed = False  # no entry will be added, by anyone: compaction may move its entries
        self._heads: list[bytes] = []  # recovered ledgers only, for read_heads at open
        self._pushed = -1
        self._bytes = 0
        self._waits: list[tuple[int, asyncio.Future]] = []  # (last entry id in a batch, its future)
        self._failure: BaseException | None = None
        self.manifest: asyncio.Future | None = None
        # Runs confirmed since the last index piece written, and whether one is being written.
        self.unpieced: list[tuple[str, Run]] = []
        self.piece_writing = False

    @property
    def uploaded(self) -> int:
        """The last entry known to be in an object (with the S3 WAL: the last confirmed)."""
        return self.index.entries - 1

    @property
    def last_add_confirmed(self) -> int:
        return self.uploaded

    @property
    def last_add_pushed(self) -> int:
        return self._pushed

    @property
    def length(self) -> int:
        return self._bytes

    def add_entry(self, chunks) -> int:
        if not self._writable or self._failure is not None or self._appender is None:
            raise LedgerFenced(f"ledger {self.ledger_id} is closed")
        self._pushed += 1
        self._bytes += self._appender.add(self, self._pushed, chunks)
        return self._pushed

    def waiting(self, entry_id: int, done: asyncio.Future) -> None:
        if self._waits and self._waits[-1][1] is done:
            self._waits[-1] = (entry_id, done)
        else:
            self._waits.append((entry_id, done))

    async def sync(self, entry_id: int) -> None:
        while entry_id > self.last_add_confirmed:
            if self._failure is not None:
                raise self._failure
            waits = [done for last, done in self._waits if last >= entry_id]
            if not waits:
                raise LedgerFenced(f"ledger {self.ledger_id}: entry {entry_id} was never added")
            try:
                await asyncio.shield(waits[0])
            except Exception:
                if self._failure is None:
                    raise
        self._waits = [(last, done) for last, done in self._waits if not done.done()]

    def confirmed(self, key: str, run: Run, data: memoryview) -> bool:
        """The entries of ``run`` are in object ``key`` (whose bytes are ``data``) for good;
        False (nothing taken) when they do not follow the last entry taken."""
        if run.first_entry != self.index.entries:
            return False  # after a failure: entries past the gap are never confirmed
        for number in self.index.add_run(key, run):
            _key, start, end = self.index.location(number)  # type: ignore[misc]
            self.home.cache.recent.put((key, self.ledger_id, start), data[start:end])
        self.unpieced.append((key, run))
        return True

    def replace_index(self, runs: list[tuple[str, Run]]) -> None:
        """Find the entries where ``runs`` (consecutive, all of them) say from now on."""
        index = BlockIndex()
        for key, run in runs:
            index.add_run(key, run)
        self.take_index(index)

    def take_index(self, index: BlockIndex) -> None:
        if index.entries != self.index.entries:
            raise CorruptLedger(f"ledger {self.ledger_id}: its index read again holds {index.entries} "
                                f"entries, not {self.index.entries}")
        self.index = index

    def needs_compaction(self) -> bool:
        """Sealed, with entries still in WAL objects (shared with other ledgers, in small runs)."""
        return self.sealed and any(key.startswith("wal/") for key in self.index.keys)

    def may_have_moved(self) -> bool:
        """Whether a compaction may have moved the entries (only a sealed ledger's move)."""
        return self.sealed

    def fail(self, failure: BaseException) -> None:
        """Give up every unconfirmed entry: nothing more is taken, the owner rolls to a new ledger."""
        if self._failure is None:
            self._failure = failure
            self._writable = False
            self._pushed = self.last_add_confirmed
            self._bytes = sum(self.index.entry_len)

    @property
    def failed(self) -> bool:
        return self._failure is not None

    async def read_range(self, first: int, last: int) -> list[memoryview]:
        last = min(last, self.last_add_confirmed)
        out: list[memoryview] = []
        entry_id = first
        index, refreshed = self.index, False
        while entry_id <= last:
            number = index.entry_block[entry_id]
            stop = min(last, index.entries_of(number)[-1])
            try:
                block = await self.home.block_bytes(self.ledger_id, index, number)
            except MissingObject:
                if refreshed or not self.may_have_moved():
                    raise
                # Compacted (by this broker or another) and its old objects collected since.
                await self.home.refresh_index(self)
                index, refreshed = self.index, True
                continue
            start = index.entry_pos[entry_id]
            lengths = list(index.entry_len[entry_id:stop + 1])
            out.extend(wal_object.read_frames(block[start:], self.ledger_id, entry_id, lengths))
            entry_id = stop + 1
        return out

    async def read_heads(self, first: int, last: int, size: int) -> list[tuple[int, bytes]]:
        last = min(last, self.last_add_confirmed)
        if size <= HEAD_BYTES and len(self._heads) > last:
            heads = [(self.index.entry_len[i], self._heads[i][:size]) for i in range(first, last + 1)]
            if last == self.last_add_confirmed:
                self._heads = []  # asked once, at open: not kept for the ledger's life
            return heads
        return await super().read_heads(first, last, size)

    async def close(self) -> None:
        if self._writable:
            self._writable = False
            await self.sync(self._pushed)
            await self.home.write_piece(self, sealed=True)

    def release(self) -> None:
        self.home.forget(self)

    def load(self, runs: Iterable[tuple[str, Run]], last_entry: int | None) -> list[tuple[str, Run]]:
        """Take ``runs`` (any order, duplicates allowed) from entry 0 up to the first gap, or
        through ``last_entry``; return the runs kept, cut to what was kept."""
        kept: list[tuple[str, Run]] = []
        for key, run in sorted(runs, key=lambda item: item[1].first_entry):
            expected = self.index.entries
            if last_entry is not None and expected > last_entry:
                break
            if run.first_entry + run.count <= expected:
                continue  # the same run from a piece and an object index
            if run.first_entry != expected:
                break
            if last_entry is not None and run.first_entry + run.count > last_entry + 1:
                keep = last_entry + 1 - run.first_entry
                run = Run(run.ledger_id, run.first_entry, run.start, run.lengths[:keep], run.heads[:keep])
            self.index.add_run(key, run)
            self._heads.extend(run.heads)
            kept.append((key, run))
        self._pushed = self.last_add_confirmed
        self._bytes = sum(self.index.entry_len)
        return kept
