"""A connection stops reading once too many requests are in flight, and reads again as they drain."""
import asyncio
import types

from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from gateway import connection as connection_module
from gateway.config import Listener, Settings
from gateway.connection import KafkaConnection
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


async def test_reading_pauses_at_the_in_flight_limit_and_resumes_as_answers_are_written(monkeypatch):
    release = asyncio.Event()

    async def blocked(broker, info, header, request):
        await release.wait()
        return MetadataResponse(brokers=[], topics=[])

    monkeypatch.setattr(connection_module, "dispatch", blocked)
    settings = Settings.load(overrides=["kgate.max.inflight.requests.per.connection=2"])
    metrics = types.SimpleNamespace(decoded=lambda *a: None, started=lambda *a: None, answered=lambda *a: None)
    broker = types.SimpleNamespace(settings=settings, metrics=metrics, connections=set())
    conn = KafkaConnection(broker, Listener("127.0.0.1", 9092))
    transport = _Transport()
    conn.connection_made(transport)
    conn.data_received(encode_request(MetadataRequest[0](topics=[]), 0, correlation_id=1))
    assert not transport.paused
    conn.data_received(encode_request(MetadataRequest[0](topics=[]), 0, correlation_id=2))
    assert transport.paused
    release.set()
    for _ in range(50):
        await asyncio.sleep(0)
    assert len(transport.written) == 2 and not transport.paused
    conn.connection_lost(None)
