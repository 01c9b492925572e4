"""Class-data archives of Kafka's JVMs: the suite starts a Kafka tool or broker a hundred times.

A JVM that lives for seconds spends most of its CPU loading, verifying and linking classes.
JDK 17 writes the classes an application loaded into an archive at exit
(``-XX:ArchiveClassesAtExit``) that later JVMs on the same classpath map instead
(``-XX:SharedArchiveFile``). Measured here: a ``kafka-topics --describe`` went from 2.2 to 1.0 s of
CPU, a broker's start (with C1 only) from 6.5 to 4.4 s.

``python -m conformance.class_archives`` (run by ``scripts/setup-kafka``) makes them once: a
broker is started, a topic created and described with ``kafka-topics``, records produced and read
in a group, and the broker stopped. An archive's directory is named for the JDK and Kafka's jars,
so a new JDK or a new Kafka gets new archives, and a JVM is never given one it would refuse (it
would say so in a warning, inside the output of the tool a test compares).
"""
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIB = ROOT / ".cache" / "kafka" / "lib"
ARCHIVES = ROOT / ".cache" / "kafka" / "class-archives"
KINDS = ("broker", "tools")


def _java_home() -> Path | None:
    java = shutil.which("java")
    return Path(os.path.realpath(java)).parent.parent if java else None


@functools.cache
def _key() -> str | None:
    """What the archives were made with: the JDK's build and Kafka's jars (None: neither is here)."""
    home = _java_home()
    if home is None or not LIB.is_dir():
        return None
    release = home / "release"
    digest = hashlib.sha256(release.read_bytes() if release.exists() else str(home).encode())
    for jar in sorted(LIB.iterdir()):
        digest.update(f"{jar.name}:{jar.stat().st_size}\n".encode())
    return digest.hexdigest()[:16]


def path(kind: str) -> Path | None:
    key = _key()
    return ARCHIVES / key / f"{kind}.jsa" if key else None


def options(kind: str) -> list[str]:
    """The JVM option that maps ``kind``'s archive, or none when it is not made (the JVM then
    loads every class from the jars, as it would without one)."""
    archive = path(kind)
    return [f"-XX:SharedArchiveFile={archive}"] if archive is not None and archive.exists() else []


def _produce_and_read(bootstrap: str) -> None:
    """Records produced (idempotent) and read back in a group, its offsets committed; the clients
    closed before the broker stops (a client left open keeps retrying it)."""
    from confluent_kafka import Consumer, Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for n in range(100):
        producer.produce("archive", b"%d" % n)
    unacknowledged = producer.flush(30)
    del producer
    if unacknowledged:
        raise RuntimeError("the training records were not acknowledged")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "archive", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe(["archive"])
        read = 0
        for _ in range(60):
            read += len([m for m in consumer.consume(100, timeout=0.5) if m.error() is None])
            if read >= 100:
                break
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def _train(directory: Path) -> None:
    """One broker and one tool run, each writing its archive into ``directory`` at exit."""
    from conformance.kafka_broker import QUICK_BROKER_JVM, TOOL_JVM, TOOLS, KafkaBroker, classpath

    with tempfile.TemporaryDirectory(prefix="kafka-archive-") as scratch:
        broker = KafkaBroker(scratch, jvm_options=[*QUICK_BROKER_JVM,
                                                   f"-XX:ArchiveClassesAtExit={directory / 'broker.jsa'}"])
        broker.start()
        try:
            subprocess.run(["java", *TOOL_JVM, f"-XX:ArchiveClassesAtExit={directory / 'tools.jsa'}",
                            "-cp", classpath(), TOOLS["kafka-topics"], "--bootstrap-server", broker.bootstrap,
                            "--create", "--topic", "archive", "--partitions", "2"],
                           check=True, capture_output=True, timeout=120)
            _produce_and_read(broker.bootstrap)
        finally:
            broker.stop()


def main() -> int:
    key = _key()
    if key is None:
        print("class archives: no JDK or no Kafka (scripts/setup-kafka installs Kafka)", file=sys.stderr)
        return 1
    target = ARCHIVES / key
    if all((target / f"{kind}.jsa").exists() for kind in KINDS):
        return 0
    ARCHIVES.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f"{key}-", dir=ARCHIVES))
    try:
        _train(building)
        missing = [kind for kind in KINDS if not (building / f"{kind}.jsa").exists()]
        if missing:
            raise RuntimeError(f"the JVM wrote no archive for {', '.join(missing)}")
        shutil.rmtree(target, ignore_errors=True)
        building.rename(target)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    for stale in ARCHIVES.iterdir():
        if stale.name != key:
            shutil.rmtree(stale, ignore_errors=True)
    print(f"class archives made for Kafka's broker and tools ({target.name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
