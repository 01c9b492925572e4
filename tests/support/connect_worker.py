"""A Kafka Connect 4.4 worker in distributed mode as a child process, for tests.

Its REST API listens on 127.0.0.1 on a port checked free; its settings file and log go to a
directory the caller owns; it is stopped by PID (SIGTERM, or kill -9 for a crash). The jars
come from ``scripts/setup-ecosystem``.
"""
import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

from conformance.kafka_broker import free_port
from tests.support.broker_process import terminate

INSTALL = Path(__file__).resolve().parents[2] / ".cache" / "ecosystem" / "connect"
LIB, CLASSES = INSTALL / "lib", INSTALL / "classes"
# Small and quick to start: two workers share this machine with the brokers and the suite.
JVM = ["-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-Djava.awt.headless=true"]
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"


class ConnectWorker:
    """One worker of the Connect group ``group``; ``settings`` add to or override its defaults."""

    def __init__(self, directory: Path, bootstrap: str, group: str, settings: dict | None = None):
        self.directory = directory
        self.port = free_port()
        self.settings = {
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
        }
        self.log_path = directory / "worker.log"
        self.process: subprocess.Popen | None = None

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
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self.directory / "worker.properties"
        config.write_text("".join(f"{key}={value}\n" for key, value in self.settings.items()))
        command = ["java", *JVM, "-cp", f"{CLASSES}:{LIB / '*'}", "org.apache.kafka.connect.cli.ConnectDistributed",
                   str(config)]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """kill -9: the worker leaves its group only when its session times out."""
        self.process.kill()
        self.process.wait(30)

    def stop(self) -> None:
        if self.process is not None:
            terminate(self.process, 30)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

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
