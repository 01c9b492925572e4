"""Driving kgate.processing in tests: keyed records in, a processor run until a condition, commits read back."""
import asyncio
import os
import select
import subprocess
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.support.broker_process import terminate
from tests.support.member_process import wait_for  # noqa: F401 - the tests of processing wait with it

BROKER_SETTINGS = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 1000}
"""A group forms at once, and a killed member leaves within its (short) session timeout."""
CONSUMER_CONFIG = {"auto.offset.reset": "earliest", "session.timeout.ms": 3000, "heartbeat.interval.ms": 500}


def key_of(i: int, keys: int) -> bytes:
    return b"key-%d" % (i % keys)


def produce_keyed(bootstrap: str, topic: str, count: int, keys: int, value_size: int = 0,
                  partition: int | None = None, first_key: int = 0) -> None:
    """Record ``i`` has key ``key-<first_key + i mod keys>`` (one partition per key, by the
    default partitioner, unless ``partition``) and a value starting with ``i``, padded to
    ``value_size``."""
    where = {} if partition is None else {"partition": partition}
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    failures = []
    for i in range(count):
        while True:
            try:
                producer.produce(topic, key=b"key-%d" % (first_key + i % keys),
                                 value=(b"%d " % i).ljust(value_size, b"x"), **where,
                                 on_delivery=lambda err, _m: err and failures.append(err))
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0 and not failures, failures[:1]


def index_of(value: bytes) -> int:
    """The ``i`` of a value produce_keyed wrote."""
    return int(value.split(b" ", 1)[0])


async def run_until(app, done, timeout: float) -> None:
    """Run ``app`` until ``done()`` holds (polled), then stop it; fails if it does not hold in time.

    ``done`` runs in a thread, as the processor's metrics do: a check that asks the consumer
    (watermarks) waits for librdkafka's lock, which the consumer thread may hold in a rebalance
    callback that waits for the event loop; asked on the loop, the two waited for each other."""
    task = asyncio.ensure_future(app.run_async())
    deadline = time.monotonic() + timeout
    try:
        while not await asyncio.to_thread(done):
            if task.done():
                task.result()
                raise AssertionError("the processor stopped by itself")
            assert time.monotonic() < deadline, f"condition not reached within {timeout} s"
            await asyncio.sleep(0.02)
    finally:
        app.stop()
        await asyncio.wait_for(task, 30)


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offset per partition (-1001 where none)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found}


class ProcessorProcess:
    """``kgate process --app tests.support.processing_app:app`` as a child process, stopped by PID.

    Its metrics endpoint listens on a free port, read back from the line it prints."""

    def __init__(self, work_dir: str, **settings: str) -> None:
        self.env = {**os.environ, **{f"KGATE_TEST_{k.upper()}": str(v) for k, v in settings.items()}}
        self.log_path = os.path.join(work_dir, "processor.log")
        self.process: subprocess.Popen | None = None
        self.metrics_url = ""

    def start(self, timeout: float = 30.0) -> "ProcessorProcess":
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "kgate", "process", "--app", "tests.support.processing_app:app",
                 "--metrics", "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=log, cwd=root, env=self.env)
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline().decode().strip() if ready else ""
        if "metrics on " not in line:
            self.kill()
            raise RuntimeError(f"processor did not start ({line!r}); see {self.log_path}")
        self.metrics_url = line.rpartition(" ")[2]
        return self

    def kill(self) -> None:
        """kill -9: no commit, no shutdown path."""
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()
            self.process.stdout.close()
            self.process = None

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (commits what is finished), then SIGKILL after ``timeout``."""
        terminate(self.process, timeout)
        code = self.process.returncode
        self.process.stdout.close()
        self.process = None
        return code

    def memory_kib(self, field: str = "VmHWM") -> int:
        """A field of /proc/PID/status in KiB: VmHWM is the peak resident set, VmRSS the current one."""
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        raise KeyError(field)


def handled(log_path: str) -> list[tuple[int, int]]:
    """(partition, offset) of every record a ProcessorProcess handled, in order, repeats included."""
    if not os.path.exists(log_path):
        return []
    with open(log_path, "rb") as log:
        return [tuple(map(int, line.split())) for line in log.read().splitlines()]


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offsets"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    finally:
        consumer.close()


