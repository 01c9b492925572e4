"""Self-balancing: load reports from every broker, and a balancer on one.

Every broker writes, every ``kgate.balancer.load.report.interval.ms``, the bytes in
and out per second of each partition it serves (metadata.load_reports). The live
broker with the lowest id (Kafka's controller id here, as for the other cluster-wide
chores) runs the balancer when ``kgate.balancer.enable`` is on: every
``kgate.balancer.interval.ms`` it reads the reports, asks the pure rule
(metadata.balance_plan) for a round of moves and writes them as placement overrides
(metadata.placements) in one compare-and-set; every broker's ownership follows them
as it follows a broker joining or leaving. A partition's load is what its owner
reports of it (or, before its new owner's first report, its previous owner's).

The moves made last are kept in the store beside the overrides (``/balancer/moves``),
with when each was made: a balancer that takes over after the previous one's broker
left keeps its cooldowns, and ``kgate brokers`` shows them.
"""
import asyncio
import json
import logging
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from kgate.metadata import load_reports, placements
from kgate.metadata.assignment import assign
from kgate.metadata.balance_plan import Limits, Move, plan
from kgate.metadata.cluster import ClusterState, Topic
from kgate.metadata.load_reports import LoadReport
from kgate.metadata.store import MetadataStore, update_node

from .config import Settings
from .partition import Partition

log = logging.getLogger(__name__)

MOVES = "/balancer/moves"
# Moves kept in MOVES: the recent history an operator reads, and every cooldown still running.
MOVES_KEPT = 50
# Of those, the moves DescribeConfigs answers.
DESCRIBED_MOVES = 10


class _Owners(Protocol):
    def owners(self, topic: Topic) -> list[int]: ...


class _Counts(Protocol):
    def balancer_moved(self, reason: str) -> None: ...


class BalancedBroker(Protocol):
    """What balancing needs of the broker: its settings and store, the partitions it serves
    (to report), the cluster and its owners (to plan), and the metrics that count moves."""

    node_id: int
    settings: Settings
    metadata: MetadataStore
    partitions: dict[tuple[str, int], Partition]

    @property
    def cluster(self) -> ClusterState: ...

    @property
    def controller_id(self) -> int: ...

    @property
    def ownership(self) -> _Owners: ...

    @property
    def metrics(self) -> _Counts: ...


class Balancer:
    def __init__(self, broker: BalancedBroker, clock: Callable[[], float] = time.time):
        self.broker = broker
        self.clock = clock
        self.report = LoadReport(broker.node_id, 0)  # this broker's latest, for its metrics
        # (topic, partition) -> (the partition reported, its bytes in and out then), and when.
        self._counted: dict[tuple[str, int], tuple[Partition, int, int]] = {}
        self._counted_at = time.monotonic()
        self._tasks: list[asyncio.Task] = []
        self.history: list[dict] = []  # the cluster's recent moves, as last read or written

    def start(self) -> None:
        settings = self.broker.settings
        self._tasks = [asyncio.create_task(self._every("kgate.balancer.load.report.interval.ms", self.publish,
                                                       "load report")),
                       asyncio.create_task(self._every("kgate.balancer.interval.ms", self.balance, "balancing"))]
        if settings["kgate.balancer.enable"]:
            log.info("balancer on: at most %d moves every %d ms", settings["kgate.balancer.max.moves"],
                     settings["kgate.balancer.interval.ms"])

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _every(self, setting: str, job, what: str) -> None:
        while True:
            await asyncio.sleep(self.broker.settings[setting] / 1000)
            try:
                await job()
            except Exception as exc:
                log.warning("%s failed (tried again next time): %r", what, exc)

    # -- load reports ------------------------------------------------------------------------

    def measure(self) -> LoadReport:
        """Each served partition's bytes in and out per second since the last measure, or since
        it was opened here for a partition gained meanwhile: a partition that just arrived
        is not reported colder than it is, which would draw more partitions after it."""
        now = time.monotonic()
        counted: dict[tuple[str, int], tuple[Partition, int, int]] = {}
        rates = {}
        for key, partition in list(self.broker.partitions.items()):
            before = self._counted.get(key)
            if before is not None and before[0] is partition:
                base_in, base_out, since = before[1], before[2], self._counted_at
            else:
                base_in, base_out, since = 0, 0, max(partition.opened_at, self._counted_at)
            elapsed = max(now - since, 1e-3)
            counted[key] = (partition, partition.bytes_in, partition.bytes_out)
            rates[key] = ((partition.bytes_in - base_in) / elapsed, (partition.bytes_out - base_out) / elapsed)
        self._counted, self._counted_at = counted, now
        self.report = LoadReport(self.broker.node_id, int(self.clock() * 1000), rates)
        return self.report

    async def publish(self) -> None:
        """Measure; write the report when another broker may read it (a single node has nothing
        to balance, and its store is spared a write every interval)."""
        report = self.measure()
        if len(self.broker.cluster.brokers) > 1:
            await load_reports.publish(self.broker.metadata, report)
            self.history = await recent_moves(self.broker.metadata)

    def described(self) -> dict[str, str]:
        """This broker's load and the cluster's recent moves, as read-only broker configs
        (DescribeConfigs, so ``kgate brokers`` and any Kafka admin tool can read them)."""
        report = self.report
        return {"kgate.load.bytes.in.per.second": f"{report.bytes_in:.1f}",
                "kgate.load.bytes.out.per.second": f"{report.bytes_out:.1f}",
                "kgate.load.partitions": str(len(report.partitions)),
                "kgate.balancer.recent.moves": json.dumps(self.history[-DESCRIBED_MOVES:])}

    # -- the balancer ----------------------------------------------------------------------

    def limits(self) -> Limits:
        settings = self.broker.settings
        return Limits(settings["kgate.balancer.max.moves"], settings["kgate.balancer.move.cooldown.ms"] / 1000,
                      settings["kgate.balancer.tolerance.percent"] / 100)

    async def balance(self) -> list[Move]:
        """One round, on the controller only, when balancing is on: the moves written."""
        broker = self.broker
        if not broker.settings["kgate.balancer.enable"] or broker.controller_id != broker.node_id:
            return []
        cluster = broker.cluster
        reports = await load_reports.read_all(broker.metadata)
        owners = {(topic.name, index): owner for topic in list(cluster.topics.values())
                  for index, owner in enumerate(broker.ownership.owners(topic))}
        loads = partition_loads(reports, owners)
        history = await recent_moves(broker.metadata)
        interval_ms = broker.settings["kgate.balancer.load.report.interval.ms"]
        if history and not reported_since(reports, cluster.brokers, history[-1]["at"] + interval_ms):
            return []  # the last moves' effect is not measured yet: planning now would overshoot
        moved_at = {(move["topic"], move["partition"]): move["at"] / 1000 for move in history}
        zones = {node_id: info.rack for node_id, info in cluster.brokers.items()}
        moves = plan(loads, owners, zones, self.limits(), moved_at, self.clock())
        await self.place(moves, "balancer")
        return moves

    async def place(self, moves: list[Move], by: str, cancelled: Iterable[tuple[str, int]] = ()) -> None:
        """Write ``moves`` as overrides and drop those ``cancelled``, and those that name a broker
        no longer live or the partition's hashed owner (they change nothing); record the moves.
        Overrides of topics this broker does not know are left to the sweep of deleted topics."""
        broker = self.broker
        cluster = broker.cluster
        live = set(cluster.brokers)

        def edit(overrides: placements.Overrides) -> None:
            for move in moves:
                overrides.setdefault(move.topic, {})[move.partition] = move.target
            for name, index in cancelled:
                overrides.get(name, {}).pop(index, None)
            for name, placed in list(overrides.items()):
                topic = cluster.topics.get(name)
                if topic is None:
                    continue  # deleted (the sweep drops it), or created after this broker last looked
                hashed = assign(name, topic.partitions, live)
                for index, target in list(placed.items()):
                    if target not in live or index >= len(hashed) or hashed[index] == target:
                        del placed[index]

        await placements.change(broker.metadata, edit)
        moves = [move for move in moves if move.source != move.target]  # a partition placed where it is
        if not moves:
            return
        now_ms = int(self.clock() * 1000)
        made = [{"topic": m.topic, "partition": m.partition, "from": m.source, "to": m.target, "reason": m.reason,
                 "load": round(m.load, 1), "at": now_ms, "by": by} for m in moves]

        def record(data: bytes | None) -> bytes:
            return json.dumps(((json.loads(data) if data else []) + made)[-MOVES_KEPT:]).encode()

        await update_node(broker.metadata, MOVES, record)
        self.history = (self.history + made)[-MOVES_KEPT:]
        for move in moves:
            broker.metrics.balancer_moved(move.reason)
            log.info("placed %s-%d on broker %d, from %d (%s, %.0f B/s)", move.topic, move.partition, move.target,
                     move.source, move.reason, move.load)


def partition_loads(reports: dict[int, LoadReport], owners: dict[tuple[str, int], int]) -> dict[tuple[str, int], float]:
    """Bytes in and out per second of each partition: as its owner reports it, else as any
    broker last did (the previous owner, until the new one's first report)."""
    loads: dict[tuple[str, int], float] = {}
    for report in sorted(reports.values(), key=lambda r: r.at_ms):
        for key, (rate_in, rate_out) in report.partitions.items():
            loads[key] = rate_in + rate_out
    for key, owner in owners.items():
        rates = reports[owner].partitions.get(key) if owner in reports else None
        if rates is not None:
            loads[key] = rates[0] + rates[1]
    return loads


def reported_since(reports: dict[int, LoadReport], brokers, at_ms: int) -> bool:
    """Whether every live broker has reported since ``at_ms``: a report interval after the
    last move, each report then covers only traffic that came after it."""
    return all(node_id in reports and reports[node_id].at_ms > at_ms for node_id in brokers)


async def recent_moves(store: MetadataStore) -> list[dict]:
    node = await store.get(MOVES)
    return json.loads(node.data) if node is not None and node.data else []
