"""MirrorMaker 2 in dedicated mode as a child process, for tests.

It runs the class ``bin/connect-mirror-maker.sh`` runs, with an ``mm2.properties`` written into
a directory the caller owns (its log goes there too), replicating one flow, ``source->target``;
it serves no REST API, so it needs no port. It is stopped by PID. The jars come from
``scripts/setup-ecosystem``.
"""
import subprocess
from pathlib import Path

from tests.support.broker_process import terminate

LIB = Path(__file__).resolve().parents[2] / ".cache" / "ecosystem" / "mirror-maker" / "lib"
# Small and quick to start: it shares this machine with the brokers and the suite.
JVM = ["-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
       # Times on its log lines, to set them beside the test's and the brokers'.
       "-Dorg.slf4j.simpleLogger.showDateTime=true", "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS"]
SOURCE, TARGET = "source", "target"


class MirrorMaker:
    """MM2 replicating ``source`` to ``target``; ``settings`` add to or override the mm2.properties."""

    def __init__(self, directory: Path, source: str, target: str, settings: dict):
        self.directory = directory
        self.settings = {
            "clusters": f"{SOURCE}, {TARGET}",
            f"{SOURCE}.bootstrap.servers": source,
            f"{TARGET}.bootstrap.servers": target,
            f"{SOURCE}->{TARGET}.enabled": "true",
            # No reverse flow, nor its heartbeats: one Connect herder, the one under test.
            f"{TARGET}->{SOURCE}.enabled": "false",
            f"{TARGET}->{SOURCE}.emit.heartbeats.enabled": "false",
            **{f"{topic}.replication.factor": "1" for topic in (
                "checkpoints.topic", "heartbeats.topic", "offset-syncs.topic", "offset.storage",
                "status.storage", "config.storage")},
            "replication.factor": "1",
            **settings,
        }
        self.log_path = directory / "mirror-maker.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> "MirrorMaker":
        if not LIB.is_dir():
            raise RuntimeError("MirrorMaker 2 is not installed: run scripts/setup-ecosystem")
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self.directory / "mm2.properties"
        config.write_text("".join(f"{key} = {value}\n" for key, value in self.settings.items()))
        command = ["java", *JVM, "-cp", str(LIB / "*"), "org.apache.kafka.connect.mirror.MirrorMaker", str(config)]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        if self.process is not None:
            terminate(self.process, 30)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def errors(self) -> str:
        """Its ERROR and WARN lines, for failure messages."""
        return "\n".join(line for line in self.log().splitlines() if " ERROR " in line or " WARN " in line)
