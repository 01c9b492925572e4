"""Cluster state kept in the metadata store: brokers, topics, ownership claims, counters.

Node layout (the same under ZooKeeper, below the chroot):

    /cluster/id                              the cluster id clients see
    /brokers/ids/<id>                        ephemeral: {"listeners": {protocol: "host:port"}, "rack": r}
    /topics/<name>                           {"id": uuid, "partitions": n, "configs": {...}}
    /owners/<topic>/<partition>              ephemeral claim: {"broker": id}
    /serving/<id>                            ephemeral: the partitions the broker opened, with their
                                             leader epochs (metadata.serving)
    /leader-epochs/<topic id>/<partition>    [[epoch, start offset], ...] (Kafka's leader epoch cache)
    /managed-ledgers/<topic id>/<partition>  the partition's ledger chain (storage.managed_ledger)
    /counters/ledger-id                      next ledger id
    /counters/producer-id                    next producer id block
    /counters/broker-id                      next derived broker id
    /placements                              placement overrides (metadata.placements)
    /loads/<id>                              ephemeral: the broker's load report (metadata.load_reports)

Ledger chains and epochs are keyed by topic id, not name: a topic deleted and created
again under the same name never meets its predecessor's ledgers, whichever broker
cleans those up and whenever it does.
"""
import asyncio
import json
import uuid
from dataclasses import dataclass, field

from . import placements
from .store import BadVersion, MetadataStore, NodeExists, NoNode

TOPICS = "/topics"
CLUSTER_ID = "/cluster/id"


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


LEDGER_LISTS = "/managed-ledgers"
LEADER_EPOCHS = "/leader-epochs"
BROKERS = "/brokers/ids"
OWNERS = "/owners"
# Epochs kept per partition: enough for any client's truncation check, bounded across
# years of hand-overs (Kafka's cache drops epochs below the log start instead).
MAX_EPOCHS = 100


def ledger_list_path(topic: Topic, partition: int) -> str:
    return f"{LEDGER_LISTS}/{topic.topic_id.hex}/{partition}"


def owner_path(topic: str, partition: int) -> str:
    return f"{OWNERS}/{topic}/{partition}"


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    listeners: dict[str, str]  # security protocol -> advertised "host:port"
    rack: str | None = None

    def encode(self) -> bytes:
        return json.dumps({"listeners": self.listeners, "rack": self.rack}).encode()

    @classmethod
    def decode(cls, node_id: int, data: bytes) -> "BrokerInfo":
        state = json.loads(data)
        return cls(node_id, state["listeners"], state.get("rack"))

    def address(self, protocol: str) -> tuple[str, int] | None:
        """Where clients of ``protocol`` reach this broker, or None if it has no such listener."""
        found = self.listeners.get(protocol)
        if found is None:
            return None
        host, _, port = found.rpartition(":")
        return host, int(port)


class DuplicateBroker(Exception):
    """Another live broker is registered under this broker's id."""


class ClusterState:
    """This broker's view of the cluster, refreshed from the store by the event manager."""

    def __init__(self, store: MetadataStore):
        self.store = store
        self.topics: dict[str, Topic] = {}
        self.brokers: dict[int, BrokerInfo] = {}
        self.placements: placements.Overrides = {}

    async def cluster_id(self, create: bool) -> str | None:
        """The cluster's id; a store without one holds no kgate cluster (yet): None,
        unless ``create``, which makes the store one (the first broker does)."""
        node = await self.store.get(CLUSTER_ID)
        if node is None and create:
            try:
                await self.store.create(CLUSTER_ID, str(uuid.uuid4()).encode())
            except NodeExists:
                pass
            node = await self.store.get(CLUSTER_ID)
        return node.data.decode() if node is not None else None

    async def load(self) -> None:
        self.topics = await self.read_topics()
        self.brokers = await self.read_brokers()
        self.placements = await placements.read(self.store)

    async def read_topics(self) -> dict[str, Topic]:
        topics = {}
        for name in await self.store.children(TOPICS):
            node = await self.store.get(f"{TOPICS}/{name}")
            if node is not None:
                topics[name] = Topic.decode(name, node.data)
        return topics

    async def read_brokers(self) -> dict[int, BrokerInfo]:
        brokers = {}
        for name in await self.store.children(BROKERS):
            node = await self.store.get(f"{BROKERS}/{name}")
            if node is not None:
                brokers[int(name)] = BrokerInfo.decode(int(name), node.data)
        return brokers

    # -- brokers ------------------------------------------------------------------------

    async def register(self, me: BrokerInfo, wait_seconds: float) -> None:
        """Create this broker's ephemeral node.

        A node already there may be this broker's own from before a crash, which goes
        when that session times out, so it is waited for up to ``wait_seconds``; a node
        that outlives that wait belongs to another live broker with the same id. One held
        by this broker's current session is its registration already: an earlier create
        that reached the store though its answer did not (fault run seed 12: a broker
        refused its own registration for minutes after its session came back).
        """
        path = f"{BROKERS}/{me.node_id}"
        deadline = asyncio.get_running_loop().time() + wait_seconds
        while True:
            try:
                await self.store.create(path, me.encode(), ephemeral=True)
                return
            except NodeExists:
                node = await self.store.get(path)
                if node is not None and node.held_here and node.data == me.encode():
                    return
                if asyncio.get_running_loop().time() >= deadline:
                    holder = BrokerInfo.decode(me.node_id, node.data).listeners if node else {}
                    raise DuplicateBroker(f"broker id {me.node_id} is already registered by a live broker "
                                          f"({', '.join(holder.values()) or 'unknown address'})") from None
                await asyncio.sleep(0.5)

    # -- ownership ------------------------------------------------------------------------

    async def claim(self, topic: Topic, partition: int, broker_id: int) -> bool:
        """Take the ephemeral claim on a partition; False while another broker holds it."""
        path = owner_path(topic.name, partition)
        try:
            await self.store.create(path, json.dumps({"broker": broker_id}).encode(), ephemeral=True)
            return True
        except NodeExists:
            node = await self.store.get(path)
            return node is not None and json.loads(node.data)["broker"] == broker_id

    async def claim_holder(self, topic: str, partition: int) -> int | None:
        """The broker holding the partition's claim, None when none does."""
        node = await self.store.get(owner_path(topic, partition))
        return json.loads(node.data)["broker"] if node is not None else None

    async def new_epoch(self, topic: Topic, partition: int, start_offset: int) -> list[list[int]]:
        """Open the next leader epoch of a partition at ``start_offset``; return the epoch
        history ``[[epoch, start offset], ...]`` with it last (Kafka's leader epoch cache)."""
        path = f"{LEADER_EPOCHS}/{topic.topic_id.hex}/{partition}"
        while True:
            node = await self.store.get(path)
            history = json.loads(node.data) if node else []
            history.append([history[-1][0] + 1 if history else 0, start_offset])
            history = history[-MAX_EPOCHS:]
            data = json.dumps(history).encode()
            try:
                if node is None:
                    await self.store.create(path, data)
                else:
                    await self.store.set(path, data, node.version)
                return history
            except (NodeExists, BadVersion):
                continue

    async def release(self, topic: str, partition: int, broker_id: int) -> None:
        """Give up a claim this broker holds (a no-op if it holds none)."""
        path = owner_path(topic, partition)
        node = await self.store.get(path)
        if node is not None and json.loads(node.data)["broker"] == broker_id:
            try:
                await self.store.delete(path, node.version)
            except (NoNode, BadVersion):
                pass

    async def claimed(self, topic: str) -> set[int]:
        """Partitions of ``topic`` some broker holds a claim on."""
        return {int(name) for name in await self.store.children(f"{OWNERS}/{topic}")}

    async def orphans(self) -> dict[str, list[str]]:
        """Ledger-list paths of topic ids no topic has any more, by topic id.

        What they name may be deleted from any broker at any time: ids are never
        reused, so nothing a live topic uses is touched.

        Order matters: the ledger lists are listed *before* the topics are read. A topic's
        ledger list is made by its owner after the topic's node, so every id listed belonged
        to a topic made before the read began; if the read does not find it, it was deleted.
        (The other way round, a topic made between the two reads, its first ledger already
        listed, looked deleted, and what it had stored was destroyed.)
        """
        listed = await self.store.children(LEDGER_LISTS)
        live = {topic.topic_id.hex for topic in (await self.read_topics()).values()}
        return {topic_id: [f"{LEDGER_LISTS}/{topic_id}/{p}"
                           for p in await self.store.children(f"{LEDGER_LISTS}/{topic_id}")]
                for topic_id in listed if topic_id not in live}

    async def ledger_lists(self) -> list[bytes]:
        """Every managed ledger's chain record, deleted topics' included until they are swept."""
        paths = [f"{LEDGER_LISTS}/{topic_id}/{p}" for topic_id in await self.store.children(LEDGER_LISTS)
                 for p in await self.store.children(f"{LEDGER_LISTS}/{topic_id}")]
        nodes = await asyncio.gather(*(self.store.get(path) for path in paths))
        return [node.data for node in nodes if node is not None]

    async def forget_topic_id(self, topic_id: str) -> None:
        """Remove what is left of a deleted topic's id (its emptied ledger lists, its epochs)."""
        for root in (LEDGER_LISTS, LEADER_EPOCHS):
            try:
                await self.store.delete(f"{root}/{topic_id}", recursive=True)
            except NoNode:
                pass

    async def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> Topic:
        topic = Topic(name, uuid.uuid4(), partitions, dict(configs))
        try:
            await self.store.create(f"{TOPICS}/{name}", topic.encode())
        except NodeExists:
            raise TopicExists(name) from None
        self.topics[name] = topic
        return topic

    async def delete_topic(self, name: str) -> Topic | None:
        """The topic as this process knew it: None when it did not, though the node existed and is deleted."""
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
