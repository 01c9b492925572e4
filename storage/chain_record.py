"""Where a managed ledger keeps its chain: one versioned record, replaced by compare-and-set.

The record (the ledger list and the log start) is written before a new ledger gets
data, and two writers of one partition (a superseded owner and its successor) must
never both succeed: every write names the version it read, and loses with
``ChainConflict`` when the record moved. Storage defines this small contract and the
broker backs it with its metadata store (ZooKeeper, or the embedded one), so storage
depends on no metadata implementation and another coordination service could sit
under it.
"""
from typing import NamedTuple, Protocol


class ChainConflict(Exception):
    """The record is not at the version the writer read: someone else wrote it."""


class VersionedChain(NamedTuple):
    data: bytes
    version: int


class ChainRecord(Protocol):
    async def read(self) -> VersionedChain | None:
        """The record and its version; None when there is none yet."""

    async def create(self, data: bytes) -> int:
        """Write the first version (returned); ChainConflict if one exists."""

    async def replace(self, data: bytes, version: int) -> int:
        """Write over ``version``, returning the new one; ChainConflict if it moved on."""

    async def delete(self, version: int | None = None) -> None:
        """Remove the record (at ``version``, or whatever it is); gone already is fine,
        a newer version than ``version`` is ChainConflict."""
