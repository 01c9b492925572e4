"""The Kafka Streams 4.4 application of ``ecosystem/streams`` (PageCounts) as a child process, for
tests: one instance per JVM, its state directory and log in a directory the caller owns, stopped
by PID (SIGTERM, a clean close; or kill -9, a crash). The classes come from
``scripts/setup-ecosystem``.
"""
from pathlib import Path

from tests.support.java_application import INSTALL, JavaApplication

LIB, CLASSES = INSTALL / "streams" / "lib", INSTALL / "streams" / "classes"


class StreamsInstance(JavaApplication):
    """One instance of application ``application``; ``settings`` add to or override StreamsConfig's."""

    def __init__(self, directory: Path, bootstrap: str, application: str, settings: dict):
        super().__init__(directory, "streams", f"{CLASSES}:{LIB / '*'}", "PageCounts", {
            "bootstrap.servers": bootstrap,
            "application.id": application,
            "state.dir": str(directory / "state"),
            "default.key.serde": "org.apache.kafka.common.serialization.Serdes$StringSerde",
            "default.value.serde": "org.apache.kafka.common.serialization.Serdes$StringSerde",
            "replication.factor": "1",
            **settings,
        })

    def start(self) -> "StreamsInstance":
        if not CLASSES.is_dir():
            raise RuntimeError("the Kafka Streams application is not built: run scripts/setup-ecosystem")
        return super().start()

    def errors(self) -> str:
        """Its ERROR lines and state changes, for failure messages."""
        return "\n".join(line for line in self.log().splitlines() if " ERROR " in line or line.startswith("STATE "))
