"""The object ledger store with a local WAL (``--wal file:DIR``) against a real SeaweedFS:
entries acknowledged from local fsyncs reach WAL objects in the background, and a ledger
whose tail is only in one broker's WAL is refused elsewhere until that broker uploads it."""
import asyncio
import os
import time

import pytest

from kgate.storage.ledger import TailUnreachable
from kgate.storage.stores.bucket_location import BucketLocation
from kgate.storage.stores.object_client import ObjectClient
from kgate.storage.stores.s3_store import S3LedgerStore
from tests.integration.test_s3_store import payload, write


@pytest.fixture
def location(bucket_url):
    return BucketLocation.parse(bucket_url)


def store(location, local_dir, writer, interval_ms=20):
    return S3LedgerStore(ObjectClient(location), writer, commit_interval_ms=interval_ms,
                         local_wal=str(local_dir) if local_dir is not None else None)


async def until(condition, what: str, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while not await condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def local_logs(directory) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.endswith(".ledger"))


async def test_acknowledged_entries_go_up_in_the_background_and_a_closed_ledger_leaves_the_disk(location, tmp_path):
    writer = store(location, tmp_path / "wal", "w1")
    ledgers = [writer.create_ledger(i) for i in range(4)]
    for round_ in range(3):
        await asyncio.gather(*(write(ledger, round_ * 10, 10) for ledger in ledgers))
    # Many ledgers' entries share few objects, and every acknowledged entry ends up in one.
    await until(lambda: _all_uploaded(ledgers, 29), "uploads")
    assert len(await writer.client.keys("wal/w1/")) < 3 * len(ledgers)
    await ledgers[0].close()
    assert local_logs(tmp_path / "wal") == [f"{i:019d}.ledger" for i in range(1, 4)]
    # Closed: read from objects, here and by a broker with no local WAL.
    assert [bytes(e) for e in await ledgers[0].read_range(0, 29)] == [payload(0, i) for i in range(30)]
    reader = store(location, None, "w2")
    opened = await reader.open_ledger(0, 29)
    assert [bytes(e) for e in await opened.read_range(0, 29)] == [payload(0, i) for i in range(30)]
    writer.close()
    reader.close()


async def _all_uploaded(ledgers, last):
    return all(ledger.uploaded == last for ledger in ledgers)


async def test_a_tail_only_in_a_local_wal_is_refused_elsewhere_until_its_broker_restarts_and_uploads_it(
        location, tmp_path):
    crashed = store(location, tmp_path / "wal", "w1", interval_ms=600_000)  # uploads nothing in this test
    ledger = crashed.create_ledger(7)
    await write(ledger, 0, 25)
    assert ledger.last_add_confirmed == 24 and ledger.uploaded == -1
    crashed.close()  # as kill -9 leaves it: the entries only in the local WAL
    other = store(location, tmp_path / "other-wal", "w2")
    with pytest.raises(TailUnreachable, match="local WAL"):
        await other.open_ledger(7, None)
    restarted = store(location, tmp_path / "wal", "w3")
    restarted.wal.start()
    await until(lambda: _opens(other, 7), "the drained ledger to open elsewhere")
    opened = await other.open_ledger(7, None)
    assert [bytes(e) for e in await opened.read_range(0, 99)] == [payload(7, i) for i in range(25)]
    assert local_logs(tmp_path / "wal") == []
    restarted.close()
    other.close()


async def _opens(store_, ledger_id) -> bool:
    try:
        await store_.open_ledger(ledger_id, None)
        return True
    except TailUnreachable:
        return False


async def test_a_ledger_released_unsealed_is_drained_by_its_own_broker(location, tmp_path):
    writer = store(location, tmp_path / "wal", "w1", interval_ms=600_000)
    ledger = writer.create_ledger(9)
    await write(ledger, 0, 12)
    ledger.release()  # its partition dropped when the metadata session expired
    other = store(location, None, "w2")
    await until(lambda: _opens(other, 9), "the released ledger to be drained")
    opened = await other.open_ledger(9, None)
    assert opened.last_add_confirmed == 11
    assert local_logs(tmp_path / "wal") == []
    writer.close()
    other.close()


def test_two_brokers_cannot_share_one_local_wal(location, tmp_path):
    first = store(location, tmp_path / "wal", "w1")
    with pytest.raises(OSError, match="in use"):
        store(location, tmp_path / "wal", "w2")
    first.close()
