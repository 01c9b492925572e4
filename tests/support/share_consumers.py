"""Share groups (KIP-932) driven with librdkafka's ``ShareConsumer``, bounded in count and time.

A ``ShareReader`` runs one consumer in a thread of its own and decides each record's
acknowledgement with a function, so a test states its scenario as that function. As a
script it is a member that acquires records and never acknowledges them (``hold``), to
be killed with its locks held:

    python -m tests.support.share_consumers hold BOOTSTRAP TOPIC GROUP

prints ``HELD value partition offset delivery_count`` for each record it holds, then waits.
"""
import sys
import threading
import time
from collections.abc import Callable

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from kgate.protocol.messages import ShareGroupDescribeRequest
from tests.support.wire import Wire

HOLD_S = 120  # a holder waits this long at most for its kill
# For both brokers of a share test module: a lock shorter than Kafka's least (15 s), quicker
# heartbeats and a shorter session (a killed member's partitions go to the others once it is
# gone) keep the scenarios short; kgate and Kafka 4.4 both allow them.
SHORT = {"group.share.min.record.lock.duration.ms": 1000, "group.share.heartbeat.interval.ms": 500,
         "group.share.min.heartbeat.interval.ms": 500, "group.share.session.timeout.ms": 6000,
         "group.share.min.session.timeout.ms": 6000}
KGATE_SETTINGS = {"offsets.topic.num.partitions": 2, "share.coordinator.state.topic.num.partitions": 2, **SHORT}


def configure_share_group(bootstrap: str, group: str, lock_ms: int) -> None:
    """The group reads from the start of the log and locks records for ``lock_ms``."""
    settings = {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": str(lock_ms)}
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET) for name, value in settings.items()])
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held: the futures fail once it is gone
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def produce_values(bootstrap: str, topic: str, values: range, partitions: int) -> None:
    """One record per batch (a share fetch hands out whole batches, so small ones let members
    share a partition), value ``i`` in partition ``i mod partitions``."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "batch.num.messages": 1})
    failures: list = []
    for i in values:
        producer.produce(topic, value=str(i).encode(), partition=i % partitions,
                         on_delivery=lambda err, _m: err and failures.append(err))
        producer.poll(0)
    assert producer.flush(60) == 0 and not failures, failures[:1]


def describe_share_group(bootstrap: str, group: str):
    """The group's ShareGroupDescribe answer."""
    with Wire(bootstrap) as wire:
        [described] = wire.call(ShareGroupDescribeRequest(group_ids=[group], include_authorized_operations=False),
                                1).groups
    return described


class ShareReader:
    """A share consumer in a thread: ``decide(message)`` gives each record's acknowledgement
    (explicit mode), or ``decide`` is None for implicit acknowledgement. ``seen`` holds
    (value, partition, offset, delivery count, acknowledgement) of every record delivered."""

    def __init__(self, bootstrap: str, topic: str, group: str,
                 decide: Callable[[object], AcknowledgeType] | None, pause_s: float = 0.0, **config) -> None:
        self.consumer = ShareConsumer({
            "bootstrap.servers": bootstrap, "group.id": group, "log_level": 3,
            "share.acknowledgement.mode": "implicit" if decide is None else "explicit", **config})
        self.consumer.subscribe([topic])
        self.decide = decide
        self.pause_s = pause_s
        self.seen: list[tuple[int, int, int, int, AcknowledgeType]] = []
        self.errors: list[str] = []
        self.polled = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "ShareReader":
        self._thread.start()
        return self

    def _run(self) -> None:
        deadline = time.monotonic() + 180
        while not self._stop.is_set() and time.monotonic() < deadline:
            messages = self.consumer.poll(0.2)
            self.polled.set()
            for message in messages:
                if message.error() is not None:
                    self.errors.append(str(message.error()))
                    continue
                ack = AcknowledgeType.ACCEPT if self.decide is None else self.decide(message)
                if self.decide is not None:
                    self.consumer.acknowledge(message, ack)
                self.seen.append((int(message.value()), message.partition(), message.offset(),
                                  message.delivery_count(), ack))
                time.sleep(self.pause_s)
            if messages:
                self.consumer.commit_sync(30)
        self.consumer.close()

    def stop(self) -> None:
        """Commit what was acknowledged, leave the group, close."""
        self._stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive(), "the share consumer did not close"

    def values(self, ack: AcknowledgeType = AcknowledgeType.ACCEPT) -> list[int]:
        return [value for value, _, _, _, seen_ack in list(self.seen) if seen_ack == ack]


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} not reached within {timeout} s"
        time.sleep(0.05)


def hold(bootstrap: str, topic: str, group: str) -> None:
    """Acquire records, print them, never acknowledge; wait to be killed."""
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    deadline = time.monotonic() + HOLD_S
    while time.monotonic() < deadline:
        messages = [m for m in consumer.poll(0.2) if m.error() is None]
        if messages:
            for m in messages:
                print("HELD", int(m.value()), m.partition(), m.offset(), m.delivery_count())
            print("READY", flush=True)
            break
    time.sleep(max(0.0, deadline - time.monotonic()))  # holding: the locks run out only after the kill


if __name__ == "__main__":
    mode, *arguments = sys.argv[1:]
    if mode != "hold":
        raise SystemExit(f"unknown mode {mode!r}")
    hold(*arguments)
