"""One contract for both metadata stores: the embedded one and ZooKeeper (a real server).

Everything above the store interface relies on exactly this: compare-and-set by
version, ephemeral nodes, children, recursive delete, persistent watches that fire
after a change, and (ZooKeeper) session states.
"""
import asyncio
import subprocess
import sys
import uuid

import pytest
from kazoo.client import KazooClient

from kgate.metadata.cluster import BROKERS, BrokerInfo, ClusterState, DuplicateBroker
from kgate.metadata.store import BadVersion, Node, NodeExists, NoNode, Session, StoreUnavailable
from kgate.metadata.stores.embedded import EmbeddedMetadataStore
from kgate.metadata.stores.zookeeper import ZooKeeperMetadataStore
from tests.support.ports import free_ports
from tests.support.zookeeper import ZooKeeperServer

# One worker runs the module, so its module-scoped servers start once (scripts/test: --dist loadgroup).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("metadata_stores")]


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory):
    server = ZooKeeperServer(str(tmp_path_factory.mktemp("zookeeper")), free_ports(1)[0]).start().wait_serving()
    yield server
    server.stop()


@pytest.fixture(params=["embedded", "zookeeper"])
def open_store(request, tmp_path):
    """An async callable opening a fresh store of the kind under test (closed by the test)."""
    async def opened():
        if request.param == "embedded":
            return EmbeddedMetadataStore(str(tmp_path / "metadata.sqlite"))
        zookeeper = request.getfixturevalue("zookeeper")
        store = ZooKeeperMetadataStore(f"{zookeeper.address}/contract-{uuid.uuid4().hex[:8]}", 4000)
        await store.connect()
        return store
    return opened


async def until(condition, timeout=10.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def test_versions_and_compare_and_set(open_store):
    store = await open_store()
    try:
        await store.create("/a/b", b"one")
        assert await store.get("/a/b") == Node(b"one", 0)
        assert await store.set("/a/b", b"two", 0) == 1
        with pytest.raises(BadVersion):
            await store.set("/a/b", b"stale", 0)
        assert (await store.get("/a/b")).data == b"two"
        with pytest.raises(NodeExists):
            await store.create("/a/b", b"again")
        with pytest.raises(NoNode):
            await store.set("/a/missing", b"", -1)
        with pytest.raises(BadVersion):
            await store.delete("/a/b", version=0)
        await store.delete("/a/b", version=1)
        assert await store.get("/a/b") is None
    finally:
        await store.close()


async def test_children_and_recursive_delete(open_store):
    store = await open_store()
    try:
        for path in ("/t/x/1", "/t/x/2", "/t/y"):
            await store.create(path, b"")
        assert await store.children("/t") == ["x", "y"]
        assert await store.children("/t/x") == ["1", "2"]
        assert await store.children("/nowhere") == []
        with pytest.raises(NodeExists):
            await store.delete("/t/x")
        await store.delete("/t/x", recursive=True)
        assert await store.children("/t") == ["y"]
    finally:
        await store.close()


async def test_watches_fire_after_changes_to_a_node_and_to_a_set_of_children(open_store):
    store = await open_store()
    try:
        data_events, child_events = [], []
        await store.create("/w", b"")
        store.watch("/w/node", lambda: data_events.append(1))
        store.watch("/w", lambda: child_events.append(1), children=True)
        await asyncio.sleep(0)
        data_before, children_before = len(data_events), len(child_events)
        await store.create("/w/node", b"1")
        await until(lambda: len(data_events) > data_before and len(child_events) > children_before)
        data_before, children_before = len(data_events), len(child_events)
        await store.set("/w/node", b"2", -1)
        await until(lambda: len(data_events) > data_before)
        data_before = len(data_events)
        await store.delete("/w/node")
        await until(lambda: len(data_events) > data_before and len(child_events) > children_before)
    finally:
        await store.close()


async def test_a_zookeeper_session_that_expires_takes_its_ephemeral_nodes_and_says_so(zookeeper):
    store = ZooKeeperMetadataStore(f"{zookeeper.address}/expiry-{uuid.uuid4().hex[:8]}", 4000)
    await store.connect()
    sessions = []
    store.on_session(sessions.append)
    try:
        await store.create("/claims/p0", b"mine", ephemeral=True)
        # Another client closing the same session is how ZooKeeper ends it for good.
        session_id, password = store._client.client_id
        thief = KazooClient(hosts=zookeeper.address, client_id=(session_id, password))
        thief.start(timeout=10)
        thief.stop()
        thief.close()
        await until(lambda: Session.EXPIRED in sessions, timeout=20)
        await until(lambda: Session.CONNECTED in sessions[sessions.index(Session.EXPIRED):], timeout=20)
        assert await store.get("/claims/p0") is None
    finally:
        await store.close()


async def test_a_registration_whose_create_reached_zookeeper_is_the_brokers_own_and_another_sessions_is_not(
        zookeeper):
    """A broker's registration whose create reached ZooKeeper though its answer did not (made
    here by creating the node first): the node this session holds is the broker's own
    registration, taken at once rather than refused for good (fault run seed 12). The same node
    held by another session is another live broker's, refused once the wait is over."""
    chroot = f"{zookeeper.address}/registered-{uuid.uuid4().hex[:8]}"
    here, elsewhere = ZooKeeperMetadataStore(chroot, 4000), ZooKeeperMetadataStore(chroot, 4000)
    await here.connect()
    await elsewhere.connect()
    me = BrokerInfo(3, {"PLAINTEXT": "127.0.0.1:9092"})
    try:
        await here.create(f"{BROKERS}/3", me.encode(), ephemeral=True)
        assert (await here.get(f"{BROKERS}/3")).held_here
        assert not (await elsewhere.get(f"{BROKERS}/3")).held_here
        await asyncio.wait_for(ClusterState(here).register(me, wait_seconds=3600), 20)  # not an hour's wait
        with pytest.raises(DuplicateBroker, match="127.0.0.1:9092"):
            await asyncio.wait_for(ClusterState(elsewhere).register(me, wait_seconds=1), 20)
    finally:
        await elsewhere.close()
        await here.close()


async def test_a_zookeeper_client_that_stops_on_its_own_is_replaced_with_its_watches(zookeeper):
    store = ZooKeeperMetadataStore(f"{zookeeper.address}/stopped-{uuid.uuid4().hex[:8]}", 4000)
    await store.connect()
    sessions, events = [], []
    store.on_session(sessions.append)
    try:
        await store.create("/r", b"")
        store.watch("/r", lambda: events.append(1), children=True)
        await store.create("/claims/p0", b"mine", ephemeral=True)
        # Its connection loop ends without close(), as when an exception escapes kazoo's thread.
        stopped = store._client
        await asyncio.get_running_loop().run_in_executor(None, stopped.stop)
        await until(lambda: Session.EXPIRED in sessions, timeout=20)
        await until(lambda: Session.CONNECTED in sessions[sessions.index(Session.EXPIRED):], timeout=20)
        assert store._client is not stopped
        assert await store.get("/claims/p0") is None
        before = len(events)
        await store.create("/r/child", b"")
        await until(lambda: len(events) > before)
    finally:
        await store.close()


async def test_zookeeper_chroot_keeps_clusters_apart(zookeeper):
    first = ZooKeeperMetadataStore(f"{zookeeper.address}/one-{uuid.uuid4().hex[:8]}", 4000)
    second = ZooKeeperMetadataStore(f"{zookeeper.address}/two-{uuid.uuid4().hex[:8]}", 4000)
    await first.connect()
    await second.connect()
    try:
        await first.create("/topics/t", b"first")
        assert await second.get("/topics/t") is None
        assert await second.children("/topics") == []
    finally:
        await first.close()
        await second.close()


async def test_a_zookeeper_call_while_the_ensemble_is_gone_fails_instead_of_hanging(tmp_path):
    server = ZooKeeperServer(str(tmp_path / "zookeeper"), free_ports(1)[0]).start().wait_serving()
    store = ZooKeeperMetadataStore(f"{server.address}/gone", 2000)
    sessions = []
    try:
        await store.connect()
        store.on_session(sessions.append)
        await store.create("/a", b"")
        server.stop()
        await until(lambda: Session.SUSPENDED in sessions)
        with pytest.raises(StoreUnavailable):
            # The outer bound only keeps a regression from hanging the suite.
            await asyncio.wait_for(store.get("/a"), 30)
    finally:
        server.stop()
        await store.close()


def test_kgate_users_refuses_a_chroot_that_holds_no_cluster(zookeeper):
    chroot = f"zookeeper://{zookeeper.address}/nobody-{uuid.uuid4().hex[:8]}"

    def users(*args):
        return subprocess.run([sys.executable, "-m", "kgate", "users", "--metadata", chroot, *args],
                              capture_output=True, text=True, timeout=60)

    refused = users("list")
    assert refused.returncode == 2 and f"{chroot} holds no kgate cluster" in refused.stderr, refused
    assert users("--create", "add", "alice", "--password", "secret").returncode == 0
    assert users("list").stdout.split()[-2] == "alice"
