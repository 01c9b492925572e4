"""Source topics as the routes see them, and their copies made to match on the target.

A copy has the source's partition count (partition i goes to partition i, so keys keep
their partition and per-key order survives) and the source's topic-level configs, and
follows the source when partitions are added. This runs in the controller before any
partition of a topic is assigned, so no worker ever produces into a topic that a
broker's auto-creation would have made with the wrong partition count.
"""
import logging

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewPartitions, NewTopic

from .config import MirrorConfig
from .routes import Route

log = logging.getLogger(__name__)
TIMEOUT = 15.0
# Configs that describe where replicas live or how a cluster throttles them, not the
# topic's data: MirrorMaker 2 leaves these out of its config sync as well.
NOT_COPIED = {"min.insync.replicas", "follower.replication.throttled.replicas",
              "leader.replication.throttled.replicas", "message.timestamp.difference.max.ms",
              "message.timestamp.before.max.ms", "message.timestamp.after.max.ms", "unclean.leader.election.enable"}


class TopicSync:
    def __init__(self, config: MirrorConfig):
        self.config = config
        self._admins: dict[str, AdminClient] = {}

    def admin(self, alias: str) -> AdminClient:
        if alias not in self._admins:
            self._admins[alias] = AdminClient(self.config.cluster(alias).client_config())
        return self._admins[alias]

    def partition_counts(self, alias: str) -> dict[str, int]:
        metadata = self.admin(alias).list_topics(timeout=TIMEOUT)
        return {name: len(topic.partitions) for name, topic in metadata.topics.items() if topic.error is None}

    def ensure(self, route: Route, topic: str, partitions: int, target_counts: dict[str, int]) -> bool:
        """Make the target copy of ``topic`` exist with at least ``partitions`` partitions;
        True when it is ready to be produced into."""
        name = route.target_topic(topic)
        have = target_counts.get(name)
        admin = self.admin(route.target)
        try:
            if have is None:
                new = NewTopic(name, partitions, replication_factor=-1, config=self.topic_configs(route.source, topic))
                admin.create_topics([new], operation_timeout=TIMEOUT)[name].result(TIMEOUT)
                log.info("created %s on %s with %d partitions", name, route.target, partitions)
            elif have < partitions:
                admin.create_partitions([NewPartitions(name, partitions)])[name].result(TIMEOUT)
                log.info("grew %s on %s from %d to %d partitions", name, route.target, have, partitions)
            elif have > partitions:
                log.warning("%s on %s has %d partitions, more than its source's %d: partitions stay 1-1",
                            name, route.target, have, partitions)
        except KafkaException as exc:
            if exc.args[0].name() in ("TOPIC_ALREADY_EXISTS", "INVALID_PARTITIONS"):
                return True  # another controller (or an operator) got there first
            log.error("cannot prepare %s on %s: %s", name, route.target, exc.args[0].str())
            return False
        target_counts[name] = max(have or 0, partitions)
        return True

    def ensure_internal(self, alias: str, name: str, counts: dict[str, int]) -> None:
        """A compacted single-partition topic of MM2's (offset-syncs, checkpoints, heartbeats)."""
        if name in counts:
            return
        new = NewTopic(name, 1, replication_factor=-1, config={"cleanup.policy": "compact"})
        try:
            self.admin(alias).create_topics([new], operation_timeout=TIMEOUT)[name].result(TIMEOUT)
        except KafkaException as exc:
            if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
                log.error("cannot create %s on %s: %s", name, alias, exc.args[0].str())
                return
        counts[name] = 1

    def topic_configs(self, alias: str, topic: str) -> dict[str, str]:
        """The configs set on the source topic itself (not broker defaults)."""
        resource = ConfigResource("topic", topic)
        try:
            entries = self.admin(alias).describe_configs([resource])[resource].result(TIMEOUT)
        except KafkaException as exc:
            log.warning("cannot read the configs of %s on %s: %s", topic, alias, exc.args[0].str())
            return {}
        return {name: entry.value for name, entry in entries.items()
                if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value and name not in NOT_COPIED
                and entry.value is not None}
