"""The metadata store a ``serve --workers`` supervisor shares with its workers: the frame
reader (round trips, and any bytes at all end in a message or a WireError), and the store
itself, the real embedded store served over a real Unix socket to real clients."""
import asyncio
import os
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgate.metadata.store import BadVersion, Node, NodeExists, NoNode, Session, StoreUnavailable
from kgate.metadata.stores.embedded import EmbeddedMetadataStore
from kgate.metadata.stores.shared import SharedMetadataStore
from kgate.metadata.stores.shared_server import StoreServer
from kgate.metadata.stores.shared_wire import (
    MAX_FRAME,
    FrameReader,
    Kind,
    Message,
    Status,
    WireError,
    encode,
    fields_of,
)

fields = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1), st.text(), st.binary(),
                   st.lists(st.text(), max_size=5).map(tuple))
messages = st.builds(Message, st.sampled_from(Kind), st.integers(0, 2**32 - 1),
                     st.lists(fields, max_size=6).map(tuple))


def read_all(data: bytes, chunk: int) -> list[Message]:
    reader, found = FrameReader(), []
    for at in range(0, len(data), chunk):
        reader.receive(data[at:at + chunk])
        while (message := reader.next_message()) is not None:
            found.append(message)
    return found


@given(st.lists(messages, max_size=5), st.integers(1, 64))
def test_messages_come_back_whole_however_the_bytes_are_cut(sent, chunk):
    assert read_all(b"".join(encode(m) for m in sent), chunk) == sent


@settings(max_examples=500)
@given(st.binary(max_size=200), st.integers(1, 32))
def test_any_bytes_give_messages_or_a_wire_error(data, chunk):
    try:
        read_all(data, chunk)
    except WireError:
        pass


@given(messages, st.integers(0, 40), st.binary(min_size=1, max_size=4))
def test_a_damaged_frame_gives_a_wire_error_or_messages_never_a_crash(message, at, junk):
    frame = bytearray(encode(message))
    place = 4 + at % max(1, len(frame) - 4)
    frame[place:place + len(junk)] = junk
    try:
        for decoded in read_all(bytes(frame), 7):
            if decoded.kind not in (Kind.REPLY, Kind.EVENT):
                fields_of(decoded)
    except WireError:
        pass


def test_an_oversized_length_is_refused_before_it_is_buffered():
    reader = FrameReader()
    reader.receive(struct.pack(">I", MAX_FRAME + 1))
    with pytest.raises(WireError, match="at most"):
        reader.next_message()


@pytest.mark.parametrize("fields", [("/p",), ("/p", b"", True, 1), ("/p", b"", 1, True), (b"/p", b"", True, True)])
def test_a_request_must_carry_its_kinds_fields(fields):
    with pytest.raises(WireError):
        fields_of(Message(Kind.CREATE, 1, fields))


class Served:
    """The embedded store served on a socket, and the workers' stores connected to it."""

    def __init__(self, tmp_path, session_timeout: float = 10.0):
        self.embedded = EmbeddedMetadataStore(str(tmp_path / "metadata.sqlite"))
        self.expired: list[int] = []
        self.server = StoreServer(self.embedded, str(tmp_path / "s.sock"), session_timeout, self.expired.append)
        self.clients: list[SharedMetadataStore] = []

    async def __aenter__(self) -> "Served":
        await self.server.start()
        return self

    async def connect(self) -> SharedMetadataStore:
        client = SharedMetadataStore(self.server.socket_path, int(self.server.session_timeout * 1000))
        await client.connect()
        self.clients.append(client)
        return client

    async def __aexit__(self, *_exc) -> None:
        for client in self.clients:
            await client.close()
        await self.server.close()
        await self.embedded.close()


async def wait_until(condition, timeout=5.0):
    """Until ``condition()`` (a coroutine function, or a plain one) is true."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not (await result if asyncio.iscoroutine(result := condition()) else result):
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def test_the_store_over_the_socket_behaves_as_the_embedded_store(tmp_path):
    async with Served(tmp_path) as served:
        await the_store_behaves(await served.connect())


async def the_store_behaves(store):
    assert await store.get("/a/b") is None
    await store.create("/a/b", b"data")
    assert await store.get("/a/b") == Node(b"data", 0)
    with pytest.raises(NodeExists):
        await store.create("/a/b", b"again")
    with pytest.raises(NoNode):
        await store.create("/x/y", b"", make_parents=False)
    assert await store.set("/a/b", b"v1", 0) == 1
    with pytest.raises(BadVersion):
        await store.set("/a/b", b"lost", 0)
    await store.create("/a/c", b"")
    assert await store.children("/a") == ["b", "c"]
    with pytest.raises(NodeExists):
        await store.delete("/a")
    await store.delete("/a", recursive=True)
    assert await store.children("/a") == [] and await store.get("/a/b") is None
    with pytest.raises(NoNode):
        await store.delete("/a")


async def test_a_sessions_ephemeral_nodes_go_with_its_connection_and_watchers_hear_it(tmp_path):
    async with Served(tmp_path) as served:
        await ephemeral_nodes_go(served.embedded, await served.connect(), await served.connect())


async def ephemeral_nodes_go(embedded, worker, other):
    await worker.create("/brokers/1", b"w", ephemeral=True)
    await worker.create("/topics/t", b"persistent")
    await other.create("/brokers/2", b"o", ephemeral=True)
    heard = []
    other.watch("/brokers", lambda: heard.append("children"), children=True)
    other.watch("/brokers/1", lambda: heard.append("node"))
    await other.get("/brokers/1")  # the watches are armed before this answer: requests go in order
    assert sorted(heard) == ["children", "node"]  # each fired once when armed, as ZooKeeper's do
    heard.clear()
    worker._writer.transport.abort()  # as the kernel does for a process killed with kill -9

    async def gone():
        return await other.get("/brokers/1") is None
    await wait_until(gone)
    await wait_until(lambda: len(heard) >= 2)
    assert sorted(heard) == ["children", "node"]
    assert await other.children("/brokers") == ["2"]
    assert await other.get("/topics/t") == Node(b"persistent", 0)
    assert await embedded.get("/brokers/2") == Node(b"o", 0)


async def test_a_lost_connection_is_an_expired_session_and_later_calls_fail(tmp_path):
    async with Served(tmp_path) as served:
        store = await served.connect()
        sessions = []
        store.on_session(sessions.append)
        await store.create("/brokers/0", b"", ephemeral=True)
        await served.server.close()
        await wait_until(lambda: sessions == [Session.EXPIRED])
        with pytest.raises(StoreUnavailable):
            await store.get("/anything")


async def test_a_call_cancelled_as_its_answer_arrives_stays_cancelled(tmp_path):
    """A broker's metadata event handler cancelled at shutdown used to take an answer that came in
    the same moment and go on: Python 3.11's wait_for then returns the result and drops the
    cancellation, so the event task waited for its next event instead of ending, and the stop hung."""
    async with Served(tmp_path) as served:
        store = await served.connect()
        call = asyncio.create_task(store.get("/brokers"))
        await asyncio.sleep(0)  # the request is sent; its answer needs the server's turn
        (answer,) = store._pending.values()
        answer.set_result((Status.OK, None))
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call


async def test_a_malformed_frame_closes_only_its_own_connection(tmp_path):
    async with Served(tmp_path) as served:
        good = await served.connect()
        await good.create("/kept", b"")
        reader, writer = await asyncio.open_unix_connection(served.server.socket_path)
        writer.write(struct.pack(">I", 3) + b"\xff\x00\x00")
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the server
        writer.close()
        assert await good.get("/kept") == Node(b"", 0)


async def test_the_socket_is_private(tmp_path):
    async with Served(tmp_path) as served:
        assert os.stat(served.server.socket_path).st_mode & 0o777 == 0o600


async def test_a_silent_session_ends_with_its_claims_and_its_process_is_named(tmp_path):
    async with Served(tmp_path, session_timeout=0.5) as served:
        beating, watcher = await served.connect(), await served.connect()
        await beating.create("/brokers/0", b"", ephemeral=True)
        # A process whose event loop stopped: it claimed, then sends nothing, not even heartbeats.
        reader, writer = await asyncio.open_unix_connection(served.server.socket_path)
        writer.write(encode(Message(Kind.CREATE, 1, ("/brokers/1", b"", True, True))))
        replies = FrameReader()
        replies.receive(await reader.read(100))
        assert replies.next_message() == Message(Kind.REPLY, 1, (Status.OK,))
        assert await watcher.children("/brokers") == ["0", "1"]

        async def claim_gone():
            return await watcher.children("/brokers") == ["0"]
        await wait_until(claim_gone)
        assert served.expired == [os.getpid()]  # the peer at the other end of the socket: this test
        assert await reader.read() == b""
        writer.close()
        await asyncio.sleep(1.0)  # two timeouts more: the heartbeating session lives on
        assert await watcher.children("/brokers") == ["0"] and served.expired == [os.getpid()]
