"""The metadata store over a ZooKeeper ensemble, through kazoo.

kazoo runs its own I/O thread; every call here uses its asynchronous API and hands the
result back to the event loop, so the broker's loop never blocks on ZooKeeper. Watch
and session callbacks arrive on kazoo's thread and are re-scheduled onto the loop.

The ensemble address is ``HOST:PORT[,HOST:PORT...][/CHROOT]``; the chroot node is
created on first use, so one ensemble can hold several kgate clusters.

kazoo makes a new session by itself after one expires, but when its connection loop ends
(an exception escaped it) the client is closed for good. The store then makes a new
client, arms its watches again and reports the session expired and then connected, as
after any expiry: the broker gives up what it held and registers again.
"""
import asyncio
import logging
from collections.abc import Callable
from functools import partial

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KeeperState
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from ..store import BadVersion, MetadataStore, Node, NodeExists, NoNode, Session, StoreUnavailable

log = logging.getLogger(__name__)

_UNAVAILABLE = (ConnectionLoss, ConnectionClosedError, SessionExpiredError, OperationTimeoutError, KazooTimeoutError)
_SESSIONS = {KazooState.CONNECTED: Session.CONNECTED, KazooState.SUSPENDED: Session.SUSPENDED,
             KazooState.LOST: Session.EXPIRED}
FIRST_RETRY_SECONDS = 0.5
MAX_RETRY_SECONDS = 10.0
STOP_WAIT_SECONDS = 10.0
"""How long a stopping client's connection thread may take to end (kazoo's own stop() waits as long)."""


def split_address(address: str) -> tuple[str, str]:
    """``HOST:PORT,...[/CHROOT]`` -> (hosts, chroot or "")."""
    hosts, slash, chroot = address.partition("/")
    return hosts, ("/" + chroot.strip("/")) if slash and chroot.strip("/") else ""


class ZooKeeperMetadataStore(MetadataStore):
    def __init__(self, address: str, session_timeout_ms: int):
        self.address = address
        self._hosts, self._chroot = split_address(address)
        self.session_timeout = session_timeout_ms / 1000
        self._client: KazooClient | None = None
        self._loop: asyncio.AbstractEventLoop  # connect()'s, before kazoo can call back
        self._session_callbacks: list[Callable[[Session], None]] = []
        self._watches: list[tuple[str, Callable[[], None], bool]] = []  # armed again on a new client
        self._watchers: list = []
        self._closed = False
        self._replacing: asyncio.Task | None = None

    async def connect(self, retry: bool = True) -> None:
        """Connect, retrying with backoff for as long as the ensemble cannot be reached.

        A broker started before its ZooKeeper waits for it and says so on every attempt;
        a command (``retry`` false) gives up with StoreUnavailable at the first failure.
        """
        self._loop = asyncio.get_running_loop()
        delay = FIRST_RETRY_SECONDS
        while True:
            client = KazooClient(hosts=self._hosts, timeout=self.session_timeout,
                                 connection_retry={"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 1})
            try:
                await self._loop.run_in_executor(None, self._start, client)
                break
            except _UNAVAILABLE as exc:  # no session in time, or it was lost while making the chroot
                await self._loop.run_in_executor(None, _stop, client)
                if not retry:
                    raise StoreUnavailable(f"cannot reach ZooKeeper at {self.address}") from None
                log.error("cannot reach ZooKeeper at %s; retrying in %.1f s (%s)",
                          self.address, delay, type(exc).__name__)
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_RETRY_SECONDS)
        self._client = client
        client.add_listener(partial(self._session_changed, client))
        log.info("connected to ZooKeeper at %s (session timeout %.1f s)", self.address, self.session_timeout)

    def _start(self, client: KazooClient) -> None:
        client.start(timeout=max(2.0, self.session_timeout / 2))
        if self._chroot:
            client.ensure_path(self._chroot)
            client.chroot = self._chroot

    def _session_changed(self, client: KazooClient, state) -> None:
        ended = state is KazooState.LOST and client.client_state == KeeperState.CLOSED
        if client is not self._client:
            return  # a client already replaced, or closed by close()
        self._report(_SESSIONS[state])
        if ended:
            self._loop.call_soon_threadsafe(self._replace_soon, client)

    def _report(self, session: Session) -> None:
        for callback in self._session_callbacks:
            self._loop.call_soon_threadsafe(callback, session)

    def _replace_soon(self, stopped: KazooClient) -> None:
        if stopped is self._client and not self._closed and self._replacing is None:
            self._replacing = asyncio.create_task(self._replace(stopped))

    async def _replace(self, stopped: KazooClient) -> None:
        """A new client for one whose connection loop ended (closed, not expired).

        Until the new client holds every watch again the store is unavailable; a session
        lost while arming them (a busy ensemble) means another new client, never a store
        left without one.
        """
        log.error("ZooKeeper client at %s stopped on its own (its connection loop ended): making a new one",
                  self.address)
        self._client = None
        await self._loop.run_in_executor(None, _stop, stopped)
        delay = FIRST_RETRY_SECONDS
        while not self._closed:
            await self.connect()
            try:
                await self._loop.run_in_executor(None, self._arm_all)
                break
            except _UNAVAILABLE as exc:
                log.error("ZooKeeper at %s: lost the new client's session while arming watches (%s); "
                          "making another in %.1f s", self.address, type(exc).__name__, delay)
                client, self._client = self._client, None
                await self._loop.run_in_executor(None, _stop, client)
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_RETRY_SECONDS)
        self._replacing = None
        if self._closed:
            await self.close()
            return
        self._report(Session.CONNECTED)

    def _arm_all(self) -> None:
        """Every watch on the current client; each fires once now, so whatever changed meanwhile is read."""
        self._watchers = []
        for path, callback, children in self._watches:
            self._arm(path, callback, children)

    def on_session(self, callback: Callable[[Session], None]) -> None:
        self._session_callbacks.append(callback)

    async def _call(self, async_result):
        """Await a kazoo IAsyncResult on the event loop."""
        future = self._loop.create_future()

        def done(result):
            self._loop.call_soon_threadsafe(_settle, future, result)

        async_result.rawlink(done)
        try:
            # kazoo holds a request made while disconnected until it reconnects: bound the wait
            # so nothing (the event manager least of all) hangs on a ZooKeeper that is gone.
            async with asyncio.timeout(self.session_timeout):
                return await future
        except _UNAVAILABLE as exc:
            raise StoreUnavailable(f"ZooKeeper at {self.address}: {type(exc).__name__}") from None
        except TimeoutError:
            raise StoreUnavailable(f"ZooKeeper at {self.address}: no answer within {self.session_timeout} s") \
                from None

    def _kazoo(self) -> KazooClient:
        """The client, there from connect() to close(): a call outside them is our bug, not the ensemble's."""
        client = self._client
        if client is None and self._replacing is not None:
            raise StoreUnavailable(f"ZooKeeper at {self.address}: making a new client")
        if client is None:
            raise RuntimeError(f"ZooKeeper store {self.address} used before connect() or after close()")
        return client

    async def get(self, path: str) -> Node | None:
        try:
            client = self._kazoo()
            data, stat = await self._call(client.get_async(path))
        except NoNodeError:
            return None
        session = client.client_id
        return Node(data, stat.version, held_here=bool(stat.ephemeralOwner) and session is not None
                    and stat.ephemeralOwner == session[0])

    async def create(self, path: str, data: bytes, ephemeral: bool = False, make_parents: bool = True) -> None:
        try:
            await self._call(self._kazoo().create_async(path, data, ephemeral=ephemeral, makepath=make_parents))
        except NodeExistsError:
            raise NodeExists(path) from None
        except NoNodeError:
            raise NoNode(path) from None

    async def set(self, path: str, data: bytes, version: int) -> int:
        try:
            stat = await self._call(self._kazoo().set_async(path, data, version))
        except BadVersionError:
            raise BadVersion(f"{path} is not at version {version}") from None
        except NoNodeError:
            raise NoNode(path) from None
        return stat.version

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        if recursive:
            for child in await self.children(path):
                await self.delete(f"{path.rstrip('/')}/{child}", recursive=True)
        try:
            await self._call(self._kazoo().delete_async(path, version))
        except NoNodeError:
            raise NoNode(path) from None
        except BadVersionError:
            raise BadVersion(f"{path} is not at version {version}") from None
        except NotEmptyError:
            raise NodeExists(f"{path} has children") from None

    async def children(self, path: str) -> list[str]:
        try:
            return sorted(await self._call(self._kazoo().get_children_async(path)))
        except NoNodeError:
            return []

    def watch(self, path: str, callback: Callable[[], None], children: bool = False) -> None:
        self._watches.append((path, callback, children))
        self._arm(path, callback, children)

    def _arm(self, path: str, callback: Callable[[], None], children: bool) -> None:
        def fired(*_args):
            self._loop.call_soon_threadsafe(callback)
            return True  # keep watching

        client = self._kazoo()
        if children:
            # A children watch needs its node; kazoo re-arms both kinds after a new session.
            client.ensure_path(path)
            self._watchers.append(ChildrenWatch(client, path, fired))
        else:
            self._watchers.append(DataWatch(client, path, fired))

    async def close(self) -> None:
        self._closed = True
        client, self._client = self._client, None
        if client is not None:
            await self._loop.run_in_executor(None, _stop, client)


def _settle(future: asyncio.Future, result) -> None:
    if future.done():
        return
    try:
        future.set_result(result.get_nowait())
    except Exception as exc:  # noqa: BLE001 - handed to the awaiting coroutine as it is
        future.set_exception(exc)


def _stop(client: KazooClient) -> None:
    """Stop a client and free its sockets.

    kazoo reports a session closed before its connection thread has ended, and stop() returns
    at once when another thread stopped the client first; its sockets can be freed only once
    that thread ends, so wait for it (kazoo has no public call for this).
    """
    client.stop()
    client._connection.stop(STOP_WAIT_SECONDS)
    client.close()
