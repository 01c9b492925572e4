"""The embedded (SQLite) metadata store: versioned nodes, CAS, children, ephemerals, durability."""
import pytest

from kgate.metadata.store import BadVersion, Node, NodeExists, NoNode
from kgate.metadata.stores.embedded import EmbeddedMetadataStore


@pytest.fixture
def db_path(tmp_path):
    return str(tmp_path / "metadata.sqlite")


async def test_create_and_get(db_path):
    store = EmbeddedMetadataStore(db_path)
    assert await store.get("/a/b") is None
    await store.create("/a/b", b"data")
    assert await store.get("/a/b") == Node(b"data", 0)
    assert await store.get("/a") == Node(b"", 0)  # parents are made on the way
    with pytest.raises(NodeExists):
        await store.create("/a/b", b"again")
    assert (await store.get("/a/b")).data == b"data"


async def test_create_without_parents(db_path):
    store = EmbeddedMetadataStore(db_path)
    with pytest.raises(NoNode):
        await store.create("/x/y", b"", make_parents=False)
    assert await store.get("/x") is None and await store.get("/x/y") is None
    await store.create("/x", b"")
    await store.create("/x/y", b"1", make_parents=False)
    assert (await store.get("/x/y")).data == b"1"


async def test_set_is_compare_and_set_on_the_version(db_path):
    store = EmbeddedMetadataStore(db_path)
    await store.create("/n", b"v0")
    assert await store.set("/n", b"v1", 0) == 1
    with pytest.raises(BadVersion):
        await store.set("/n", b"lost", 0)  # a writer that read version 0 loses
    assert await store.get("/n") == Node(b"v1", 1)
    assert await store.set("/n", b"any", -1) == 2
    assert await store.get("/n") == Node(b"any", 2)
    with pytest.raises(NoNode):
        await store.set("/missing", b"", -1)


async def test_children_are_direct_and_sorted(db_path):
    store = EmbeddedMetadataStore(db_path)
    for path in ("/t/b", "/t/a", "/t/a/deep", "/tx", "/t/c"):
        await store.create(path, b"")
    assert await store.children("/t") == ["a", "b", "c"]
    assert await store.children("/t/a") == ["deep"]
    assert await store.children("/") == ["t", "tx"]
    assert await store.children("/absent") == []


async def test_delete(db_path):
    store = EmbeddedMetadataStore(db_path)
    await store.create("/d/child/grandchild", b"")
    await store.create("/dd", b"sibling with a shared prefix")
    with pytest.raises(NodeExists):
        await store.delete("/d")  # has children
    with pytest.raises(BadVersion):
        await store.delete("/d/child/grandchild", version=3)
    await store.delete("/d", recursive=True)
    for path in ("/d", "/d/child", "/d/child/grandchild"):
        assert await store.get(path) is None
    assert await store.get("/dd") is not None
    with pytest.raises(NoNode):
        await store.delete("/d")


async def test_ephemeral_nodes_vanish_on_reopen_and_the_rest_is_durable(db_path):
    store = EmbeddedMetadataStore(db_path)
    await store.create("/brokers/0", b"me", ephemeral=True)
    await store.create("/topics/t", b"topic")
    await store.set("/topics/t", b"topic v1", 0)
    assert (await store.get("/brokers/0")).data == b"me"
    await store.close()

    store = EmbeddedMetadataStore(db_path)
    assert await store.get("/brokers/0") is None
    assert await store.children("/brokers") == []
    assert await store.get("/topics/t") == Node(b"topic v1", 1)
    await store.create("/brokers/0", b"me again", ephemeral=True)  # the claim can be made again
    await store.close()


async def test_committed_writes_survive_a_process_that_never_closed(db_path):
    crashed = EmbeddedMetadataStore(db_path)
    await crashed.create("/counters/ledger-id", b"7")
    await crashed.set("/counters/ledger-id", b"8", 0)
    restarted = EmbeddedMetadataStore(db_path)
    assert await restarted.get("/counters/ledger-id") == Node(b"8", 1)


async def test_a_command_opening_the_file_beside_a_broker_leaves_its_claims(db_path):
    broker = EmbeddedMetadataStore(db_path)
    await broker.create("/brokers/0", b"", ephemeral=True)
    command = EmbeddedMetadataStore(db_path, serving=False)
    assert await command.get("/brokers/0") == Node(b"", 0)
    await command.close()
    assert await EmbeddedMetadataStore(db_path).get("/brokers/0") is None  # the broker's next start
