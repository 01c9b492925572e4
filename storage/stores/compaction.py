"""Compaction: the sealed ledgers a broker holds are rewritten out of the shared WAL objects
into objects of their own, so old data is read sequentially and WAL objects can go.

A ledger's entries go into ``data-*`` objects under its prefix, then a piece naming them all
(``compacted``, written once, If-None-Match: *), then its older pieces are dropped. A reader
that opens the ledger meanwhile finds either the old pieces or the new one, each complete;
the WAL objects go once garbage collection sees no other ledger in them.

Each attempt names its data objects with a token of its own, beside the writer: a broker can
compact one ledger twice (a copy of it reopened while the first compaction ran still has the
old index), and the attempt that loses deletes its objects, which must never be the winner's.
"""
import asyncio
import logging
import secrets
from collections.abc import Iterable

from . import wal_object
from .block_reader import MAX_INFLIGHT_GETS, BlockReader
from .ledger_records import LedgerRecords, Runs
from .object_client import ObjectExists
from .object_layout import COMPACTED, ledger_prefix
from .object_ledger import S3Ledger

log = logging.getLogger(__name__)

# Compaction writes a ledger's entries into objects of up to this size, and rewrites about
# COMPACTION_ROUND_BYTES per round (at least one ledger).
COMPACT_OBJECT_BYTES = 32 * 1024 * 1024
COMPACTION_ROUND_BYTES = 256 * 1024 * 1024


class Compactor:
    def __init__(self, client, writer: str, reader: BlockReader, records: LedgerRecords):
        self.client = client
        self._writer = writer
        self._reader = reader
        self._records = records
        self.compacted_bytes = 0
        self.ledgers_compacted = 0

    @staticmethod
    def backlog(ledgers: Iterable[S3Ledger]) -> tuple[int, int]:
        """Ledgers waiting to be compacted, and their bytes."""
        waiting = [ledger for ledger in ledgers if ledger.needs_compaction()]
        return len(waiting), sum(ledger.length for ledger in waiting)

    async def round(self, ledgers: Iterable[S3Ledger]) -> int:
        """Compact about COMPACTION_ROUND_BYTES of ``ledgers`` (at least one); how many were done."""
        done = budget = 0
        for ledger in sorted(ledgers, key=lambda ledger: ledger.ledger_id):
            if budget >= COMPACTION_ROUND_BYTES:
                break
            if not ledger.needs_compaction():
                continue
            budget += ledger.length
            try:
                await self.compact(ledger)
                done += 1
            except Exception as exc:
                log.warning("ledger %d: compaction failed (its objects are left as they were): %s",
                            ledger.ledger_id, exc)
        return done

    async def compact(self, ledger: S3Ledger) -> None:
        prefix = ledger_prefix(ledger.ledger_id)
        old_pieces = [key for key in await self.client.keys(prefix) if "/index-" in key]
        runs = await self._rewrite(ledger, f"{self._writer}-{secrets.token_hex(4)}")
        try:
            await self.client.create(prefix + COMPACTED, wal_object.index_piece(runs))
        except ObjectExists:
            await self.client.delete([key for key, _ in runs])  # another broker compacted it first
            await self._records.refresh_index(ledger)
            return
        ledger.replace_index(runs)
        self.ledgers_compacted += 1
        await self.client.delete(old_pieces)

    async def _rewrite(self, ledger: S3Ledger, attempt: str) -> Runs:
        """Copy the ledger's blocks, MAX_INFLIGHT_GETS at a time, into objects of its own of
        about COMPACT_OBJECT_BYTES, named for this ``attempt``; the runs they hold."""
        ledger_id, index = ledger.ledger_id, ledger.index
        runs: Runs = []
        part: list[tuple[int, memoryview, list[int]]] = []  # (first entry, frames, lengths)
        size = 0
        for base in range(0, len(index.keys), MAX_INFLIGHT_GETS):
            numbers = range(base, min(base + MAX_INFLIGHT_GETS, len(index.keys)))
            blocks = await asyncio.gather(*(self._reader.fetch(ledger_id, index.location(n), cache=False)  # type: ignore[arg-type]
                                            for n in numbers))
            for number, block in zip(numbers, blocks):
                entries = index.entries_of(number)
                lengths = list(index.entry_len[entries.start:entries.stop])
                wal_object.read_frames(block, ledger_id, entries.start, lengths)  # copy nothing damaged
                part.append((entries.start, block, lengths))
                size += len(block)
                if size >= COMPACT_OBJECT_BYTES:
                    runs.append(await self._put(ledger_id, part, attempt))
                    size = 0
        if part:
            runs.append(await self._put(ledger_id, part, attempt))
        return runs

    async def _put(self, ledger_id: int, part: list[tuple[int, memoryview, list[int]]],
                   attempt: str) -> tuple[str, wal_object.Run]:
        """One object of the ledger's own holding ``part`` (emptied)."""
        first, last = part[0][0], part[-1][0] + len(part[-1][2]) - 1
        data, (run,) = wal_object.pack([(ledger_id, first, memoryview(b"".join(f for _, f, _ in part)),
                                         [n for _, _, lengths in part for n in lengths])])
        key = f"{ledger_prefix(ledger_id)}data-{first:020d}-{last:020d}-{attempt}"
        await self.client.put(key, data)
        self.compacted_bytes += len(data)
        part.clear()
        return key, run
