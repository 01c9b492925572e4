"""Prometheus metrics of a mirror worker: how far behind, how fast, how often reshuffled.

Lag is given both ways an operator asks about it: in records (source high watermark
minus the acknowledged position) and in seconds from a record's own timestamp to the
target's acknowledgement of it. Audit mismatches come from the controller's periodic audit
(``audit.interval.ms``), so only the controller's worker reports them. Served by
prometheus-client's server on ``--metrics``.
"""
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class MirrorMetrics:
    def __init__(self):
        self.registry = CollectorRegistry()
        labels = ["route", "topic", "partition"]
        self.lag_records = Gauge("kgate_mirror_lag_records", "Source records not yet acknowledged by the target",
                                 labels, registry=self.registry)
        self.lag_seconds = Gauge("kgate_mirror_lag_seconds", "Seconds since the oldest record not yet "
                                 "acknowledged by the target was written at the source", labels,
                                 registry=self.registry)
        self.records = Counter("kgate_mirror_records", "Records acknowledged by the target, per route",
                               ["route"], registry=self.registry)
        self.bytes = Counter("kgate_mirror_bytes", "Key and value bytes acknowledged by the target, per route",
                             ["route"], registry=self.registry)
        self.latency = Histogram("kgate_mirror_replication_latency_seconds", "From a record's timestamp to the "
                                 "target's acknowledgement (the newest record of each partition per copy step)",
                                 ["route"], buckets=LATENCY_BUCKETS,
                                 registry=self.registry)
        self.rebalances = Counter("kgate_mirror_controller_rebalances", "Assignments the controller published "
                                  "that moved partitions between live workers", registry=self.registry)
        self.audit_missing = Gauge("kgate_mirror_audit_missing_records", "Records counted at the source but not "
                                   "found on the target, per route and source topic, in the controller's latest "
                                   "audit of the last audit.window.ms", ["route", "topic"], registry=self.registry)
        self.audit_duplicated = Gauge("kgate_mirror_audit_duplicated_records", "Records found on the target more "
                                      "often than counted at the source, in the controller's latest audit",
                                      ["route", "topic"], registry=self.registry)
        self.moved = Counter("kgate_mirror_partitions_moved", "Partitions moved by rebalances",
                             registry=self.registry)

    def forget(self, route: str, topic: str, partition: int) -> None:
        for gauge in (self.lag_records, self.lag_seconds):
            try:
                gauge.remove(route, topic, str(partition))
            except KeyError:
                pass

    def serve(self, address: str) -> str:
        """Serve /metrics on ``address`` (port 0: a free one); the address it listens on."""
        host, _, port = address.rpartition(":")
        server, _thread = start_http_server(int(port), addr=host or "127.0.0.1", registry=self.registry)
        return f"{host or '127.0.0.1'}:{server.server_port}"
