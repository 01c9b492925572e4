"""Dynamic configs in the metadata store, shared by every broker of the cluster: broker
configs (each broker's own and the cluster-wide default) and group configs, as Kafka keeps
them (``kafka-configs --entity-type brokers|groups``).

An entity's configs are one node, written by compare-and-set. After every write the
kind's change node is bumped; each broker watches it and reads the kind's nodes again, so
a change reaches every broker, and a broker (re)starting reads them before it serves.

    /configs/brokers/<default>     {"name": "value", ...}: the cluster-wide default
    /configs/brokers/<id>          {"name": "value", ...}: broker <id>'s own
    /configs/groups/<quoted id>    {"name": "value", ...}: one group's
    /config-changes/<kind>         bumped after every write of that kind
"""
import json
from collections.abc import Callable
from urllib.parse import quote, unquote

from .store import MetadataStore, touch, update_node

BROKER_KIND, GROUP_KIND = "brokers", "groups"
# The cluster-wide default's entity, as Kafka named it in ZooKeeper.
DEFAULT_ENTITY = "<default>"


class DynamicConfigStore:
    def __init__(self, store: MetadataStore, kind: str):
        self._store = store
        self._configs = f"/configs/{kind}"
        self._changes = f"/config-changes/{kind}"

    def _path(self, entity: str) -> str:
        return f"{self._configs}/{quote(entity, safe='<>')}"

    def watch(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` after any broker (or tool) changes configs of this kind."""
        self._store.watch(self._changes, callback)

    async def load(self, entity: str) -> dict[str, str]:
        """The configs set for ``entity``."""
        node = await self._store.get(self._path(entity))
        return json.loads(node.data) if node is not None else {}

    async def load_all(self) -> dict[str, dict[str, str]]:
        """Every entity with configs set, and its configs."""
        found = {}
        for quoted in await self._store.children(self._configs):
            configs = await self.load(unquote(quoted))
            if configs:
                found[unquote(quoted)] = configs
        return found

    async def update(self, entity: str, change: Callable[[dict[str, str]], dict[str, str]]) -> None:
        """Replace ``entity``'s configs with ``change(them)``, then tell every broker."""
        def changed(data: bytes | None) -> bytes | None:
            configs = change(json.loads(data) if data is not None else {})
            return json.dumps(configs, sort_keys=True).encode() if configs else None
        await update_node(self._store, self._path(entity), changed)
        await touch(self._store, self._changes)
