"""Prometheus metrics of one processor, in a registry of its own.

Counters and the latency histogram are updated as records finish; gauges (records and
bytes in memory, queue length, delayed records, lag, commit age) are read from the
processor's state at each scrape, so keeping them costs nothing per record. A registry
per processor keeps two processors of one process (or of one test run) apart.
"""
import time

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class ProcessingMetrics:
    def __init__(self, processor) -> None:
        self.registry = CollectorRegistry()
        self.records = Counter("kgate_processing_records",
                               "Records finished, by outcome (handled, dead_lettered; share mode: rejected)",
                               ["outcome"], registry=self.registry)
        self.handled = self.records.labels("handled")
        self.dead_lettered = self.records.labels("dead_lettered")
        self.rejected = self.records.labels("rejected")
        self.released = Counter("kgate_processing_released",
                                "Share mode: records given back to the share group unfinished (their lock "
                                "was running out, or the processor stopped)", registry=self.registry)
        self.retries = Counter("kgate_processing_retries", "Failed attempts that were scheduled again",
                               registry=self.registry)
        self.delays = Counter("kgate_processing_delays", "Records a handler put off with Delay",
                              registry=self.registry)
        self.latency = Histogram("kgate_processing_handler_seconds", "Time of one handler attempt",
                                 buckets=LATENCY_BUCKETS, registry=self.registry)
        self.registry.register(_StateCollector(processor))


# Read from the processor's snapshot at each scrape; full names, so the metrics reference of
# the documentation finds them in the source.
STATE_GAUGES = (("kgate_processing_buffered_records", "Records in memory, from taken to finished"),
                ("kgate_processing_buffered_records_max", "Most records in memory at once since start"),
                ("kgate_processing_buffered_bytes", "Key and value bytes of the records in memory"),
                ("kgate_processing_buffered_bytes_max", "Most key and value bytes in memory at once since start"),
                ("kgate_processing_queued_records", "Records free to run waiting for a handler slot"),
                ("kgate_processing_running_records", "Handler attempts under way"),
                ("kgate_processing_delayed_records", "Records waiting out a Delay or a retry backoff"),
                ("kgate_processing_paused", "1 while fetching is paused because memory is full"))


class _StateCollector:
    def __init__(self, processor) -> None:
        self._processor = processor

    def collect(self):
        p = self._processor
        state = p.snapshot()
        for name, help_text in STATE_GAUGES:
            yield GaugeMetricFamily(name, help_text, value=state[name.removeprefix("kgate_processing_")])
        lag = GaugeMetricFamily("kgate_processing_lag_records", "Log end offset minus the commit position",
                                labels=["topic", "partition"])
        age = GaugeMetricFamily("kgate_processing_commit_age_seconds",
                                "Seconds since the partition's last acknowledged commit (or its assignment)",
                                labels=["topic", "partition"])
        now = time.monotonic()
        for (topic, partition), position, high, committed_at in p.partition_figures():
            labels = [topic, str(partition)]
            if high is not None and position is not None:
                lag.add_metric(labels, max(0, high - position))
            age.add_metric(labels, now - committed_at)
        yield lag
        yield age
