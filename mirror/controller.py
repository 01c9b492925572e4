"""The controller: one worker, elected through ZooKeeper, that decides who copies what.

It reacts to routes added or removed and workers joining or leaving (watches), and
re-reads source topics periodically (new topics matching a pattern, added partitions).
It also audits every route over the recent window (for the audit metrics, in a thread
of its own: reading the targets must not hold up assignment) and prunes audit counts
older than ``audit.retention.ms``.
Before a partition is assigned its target topic exists with the right partition count.
Every placement that can survive a change does (assignment.assign), so only partitions
whose worker died, or that a periodic rebalance moves, ever stop.
"""
import logging
import threading
import time

from confluent_kafka import KafkaException
from kazoo.exceptions import KazooException

from . import audit
from .assignment import assign, weight
from .checkpoints import CheckpointWriter
from .config import MirrorConfig
from .metrics import MirrorMetrics
from .mm2_formats import HEARTBEATS_TOPIC, checkpoints_topic, offset_syncs_topic
from .routes import topic_loops
from .state import Item, MirrorState, item_key
from .target_counts import CountError, audit_route
from .topics import TopicSync

log = logging.getLogger(__name__)


class Controller:
    def __init__(self, config: MirrorConfig, state: MirrorState, metrics: MirrorMetrics, stopping: threading.Event,
                 worker_id: str):
        self.config = config
        self.worker_id = worker_id
        self.state = state
        self.metrics = metrics
        self.stopping = stopping
        self.changed = threading.Event()
        self.topics = TopicSync(config)
        self.checkpoints = CheckpointWriter(config, self.topics)
        self._workers: set[str] = set()
        self._auditing: threading.Thread | None = None
        state.watch_routes(self.changed.set)
        state.client.ChildrenWatch(state.path("workers"), lambda _children: self.changed.set())

    def lead(self) -> None:
        """Runs while this worker is the controller (kazoo's Election calls it)."""
        log.info("this worker is the mirror controller")
        every = {name: self.config[f"{name}.ms"] / 1000 for name in (
            "rebalance.interval", "metadata.refresh.interval", "emit.heartbeats.interval", "emit.checkpoints.interval",
            "audit.interval")}
        if not every["audit.interval"]:
            del every["audit.interval"]
        # Pruning lets counts outlive the retention by at most 1% of it (a minute's nodes a pass).
        every["audit.prune"] = min(max(self.config["audit.retention.ms"] / 100_000, 1.0), 3600.0)
        due = {name: time.monotonic() for name in every}
        due["rebalance.interval"] += every["rebalance.interval"]
        while not self.stopping.is_set() and self.state.client.connected:
            now = time.monotonic()
            ready = {name for name, at in due.items() if now >= at}
            for name in ready:
                due[name] = now + every[name]
            try:
                if self.changed.is_set() or ready & {"metadata.refresh.interval", "rebalance.interval"}:
                    self.changed.clear()
                    self.reconcile(rebalance="rebalance.interval" in ready)
                routes = list(self.state.routes().values())
                if "emit.heartbeats.interval" in ready:
                    self.checkpoints.heartbeats(routes)
                if "emit.checkpoints.interval" in ready:
                    for route in routes:
                        self.checkpoints.checkpoints(route)
                if "audit.interval" in ready and not (self._auditing and self._auditing.is_alive()):
                    self._auditing = threading.Thread(target=self.audit, args=(routes,), name="mirror-audit",
                                                      daemon=True)
                    self._auditing.start()
                if "audit.prune" in ready:
                    horizon = int(time.time() * 1000) - self.config["audit.retention.ms"]
                    if audit.prune(self.state, audit.minute_of(horizon)):
                        log.info("audit counts before %s pruned", audit.minute_text(audit.minute_of(horizon)))
            except (KazooException, KafkaException, OSError) as exc:
                log.warning("controller pass failed: %s", exc)
            self.changed.wait(max(0.0, min(due.values()) - time.monotonic()))

    def items(self) -> set[Item]:
        """Every partition the routes carry now, with its target topic made ready."""
        routes = self.state.routes()
        items: set[Item] = set()
        counts: dict[str, dict[str, int]] = {}
        for route in sorted(routes.values(), key=lambda r: r.name):
            try:
                source = counts.setdefault(route.source, self.topics.partition_counts(route.source))
                target = counts.setdefault(route.target, self.topics.partition_counts(route.target))
            except Exception as exc:  # an unreachable cluster stops its routes, not the others
                log.warning("route %s: cluster metadata unavailable: %s", route.name, exc)
                continue
            self.topics.ensure_internal(route.source, offset_syncs_topic(route.target), source)
            self.topics.ensure_internal(route.target, HEARTBEATS_TOPIC, target)
            self.topics.ensure_internal(route.target, checkpoints_topic(route.source), target)
            for topic, partitions in sorted(source.items()):
                if not route.matches(topic):
                    continue
                loop = topic_loops(list(routes.values()), topic)
                if loop:
                    log.error("not copying %s on route %s: it would %s", topic, route.name, loop)
                    continue
                if self.topics.ensure(route, topic, partitions, target):
                    items |= {(route.name, topic, p) for p in range(partitions)}
        return items

    def reconcile(self, rebalance: bool) -> None:
        items = self.items()
        workers = sorted(self.state.workers())
        joined = set(workers) - self._workers
        self._workers = set(workers)
        weights = {}
        for status in self.state.statuses().values():
            for key, figures in status.get("partitions", {}).items():
                route, topic, partition = key.rsplit("/", 2)
                weights[(route, topic, int(partition))] = weight(
                    figures.get("bytes_per_second", 0.0), figures.get("lag_seconds", 0.0), self.config["lag.factor"])
        current = self.state.assignment()
        proposed, moved = assign(current["workers"], items, workers, weights, self.config["rebalance.threshold"],
                                 rebalance=rebalance or bool(joined))
        if proposed != {w: [tuple(i) for i in owned] for w, owned in current["workers"].items()}:
            self.state.put_assignment({"generation": current["generation"] + 1, "controller": self.worker_id,
                                       "workers": {w: [list(i) for i in owned] for w, owned in proposed.items()}})
            log.info("assignment %d: %s", current["generation"] + 1,
                     {w: [item_key(i) for i in owned] for w, owned in proposed.items()})
        if moved:
            self.metrics.rebalances.inc()
            self.metrics.moved.inc(moved)

    def audit(self, routes: list) -> None:
        """Audit every route over the last ``audit.window.ms`` into the audit gauges."""
        since = int(time.time() * 1000) - self.config["audit.window.ms"]
        missing: dict[tuple[str, str], int] = {}
        duplicated: dict[tuple[str, str], int] = {}
        for route in routes:
            try:
                rows = audit_route(self.state, self.config.cluster(route.target), route, since)
            except (CountError, KazooException) as exc:
                log.warning("route %s: not audited this time: %s", route.name, exc)
                continue
            for row in rows:
                labels = (route.name, row.topic)
                missing[labels] = missing.get(labels, 0) + row.missing
                duplicated[labels] = duplicated.get(labels, 0) + row.duplicated
        for gauge, values in ((self.metrics.audit_missing, missing), (self.metrics.audit_duplicated, duplicated)):
            gauge.clear()
            for labels, value in values.items():
                gauge.labels(*labels).set(value)
        if any(missing.values()):
            log.warning("audit: records missing on targets: %s",
                        {f"{r}/{t}": n for (r, t), n in missing.items() if n})
