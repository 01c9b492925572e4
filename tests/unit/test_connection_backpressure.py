"""A connection stops reading once too many requests or request bytes are in flight, and reads again as they drain;
fetched bytes count against the response budget until the socket has taken them."""
import asyncio
import struct
import tracemalloc
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from kgate.gateway import connection as connection_module
from kgate.gateway.config import Listener, Settings
from kgate.gateway.connection import KafkaConnection
from kgate.gateway.connection_limits import ConnectionLimits
from kgate.gateway.request_budget import RequestBytesBudget
from kgate.gateway.response_budget import ResponseBytesBudget
from kgate.protocol.frames import RECEIVE_BUFFER_BYTES
from tests.support.wire import encode_request

MIB = 1024 * 1024


class _Transport(asyncio.Transport):
    def __init__(self):
        super().__init__()
        self.paused = False
        self.written = []
        self.writes = 0
        self.on_write = lambda: None

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 5555) if name == "peername" else default

    def pause_reading(self):
        self.paused = True

    def resume_reading(self):
        self.paused = False

    def writelines(self, data):
        """Record each whole frame written (several may come in one call) and the call itself."""
        data = b"".join(data)
        self.writes += 1
        while data:
            end = 4 + int.from_bytes(data[:4], "big")
            self.written.append(data[:end])
            data = data[end:]
        self.on_write()

    def is_closing(self):
        return False

    def close(self):
        pass


def _blocked_broker(monkeypatch, *overrides, fetched=0):
    """A broker whose every request waits for the returned event, then holds ``fetched`` bytes as a fetch would."""
    release = asyncio.Event()

    async def blocked(ctx, request):
        await release.wait()
        ctx.connection.responses.take(fetched)
        ctx.held_bytes = fetched
        return MetadataResponse(brokers=[], topics=[])

    monkeypatch.setattr(connection_module, "dispatch", blocked)
    settings = Settings.load(overrides=list(overrides))
    metrics = types.SimpleNamespace(decoded=lambda *a: None, started=lambda *a: None, answered=lambda *a: None,
                                    client_bytes_counter=lambda zone: lambda direction, size: None)
    broker = types.SimpleNamespace(settings=settings, metrics=metrics, connections=set(),
                                   connection_limits=ConnectionLimits(settings["max.connections"],
                                                                      settings["max.connections.per.ip"], {}),
                                   request_bytes=RequestBytesBudget(settings["queued.max.request.bytes"]),
                                   response_bytes=ResponseBytesBudget(
                                       settings["kgate.queued.max.response.bytes"],
                                       settings["kgate.queued.max.response.bytes.per.connection"]))
    return broker, release


def _connect(broker):
    conn = KafkaConnection(broker, Listener("127.0.0.1", 9092))
    transport = _Transport()
    conn.connection_made(transport)
    return conn, transport


def _receive(conn, data: bytes) -> None:
    """What the event loop's transport does: read into the lent buffer, then say how much came."""
    data = memoryview(data)
    while data:
        buffer = conn.get_buffer(-1)
        count = min(len(buffer), len(data))
        buffer[:count] = data[:count]
        conn.buffer_updated(count)
        data = data[count:]


def _request(correlation_id: int) -> bytes:
    return encode_request(MetadataRequest[0](topics=[]), 0, correlation_id=correlation_id)


async def _drain():
    for _ in range(50):
        await asyncio.sleep(0)


async def test_reading_pauses_at_the_in_flight_limit_and_resumes_as_answers_are_written(monkeypatch):
    broker, release = _blocked_broker(monkeypatch, "kgate.max.inflight.requests.per.connection=2")
    conn, transport = _connect(broker)
    _receive(conn, encode_request(MetadataRequest[0](topics=[]), 0, correlation_id=1))
    assert not transport.paused
    _receive(conn, encode_request(MetadataRequest[0](topics=[]), 0, correlation_id=2))
    assert transport.paused
    release.set()
    for _ in range(50):
        await asyncio.sleep(0)
    assert len(transport.written) == 2 and not transport.paused
    conn.connection_lost(None)


async def test_reading_pauses_at_the_per_connection_byte_limit(monkeypatch):
    size = len(_request(1))
    broker, release = _blocked_broker(monkeypatch, f"kgate.queued.max.request.bytes.per.connection={2 * size}")
    conn, transport = _connect(broker)
    _receive(conn, _request(1))
    assert not transport.paused
    _receive(conn, _request(2))
    assert transport.paused and broker.request_bytes.total == 2 * size
    release.set()
    await _drain()
    assert len(transport.written) == 2 and not transport.paused and broker.request_bytes.total == 0
    conn.connection_lost(None)


async def test_a_spent_broker_wide_budget_pauses_every_connection_until_answers_give_it_back(monkeypatch):
    size = len(_request(1))
    broker, release = _blocked_broker(monkeypatch, f"queued.max.request.bytes={2 * size}")
    (first, first_transport), (second, second_transport) = _connect(broker), _connect(broker)
    _receive(first, _request(1))
    _receive(second, _request(1))
    assert first_transport.paused is False and second_transport.paused  # the second request spent the budget
    _receive(first, _request(2))
    assert first_transport.paused
    release.set()
    await _drain()
    assert not first_transport.paused and not second_transport.paused and broker.request_bytes.total == 0
    assert len(first_transport.written) == 2 and len(second_transport.written) == 1
    first.connection_lost(None)
    second.connection_lost(None)


async def test_a_lost_connection_gives_back_its_unanswered_bytes(monkeypatch):
    broker, release = _blocked_broker(monkeypatch)
    conn, _ = _connect(broker)
    _receive(conn, _request(1) + _request(2))
    assert broker.request_bytes.total == 2 * len(_request(1))
    conn.connection_lost(None)
    release.set()
    await _drain()
    assert broker.request_bytes.total == 0


async def test_fetched_bytes_are_held_until_the_socket_has_taken_them(monkeypatch):
    broker, release = _blocked_broker(monkeypatch, fetched=1000)
    conn, transport = _connect(broker)
    _receive(conn, _request(1))
    transport.on_write = conn.pause_writing  # the client stopped reading: the answer stays in the transport
    release.set()
    await _drain()
    assert len(transport.written) == 1  # handed to the transport...
    assert broker.response_bytes.total == 1000 and conn.info.responses.room() == 64 * 1024 * 1024 - 1000
    conn.resume_writing()  # ...and counted until the socket took it
    await _drain()
    assert broker.response_bytes.total == 0
    conn.connection_lost(None)


async def test_a_lost_connection_gives_back_its_fetched_bytes_and_takes_no_more(monkeypatch):
    broker, release = _blocked_broker(monkeypatch, fetched=1000)
    first, first_transport = _connect(broker)
    second, _ = _connect(broker)
    _receive(first, _request(1))
    _receive(second, _request(1))
    first_transport.on_write = first.pause_writing
    release.set()
    await _drain()
    assert broker.response_bytes.total == 1000  # the second connection's answer went out
    first.connection_lost(None)
    assert broker.response_bytes.total == 0
    first.info.responses.take(500)  # a fetch finishing after the loss
    assert broker.response_bytes.total == 0
    second.connection_lost(None)


async def test_a_fetch_waits_for_room_until_another_connection_gives_bytes_back():
    budget = ResponseBytesBudget(limit=1000, per_connection=800)
    first, second = budget.connection(), budget.connection()
    assert first.room() == 250  # a quarter of what the others leave free
    first.take(250)
    assert first.room() == 0 and second.room() == 187
    second.take(187)
    assert second.room() == 0 and first.room() == 0
    assert not await second.wait_for_room(0.01)
    waiting = asyncio.ensure_future(second.wait_for_room(30))
    await _drain()
    assert not waiting.done()
    first.give(200)
    assert await waiting and second.room() == 950 // 4 - 187


def _stall(budget: ResponseBytesBudget):
    """A consumer that never reads: every fetch takes all the room it is given, and nothing comes back."""
    stalled = budget.connection()
    while (room := stalled.room()) > 0:
        stalled.take(room)
    return stalled


@pytest.mark.parametrize("stalled", [1, 4, 10])
def test_consumers_that_stop_reading_cannot_starve_the_others(stalled):
    """Four stalled connections at the default caps (64 of 256 MiB each) used to leave the others nothing."""
    budget = ResponseBytesBudget(limit=256 * MIB, per_connection=64 * MIB)
    holders = [_stall(budget) for _ in range(stalled)]
    assert all(0 < holder.held <= 64 * MIB for holder in holders)
    assert budget.limit - budget.total >= budget.limit * 0.75 ** stalled
    reader = budget.connection()
    assert reader.room() >= (budget.limit - budget.total) // 4 >= MIB  # several batches per fetch


def test_a_connection_alone_still_gets_its_whole_cap_at_the_defaults():
    assert ResponseBytesBudget(limit=256 * MIB, per_connection=64 * MIB).connection().room() == 64 * MIB


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(st.tuples(st.integers(0, 7), st.booleans(), st.integers(0, 5000)), max_size=60),
       limit=st.integers(1, 10_000), per_connection=st.integers(1, 10_000))
def test_fetches_and_answers_in_any_order_keep_every_bound(steps, limit, per_connection):
    """Each connection within its cap and a quarter of what the others left when it took; the total within the limit."""
    budget = ResponseBytesBudget(limit=limit, per_connection=per_connection)
    connections = [budget.connection() for _ in range(8)]
    for index, take, size in steps:
        connection = connections[index]
        if take:
            size = min(size, connection.room())
            left_by_others = limit - (budget.total - connection.held)
            connection.take(size)
            assert size == 0 or connection.held <= left_by_others // 4
        else:
            connection.give(min(size, connection.held))
        assert 0 <= connection.held <= per_connection and 0 <= budget.total <= limit


async def test_answers_ready_together_go_out_in_one_write(monkeypatch):
    broker, release = _blocked_broker(monkeypatch)
    conn, transport = _connect(broker)
    _receive(conn, b"".join(_request(i) for i in range(1, 6)))
    release.set()  # all five answers become ready in the same pass
    await _drain()
    assert len(transport.written) == 5 and transport.writes == 1
    assert [int.from_bytes(frame[4:8], "big") for frame in transport.written] == [1, 2, 3, 4, 5]
async def test_a_large_request_is_counted_as_its_buffer_is_lent_then_once_whole(monkeypatch):
    """Its bytes arrive in several reads, most of them straight into the frame's own buffer."""
    large = encode_request(MetadataRequest[0](topics=["t" * 100] * 3000), 0, correlation_id=1)
    assert len(large) > RECEIVE_BUFFER_BYTES
    broker, release = _blocked_broker(monkeypatch)
    conn, _ = _connect(broker)
    _receive(conn, large[:-1])
    assert broker.request_bytes.total == len(large) - 4  # its own buffer, the size of its payload
    _receive(conn, large[-1:] + _request(2))
    assert broker.request_bytes.total == len(large) + len(_request(2))
    release.set()
    await _drain()
    assert broker.request_bytes.total == 0
    conn.connection_lost(None)


def _trickle(connections, data: bytes, chunk: int, sent: list | None = None) -> None:
    """Each connection's peer sends ``data`` in reads of up to ``chunk``, round robin, until every one has sent it
    or is paused (``sent``: how much each had sent before); paused connections read nothing, as with the event
    loop's transport, which stops calling ``get_buffer``."""
    sent = sent if sent is not None else [0] * len(connections)
    while True:
        progressed = False
        for i, (conn, transport) in enumerate(connections):
            if not transport.paused and sent[i] < len(data):
                buffer = conn.get_buffer(-1)
                count = min(len(buffer), chunk, len(data) - sent[i])
                buffer[:count] = data[sent[i]:sent[i] + count]
                conn.buffer_updated(count)
                sent[i] += count
                progressed = True
        if not progressed:
            return


async def test_frames_still_arriving_cannot_hold_more_than_the_request_budget(monkeypatch):
    """Peers that send a 100 MB size prefix and trickle bytes used to hold their buffers outside every budget."""
    limit = 4 * MIB
    broker, _ = _blocked_broker(monkeypatch, f"queued.max.request.bytes={limit}")
    connections = [_connect(broker) for _ in range(20)]
    data = struct.pack(">i", 100 * 1000 * 1000) + bytes(3 * MIB)
    tracemalloc.start()
    try:
        _trickle(connections, data, 256 * 1024)
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    # Each frame's buffer is counted before it is lent. Frames still arriving hold at most half the budget, and
    # one frame's next buffer more (a frame larger than the budget must still be able to arrive alone); whole
    # requests keep the rest. Unbounded, the 20 would hold 60 MiB.
    assert broker.request_bytes.arriving == broker.request_bytes.total
    assert limit // 2 <= broker.request_bytes.total <= limit // 2 + 4 * MIB  # the 3 MiB sent need 4 MiB
    assert held <= broker.request_bytes.total + MIB
    assert sum(transport.paused for _, transport in connections) >= 16
    for conn, _ in connections:
        conn.connection_lost(None)
    assert broker.request_bytes.total == 0


async def test_large_frames_arriving_together_all_complete_under_a_small_budget(monkeypatch):
    """No frame waits for ever for a buffer others hold: each completes, is answered, and frees room for the next."""
    broker, release = _blocked_broker(monkeypatch, f"queued.max.request.bytes={3 * MIB}")
    release.set()
    connections = [_connect(broker) for _ in range(6)]
    large = encode_request(MetadataRequest[0](topics=["t" * 100] * 25_000), 0, correlation_id=1)
    assert len(large) > 2 * MIB
    sent = [0] * len(connections)
    for _ in range(200):  # bounded: each round delivers what unpaused connections will read, then answers drain
        _trickle(connections, large, 128 * 1024, sent)
        await _drain()
        if all(len(transport.written) == 1 for _, transport in connections):
            break
    assert [len(transport.written) for _, transport in connections] == [1] * 6
    assert broker.request_bytes.total == 0
    for conn, _ in connections:
        conn.connection_lost(None)


class _Waiter:
    """A connection as the budget sees one: it is woken through resume_if_under_limits."""

    def __init__(self):
        self.woken = 0

    def resume_if_under_limits(self):
        self.woken += 1


def test_frames_in_flight_that_hold_half_the_budget_still_finish_largest_first():
    """Frames that had all started and together held half the budget used to wait on each other for ever."""
    budget = RequestBytesBudget(256 * 1024)
    small, large, late = _Waiter(), _Waiter(), _Waiter()
    budget.arrive(small, 130 * 1024)
    budget.arrive(large, 140 * 1024)  # each holds more than half the budget without the other
    assert not budget.room_for_arriving(small, 130 * 1024)
    assert budget.room_for_arriving(large, 140 * 1024)  # but the largest may always grow
    assert not budget.room_for_arriving(late, 0)  # and no new frame may start
    budget.wait(small)
    budget.arrive(large, 1024 * 1024 - 140 * 1024)
    budget.arrive(large, -1024 * 1024)  # handed out whole: the largest left is woken
    assert small.woken == 1 and budget.arriving == 130 * 1024
    assert budget.room_for_arriving(small, 130 * 1024)
