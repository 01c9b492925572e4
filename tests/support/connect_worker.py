"""A Kafka Connect 4.4 worker in distributed mode as a child process, for tests, and a group
of them with the files and topics their connectors copy between.

Its REST API listens on 127.0.0.1 on a port checked free; its settings file and log go to a
directory the caller owns; it is stopped by PID (SIGTERM, or kill -9 for a crash). The jars
come from ``scripts/setup-ecosystem``.
"""
import itertools
import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from tests.support.cluster import log_end
from tests.support.java_application import INSTALL, JavaApplication
from tests.support.member_process import wait_for
from tests.support.ports import free_ports

LIB, CLASSES = INSTALL / "connect" / "lib", INSTALL / "connect" / "classes"
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"
SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
EXACTLY_ONCE_WORKER = {
    "exactly.once.source.support": "enabled",
    # A sink reads only committed records: the aborted transaction of a killed source task is not
    # copied to the sink file.
    "consumer.isolation.level": "read_committed",
    "offset.flush.interval.ms": "1000",
    # A worker killed with kill -9 leaves the group after this, and its tasks are handed out again
    # this long after, not Kafka's defaults of 10 s and 5 min.
    "session.timeout.ms": "6000",
    "heartbeat.interval.ms": "1000",
    "scheduled.rebalance.max.delay.ms": "2000",
    # Before it fences a restarted source task's zombies the leader reads its config topic to the
    # end within this, or fails the task for good ("Failed to read to end of config topic before
    # performing zombie fencing"). Connect's default, 3 s, was missed twice in suite runs on a
    # 2-core machine running the rest of the suite, while the partitions moved back to a broker
    # restarted a moment before; the tests are about what the brokers keep, not that margin.
    "worker.sync.timeout.ms": "15000",
}


class ConnectWorker(JavaApplication):
    """One worker of the Connect group ``group``; ``settings`` add to or override its defaults."""

    def __init__(self, directory: Path, bootstrap: str, group: str, settings: dict | None = None):
        self.port = free_ports(1)[0]
        super().__init__(directory, "worker", f"{CLASSES}:{LIB / '*'}",
                         "org.apache.kafka.connect.cli.ConnectDistributed", {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "config.storage.topic": f"{group}-configs",
            "offset.storage.topic": f"{group}-offsets",
            "status.storage.topic": f"{group}-status",
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "key.converter": STRING_CONVERTER,
            "value.converter": STRING_CONVERTER,
            "listeners": f"http://127.0.0.1:{self.port}",
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": str(self.port),
            # Plugins from their service manifests only: scanning every class on the path took
            # 20 s of the worker's start here.
            "plugin.discovery": "service_load",
            **(settings or {}),
        })

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def worker_id(self) -> str:
        """How the REST API names this worker in a connector's status."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> "ConnectWorker":
        if not CLASSES.is_dir():
            raise RuntimeError("Kafka Connect is not installed: run scripts/setup-ecosystem")
        return super().start()

    def rest(self, method: str, path: str, body: dict | None = None) -> tuple[int, object]:
        """One REST request: (status, decoded JSON body or None); a refused connection is status 0."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, text = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read()
        except (ConnectionError, urllib.error.URLError):
            return 0, None
        try:
            return status, json.loads(text) if text else None
        except ValueError:  # Jetty's own pages (a 404 before the herder is ready) are HTML
            return status, text.decode(errors="replace")


def _rebalance_expected(status: int, body) -> bool:
    return status == 500 and isinstance(body, dict) and "a rebalance is expected" in str(body.get("message"))


@dataclass
class ConnectCluster:
    bootstrap: str
    group: str
    workers: list[ConnectWorker]
    directory: Path

    def rest(self, method: str, path: str, body: dict | None = None, expect: int = 200,
             retry: tuple[int, ...] = (0, 409, 503)):
        """A request to the first live worker, retried while the group rebalances (409), a
        request forwarded to the leader finds it not yet ready, or the worker has read a config
        change and not yet rebalanced for it (Connect answers that with a 500 of its own,
        RebalanceNeededException); fails on any other status."""
        def answered():
            worker = next(w for w in self.workers if w.alive())
            status, body_out = worker.rest(method, path, body)
            if status == expect:
                return (body_out,)
            assert status in retry or _rebalance_expected(status, body_out), \
                f"{method} {path}: {status} {body_out}\n{self.errors()}"
            return None
        return wait_for(answered, 60, f"{method} {path} answered {expect}")[0]

    def status(self, connector: str) -> dict:
        """A new connector has no status until its worker has written one (404 until then)."""
        return self.rest("GET", f"/connectors/{connector}/status", retry=(0, 404, 409, 503))

    def wait_state(self, connector: str, state: str, timeout: float = 60) -> dict:
        """The connector and its one task in ``state``; the status then."""
        def reached():
            status = self.status(connector)
            states = [status["connector"]["state"], *(task["state"] for task in status["tasks"])]
            return status if len(states) == 2 and set(states) == {state} else None
        return self.wait(reached, timeout, f"{connector} {state}")

    def wait(self, condition, timeout: float, what: str):
        """wait_for, with the workers' ERROR lines as they are at the timeout in its message."""
        try:
            return wait_for(condition, timeout, what, interval=0.2)
        except AssertionError as timed_out:
            raise AssertionError(f"{timed_out}\n{self.errors()}") from None

    def errors(self) -> str:
        """Every worker's ERROR lines with the exception and causes each one logged (a stack
        trace's first line and its "Caused by" lines), for failure messages."""
        kept = []
        for worker in self.workers:
            lines = worker.log().splitlines()
            for i, line in enumerate(lines):
                if " ERROR " not in line:
                    continue
                kept.append(f"worker {worker.worker_id}: {line}")
                trace = itertools.takewhile(lambda later: later[:1] in ("\t", " ") or later.startswith(
                    ("Caused by", "org.", "java.", "javax.")), lines[i + 1:])
                kept += [f"    {later.strip()}" for later in trace if not later.lstrip().startswith(("at ", "..."))]
        return "\n".join(kept)


def lines(path: Path) -> list[str]:
    """The file's complete lines (a line the sink is still writing is left out)."""
    text = path.read_text() if path.exists() else ""
    return text[:text.rfind("\n") + 1].splitlines()


def append(path: Path, first: int, count: int) -> list[str]:
    written = [f"line {n:05d}" for n in range(first, first + count)]
    with open(path, "a") as out:
        out.write("".join(f"{line}\n" for line in written))
    return written


class TopicReader:
    """The values of a one-partition topic from its start, as a consumer at ``isolation`` sees them."""

    def __init__(self, bootstrap: str, topic: str, isolation: str):
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}-{isolation}",
                                  "enable.auto.commit": False, "isolation.level": isolation})
        self.partition = TopicPartition(topic, 0, 0)
        self.consumer.assign([self.partition])
        self.values: list[str] = []

    def read(self) -> list[str]:
        for message in self.consumer.consume(500, timeout=0.5):
            assert message.error() is None, message.error()
            self.values.append(message.value().decode())
        return self.values

    def to_end(self) -> list[str]:
        """Everything up to the log's end offset at the call (its last stable offset, when every
        transaction has ended)."""
        # Asked again while the partition's leader moves (it did a moment ago in the failover tests).
        end = log_end(self.consumer, self.partition, time.monotonic() + 60)
        wait_for(lambda: self.read() is not None and self.consumer.position([self.partition])[0].offset >= end,
                 60, f"{self.partition.topic} read to offset {end}", interval=0)
        return self.values

    def close(self) -> None:
        self.consumer.close()


def wait_lines(path: Path, expected: list[str], cluster: ConnectCluster, timeout: float = 90) -> None:
    """The file holds exactly ``expected``: a wrong line or one too many fails at once."""
    def complete():
        got = lines(path)
        assert got == expected[:len(got)], f"{path.name} diverged: {got[-5:]} ... expected {len(expected)} lines"
        return got == expected
    cluster.wait(complete, timeout, f"{len(expected)} lines in {path.name}")
