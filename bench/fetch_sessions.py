"""Incremental fetch sessions (KIP-227): what they save a consumer of many mostly idle partitions.

A kafka-python 3 consumer (it uses fetch sessions; librdkafka does not) is assigned
1,000 partitions of which 10 receive records at a steady rate. Each run starts two
brokers back to back, one with `max.incremental.fetch.session.cache.slots=0` (every
fetch is a full one, as before sessions) and one with Kafka's default of 1000, and
measures the same workload against each:

- Fetch request and response bytes, counted by a proxy in front of the broker that
  reads each frame's API key (the broker advertises the proxy, so every connection of
  the consumer goes through it);
- the broker's CPU seconds (/proc, by PID) while the consumer reads.

Figures are per fetch and per record consumed; the table gives the median (min-max)
of the runs and the on/off ratio of the medians.

Run from the repository root:  .venv/bin/python -m bench.fetch_sessions [--runs N]
"""
import argparse
import os
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time

from confluent_kafka import Producer
from kafka.protocol.api_key import ApiKey

from bench.produce_consume import clean_up, create_topic
from bench.side_by_side import cpu_seconds
from tests.support.broker_process import BrokerProcess

PARTITIONS = 1000
ACTIVE = 10
MODES = {"sessions off": 0, "sessions on": 1000}
FIGURES = ("request_bytes_per_fetch", "response_bytes_per_fetch", "fetches_per_s", "cpu_ms_per_fetch",
           "cpu_us_per_record")


class FrameCountingProxy:
    """Forwards TCP connections to the broker, counting Fetch request and response bytes.

    Requests carry their API key and correlation id; responses only the correlation id,
    so each connection remembers which correlation ids were fetches.
    """

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.target: tuple[str, int] | None = None
        self.lock = threading.Lock()
        self.fetches = self.request_bytes = self.response_bytes = 0
        self.closing = False
        threading.Thread(target=self._accept, daemon=True).start()

    def reset(self) -> tuple[int, int, int]:
        """The counts so far (fetches, request bytes, response bytes), then zero."""
        with self.lock:
            counts = self.fetches, self.request_bytes, self.response_bytes
            self.fetches = self.request_bytes = self.response_bytes = 0
        return counts

    def close(self) -> None:
        self.closing = True
        self.listener.close()

    def _accept(self) -> None:
        while not self.closing:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            fetch_ids: set[int] = set()
            threading.Thread(target=self._pump, args=(client, server, fetch_ids, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, fetch_ids, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, fetch_ids: set, requests: bool) -> None:
        buffer = bytearray()
        try:
            while chunk := source.recv(1 << 16):
                sink.sendall(chunk)
                buffer += chunk
                while len(buffer) >= 4 and len(buffer) >= 4 + struct.unpack_from(">i", buffer)[0]:
                    size = 4 + struct.unpack_from(">i", buffer)[0]
                    self._count(buffer[4:size], size, fetch_ids, requests)
                    del buffer[:size]
        except OSError:
            pass
        finally:
            for end in (source, sink):
                end.close()

    def _count(self, frame, size: int, fetch_ids: set, request: bool) -> None:
        if request:
            api_key, _, correlation = struct.unpack_from(">hhi", frame)
            if api_key == ApiKey.Fetch:
                fetch_ids.add(correlation)
                with self.lock:
                    self.fetches += 1
                    self.request_bytes += size
        else:
            correlation = struct.unpack_from(">i", frame)[0]
            if correlation in fetch_ids:
                fetch_ids.discard(correlation)
                with self.lock:
                    self.response_bytes += size


def _produce_steadily(bootstrap: str, topic: str, per_partition: int, rate: float, stop: threading.Event) -> None:
    """``per_partition`` records into each active partition, ``rate`` records a second in all."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "1"})
    began = time.monotonic()
    for i in range(per_partition * ACTIVE):
        if stop.is_set():
            break
        producer.produce(topic, value=b"x" * 100, partition=i % ACTIVE)
        producer.poll(0)
        ahead = i / rate - (time.monotonic() - began)
        if ahead > 0:
            time.sleep(ahead)
    producer.flush(30)


def one_run(work_dir: str, slots: int, per_partition: int, rate: float, timeout: float) -> dict:
    from kafka import KafkaConsumer, TopicPartition

    proxy = FrameCountingProxy()
    broker = BrokerProcess(work_dir, {"advertised.listeners": f"127.0.0.1:{proxy.port}",
                                      "max.incremental.fetch.session.cache.slots": slots})
    broker.start()
    proxy.target = ("127.0.0.1", broker.port)
    consumer = None
    stop = threading.Event()
    try:
        topic = create_topic(broker.bootstrap, PARTITIONS)
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                                 auto_offset_reset="earliest")
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        consumer.poll(timeout_ms=1000)  # the first, full fetch is not what is measured
        producer = threading.Thread(target=_produce_steadily,
                                    args=(broker.bootstrap, topic, per_partition, rate, stop), daemon=True)
        expected = per_partition * ACTIVE
        proxy.reset()
        cpu, began = cpu_seconds(broker.process.pid), time.monotonic()
        producer.start()
        received = 0
        while received < expected and time.monotonic() - began < timeout:
            received += sum(len(batch) for batch in consumer.poll(timeout_ms=200).values())
        seconds, cpu = time.monotonic() - began, cpu_seconds(broker.process.pid) - cpu
        fetches, request_bytes, response_bytes = proxy.reset()
        if received < expected:
            raise RuntimeError(f"consumed {received} of {expected} records within {timeout} s")
        return {"request_bytes_per_fetch": request_bytes / fetches,
                "response_bytes_per_fetch": response_bytes / fetches, "fetches_per_s": fetches / seconds,
                "cpu_ms_per_fetch": cpu * 1000 / fetches, "cpu_us_per_record": cpu * 1e6 / received}
    finally:
        stop.set()
        if consumer is not None:
            consumer.close()
        broker.stop()
        proxy.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fetch_sessions", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs, each measuring sessions off then on (default 3)")
    parser.add_argument("--records", type=int, default=300, help="records per active partition per run")
    parser.add_argument("--rate", type=float, default=500.0, help="records a second over the active partitions")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds allowed for a consume")
    args = parser.parse_args(argv)
    work_dir = tempfile.mkdtemp(prefix="kgate-sessions-")
    samples: dict[str, list[dict]] = {mode: [] for mode in MODES}
    completed = False
    try:
        for run in range(args.runs):
            for mode, slots in MODES.items():
                samples[mode].append(one_run(os.path.join(work_dir, f"{run}-{slots}"), slots, args.records,
                                             args.rate, args.timeout))
        completed = True
    finally:
        clean_up(work_dir, completed)
    print(f"kafka-python {PARTITIONS} partitions assigned, {ACTIVE} active, {args.records * ACTIVE} records at "
          f"{args.rate:g}/s: median (min-max) of {args.runs} runs")
    print(f"{'figure':<26}" + "".join(f"{mode:<30}" for mode in MODES) + "on/off")
    for figure in FIGURES:
        medians = []
        row = f"{figure:<26}"
        for mode in MODES:
            values = [run[figure] for run in samples[mode]]
            medians.append(statistics.median(values))
            row += f"{medians[-1]:>10,.1f} ({min(values):,.1f}-{max(values):,.1f})".ljust(30)
        print(row + f"{medians[1] / medians[0]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
