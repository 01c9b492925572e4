"""Draining a ledger of the local WAL (storage.stores.local_wal): putting into the bucket what
only this broker's disk holds of it, then sealing it.

The unreachable tail. A ledger's writer record names the local WAL it was written through.
Until the ledger has a sealed index piece, entries past the uploaded ones may exist only in
that directory, so a broker without it refuses to open the ledger (TailUnreachable) rather
than seal it short, and tries again later. The broker with the directory *drains* a ledger:
it recovers the local log (which fences whoever still wrote it, as the file store does),
uploads what the bucket lacks, writes the sealed piece and deletes the log. It does that at
start-up for every log left in the directory, and at once for a ledger released unsealed
(its partition dropped when the metadata session expired). Closing a ledger uploads the
rest and seals it the same way, so a clean hand-over leaves nothing behind.
"""
import asyncio
import logging

from ..ledger import TailUnreachable
from . import wal_object
from .file_store import FileLedgerStore
from .ledger_records import LedgerRecords
from .object_ledger import LedgerHome, S3Ledger
from .s3_wal import MAX_OBJECT_BYTES
from .wal_seam import WalObjects, unreachable_tail

log = logging.getLogger(__name__)

# After a failed upload or drain, how long before the next try.
RETRY_SECONDS = 1.0


class LocalWalDrain:
    def __init__(self, home: LedgerHome, client, objects: WalObjects, records: LedgerRecords,
                 files: FileLedgerStore, wal_id: str, spawn):
        self._home = home
        self._client = client
        self._objects = objects
        self._records = records
        self._files = files
        self.wal_id = wal_id
        self._spawn = spawn
        self._drains: dict[int, asyncio.Task] = {}

    def start(self) -> None:
        """Drain, in the background, every ledger log a previous run left in the directory."""
        for ledger_id in self._files.ledger_ids():
            self.drain_soon(ledger_id)

    def drain_soon(self, ledger_id: int) -> None:
        self._spawn(self._drain_until_done(ledger_id))

    async def _drain_until_done(self, ledger_id: int) -> None:
        while True:
            try:
                await self.drain(ledger_id)
                return
            except TailUnreachable as exc:
                log.error("%s", exc)
                return
            except Exception as exc:
                log.warning("ledger %d: draining the local WAL failed (tried again in %.0f s): %s",
                            ledger_id, RETRY_SECONDS, exc)
                await asyncio.sleep(RETRY_SECONDS)

    async def drain(self, ledger_id: int, writer: dict | None = None) -> None:
        """Upload what the bucket lacks of ledger ``ledger_id`` from its local log, seal it,
        delete the log. One drain per ledger at a time; callers share it."""
        if writer is not None and writer["local_wal"] != self.wal_id:
            raise unreachable_tail(ledger_id, writer)
        task = self._drains.get(ledger_id)
        if task is None:
            task = self._drains[ledger_id] = self._spawn(self._drain(ledger_id))
            task.add_done_callback(lambda _task: self._drains.pop(ledger_id, None))
        await asyncio.shield(task)

    async def _drain(self, ledger_id: int) -> None:
        records = self._records
        writer = await records.writer_record(ledger_id)
        if writer is None:
            # Never confirmed anything (acknowledgements wait for this record), or deleted.
            self._files.delete_ledger(ledger_id)
            return
        runs, sealed, covered = await records.stored_runs(ledger_id, writer)
        if sealed:
            self._files.delete_ledger(ledger_id)
            return
        if writer.get("local_wal") != self.wal_id:
            raise TailUnreachable(f"ledger {ledger_id}: its writer record names local WAL "
                                  f"{writer.get('local_wal')}, not this one ({self.wal_id})")
        known = S3Ledger(self._home, ledger_id)
        kept = known.load(runs, None)
        try:
            local = await self._files.open_ledger(ledger_id, None)  # fences a writer still at it
        except FileNotFoundError:
            raise TailUnreachable(f"ledger {ledger_id}: its log is missing from local WAL {self.wal_id}") from None
        try:
            first = known.uploaded + 1
            while first <= local.last_add_confirmed:
                last = local.last_within(first, MAX_OBJECT_BYTES)
                frames, lengths = await local.read_frames(first, last)
                data, (run,) = wal_object.pack([(ledger_id, first, frames, lengths)])
                key = self._objects.take_key()
                await self._client.put(key, data)
                self._objects.stored(len(data))
                kept.append((key, run))
                first = last + 1
            await records.seal_recovered(ledger_id, kept, covered)
        finally:
            local.release()
        self._files.delete_ledger(ledger_id)
        log.info("ledger %d: drained from the local WAL and sealed at entry %d", ledger_id, first - 1)
