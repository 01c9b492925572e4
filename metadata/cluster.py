"""Cluster state kept in the metadata store: topics, their configs, and id counters.

Node layout (the same under ZooKeeper, below the chroot):

    /topics/<name>                       {"id": uuid, "partitions": n, "configs": {...}}
    /managed-ledgers/<topic>/<partition> the partition's ledger chain (storage.managed_ledger)
    /counters/ledger-id                  next ledger id
    /counters/producer-id                next producer id block
"""
import json
import uuid
from dataclasses import dataclass, field

from .store import BadVersion, MetadataStore, NodeExists, NoNode

TOPICS = "/topics"


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)

    def encode(self) -> bytes:
        return json.dumps({"id": str(self.topic_id), "partitions": self.partitions,
                           "configs": self.configs}).encode()

    @classmethod
    def decode(cls, name: str, data: bytes) -> "Topic":
        state = json.loads(data)
        return cls(name, uuid.UUID(state["id"]), state["partitions"], state.get("configs", {}))


class TopicExists(Exception):
    pass


class UnknownTopic(Exception):
    pass


class NotAnIncrease(Exception):
    """A partition count no larger than the topic's (``args[0]``: its current count)."""


def ledger_list_path(topic: str, partition: int) -> str:
    return f"/managed-ledgers/{topic}/{partition}"


class ClusterState:
    def __init__(self, store: MetadataStore):
        self.store = store
        self.topics: dict[str, Topic] = {}

    async def load(self) -> None:
        self.topics = {}
        for name in await self.store.children(TOPICS):
            node = await self.store.get(f"{TOPICS}/{name}")
            if node is not None:
                self.topics[name] = Topic.decode(name, node.data)

    async def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> Topic:
        topic = Topic(name, uuid.uuid4(), partitions, dict(configs))
        try:
            await self.store.create(f"{TOPICS}/{name}", topic.encode())
        except NodeExists:
            raise TopicExists(name) from None
        self.topics[name] = topic
        return topic

    async def delete_topic(self, name: str) -> Topic:
        topic = self.topics.pop(name, None)
        try:
            await self.store.delete(f"{TOPICS}/{name}")
        except NoNode:
            if topic is None:
                raise UnknownTopic(name) from None
        return topic

    async def alter_topic_configs(self, name: str, configs: dict[str, str]) -> Topic:
        """Replace the topic's configs with ``configs``.

        Compare-and-set on the topic node, re-read on every lost race, so a concurrent
        writer's change to the rest of the node (its id, its partitions) is never
        overwritten with a stale copy.
        """
        def change(topic: Topic) -> None:
            topic.configs = dict(configs)

        return await self._update_topic(name, change)

    async def add_partitions(self, name: str, count: int) -> Topic:
        """Grow the topic to ``count`` partitions; raise NotAnIncrease if it has as many already.

        Compare-and-set on the topic node like :meth:`alter_topic_configs`: the count is
        checked against the node as it is when written, and its configs are kept.
        """
        def change(topic: Topic) -> None:
            if count <= topic.partitions:
                raise NotAnIncrease(topic.partitions)
            topic.partitions = count

        return await self._update_topic(name, change)

    async def _update_topic(self, name: str, change) -> Topic:
        """Apply ``change`` to the stored topic with compare-and-set, re-reading on every lost race."""
        path = f"{TOPICS}/{name}"
        while True:
            node = await self.store.get(path)
            if node is None:
                raise UnknownTopic(name)
            topic = Topic.decode(name, node.data)
            change(topic)
            try:
                await self.store.set(path, topic.encode(), node.version)
            except BadVersion:
                continue
            except NoNode:
                raise UnknownTopic(name) from None
            self.topics[name] = topic
            return topic

    async def allocate(self, counter: str, count: int = 1) -> int:
        """Reserve ``count`` consecutive ids from a cluster-wide counter; return the first."""
        path = f"/counters/{counter}"
        while True:
            node = await self.store.get(path)
            if node is None:
                try:
                    await self.store.create(path, str(count).encode())
                    return 0
                except NodeExists:
                    continue
            start = int(node.data)
            try:
                await self.store.set(path, str(start + count).encode(), node.version)
                return start
            except BadVersion:
                continue


_LEGAL = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
MAX_TOPIC_NAME = 249


def invalid_topic_name(name: str | None) -> str | None:
    """Why Kafka would refuse ``name`` as a topic name, or None if it is legal."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_TOPIC_NAME:
        return f"topic name is longer than {MAX_TOPIC_NAME} characters"
    if not set(name) <= _LEGAL:
        return f"topic name {name!r} has characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None
