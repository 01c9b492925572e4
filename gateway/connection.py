"""The I/O around one client connection.

The socket is read straight into buffers the sans-IO
:class:`protocol.connection.ServerConnection` lends; each decoded request starts its
handler at once (so requests pipeline), and one writer task sends the responses
strictly in request order, answers that are ready together in one write.

Except on a connection a peer broker opened (gateway/peer_links.py): there each answer
is written as soon as it is ready. A peer multiplexes all its requests to this broker
over that one link and matches answers by correlation id, and some of them are long
polls (KgateReadEnd waiting for data, forwarded JoinGroups), so answering in order would
hold every produce by reference and every other poll behind the longest wait. One link
answered out of order was chosen over a link per purpose: no extra connections, and no
class of request that can still be stuck behind another of its kind. Order where it
matters is kept elsewhere: produces by reference take their append turn in the order
they arrive (gateway/handlers/produce_reference.py). A peer in another zone may ask for its
link to be compressed (KgateLinkDeflate): from that answer on both ways are deflate streams
(gateway/link_deflate.py). When too
many requests or request bytes are in flight the connection stops reading until the
writer catches up, and fetched bytes count against the broker's response budget until
the socket has taken them (gateway/response_budget.py).

On a SASL listener the writer also reports each handshake and token outcome back to
the protocol machine, which decodes nothing more until it knows it.
"""
import asyncio
import logging
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, cast

from kafka.protocol.api_key import ApiKey

from kgate.metadata.cluster import ClusterState
from kgate.protocol.api_versions import KGATE_LINK_DEFLATE
from kgate.protocol.connection import (
    AuthState,
    LocalProtocolError,
    ProtocolViolation,
    SaslTokenReceived,
    ServerConnection,
    Waiting,
)

from . import zones
from .config import Listener
from .connection_limits import ConnectionLimits
from .handlers import Context, dispatch
from .handlers.broker_view import BrokerView
from .handlers.sasl import authenticate
from .link_deflate import DeflatingTransport, InflatingBuffer
from .read_end_poll import StandingPoll
from .reference_outbox import ReferenceOutbox
from .refused_batches import RefusedBatches
from .request_budget import RequestBytesBudget
from .response_budget import HeldResponses, ResponseBytesBudget
from .sasl import AuthenticationFailed, Mechanism
from .sasl.session import Session

log = logging.getLogger(__name__)


# Buffers at least this large are written as they are rather than joined with others.
WRITE_JOIN_MAX_BYTES = 64 * 1024

# Requests whose answer must account for every earlier answer on the connection, so they are
# handled once the earlier ones are: an OffsetForLeaderEpoch pipelined behind a fetch that is
# waiting for data would otherwise say a log end below the records that fetch then returns, and
# librdkafka takes that for a truncation and seeks there, dropping the records it had fetched
# but not yet handed to the application (fault run seed 5: a consumer skipped idem/1@481-483).
# Kafka handles a connection's requests one at a time, so its answer always comes after.
_AFTER_EARLIER = frozenset({ApiKey.OffsetForLeaderEpoch})


class ServingBroker(BrokerView, Protocol):
    """What a connection needs of the broker: what its handlers see, and the limits and
    budgets that decide when it stops reading, the broker's set of open connections, and
    the live brokers (a peer broker's zone, for counting its bytes)."""

    connection_limits: ConnectionLimits
    request_bytes: RequestBytesBudget
    response_bytes: ResponseBytesBudget

    @property
    def connections(self) -> set["KafkaConnection"]: ...

    @property
    def cluster(self) -> ClusterState: ...


@dataclass
class ConnectionInfo:
    """What handlers may know of the connection a request came in on."""

    peer: str
    listener_host: str
    listener_port: int
    security_protocol: str = "PLAINTEXT"
    sasl_listener: bool = False
    client_software: tuple[str, str] | None = None
    # The SASL exchange under way or done, and who the client proved to be.
    mechanism: Mechanism | None = None
    principal: str | None = None
    # How long the login holds (connections.max.reauth.ms): None, for the connection's life.
    session: Session | None = None
    # Answer the request being handled, then close (a failed re-authentication, as Kafka does).
    closing: bool = False
    # This connection's share of the broker's fetched-bytes budget.
    responses: HeldResponses = field(kw_only=True)
    # The newest produce request's turn (gateway/handlers/produce.py, Turn), done once it has
    # appended: the connection's next produce appends after it, keeping the order they were sent in.
    appending: asyncio.Future | None = None
    # Idempotent batches refused before their sequence check: those pipelined behind them are refused alike.
    refused_batches: RefusedBatches = field(default_factory=RefusedBatches)
    # Its produces by reference on their way to the owners (gateway/reference_outbox.py), from the first.
    references: ReferenceOutbox | None = None
    # A peer's standing KgateReadEnd poll on this connection (gateway/handlers/read_end.py), once opened.
    read_end_poll: StandingPoll | None = None
    # The client's zone (gateway/zones.py), or the peer broker's id for a broker-to-broker
    # connection, known from the first request's client id; and how its bytes are counted.
    zone: str | None = None
    peer_broker: int | None = None
    count_bytes: Callable[[str, int], None] | None = None

    def identify(self, client_id: str | None, broker: ServingBroker) -> None:
        """Who is on the other end, from the first request's client id: a peer broker, or a
        client in a zone (or in none)."""
        self.peer_broker = zones.peer_broker(client_id)
        if self.peer_broker is not None:
            peer = broker.cluster.brokers.get(self.peer_broker)
            self.zone = zones.client_zone(client_id) or (peer.rack if peer is not None else None)
            self.count_bytes = broker.metrics.interbroker_counter(broker.settings["broker.rack"] or None, self.zone)
        else:
            self.said_zone(zones.client_zone(client_id), broker.metrics)

    def said_zone(self, zone: str | None, metrics) -> None:
        """The client named its zone (a Fetch's rack_id): its bytes count under it from now on."""
        if self.peer_broker is None and (zone != self.zone or self.count_bytes is None):
            self.zone = zone
            self.count_bytes = metrics.client_bytes_counter(zone)


class KafkaConnection(asyncio.BufferedProtocol):
    """Reads with ``recv_into`` into buffers the protocol machine lends (see protocol/frames.py)."""

    # Set by connection_made, which asyncio calls before any other callback.
    _transport: asyncio.Transport
    info: ConnectionInfo

    def __init__(self, broker: ServingBroker, listener: Listener):
        self._broker = broker
        settings = broker.settings
        self._sasl = listener.sasl
        self._protocol = ServerConnection(settings["socket.request.max.bytes"],
                                          settings["sasl.server.max.receive.size"] if listener.sasl else None)
        self._max_inflight = settings["kgate.max.inflight.requests.per.connection"]
        self._max_queued_bytes = settings["kgate.queued.max.request.bytes.per.connection"]
        self._queued_bytes = 0  # request bytes decoded and not yet answered, and _partial
        self._partial = 0  # the buffer of a large frame still arriving, counted as it is lent
        self._budget = broker.request_bytes
        self._lost = False
        self._idle_seconds = settings["connections.max.idle.ms"] / 1000
        self._listener = listener
        self._admitted = False
        self._pending: asyncio.Queue = asyncio.Queue()
        self._unordered: set[asyncio.Future] = set()  # a peer's requests not answered yet (see the docstring)
        self._inflight = 0
        self._reading = True
        self._writable = asyncio.Event()
        self._writable.set()
        self._writer: asyncio.Task | None = None
        self._corked: list = []  # small answers' buffers, sent together (see _send)
        self._corked_bytes = 0
        self._idle_timer: asyncio.TimerHandle | None = None
        self._last_activity = time.monotonic()
        self._address = "?"
        self._inflating: InflatingBuffer | None = None  # a compressed link's reads (gateway/link_deflate.py)

    # -- asyncio.BufferedProtocol callbacks ----------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream server's transport, with TLS or without: it reads, writes and pauses.
        self._transport = transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self._address = peer[0] if peer else "?"
        if not self._broker.connection_limits.admit(self._address):
            transport.abort()
            return
        self.info = ConnectionInfo(f"{peer[0]}:{peer[1]}" if peer else "?", self._listener.host, self._listener.port,
                                   self._listener.security_protocol, sasl_listener=self._sasl,
                                   responses=self._broker.response_bytes.connection())
        self._admitted = True
        self._writer = asyncio.create_task(self._write_responses())
        self._broker.connections.add(self)
        self._schedule_idle_check()

    def get_buffer(self, sizehint: int) -> memoryview:
        """The protocol machine's buffer; ``sizehint`` is ignored: it knows where frames end.
        On a compressed link, the buffer the compressed bytes are inflated from."""
        return self._protocol.get_buffer() if self._inflating is None else self._inflating.buffer

    def buffer_updated(self, nbytes: int) -> None:
        self._last_activity = time.monotonic()
        if self._inflating is None:
            self._protocol.buffer_updated(nbytes)
            self._process()
            return
        try:
            for piece in self._inflating.inflated(nbytes):
                self._protocol.receive_data(piece)
                self._process()
        except zlib.error as exc:
            log.warning("closing the link from %s: not a deflate stream: %s", self.info.peer, exc)
            self._transport.close()

    def _process(self) -> None:
        metrics = self._broker.metrics
        while True:
            started = time.monotonic()
            buffered = self._protocol.buffered_bytes
            event = self._protocol.next_event()
            if isinstance(event, Waiting):
                if self._reading and not self._may_read_on():
                    # Back-pressure: read no more until answers drain (resumed as they are written).
                    self._reading = False
                    self._transport.pause_reading()
                    if self._waits_for_budget():
                        self._budget.wait(self)
                return
            size = buffered - self._protocol.buffered_bytes
            received = time.monotonic()
            if isinstance(event, ProtocolViolation):
                log.warning("closing connection from %s: %s", self.info.peer, event.reason)
                self._transport.close()
                return
            if isinstance(event, SaslTokenReceived):
                self._enqueue(None, self._authenticate(event.token), received, size)
            elif self._session_expired(event.header, received):
                return
            else:
                if self.info.count_bytes is None:
                    self.info.identify(event.header.client_id, self._broker)
                count_bytes = self.info.count_bytes
                assert count_bytes is not None  # identify set it
                count_bytes("in", size)
                metrics.decoded(event.header.api_key, received - started)
                self._enqueue(event.header, self._handle(event.header, event.request, received), received, size)

    # Both give (answer, when it was ready: the respond stage starts there, fetched bytes held).

    async def _handle(self, header, request, received: float):
        self._broker.metrics.started(header.api_key, time.monotonic() - received)
        ctx = Context(self._broker, self.info, header)
        response = await dispatch(ctx, request)
        return response, time.monotonic(), ctx.held_bytes

    async def _authenticate(self, token: bytes | bytearray):
        return await authenticate(self._broker, self.info, token), time.monotonic(), 0

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._admitted:  # refused at accept
            return
        self._broker.connection_limits.release(self._address)
        self._broker.connections.discard(self)
        self._lost = True
        self._budget.forget(self)
        self._budget.arrive(self, -self._partial)
        self._budget.give(self._queued_bytes - self._partial)
        self._queued_bytes = self._partial = 0
        self.info.responses.close()
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        if self._writer is not None:
            self._writer.cancel()
        self._writable.set()

    # -- requests and responses ------------------------------------------------------------

    def _enqueue(self, header, work, received: float, size: int) -> None:
        """Start ``work`` now; its answer is written after every earlier one (``header`` None: a raw token),
        or, from a peer broker, once it is ready."""
        self._inflight += 1
        self._queued_bytes += size
        self._budget.take(size)
        turn = None
        if header is not None and header.api_key in _AFTER_EARLIER and self.info.peer_broker is None:
            # Handled when the writer reaches it, that is once every earlier answer is done.
            turn = asyncio.get_running_loop().create_future()
            work = _after(turn, work)
        task = asyncio.ensure_future(work)
        item = (header, task, received, size, turn)
        if header is None or self.info.peer_broker is None:
            self._pending.put_nowait(item)
            return
        self._unordered.add(task)

        def ready(_):
            self._unordered.discard(task)
            self._pending.put_nowait(item)
        task.add_done_callback(ready)

    def _over_limits(self) -> bool:
        return (self._inflight >= self._max_inflight or self._queued_bytes >= self._max_queued_bytes
                or self._budget.spent())

    def _may_read_on(self) -> bool:
        """Whether to go on reading, counting the buffer of a large frame still arriving first.

        Frames still arriving count against the request budgets as their buffers are
        lent (gateway/request_budget.py), so peers that send large size prefixes and
        trickle bytes cannot make the broker hold more than the budgets. A frame whose
        buffer is counted is read to its end whatever the limits (its memory is already
        accounted for); one that needs a new or larger buffer waits until there is room.
        Its own buffer is left out of that check, so a frame larger than the limits can
        still arrive alone, and frames started together never wait on each other for ever.
        """
        needed = self._protocol.frame_buffer_bytes
        if needed > self._partial and (self._queued_bytes - self._partial >= self._max_queued_bytes
                                       or not self._budget.room_for_arriving(self, self._partial)):
            return False
        change, self._partial = needed - self._partial, needed
        self._queued_bytes += change
        self._budget.arrive(self, change)
        return self._protocol.large_frame_arriving or not self._over_limits()

    def _waits_for_budget(self) -> bool:
        """Paused for the broker-wide budget (so resumed by it), not only for this connection's own limits."""
        return self._budget.spent() or (self._protocol.frame_buffer_bytes > self._partial
                                        and not self._budget.room_for_arriving(self, self._partial))

    def resume_if_under_limits(self) -> None:
        if not self._reading and not self._lost and self._may_read_on():
            self._reading = True
            self._transport.resume_reading()
        elif not self._reading and not self._lost and self._waits_for_budget():
            self._budget.wait(self)

    def _send(self, frame: list) -> None:
        """Write a response frame (a list of buffers): small buffers corked, large ones without a copy.

        Answers that are ready together (every produce a group commit made durable) go
        out in one ``writelines`` and one send when the writer is about to wait
        (:meth:`_flush`), and so do the small pieces of a large frame (the header pieces
        and small record sets of a fetch). A large buffer (a fetch's stored entry) is
        handed to ``write`` as it is, since Python 3.11's ``writelines`` would join it
        first: one full copy of every record byte a fetch serves (bench/PROFILE.md).
        """
        for buffer in frame:
            size = len(buffer)
            if size < WRITE_JOIN_MAX_BYTES:
                self._corked.append(buffer)
                self._corked_bytes += size
                if self._corked_bytes >= WRITE_JOIN_MAX_BYTES:
                    self._flush()
            else:
                self._flush()
                self._transport.write(buffer)

    def _flush(self) -> None:
        if self._corked:
            if not self._transport.is_closing():
                self._transport.writelines(self._corked)
            self._corked = []
            self._corked_bytes = 0

    async def _write_responses(self) -> None:
        transport = self._transport
        metrics = self._broker.metrics
        while True:
            if self._pending.empty():
                self._flush()
            header, task, received, size, turn = await self._pending.get()
            if turn is not None:
                turn.set_result(None)
            try:
                if not task.done():
                    self._flush()
                response, handled, held = await task
                frame: list | None
                if header is None:
                    frame = ServerConnection.encode_token(response)
                else:
                    frame = ServerConnection.encode_response(header, response) if response is not None else None
            except AuthenticationFailed:  # a raw token: no answer, the connection closes
                self._failed_authentication()
                return
            except Exception:
                what = f"api key {header.api_key} v{header.api_version}" if header else "SASL token"
                log.exception("request %s failed; closing connection from %s", what, self.info.peer)
                self.close()
                return
            finally:
                self._inflight -= 1
                self._pending.task_done()
                if not self._lost:  # connection_lost gave back all of this connection's bytes
                    self._queued_bytes -= size
                    self._budget.give(size)
            if frame is not None:
                if not self._writable.is_set():
                    self._flush()
                    await self._writable.wait()
                if transport.is_closing():
                    return
                self._send(frame)
                if self.info.count_bytes is not None:
                    self.info.count_bytes("out", sum(map(len, frame)))
                if header is not None and header.api_key == KGATE_LINK_DEFLATE and response.error_code == 0:
                    self._deflate()
            if held:
                # Fetched bytes count until the socket has taken them (the transport's
                # buffer back under its low-water mark), not merely until written to it.
                self._flush()
                await self._writable.wait()
                self.info.responses.give(held)
            if header is not None:
                metrics.answered(header.api_key, header.api_version, received, handled)
            if self._protocol.auth_state is AuthState.PAUSED and not self._authentication_step(header, response):
                return
            if self.info.closing:
                self._failed_authentication()
                return
            self._last_activity = time.monotonic()
            self.resume_if_under_limits()

    def _deflate(self) -> None:
        """From the KgateLinkDeflate answer just written on, both ways are compressed and the
        compressed bytes are what is counted (gateway/link_deflate.py). The peer must send
        nothing between its request and this answer: bytes still unread here could be of either
        kind, so they break the link (a peer that broke the rule otherwise gets answers it
        cannot read, and only its own link suffers)."""
        self._flush()
        if self._protocol.buffered_bytes:
            log.warning("closing the link from %s: it sent on before its KgateLinkDeflate was answered",
                        self.info.peer)
            self._transport.close()
            return
        count = self.info.count_bytes
        assert count is not None  # a peer broker's link: identify set it
        self.info.count_bytes = _counted_compressed
        self._transport = cast(asyncio.Transport, DeflatingTransport(self._transport, count))
        self._inflating = InflatingBuffer(count)

    # -- SASL ----------------------------------------------------------------------------

    def _session_expired(self, header, now: float) -> bool:
        """Close, as Kafka does, a connection whose SASL session is over when it sends anything
        but the handshake that may begin its re-authentication."""
        session = self.info.session
        if session is None or not session.expired(now) or (
                header.api_key == ApiKey.SaslHandshake and session.may_renew(header.api_version, now)):
            return False
        log.info("closing connection from %s: its SASL session (%d ms) ended before %s v%d",
                 self.info.peer, session.lifetime_ms, ApiKey(header.api_key).name, header.api_version)
        self._transport.close()
        return True

    def _authentication_step(self, header, response) -> bool:
        """Tell the protocol machine how the handshake or token it paused on went."""
        if header is not None and header.api_key in (ApiKey.SaslHandshake, ApiKey.SaslAuthenticate) \
                and response.error_code != 0:
            self._failed_authentication()
            return False
        try:
            if self.info.mechanism is not None and self.info.mechanism.complete:
                self._protocol.authenticated()
            else:
                self._protocol.resume()
        except LocalProtocolError as exc:
            log.warning("closing connection from %s: %s", self.info.peer, exc)
            self._transport.close()
            return False
        self._process()
        return True

    def _failed_authentication(self) -> None:
        """Close as Kafka does after a failed login: after a delay that slows down guessing."""
        self._flush()
        self._transport.pause_reading()
        delay = self._broker.settings["connection.failed.authentication.delay.ms"] / 1000
        asyncio.get_running_loop().call_later(delay, self._transport.close)

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
        if self._admitted:
            self._flush()
            self._transport.close()

    async def drain(self) -> None:
        """Wait until every request received so far has been answered."""
        while self._unordered:
            await asyncio.wait(set(self._unordered))
        await self._pending.join()


def _counted_compressed(_direction: str, _size: int) -> None:
    """A compressed link's frames: its bytes are counted as they cross the wire, compressed."""


async def _after(turn: asyncio.Future, work):
    """``work`` once the writer reaches its answer, every earlier one done (see _AFTER_EARLIER)."""
    try:
        await turn
    except BaseException:
        work.close()
        raise
    return await work
