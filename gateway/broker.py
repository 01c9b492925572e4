"""The broker's state: metadata, storage, and the partitions it serves.

Handlers reach everything through this object; it owns topic lifecycle (create,
delete, open on start) and the periodic retention sweep.
"""
import asyncio
import dataclasses
import logging
import os
import uuid
from typing import Callable

from metadata.cluster import ClusterState, Topic, TopicExists, UnknownTopic, ledger_list_path
from metadata.store import MetadataStore, NodeExists
from storage import entry_formats
from storage.entry_formats import EntryFormat
from storage.ledger import LedgerStore
from storage.managed_ledger import ManagedLedger, RetentionPolicy, RolloverPolicy

from .config import TOPIC_CONFIG_DEFAULTS, Settings
from .groups import OFFSETS_TOPIC, GroupCoordinator
from .metrics import BrokerMetrics
from .partition import Partition
from .sasl import CredentialStore
from .sasl.login_limiter import LoginLimiter

log = logging.getLogger(__name__)

PRODUCER_ID_BLOCK = 1000


class InternalTopic(Exception):
    """Clients may neither delete nor reconfigure the internal offsets topic.

    The group coordinator relies on the configs it created it with (no retention, the
    ``kafka`` entry format it replays).
    """


class Broker:
    def __init__(self, settings: Settings, metadata: MetadataStore, ledgers: LedgerStore):
        self.settings = settings
        self.node_id = settings["broker.id"]
        self.metadata = metadata
        self.ledgers = ledgers
        self.cluster = ClusterState(metadata)
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.connections: set = set()
        self.cluster_id = ""
        self._producer_ids = iter(())
        self._retention_task: asyncio.Task | None = None
        self._topic_lock = asyncio.Lock()
        self.groups = GroupCoordinator(self)
        self.credentials = CredentialStore(metadata)
        self.sasl_mechanisms = [m.strip() for m in settings["sasl.enabled.mechanisms"].split(",")]
        self.login_limiter = LoginLimiter(settings["kgate.sasl.max.failed.logins.per.minute"])
        self.metrics = BrokerMetrics(self)

    async def start(self) -> None:
        self.cluster_id = await self._cluster_id()
        await self.cluster.load()
        for topic in list(self.cluster.topics.values()):
            await self._open_partitions(topic)
        await self.groups.start()
        self._retention_task = asyncio.create_task(self._retention_loop())
        log.info("broker %d serving %d topics, %d partitions", self.node_id,
                 len(self.cluster.topics), len(self.partitions))

    async def _cluster_id(self) -> str:
        node = await self.metadata.get("/cluster/id")
        if node is None:
            try:
                await self.metadata.create("/cluster/id", str(uuid.uuid4()).encode())
            except NodeExists:
                pass
            node = await self.metadata.get("/cluster/id")
        return node.data.decode()

    async def close(self) -> None:
        if self._retention_task is not None:
            self._retention_task.cancel()
        await self.groups.close()
        for partition in self.partitions.values():
            await partition.ledger.close()
        self.ledgers.close()
        await self.metadata.close()

    def advertised_address(self, connection) -> tuple[str, int]:
        """Where clients should connect: ``advertised.listeners``, else the listener they used."""
        advertised = self.settings["advertised.listeners"]
        if advertised:
            host, _, port = advertised.rpartition(":")
            return host, int(port)
        return connection.listener_host, connection.listener_port

    # -- topics -------------------------------------------------------------------------

    def topic_config(self, topic: Topic, name: str) -> str:
        return topic.configs.get(name) or self.topic_config_default(name)

    def topic_config_default(self, name: str) -> str:
        broker_key = TOPIC_CONFIG_DEFAULTS[name]
        return str(self.settings[broker_key]) if broker_key else "delete"

    @staticmethod
    def topic_config_names():
        return TOPIC_CONFIG_DEFAULTS.keys()

    def entry_format(self, topic: Topic) -> EntryFormat:
        return entry_formats.by_name(self.topic_config(topic, "kgate.entry.format"))

    async def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> Topic:
        async with self._topic_lock:
            if name in self.cluster.topics:
                raise TopicExists(name)
            topic = await self.cluster.create_topic(name, partitions, configs)
            await self._open_partitions(topic)
            log.info("created topic %s with %d partitions", name, partitions)
            return topic

    async def delete_topic(self, name: str) -> Topic:
        async with self._topic_lock:
            topic = self._client_topic(name)
            await self.cluster.delete_topic(name)
            for index in range(topic.partitions):
                partition = self.partitions.pop((name, index), None)
                if partition is not None:
                    await partition.ledger.delete()
            log.info("deleted topic %s", name)
        # Outside the topic lock: the offsets topic's own appends need no topic changes.
        await self.groups.forget_topic(name)
        return topic

    async def alter_topic_configs(self, name: str, change: Callable[[dict[str, str]], dict[str, str]],
                                  validate_only: bool = False) -> Topic:
        """Replace a topic's configs with ``change(its current configs)``; return the topic.

        ``change`` runs under the topic lock on the configs as they are then, so two
        incremental alterations racing each other both land; it raises ConfigError to
        refuse. ``validate_only`` returns the topic as it would be and changes nothing.
        The ledgers' rollover and retention change at once; the entry format,
        compression and message size limit need nothing, as produce reads them from
        ``cluster.topics`` on every request.
        """
        async with self._topic_lock:
            topic = self._client_topic(name)
            configs = change(dict(topic.configs))
            if validate_only:
                return dataclasses.replace(topic, configs=configs)
            topic = await self.cluster.alter_topic_configs(name, configs)
            for index in range(topic.partitions):
                partition = self.partitions.get((name, index))
                if partition is not None:
                    partition.ledger.rollover, partition.ledger.retention = self._ledger_policies(topic)
            log.info("altered configs of topic %s: %s", name, configs)
            return topic

    async def create_partitions(self, name: str, count: int, check: Callable[[Topic], None],
                                validate_only: bool = False) -> Topic:
        """Grow a topic to ``count`` partitions; return the topic as it is (or would be) then.

        ``check(topic)`` runs under the topic lock on the topic as it is then and raises
        to refuse. The new partitions' ledgers are opened before the count is stored and
        published in the same step as it, so Metadata, produce and the group coordinator
        never see a partition count without its partitions.
        """
        async with self._topic_lock:
            topic = self._client_topic(name)
            check(topic)
            grown = dataclasses.replace(topic, partitions=count)
            if validate_only:
                return grown
            opened = []
            try:
                for index in range(topic.partitions, count):
                    opened.append(await self._open_partition(grown, index))
                grown = await self.cluster.add_partitions(name, count)
            except Exception:
                for partition in opened:
                    await partition.ledger.delete()
                raise
            for partition in opened:
                self.partitions[(name, partition.index)] = partition
            log.info("topic %s grown from %d to %d partitions", name, topic.partitions, count)
            return grown

    def _client_topic(self, name: str) -> Topic:
        """The topic a client may delete, reconfigure or grow: it exists and is not internal."""
        topic = self.cluster.topics.get(name)
        if topic is None:
            raise UnknownTopic(name)
        if self.is_internal(name):
            raise InternalTopic(name)
        return topic

    def _ledger_policies(self, topic: Topic) -> tuple[RolloverPolicy, RetentionPolicy]:
        def value(name):
            return int(self.topic_config(topic, name))
        return (RolloverPolicy(value("segment.bytes"), value("segment.ms")),
                RetentionPolicy(value("retention.ms"), value("retention.bytes")))

    async def _open_partitions(self, topic: Topic) -> None:
        for index in range(topic.partitions):
            self.partitions[(topic.name, index)] = await self._open_partition(topic, index)

    async def _open_partition(self, topic: Topic, index: int) -> Partition:
        rollover, retention = self._ledger_policies(topic)
        ledger = ManagedLedger(
            f"{topic.name}-{index}", self.ledgers, self.metadata, ledger_list_path(topic.name, index),
            lambda: self.cluster.allocate("ledger-id"), rollover=rollover, retention=retention)
        partition = Partition(topic.name, index, ledger)
        await partition.open()
        return partition

    @staticmethod
    def is_internal(name: str) -> bool:
        return name == OFFSETS_TOPIC

    def topic_by_id(self, topic_id: uuid.UUID) -> Topic | None:
        for topic in self.cluster.topics.values():
            if topic.topic_id == topic_id:
                return topic
        return None

    # -- producer ids and retention ------------------------------------------------------

    async def next_producer_id(self) -> int:
        producer_id = next(self._producer_ids, None)
        if producer_id is None:
            start = await self.cluster.allocate("producer-id", PRODUCER_ID_BLOCK)
            self._producer_ids = iter(range(start, start + PRODUCER_ID_BLOCK))
            producer_id = next(self._producer_ids)
        return producer_id

    async def _retention_loop(self) -> None:
        interval = self.settings["log.retention.check.interval.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            for partition in list(self.partitions.values()):
                try:
                    await partition.ledger.enforce_retention()
                except Exception:
                    log.exception("retention of %s failed", partition.ledger.name)


def open_embedded(settings: Settings) -> Broker:
    """The single-node default: SQLite metadata and the file ledger store under data_dir."""
    from metadata.stores.embedded import EmbeddedMetadataStore
    from storage.stores.file_store import FileLedgerStore

    os.makedirs(settings.data_dir, exist_ok=True)
    metadata = EmbeddedMetadataStore(os.path.join(settings.data_dir, "metadata.sqlite"))
    ledgers = FileLedgerStore(os.path.join(settings.data_dir, "ledgers"))
    return Broker(settings, metadata, ledgers)
