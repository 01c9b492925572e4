"""The I/O around one client connection.

Bytes from the socket feed the sans-IO :class:`protocol.connection.ServerConnection`;
each decoded request starts its handler at once (so requests pipeline), and one
writer task sends the responses strictly in request order. When too many requests
are in flight the connection stops reading until the writer catches up.
"""
import asyncio
import logging
import time
from dataclasses import dataclass

from protocol.connection import ProtocolViolation, RequestReceived, ServerConnection

from .handlers import dispatch

log = logging.getLogger(__name__)


@dataclass
class ConnectionInfo:
    """What handlers may know of the connection a request came in on."""

    peer: str
    listener_host: str
    listener_port: int
    client_software: tuple[str, str] | None = None


class KafkaConnection(asyncio.Protocol):
    def __init__(self, broker, listener_host: str, listener_port: int):
        self._broker = broker
        settings = broker.settings
        self._protocol = ServerConnection(settings["socket.request.max.bytes"])
        self._max_inflight = settings["kgate.max.inflight.requests.per.connection"]
        self._idle_seconds = settings["connections.max.idle.ms"] / 1000
        self._listener = (listener_host, listener_port)
        self._transport: asyncio.Transport | None = None
        self._pending: asyncio.Queue = asyncio.Queue()
        self._inflight = 0
        self._reading = True
        self._writable = asyncio.Event()
        self._writable.set()
        self._writer: asyncio.Task | None = None
        self._idle_timer: asyncio.TimerHandle | None = None
        self._last_activity = time.monotonic()
        self.info: ConnectionInfo | None = None

    # -- asyncio.Protocol callbacks ------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        peer = transport.get_extra_info("peername")
        self.info = ConnectionInfo(f"{peer[0]}:{peer[1]}" if peer else "?", *self._listener)
        self._writer = asyncio.create_task(self._write_responses())
        self._broker.connections.add(self)
        self._schedule_idle_check()

    def data_received(self, data: bytes) -> None:
        self._last_activity = time.monotonic()
        self._protocol.receive_data(data)
        while (event := self._protocol.next_event()) is not None:
            if isinstance(event, ProtocolViolation):
                log.warning("closing connection from %s: %s", self.info.peer, event.reason)
                self._transport.close()
                return
            self._start(event)
        if self._inflight >= self._max_inflight and self._reading:
            self._reading = False
            self._transport.pause_reading()

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self._broker.connections.discard(self)
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        if self._writer is not None:
            self._writer.cancel()
        self._writable.set()

    # -- requests and responses ------------------------------------------------------------

    def _start(self, event: RequestReceived) -> None:
        task = asyncio.ensure_future(dispatch(self._broker, self.info, event.header, event.request))
        self._inflight += 1
        self._pending.put_nowait((event.header, task))

    async def _write_responses(self) -> None:
        transport = self._transport
        while True:
            header, task = await self._pending.get()
            try:
                response = await task
                frame = ServerConnection.encode_response(header, response) if response is not None else None
            except Exception:
                log.exception("request api key %d v%d failed; closing connection from %s",
                              header.api_key, header.api_version, self.info.peer)
                transport.close()
                return
            finally:
                self._inflight -= 1
                self._pending.task_done()
            if frame is not None:
                await self._writable.wait()
                if transport.is_closing():
                    return
                transport.writelines(frame)
            self._last_activity = time.monotonic()
            if not self._reading and self._inflight < self._max_inflight:
                self._reading = True
                transport.resume_reading()

    # -- idle connections ----------------------------------------------------------------

    def _schedule_idle_check(self) -> None:
        self._idle_timer = asyncio.get_running_loop().call_later(self._idle_seconds, self._check_idle)

    def _check_idle(self) -> None:
        idle = time.monotonic() - self._last_activity
        if idle >= self._idle_seconds and self._inflight == 0:
            log.info("closing connection from %s idle for %.0f s", self.info.peer, idle)
            self._transport.close()
        else:
            self._schedule_idle_check()

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    async def drain(self) -> None:
        """Wait until every request received so far has been answered."""
        await self._pending.join()
