"""The broker's state: metadata, storage, and the partitions it serves.

Handlers reach everything through this object; it owns topic lifecycle (create,
delete, alter, grow), follows the cluster through the metadata event manager, and
runs the periodic retention sweep. Which partitions it serves is up to ownership
(gateway.ownership); a single node with the embedded store is a cluster of one.
"""
import asyncio
import dataclasses
import logging
import os
import uuid
from collections.abc import Callable, Iterator, Mapping
from functools import partial

from kgate.metadata import placements
from kgate.metadata.acls import AclStore
from kgate.metadata.balance_plan import Move
from kgate.metadata.cluster import (
    BROKERS,
    OWNERS,
    TOPICS,
    BrokerInfo,
    ClusterState,
    Topic,
    TopicExists,
    UnknownTopic,
    ledger_list_path,
)
from kgate.metadata.dynamic_configs import BROKER_KIND, GROUP_KIND, DynamicConfigStore
from kgate.metadata.events import Event, EventManager
from kgate.metadata.store import MetadataStore, StoreUnavailable
from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError
from kgate.storage import entry_formats
from kgate.storage.entry_formats import EntryFormat
from kgate.storage.ledger import CorruptLedger, LedgerStore, TailUnreachable
from kgate.storage.managed_ledger import DamagedEntry, ManagedLedger, RetentionPolicy, RolloverPolicy
from kgate.storage.store_capabilities import Housekeeping, Instrumented, Staging

from . import topic_configs
from .authorizer import Authorizer
from .balancer import Balancer
from .broker_configs import BrokerConfigs
from .chain_records import MetadataChainRecord, live_ledger_ids
from .config import SHARED_METADATA, Settings, is_compacted
from .connection_limits import ConnectionLimits, parse_overrides
from .coordinator import LedgerPartitionWriter, WallClock
from .coordinator.internal_topics import INTERNAL_TOPIC_CONFIGS
from .epoch_book import EpochBook
from .fetch_sessions import FetchSessionCache
from .followers import Followers
from .group_configs import GroupConfigs
from .groups import OFFSETS_TOPIC, GroupCoordinator
from .handlers.broker_view import InternalTopic
from .log_cleaner import LogCleaner
from .metrics import BrokerMetrics
from .ownership import Ownership
from .partition import Partition
from .peer_links import PeerLinks
from .request_budget import RequestBytesBudget
from .response_budget import ResponseBytesBudget
from .sasl import CredentialStore
from .sasl.login_limiter import LoginLimiter
from .shares.coordinator import SHARE_STATE_TOPIC, ShareCoordinator
from .shares.departures import ShareDepartures
from .shares.leader import ShareLeaders
from .shares.persister import SharePersister
from .shares.sessions import ShareSessionCache
from .transactions import TRANSACTION_STATE_TOPIC, TransactionCoordinator
from .transactions.marker_writer import BrokerMarkerWriter
from .zones import zone_broker

log = logging.getLogger(__name__)

PRODUCER_ID_BLOCK = 1000
# Derived broker ids start here, clear of the small ids operators configure (as Kafka's 1000).
DERIVED_BROKER_IDS = 1000
# The embedded metadata store's file in a data directory.
EMBEDDED_STORE_FILE = "metadata.sqlite"




class Broker:
    def __init__(self, settings: Settings, metadata: MetadataStore, ledgers: LedgerStore):
        self.settings = settings
        self.node_id = settings["broker.id"]
        self.metadata = metadata
        self.ledgers = ledgers
        self.cluster = ClusterState(metadata)
        self.partitions: dict[tuple[str, int], Partition] = {}
        # Partitions this broker owns but cannot serve because their ledgers are damaged:
        # each answers KAFKA_STORAGE_ERROR until the ledger is repaired and the broker restarted.
        self.offline: dict[tuple[str, int], str] = {}
        # Of those, partitions damaged from an offset on, still read below it (damaged_partition).
        self.damaged: dict[tuple[str, int], tuple[Partition, int]] = {}
        self.connections: set = set()
        self.connection_limits = ConnectionLimits(settings["max.connections"], settings["max.connections.per.ip"],
                                                  parse_overrides(settings["max.connections.per.ip.overrides"]))
        self.request_bytes = RequestBytesBudget(settings["queued.max.request.bytes"])
        self.response_bytes = ResponseBytesBudget(settings["kgate.queued.max.response.bytes"],
                                                  settings["kgate.queued.max.response.bytes.per.connection"])
        self.cluster_id = ""
        self._producer_ids: Iterator[int] = iter(())
        self._retention_task: asyncio.Task | None = None
        self._collection_task: asyncio.Task | None = None
        self._compaction_task: asyncio.Task | None = None
        self._topic_lock = asyncio.Lock()
        self.clock = WallClock()
        self.group_configs = GroupConfigs(settings, DynamicConfigStore(metadata, GROUP_KIND))
        self.groups = GroupCoordinator(settings, self, LedgerPartitionWriter(OFFSETS_TOPIC, self.partitions),
                                       self.clock, self._topic_sizes, self.is_internal, self.group_configs.configured,
                                       self._share_member_gone)
        self.markers = BrokerMarkerWriter(self.node_id, self.partitions, lambda: self.cluster.topics, self.leader,
                                          lambda: self.peers, self.clock, self.groups.transaction_ended)
        self.transactions = TransactionCoordinator(
            settings, self, LedgerPartitionWriter(TRANSACTION_STATE_TOPIC, self.partitions), self.clock,
            self.markers, self.next_producer_id)
        self.shares = ShareCoordinator(settings, self, LedgerPartitionWriter(SHARE_STATE_TOPIC, self.partitions),
                                       self.clock)
        self.share_persister = SharePersister(self.shares, self.node_id, lambda: self.peers, self.clock)
        self.share_leaders = ShareLeaders(self.share_persister, self.clock, self.group_configs.share_config)
        self.share_sessions = ShareSessionCache(settings["group.share.max.share.sessions"])
        self.share_departures = ShareDepartures(self.node_id, self.shares, self.share_sessions, self.share_leaders,
                                                lambda: list(self.cluster.brokers), lambda: self.peers)
        self.log_cleaner = LogCleaner(self)
        self.fetch_sessions = FetchSessionCache(settings["max.incremental.fetch.session.cache.slots"])
        self.credentials = CredentialStore(metadata)
        self.sasl_mechanisms = [m.strip() for m in settings["sasl.enabled.mechanisms"].split(",")]
        self.login_limiter = LoginLimiter(settings["kgate.sasl.max.failed.logins.per.minute"],
                                          settings["kgate.sasl.max.failed.logins.per.address.per.minute"],
                                          settings["kgate.sasl.max.failed.logins.per.user.per.minute"])
        self.metrics: BrokerMetrics = BrokerMetrics(self)
        if isinstance(ledgers, Instrumented):
            for collector in ledgers.collectors():
                self.metrics.registry.register(collector)
        self.authorizer = Authorizer(settings, AclStore(metadata), self.metrics.denied)
        self.broker_configs = BrokerConfigs(settings, DynamicConfigStore(metadata, BROKER_KIND), self.node_id,
                                            self._settings_changed)
        self.events = EventManager(observe=self.metrics.metadata_event)
        self.ownership = Ownership(self)
        self.epoch_book = EpochBook(metadata, self.node_id)
        self.balancer = Balancer(self)
        self.peers: PeerLinks = PeerLinks(self)
        self.followers = Followers(self, settings["kgate.zone.read.end.interval.ms"] / 1000)
        # How long a restarted broker waits for its previous session's registration to go.
        self.registration_wait: float = metadata.session_timeout + 2
        self._watched: set[str] = set()

    def me(self) -> BrokerInfo:
        """This broker as other brokers list it: its advertised address per security protocol."""
        listeners: dict[str, str] = {}
        for listener in self.settings.listeners:
            listeners.setdefault(listener.security_protocol, f"{listener.host}:{listener.port}")
        if self.settings["advertised.listeners"]:
            listeners["PLAINTEXT"] = self.settings["advertised.listeners"]
        return BrokerInfo(self.node_id, listeners, self.settings["broker.rack"] or None)

    async def start(self) -> None:
        """Join the cluster: register, load its state, claim this broker's share, follow changes.

        Listeners are bound (their ports known) but not yet accepting when this runs.
        """
        cluster_id = await self.cluster.cluster_id(create=True)
        assert cluster_id is not None  # made above when missing, and nothing deletes it
        self.cluster_id = cluster_id
        events, store = self.events, self.metadata
        for event, handler in ((Event.BROKERS, self._brokers_changed), (Event.TOPICS, self._topics_changed),
                               (Event.TOPIC, self._topic_changed), (Event.OWNERS, self._owners_changed),
                               (Event.PLACEMENTS, self._placements_changed),
                               (Event.SESSION, self.ownership.session_changed), (Event.ACLS, self.authorizer.reload),
                               (Event.BROKER_CONFIGS, self.broker_configs.reload),
                               (Event.GROUP_CONFIGS, self.group_configs.reload),
                               (Event.SERVING, self.epoch_book.refresh)):
            events.on(event, handler)
        store.on_session(self._session_reported)
        await self.cluster.register(self.me(), self.registration_wait)
        leftovers = self.ledgers.unstage_all(f"{self.node_id}-") if isinstance(self.ledgers, Staging) else 0
        if leftovers:
            log.info("deleted %d record sets staged for other brokers before a restart", leftovers)
        await self.cluster.load()
        await self.authorizer.start(events.poster(Event.ACLS))
        await self.broker_configs.start(events.poster(Event.BROKER_CONFIGS))
        await self.group_configs.start(events.poster(Event.GROUP_CONFIGS))
        store.watch(TOPICS, events.poster(Event.TOPICS), children=True)
        store.watch(placements.PLACEMENTS, events.poster(Event.PLACEMENTS))
        self.epoch_book.follow(self.cluster.brokers, events)
        for topic in self.cluster.topics.values():
            self._watch_topic(topic.name)
        await self.groups.start()
        await self.transactions.start()
        async with self._topic_lock:
            await self.ownership.reconcile_all()
        # Armed after the first reconcile: a watch fires once when armed, which would look like a
        # newer broker list and leave that reconcile's openings to it (ownership._gain_all). A
        # change since the list was loaded is read by the event that first firing posts.
        store.watch(BROKERS, events.poster(Event.BROKERS), children=True)
        await self._sweep()
        events.start()
        self._retention_task = asyncio.create_task(self._retention_loop())
        self.log_cleaner.start()
        self.balancer.start()
        if isinstance(self.ledgers, Housekeeping):
            self._collection_task = asyncio.create_task(self._periodically(
                "kgate.s3.gc.interval.ms", partial(self._collect_garbage, self.ledgers), "object garbage collection"))
            # Each broker compacts what it holds: its own partitions' sealed ledgers.
            self._compaction_task = asyncio.create_task(
                self._periodically("kgate.s3.compaction.interval.ms", self.ledgers.compact_round, "compaction"))
        log.info("broker %d of %d live: serving %d of %d topics' partitions", self.node_id,
                 len(self.cluster.brokers), len(self.partitions),
                 sum(t.partitions for t in self.cluster.topics.values()))

    def _session_reported(self, session) -> None:
        self.ownership.session_reported(session)
        self.events.post(Event.SESSION, session)

    def _watch_topic(self, name: str) -> None:
        if name not in self._watched:
            self._watched.add(name)
            self.metadata.watch(f"{TOPICS}/{name}", self.events.poster(Event.TOPIC, name))
            self.metadata.watch(f"{OWNERS}/{name}", self.events.poster(Event.OWNERS, name), children=True)

    async def close(self) -> None:
        """Hand everything over cleanly: seal each ledger, give up its claim, leave the cluster."""
        for task in (self._retention_task, self._collection_task, self._compaction_task):
            if task is not None:
                task.cancel()
        await self.log_cleaner.close()
        await self.balancer.close()
        await self.events.close()
        await self.groups.close()
        await self.transactions.close()
        self.share_leaders.close()
        self.share_departures.close()
        await self.shares.close()
        await self.followers.close()
        self.peers.close()
        serving = list(self.partitions)
        failed = [f"{name}-{index}" for name, index in serving if not await self.ownership.lose(name, index, seal=True)]
        log.info("sealed and handed over %d partitions", len(serving) - len(failed))
        if failed:
            log.error("the hand-over of %d partitions (%s) could not be written (the warnings above say why); "
                      "nothing acknowledged is lost: their next owner's recovery seals their ledgers",
                      len(failed), ", ".join(failed[:5]) + (", ..." if len(failed) > 5 else ""))
        self.ledgers.close()
        self.epoch_book.close()  # its node goes with the session
        await self.metadata.close()

    # -- following the cluster (metadata events) ---------------------------------------------

    async def _brokers_changed(self, _key) -> None:
        self.cluster.brokers = await self.cluster.read_brokers()
        log.info("live brokers: %s", sorted(self.cluster.brokers))
        self.epoch_book.follow(self.cluster.brokers, self.events)
        async with self._topic_lock:
            await self.ownership.reconcile_all()
        await self._sweep()

    async def _placements_changed(self, _key) -> None:
        """A reassignment or the balancer placed partitions: hand over or take what moved."""
        self.cluster.placements = await placements.read(self.metadata)
        async with self._topic_lock:
            await self.ownership.reconcile_all()

    async def _topics_changed(self, _key) -> None:
        """Topics created or deleted by any broker or by hand in the store.

        The store is read under the topic lock: a topic this broker creates meanwhile (under
        the lock too) is then either in the read or not yet known here. Read outside it, a
        topic created between the read and the comparison looked deleted: it was dropped,
        served again a moment later, and a consumer that had just joined for it read nothing.
        """
        async with self._topic_lock:
            current = await self.cluster.read_topics()
            gone = [known for name, known in self.cluster.topics.items()
                    if name not in current or current[name].topic_id != known.topic_id]
            for known in gone:
                await self._stop_serving(known)
            for name, topic in current.items():
                if name not in self.cluster.topics:
                    await self._topic_added(topic)
        for known in gone:
            await self._forget(known)

    async def _topic_changed(self, name: str) -> None:
        """One topic's node changed: its partition count or configs (a deletion is TOPICS').

        Read under the topic lock, as the topic list is: read before a change this broker
        makes meanwhile, the node's older version would be applied after it (a topic just
        grown described with its old partition count until the next event)."""
        async with self._topic_lock:
            node = await self.metadata.get(f"{TOPICS}/{name}")
            known = self.cluster.topics.get(name)
            if node is None or known is None:
                return
            topic = Topic.decode(name, node.data)
            if topic.topic_id != known.topic_id:
                return
            self.cluster.topics[name] = topic
            self._apply_policies(topic)
            await self.ownership.reconcile(topic)

    async def _owners_changed(self, name: str) -> None:
        """A claim on one of the topic's partitions was released: take it if it is ours now."""
        topic = self.cluster.topics.get(name)
        if topic is not None:
            async with self._topic_lock:
                await self.ownership.reconcile(topic)

    async def _topic_added(self, topic: Topic) -> None:
        self.cluster.topics[topic.name] = topic
        self._watch_topic(topic.name)
        await self.ownership.reconcile(topic)

    async def _topic_deleted(self, topic: Topic) -> None:
        """Whatever path deleted it: stop serving it and forget it, here and in every group."""
        async with self._topic_lock:
            await self._stop_serving(topic)
        await self._forget(topic)

    async def _stop_serving(self, topic: Topic) -> None:
        """A deleted topic's part under the topic lock."""
        known = self.cluster.topics.get(topic.name)
        if known is not None and known.topic_id == topic.topic_id:
            del self.cluster.topics[topic.name]
        for index in range(topic.partitions):
            await self.ownership.lose(topic.name, index, seal=False)

    async def _forget(self, topic: Topic) -> None:
        """A deleted topic's part outside the topic lock: the offsets topic's own appends need
        no topic changes."""
        await self.groups.forget_topic(topic.name)
        await self._sweep()
        log.info("topic %s deleted", topic.name)

    async def _sweep(self) -> None:
        """Delete deleted topics' ledgers and placement overrides (a topic created again under the
        name starts from the hash); one broker does it, the live one with the lowest id."""
        if self.cluster.brokers and min(self.cluster.brokers) != self.node_id:
            return
        for topic_id, paths in (await self.cluster.orphans()).items():
            for path in paths:
                await ManagedLedger.destroy(self.ledgers, MetadataChainRecord(self.metadata, path))
            await self.cluster.forget_topic_id(topic_id)
        if self.cluster.placements:
            # Placed before the topics are read, as the orphans are listed: an override made
            # for a topic created after the read is not taken for a deleted topic's.
            placed = set(await placements.read(self.metadata))
            existing = await self.cluster.read_topics()

            def forget_deleted(overrides: placements.Overrides) -> None:
                for name in [name for name in overrides if name in placed and name not in existing]:
                    del overrides[name]
            await placements.change(self.metadata, forget_deleted)

    def live_brokers(self, connection) -> dict[int, tuple[str, int, str | None]]:
        """Every live broker, by id, with the (host, port, rack) clients of this connection's
        listener use: this broker's is where the client reached it (or the advertised
        address), the others' what they registered for the same security protocol."""
        brokers = {self.node_id: (*self.advertised_address(connection), self.settings["broker.rack"] or None)}
        for node_id, info in self.cluster.brokers.items():
            address = info.address(connection.security_protocol)
            if node_id != self.node_id and address is not None:
                brokers[node_id] = (*address, info.rack)
        return dict(sorted(brokers.items()))

    @property
    def controller_id(self) -> int:
        """Kafka's controller id: the lowest live id, the broker that does cluster-wide chores."""
        return min(self.cluster.brokers, default=self.node_id)

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
        return topic_configs.default(name, self.settings)

    @staticmethod
    def topic_config_names():
        return topic_configs.TOPIC_CONFIGS.keys()

    def entry_format(self, topic: Topic) -> EntryFormat:
        return entry_formats.by_name(self.topic_config(topic, "kgate.entry.format"))

    async def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> Topic:
        async with self._topic_lock:
            if name in self.cluster.topics:
                raise TopicExists(name)
            topic = await self.cluster.create_topic(name, partitions, configs)
            await self._topic_added(topic)
            log.info("created topic %s with %d partitions", name, partitions)
            return topic

    async def delete_topic(self, name: str) -> Topic:
        """Delete the topic's node; what follows is the same as for a deletion by any path.

        This broker handles its share at once; the others through their event managers.
        """
        async with self._topic_lock:
            topic = self._client_topic(name)
            await self.cluster.delete_topic(name)
        await self._topic_deleted(topic)
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
            topic_configs.check_together(configs, self.settings)
            if validate_only:
                return dataclasses.replace(topic, configs=configs)
            topic = await self.cluster.alter_topic_configs(name, configs)
            self._apply_policies(topic)
            log.info("altered configs of topic %s: %s", name, configs)
            return topic

    def _settings_changed(self) -> None:
        """Dynamic broker configs changed a setting: what read settings once learns the new values."""
        for topic in self.cluster.topics.values():
            self._apply_policies(topic)
        settings = self.settings
        self.connection_limits.set_limits(settings["max.connections"], settings["max.connections.per.ip"],
                                          parse_overrides(settings["max.connections.per.ip.overrides"]))

    def _apply_policies(self, topic: Topic) -> None:
        """Rollover and retention change at once on the partitions served here."""
        for index in range(topic.partitions):
            partition = self.partitions.get((topic.name, index))
            if partition is not None:
                partition.ledger.rollover, partition.ledger.retention = self._ledger_policies(topic)

    async def create_partitions(self, name: str, count: int, check: Callable[[Topic], None],
                                validate_only: bool = False) -> Topic:
        """Grow a topic to ``count`` partitions; return the topic as it is (or would be) then.

        ``check(topic)`` runs under the topic lock on the topic as it is then and raises
        to refuse. The new partitions are served once their owners claim them; until
        then Metadata gives them no leader and clients retry.
        """
        async with self._topic_lock:
            topic = self._client_topic(name)
            check(topic)
            if validate_only:
                return dataclasses.replace(topic, partitions=count)
            grown = await self.cluster.add_partitions(name, count)
            await self.ownership.reconcile(grown)
            log.info("topic %s grown from %d to %d partitions", name, topic.partitions, count)
            return grown

    def load_described(self) -> dict[str, str]:
        return self.balancer.described()

    def live_broker_ids(self) -> set[int]:
        return set(self.cluster.brokers)

    async def reassign(self, placed: Mapping[tuple[str, int], int | None]) -> None:
        """Place each partition on its broker (None: cancel its reassignment), as the balancer does."""
        moves = []
        for (name, index), target in placed.items():
            if target is not None:
                owners = self.ownership.owners(self.cluster.topics[name])
                source = owners[index] if index < len(owners) else -1
                moves.append(Move(name, index, source, target, 0.0, "reassignment"))
        await self.balancer.place(moves, "reassignment", [key for key, target in placed.items() if target is None])

    async def reassignments(self) -> dict[tuple[str, int], tuple[int | None, int]]:
        """Partitions placed on a live broker that does not hold them yet: (the claim's holder,
        the broker placed). Read from the store, so a reassignment just written is in progress
        here before this broker's event manager has reached it."""
        ongoing = {}
        for name, placed in (await placements.read(self.metadata)).items():
            for index, target in placed.items():
                if target in self.cluster.brokers:
                    holder = await self.cluster.claim_holder(name, index)
                    if holder != target:
                        ongoing[(name, index)] = (holder, target)
        return ongoing

    def _client_topic(self, name: str) -> Topic:
        """The topic a client may delete, reconfigure or grow: it exists and is not internal."""
        topic = self.cluster.topics.get(name)
        if topic is None:
            raise UnknownTopic(name)
        if self.is_internal(name):
            raise InternalTopic(name)
        return topic

    def _ledger_policies(self, topic: Topic) -> tuple[RolloverPolicy, RetentionPolicy]:
        """Kafka's rules: only ``delete`` in cleanup.policy deletes by time and size, and a compacted
        topic's open ledger rolls by ``max.compaction.lag.ms`` too, since only sealed ledgers are cleaned."""
        def value(name):
            return int(self.topic_config(topic, name))
        policy = self.topic_config(topic, "cleanup.policy")
        roll_ms = value("segment.ms")
        if is_compacted(policy):
            roll_ms = min(roll_ms, value("max.compaction.lag.ms"))
        retention = (RetentionPolicy(value("retention.ms"), value("retention.bytes"))
                     if "delete" in policy.split(",") else RetentionPolicy(-1, -1))
        return RolloverPolicy(value("segment.bytes"), roll_ms), retention

    async def open_partition(self, topic: Topic, index: int) -> Partition:
        """Open a partition's log (recovering and fencing its last ledger) once it is claimed."""
        rollover, retention = self._ledger_policies(topic)
        ledger = ManagedLedger(
            f"{topic.name}-{index}", self.ledgers, MetadataChainRecord(self.metadata, ledger_list_path(topic, index)),
            lambda: self.cluster.allocate("ledger-id"), rollover=rollover, retention=retention)
        partition = Partition(topic.name, index, ledger)
        try:
            await partition.open()
        except DamagedEntry as damage:
            self._damaged_below(topic.name, index, damage.offset, opened=partition)
            raise
        return partition

    # -- what handlers ask (handlers.broker_view.BrokerView) ---------------------------------

    @property
    def topics(self) -> Mapping[str, Topic]:
        return self.cluster.topics

    def partition(self, name: str, index: int) -> Partition:
        """The partition if this broker serves it; else KafkaError saying why not: it is
        another broker's (clients refresh metadata and go there), or it does not exist."""
        if (name, index) in self.offline:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR)
        partition = self.partitions.get((name, index))
        if partition is not None and not self.ownership.claims_lost:
            return partition
        topic = self.cluster.topics.get(name)
        if topic is not None and 0 <= index < topic.partitions:
            raise KafkaError(ErrorCode.NOT_LEADER_FOR_PARTITION)
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    def reopen_fenced(self, name: str, index: int) -> None:
        self.ownership.reopen_fenced(name, index)

    def take_offline(self, name: str, index: int, damage: CorruptLedger | OSError | TailUnreachable) -> None:
        """Stop serving a partition whose ledger is damaged, saying so once (not per request).

        Its claim stays held, so no other broker serves the damaged log either; a
        partition served until now stays open so a clean shutdown still seals it.
        A ledger whose tail is in another broker's local WAL is not damage: it answers
        KAFKA_STORAGE_ERROR too (retriable: clients retry) until that tail is uploaded.
        """
        if isinstance(damage, DamagedEntry):
            self._damaged_below(name, index, damage.offset)
        if (name, index) in self.offline:
            return
        self.offline[(name, index)] = str(damage)
        if isinstance(damage, TailUnreachable):
            log.warning("%s-%d: answering KAFKA_STORAGE_ERROR until its ledger's tail is uploaded: %s",
                        name, index, damage)
            return
        cause = self.metrics.ledger_damaged(damage)
        log.error("%s-%d: ledger damaged (%s), answering KAFKA_STORAGE_ERROR: %s", name, index, cause, damage)

    def _damaged_below(self, name: str, index: int, offset: int, opened: Partition | None = None) -> None:
        """Serve the partition below ``offset`` only: a damaged entry found when read (the
        partition served until now) or when opened (``opened``, readable as far as the damage)."""
        partition = opened or self.partitions.get((name, index))
        known = self.damaged.get((name, index))
        if partition is not None:  # an earlier damaged entry lowers the bound
            self.damaged[(name, index)] = partition, offset if known is None else min(known[1], offset)

    def damaged_partition(self, name: str, index: int) -> tuple[Partition, int] | None:
        """A partition taken offline by a damaged entry, with that entry's first offset: what
        lies before it is still served (fetches, the earliest offset)."""
        return self.damaged.get((name, index))

    def served(self) -> Iterator[tuple[tuple[str, int], Partition]]:
        """The partitions this broker serves, in name and index order."""
        return iter(sorted(self.partitions.items()))

    @property
    def writable(self) -> bool:
        return self.ownership.safe

    # -- what coordinators ask (coordinator.internal_topics.InternalTopics) ----------------------

    def partition_count(self, topic: str) -> int | None:
        known = self.cluster.topics.get(topic)
        return known.partitions if known is not None else None

    def owner(self, topic: str, index: int) -> BrokerInfo | None:
        known = self.cluster.topics.get(topic)
        return self.leader(known, index) if known is not None else None

    async def create_internal_topic(self, topic: str, partitions: int) -> None:
        try:
            await self.create_topic(topic, partitions, dict(INTERNAL_TOPIC_CONFIGS))
        except TopicExists:
            pass  # another broker created it first

    def _topic_sizes(self) -> dict[str, tuple[uuid.UUID, int]]:
        """Each topic's id and partition count, as consumer groups' assignors see them."""
        return {name: (topic.topic_id, topic.partitions) for name, topic in self.cluster.topics.items()}

    def leader(self, topic: Topic, index: int) -> BrokerInfo | None:
        """The live broker that owns a partition, as Metadata reports it."""
        owners = self.ownership.owners(topic)
        return self.cluster.brokers.get(owners[index]) if index < len(owners) else None

    @property
    def zone(self) -> str | None:
        return self.settings["broker.rack"] or None

    def zone_broker(self, zone: str, topic: str, index: int) -> int | None:
        """The live broker of ``zone`` that serves ``topic``-``index`` to that zone's clients;
        None when the zone has none this broker can reach, or when the store cannot show a
        ledger to a non-owner."""
        if not self.followers.available:
            return None
        owner = self.leader(self.cluster.topics[topic], index) if topic in self.cluster.topics else None
        if owner is not None and owner.rack == zone:
            return owner.node_id  # the owner is in the zone itself: nothing to route
        brokers = self.cluster.brokers
        if self.peers.any_unreachable:  # a peer killed or cut off, still registered: not named
            brokers = {node_id: info for node_id, info in brokers.items() if self.peers.reachable(node_id)}
        return zone_broker(brokers, zone, topic, index)

    async def _share_member_gone(self, group_id: str, member_id: str) -> None:
        await self.share_departures.member_gone(group_id, member_id)

    @staticmethod
    def is_internal(name: str) -> bool:
        return name in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_STATE_TOPIC)

    def topic_by_id(self, topic_id: uuid.UUID) -> Topic | None:
        for topic in self.cluster.topics.values():
            if topic.topic_id == topic_id:
                return topic
        return None

    # -- producer ids and retention ------------------------------------------------------

    async def next_producer_id(self) -> int:
        """The next id of this broker's block, a new block from the metadata store when it is used
        up. While the store cannot be reached: COORDINATOR_LOAD_IN_PROGRESS, Kafka's answer while
        its broker has no block, which every client retries."""
        producer_id = next(self._producer_ids, None)
        if producer_id is None:
            try:
                start = await self.cluster.allocate("producer-id", PRODUCER_ID_BLOCK)
            except StoreUnavailable:
                raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS) from None
            self._producer_ids = iter(range(start, start + PRODUCER_ID_BLOCK))
            producer_id = next(self._producer_ids)
        return producer_id

    async def _periodically(self, setting: str, job, what: str) -> None:
        """Run ``job`` every ``setting`` milliseconds; a failure waits for the next turn."""
        interval = self.settings[setting] / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await job()
            except Exception as exc:
                log.warning("%s failed (tried again in %.0f s): %s", what, interval, exc)

    async def _collect_garbage(self, store: Housekeeping) -> None:
        """Let the store delete what no live ledger needs (WAL objects of deleted ledgers).
        One broker does it, the live one with the lowest id; any could, safely."""
        if not self.cluster.brokers or min(self.cluster.brokers) == self.node_id:
            await store.collect_garbage(lambda: live_ledger_ids(self.cluster))

    async def _retention_loop(self) -> None:
        interval = self.settings["log.retention.check.interval.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            for partition in list(self.partitions.values()):
                try:
                    await partition.ledger.enforce_retention()
                except Exception:
                    log.exception("retention of %s failed", partition.ledger.name)


async def open_broker(settings: Settings) -> Broker:
    """The broker over the metadata and ledger stores its settings name.

    The default is a single node: SQLite metadata and the file ledger store under the
    data directory. With ZooKeeper, the broker id comes from ``broker.id`` or, when that
    is -1, from a cluster-wide counter on first start, kept in the data directory so
    that it is stable across restarts.
    """
    from kgate.storage.stores.file_store import FileLedgerStore

    os.makedirs(settings.data_dir, exist_ok=True)
    shared = settings["kgate.metadata"].startswith(SHARED_METADATA)
    metadata = await open_metadata(settings["kgate.metadata"], settings.data_dir,
                                   settings["broker.session.timeout.ms" if shared else "zookeeper.session.timeout.ms"])
    node_id = settings["broker.id"]
    if not settings["kgate.metadata"].startswith("zookeeper://"):
        node_id = max(node_id, 0)  # a single node, or a worker given its id by its supervisor
    elif node_id < 0:
        node_id = await _derived_broker_id(settings.data_dir, ClusterState(metadata))
    storage_at = settings["kgate.storage"] or "file:" + os.path.join(settings.data_dir, "ledgers")
    settings.values["broker.id"] = node_id
    if storage_at.startswith("s3://"):
        ledgers: LedgerStore = await _object_store(settings, metadata, node_id)
    else:
        ledgers = FileLedgerStore(storage_at.removeprefix("file:"))
    return Broker(settings, metadata, ledgers)


async def _object_store(settings: Settings, metadata: MetadataStore, node_id: int) -> LedgerStore:
    """The object ledger store, writing WAL objects under a writer name no other process has
    used: the broker id and an epoch drawn from the metadata store at each start."""
    from kgate.storage.stores.bucket_location import BucketLocation
    from kgate.storage.stores.object_client import ObjectClient
    from kgate.storage.stores.s3_store import S3LedgerStore

    from .writer_lease import MetadataWriterLease

    epoch = await ClusterState(metadata).allocate("wal-writer-epoch")
    wal = settings["kgate.wal"]
    store = S3LedgerStore(ObjectClient(BucketLocation.parse(settings["kgate.storage"])), f"{node_id}-{epoch}",
                          MetadataWriterLease(metadata), settings["kgate.s3.wal.commit.interval.ms"],
                          settings["kgate.s3.cache.bytes"], wal.removeprefix("file:") if wal != "s3" else None)
    store.wal.start()  # what a crash left in a local WAL goes up before anyone waits on it
    return store


async def open_metadata(metadata_at: str, data_dir: str, session_timeout_ms: int, retry: bool = True,
                        serving: bool = True) -> MetadataStore:
    """The metadata store ``kgate.metadata`` names: ``embedded`` (in the data directory),
    ``shared:SOCKET`` (a ``serve --workers`` supervisor's) or ``zookeeper://HOST:PORT[,...][/CHROOT]``,
    connected (waiting for it, with ``retry``). ``serving``: for a broker, not a command beside one."""
    if metadata_at == "embedded":
        from kgate.metadata.stores.embedded import EmbeddedMetadataStore
        os.makedirs(data_dir, exist_ok=True)
        return EmbeddedMetadataStore(os.path.join(data_dir, EMBEDDED_STORE_FILE), serving)
    if metadata_at.startswith(SHARED_METADATA):
        from kgate.metadata.stores.shared import SharedMetadataStore
        shared = SharedMetadataStore(metadata_at.removeprefix(SHARED_METADATA), session_timeout_ms)
        await shared.connect()
        return shared
    from kgate.metadata.stores.zookeeper import ZooKeeperMetadataStore
    store = ZooKeeperMetadataStore(metadata_at.removeprefix("zookeeper://"), session_timeout_ms)
    await store.connect(retry)
    return store


async def _derived_broker_id(data_dir: str, cluster: ClusterState) -> int:
    path = os.path.join(data_dir, "broker.id")
    try:
        with open(path) as fh:
            return int(fh.read())
    except FileNotFoundError:
        pass
    node_id = await cluster.allocate("broker-id") + DERIVED_BROKER_IDS
    with open(path + ".tmp", "w") as fh:
        fh.write(f"{node_id}\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(path + ".tmp", path)
    return node_id
