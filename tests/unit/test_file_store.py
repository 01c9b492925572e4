"""The file ledger store: append, group-commit, read, seal, and recovery of torn tails."""
import asyncio
import os
import struct
import tempfile
import threading

import pytest
from crc32c import crc32c
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kgate.storage.ledger import STRANDED_HEAD_BYTES, ChecksumMismatch, CorruptLedger, LedgerFenced, StrandedEntries
from kgate.storage.stores.file_store import FRAME_SIZE, FileLedgerStore

ENTRIES = [b"first entry", b"", b"third" * 100, bytes(range(256))]


def _path(store_dir, ledger_id: int) -> str:
    return os.path.join(store_dir, f"{ledger_id:019d}.ledger")


async def _written(store: FileLedgerStore, ledger_id: int, entries=ENTRIES, sealed: bool = False):
    ledger = store.create_ledger(ledger_id)
    for entry in entries:
        ledger.add_entry([entry])
    await ledger.sync(ledger.last_add_pushed)
    if sealed:
        await ledger.close()
    return ledger


async def _contents(ledger) -> list[bytes]:
    return [bytes(e) for e in await ledger.read_range(0, ledger.last_add_confirmed)]


async def test_add_sync_read_range(tmp_path):
    store = FileLedgerStore(str(tmp_path))
    ledger = store.create_ledger(7)
    assert ledger.add_entry([b"he", b"llo"]) == 0  # chunks make one entry
    assert ledger.add_entry([b"world"]) == 1
    assert ledger.last_add_pushed == 1 and ledger.last_add_confirmed == -1
    assert await ledger.read_range(0, 1) == []  # nothing durable yet, nothing readable
    await ledger.sync(1)
    assert ledger.last_add_confirmed == 1
    assert [bytes(e) for e in await ledger.read_range(0, 5)] == [b"hello", b"world"]  # clamped at the LAC
    assert [bytes(e) for e in await ledger.read_range(1, 1)] == [b"world"]
    assert await ledger.read_range(2, 1) == []
    assert ledger.length == 10
    assert store.ledger_bytes(7) == 10 + 2 * FRAME_SIZE
    assert await ledger.read_heads(0, 1, 3) == [(5, b"hel"), (5, b"wor")]


async def test_concurrent_syncs_all_complete(tmp_path):
    ledger = FileLedgerStore(str(tmp_path)).create_ledger(1)
    ids = [ledger.add_entry([b"%d" % i]) for i in range(20)]
    await asyncio.gather(*(ledger.sync(i) for i in ids))
    assert ledger.last_add_confirmed == 19
    assert await _contents(ledger) == [b"%d" % i for i in range(20)]


async def test_closed_ledger_refuses_writes_and_reopens_sealed(tmp_path):
    store = FileLedgerStore(str(tmp_path))
    ledger = await _written(store, 3, sealed=True)
    with pytest.raises(LedgerFenced):
        ledger.add_entry([b"late"])
    ledger.release()
    reopened = await store.open_ledger(3, last_entry=len(ENTRIES) - 1)
    assert await _contents(reopened) == ENTRIES
    with pytest.raises(LedgerFenced):
        reopened.add_entry([b"x"])


async def test_sealed_open_drops_entries_past_the_recorded_last_entry(tmp_path):
    store = FileLedgerStore(str(tmp_path))
    (await _written(store, 3)).release()
    assert await _contents(await store.open_ledger(3, last_entry=1)) == ENTRIES[:2]
    assert await _contents(await store.open_ledger(3, last_entry=1)) == ENTRIES[:2]


async def test_sealed_open_with_missing_entries_is_corrupt(tmp_path):
    store = FileLedgerStore(str(tmp_path))
    (await _written(store, 3)).release()
    with pytest.raises(CorruptLedger):
        await store.open_ledger(3, last_entry=len(ENTRIES))


def _flip(path: str, at: int) -> None:
    with open(path, "r+b") as fh:
        fh.seek(at)
        byte = fh.read(1)
        fh.seek(at)
        fh.write(bytes([byte[0] ^ 0x40]))


def _frame_start(entry_id: int) -> int:
    return sum(FRAME_SIZE + len(entry) for entry in ENTRIES[:entry_id])


async def test_reads_of_a_sealed_ledger_check_each_entrys_crc(tmp_path):
    store = FileLedgerStore(str(tmp_path))
    (await _written(store, 6, sealed=True)).release()
    _flip(_path(tmp_path, 6), _frame_start(2) + FRAME_SIZE + 7)
    ledger = await store.open_ledger(6, last_entry=len(ENTRIES) - 1)
    assert [bytes(e) for e in await ledger.read_range(0, 1)] == ENTRIES[:2]
    for first, last in ((2, 2), (0, 3), (1, 2)):
        with pytest.raises(ChecksumMismatch, match="entry 2"):
            await ledger.read_range(first, last)
    assert [bytes(e) for e in await ledger.read_range(3, 3)] == ENTRIES[3:]


# (entry, byte in its frame): damage in a payload (the frame's length still leads to the
# next frame) and in a length (the next frame has to be searched for).
DAMAGE = {"payload": (2, FRAME_SIZE + 3), "length": (1, 2)}


@pytest.mark.parametrize("damaged, at", DAMAGE.values(), ids=DAMAGE.keys())
async def test_recovery_refuses_damage_followed_by_valid_entries_and_truncates_nothing(tmp_path, damaged, at):
    store = FileLedgerStore(str(tmp_path))
    (await _written(store, 8)).release()
    size = store.ledger_bytes(8)
    _flip(_path(tmp_path, 8), _frame_start(damaged) + at)
    with pytest.raises(StrandedEntries) as refused:
        await store.open_ledger(8, last_entry=None)
    assert refused.value.kept == damaged
    assert refused.value.heads == [entry[:STRANDED_HEAD_BYTES] for entry in ENTRIES[damaged + 1:]]
    assert store.ledger_bytes(8) == size


def _half_frame(payload: bytes = b"torn payload") -> bytes:
    whole = struct.pack(">II", len(payload), crc32c(payload)) + payload
    return whole[:len(whole) // 2]


TORN_TAILS = {
    "three bytes": b"\x00\x00\x01",
    "frame prefix only": struct.pack(">II", 10, 0),
    "half frame": _half_frame(),
    "length past the end": struct.pack(">II", 1 << 30, 0) + b"xyz",
    "whole frame with a wrong crc": struct.pack(">II", 4, 12345) + b"abcd",
    # What a filesystem may show after a crash when the size got out before the data.
    "zero-filled block": bytes(4096),
}


@pytest.mark.parametrize("tail", TORN_TAILS.values(), ids=TORN_TAILS.keys())
async def test_recovery_truncates_a_torn_tail_and_keeps_every_synced_entry(tmp_path, tail):
    store = FileLedgerStore(str(tmp_path))
    (await _written(store, 9)).release()
    good_size = store.ledger_bytes(9)
    with open(_path(tmp_path, 9), "ab") as fh:
        fh.write(tail)
    recovered = await store.open_ledger(9, last_entry=None)
    assert await _contents(recovered) == ENTRIES
    assert recovered.last_add_confirmed == len(ENTRIES) - 1
    assert store.ledger_bytes(9) == good_size  # the tail is gone from the file, not just skipped
    recovered.release()
    assert await _contents(await store.open_ledger(9, last_entry=None)) == ENTRIES


@pytest.mark.parametrize("offset_from_end", [1, 5, len(ENTRIES[-1])])
async def test_recovery_drops_a_corrupt_final_entry(tmp_path, offset_from_end):
    store = FileLedgerStore(str(tmp_path))
    (await _written(store, 4)).release()
    with open(_path(tmp_path, 4), "r+b") as fh:
        fh.seek(-offset_from_end, os.SEEK_END)
        byte = fh.read(1)
        fh.seek(-offset_from_end, os.SEEK_END)
        fh.write(bytes([byte[0] ^ 0x40]))
    assert await _contents(await store.open_ledger(4, last_entry=None)) == ENTRIES[:-1]


@settings(max_examples=40, deadline=None)
@example(entries=[b"x"], garbage=bytes(8))  # an all-zero frame: length 0 and crc32c(b"") == 0
@given(entries=st.lists(st.binary(max_size=64), max_size=6), garbage=st.binary(min_size=1, max_size=64))
def test_recovery_after_any_garbage_tail(entries, garbage):
    with tempfile.TemporaryDirectory() as directory:
        store = FileLedgerStore(directory)
        asyncio.run(_written(store, 1, entries)).release()
        with open(_path(directory, 1), "ab") as fh:
            fh.write(garbage)
        recovered = asyncio.run(store.open_ledger(1, last_entry=None))
        try:
            contents = asyncio.run(_contents(recovered))
            assert contents[:len(entries)] == entries
            # Garbage can only survive by being whole frames with valid CRCs.
            assert len(contents) == len(entries)
        finally:
            recovered.release()


async def test_delete_ledger(tmp_path):
    store = FileLedgerStore(str(tmp_path))
    (await _written(store, 5)).release()
    store.delete_ledger(5)
    assert store.ledger_bytes(5) == 0 and not os.path.exists(_path(tmp_path, 5))
    store.delete_ledger(5)  # deleting twice is harmless


async def test_a_recovery_open_fences_the_writer_it_supersedes(tmp_path):
    """Two brokers on one shared directory: the old writer confirms nothing after the new
    owner's recovery open, and everything it confirmed before is in what the recovery keeps."""
    old_owner, new_owner = FileLedgerStore(str(tmp_path)), FileLedgerStore(str(tmp_path))
    writer = await _written(old_owner, 3)
    confirmed = writer.last_add_confirmed
    recovered = await new_owner.open_ledger(3, None)
    assert await _contents(recovered) == ENTRIES[:confirmed + 1]
    late = writer.add_entry([b"written after the takeover"])
    with pytest.raises(LedgerFenced):
        await writer.sync(late)
    assert writer.last_add_confirmed == confirmed
    with pytest.raises(LedgerFenced):
        writer.add_entry([b"and nothing more is taken"])
    # The entry the recovery recorded as last bounds every later open, whatever the file holds.
    assert await _contents(await new_owner.open_ledger(3, recovered.last_add_confirmed)) == ENTRIES
    new_owner.delete_ledger(3)
    assert os.listdir(tmp_path) == []


async def test_a_ledger_let_go_while_its_fsync_runs_confirms_nothing_and_closes_its_file_after(monkeypatch):
    """A partition handed over while its fsync runs in a thread: the file stays open until the
    sync returns (closed under it, its number could be another file's, whose sync would then
    confirm these entries), and the entries waiting on it fail as fenced, never confirmed."""
    started, go = threading.Event(), threading.Event()
    fdatasync = os.fdatasync

    def held(fd):
        started.set()
        assert go.wait(10)
        fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", held)
    with tempfile.TemporaryDirectory() as directory:
        ledger = FileLedgerStore(directory).create_ledger(1)
        ledger.add_entry([b"x" * 100])
        syncing = asyncio.ensure_future(ledger.sync(0))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 10)
        fd = ledger._fd
        ledger.release()
        os.fstat(fd)  # still open: the thread is using it
        go.set()
        with pytest.raises(LedgerFenced, match="released"):
            await syncing
        assert ledger.last_add_confirmed == -1
        with pytest.raises(OSError):
            os.fstat(fd)
