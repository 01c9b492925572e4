"""The object ledger store: ledgers in S3-compatible object storage, written through a WAL.

With ``--wal s3`` a broker keeps nothing on local disk: every entry goes into the next WAL
object, one PUT per commit interval (storage.stores.s3_wal). With ``--wal file:DIR`` entries
are durable in a local WAL first and reach WAL objects in the background
(storage.stores.local_wal). Either way WAL objects go under ``wal/<writer>/<seq>``, where the
writer is the broker id and an epoch taken from the metadata store at start-up, so no two
processes ever write the same key.

The parts: where entries are and who may still add to them (storage.stores.ledger_records:
writer records, index pieces, recovery and fencing); reads with a bounded cache and
read-ahead (storage.stores.block_reader); compaction of sealed ledgers into objects of their
own (storage.stores.compaction); deletion of WAL objects no live ledger needs
(storage.stores.garbage_collection). This module holds the ledgers a broker has open and
wires the parts together.

Nothing leaks. Deleting a ledger deletes its own records at once; its WAL objects, shared by
many ledgers, go through garbage collection.
"""
import asyncio
import logging

from ..ledger import CorruptLedger, LedgerFenced, LedgerStore
from ..store_capabilities import Housekeeping, Instrumented, Staging, TailHints
from .block_cache import BlockCache
from .block_index import BlockIndex
from .block_reader import MAX_INFLIGHT_GETS, BlockReader
from .compaction import Compactor
from .garbage_collection import GarbageCollector
from .ledger_records import LedgerRecords, Unleased, WriterLease
from .local_wal import LocalWal
from .object_client import ObjectClient
from .object_follower import FollowerLedger, WriterTails
from .object_inventory import LiveLedgers
from .object_layout import ledger_prefix
from .object_ledger import S3Ledger
from .object_staging import StagedReader, StagedSets, reference
from .s3_wal import ObjectWal
from .wal_seam import Wal, WalObjects

log = logging.getLogger(__name__)


class S3LedgerStore(LedgerStore, Staging, TailHints, Housekeeping, Instrumented):
    """``local_wal`` (a directory) makes entries durable in a local WAL first
    (storage.stores.local_wal); without it, in WAL objects."""

    follows = True  # every broker reads the bucket: another's ledgers are indexed from their objects

    def __init__(self, client: ObjectClient, writer: str, lease: WriterLease | None = None,
                 commit_interval_ms: int = 100, cache_bytes: int = 256 * 1024 * 1024,
                 local_wal: str | None = None):
        self.client = client
        self.writer = writer
        self.cache = BlockCache(cache_bytes)
        self._ledgers: dict[int, S3Ledger] = {}
        self._background: set[asyncio.Task] = set()
        gets = asyncio.Semaphore(MAX_INFLIGHT_GETS)
        self.records = LedgerRecords(client, gets)
        self.reader = BlockReader(client, self.cache, self._spawn, gets)
        self.objects = WalObjects(writer, self.checkpoint)
        interval = commit_interval_ms / 1000
        self.wal: Wal = (LocalWal(self, client, self.objects, self.records, local_wal, interval, self._spawn)
                         if local_wal is not None else
                         ObjectWal(self, client, self.objects, lease or Unleased(), interval))
        self.compactor = Compactor(client, writer, self.reader, self.records)
        self.collector = GarbageCollector(client)
        self.staged_reader = StagedReader(client, self.cache, gets)
        self.tails = WriterTails(self.records, self.cache, self.staged_reader)
        # Staged record sets ride in the WAL objects of this broker's ledgers (with a local
        # WAL, which writes objects behind, in objects of their own, one per interval too).
        self._staging_wal = self.wal if isinstance(self.wal, ObjectWal) else \
            ObjectWal(self, client, self.objects, Unleased(), interval)
        self.staged = StagedSets(self, self._staging_wal)

    def _spawn(self, coroutine) -> asyncio.Task:
        """A background task, cancelled when the store closes; its failure only logged (the
        next reader or writer hears about it anyway)."""
        task = asyncio.ensure_future(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        task.add_done_callback(_quiet)
        return task

    # -- writing ---------------------------------------------------------------------

    def create_ledger(self, ledger_id: int) -> S3Ledger:
        ledger = self.wal.create_ledger(ledger_id)
        fields = {"writer": self.writer, "first_seq": self.objects.next_seq, **self.wal.writer_fields()}
        ledger.manifest = self._spawn(self.records.create_writer_record(ledger_id, fields))
        self._ledgers[ledger_id] = ledger
        return ledger

    def checkpoint(self) -> None:
        """Write an index piece for every ledger written since its last one (in the background)."""
        for ledger in list(self._ledgers.values()):
            if ledger.unpieced and not ledger.piece_writing and not ledger.failed:
                self._spawn(self._checkpoint_piece(ledger))

    async def _checkpoint_piece(self, ledger: S3Ledger) -> None:
        try:
            await self.write_piece(ledger, sealed=False)
        except Exception as exc:
            log.warning("ledger %d: index piece not written (kept for the next one): %s", ledger.ledger_id, exc)

    async def write_piece(self, ledger: S3Ledger, sealed: bool) -> None:
        await self.records.write_piece(ledger, sealed, self.objects.next_seq)

    # -- opening and recovery --------------------------------------------------------

    async def open_ledger(self, ledger_id: int, last_entry: int | None) -> S3Ledger:
        ledger = S3Ledger(self, ledger_id)
        writer = await self.records.writer_record(ledger_id)
        if writer is None:
            # Its first entry is confirmed only after this record is written: none was.
            if last_entry is not None and last_entry >= 0:
                raise CorruptLedger(f"ledger {ledger_id}: {ledger_prefix(ledger_id)}writer is missing, "
                                    f"metadata says {last_entry + 1} entries")
            self._ledgers[ledger_id] = ledger
            return ledger
        runs, sealed, covered = await self.records.stored_runs(ledger_id, writer)
        if not sealed and writer.get("local_wal") is not None:
            await self.wal.drain(ledger_id, writer)  # this broker's own, left by a crash or a lost session
            return await self.open_ledger(ledger_id, last_entry)
        kept = ledger.load(runs, last_entry)
        if last_entry is not None and ledger.last_add_confirmed < last_entry:
            raise CorruptLedger(f"ledger {ledger_id} holds {ledger.last_add_confirmed + 1} entries, "
                                f"metadata says {last_entry + 1}")
        if last_entry is None and not sealed:
            await self.records.seal_recovered(ledger_id, kept, covered)
        ledger.sealed = True
        self._ledgers[ledger_id] = ledger
        return ledger

    async def open_follower(self, ledger_id: int) -> FollowerLedger:
        """Read-only, indexed from the bucket: nothing is fenced, sealed or written."""
        ledger = FollowerLedger(self, ledger_id, self.records, self.tails)
        await ledger.catch_up()
        return ledger

    def position(self) -> str | None:
        """This writer and its newest confirmed WAL object."""
        seq = self.objects.newest_confirmed
        return f"{self.writer}:{seq}" if seq >= 0 else None

    def heard(self, position: str) -> None:
        writer, _, seq = position.rpartition(":")
        if seq.isdigit():
            self.tails.heard(writer, int(seq))

    # -- staging for other zones' owners -------------------------------------------------

    async def stage(self, prefix: str, data) -> str:
        """In the next WAL object; the name is where (storage.stores.object_staging), not ``prefix``."""
        key, start, length = await self.staged.stage(data)
        return reference(self.writer, key, start, length)

    async def read_staged(self, name: str) -> bytes:
        return await self.staged_reader.read(name)

    def unstage(self, name: str) -> None:
        """Nothing to delete one by one: the object is shared, and garbage collection deletes it."""

    def unstage_all(self, prefix: str) -> int:
        return 0  # likewise: a previous run's objects go with garbage collection

    # -- reading -----------------------------------------------------------------------

    async def block_bytes(self, ledger_id: int, index: BlockIndex, number: int) -> memoryview:
        return await self.reader.block_bytes(ledger_id, index, number)

    async def refresh_index(self, ledger: S3Ledger) -> None:
        await self.records.refresh_index(ledger)

    # -- compaction and garbage collection ------------------------------------------------

    def compaction_backlog(self) -> tuple[int, int]:
        """Ledgers of this broker waiting to be compacted, and their bytes."""
        return self.compactor.backlog(list(self._ledgers.values()))

    async def compact_round(self) -> int:
        return await self.compactor.round(list(self._ledgers.values()))

    async def collect_garbage(self, live_ledgers: LiveLedgers) -> int:
        return await self.collector.collect(live_ledgers)

    @property
    def inventory(self):
        return self.collector.inventory

    # -- lifecycle ---------------------------------------------------------------------

    def forget(self, ledger: S3Ledger) -> None:
        if self._ledgers.get(ledger.ledger_id) is ledger:
            del self._ledgers[ledger.ledger_id]

    def delete_ledger(self, ledger_id: int) -> None:
        """Forget the ledger and delete its records. The WAL objects that hold its entries
        are shared with other ledgers: ``collect_garbage`` deletes each once none of its
        ledgers is live."""
        ledger = self._ledgers.pop(ledger_id, None)
        if ledger is not None:
            ledger.fail(LedgerFenced(f"ledger {ledger_id} was deleted"))
        self.wal.delete_ledger(ledger_id)
        self.cache.drop_ledger(ledger_id)
        self._spawn(self._delete_records(ledger_id))

    async def _delete_records(self, ledger_id: int) -> None:
        await self.client.delete(await self.client.keys(ledger_prefix(ledger_id)))

    def ledger_bytes(self, ledger_id: int) -> int:
        ledger = self._ledgers.get(ledger_id)
        return ledger.length if ledger is not None else 0

    def collectors(self) -> list:
        from .object_store_metrics import ObjectStoreCollector
        return [ObjectStoreCollector(self)]

    def upload_lag(self) -> float:
        """Age of the oldest acknowledged entry not yet in an object."""
        return self.wal.lag_seconds()

    def close(self) -> None:
        self.wal.close()
        if self._staging_wal is not self.wal:
            self._staging_wal.close()
        for task in list(self._background):
            task.cancel()


def _quiet(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.debug("background object request failed: %s", task.exception())
