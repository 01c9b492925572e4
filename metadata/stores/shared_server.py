"""The embedded store served to the other processes of one host over a Unix socket.

``kgate serve --workers N`` runs N brokers on one host without a ZooKeeper: the supervisor
holds the SQLite store and serves it here, and each worker reaches it through
:class:`~kgate.metadata.stores.shared.SharedMetadataStore`. A connection is a session, as
in ZooKeeper: the ephemeral nodes a worker created (its registration, its partition claims)
go the moment its connection closes, which the kernel does for a process killed with
kill -9, so the others take its partitions at once. Requests of one connection are handled
in the order they came, so a watch asked for before a read is armed before that read.
A session the server hears nothing from (not even a heartbeat) for its timeout is ended
too, and the process at the other end is named to ``on_expired`` (by its PID, from the
socket's peer credentials) so the supervisor can replace it: a worker whose event loop
stopped must not come back believing it still holds what it claimed.
"""
import asyncio
import itertools
import logging
import os
import socket
import sqlite3
import struct
from collections import defaultdict
from collections.abc import Callable
from functools import partial

from ..store import BadVersion, NodeExists, NoNode
from .embedded import OWN_SESSION, PERSISTENT, EmbeddedMetadataStore
from .shared_wire import FrameReader, Kind, Message, Status, WireError, encode, fields_of

log = logging.getLogger(__name__)

_STATUSES = ((NoNode, Status.NO_NODE), (NodeExists, Status.NODE_EXISTS), (BadVersion, Status.BAD_VERSION),
             (sqlite3.Error, Status.FAILED))
READ_BYTES = 64 * 1024


_PEER_CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid


def peer_pid(writer: asyncio.StreamWriter) -> int:
    sock = writer.get_extra_info("socket")
    return _PEER_CREDENTIALS.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                    _PEER_CREDENTIALS.size))[0]


class StoreServer:
    def __init__(self, store: EmbeddedMetadataStore, socket_path: str, session_timeout: float,
                 on_expired: Callable[[int], None] = lambda pid: None):
        self._store = store
        self.socket_path = socket_path
        self.session_timeout = session_timeout
        self._on_expired = on_expired
        self._sessions = itertools.count(OWN_SESSION + 1)
        # (path, children) -> the connections watching it, each with its watch ids.
        self._watchers: dict[tuple[str, bool], dict[asyncio.StreamWriter, list[int]]] = {}
        self._server: asyncio.AbstractServer | None = None
        self._connections: dict[asyncio.StreamWriter, asyncio.Task] = {}
        self._closed = False
        # Requests of every session in arrival order, and a session's end (message None) after them.
        self._queue: list[tuple[int, asyncio.StreamWriter, Message | None]] = []
        self._queued = asyncio.Event()
        self._committing: asyncio.Task | None = None

    async def start(self) -> None:
        self._committing = asyncio.create_task(self._commit_loop())
        self._server = await asyncio.start_unix_server(self._serve, self.socket_path)
        os.chmod(self.socket_path, 0o600)

    async def close(self) -> None:
        self._closed = True
        if self._server is not None:
            self._server.close()
        for writer in list(self._connections):
            writer.close()  # its reader sees the end of the stream and ends the session
        await asyncio.gather(*self._connections.values(), return_exceptions=True)
        self._queued.set()
        if self._committing is not None:
            await self._committing  # the sessions' ends, and whatever came before them

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._closed:  # accepted just before close(), started after it
            writer.close()
            return
        session = next(self._sessions)
        task = asyncio.current_task()
        assert task is not None
        self._connections[writer] = task
        frames = FrameReader()
        try:
            while data := await self._heard(session, reader, writer):
                frames.receive(data)
                while (message := frames.next_message()) is not None:
                    self._take(session, writer, message)
        except WireError as exc:
            log.error("metadata session %d sent a malformed frame (%s): closing it", session, exc)
        except ConnectionError:
            pass
        finally:
            del self._connections[writer]
            for watching in self._watchers.values():
                watching.pop(writer, None)
            self._enqueue(session, writer, None)
            writer.close()

    async def _heard(self, session: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
        """The next bytes of a session, or none when it ended: closed, or silent past its timeout."""
        try:
            async with asyncio.timeout(self.session_timeout):
                return await reader.read(READ_BYTES)
        except TimeoutError:
            pid = peer_pid(writer)
            log.error("metadata session %d (pid %d) silent for %.1f s: ending it and its claims", session, pid,
                      self.session_timeout)
            self._on_expired(pid)
            return b""

    def _take(self, session: int, writer: asyncio.StreamWriter, message: Message) -> None:
        """Check a request; a watch is armed at once (no earlier than asked: an event too many
        at worst), the rest wait for the next group commit."""
        fields = fields_of(message)
        if message.kind is Kind.WATCH:
            path, children = fields
            assert isinstance(path, str)
            self._watch(writer, message.ident, path, bool(children))
        elif message.kind is not Kind.HEARTBEAT:
            self._enqueue(session, writer, message)

    def _enqueue(self, session: int, writer: asyncio.StreamWriter, message: Message | None) -> None:
        self._queue.append((session, writer, message))
        self._queued.set()

    async def _commit_loop(self) -> None:
        """Everything queued since the last commit, in one transaction (one fsync), answered once
        it is durable: the workers' writes wait for each other's fsync instead of queueing behind
        one each."""
        while not (self._closed and not self._queue and not self._connections):
            await self._queued.wait()
            self._queued.clear()
            batch, self._queue = self._queue, []
            if batch:
                for writer, reply in await self._commit(batch):
                    if not writer.is_closing():
                        writer.write(encode(reply))

    async def _commit(self, batch: list[tuple[int, asyncio.StreamWriter, Message | None]]) \
            -> list[tuple[asyncio.StreamWriter, Message]]:
        replies = []
        try:
            # The embedded store's calls never suspend, so no other task runs inside the transaction.
            with self._store.group_commit():
                for session, writer, message in batch:
                    if message is None:
                        self._store.end_session(session)
                    else:
                        replies.append((writer, await self._handle(session, message)))
        except sqlite3.Error as exc:
            log.error("metadata commit of %d requests failed (%s): all refused", len(batch), exc)
            return [(writer, Message(Kind.REPLY, message.ident, (int(Status.FAILED), str(exc))))
                    for _, writer, message in batch if message is not None]
        return replies

    async def _handle(self, session: int, message: Message) -> Message:
        path, *rest = message.fields
        assert isinstance(path, str)
        try:
            values = await self._act(session, message.kind, path, rest)
        except tuple(error for error, _ in _STATUSES) as exc:
            status = next(status for error, status in _STATUSES if isinstance(exc, error))
            return Message(Kind.REPLY, message.ident, (int(status), str(exc)))
        return Message(Kind.REPLY, message.ident, (int(Status.OK), *values))

    async def _act(self, session: int, kind: Kind, path: str, rest: list) -> tuple:
        store = self._store
        match kind:
            case Kind.GET:
                node = await store.get(path)
                return (None,) if node is None else (node.data, node.version)
            case Kind.CREATE:
                data, ephemeral, make_parents = rest
                store.create_in(session if ephemeral else PERSISTENT, path, data, make_parents)
                return ()
            case Kind.SET:
                return (await store.set(path, rest[0], rest[1]),)
            case Kind.DELETE:
                await store.delete(path, rest[0], rest[1])
                return ()
            case _:
                return (tuple(await store.children(path)),)

    def _watch(self, writer: asyncio.StreamWriter, ident: int, path: str, children: bool) -> None:
        key = (path, children)
        if key not in self._watchers:
            self._watchers[key] = defaultdict(list)
            self._store.watch(path, partial(self._fire, key), children)
        self._watchers[key][writer].append(ident)

    def _fire(self, key: tuple[str, bool]) -> None:
        for writer, idents in self._watchers[key].items():
            if not writer.is_closing():
                writer.write(b"".join(encode(Message(Kind.EVENT, ident)) for ident in idents))
