"""Broker-to-broker requests over one pooled, pipelined connection per peer.

Zone-aware routing asks a partition's owner for its high watermark on every read
served elsewhere, so this is a hot path: one connection per peer, opened on first
use over the peer's PLAINTEXT listener, with requests written as they come and one
reader task matching answers to waiters by correlation id. The serving broker
answers a peer's requests as soon as each is ready, not in order (gateway/connection.py),
so a long poll parked on the link (a tail read's KgateReadEnd) holds up nothing sent
after it. A link that fails fails every request waiting on it and is opened again by
the next request.

A link that fails, or cannot be opened, marks its peer unreachable at that address until a
link to it opens again (:meth:`PeerLinks.reachable`). A broker killed or cut off stays
registered until its metadata session ends; zone routing asks this so as not to name such a
broker to its zone's clients meanwhile (a client told only of a dead broker has nowhere to
ask again).

With ``kgate.inter.broker.sasl.username`` set, a link goes to the peer's SASL_PLAINTEXT
listener when it has one and logs in there before its first request (gateway/sasl/login.py),
and again on the live link once most of the session the peer answered has passed (KIP-368:
the peer closes a link whose session ended), as Kafka brokers do with inter-broker SASL:
with an authorizer on, a peer then holds ClusterAction (a super user), which the internal
requests need. Otherwise, and towards peers with no SASL_PLAINTEXT listener, links use
PLAINTEXT. TLS links are not made.

Right after it opens (and logs in), a link asks the peer for its ApiVersions and keeps each
API's version range (:meth:`PeerLinks.version`), as Kafka's brokers do on their inter-broker
connections (NodeApiVersions), so that senders use the highest version both brokers serve: in
a rolling upgrade, a broker sends an older peer what it still serves. The link is handed to
senders only once that answer came: a request sent meanwhile waits for the link to open like
any other, and the requests waiting are written in the order they began to wait (they wait on
one future, whose callbacks run in order, and write without pausing again), so a producer's
order on the link is kept.

Every byte sent and received is counted by zone pair (``kgate_interbroker_bytes``),
so an operator sees what crossing zones costs; the serving side counts the same
connection from its end (gateway/connection.py knows it by its client id). A link to a
peer in another zone is compressed (``kgate.zone.link.deflate``, gateway/link_deflate.py),
and what is counted then is what crosses the wire.
"""
import asyncio
import importlib.metadata
import itertools
import logging
import struct
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from kafka.protocol.metadata import ApiVersionsRequest

from kgate.metadata.cluster import ClusterState
from kgate.protocol.api_versions import INTERNAL, KGATE_LINK_DEFLATE
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.messages import RESPONSES, KgateLinkDeflateRequest

from .config import Settings
from .link_deflate import CODEC, Deflater, InflatingReader
from .sasl.login import Login, LoginFailed
from .zones import broker_client_id

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")
CONNECT_TIMEOUT_S = 5.0
PROBE_TIMEOUT_S = 1.0  # a probe waits this long for a link to open before calling the peer unreachable
PROBE_RETRY_S = 1.0  # and tries an unreachable peer again no sooner than this
MAX_RESPONSE_BYTES = 64 << 20
# ApiVersions v3, which every kgate broker accepts (0 to 4), names this software to the peer.
API_VERSIONS_VERSION = 3
_VERSION = importlib.metadata.version("kgate-broker")
# Brokers from before links asked for versions do not list kgate's own APIs in their
# ApiVersions answer (they advertised them to no one); each serves version 0 of those.
UNLISTED = {api_key: (0, 0) for api_key in INTERNAL if api_key != KGATE_LINK_DEFLATE}

# A peer's version range per API key, from its ApiVersions answer.
PeerVersions = Mapping[int, tuple[int, int]]


def usable_version(versions: PeerVersions, api_key: int, highest_here: int) -> int | None:
    """The highest version of ``api_key``, at most ``highest_here``, that a peer that answered
    ``versions`` serves; None if there is none."""
    low, high = versions.get(api_key) or UNLISTED.get(api_key) or (0, -1)
    usable = min(high, highest_here)
    return usable if usable >= low else None


# count(direction, bytes): "out" sent, "in" received.
ByteCounter = Callable[[str, int], None]


class PeerUnavailable(ConnectionError):
    """The peer cannot be reached or the link to it failed before the answer came."""


class InterbrokerCounters(Protocol):
    def interbroker_counter(self, local_zone: str | None, peer_zone: str | None) -> ByteCounter: ...


class LinkingBroker(Protocol):
    """What links to peers need of this broker: its id and zone (its client id on a link
    says both), the live brokers' listeners and zones, the login settings, and where the
    bytes are counted."""

    node_id: int
    settings: Settings

    @property
    def cluster(self) -> ClusterState: ...

    @property
    def zone(self) -> str | None: ...

    @property
    def metrics(self) -> InterbrokerCounters: ...


# A link renews its login when this share of the session the peer gave has passed.
RENEW_AFTER = 0.8


def _renewal_time(lifetime_ms: int) -> float | None:
    return time.monotonic() + RENEW_AFTER * lifetime_ms / 1000 if lifetime_ms > 0 else None


class PeerLinks:
    def __init__(self, broker: LinkingBroker):
        self._broker = broker
        self._links: dict[int, Link] = {}
        settings = broker.settings
        username = settings["kgate.inter.broker.sasl.username"]
        self._login = Login(settings["kgate.inter.broker.sasl.mechanism"], username,
                            settings["kgate.inter.broker.sasl.password"]) if username else None
        self._unreachable: dict[int, tuple[tuple[str, int], float]] = {}  # node -> (its address, since when)
        self._deflate_across_zones = settings["kgate.zone.link.deflate"]

    @property
    def any_unreachable(self) -> bool:
        return bool(self._unreachable)

    def reachable(self, node_id: int) -> bool:
        """False while the last link to broker ``node_id``, at the address it is registered
        with now, failed or could not be opened; True for a peer never linked to."""
        down = self._unreachable.get(node_id)
        return down is None or down[0] != self._address(node_id)[0]

    async def probe(self, node_ids: Iterable[int]) -> None:
        """Open a link to each of these peers that has none, so :meth:`reachable` knows them;
        an open link costs nothing, and a peer found unreachable is tried again after a while."""
        await asyncio.gather(*(self._probe(node_id) for node_id in node_ids))

    async def _probe(self, node_id: int) -> None:
        down = self._unreachable.get(node_id)
        if down is not None and time.monotonic() - down[1] < PROBE_RETRY_S:
            return
        try:
            link = self._link(node_id)
            async with asyncio.timeout(PROBE_TIMEOUT_S):
                await asyncio.shield(link.opened())
        except TimeoutError:
            self._mark(node_id, link.address, False)  # still opening: unreachable until it opens
        except PeerUnavailable:
            pass  # the link marked it

    def _mark(self, node_id: int, address: tuple[str, int], up: bool) -> None:
        if up:
            self._unreachable.pop(node_id, None)
        elif self._address(node_id)[0] == address:
            self._unreachable[node_id] = (address, time.monotonic())

    async def opened(self, node_id: int) -> None:
        """Once the link to broker ``node_id`` is open and knows the peer's versions; raises
        PeerUnavailable if it cannot be opened. Returns at once (no pause) when it is open."""
        await self._link(node_id).opened()

    def version(self, node_id: int, api_key: int, highest_here: int) -> int | None:
        """The version of ``api_key`` to send broker ``node_id`` (the highest both serve, at most
        ``highest_here``); None while its link is not open or if the peer serves none of them."""
        link = self._links.get(node_id)
        if link is None or link.closed or link.versions is None:
            return None
        return usable_version(link.versions, api_key, highest_here)

    async def request(self, node_id: int, request, version: int, timeout: float):
        """Send ``request`` at ``version`` to broker ``node_id``; its decoded response.

        Raises PeerUnavailable when the peer is not live or the link fails, and
        TimeoutError when no answer comes within ``timeout`` seconds.
        """
        answer = await self.send(node_id, request, version)
        try:
            async with asyncio.timeout(timeout):
                return await answer
        finally:
            answer.cancel()  # nothing once answered; otherwise the answer is dropped when it comes

    async def send(self, node_id: int, request, version: int) -> asyncio.Future:
        """Write ``request`` to broker ``node_id``'s link; the future of its decoded response.

        Once the link is up this does not pause before writing, so requests sent one after
        the other by a task, or by tasks started in order, reach the peer in that order.
        """
        return await self._link(node_id).send(request, version)

    def _address(self, node_id: int) -> tuple[tuple[str, int] | None, Login | None]:
        """Where broker ``node_id`` takes this broker's links, and the login they need (None if
        none), or (None, None) when it is not live or has no listener for them."""
        info = self._broker.cluster.brokers.get(node_id)
        if info is None:
            return None, None
        if self._login is not None:
            address = info.address("SASL_PLAINTEXT")
            if address is not None:
                return address, self._login
        return info.address("PLAINTEXT"), None

    def _link(self, node_id: int) -> "Link":
        """The open (or opening) link to broker ``node_id``: a new one when it has none, or
        the one it had failed or went to an address the peer no longer has."""
        address, login = self._address(node_id)
        if address is None:
            raise PeerUnavailable(f"broker {node_id} is not live or has no PLAINTEXT or SASL_PLAINTEXT listener")
        link = self._links.get(node_id)
        if link is None or link.address != address or link.closed:
            if link is not None:
                link.close()
            broker = self._broker
            zone, peer_zone = broker.zone, broker.cluster.brokers[node_id].rack
            link = self._links[node_id] = Link(
                address, broker_client_id(broker.node_id, zone), broker.metrics.interbroker_counter(zone, peer_zone),
                login, lambda up: self._mark(node_id, address, up),
                deflate=self._deflate_across_zones and zone is not None and peer_zone not in (None, zone))
        return link

    def close(self) -> None:
        for link in self._links.values():
            link.close()
        self._links.clear()


class Link:
    def __init__(self, address: tuple[str, int], client_id: str, count: ByteCounter, login: Login | None = None,
                 on_state: Callable[[bool], None] = lambda up: None, deflate: bool = False):
        self.address = address
        self._deflate = deflate  # ask the peer to compress the link (gateway/link_deflate.py)
        self._deflater: Deflater | None = None  # once it does
        self._on_state = on_state  # on_state(True) once open, on_state(False) if it fails to open or breaks
        self._login = login  # proved before the first request, and again before each session the peer gives ends
        self._renew_at: float | None = None  # time.monotonic() when the login is renewed; None: never
        self._renewing: asyncio.Future | None = None
        self._client_id = client_id
        self._named = False  # whether a request on this link carried the client id yet
        self._count = count  # count(direction, bytes): "out" sent, "in" received
        self._correlation = itertools.count(1)
        self._waiting: dict[int, tuple[asyncio.Future, int, int]] = {}
        self._writer: asyncio.StreamWriter | None = None
        self._connecting: asyncio.Future | None = None
        self._reader_task: asyncio.Task | None = None
        self.versions: PeerVersions | None = None  # the peer's, once it answered ApiVersions
        self.closed = False

    async def opened(self) -> None:
        """Once the link is open (logged in, the peer's versions known); raises PeerUnavailable if it cannot be."""
        await self._connected()

    async def _connected(self) -> asyncio.StreamWriter:
        if self._writer is not None:
            return self._writer
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(self._connect())
        await asyncio.shield(self._connecting)
        assert self._writer is not None
        return self._writer

    async def _connect(self) -> None:
        where = f"{self.address[0]}:{self.address[1]}"
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                reader, writer = await asyncio.open_connection(*self.address)
        except (TimeoutError, OSError) as exc:
            self.close()
            self._on_state(False)
            raise PeerUnavailable(f"connecting to {where}: {exc!r}") from exc
        if self._login is not None:
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT_S):
                    lifetime = await self._login.on_stream(reader, writer, self._client_id)
                self._renew_at = _renewal_time(lifetime)
            except (TimeoutError, OSError, asyncio.IncompleteReadError) as exc:
                writer.close()
                self.close()
                if isinstance(exc, LoginFailed):
                    log.warning("cannot log in to the broker at %s: %s", where, exc)
                self._on_state(False)
                raise PeerUnavailable(f"logging in to {where}: {exc!r}") from exc
        self._reader_task = asyncio.create_task(self._read(reader))
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                self.versions = await self._ask_versions(writer)
            if self._deflate and usable_version(self.versions, KGATE_LINK_DEFLATE, 0) == 0:
                async with asyncio.timeout(CONNECT_TIMEOUT_S):
                    await self._ask_deflate(writer)
        except (TimeoutError, PeerUnavailable) as exc:
            writer.close()
            self.close()
            self._on_state(False)
            raise PeerUnavailable(f"asking {where} for its API versions and compression: {exc!r}") from exc
        self._writer = writer
        self._on_state(True)

    async def _ask_versions(self, writer: asyncio.StreamWriter) -> PeerVersions:
        """The peer's version range per API key (none listed if it refused to say: version 0 of kgate's own)."""
        answer = await self._write(writer, ApiVersionsRequest(client_software_name="kgate-broker",
                                                              client_software_version=_VERSION), API_VERSIONS_VERSION)
        if answer.error_code != ErrorCode.NONE:
            log.warning("the broker at %s:%d refused ApiVersions (error %d)", *self.address, answer.error_code)
            return {}
        return {key.api_key: (key.min_version, key.max_version) for key in answer.api_keys}

    async def _ask_deflate(self, writer: asyncio.StreamWriter) -> None:
        """Compress the link from the answer on, if the peer agrees (the reader switches at that answer)."""
        answer = await self._write(writer, KgateLinkDeflateRequest(codec=CODEC), 0)
        if answer.error_code == ErrorCode.NONE:
            self._deflater = Deflater()
        else:
            log.warning("the broker at %s:%d refused to compress the link (error %d)", *self.address,
                        answer.error_code)

    async def send(self, request, version: int) -> asyncio.Future:
        if self.closed:
            raise PeerUnavailable("link closed")
        writer = await self._connected()
        if self._renew_at is not None and time.monotonic() >= self._renew_at:
            # Sent after the session's end, a request would close the link: renew first (rarely: once a session).
            if self._renewing is None:
                self._renewing = asyncio.ensure_future(self._renew())
            await asyncio.shield(self._renewing)
            if self.closed:
                raise PeerUnavailable("link closed: its login could not be renewed")
        return self._write(writer, request, version)

    async def _renew(self) -> None:
        """Log in again on the live link (KIP-368); a link whose login fails is closed."""
        assert self._login is not None and self._writer is not None  # only logged-in links have sessions
        writer = self._writer

        async def call(request, version: int, _response_class):
            return await self._write(writer, request, version)
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                self._renew_at = _renewal_time(await self._login.over(call))
        except (TimeoutError, LoginFailed, PeerUnavailable) as exc:
            log.warning("cannot renew the login to the broker at %s:%d: %s", *self.address, exc)
            self.close(PeerUnavailable(f"renewing the login: {exc!r}"))
        finally:
            self._renewing = None

    def _write(self, writer: asyncio.StreamWriter, request, version: int) -> asyncio.Future:
        correlation_id = next(self._correlation)
        request.API_VERSION = version
        # The peer knows who is on the link from its first request (gateway/connection.py): later
        # ones leave the client id out, some 27 bytes each, a share of each small cross-zone request.
        request.with_header(correlation_id=correlation_id, client_id=None if self._named else self._client_id)
        self._named = True
        frame = request.encode(header=True, framed=True)
        if self._deflater is not None:
            frame = self._deflater.deflate((frame,))
        answer = asyncio.get_running_loop().create_future()
        self._waiting[correlation_id] = (answer, request.API_KEY, version)
        answer.add_done_callback(lambda _: self._waiting.pop(correlation_id, None))
        writer.write(frame)
        self._count("out", len(frame))
        return answer

    async def _read(self, reader: asyncio.StreamReader) -> None:
        failure: BaseException = PeerUnavailable("link closed")
        source: asyncio.StreamReader | InflatingReader = reader
        try:
            while True:
                size = _SIZE.unpack(await source.readexactly(_SIZE.size))[0]
                if not 0 < size <= MAX_RESPONSE_BYTES:
                    raise PeerUnavailable(f"a response of {size} bytes")
                payload = await source.readexactly(size)
                if source is reader:
                    self._count("in", _SIZE.size + size)  # compressed, the reader counts what arrives
                correlation_id = _CORRELATION.unpack_from(payload)[0]
                waiting = self._waiting.pop(correlation_id, None)
                if waiting is None:
                    continue  # its asker gave up (a long poll cut short): the answer is not needed
                answer, api_key, version = waiting
                response = RESPONSES[api_key].decode(payload, version=version, header=True)
                if api_key == KGATE_LINK_DEFLATE and response.error_code == ErrorCode.NONE:
                    source = InflatingReader(reader, self._count)  # what follows this answer is compressed
                if not answer.done():
                    answer.set_result(response)
        except asyncio.CancelledError:
            raise
        except (OSError, asyncio.IncompleteReadError, PeerUnavailable, zlib.error) as exc:
            failure = PeerUnavailable(f"link to {self.address[0]}:{self.address[1]} failed: {exc!r}")
            self._on_state(False)
        finally:
            self.close(failure)

    def close(self, failure: BaseException | None = None) -> None:
        self.closed = True
        for answer, _, _ in self._waiting.values():
            if not answer.done():
                answer.set_exception(failure or PeerUnavailable("link closed"))
        self._waiting.clear()
        if self._writer is not None:
            self._writer.close()
        if self._reader_task is not None and self._reader_task is not asyncio.current_task():
            self._reader_task.cancel()
