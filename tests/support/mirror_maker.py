"""MirrorMaker 2 in dedicated mode as a child process, for tests.

It runs the class ``bin/connect-mirror-maker.sh`` runs, with an ``mm2.properties`` replicating
one flow, ``source->target``; it serves no REST API, so it needs no port. The jars come from
``scripts/setup-ecosystem``.
"""
from pathlib import Path

from tests.support.java_application import INSTALL, JavaApplication

LIB = INSTALL / "mirror-maker" / "lib"
SOURCE, TARGET = "source", "target"


class MirrorMaker(JavaApplication):
    """MM2 replicating ``source`` to ``target``; ``settings`` add to or override the mm2.properties."""

    def __init__(self, directory: Path, source: str, target: str, settings: dict, jvm: list[str] | None = None):
        super().__init__(directory, "mm2", str(LIB / "*"), "org.apache.kafka.connect.mirror.MirrorMaker", {
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
            # Its plugins by their ServiceLoader manifests only (all of MM2's have them), not also by
            # a reflective scan of every jar (the herder's worker takes it from the target's settings):
            # those scans were 20-30 s of a start under the suite's load, and a copy test timed out.
            "plugin.discovery": "service_load", f"{TARGET}.plugin.discovery": "service_load",
            **settings,
        }, jvm)

    def start(self) -> "MirrorMaker":
        if not LIB.is_dir():
            raise RuntimeError("MirrorMaker 2 is not installed: run scripts/setup-ecosystem")
        return super().start()

    def errors(self) -> str:
        """Its ERROR and WARN lines, for failure messages."""
        return "\n".join(line for line in self.log().splitlines() if " ERROR " in line or " WARN " in line)
