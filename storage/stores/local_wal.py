"""The local WAL (``--wal file:DIR``): an entry is acknowledged once fsync'd on this broker's
disk and reaches the object store in the background.

Why a second WAL: with ``--wal s3`` every acknowledgement waits for a commit interval and a
PUT, and a broker's produce rate is bounded by its PUT throughput; here it waits for an
fsync, as on the file store, and uploads overlap with acknowledgements. The price: until
they are uploaded, acknowledged entries live on one machine.

Layout. DIR holds a file-store log per ledger this broker writes (storage.stores.file_store:
group commit, torn-tail recovery and its fence marker, unchanged) and ``wal.id``, a name
drawn once for the directory. Its frames are the ones WAL objects hold, so an upload
copies bytes without re-framing them.

Upload. Every commit interval, the entries of every ledger confirmed locally and not yet
uploaded go into one WAL object of the usual layout (storage.stores.wal_object) under the
broker's writer name, up to ``MAX_OBJECT_BYTES`` each and ``MAX_INFLIGHT_PUTS`` at once,
taken in order: a reader or a recovering broker finds them exactly as with ``--wal s3``.
A failed PUT loses nothing (the entries are still on disk); they go again in a later object.

What a crash or a lost partition leaves in DIR is drained (storage.stores.local_wal_drain).

No writer lease is asked here (unlike the S3 WAL): no other broker can seal such a ledger,
so nothing this broker confirmed can be contradicted; what it fsync'd after losing the
partition is drained, in order, before the next owner appends anything.
"""
import asyncio
import fcntl
import logging
import os
import time
import uuid

from ..ledger import LedgerFenced
from . import wal_object
from .file_store import FileLedger, FileLedgerStore
from .ledger_records import LedgerRecords
from .local_wal_drain import RETRY_SECONDS, LocalWalDrain
from .object_layout import ObjectStoreUnavailable
from .object_ledger import LedgerHome, S3Ledger
from .s3_wal import MAX_INFLIGHT_PUTS, MAX_OBJECT_BYTES
from .wal_object import Run
from .wal_seam import ObjectCuts, Wal, WalObjects

log = logging.getLogger(__name__)

# How long closing a ledger waits for its last entries to be uploaded before it gives up
# (the ledger is then drained in the background, and its next owner waits for that).
CLOSE_UPLOAD_SECONDS = 30.0


class LocalWalLedger(S3Ledger):
    """A ledger written through the local WAL: its log in DIR until it is sealed in the bucket."""

    def __init__(self, wal: "LocalWal", ledger_id: int, local: FileLedger):
        super().__init__(wal.home, ledger_id)
        self._writable = True
        self.wal = wal
        self.local: FileLedger | None = local
        self.queued = -1  # the last entry handed to an upload
        self.behind_since: float | None = None  # when the oldest entry not uploaded was confirmed
        self.progress = asyncio.Event()  # set whenever more entries are uploaded

    def _in_local(self) -> bool:
        return self.local is not None and self._failure is None

    @property
    def last_add_confirmed(self) -> int:
        return self.local.last_add_confirmed if self._in_local() else self.uploaded  # type: ignore[union-attr]

    @property
    def last_add_pushed(self) -> int:
        return self.local.last_add_pushed if self._in_local() else self.uploaded  # type: ignore[union-attr]

    @property
    def length(self) -> int:
        return self.local.length if self._in_local() else super().length  # type: ignore[union-attr]

    def add_entry(self, chunks) -> int:
        if not self._in_local():
            raise LedgerFenced(f"ledger {self.ledger_id} is closed")
        return self.local.add_entry(chunks)  # type: ignore[union-attr]

    async def sync(self, entry_id: int) -> None:
        if self.manifest is not None and self._failure is None:
            try:
                # Nothing is acknowledged before the writer record names this WAL: a recovery
                # finding no record would take the ledger for empty.
                await asyncio.shield(self.manifest)
            except Exception as exc:
                self.fail(ObjectStoreUnavailable(f"ledger {self.ledger_id}: writer record: {exc}"))
        if self._failure is not None:
            raise self._failure
        local = self.local
        if local is None:
            return  # closed: everything was uploaded
        await local.sync(entry_id)
        self.wal.confirmed_locally(self)

    async def read_range(self, first: int, last: int) -> list[memoryview]:
        local = self.local
        if local is not None and self._failure is None:
            try:
                return await local.read_range(first, last)
            except OSError:
                if self.local is not None:
                    raise  # else it was closed and dropped meanwhile: the entries are uploaded
        return await super().read_range(first, last)

    async def read_heads(self, first: int, last: int, size: int) -> list[tuple[int, bytes]]:
        if self._in_local():
            return await self.local.read_heads(first, last, size)  # type: ignore[union-attr]
        return await super().read_heads(first, last, size)

    def uploaded_run(self, key: str, run: Run, data: memoryview) -> bool:
        if not self.confirmed(key, run, data):
            return False
        self.progress.set()
        if self.local is not None and self.uploaded >= self.local.last_add_confirmed:
            self.behind_since = None
        return True

    async def close(self) -> None:
        local = self.local
        if local is None:
            return
        if self._failure is not None:
            self._drop_local()  # nothing of it was acknowledged (its writer record failed)
            return
        await local.close()
        self._writable = False
        self.wal.confirmed_locally(self)
        try:
            async with asyncio.timeout(CLOSE_UPLOAD_SECONDS):
                await self._uploaded_through(local.last_add_confirmed)
        except TimeoutError:
            raise ObjectStoreUnavailable(f"ledger {self.ledger_id}: entries not uploaded within "
                                         f"{CLOSE_UPLOAD_SECONDS:.0f} s; drained later") from None
        await self.home.write_piece(self, sealed=True)
        self._drop_local()

    async def _uploaded_through(self, entry_id: int) -> None:
        while self.uploaded < entry_id:
            self.progress.clear()
            await self.progress.wait()

    def _drop_local(self) -> None:
        local, self.local = self.local, None
        self.wal.forget(self)
        if local is not None:
            local.release()
            self.wal.files.delete_ledger(self.ledger_id)

    def release(self) -> None:
        super().release()
        if self.local is not None:
            # Released unsealed (the partition was dropped): whatever it holds is uploaded and sealed.
            self.wal.forget(self)
            self.local.release()
            self.local = None
            self.wal.drains.drain_soon(self.ledger_id)


class LocalWal(Wal):
    def __init__(self, home: LedgerHome, client, objects: WalObjects, records: LedgerRecords,
                 directory: str, interval: float, spawn):
        self.home = home
        self._client = client
        self._objects = objects
        self._records = records
        self.files = FileLedgerStore(directory)
        self.wal_id, self._lock_fd = _claim(directory)
        self._behind: dict[LocalWalLedger, None] = {}  # ledgers with confirmed entries not yet queued
        self._writing: set[LocalWalLedger] = set()
        self._cuts = ObjectCuts(interval, MAX_INFLIGHT_PUTS)
        self._previous: asyncio.Future | None = None
        self._task: asyncio.Task | None = None
        # Uploads and drains run as the store's background tasks, cancelled when it closes.
        self._spawn = spawn
        self.drains = LocalWalDrain(home, client, objects, records, self.files, self.wal_id, spawn)

    # -- writing and uploading ---------------------------------------------------------

    def create_ledger(self, ledger_id: int) -> LocalWalLedger:
        ledger = LocalWalLedger(self, ledger_id, self.files.create_ledger(ledger_id))
        self._writing.add(ledger)
        return ledger

    def writer_fields(self) -> dict:
        return {"local_wal": self.wal_id}  # entries past the uploaded ones may be there only

    def confirmed_locally(self, ledger: LocalWalLedger) -> None:
        if ledger.local is None or ledger.last_add_confirmed <= ledger.queued:
            return
        if ledger.behind_since is None:
            ledger.behind_since = time.monotonic()
        self._behind[ledger] = None
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())
        self._cuts.kick.set()

    def forget(self, ledger: LocalWalLedger) -> None:
        self._behind.pop(ledger, None)
        self._writing.discard(ledger)

    def lag_seconds(self) -> float:
        oldest = min((ledger.behind_since for ledger in self._writing if ledger.behind_since is not None),
                     default=None)
        return 0.0 if oldest is None else time.monotonic() - oldest

    async def _run(self) -> None:
        while True:
            await self._cuts.next()
            picked = self._pick()
            if not picked:
                self._cuts.done()
                continue
            self._cuts.cut()
            if self._behind:
                self._cuts.kick.set()  # more than one object's worth is waiting
            done = asyncio.get_running_loop().create_future()
            previous, self._previous = self._previous, done
            self._spawn(self._upload(self._objects.take_key(), picked, previous, done))

    def _pick(self) -> list[tuple[LocalWalLedger, int, int]]:
        """What goes into the next object: (ledger, first, last entry) up to MAX_OBJECT_BYTES."""
        picked = []
        room = MAX_OBJECT_BYTES
        for ledger in list(self._behind):
            local = ledger.local
            if local is None or ledger.queued >= local.last_add_confirmed:
                del self._behind[ledger]
                continue
            if room <= 0:
                break
            first = ledger.queued + 1
            last = local.last_within(first, room)
            picked.append((ledger, first, last))
            ledger.queued = last
            room -= local.span(first, last)
            if last >= local.last_add_confirmed:
                del self._behind[ledger]
        return picked

    async def _upload(self, key: str, picked: list[tuple[LocalWalLedger, int, int]],
                      previous: asyncio.Future | None, done: asyncio.Future) -> None:
        parts: list[tuple[LocalWalLedger, int, memoryview, list[int]]] = []
        data = memoryview(b"")
        runs: list[Run] = []
        stored = False
        try:
            for ledger, first, last in picked:
                local = ledger.local
                if local is not None:  # else released since: its drain uploads it
                    frames, lengths = await local.read_frames(first, last)
                    parts.append((ledger, first, frames, lengths))
            data, runs = wal_object.pack([(ledger.ledger_id, first, frames, lengths)
                                          for ledger, first, frames, lengths in parts])
            if runs:
                await self._client.put(key, data)
                self._objects.stored(len(data))
            stored = True
        except Exception as exc:
            log.warning("upload of %s failed (its entries stay in the local WAL, tried again): %s", key, exc)
        finally:
            self._cuts.done()
        if previous is not None:
            await previous  # runs are taken in the order they were picked
        taken = False
        for (ledger, _first, _frames, _lengths), run in zip(parts, runs):
            if stored and ledger.uploaded_run(key, run, data):
                taken = True
            elif not stored:
                # The failed object is the first gap: everything after it goes again.
                ledger.queued = ledger.uploaded
                self.confirmed_locally(ledger)
        if not stored:
            await asyncio.sleep(RETRY_SECONDS)
        if taken:
            self._objects.confirmed(key)
        done.set_result(None)

    # -- draining what a crash or a lost partition left ------------------------------------

    def start(self) -> None:
        self.drains.start()

    async def drain(self, ledger_id: int, writer: dict) -> None:
        await self.drains.drain(ledger_id, writer)

    def delete_ledger(self, ledger_id: int) -> None:
        self.files.delete_ledger(ledger_id)

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        os.close(self._lock_fd)


def _claim(directory: str) -> tuple[str, int]:
    """This directory's WAL name (drawn on first use), and a lock that keeps a second
    process from writing through the same directory."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "wal.id")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise OSError(f"kgate.wal: {directory} is in use by another broker") from None
    name = os.pread(fd, 64, 0).decode().strip()
    if not name:
        name = uuid.uuid4().hex
        os.pwrite(fd, (name + "\n").encode(), 0)
        os.fsync(fd)
    return name, fd
