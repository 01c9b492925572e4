"""A worker's metadata store: the supervisor's embedded store, reached over a Unix socket.

The other end is :mod:`~kgate.metadata.stores.shared_server`. The connection is the
session: while it is open this process's ephemeral nodes stand; when it closes they are
gone, so a closed connection is reported as an expired session (the broker stops
acknowledging at once) and every later call fails with StoreUnavailable. There is no
coming back from it: the supervisor that served the store is gone, and takes its workers
with it.
"""
import asyncio
import itertools
import logging
from collections.abc import Callable

from ..store import BadVersion, MetadataStore, Node, NodeExists, NoNode, Session, StoreUnavailable
from .shared_wire import Field, FrameReader, Kind, Message, Status, WireError, encode

log = logging.getLogger(__name__)

_ERRORS: dict[int, type[Exception]] = {Status.NO_NODE: NoNode, Status.NODE_EXISTS: NodeExists,
                                       Status.BAD_VERSION: BadVersion, Status.FAILED: StoreUnavailable}
# A supervisor that does not answer within this is stopped or stuck: as ZooKeeper's calls, fail.
ANSWER_SECONDS = 20.0
READ_BYTES = 64 * 1024


class SharedMetadataStore(MetadataStore):
    def __init__(self, socket_path: str, session_timeout_ms: int):
        """The session ends with the connection (kill -9 included), or when the supervisor has
        heard nothing for ``session_timeout_ms``: heartbeats go every quarter of it."""
        self.socket_path = socket_path
        self.session_timeout = session_timeout_ms / 1000
        self._beating: asyncio.Task | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._watches: dict[int, Callable[[], None]] = {}
        self._session_callbacks: list[Callable[[Session], None]] = []
        self._writer: asyncio.StreamWriter | None = None
        self._reading: asyncio.Task | None = None
        self._closing = False

    async def connect(self) -> None:
        try:
            reader, self._writer = await asyncio.open_unix_connection(self.socket_path)
        except OSError as exc:
            raise StoreUnavailable(f"cannot reach the supervisor's metadata store at {self.socket_path}: {exc}") \
                from None
        self._reading = asyncio.create_task(self._read(reader))
        self._beating = asyncio.create_task(self._heartbeats())

    async def _heartbeats(self) -> None:
        """While the event loop runs, the supervisor hears from this process: a loop that stops
        (SIGSTOP, a hang) stops them, and the supervisor ends the session and replaces the worker."""
        while self._writer is not None:
            self._send(Kind.HEARTBEAT, 0)
            await asyncio.sleep(self.session_timeout / 4)

    async def _read(self, reader: asyncio.StreamReader) -> None:
        frames = FrameReader()
        try:
            while data := await reader.read(READ_BYTES):
                frames.receive(data)
                while (message := frames.next_message()) is not None:
                    self._dispatch(message)
        except WireError as exc:
            log.error("the supervisor's metadata store sent a malformed frame (%s)", exc)
        except ConnectionError:
            pass
        finally:
            self._lost()

    def _dispatch(self, message: Message) -> None:
        if message.kind is Kind.EVENT:
            callback = self._watches.get(message.ident)
            if callback is not None:
                asyncio.get_running_loop().call_soon(callback)
            return
        waiter = self._pending.pop(message.ident, None)
        if message.kind is not Kind.REPLY or not message.fields or not isinstance(message.fields[0], int):
            raise WireError(f"{message.kind.name} {message.fields[:1]} is not a reply")
        if waiter is not None and not waiter.done():
            waiter.set_result(message.fields)

    def _lost(self) -> None:
        if self._beating is not None:
            self._beating.cancel()
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
        for waiter in self._pending.values():
            if not waiter.done():
                waiter.set_exception(StoreUnavailable("the supervisor's metadata store closed the connection"))
        self._pending.clear()
        if not self._closing:
            log.error("lost the supervisor's metadata store at %s: the session and its claims are gone",
                      self.socket_path)
            for callback in self._session_callbacks:
                asyncio.get_running_loop().call_soon(callback, Session.EXPIRED)

    def _send(self, kind: Kind, ident: int, *fields: Field) -> None:
        if self._writer is None:
            raise StoreUnavailable(f"no connection to the supervisor's metadata store at {self.socket_path}")
        self._writer.write(encode(Message(kind, ident, fields)))

    async def _request(self, kind: Kind, *fields: Field) -> tuple[Field, ...]:
        ident = next(self._ids)
        self._send(kind, ident, *fields)
        waiter = self._pending[ident] = asyncio.get_running_loop().create_future()
        try:
            async with asyncio.timeout(ANSWER_SECONDS):
                status, *values = await waiter
        except TimeoutError:
            raise StoreUnavailable(f"the supervisor's metadata store did not answer within {ANSWER_SECONDS} s") \
                from None
        finally:
            self._pending.pop(ident, None)
        if status != Status.OK:
            raise _ERRORS.get(status, StoreUnavailable)(*values)
        return tuple(values)

    async def get(self, path: str) -> Node | None:
        values = await self._request(Kind.GET, path)
        if values[0] is None:
            return None
        data, version = values
        assert isinstance(data, bytes) and isinstance(version, int)
        return Node(data, version)

    async def create(self, path: str, data: bytes, ephemeral: bool = False, make_parents: bool = True) -> None:
        await self._request(Kind.CREATE, path, data, ephemeral, make_parents)

    async def set(self, path: str, data: bytes, version: int) -> int:
        (new_version,) = await self._request(Kind.SET, path, data, version)
        assert isinstance(new_version, int)
        return new_version

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        await self._request(Kind.DELETE, path, version, recursive)

    async def children(self, path: str) -> list[str]:
        (names,) = await self._request(Kind.CHILDREN, path)
        assert isinstance(names, tuple)
        return list(names)

    def watch(self, path: str, callback: Callable[[], None], children: bool = False) -> None:
        """Armed at the server before any later request of this connection is served; and, as
        the ZooKeeper store's watches do, fired once now: the read the callback makes comes
        after the arming, so a change between the caller's earlier read and the arming (another
        worker registering meanwhile, which a worker once never heard of) is not missed."""
        ident = next(self._ids)
        self._watches[ident] = callback
        self._send(Kind.WATCH, ident, path, children)
        asyncio.get_running_loop().call_soon(callback)

    def on_session(self, callback: Callable[[Session], None]) -> None:
        self._session_callbacks.append(callback)

    async def close(self) -> None:
        self._closing = True
        writer = self._writer
        if writer is not None:
            writer.close()
        if self._reading is not None:
            await self._reading
