"""Where a ledger's entries are is kept in the bucket, never only in memory; and who may
still add to it. Recovery and fencing read and write these records.

Each WAL object ends with an index of the runs it holds (storage.stores.wal_object); each
ledger has a *writer record* (written with If-None-Match: * before its first entry can be
confirmed: which writer, from which WAL object on) and *index pieces* (its runs through one
WAL object), written in the background every CHECKPOINT_OBJECTS WAL objects (at most every
CHECKPOINT_SECONDS) and, sealed, when it is closed. Another broker with an empty data
directory opens a ledger from these alone: the pieces, then the indexes of the writer's
WAL objects after the last piece.

Fencing. A ledger's recovery keeps the entries from 0 up to the first one it cannot find
and seals that in a sealed piece. The old writer must not acknowledge anything past it:
after each PUT, before confirming, the S3 WAL asks its ``WriterLease`` (the broker backs it
with its metadata session, which holds the ownership claims). Recovery starts only after the
old owner's claim is gone, so a PUT confirmed while the lease held was listed by it; a writer
paused past its session finds the lease gone and confirms nothing more (its late objects hold
ids past the sealed end, which no reader takes). Conditional PUTs guard the writer record and
the sealed piece as a second line, off the hot path.
"""
import asyncio
import json
import logging
from typing import Protocol

from ..ledger import CorruptLedger
from . import wal_object
from .object_client import ObjectExists
from .object_layout import COMPACTED, MissingObject, ledger_prefix, piece_key, piece_seq, wal_key, wal_seq, writer_key
from .object_ledger import S3Ledger
from .wal_object import Run

log = logging.getLogger(__name__)

Runs = list[tuple[str, Run]]


class WriterLease(Protocol):
    """Whether this broker still holds what made it the writer of its ledgers.

    ``generation`` changes when the lease is lost (the metadata session expired);
    ``confirm`` answers, after a round trip, whether a lease taken at ``generation``
    still holds.
    """

    generation: int

    async def confirm(self, generation: int) -> bool: ...


class Unleased:
    """The lease of a single broker with nobody to hand over to (embedded metadata)."""

    generation = 0

    async def confirm(self, generation: int) -> bool:
        return True


class LedgerRecords:
    """The writer records and index pieces of ledgers in one bucket; ``gets`` bounds the
    object index reads a recovery makes at once."""

    def __init__(self, client, gets: asyncio.Semaphore):
        self.client = client
        self.gets = gets

    def create_writer_record(self, ledger_id: int, fields: dict):
        return self.client.create(writer_key(ledger_id), json.dumps(fields).encode())

    async def writer_record(self, ledger_id: int) -> dict | None:
        record = await self.client.get(writer_key(ledger_id))
        return None if record is None else json.loads(record)

    async def stored_runs(self, ledger_id: int, writer: dict) -> tuple[Runs, bool, int]:
        """Every run of ``ledger_id`` the bucket knows of (duplicates possible), whether it is
        sealed, and the last WAL object of its writer the index pieces cover."""
        runs, sealed, covered = await self.pieced_runs(ledger_id, writer)
        if not sealed:
            runs += await self.runs_in_wal(ledger_id, writer["writer"], covered)
        return runs, sealed, covered

    async def pieced_runs(self, ledger_id: int, writer: dict) -> tuple[Runs, bool, int]:
        """The runs of ``ledger_id`` its index pieces name, whether it is sealed, and the last
        WAL object of its writer the pieces cover (the runs after it are in those objects only)."""
        for _attempt in range(3):
            listed = await self.client.keys(ledger_prefix(ledger_id))
            compacted = [key for key in listed if key.endswith(COMPACTED)]
            keys = compacted or [key for key in listed if "/index-" in key]  # a compacted piece lists all
            try:
                pieces = await asyncio.gather(*(self._read_piece(key) for key in keys))
                break
            except MissingObject:
                continue  # superseded by a compaction since the listing: list again
        else:
            raise CorruptLedger(f"ledger {ledger_id}: index pieces keep vanishing between listing and reading")
        runs = [run for piece in pieces for run in piece if run[1].ledger_id == ledger_id]
        sealed = bool(compacted) or any(key.endswith(".sealed") for key in keys)
        covered = max((piece_seq(key) for key in keys if "/index-" in key), default=writer["first_seq"] - 1)
        return runs, sealed, covered

    async def _read_piece(self, key: str) -> Runs:
        data = await self.client.get(key)
        if data is None:
            raise MissingObject(f"{key}: listed but missing")
        return wal_object.read_index_piece(data, key)

    async def runs_in_wal(self, ledger_id: int, writer: str, covered: int) -> Runs:
        """The runs of ``ledger_id`` in the WAL objects of ``writer`` after object ``covered``."""
        after = wal_key(writer, covered) if covered >= 0 else None
        keys = await self.client.keys(f"wal/{writer}/", after=after)
        found = await asyncio.gather(*(self.object_runs(key) for key in keys))
        return [(key, run) for key, runs in zip(keys, found) for run in runs if run.ledger_id == ledger_id]

    async def object_runs(self, key: str) -> list[Run]:
        """The runs in WAL object ``key``'s index; none when it was collected since it was listed
        (it then held no live ledger's entries: a live ledger's objects are never collected)."""
        async with self.gets:
            try:
                return await wal_object.fetch_object_index(self.client, key)
            except FileNotFoundError:
                return []

    async def seal_recovered(self, ledger_id: int, kept: Runs, covered: int) -> None:
        """Record where recovery ended, so later opens read pieces only and agree on the end."""
        seq = max([covered, 0, *(wal_seq(key) for key, _ in kept)])
        try:
            await self.client.create(piece_key(ledger_id, seq, sealed=True), wal_object.index_piece(kept))
        except ObjectExists:
            log.warning("ledger %d was sealed by another recovery at the same time", ledger_id)

    async def write_piece(self, ledger: S3Ledger, sealed: bool, next_seq: int) -> None:
        """The runs ``ledger`` confirmed since its last piece, in a new piece (``sealed``: its last)."""
        pieces = list(ledger.unpieced)
        if not pieces and not sealed:
            return
        seq = max((wal_seq(key) for key, _ in pieces), default=next_seq - 1)
        ledger.piece_writing = True
        try:
            await self.client.create(piece_key(ledger.ledger_id, max(seq, 0), sealed), wal_object.index_piece(pieces))
        finally:
            ledger.piece_writing = False
        del ledger.unpieced[:len(pieces)]
        ledger.sealed = sealed

    async def refresh_index(self, ledger: S3Ledger) -> None:
        """Read a sealed ledger's index again (after compaction moved its entries)."""
        writer = await self.writer_record(ledger.ledger_id)
        if writer is None:
            raise MissingObject(f"ledger {ledger.ledger_id}: its records are gone")
        runs, _sealed, _covered = await self.stored_runs(ledger.ledger_id, writer)
        fresh = S3Ledger(ledger.home, ledger.ledger_id)
        fresh.load(runs, ledger.last_add_confirmed)
        ledger.take_index(fresh.index)
