"""Old client generations behind one interface, shaped like tests.support.clients.

Every client has ``magic`` (the message format its generation writes and reads),
``sets_fields`` (whether it gives records the timestamps and headers of
tests.support.records where its magic carries them; kcat cannot), ``codecs``,
``has_groups``, ``produce(bootstrap, topic, count, codec)`` (records 0..count-1 of
tests.support.records; returns ``{index: (partition, offset)}`` as the client's
delivery reports gave them, or None when the client reports none),
``consume(bootstrap, topic, partitions, count)`` and, where it has groups,
``group_consume(bootstrap, topic, group, count)`` that reads ``count`` records as a
group member and commits exactly those. Consumers return records.Consumed.

kafka-python releases run from venvs of their own under .cache/clients (scripts/setup),
Sarama is built offline from Debian's Go sources into .cache on first use, kcat is
Debian's. Every child process is bounded by a timeout and killed (by PID) when it
runs over.
"""
import hashlib
import json
import os
import subprocess
import time

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaException, Producer, TopicPartition

from .. import records as R

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CACHE = os.path.join(ROOT, ".cache")
HERE = os.path.dirname(os.path.abspath(__file__))
LEGACY_CODECS = ("none", "gzip", "snappy", "lz4")


def run(command: list[str], timeout: float, stdin: str | None = None, env: dict | None = None,
        cwd: str | None = None) -> str:
    """Run to completion within ``timeout`` (killed if not); stdout, or RuntimeError with stderr."""
    name = os.path.basename(command[0])
    try:
        result = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=timeout, env=env,
                                cwd=cwd)
    except subprocess.TimeoutExpired as exc:  # subprocess.run has killed the child by then
        raise RuntimeError(f"{name} {command[1:3]} did not finish within {timeout} s: {exc.stderr}") from None
    if result.returncode != 0:
        raise RuntimeError(f"{name} {command[1:3]} exited {result.returncode}: {result.stderr[-2000:]}")
    return result.stdout


def _json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _consumed(rows: list[dict]) -> list[R.Consumed]:
    return [R.Consumed(r["partition"], r["offset"], r["key"].encode(), r["value"].encode(),
                       tuple((k, v.encode()) for k, v in r.get("headers", ())), r["timestamp"]) for r in rows]


def _delivered(rows: list[dict]) -> dict[int, tuple[int, int]]:
    return {r["index"]: (r["partition"], r["offset"]) for r in rows}


class OldKafkaPython:
    """kafka-python ``version`` pinned to ``api_version``: (0, 9) writes magic 0, (0, 10, 0) magic 1."""

    has_groups = True
    codecs = LEGACY_CODECS
    sets_fields = True

    def __init__(self, version: str, api_version: tuple):
        self.python = os.path.join(CACHE, "clients", f"kafka-python-{version}", "bin", "python")
        self.api_version = api_version
        self.magic = 1 if api_version >= (0, 10) else 0
        self.name = f"kafka-python-{version}-api-{'.'.join(map(str, api_version))}"

    def available(self) -> str | None:
        """Why this client cannot run here, or None."""
        return None if os.path.exists(self.python) else f"{self.python} missing: run scripts/setup"

    def _call(self, mode: str, timeout: float = 60, **args) -> list[dict]:
        args.update(mode=mode, api_version=self.api_version, timeout=timeout)
        return _json_lines(run([self.python, os.path.join(HERE, "kafka_python_driver.py"), json.dumps(args)],
                               timeout + 30))

    def produce(self, bootstrap, topic, count, codec="none"):
        return _delivered(self._call("produce", bootstrap=bootstrap, topic=topic, count=count, codec=codec))

    def consume(self, bootstrap, topic, partitions, count, timeout=60):
        return _consumed(self._call("consume", timeout, bootstrap=bootstrap, topic=topic, partitions=partitions,
                                    count=count))

    def group_consume(self, bootstrap, topic, group, count, timeout=60):
        return _consumed(self._call("group", timeout, bootstrap=bootstrap, topic=topic, group=group, count=count))


def sarama_binary() -> str:
    """The Sarama driver, built offline (GOPATH mode over Debian's Go sources) once per source version."""
    source_dir = os.path.join(HERE, "sarama_driver")
    with open(os.path.join(source_dir, "main.go"), "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()[:16]
    cache = os.path.join(CACHE, "legacy-clients", "sarama")
    binary = os.path.join(cache, f"sarama-driver-{digest}")
    if not os.path.exists(binary):
        os.makedirs(cache, exist_ok=True)
        env = dict(os.environ, GO111MODULE="off", GOPROXY="off", GOFLAGS="", CGO_ENABLED="1",
                   GOPATH=os.path.join(cache, "gopath") + ":/usr/share/gocode", GOCACHE=os.path.join(cache, "gocache"))
        partial = f"{binary}.{os.getpid()}.tmp"
        run(["go", "build", "-o", partial, "."], timeout=600, env=env, cwd=source_dir)
        os.replace(partial, binary)
    return binary


class Sarama:
    """Sarama 1.22 speaking ``version``: V0_9_0_0 magic 0 (no lz4), V0_10_x magic 1, V2_1_0_0 magic 2.
    Consumer groups (sarama.ConsumerGroup) need V0_10_2_0 or later."""

    ORDER = ["V0_9_0_0", "V0_10_0_0", "V0_10_2_0", "V1_0_0_0", "V2_1_0_0"]

    def __init__(self, version: str, sasl: dict | None = None):
        self.version = version
        rank = self.ORDER.index(version)
        self.name = f"sarama-{version}"
        self.codecs = LEGACY_CODECS[:3] if rank == 0 else LEGACY_CODECS
        self.magic = 0 if rank == 0 else 2 if rank >= self.ORDER.index("V1_0_0_0") else 1
        self.sets_fields = True
        self.has_groups = rank >= 2
        self.sasl = sasl or {}

    def available(self) -> str | None:
        return None if os.path.exists("/usr/share/gocode/src/github.com/Shopify/sarama") else \
            "golang-github-shopify-sarama-dev missing: run scripts/setup"

    def _call(self, command, bootstrap, topic, timeout=60, **flags) -> list[dict]:
        argv = [sarama_binary(), command, "-brokers", bootstrap, "-topic", topic, "-version", self.version,
                "-timeout", f"{timeout}s"]
        for flag, value in {**flags, **self.sasl}.items():
            argv += [f"-{flag.replace('_', '-')}", str(value)]
        return _json_lines(run(argv, timeout + 30))

    def produce(self, bootstrap, topic, count, codec="none"):
        return _delivered(self._call("produce", bootstrap, topic, count=count, codec=codec))

    def consume(self, bootstrap, topic, partitions, count, timeout=60):
        return _consumed(self._call("consume", bootstrap, topic, timeout, partitions=partitions, count=count))

    def group_consume(self, bootstrap, topic, group, count, timeout=60):
        return _consumed(self._call("group-consume", bootstrap, topic, timeout, group=group, count=count))


LEGACY_CONFIG = {"api.version.request": False, "broker.version.fallback": "0.9.0"}


class Kcat:
    """Debian's kcat (librdkafka 2.0.2); ``legacy`` forces the 0.9 generation (no ApiVersions, magic 0)."""

    has_groups = True
    sets_fields = False  # no per-record timestamp or header from kcat -P

    def __init__(self, legacy: bool):
        self.options = [x for k, v in LEGACY_CONFIG.items() for x in ("-X", f"{k}={str(v).lower()}")] \
            if legacy else []
        self.name = "kcat-0.9" if legacy else "kcat"
        self.codecs = LEGACY_CODECS if legacy else LEGACY_CODECS + ("zstd",)
        self.magic = 0 if legacy else 2

    def available(self) -> str | None:
        return None if os.path.exists("/usr/bin/kcat") else "kcat missing: run scripts/setup"

    def _run(self, bootstrap, *args, stdin=None, timeout=60) -> str:
        return run(["kcat", "-b", bootstrap, *self.options, "-q", *args], timeout, stdin)

    def produce(self, bootstrap, topic, count, codec="none"):
        lines = "".join(f"{R.key(i).decode()}\t{R.value(i).decode()}\n" for i in range(count))
        self._run(bootstrap, "-P", "-t", topic, "-K", "\t", "-z", codec, "-X", "acks=all", stdin=lines)
        return None  # kcat -P prints no delivery reports

    def _read(self, text: str) -> list[R.Consumed]:
        return [R.Consumed(m["partition"], m["offset"], m["key"].encode(), m["payload"].encode(),
                           tuple(zip(m.get("headers", [])[::2], (v.encode() for v in m.get("headers", [])[1::2]))),
                           m["ts"] if m.get("tstype", "none") != "none" else R.NO_TIMESTAMP)
                for m in _json_lines(text)]

    def consume(self, bootstrap, topic, partitions, count, timeout=60):
        return self._read(self._run(bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-c", str(count),
                                    "-J", timeout=timeout))

    def group_consume(self, bootstrap, topic, group, count, timeout=60):
        """kcat -G stores the offset of each record it prints and commits them as it closes."""
        return self._read(self._run(bootstrap, "-G", group, "-X", "auto.offset.reset=earliest",
                                    "-c", str(count), "-J", topic, timeout=timeout))


class Confluent:
    """confluent-kafka 2.16.1 in this venv, forced to the 0.9 generation (``legacy``) or as it is."""

    has_groups = True
    sets_fields = True

    def __init__(self, legacy: bool):
        self.config = dict(LEGACY_CONFIG) if legacy else {}
        self.name = "confluent-kafka-0.9" if legacy else "confluent-kafka"
        self.codecs = LEGACY_CODECS if legacy else ("lz4", "zstd")
        self.magic = 0 if legacy else 2

    def available(self) -> str | None:
        return None

    def produce(self, bootstrap, topic, count, codec="none", timeout=60):
        producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5,
                             "acks": "all", **self.config})
        delivered, failures = {}, []

        def report(err, message):
            if err is not None:
                failures.append(err)
            else:
                delivered[R.index_of_key(message.key())] = (message.partition(), message.offset())

        for i in range(count):
            producer.produce(topic, key=R.key(i), value=R.value(i), headers=R.headers(i) if self.magic == 2 else None,
                             timestamp=R.timestamp(i), on_delivery=report)
            producer.poll(0)
        remaining = producer.flush(timeout)
        assert remaining == 0 and not failures, f"{remaining} undelivered after {timeout} s; failures {failures[:3]}"
        return delivered

    def _poll(self, consumer, count, timeout) -> list[R.Consumed]:
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            for message in consumer.consume(count - len(out), timeout=0.2):
                if message.error():
                    raise KafkaException(message.error())
                kind, timestamp = message.timestamp()
                out.append(R.Consumed(message.partition(), message.offset(), message.key(), message.value(),
                                      tuple(message.headers() or ()),
                                      R.NO_TIMESTAMP if kind == TIMESTAMP_NOT_AVAILABLE else timestamp))
        return out

    def consume(self, bootstrap, topic, partitions, count, timeout=60):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                             **self.config})
        try:
            consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
            return self._poll(consumer, count, timeout)
        finally:
            consumer.close()

    def group_consume(self, bootstrap, topic, group, count, timeout=60):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", **self.config})
        try:
            consumer.subscribe([topic])
            out = self._poll(consumer, count, timeout)
            positions = {}
            for record in out:
                positions[record.partition] = max(positions.get(record.partition, 0), record.offset + 1)
            if positions:
                consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in positions.items()],
                                asynchronous=False)
            return out
        finally:
            consumer.close()
