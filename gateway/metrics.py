"""Prometheus metrics: what an operator of a Kafka estate needs to see.

Request rate and latency per API and version; bytes and records per topic; produce
and fetch latency split by stage, as KoP publishes them, so a slow request can be
pinned on decoding, the ledger, fsync or the response path; and, computed at each
scrape, group states, ledgers, partitions owned, and connections by client software
(ApiVersions v3+), which shows which old clients still connect; and how long metadata
events wait and take, by event, which shows a broker slow to follow the cluster. Served over HTTP at
``/metrics`` when ``--metrics HOST:PORT`` is given (gateway/metrics_endpoint.py).
"""
import collections
import time
from collections.abc import Callable

from kafka.protocol.api_key import ApiKey
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from kgate.metadata.events import Event
from kgate.storage.compaction import CompactionResult
from kgate.storage.ledger import ChecksumMismatch, StrandedEntries
from kgate.storage.managed_ledger import DamagedEntry

# 0.5 ms to 10 s: a request either rides the event loop (sub-ms) or waits for fsync.
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
PRODUCE_STAGES = ("queued", "decode", "append", "fsync", "respond")
DAMAGE_CAUSES = ("unreadable", "checksum", "recovery")
FETCH_STAGES = ("queued", "decode", "wait", "read", "respond")


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return str(api_key)


class BrokerMetrics:
    def __init__(self, broker):
        self.registry = CollectorRegistry()
        self._broker = broker
        self._requests = Counter("kgate_requests", "Requests answered, by API and version",
                                 ["api", "version"], registry=self.registry)
        self._latency = Histogram("kgate_request_latency_seconds", "Time from a request's decoding to its "
                                  "response being written, by API and version", ["api", "version"],
                                  buckets=BUCKETS, registry=self.registry)
        bytes_in = Counter("kgate_topic_bytes_in", "Record-set bytes produced", ["topic"], registry=self.registry)
        records_in = Counter("kgate_topic_records_in", "Records produced", ["topic"], registry=self.registry)
        bytes_out = Counter("kgate_topic_bytes_out", "Record-set bytes fetched", ["topic"], registry=self.registry)
        records_out = Counter("kgate_topic_records_out", "Records fetched (whole entries)", ["topic"],
                              registry=self.registry)
        self._topic_in = _PerTopic(bytes_in, records_in)
        self._topic_out = _PerTopic(bytes_out, records_out)
        self.fetch_budget_waits = Counter("kgate_fetch_budget_waits", "Times a fetch found its connection's or "
                                          "the broker's fetched-bytes budget full and waited for answers to be "
                                          "sent", registry=self.registry)
        self._denials = Counter("kgate_authorization_denials", "Requests (or parts of them) the authorizer "
                                "refused, by resource type and operation", ["resource_type", "operation"],
                                registry=self.registry)
        damaged = Counter("kgate_damaged_ledgers", "Partitions taken offline because a ledger is damaged, by "
                          "cause: unreadable (missing, cut short, I/O error), checksum (an entry read back "
                          "failed its CRC32C), recovery (valid entries after damage in a crashed ledger)",
                          ["cause"], registry=self.registry)
        self._produce_errors = Counter("kgate_produce_errors", "Partitions of produce requests answered with an "
                                       "error, by Kafka's error name", ["error"], registry=self.registry)
        self._auth_failures = Counter("kgate_authentication_failures", "SASL logins that failed, by mechanism and "
                                      "reason: refused (a wrong password or unknown user) or limited (refused "
                                      "unheard after too many failures from the address)", ["mechanism", "reason"],
                                      registry=self.registry)
        self._write_errors = Counter("kgate_storage_write_errors", "Appends refused with KAFKA_STORAGE_ERROR "
                                     "because the store could not write (disk full, I/O error)",
                                     registry=self.registry)
        self._damaged = {cause: damaged.labels(cause) for cause in DAMAGE_CAUSES}
        produce = Histogram("kgate_produce_stage_seconds", "Produce latency by stage", ["stage"],
                            buckets=BUCKETS, registry=self.registry)
        fetch = Histogram("kgate_fetch_stage_seconds", "Fetch latency by stage", ["stage"],
                          buckets=BUCKETS, registry=self.registry)
        self.produce_stage = {stage: produce.labels(stage) for stage in PRODUCE_STAGES}
        self.fetch_stage = {stage: fetch.labels(stage) for stage in FETCH_STAGES}
        self._stages = {ApiKey.Produce: self.produce_stage, ApiKey.Fetch: self.fetch_stage}
        self._children: dict = {}
        waited = Histogram("kgate_metadata_event_queue_seconds", "Time metadata events wait in the event "
                           "manager's queue, by event", ["event"], buckets=BUCKETS, registry=self.registry)
        handled = Histogram("kgate_metadata_event_processing_seconds", "Time handling metadata events takes, "
                            "by event", ["event"], buckets=BUCKETS, registry=self.registry)
        self._events = {event: (waited.labels(event.value), handled.labels(event.value)) for event in Event}
        self._cleaner_runs = Counter("kgate_log_cleaner_runs", "Compaction passes run by the log cleaner",
                                     registry=self.registry)
        self._cleaner_read = Counter("kgate_log_cleaner_bytes_read", "Bytes the log cleaner read",
                                     registry=self.registry)
        self._cleaner_written = Counter("kgate_log_cleaner_bytes_written", "Bytes the log cleaner wrote "
                                        "(the compacted ledgers)", registry=self.registry)
        self._cleaner_removed = Counter("kgate_log_cleaner_records_removed", "Records compaction removed "
                                        "(superseded, expired tombstones, no key)", registry=self.registry)
        self._client_bytes = Counter("kgate_client_bytes", "Bytes of client requests received and responses sent, "
                                     "by the client's zone (empty: it said none) and this broker's; a client "
                                     "zone other than the broker's is traffic billed across zones",
                                     ["direction", "client_zone", "broker_zone"], registry=self.registry)
        self._interbroker_bytes = Counter("kgate_interbroker_bytes", "Bytes this broker sent to and received "
                                          "from other brokers, by this broker's zone and the peer's",
                                          ["direction", "local_zone", "peer_zone"], registry=self.registry)
        self._zone_fallbacks = Counter("kgate_zone_fallbacks", "Requests of a client in a zone with no live "
                                       "broker, routed to partition owners in other zones", ["client_zone"],
                                       registry=self.registry)
        moves = Counter("kgate_balancer_moves", "Partitions moved between brokers by the balancer or a "
                        "reassignment, counted by the broker that placed them, by reason: load, count (the "
                        "balancer's) or reassignment (AlterPartitionReassignments)", ["reason"], registry=self.registry)
        self._moves = {reason: moves.labels(reason) for reason in ("load", "count", "reassignment")}
        self.registry.register(_StateCollector(broker))

    def balancer_moved(self, reason: str) -> None:
        self._moves[reason].inc()

    def log_cleaned(self, result: CompactionResult) -> None:
        self._cleaner_runs.inc()
        self._cleaner_read.inc(result.bytes_read)
        self._cleaner_written.inc(result.bytes_written)
        self._cleaner_removed.inc(result.records_removed)

    def metadata_event(self, event: Event, queued_seconds: float, processing_seconds: float) -> None:
        waited, handled = self._events[event]
        waited.observe(queued_seconds)
        handled.observe(processing_seconds)

    def client_bytes_counter(self, client_zone: str | None) -> Callable[[str, int], None]:
        """``count(direction, bytes)`` for one client connection's traffic ("in" or "out")."""
        broker_zone = self._broker.settings["broker.rack"]
        children = {direction: self._client_bytes.labels(direction, client_zone or "", broker_zone)
                    for direction in ("in", "out")}
        return lambda direction, size: children[direction].inc(size)

    def interbroker_counter(self, local_zone: str | None, peer_zone: str | None) -> Callable[[str, int], None]:
        """``count(direction, bytes)`` for a broker-to-broker connection ("in": received, "out": sent)."""
        children = {direction: self._interbroker_bytes.labels(label, local_zone or "", peer_zone or "")
                    for direction, label in (("in", "received"), ("out", "sent"))}
        return lambda direction, size: children[direction].inc(size)

    def zone_fallback(self, client_zone: str) -> None:
        self._zone_fallbacks.labels(client_zone).inc()

    def authentication_failed(self, mechanism: str, reason: str) -> None:
        self._auth_failures.labels(mechanism, reason).inc()

    def produce_failed(self, error) -> None:
        """One partition of a produce answered with ``error`` (an ErrorCode)."""
        self._produce_errors.labels(error.name).inc()

    def storage_write_failed(self) -> None:
        self._write_errors.inc()

    def ledger_damaged(self, damage: Exception) -> str:
        """Count a partition taken offline; returns the cause it was counted under."""
        if isinstance(damage, DamagedEntry):
            damage = damage.found
        cause = ("recovery" if isinstance(damage, StrandedEntries)
                 else "checksum" if isinstance(damage, ChecksumMismatch) else "unreadable")
        self._damaged[cause].inc()
        return cause

    def denied(self, resource_type, operation) -> None:
        self._denials.labels(resource_type.name, operation.name).inc()

    def produced(self, topic: str, size: int, records: int) -> None:
        self._topic_in.count(topic, size, records)

    def fetched(self, topic: str, size: int, records: int) -> None:
        self._topic_out.count(topic, size, records)

    def decoded(self, api_key: int, decode_seconds: float) -> None:
        stages = self._stages.get(api_key)
        if stages is not None:
            stages["decode"].observe(decode_seconds)

    def started(self, api_key: int, queued_seconds: float) -> None:
        stages = self._stages.get(api_key)
        if stages is not None:
            stages["queued"].observe(queued_seconds)

    def answered(self, api_key: int, version: int, received: float, handled: float) -> None:
        """One request's response is written: ``received`` and ``handled`` are monotonic times."""
        now = time.monotonic()
        children = self._children.get((api_key, version))
        if children is None:
            labels = (_api_name(api_key), str(version))
            children = self._children[(api_key, version)] = (self._requests.labels(*labels),
                                                             self._latency.labels(*labels))
        children[0].inc()
        children[1].observe(now - received)
        stages = self._stages.get(api_key)
        if stages is not None:
            stages["respond"].observe(now - handled)


class _PerTopic:
    """A bytes and a records counter by topic, their labelled children looked up once per topic.

    ``labels()`` takes a lock and builds a key on every call; on the produce path that
    was paid once per partition of every request.
    """

    def __init__(self, bytes_counter: Counter, records_counter: Counter):
        self._bytes = bytes_counter
        self._records = records_counter
        self._children: dict[str, tuple] = {}

    def count(self, topic: str, size: int, records: int) -> None:
        children = self._children.get(topic)
        if children is None:
            children = self._children[topic] = (self._bytes.labels(topic), self._records.labels(topic))
        children[0].inc(size)
        children[1].inc(records)


class _StateCollector:
    """Gauges computed from the broker's state when Prometheus scrapes."""

    def __init__(self, broker):
        self._broker = broker

    def collect(self):
        broker = self._broker
        groups = GaugeMetricFamily("kgate_groups", "Consumer groups by state", labels=["state"])
        counts: dict[str, int] = {}
        for group in broker.groups.groups.values():
            counts[group.state.name] = counts.get(group.state.name, 0) + 1
        for state, count in sorted(counts.items()):
            groups.add_metric([state], count)
        yield groups
        ledgers = GaugeMetricFamily("kgate_ledgers", "Ledgers in each topic's managed ledgers", labels=["topic"])
        sizes = GaugeMetricFamily("kgate_ledger_bytes", "Bytes in each topic's managed ledgers", labels=["topic"])
        per_topic: dict[str, list[int]] = {}
        for (topic, _index), partition in list(broker.partitions.items()):
            totals = per_topic.setdefault(topic, [0, 0])
            totals[0] += len(partition.ledger.ledger_first_offsets())
            totals[1] += partition.ledger.size_bytes
        for topic, (count, size) in sorted(per_topic.items()):
            ledgers.add_metric([topic], count)
            sizes.add_metric([topic], size)
        yield ledgers
        yield sizes
        yield self._ownership_gaps(broker)
        yield self._group_lag(broker)
        owned = GaugeMetricFamily("kgate_partitions_owned", "Partitions this broker owns and serves, by topic",
                                  labels=["topic"])
        for topic, count in sorted(collections.Counter(topic for topic, _ in list(broker.partitions)).items()):
            owned.add_metric([topic], count)
        yield owned
        load = GaugeMetricFamily("kgate_load_bytes_per_second", "Record-set bytes per second this broker's "
                                 "partitions took in and gave out over its last load report (what the balancer "
                                 "plans from)", labels=["direction"])
        load.add_metric(["in"], broker.balancer.report.bytes_in)
        load.add_metric(["out"], broker.balancer.report.bytes_out)
        yield load
        yield GaugeMetricFamily("kgate_placement_overrides", "Partitions placed on a broker by a reassignment or the "
                                "balancer rather than by the hash", value=sum(len(placed) for placed in
                                                                             broker.cluster.placements.values()))
        yield GaugeMetricFamily("kgate_offline_partitions", "Partitions this broker owns but cannot serve "
                                "(a damaged ledger): each answers KAFKA_STORAGE_ERROR", value=len(broker.offline))
        clients = GaugeMetricFamily("kgate_connections", "Open connections by client software (ApiVersions v3+)",
                                    labels=["client_software_name", "client_software_version"])
        software: dict[tuple[str, str], int] = {}
        for connection in list(broker.connections):
            key = connection.info.client_software or ("unknown", "unknown")
            software[key] = software.get(key, 0) + 1
        for (name, version), count in sorted(software.items()):
            clients.add_metric([name, version], count)
        yield clients
        dirty = GaugeMetricFamily("kgate_log_cleaner_dirty_ratio", "Share of each compacted partition's cleanable "
                                  "bytes written since its last compaction pass", labels=["topic", "partition"])
        ratios = broker.log_cleaner.dirty_ratios()
        for (topic, index), ratio in sorted(ratios.items()):
            dirty.add_metric([topic, str(index)], ratio)
        yield dirty
        yield GaugeMetricFamily("kgate_log_cleaner_max_dirty_percent", "The highest dirty ratio of the compacted "
                                "partitions served here, in percent (Kafka's max-dirty-percent)",
                                value=100 * max(ratios.values(), default=0.0))
        sessions = broker.fetch_sessions
        yield GaugeMetricFamily("kgate_fetch_sessions", "Incremental fetch sessions cached (KIP-227)",
                                value=len(sessions))
        yield GaugeMetricFamily("kgate_fetch_session_partitions", "Partitions in the cached fetch sessions",
                                value=sessions.partitions)
        yield CounterMetricFamily("kgate_fetch_session_evictions", "Fetch sessions evicted to make room for others",
                                  value=sessions.evictions)
        yield GaugeMetricFamily("kgate_queued_request_bytes", "Request bytes read and not yet answered",
                                value=broker.request_bytes.total)
        yield GaugeMetricFamily("kgate_queued_response_bytes", "Fetched bytes in answers not yet on the socket",
                                value=broker.response_bytes.total)

    @staticmethod
    def _ownership_gaps(broker) -> GaugeMetricFamily:
        gaps = GaugeMetricFamily("kgate_ownership_gaps", "Partitions the cluster assigns to this broker that it "
                                 "does not serve: the previous owner still holds the claim, or the partition is "
                                 "offline (see kgate_offline_partitions)", labels=["topic"])
        for topic in list(broker.cluster.topics.values()):
            owners = broker.ownership.owners(topic)
            missing = sum(1 for index, owner in enumerate(owners)
                          if owner == broker.node_id and (topic.name, index) not in broker.partitions)
            if missing:
                gaps.add_metric([topic.name], missing)
        return gaps

    @staticmethod
    def _group_lag(broker) -> GaugeMetricFamily:
        """Computed where the group's offsets are (its coordinator) for the partitions served here:
        all of them on a single node; in a cluster, a partition owned by another broker is left out."""
        lag = GaugeMetricFamily("kgate_group_lag_records", "Records between each group's committed offsets and "
                                "the high watermark, per topic, for the groups this broker coordinates and the "
                                "partitions it serves", labels=["group", "topic"])
        for group in list(broker.groups.groups.values()):
            per_topic: dict[str, int] = {}
            for (topic, index), committed in list(group.offsets.items()):
                partition = broker.partitions.get((topic, index))
                if partition is not None:
                    behind = max(0, partition.ledger.high_watermark - committed.offset)
                    per_topic[topic] = per_topic.get(topic, 0) + behind
            for topic, records in sorted(per_topic.items()):
                lag.add_metric([group.group_id, topic], records)
        return lag
