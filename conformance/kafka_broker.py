"""Apache Kafka 4.4 as a child process: the reference broker kgate is compared with.

One node in KRaft combined mode (broker and controller) on 127.0.0.1, its ports checked
free (or one node of a quorum of several, each in a network namespace of its own:
``Quorum``), its storage in a directory the caller owns (formatted on first start, with the
SCRAM users it is given), stopped by PID. The jars come from ``scripts/setup-kafka``; this module
also runs Kafka's command-line tools with the same classpath (``scripts/kafka-tool``).

``python -m conformance.kafka_broker`` (``scripts/kafka``) starts one, prints its bootstrap
address as ``kafka listening on ...`` lines and stops it on SIGTERM or Ctrl-C.
"""
import argparse
import base64
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from conformance import class_archives
from tests.support.ports import free_ports

ROOT = Path(__file__).resolve().parent.parent
LIB = ROOT / ".cache" / "kafka" / "lib"
READY_LINE = "Kafka Server started"
READY_PREFIX = "kafka listening on "
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")

# Kafka's command-line tools, by the names of their bin/ scripts, and the classes those scripts run.
TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-streams-groups": "org.apache.kafka.tools.streams.StreamsGroupCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-storage": "kafka.tools.StorageTool",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
}

# A tool's JVM: small and quick to start (tools run for a second and exit).
TOOL_JVM = ["-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.awt.headless=true"]
# A perf-test tool's: what bin/kafka-producer-perf-test.sh and kafka-run-class.sh give it (512 MiB heap, G1,
# the full JIT), so its figures are the ones a Kafka user gets from those scripts.
PERF_TOOL_JVM = ["-Xmx512m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
                 "-Djava.awt.headless=true"]
# The broker's for figures (the benchmarks): Kafka's own defaults (bin/kafka-server-start.sh) but a
# smaller heap, for a shared machine.
BROKER_JVM = ["-Xms256m", "-Xmx1g", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true",
              "-XX:+ExitOnOutOfMemoryError"]
# The broker's otherwise (tests, conformance, scripts/kafka): the same behaviour, started for half the
# CPU. A test's broker lives for seconds to minutes and moves little data, so C2's compilations
# (half of a start's 12 s of CPU) never pay back; the serial collector does the little a small heap
# needs without G1's concurrent threads. With the class archive (conformance/class_archives.py).
QUICK_BROKER_JVM = ["-Xms128m", "-Xmx1g", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                    "-Djava.awt.headless=true", "-XX:+ExitOnOutOfMemoryError"]

LOG4J = """\
Configuration:
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: INFO
      AppenderRef:
        - ref: STDOUT
"""


def classpath() -> str:
    if not LIB.is_dir():
        raise RuntimeError("Apache Kafka is not installed: run scripts/setup-kafka")
    return str(LIB / "*")


def tool_command(name: str, *args: str) -> list[str]:
    """The command line that runs Kafka's tool ``name`` (as its bin/ script would) with ``args``."""
    if name not in TOOLS:
        raise ValueError(f"unknown Kafka tool {name!r}; known: {', '.join(sorted(TOOLS))}")
    jvm = PERF_TOOL_JVM if name.endswith("-perf-test") else [*TOOL_JVM, *class_archives.options("tools")]
    return ["java", *jvm, "-cp", classpath(), TOOLS[name], *args]


def cluster_id() -> str:
    """A random cluster id as Kafka's Uuid prints one (URL-safe base64 of 16 bytes, never led by '-')."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


@dataclass(frozen=True)
class Quorum:
    """A node's place in a KRaft quorum of several combined nodes, each on an address of its own
    (inside a network namespace) with the same fixed ports: its id, every voter's address, the
    cluster id they were all formatted with, and the command the node runs under (one that execs
    it, such as ``ip netns exec NS``). A node alone needs none of it."""
    node_id: int
    voters: dict[int, str]
    cluster_id: str
    wrapper: tuple[str, ...] = ()
    port: int = 9092
    controller_port: int = 9093

    @property
    def host(self) -> str:
        return self.voters[self.node_id]


class KafkaBroker:
    """One KRaft node. ``scram_users`` (name -> password) log in over a SASL_PLAINTEXT listener
    when ``sasl`` is set; ``authorizer`` turns on StandardAuthorizer with ``super_users`` (the
    PLAINTEXT listener's ANONYMOUS principal is one too, since the node's broker half reaches
    its controller half through it). With a ``quorum``, one node of several (see ``Quorum``);
    started with ``launch`` and ``wait_ready`` apart, since none is ready before a majority runs."""

    def __init__(self, data_dir: str, settings: dict | None = None, sasl: bool = False,
                 scram_users: dict[str, str] | None = None, authorizer: bool = False,
                 super_users: tuple[str, ...] = (), jvm_options: list[str] | None = None,
                 quorum: Quorum | None = None):
        self.quorum = quorum
        self.host = quorum.host if quorum else "127.0.0.1"
        self.data_dir = Path(data_dir)
        self.settings = dict(settings or {})
        self.sasl = sasl or bool(scram_users)
        self.scram_users = dict(scram_users or {})
        self.authorizer = authorizer
        self.super_users = super_users
        # None: QUICK_BROKER_JVM and the class archive, as made when the broker starts.
        self.jvm_options = None if jvm_options is None else list(jvm_options)
        self.port = quorum.port if quorum else 0
        self.sasl_port = 0
        self.controller_port = quorum.controller_port if quorum else 0
        self.process: subprocess.Popen | None = None
        self.log_path = self.data_dir / "kafka.log"
        self.format_seconds = 0.0  # the storage format's share of the last start (0 when already formatted)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def sasl_bootstrap(self) -> str:
        return f"{self.host}:{self.sasl_port}"

    def properties(self) -> dict[str, str]:
        listeners = {"PLAINTEXT": self.port, "CONTROLLER": self.controller_port}
        if self.sasl:
            listeners["SASL_PLAINTEXT"] = self.sasl_port
        voters = self.quorum.voters if self.quorum else {0: self.host}
        props = {
            "process.roles": "broker,controller",
            "node.id": str(self.quorum.node_id if self.quorum else 0),
            "controller.quorum.voters": ",".join(f"{node}@{host}:{self.controller_port}"
                                                 for node, host in voters.items()),
            "listeners": ",".join(f"{name}://{self.host}:{port}" for name, port in listeners.items()),
            "advertised.listeners": ",".join(f"{name}://{self.host}:{port}" for name, port in listeners.items()
                                             if name != "CONTROLLER"),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "log.dirs": str(self.data_dir / "logs"),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        if self.sasl:
            prefix = "listener.name.sasl_plaintext."
            plain_users = " ".join(f'user_{name}="{password}"' for name, password in self.scram_users.items())
            props.update({
                "sasl.enabled.mechanisms": "PLAIN," + ",".join(SCRAM_MECHANISMS),
                prefix + "plain.sasl.jaas.config":
                    f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};",
                **{prefix + m.lower() + ".sasl.jaas.config":
                   "org.apache.kafka.common.security.scram.ScramLoginModule required;" for m in SCRAM_MECHANISMS},
            })
        if self.authorizer:
            props["authorizer.class.name"] = AUTHORIZER
            props["super.users"] = ";".join(["User:ANONYMOUS", *(f"User:{u}" for u in self.super_users)])
        props.update({key: str(value) for key, value in self.settings.items()})
        return props

    def _write_config(self) -> Path:
        config = self.data_dir / "server.properties"
        config.write_text("".join(f"{key}={value}\n" for key, value in self.properties().items()))
        (self.data_dir / "log4j2.yaml").write_text(LOG4J)
        return config

    def _format(self, config: Path) -> None:
        """Format the storage once (a restarted node keeps its log directory and cluster id)."""
        if (self.data_dir / "logs" / "meta.properties").exists():
            return
        started = time.monotonic()
        scram = []
        for name, password in self.scram_users.items():
            for mechanism in SCRAM_MECHANISMS:
                scram += ["--add-scram", f"{mechanism}=[name={name},password={password}]"]
        formatted = self.quorum.cluster_id if self.quorum else cluster_id()
        subprocess.run(tool_command("kafka-storage", "format", "-t", formatted, "-c", str(config), *scram),
                       check=True, capture_output=True, timeout=120)
        self.format_seconds = time.monotonic() - started

    def start(self, timeout: float = 90.0) -> "KafkaBroker":
        self.launch()
        self.wait_ready(timeout)
        return self

    def launch(self) -> None:
        """The JVM started (its storage formatted first if new), not yet waited for."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not self.port:
            self.port, self.controller_port, sasl_port = free_ports(3)
            self.sasl_port = sasl_port if self.sasl else 0
        config = self._write_config()
        self._format(config)
        log = open(self.log_path, "ab")
        self.log_offset = log.tell()
        jvm = self.jvm_options
        if jvm is None:
            jvm = [*QUICK_BROKER_JVM, *class_archives.options("broker")]
        command = [*(self.quorum.wrapper if self.quorum else ()), "java", *jvm,
                   f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.yaml'}",
                   "-cp", classpath(), "kafka.Kafka", str(config)]
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()

    def wait_ready(self, timeout: float) -> None:
        """Wait for Kafka's own 'started' line, then for its listener to accept a connection (a
        node in a namespace of its own is not reachable from here: its line is enough)."""
        deadline = time.monotonic() + timeout
        while True:
            with open(self.log_path, "rb") as log:
                log.seek(self.log_offset)
                started = READY_LINE.encode() in log.read()
            if started and (self.quorum is not None or self._accepts()):
                return
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"Kafka did not start within {timeout} s; see {self.log_path}")
            time.sleep(0.1)

    def _accepts(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (Kafka's controlled shutdown), then SIGKILL if it has not exited within ``timeout``."""
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        code, self.process = self.process.returncode, None
        return code

    def rss_kib(self) -> int:
        """The broker JVM's resident set size, from /proc."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0


def _user(text: str) -> tuple[str, str]:
    name, sep, password = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=PASSWORD, got {text!r}")
    return name, password


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/kafka", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", help="storage (formatted on first start); default: a temporary directory")
    parser.add_argument("--sasl-user", type=_user, action="append", default=[], metavar="NAME=PASSWORD",
                        help="a SCRAM (and PLAIN) user; turns on a SASL_PLAINTEXT listener")
    parser.add_argument("--sasl", action="store_true", help="a SASL_PLAINTEXT listener even with no user")
    parser.add_argument("--authorizer", action="store_true", help="turn on StandardAuthorizer (ACLs)")
    parser.add_argument("--super-user", action="append", default=[], metavar="NAME", help="a super user")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a server.properties line")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kafka-") as scratch:
        broker = KafkaBroker(args.data_dir or scratch, dict(item.split("=", 1) for item in args.set),
                             sasl=args.sasl, scram_users=dict(args.sasl_user), authorizer=args.authorizer,
                             super_users=tuple(args.super_user))
        started = time.monotonic()
        broker.start()
        # Blocked only now, so that the JVM started above does not inherit the mask.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
        print(f"{READY_PREFIX}{broker.bootstrap}", flush=True)
        if broker.sasl:
            print(f"{READY_PREFIX}SASL_PLAINTEXT://{broker.sasl_bootstrap}", flush=True)
        print(f"serving after {time.monotonic() - started:.1f} s, RSS {broker.rss_kib() // 1024} MiB; "
              f"log {broker.log_path}", file=sys.stderr, flush=True)
        while broker.process.poll() is None:
            if signal.sigtimedwait([signal.SIGTERM, signal.SIGINT], 1.0):
                break
        return broker.stop()


if __name__ == "__main__":
    sys.exit(main())
