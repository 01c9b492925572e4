"""The metadata store interface: a tree of versioned nodes, like ZooKeeper's.

Everything above this layer (cluster state, ownership, the event manager) speaks
only this interface, so the embedded single-node store and ZooKeeper are
interchangeable. Writes are compare-and-set on a node's version.
"""
from abc import ABC, abstractmethod
from dataclasses import dataclass


class NodeExists(Exception):
    pass


class NoNode(Exception):
    pass


class BadVersion(Exception):
    """A compare-and-set lost: someone else wrote the node first."""


@dataclass(frozen=True, slots=True)
class Node:
    data: bytes
    version: int


class MetadataStore(ABC):
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

    async def close(self) -> None:
        pass
