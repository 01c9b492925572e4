"""Managed ledgers' chain records (storage.chain_record) kept in the metadata store:
one node per partition (metadata.cluster says where), its compare-and-set on the
node's version, so a superseded owner's write fails as the contract says."""
from kgate.metadata.cluster import ClusterState
from kgate.metadata.store import BadVersion, MetadataStore, NodeExists, NoNode
from kgate.storage.chain_record import ChainConflict, VersionedChain
from kgate.storage.managed_ledger import ManagedLedger


async def live_ledger_ids(cluster: ClusterState) -> set[int]:
    """Every ledger some chain record lists: what a store's garbage collection must keep."""
    return {ledger_id for chain in await cluster.ledger_lists() for ledger_id in ManagedLedger.ledger_ids(chain)}


class MetadataChainRecord:
    def __init__(self, store: MetadataStore, path: str):
        self._store = store
        self._path = path

    async def read(self) -> VersionedChain | None:
        node = await self._store.get(self._path)
        return None if node is None else VersionedChain(node.data, node.version)

    async def create(self, data: bytes) -> int:
        try:
            await self._store.create(self._path, data)
        except NodeExists:
            raise ChainConflict(f"{self._path} exists already") from None
        return 0  # a node's first version, in ZooKeeper and the embedded store alike

    async def replace(self, data: bytes, version: int) -> int:
        try:
            return await self._store.set(self._path, data, version)
        except (BadVersion, NoNode) as exc:
            raise ChainConflict(f"{self._path} is no longer at version {version}") from exc

    async def delete(self, version: int | None = None) -> None:
        try:
            await self._store.delete(self._path, -1 if version is None else version)
        except NoNode:
            pass
        except BadVersion as exc:
            raise ChainConflict(f"{self._path} is no longer at version {version}") from exc
