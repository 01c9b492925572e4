"""Dynamic broker configs in the metadata store, shared by every broker of the cluster.

As Kafka keeps them: each broker's own (``kafka-configs --entity-type brokers
--entity-name ID``) and the cluster-wide default (``--entity-default``), a node each,
written by compare-and-set. After every write a change node is bumped; each broker
watches it and reads its two nodes again, so a change reaches every broker, and a
broker (re)starting reads them before it serves.

    /configs/brokers/<default>     {"name": "value", ...}: the cluster-wide default
    /configs/brokers/<id>          {"name": "value", ...}: broker <id>'s own
    /config-changes/brokers        bumped after every write
"""
import json
from collections.abc import Callable

from .store import MetadataStore, touch, update_node

CONFIGS = "/configs/brokers"
CHANGES = "/config-changes/brokers"
# The cluster-wide default's entity, as Kafka named it in ZooKeeper.
DEFAULT_ENTITY = "<default>"


class BrokerConfigStore:
    def __init__(self, store: MetadataStore):
        self._store = store

    def watch(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` after any broker (or tool) changes any broker's configs."""
        self._store.watch(CHANGES, callback)

    async def load(self, entity: str) -> dict[str, str]:
        """The configs set for ``entity`` (a broker id, or DEFAULT_ENTITY)."""
        node = await self._store.get(f"{CONFIGS}/{entity}")
        return json.loads(node.data) if node is not None else {}

    async def update(self, entity: str, change: Callable[[dict[str, str]], dict[str, str]]) -> None:
        """Replace ``entity``'s configs with ``change(them)``, then tell every broker."""
        def changed(data: bytes | None) -> bytes | None:
            configs = change(json.loads(data) if data is not None else {})
            return json.dumps(configs, sort_keys=True).encode() if configs else None
        await update_node(self._store, f"{CONFIGS}/{entity}", changed)
        await touch(self._store, CHANGES)
