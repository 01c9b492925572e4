"""The metadata store interface: a tree of versioned nodes, like ZooKeeper's.

Everything above this layer (cluster state, ownership, the event manager) speaks
only this interface, so the embedded single-node store and ZooKeeper are
interchangeable. Writes are compare-and-set on a node's version.
"""
import enum
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass


class NodeExists(Exception):
    pass


class NoNode(Exception):
    pass


class BadVersion(Exception):
    """A compare-and-set lost: someone else wrote the node first."""


class StoreUnavailable(Exception):
    """The store cannot be reached now (connection lost); the caller may retry later."""


class Session(enum.Enum):
    """The state of this process's session with the store, which owns its ephemeral nodes.

    SUSPENDED: the connection is lost but the session may live on, so ephemeral claims
    may still stand or may be about to vanish: make no promise that depends on them.
    EXPIRED: the session is gone with every ephemeral node it held; a new session has
    none of them, so whatever they guarded must be claimed again.
    """
    CONNECTED = "connected"
    SUSPENDED = "suspended"
    EXPIRED = "expired"


@dataclass(frozen=True, slots=True)
class Node:
    data: bytes
    version: int
    # An ephemeral node this process's current session holds: one its own create made even when
    # the create's answer was lost (a store that cannot tell says False).
    held_here: bool = False


class MetadataStore(ABC):
    # Seconds after which the store ends a silent process's session and its ephemeral nodes.
    session_timeout: float = 0.0

    @abstractmethod
    async def get(self, path: str) -> Node | None: ...

    @abstractmethod
    async def create(self, path: str, data: bytes, ephemeral: bool = False, make_parents: bool = True) -> None:
        """Create ``path``; :class:`NodeExists` if it is there already."""

    @abstractmethod
    async def set(self, path: str, data: bytes, version: int) -> int:
        """Replace the data if the node is at ``version`` (-1: any); return the new version."""

    @abstractmethod
    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None: ...

    @abstractmethod
    async def children(self, path: str) -> list[str]:
        """Names of the direct children of ``path`` (empty when it has none or is absent)."""

    @abstractmethod
    def watch(self, path: str, callback: Callable[[], None], children: bool = False) -> None:
        """Call ``callback`` on the event loop after the node at ``path`` changes (created,
        set, deleted) or, with ``children``, after the set of its children changes.

        Watches last as long as the store and only say "look again": several changes may
        fire one call, so callers re-read the state rather than trust an event's content.
        """

    def on_session(self, callback: Callable[[Session], None]) -> None:  # noqa: B027 (an optional hook)
        """Call ``callback`` on the event loop when the session changes state (see Session).

        A store whose session cannot be lost (the embedded one) never calls it.
        """

    async def close(self) -> None:  # noqa: B027 (an optional hook)
        pass


async def update_node(store: MetadataStore, path: str, change: Callable[[bytes | None], bytes | None]) -> None:
    """Replace the node's data with ``change(its data)`` (None for an absent node; None back:
    delete it, or leave it absent) by compare-and-set, trying again when another writer wins."""
    while True:
        node = await store.get(path)
        wanted = change(node.data if node is not None else None)
        try:
            if node is None:
                if wanted is not None:
                    await store.create(path, wanted)
            elif wanted is not None:
                await store.set(path, wanted, node.version)
            else:
                await store.delete(path, node.version)
            return
        except (BadVersion, NodeExists, NoNode):
            continue


async def put(store: MetadataStore, path: str, data: bytes, ephemeral: bool = False) -> None:
    """Write the node whatever its version, creating it if need be (``ephemeral``: in this
    process's current session)."""
    try:
        await store.set(path, data, -1)
    except NoNode:
        try:
            await store.create(path, data, ephemeral=ephemeral)
        except NodeExists:
            await store.set(path, data, -1)


async def touch(store: MetadataStore, path: str) -> None:
    """Write the node (creating it if need be), so every watch on it fires: a change notice."""
    await put(store, path, b"")
