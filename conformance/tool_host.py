"""Kafka's command-line tools run in one long-lived JVM (``conformance/kafka/ToolHost.java``)
instead of one JVM each: for callers that run tools by the dozen, such as the tools comparison
(compat-matrix/kafka_tools.py) and the Streams group descriptions.

A tool's JVM costs about a second of CPU to start even from its class archive, more than most
commands take once started; a host pays it once. What a command answers is what the same
command run by ``tool_command`` answers: its exit status and its stdout followed by its stderr
(a stack trace in it has the host's frames below the tool's main).
Tools that end through shutdown hooks or ``System.exit`` (the verifiable producer and consumer,
the console clients, the perf tests) still want a process of their own: ``HOSTED`` names those
a host runs.
"""
import subprocess
import threading
from pathlib import Path

from conformance import class_archives
from conformance.kafka_broker import ROOT, TOOL_JVM, TOOLS, classpath

CLASSES = ROOT / ".cache" / "kafka" / "classes"
LOG4J = ROOT / "conformance" / "kafka" / "tool-host-log4j2.properties"
HOSTED = frozenset({"kafka-topics", "kafka-configs", "kafka-consumer-groups", "kafka-share-groups",
                    "kafka-streams-groups", "kafka-acls", "kafka-transactions", "kafka-get-offsets",
                    "kafka-delete-records", "kafka-log-dirs", "kafka-reassign-partitions", "kafka-features"})


class ToolHost:
    """One host JVM, its working directory ``cwd`` (where tools resolve relative paths). Commands
    run one at a time; a context manager, stopped by PID."""

    def __init__(self, cwd: str | Path, log_path: str | Path):
        self.cwd, self.log_path = cwd, log_path
        self.process: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def __enter__(self) -> "ToolHost":
        if not (CLASSES / "ToolHost.class").exists():
            raise RuntimeError("the Kafka tool host is not built: run scripts/setup-kafka")
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                ["java", *TOOL_JVM, *class_archives.options("tools"), f"-Dlog4j2.configurationFile={LOG4J}",
                 "-cp", f"{classpath()}:{CLASSES}", "ToolHost"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, cwd=self.cwd)
        return self

    def run(self, name: str, *args: str, timeout: int = 120) -> tuple[int, str]:
        """Tool ``name`` (a bin/ script's name in ``HOSTED``) with ``args``: its exit status (-1 if
        it was still running after ``timeout`` seconds) and its output."""
        if name not in HOSTED:
            raise ValueError(f"{name} does not run in a tool host (it wants a JVM of its own)")
        if any("\t" in arg or "\n" in arg for arg in args):
            raise ValueError(f"a tool host takes no tab or newline in an argument: {args}")
        with self._lock:
            assert self.process is not None and self.process.stdin and self.process.stdout
            self.process.stdin.write(("\t".join([str(timeout), TOOLS[name], *args]) + "\n").encode())
            self.process.stdin.flush()
            header = self.process.stdout.readline().split()
            if len(header) != 3 or header[0] != b"EXIT":
                raise RuntimeError(f"the Kafka tool host stopped answering (its log: {self.log_path})")
            return int(header[1]), self.process.stdout.read(int(header[2])).decode()

    def __exit__(self, *exc_info) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None
