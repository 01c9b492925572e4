"""A connection stops reading once too many requests or request bytes are in flight, and reads again as they drain."""
import asyncio
import types

from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from gateway import connection as connection_module
from gateway.config import Listener, Settings
from gateway.connection import KafkaConnection
from gateway.request_budget import RequestBytesBudget
from protocol.frames import RECEIVE_BUFFER_BYTES
from tests.support.wire import encode_request


class _Transport(asyncio.Transport):
    def __init__(self):
        super().__init__()
        self.paused = False
        self.written = []

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 5555) if name == "peername" else default

    def pause_reading(self):
        self.paused = True

    def resume_reading(self):
        self.paused = False

    def writelines(self, data):
        self.written.append(b"".join(data))

    def is_closing(self):
        return False

    def close(self):
        pass


def _blocked_broker(monkeypatch, *overrides):
    """A broker whose every request waits for the returned event."""
    release = asyncio.Event()

    async def blocked(broker, info, header, request):
        await release.wait()
        return MetadataResponse(brokers=[], topics=[])

    monkeypatch.setattr(connection_module, "dispatch", blocked)
    settings = Settings.load(overrides=list(overrides))
    metrics = types.SimpleNamespace(decoded=lambda *a: None, started=lambda *a: None, answered=lambda *a: None)
    broker = types.SimpleNamespace(settings=settings, metrics=metrics, connections=set(),
                                   request_bytes=RequestBytesBudget(settings["queued.max.request.bytes"]))
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


async def test_a_large_request_read_into_its_own_buffer_is_counted_once_whole(monkeypatch):
    """Its bytes arrive in several reads, most of them straight into the frame's own buffer."""
    large = encode_request(MetadataRequest[0](topics=["t" * 100] * 3000), 0, correlation_id=1)
    assert len(large) > RECEIVE_BUFFER_BYTES
    broker, release = _blocked_broker(monkeypatch)
    conn, _ = _connect(broker)
    _receive(conn, large[:-1])
    assert broker.request_bytes.total == 0
    _receive(conn, large[-1:] + _request(2))
    assert broker.request_bytes.total == len(large) + len(_request(2))
    release.set()
    await _drain()
    assert broker.request_bytes.total == 0
    conn.connection_lost(None)
