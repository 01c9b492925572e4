"""A Kafka Connect 4.4 worker in distributed mode as a child process, for tests.

Its REST API listens on 127.0.0.1 on a port checked free; its settings file and log go to a
directory the caller owns; it is stopped by PID (SIGTERM, or kill -9 for a crash). The jars
come from ``scripts/setup-ecosystem``.
"""
import json
import urllib.error
import urllib.request
from pathlib import Path

from conformance.kafka_broker import free_port
from tests.support.java_application import INSTALL, JavaApplication

LIB, CLASSES = INSTALL / "connect" / "lib", INSTALL / "connect" / "classes"
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"


class ConnectWorker(JavaApplication):
    """One worker of the Connect group ``group``; ``settings`` add to or override its defaults."""

    def __init__(self, directory: Path, bootstrap: str, group: str, settings: dict | None = None):
        self.port = free_port()
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
