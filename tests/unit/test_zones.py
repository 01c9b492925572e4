"""Zones: the client zone token, the zone's broker for a partition, and a followed ledger read
from another broker's writes (file store, embedded metadata) without disturbing the writer."""
import os

import pytest

from kgate.gateway.chain_records import MetadataChainRecord
from kgate.gateway.zones import broker_client_id, client_zone, peer_broker, zone_broker
from kgate.metadata.cluster import BrokerInfo
from kgate.storage.followed_ledger import FollowedLedger
from kgate.storage.stores.file_store import FileLedgerStore
from tests.unit.test_managed_ledger import PAYLOAD, Partition, append


@pytest.mark.parametrize(("client_id", "zone"), [
    ("kgate_az=use1-az1", "use1-az1"),
    ("orders-service,kgate_az=b", "b"),
    ("app;kgate_az=b;pod=7", "b"),
    ("app kgate_az=eu-west-1a", "eu-west-1a"),
    ("app,my_kgate_az=b", None),  # only a whole token counts
    ("app", None),
    ("", None),
    (None, None),
])
def test_the_zone_token_is_found_anywhere_in_the_client_id(client_id, zone):
    assert client_zone(client_id) == zone


def test_a_broker_names_itself_and_its_zone_to_its_peers():
    assert peer_broker(broker_client_id(7, "a")) == 7
    assert client_zone(broker_client_id(7, "a")) == "a"
    assert peer_broker(broker_client_id(1003, None)) == 1003
    assert peer_broker("kgate-broker-x") is None and peer_broker("my-kgate-broker-1") is None


def test_every_partition_has_one_broker_per_zone_and_none_in_an_empty_zone():
    brokers = {n: BrokerInfo(n, {}, rack) for n, rack in ((0, "a"), (1, "b"), (2, "a"), (3, None))}
    chosen = {zone_broker(brokers, "a", "t", index) for index in range(32)}
    assert chosen == {0, 2}, "a zone's partitions spread over its brokers"
    assert zone_broker(brokers, "a", "t", 5) == zone_broker(dict(reversed(brokers.items())), "a", "t", 5)
    assert zone_broker(brokers, "b", "t", 5) == 1
    assert zone_broker(brokers, "c", "t", 5) is None


async def test_a_followed_ledger_serves_up_to_the_owners_high_watermark_and_never_fences_it(tmp_path):
    partition = Partition(tmp_path)
    owner = await partition.open()
    for _ in range(4):  # two ledgers: the first rolled over after three entries
        await append(owner)
    follower = FollowedLedger("t-0", FileLedgerStore(partition.ledgers_dir),
                              MetadataChainRecord(partition.metadata, "/managed-ledgers/t/0"))
    await follower.open()
    assert follower.high_watermark == 0
    await follower.catch_up(2, owner.log_start_offset)  # the owner said 2: entries 2 and 3 stay unserved
    assert follower.high_watermark == 2
    assert [e.header.base_offset for e in await follower.read(0, 10 * PAYLOAD)] == [0, 1]
    await follower.catch_up(owner.high_watermark, owner.log_start_offset)
    assert [e.header.base_offset for e in await follower.read(0, 10 * PAYLOAD)] == [0, 1, 2, 3]
    # The owner goes on writing, into further ledgers: nothing was fenced.
    for _ in range(4):
        await append(owner)
    assert not any(name.endswith(".fenced") for name in os.listdir(partition.ledgers_dir))
    await follower.catch_up(owner.high_watermark, owner.log_start_offset)
    assert [e.header.base_offset for e in await follower.read(3, 10 * PAYLOAD)] == [3, 4, 5, 6, 7]
    with pytest.raises(Exception, match="read-only"):
        await follower.prepare_append()
    await follower.close()
    await partition.stop(clean=True)


@pytest.mark.parametrize("name", ["../ledgers/1", "..", "a/b", "/etc/passwd", "", ".hidden", "x" * 200])
async def test_a_staged_name_that_is_not_one_plain_component_reaches_no_file(tmp_path, name):
    store = FileLedgerStore(str(tmp_path / "shared"))
    (tmp_path / "secret").write_bytes(b"not records")
    with pytest.raises(FileNotFoundError):
        await store.read_staged(name)
    if name:  # as a prefix it makes no plain name either
        with pytest.raises(FileNotFoundError):
            await store.stage(name, b"records")
    else:  # no prefix: the name is the store's own, in its staging directory
        assert await store.read_staged(await store.stage(name, b"records")) == b"records"
    store.unstage("../secret")
    assert (tmp_path / "secret").exists()
