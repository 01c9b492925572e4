"""How to run each client family's driver: one object per (library release, pin).

Every family answers the same calls: ``produce``, ``transact`` (the records in three
transactions: commit, abort, commit), ``read`` (every partition from the beginning, no
group, at the isolation level asked for), ``group`` (read ``count`` records in a group,
of the classic protocol or KIP-848's, commit exactly those, leave) and ``admin``
(create, describe, delete a topic). Families whose library lacks a call have the
column that needs it marked n/a in rows.py. Each call is a
subprocess bounded by a timeout; a crash, a non-zero exit or a timeout raises
``DriverFailed`` with the driver's last words, which becomes the cell's failure.
Consumed records come back as tests.support.records.Consumed for the usual checks.

The drivers (drivers/) share one command line: ``--mode=... --brokers=... --topic=...
--pin=... --codec=... --first=N --count=N --partitions=N --group=G --headers
--idempotent --transactional-id=ID --isolation=LEVEL --group-protocol=P
--sasl-mechanism=M --sasl-user=U --sasl-password=P --client-id=ID
--timeout=SECONDS``. kcat is its own driver: its options are translated here.
Go and Java drivers are compiled into .cache/compat when their source changes.
"""
import glob
import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CACHE = os.path.join(ROOT, ".cache", "compat")
DRIVERS = os.path.join(HERE, "drivers")
if ROOT not in sys.path:
    sys.path.append(ROOT)

from tests.support import records as R  # noqa: E402

TIMEOUT = 60  # seconds a driver may take to do its work; the subprocess gets a margin on top


class DriverFailed(RuntimeError):
    pass


@dataclass(frozen=True)
class Sasl:
    mechanism: str
    user: str
    password: str


def run(command: list[str], stdin: str | None = None, timeout: float = TIMEOUT, env: dict | None = None,
        name: str = "") -> str:
    name = name or os.path.basename(command[0])
    try:
        result = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=timeout,
                                env=None if env is None else dict(os.environ, **env))
    except subprocess.TimeoutExpired:
        raise DriverFailed(f"{name} did not finish within {timeout:.0f} s") from None
    if result.returncode != 0:
        words = [line for line in result.stderr.strip().splitlines() if line.strip()]
        raise DriverFailed(f"{name} exited {result.returncode}: {' | '.join(words[-3:])[-600:]}")
    return result.stdout


def consumed(lines: str) -> list[R.Consumed]:
    """The JSON lines every driver prints, as checked records."""
    out = []
    for line in lines.splitlines():
        record = json.loads(line)
        out.append(R.Consumed(record["partition"], record["offset"], record["key"].encode(),
                              record["value"].encode(), tuple((k, v.encode()) for k, v in record.get("headers", ())),
                              record["timestamp"]))
    return out


def _digest(*paths: str) -> str:
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as fh:
            digest.update(fh.read())
    return digest.hexdigest()[:16]


def _build(target: str, command: list[str], env: dict | None = None) -> None:
    """Run ``command`` to produce ``target`` (a path it writes), once."""
    if os.path.exists(target):
        return
    os.makedirs(os.path.dirname(target), exist_ok=True)
    result = subprocess.run(command, capture_output=True, text=True, timeout=600,
                            env=None if env is None else dict(os.environ, **env))
    if result.returncode != 0 or not os.path.exists(target):
        raise DriverFailed(f"building {os.path.basename(target)} failed: {result.stderr[-2000:]}")


class Client:
    """A driver speaking the shared command line. Subclasses say how to start it."""

    name = ""  # for test ids and topic names

    def command(self) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict | None:
        return None

    def pin(self) -> str:
        return ""

    def call(self, mode: str, timeout: float = TIMEOUT, sasl: Sasl | None = None, **options) -> str:
        argv = [*self.command(), f"--mode={mode}", f"--timeout={timeout}"]
        if self.pin():
            argv.append(f"--pin={self.pin()}")
        if sasl:
            argv += [f"--sasl-mechanism={sasl.mechanism}", f"--sasl-user={sasl.user}",
                     f"--sasl-password={sasl.password}"]
        for name, value in options.items():
            flag = "--" + name.replace("_", "-")
            if value is True:
                argv.append(flag)
            elif value is not False and value is not None:
                argv.append(f"{flag}={value}")
        return run(argv, timeout=timeout + 30, env=self.env(), name=f"{self.name} driver")

    def produce(self, bootstrap, topic, count, codec="none", first=0, headers=False, idempotent=False,
                sasl=None, client_id="kgate-compat", timeout=TIMEOUT) -> None:
        self.call("produce", timeout, sasl, brokers=bootstrap, topic=topic, count=count, codec=codec, first=first,
                  headers=headers, idempotent=idempotent, client_id=client_id)

    def transact(self, bootstrap, topic, count, transactional_id, headers=False, client_id="kgate-compat",
                 timeout=TIMEOUT) -> None:
        self.call("transact", timeout, brokers=bootstrap, topic=topic, count=count, headers=headers,
                  transactional_id=transactional_id, client_id=client_id)

    def read(self, bootstrap, topic, partitions, count, sasl=None, client_id="kgate-compat", isolation=None,
             timeout=TIMEOUT) -> list[R.Consumed]:
        return consumed(self.call("read", timeout, sasl, brokers=bootstrap, topic=topic, partitions=partitions,
                                  count=count, client_id=client_id, isolation=isolation))

    def group(self, bootstrap, topic, group, count, sasl=None, client_id="kgate-compat", group_protocol=None,
              timeout=TIMEOUT) -> list[R.Consumed]:
        return consumed(self.call("group", timeout, sasl, brokers=bootstrap, topic=topic, group=group, count=count,
                                  client_id=client_id, group_protocol=group_protocol))

    def share(self, bootstrap, topic, group, count, client_id="kgate-compat", timeout=TIMEOUT) -> list[R.Consumed]:
        return consumed(self.call("share", timeout, brokers=bootstrap, topic=topic, group=group, count=count,
                                  client_id=client_id))

    def admin(self, bootstrap, topic, partitions, sasl=None, client_id="kgate-compat", timeout=TIMEOUT) -> dict:
        out = self.call("admin", timeout, sasl, brokers=bootstrap, topic=topic, partitions=partitions,
                        client_id=client_id)
        return json.loads(out.strip().splitlines()[-1]) if out.strip() else {}


class PythonClient(Client):
    """A Python library in its own venv (or Debian's interpreter), through drivers/python."""

    def __init__(self, adapter: str, interpreter: str, pin: str = "", name: str = ""):
        self.adapter, self.interpreter, self._pin = adapter, interpreter, pin
        self.name = name or adapter + (f"-{pin}" if pin else "")

    @classmethod
    def in_venv(cls, adapter: str, package: str, version: str, pin: str = "") -> "PythonClient":
        return cls(adapter, os.path.join(CACHE, "python", f"{package}-{version}", "bin", "python"), pin,
                   f"{package}-{version}" + (f"-{pin}" if pin else ""))

    def command(self):
        return [self.interpreter, os.path.join(DRIVERS, "python", "driver.py"), self.adapter]

    def pin(self):
        return self._pin


class Sarama(Client):
    """Debian's Sarama 1.22, built offline (GOPATH mode) from drivers/go."""

    def __init__(self, version: str):
        self.version = version
        self.name = f"sarama-{version}"

    def pin(self):
        return self.version

    def command(self):
        return [self.binary()]

    @staticmethod
    def binary() -> str:
        sources = [os.path.join(DRIVERS, "go", name) for name in ("main.go", "scram.go")]
        target = os.path.join(CACHE, "go", f"sarama-driver-{_digest(*sources)}")
        _build(target, ["go", "build", "-o", target, *sources],
               env={"GO111MODULE": "off", "GOPROXY": "off", "GOFLAGS": "",
                    "GOPATH": os.path.join(CACHE, "go", "gopath") + ":/usr/share/gocode",
                    "GOCACHE": os.path.join(CACHE, "go", "gocache")})
        return target


class Kafkajs(Client):
    def __init__(self, version: str):
        self.version = version
        self.name = f"kafkajs-{version}"

    def command(self):
        return ["node", os.path.join(DRIVERS, "node", "driver.js")]

    def env(self):
        return {"NODE_PATH": os.path.join(CACHE, f"kafkajs-{self.version}", "node_modules")}


class Java(Client):
    """kafka-clients with drivers/java compiled by javac against it: 3.9.1 from .cache/compat/java/lib
    (scripts/setup-compat), 4.4.0 from the jars scripts/setup-kafka resolves."""

    LIBS = {"3.9.1": [os.path.join(CACHE, "java", "lib", "*")],
            "4.4.0": [os.path.join(ROOT, ".cache", "kafka", "lib", jar) for jar in (
                "kafka-clients-4.4.0.jar", "lz4-java-*.jar", "snappy-java-*.jar", "zstd-jni-*.jar", "slf4j-api-*.jar")]}

    def __init__(self, release: str = "3.9.1"):
        self.release = release
        self.name = "kafka-clients" if release == "3.9.1" else f"kafka-clients-{release}"

    def command(self):
        source = os.path.join(DRIVERS, "java", "Driver.java")
        classes = os.path.join(CACHE, "java", f"classes-{self.release}-{_digest(source)}")
        classpath = ":".join(path for pattern in self.LIBS[self.release]
                             for path in (glob.glob(pattern) if "*.jar" in pattern else [pattern]))
        _build(os.path.join(classes, "Driver.class"), ["javac", "-d", classes, "-cp", classpath, source])
        return ["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", f"{classes}:{classpath}", "Driver"]


class Kcat(Client):
    """Debian's kcat (librdkafka 2.0.2); ``pin`` forces a generation (``broker.version.fallback``).

    It sets no per-record headers or timestamps and has no admin API; a group read uses
    its balanced consumer (-G), which commits what it delivered when it exits.
    """

    def __init__(self, pin: str = ""):
        self._pin = pin
        self.name = "kcat" + (f"-{pin}" if pin else "")

    def _options(self, bootstrap, sasl, client_id) -> list[str]:
        options = ["kcat", "-b", bootstrap, "-X", f"client.id={client_id}"]
        if self._pin:
            options += ["-X", "api.version.request=false", "-X", f"broker.version.fallback={self._pin}"]
        if sasl:
            options += ["-X", "security.protocol=SASL_PLAINTEXT", "-X", f"sasl.mechanisms={sasl.mechanism}",
                        "-X", f"sasl.username={sasl.user}", "-X", f"sasl.password={sasl.password}"]
        return options

    def produce(self, bootstrap, topic, count, codec="none", first=0, headers=False, idempotent=False,
                sasl=None, client_id="kgate-compat", timeout=TIMEOUT) -> None:
        lines = "".join(f"{R.key(i).decode()}\t{R.value(i).decode()}\n" for i in range(first, first + count))
        command = [*self._options(bootstrap, sasl, client_id), "-P", "-t", topic, "-K", "\t", "-z", codec,
                   "-X", "acks=all"]
        if idempotent:
            command += ["-X", "enable.idempotence=true"]
        run(command, lines, timeout)

    def _records(self, out: str) -> list[R.Consumed]:
        records = []
        for m in map(json.loads, out.splitlines()):
            flat = m.get("headers") or []
            records.append(R.Consumed(m["partition"], m["offset"], m["key"].encode(), m["payload"].encode(),
                                      tuple((flat[i], flat[i + 1].encode()) for i in range(0, len(flat), 2)),
                                      m["ts"] if m.get("tstype", "none") != "none" else R.NO_TIMESTAMP))
        return records

    def read(self, bootstrap, topic, partitions, count, sasl=None, client_id="kgate-compat",
             timeout=TIMEOUT) -> list[R.Consumed]:
        return self._records(run([*self._options(bootstrap, sasl, client_id), "-C", "-t", topic, "-o", "beginning",
                                  "-e", "-c", str(count), "-J"], timeout=timeout))

    def group(self, bootstrap, topic, group, count, sasl=None, client_id="kgate-compat",
              timeout=TIMEOUT) -> list[R.Consumed]:
        return self._records(run([*self._options(bootstrap, sasl, client_id), "-X", "auto.offset.reset=earliest",
                                  "-G", group, "-c", str(count), "-J", topic], timeout=timeout))
