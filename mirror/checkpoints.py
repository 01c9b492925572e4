"""Checkpoints and heartbeats: what the controller writes into each target, as MM2 does.

Every ``emit.checkpoints.interval.ms`` the source's consumer groups that committed
offsets on a route's topics get their offsets translated (forward, translation.py) and
written as MM2 checkpoints into ``<source>.checkpoints.internal`` on the target; with
``sync.group.offsets.enabled`` the translated offsets are also committed into the
target's groups that have no active member there, and only when they move forward (a
consumer that already ran further on the target is never pulled back). Heartbeats
into the target's ``heartbeats`` topic show a route is alive end to end.
"""
import logging
import time

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, Producer, TopicPartition

from .config import MirrorConfig
from .mm2_formats import HEARTBEATS_TOPIC, Checkpoint, Heartbeat, checkpoints_topic
from .offset_syncs import TIMEOUT, SyncReadError, committed, read_syncs
from .routes import Route
from .topics import TopicSync
from .translation import SyncHistory

log = logging.getLogger(__name__)


class CheckpointWriter:
    def __init__(self, config: MirrorConfig, topics: TopicSync):
        self.config = config
        self.topics = topics
        self._producers: dict[str, Producer] = {}

    def producer(self, alias: str) -> Producer:
        if alias not in self._producers:
            self._producers[alias] = Producer(self.config.cluster(alias).client_config(
                **{"acks": "all", "linger.ms": 5, "client.id": "kgate-mirror-controller"}))
        return self._producers[alias]

    def heartbeats(self, routes: list[Route]) -> None:
        now = int(time.time() * 1000)
        for route in routes:
            beat = Heartbeat(route.source, route.target, now)
            self.producer(route.target).produce(HEARTBEATS_TOPIC, beat.value(), beat.key())
        self.flush()

    def checkpoints(self, route: Route) -> int:
        """Checkpoint every group of the route's source that reads its topics; returns how many."""
        source_admin = self.topics.admin(route.source)
        try:
            groups = [g.group_id for g in source_admin.list_consumer_groups().result(TIMEOUT).valid]
            history = read_syncs(self.config.cluster(route.source), route.target)
        except (KafkaException, SyncReadError) as exc:
            log.warning("route %s: no checkpoints this time: %s", route.name, exc)
            return 0
        written = 0
        for group in groups:
            if group.startswith("kgate-mirror"):
                continue
            translated = []
            for tp in committed(source_admin, group):
                if not route.matches(tp.topic):
                    continue
                offset = SyncHistory(history.get((tp.topic, tp.partition), [])).forward(tp.offset)
                if offset is None:
                    continue
                checkpoint = Checkpoint(group, route.target_topic(tp.topic), tp.partition, tp.offset, offset,
                                        tp.metadata or "")
                self.producer(route.target).produce(checkpoints_topic(route.source), checkpoint.value(),
                                                    checkpoint.key())
                translated.append(TopicPartition(checkpoint.topic, checkpoint.partition, offset))
                written += 1
            if translated and self.config["sync.group.offsets.enabled"]:
                self._sync_group(route.target, group, translated)
        self.flush()
        return written

    def _sync_group(self, target: str, group: str, offsets: list[TopicPartition]) -> None:
        admin = self.topics.admin(target)
        try:
            if admin.describe_consumer_groups([group])[group].result(TIMEOUT).members:
                return  # active there: its own commits win
            current = {(tp.topic, tp.partition): tp.offset for tp in committed(admin, group)}
            ahead = [tp for tp in offsets if tp.offset > current.get((tp.topic, tp.partition), -1)]
            if ahead:
                admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, ahead)])[group].result(TIMEOUT)
        except KafkaException as exc:
            log.warning("group %s on %s: translated offsets not committed: %s", group, target, exc.args[0].str())

    def flush(self) -> None:
        for producer in self._producers.values():
            producer.flush(TIMEOUT)
