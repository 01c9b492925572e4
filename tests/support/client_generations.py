"""Old client libraries, each behind the same three calls: produce, read, group.

kafka-python 1.4.7 and 2.0.2 run in venvs of their own (scripts/setup-clients), Sarama
1.22 from Debian's Go packages is built offline once into .cache, kcat is Debian's.
Every call is a subprocess bounded by a timeout; consumed records come back as
tests.support.records.Consumed so the usual read-back checks apply.
"""
import hashlib
import json
import os
import subprocess

from . import records as R

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_CACHE = os.path.join(_ROOT, ".cache")
TIMEOUT = 120


def _run(command: list[str], stdin: str | None = None, timeout: float = TIMEOUT) -> str:
    try:
        result = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{os.path.basename(command[0])} did not finish within {timeout} s") from None
    if result.returncode != 0:
        raise RuntimeError(f"{os.path.basename(command[0])} failed ({result.returncode}): {result.stderr[-800:]}")
    return result.stdout


def _consumed(lines: str) -> list[R.Consumed]:
    out = []
    for line in lines.splitlines():
        record = json.loads(line)
        out.append(R.Consumed(record["partition"], record["offset"], record["key"].encode(),
                              record["value"].encode(), tuple((k, v.encode()) for k, v in record.get("headers", ())),
                              record["timestamp"]))
    return out


class OldKafkaPython:
    def __init__(self, version: str, api_version: tuple):
        self.python = os.path.join(_CACHE, "clients", f"kafka-python-{version}", "bin", "python")
        self.api_version = list(api_version)
        self.name = f"kafka-python-{version}-{'.'.join(map(str, api_version))}"

    def _call(self, **args) -> str:
        args["api_version"] = self.api_version
        return _run([self.python, os.path.join(_ROOT, "tests", "support", "kafka_python_driver.py"), json.dumps(args)],
                    timeout=args.get("timeout", TIMEOUT - 10) + 10)

    def produce(self, bootstrap, topic, count, codec="none", first=0, **security):
        self._call(mode="produce", bootstrap=bootstrap, topic=topic, count=count, codec=codec, first=first,
                   **security)

    def read(self, bootstrap, topic, partitions, count, timeout=60, **security) -> list[R.Consumed]:
        return _consumed(self._call(mode="read", bootstrap=bootstrap, topic=topic, partitions=partitions,
                                    count=count, timeout=timeout, **security))

    def group(self, bootstrap, topic, group, count, **security) -> list[R.Consumed]:
        return _consumed(self._call(mode="group", bootstrap=bootstrap, topic=topic, group=group, count=count,
                                    **security))


def sarama_binary() -> str:
    """The Sarama driver, built offline (GOPATH mode, Debian's sources) when its source changes."""
    source = os.path.join(_ROOT, "tests", "support", "sarama_driver", "main.go")
    with open(source, "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()[:16]
    binary = os.path.join(_CACHE, "sarama", f"driver-{digest}")
    if not os.path.exists(binary):
        os.makedirs(os.path.dirname(binary), exist_ok=True)
        env = dict(os.environ, GO111MODULE="off", GOPROXY="off", GOFLAGS="",
                   GOPATH=os.path.join(_CACHE, "sarama", "gopath") + ":/usr/share/gocode",
                   GOCACHE=os.path.join(_CACHE, "sarama", "gocache"))
        result = subprocess.run(["go", "build", "-o", binary + ".tmp", source], env=env, capture_output=True,
                                text=True, timeout=600)
        if result.returncode != 0:
            raise RuntimeError(f"building the Sarama driver failed: {result.stderr[-2000:]}")
        os.replace(binary + ".tmp", binary)
    return binary


class Sarama:
    def __init__(self, version: str):
        self.version = version
        self.name = f"sarama-{version}"

    def _call(self, bootstrap, *args, user=None, password=None, timeout=60) -> str:
        command = [sarama_binary(), "-brokers", bootstrap, "-version", self.version, "-timeout", f"{timeout}s",
                   *map(str, args)]
        if user:
            command += ["-sasl-user", user, "-sasl-password", password]
        return _run(command, timeout=timeout + 10)

    def produce(self, bootstrap, topic, count, codec="none", first=0, **security):
        self._call(bootstrap, "-mode", "produce", "-topic", topic, "-count", count, "-codec", codec,
                   "-first", first, **security)

    def read(self, bootstrap, topic, partitions, count, timeout=60, **security) -> list[R.Consumed]:
        return _consumed(self._call(bootstrap, "-mode", "read", "-topic", topic, "-partitions", partitions,
                                    "-count", count, timeout=timeout, **security))

    def group(self, bootstrap, topic, group, count, **security) -> list[R.Consumed]:
        return _consumed(self._call(bootstrap, "-mode", "group", "-topic", topic, "-group", group,
                                    "-count", count, **security))


class Kcat:
    """Debian's kcat; ``legacy`` forces the 0.9 generation (no ApiVersions, magic 0)."""

    def __init__(self, legacy: bool):
        self.options = ["-X", "api.version.request=false", "-X", "broker.version.fallback=0.9.0"] if legacy else []
        self.name = "kcat-0.9" if legacy else "kcat"

    def _call(self, bootstrap, *args, stdin=None, user=None, password=None, mechanism=None, timeout=TIMEOUT) -> str:
        command = ["kcat", "-b", bootstrap, *self.options, *args]
        if user:
            command += ["-X", "security.protocol=SASL_PLAINTEXT", "-X", f"sasl.mechanisms={mechanism}",
                        "-X", f"sasl.username={user}", "-X", f"sasl.password={password}"]
        return _run(command, stdin, timeout)

    def produce(self, bootstrap, topic, count, codec="none", first=0, **security):
        lines = "".join(f"k{i}\t{R.value(i).decode()}\n" for i in range(first, first + count))
        self._call(bootstrap, "-P", "-t", topic, "-K", "\t", "-z", codec, "-X", "acks=all", stdin=lines,
                   **security)

    def read(self, bootstrap, topic, partitions, count, timeout=60, **security) -> list[R.Consumed]:
        out = self._call(bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-c", str(count), "-J",
                         timeout=timeout, **security)
        return [R.Consumed(m["partition"], m["offset"], m["key"].encode(), m["payload"].encode(), (),
                           m["ts"] if m.get("tstype", "none") != "none" else R.NO_TIMESTAMP)
                for m in map(json.loads, out.splitlines())]
