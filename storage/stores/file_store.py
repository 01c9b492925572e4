"""The file ledger store: one append-only file per ledger in a directory.

Each entry is framed as ``[u32 payload length][u32 CRC32C of length and payload][payload]``
so a torn or corrupt tail is found on recovery. The CRC covers the length too, because
a zero-filled tail (a file extended but never written) would otherwise pass as an empty
entry: the CRC32C of nothing is zero. Entry positions are kept in memory
(8 bytes per entry) and rebuilt on open by hopping from frame to frame, reading only
the 8-byte frame prefixes. The directory may be shared by several brokers (a shared
filesystem): ownership in the metadata store decides who writes which ledger.

Fencing, as BookKeeper's recovery open does it: whoever opens an unclosed ledger to
recover it first creates ``<ledger>.fenced``, and a writer checks for that marker after
each fsync and before it confirms anything. A writer that confirmed an entry checked
before the marker existed, so its write came before the recovery's scan, which
therefore keeps it; everything a fenced writer adds later is never confirmed and lies
past the last entry the recovery records.
"""
import asyncio
import logging
import os
import struct
import uuid
from array import array
from bisect import bisect_right

from crc32c import crc32c

from ..ledger import (
    STAGED_NAME,
    STRANDED_HEAD_BYTES,
    ChecksumMismatch,
    CorruptLedger,
    Ledger,
    LedgerFenced,
    LedgerStore,
    StrandedEntries,
)
from ..store_capabilities import Staging

log = logging.getLogger(__name__)

# Reads up to this size are made on the event loop; larger ones (a fetch that asks one
# partition for many megabytes, a recovery scan) go to the default executor, so they
# cannot stall the loop for everyone else. Measured here, a pread from the page cache
# costs 0.06 s of CPU per GB inline at 1 MiB (about 60 us per read) and the hand-off
# to a thread about 100 us per call (0.14 s/GB at 1 MiB, 1.6 s/GB at 64 KiB): reads of
# the size consumers ask per partition (1 MiB by default) stay inline. Checking each
# entry's CRC32C on the way adds 0.04-0.07 s/GB (1 MiB and 16 KiB entries).
INLINE_READ_BYTES = 1024 * 1024

# How much a search for the next valid frame after damage reads at a time.
SEARCH_WINDOW = 1024 * 1024

# Record sets taken by a broker of another zone than the partition's owner, until it has them.
STAGING_DIR = "staged"

_FRAME = struct.Struct(">II")
_LENGTH = struct.Struct(">I")
FRAME_SIZE = _FRAME.size


class FileLedger(Ledger):
    def __init__(self, ledger_id: int, path: str, fd: int, positions: array, end: int, writable: bool):
        self.ledger_id = ledger_id
        self._path = path
        self._fence = _fence_path(path)
        self._fd = fd
        self._positions = positions  # file offset of each entry's frame
        self._end = end
        self._writable = writable
        self._lac = len(positions) - 1
        self._syncing: asyncio.Future | None = None
        self._sync_failure: OSError | None = None
        self._in_threads = 0  # calls on the descriptor running in the executor
        self._released = False

    @property
    def last_add_confirmed(self) -> int:
        return self._lac

    @property
    def last_add_pushed(self) -> int:
        return len(self._positions) - 1

    @property
    def length(self) -> int:
        return self._end - FRAME_SIZE * len(self._positions)

    @property
    def file_bytes(self) -> int:
        return self._end

    def add_entry(self, chunks) -> int:
        if not self._writable:
            raise LedgerFenced(f"ledger {self.ledger_id} is closed")
        size = sum(len(chunk) for chunk in chunks)
        crc = crc32c(_LENGTH.pack(size))
        for chunk in chunks:
            crc = crc32c(chunk, crc)
        buffers = [_FRAME.pack(size, crc), *chunks]
        total = FRAME_SIZE + size
        try:
            written = os.writev(self._fd, buffers)
            if written < total:
                # A partial write (signal, huge frame): finish the frame from a joined copy.
                rest = memoryview(b"".join(buffers))[written:]
                while rest:
                    rest = rest[os.write(self._fd, rest):]
        except OSError:
            # No half frame may stay behind for the next entry to follow (disk full).
            os.ftruncate(self._fd, self._end)
            raise
        self._positions.append(self._end)
        self._end += total
        return len(self._positions) - 1

    async def sync(self, entry_id: int) -> None:
        while entry_id > self._lac:
            if self._syncing is None:
                self._syncing = asyncio.ensure_future(self._sync_pushed())
            await asyncio.shield(self._syncing)

    async def _sync_pushed(self) -> None:
        target = self.last_add_pushed
        try:
            if self._released:
                raise LedgerFenced(f"ledger {self.ledger_id} was released")
            if self._sync_failure is not None:
                raise self._sync_failure
            try:
                await self._in_thread(os.fdatasync)
            except OSError as exc:
                self._unconfirmed_lost(exc)
                raise
            if self._released:
                # Let go while the sync ran: too late to confirm anything for an owner it is not.
                raise LedgerFenced(f"ledger {self.ledger_id} was released")
            if os.path.exists(self._fence):
                self._writable = False
                raise LedgerFenced(f"ledger {self.ledger_id} was fenced by another writer's recovery")
            self._lac = max(self._lac, target)
        finally:
            self._syncing = None

    def _unconfirmed_lost(self, failure: OSError) -> None:
        """After a failed fsync the kernel may have dropped the unconfirmed pages and a later
        fsync would still succeed, so those entries are given up and nothing more is taken:
        their writers hear the error, and whoever seals this ledger records it at its LAC."""
        self._sync_failure = failure
        self._writable = False
        if self._lac + 1 < len(self._positions):
            self._end = self._positions[self._lac + 1]
            del self._positions[self._lac + 1:]

    async def read_range(self, first: int, last: int) -> list[memoryview]:
        """Every entry is checked against its stored CRC32C: a damaged one raises
        ChecksumMismatch rather than being served."""
        last = min(last, self._lac)
        if first > last:
            return []
        start = self._positions[first]
        stop = self._positions[last + 1] if last + 1 < len(self._positions) else self._end
        if stop - start <= INLINE_READ_BYTES:
            return _read_entries(self._fd, self.ledger_id, first, last, start, stop)
        return await self._in_thread(_read_entries, self.ledger_id, first, last, start, stop)

    def last_within(self, first: int, max_bytes: int) -> int:
        """The last confirmed entry from ``first`` on whose frames fit in ``max_bytes`` (``first`` at least)."""
        limit = self._positions[first] + max_bytes
        ends_within = bisect_right(self._positions, limit, first + 1) - 2
        if ends_within == len(self._positions) - 2 and self._end <= limit:
            ends_within += 1
        return max(first, min(ends_within, self._lac))

    def span(self, first: int, last: int) -> int:
        """Bytes the frames of entries ``first..last`` take."""
        return (self._positions[last + 1] if last + 1 < len(self._positions) else self._end) - self._positions[first]

    async def read_frames(self, first: int, last: int) -> tuple[memoryview, list[int]]:
        """Entries ``first..last`` as stored, frames and all, with their payload lengths: a
        WAL object frames entries the same way, so an upload copies them unchanged (readers
        check each frame's CRC32C)."""
        start = self._positions[first]
        stop = start + self.span(first, last)
        ends = [*self._positions[first + 1:last + 1], stop]
        lengths = [end - pos - FRAME_SIZE for pos, end in zip(self._positions[first:last + 1], ends)]
        if stop - start <= INLINE_READ_BYTES:
            data = os.pread(self._fd, stop - start, start)
        else:
            data = await self._in_thread(os.pread, stop - start, start)
        if len(data) < stop - start:
            raise CorruptLedger(f"ledger {self.ledger_id} ends at byte {start + len(data)}, before entry {last} does")
        return memoryview(data), lengths

    async def read_heads(self, first: int, last: int, size: int) -> list[tuple[int, bytes]]:
        last = min(last, self._lac)
        if first > last:
            return []
        positions = self._positions[first:last + 1]
        return await self._in_thread(_read_heads, positions, size)

    async def catch_up(self) -> int:
        """Index the whole, CRC-valid frames the writer has added since (a follower's view).

        A frame still being written or failing its CRC ends the scan for now; the next
        catch-up looks again from there. Nothing is truncated or fenced.
        """
        if self._writable or self._fd < 0:
            return self._lac
        size = os.fstat(self._fd).st_size
        if size - self._end <= INLINE_READ_BYTES:
            found = _scan_from(self._fd, self._end, size)
        else:
            found = await self._in_thread(_scan_from, self._end, size)
        for position in found[0]:
            self._positions.append(position)
        self._end = found[1]
        self._lac = len(self._positions) - 1
        return self._lac

    async def close(self) -> None:
        if self._writable:
            await self.sync(self.last_add_pushed)
            self._writable = False

    def release(self) -> None:
        """Close the file, or, while a call on it runs in a thread, once the last one returns:
        closed under it, its descriptor's number could be another file's by then, and an
        fdatasync would confirm entries by syncing that file."""
        self._released = True
        if self._in_threads == 0:
            self._close()

    def _close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    async def _in_thread(self, call, *args):
        """``call(fd, *args)`` in the executor, the descriptor kept open until it returns."""
        self._in_threads += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(None, call, self._fd, *args)
        finally:
            self._in_threads -= 1
            if self._released and self._in_threads == 0:
                self._close()


class FileLedgerStore(LedgerStore, Staging):
    follows = True  # a shared directory: other brokers open the same files read-only

    def __init__(self, directory: str):
        self._dir = directory
        os.makedirs(directory, exist_ok=True)

    def _path(self, ledger_id: int) -> str:
        return os.path.join(self._dir, f"{ledger_id:019d}.ledger")

    def create_ledger(self, ledger_id: int) -> FileLedger:
        path = self._path(ledger_id)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        _fsync_dir(self._dir)
        return FileLedger(ledger_id, path, fd, array("q"), 0, writable=True)

    async def open_ledger(self, ledger_id: int, last_entry: int | None) -> FileLedger:
        """Recovery reads the whole file (verifying every frame), so it runs off the loop."""
        return await asyncio.get_running_loop().run_in_executor(None, self._open_ledger, ledger_id, last_entry)

    def _open_ledger(self, ledger_id: int, last_entry: int | None) -> FileLedger:
        path = self._path(ledger_id)
        if last_entry is None:
            os.close(os.open(_fence_path(path), os.O_WRONLY | os.O_CREAT, 0o644))
            _fsync_dir(self._dir)
        fd = os.open(path, os.O_RDWR)
        try:
            positions, end = _scan(fd, ledger_id, verify=last_entry is None, last_entry=last_entry)
            if end < os.fstat(fd).st_size:
                log.warning("ledger %d: truncating %d bytes of torn or unconfirmed tail",
                            ledger_id, os.fstat(fd).st_size - end)
                os.ftruncate(fd, end)
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        return FileLedger(ledger_id, path, fd, positions, end, writable=False)

    async def open_follower(self, ledger_id: int) -> FileLedger:
        """Read-only, with no fence marker: the writer, if any, goes on appending."""
        path = self._path(ledger_id)
        ledger = FileLedger(ledger_id, path, os.open(path, os.O_RDONLY), array("q"), 0, writable=False)
        await ledger.catch_up()
        return ledger

    def _staged(self, name: str) -> str:
        if not STAGED_NAME.fullmatch(name):
            raise FileNotFoundError(f"no staged record set can be named {name!r}")
        return os.path.join(self._dir, STAGING_DIR, name)

    async def stage(self, prefix: str, data) -> str:
        """A file named ``prefix`` and a random part, written and closed, not fsynced: visible
        to the other brokers (close-to-open on a network filesystem), and durability is the
        owner's append's business.

        Always off the event loop, however small: unlike a read from the page cache, making
        a file is a metadata write (a server round trip on a network filesystem, a journal
        entry here), and a zone's broker makes one per partition batch it takes for an owner."""
        name = f"{prefix}{uuid.uuid4().hex}"
        await asyncio.get_running_loop().run_in_executor(None, _write_file, self._staged(name), data)
        return name

    async def read_staged(self, name: str) -> bytes:
        path = self._staged(name)
        if os.stat(path).st_size <= INLINE_READ_BYTES:
            return _read_file(path)
        return await asyncio.get_running_loop().run_in_executor(None, _read_file, path)

    def unstage(self, name: str) -> None:
        try:
            os.unlink(self._staged(name))
        except FileNotFoundError:
            pass

    def unstage_all(self, prefix: str) -> int:
        try:
            names = [n for n in os.listdir(os.path.join(self._dir, STAGING_DIR)) if n.startswith(prefix)]
        except FileNotFoundError:
            return 0
        for name in names:
            self.unstage(name)
        return len(names)

    def ledger_ids(self) -> list[int]:
        """The ledgers whose files are in the directory."""
        return sorted(int(name.removesuffix(".ledger")) for name in os.listdir(self._dir)
                      if name.endswith(".ledger") and name.removesuffix(".ledger").isdigit())

    def delete_ledger(self, ledger_id: int) -> None:
        path = self._path(ledger_id)
        for name in (path, _fence_path(path)):
            try:
                os.unlink(name)
            except FileNotFoundError:
                pass

    def ledger_bytes(self, ledger_id: int) -> int:
        try:
            return os.stat(self._path(ledger_id)).st_size
        except FileNotFoundError:
            return 0


def _scan(fd: int, ledger_id: int, verify: bool, last_entry: int | None) -> tuple[array, int]:
    """Find every entry's position; with ``verify``, stop at the first frame that fails.

    A verified scan that stops early tells a torn tail (nothing valid after it: the
    last write cut short, truncated as the normal crash case) from damage with valid
    entries after it, which it refuses with StrandedEntries.
    """
    size = os.fstat(fd).st_size
    positions = array("q")
    pos = 0
    while pos + FRAME_SIZE <= size:
        if last_entry is not None and len(positions) > last_entry:
            break
        length = _frame_at(fd, pos, size, verify)
        if length is None:
            if verify:
                _refuse_stranded(fd, ledger_id, pos, size, len(positions))
            break
        positions.append(pos)
        pos += FRAME_SIZE + length
    if last_entry is not None and len(positions) <= last_entry:
        raise CorruptLedger(f"ledger {ledger_id} holds {len(positions)} entries, metadata says {last_entry + 1}")
    return positions, pos


def _scan_from(fd: int, pos: int, size: int) -> tuple[list[int], int]:
    """Positions of the whole, CRC-valid frames from ``pos``, and where the first other one starts."""
    positions = []
    while pos + FRAME_SIZE <= size:
        length = _frame_at(fd, pos, size, verify=True)
        if length is None:
            break
        positions.append(pos)
        pos += FRAME_SIZE + length
    return positions, pos


def _frame_at(fd: int, pos: int, size: int, verify: bool) -> int | None:
    """The payload length of the frame at ``pos`` when it is whole (and, with ``verify``, its CRC holds)."""
    length, crc = _FRAME.unpack(os.pread(fd, FRAME_SIZE, pos))
    if pos + FRAME_SIZE + length > size:
        return None
    if verify and crc32c(os.pread(fd, length, pos + FRAME_SIZE), crc32c(_LENGTH.pack(length))) != crc:
        return None
    return length


def _refuse_stranded(fd: int, ledger_id: int, damaged: int, size: int, kept: int) -> None:
    """Raise StrandedEntries when any valid frame follows the damaged one at ``damaged``."""
    frames = []
    pos = _next_valid(fd, damaged, size)
    while pos is not None:
        length = _frame_at(fd, pos, size, verify=True)
        if length is None:
            pos = _next_valid(fd, pos, size)
            continue
        frames.append((pos, length))
        pos += FRAME_SIZE + length
        if pos + FRAME_SIZE > size:
            break
    if frames:
        heads = [os.pread(fd, min(length, STRANDED_HEAD_BYTES), pos + FRAME_SIZE) for pos, length in frames]
        raise StrandedEntries(f"ledger {ledger_id}: entry {kept} (byte {damaged}) is damaged and "
                              "CRC-valid entries follow it", kept, heads)


def _next_valid(fd: int, damaged: int, size: int) -> int | None:
    """Where the first valid frame after the damaged one at ``damaged`` starts, if any.

    Past it by its own length when that leads to a valid frame (damage in a payload),
    else byte by byte (damage in a length): that walk covers the bytes up to the next
    valid frame, at most one entry's length when one follows, or a torn tail's bytes.
    """
    length, _crc = _FRAME.unpack(os.pread(fd, FRAME_SIZE, damaged))
    hop = damaged + FRAME_SIZE + length
    if hop + FRAME_SIZE <= size and _frame_at(fd, hop, size, verify=True) is not None:
        return hop
    pos = damaged + 1
    while pos + FRAME_SIZE <= size:
        window = os.pread(fd, SEARCH_WINDOW + FRAME_SIZE, pos)
        for i in range(len(window) - FRAME_SIZE + 1):
            length, _crc = _FRAME.unpack_from(window, i)
            if pos + i + FRAME_SIZE + length <= size and _frame_at(fd, pos + i, size, verify=True) is not None:
                return pos + i
        pos += len(window) - FRAME_SIZE + 1
    return None


def _read_entries(fd: int, ledger_id: int, first: int, last: int, start: int, stop: int) -> list[memoryview]:
    """Entries ``first..last`` (bytes ``start..stop``), each checked against its stored CRC32C."""
    data = memoryview(os.pread(fd, stop - start, start))
    if len(data) < stop - start:
        raise CorruptLedger(f"ledger {ledger_id} ends at byte {start + len(data)}, before entry {last} does")
    entries = []
    pos = 0
    for entry_id in range(first, last + 1):
        size, crc = _FRAME.unpack_from(data, pos)
        payload = data[pos + FRAME_SIZE:pos + FRAME_SIZE + size]
        if len(payload) < size or crc32c(payload, crc32c(data[pos:pos + _LENGTH.size])) != crc:
            raise ChecksumMismatch(f"ledger {ledger_id} entry {entry_id}: stored CRC32C does not match")
        entries.append(payload)
        pos += FRAME_SIZE + size
    return entries


def _read_heads(fd: int, positions, size: int) -> list[tuple[int, bytes]]:
    heads = []
    for position in positions:
        frame = os.pread(fd, FRAME_SIZE + size, position)
        length, _crc = _FRAME.unpack_from(frame, 0)
        heads.append((length, frame[FRAME_SIZE:FRAME_SIZE + min(size, length)]))
    return heads


def _write_file(path: str, data) -> None:
    """Made on first use, so a store nobody stages in holds only ledgers."""
    try:
        fh = open(path, "wb")
    except FileNotFoundError:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fh = open(path, "wb")
    with fh:
        fh.write(data)


def _read_file(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def _fence_path(ledger_path: str) -> str:
    return ledger_path + ".fenced"


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
