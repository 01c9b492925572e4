"""The last hour of the brokers' metrics, for the console's charts.

Given the brokers' Prometheus endpoints (``--metrics``), a thread scrapes them every
``interval`` seconds and keeps an hour of two figures: bytes produced per topic
(``kgate_topic_bytes_in_total``, summed over brokers) and lag per group
(``kgate_group_lag_records``); and the latest WAL upload lag of each broker on object
storage. Without endpoints there are no charts and nothing runs."""
import collections
import threading
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from .html_pages import Raw, esc, table

HOUR = 3600.0
# What a kgate broker on object storage says of its WAL, shown per broker on the overview.
STORAGE_GAUGES = {"kgate_wal_upload_lag_seconds": "WAL upload lag (s)"}


class MetricsHistory:
    def __init__(self, urls: list[str], interval: float = 15.0):
        self.urls = urls
        self.interval = interval
        self._samples: collections.deque = collections.deque(maxlen=int(HOUR / interval) + 1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="metrics-history", daemon=True)
        self.error: str | None = None
        self.storage: dict[str, dict[str, float]] = {}  # endpoint -> the latest STORAGE_GAUGES

    def start(self) -> "MetricsHistory":
        if self.urls:
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.scrape_once()
            self._stop.wait(self.interval)

    def scrape_once(self) -> None:
        # Sample values are floats (a Counter is typed for int counts).
        topics: collections.defaultdict[str, float] = collections.defaultdict(float)
        lag: collections.defaultdict[str, float] = collections.defaultdict(float)
        storage: dict[str, dict[str, float]] = {}
        try:
            for url in self.urls:
                with urllib.request.urlopen(url, timeout=5) as response:
                    text = response.read().decode()
                for family in text_string_to_metric_families(text):
                    for sample in family.samples:
                        if sample.name == "kgate_topic_bytes_in_total":
                            topics[sample.labels["topic"]] += sample.value
                        elif sample.name == "kgate_group_lag_records":
                            lag[sample.labels["group"]] += sample.value
                        elif sample.name in STORAGE_GAUGES:
                            storage.setdefault(url, {})[STORAGE_GAUGES[sample.name]] = sample.value
        except OSError as exc:
            self.error = f"cannot scrape the metrics endpoints: {exc}"
            return
        self.error = None
        self.storage = storage
        self._samples.append((time.time(), topics, lag))

    def topic_rates(self) -> dict[str, float]:
        """Bytes produced per second per topic between the last two scrapes."""
        if len(self._samples) < 2:
            return {}
        (t0, before, _), (t1, after, _) = self._samples[-2], self._samples[-1]
        return {topic: max(0.0, after[topic] - before.get(topic, 0.0)) / (t1 - t0) for topic in after}

    def throughput_chart(self) -> str:
        points = []
        samples = list(self._samples)
        for (t0, before, _), (t1, after, _) in zip(samples, samples[1:]):
            points.append((t1, max(0.0, sum(after.values()) - sum(before.values())) / (t1 - t0)))
        return self._chart("Bytes produced per second, all topics, last hour", points, "throughput-chart")

    def lag_chart(self, group: str) -> str:
        points = [(t, lag[group]) for t, _, lag in self._samples if group in lag]
        return self._chart(f"Lag of {group}, last hour (records)", points, "lag-chart")

    def _chart(self, title: str, points: list[tuple[float, float]], chart_id: str) -> str:
        if not self.urls:
            return ""
        if self.error:
            return f"<h2>{esc(title)}</h2><p>{esc(self.error)}</p>"
        if len(points) < 2:
            return f"<h2>{esc(title)}</h2><p>Collecting: a chart appears after a few scrapes.</p>"
        width, height = 600, 120
        now, top = time.time(), max(value for _, value in points) or 1.0
        line = " ".join(f"{width * (1 - (now - t) / HOUR):.1f},{height - height * value / top:.1f}"
                        for t, value in points)
        return Raw(f"<h2>{esc(title)}</h2><svg id=\"{chart_id}\" width=\"{width}\" height=\"{height}\" "
                   f"viewBox=\"0 0 {width} {height}\"><polyline fill=\"none\" stroke=\"#3366cc\" stroke-width=\"2\" "
                   f"points=\"{line}\"/></svg><p>peak {top:,.0f}</p>")

    def storage_table(self) -> str:
        """The latest WAL upload lag of each endpoint whose broker keeps a WAL (object storage)."""
        if not self.storage:
            return ""
        rows = [(url, *(f"{figures.get(label, 0):.1f}" for label in STORAGE_GAUGES.values()))
                for url, figures in sorted(self.storage.items())]
        return Raw("<h2>Object storage</h2>" + table("wal", ("metrics endpoint", *STORAGE_GAUGES.values()), rows))
