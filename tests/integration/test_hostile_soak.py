"""A minute of hostile clients beside good ones: the good ones must not notice.

Every row of the hardening work has its own test; this one runs them together, as a
broker fronting many teams meets them: fuzzed frames, compression bombs, slowloris
connections announcing 100 MB frames, fetchers that never read their answers and
wrong passwords, all from another address (127.0.0.2) for SOAK_SECONDS, while an
authenticated producer (acks=all, idempotent) and a consumer from 127.0.0.1 carry on.

What must hold: the good clients see no error at all and read back every record they
sent; the broker's peak RSS stays under RSS_BOUND_MIB. Their p99 produce acknowledgement
under attack is printed beside what the same producer measured on the quiet broker just
before (the ratio says how fair the broker is between connections; tests assert no times,
and the suite shares the machine with other tests). The attack loops are bounded by a
deadline and by socket timeouts.
"""
import multiprocessing
import random
import socket
import statistics
import struct
import threading
import time

import zstandard
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from bench.side_by_side import memory_kib
from tests.support.clients import create_topic, kgate_users
from tests.support.wire import encode_request, read_response
from tests.unit.record_batches import raw_batch, raw_record
from tests.unit.request_frames import produce_request

SOAK_SECONDS = 60
QUIET_SECONDS = 10
RATE = 400  # good records a second, 1 KiB each
# The budgets the broker runs with below (32 MiB of requests, 32 MiB of fetched responses), what an
# idle broker holds (~55 MiB), one inflating chunk per bomb, and room for the allocator (98 MiB measured).
RSS_BOUND_MIB = 256
ATTACKER = "127.0.0.2"
USER, PASSWORD = "alice", "alice-secret"
MIB = 1024 * 1024

SETTINGS = {
    "queued.max.request.bytes": 32 * MIB,
    "kgate.queued.max.response.bytes": 32 * MIB,
    "kgate.queued.max.response.bytes.per.connection": 8 * MIB,
    "max.connections.per.ip": 200,
    "kgate.sasl.max.failed.logins.per.minute": 5,
}


# -- the good clients, in a process of their own (their timings must not share this one's GIL) ----------

def good_clients(address: str, topic: str, seconds: float, rate: int) -> dict:
    """Produce ``rate`` records a second for ``seconds``, then read them all back; errors and ack latencies."""
    security = {"bootstrap.servers": address, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": USER, "sasl.password": PASSWORD}
    errors: list[str] = []
    latencies: list[float] = []
    producer = Producer({**security, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                         "message.timeout.ms": 30_000, "error_cb": lambda e: errors.append(f"producer: {e}")})

    def acked(sent_at):
        def report(error, _message):
            if error:
                errors.append(f"delivery: {error}")
            else:
                latencies.append(time.monotonic() - sent_at)
        return report

    value = random.randbytes(1024)
    started = time.monotonic()
    sent = 0
    while time.monotonic() - started < seconds:
        due = int((time.monotonic() - started) * rate)
        while sent < due:
            producer.produce(topic, key=b"%d" % sent, value=value, on_delivery=acked(time.monotonic()))
            sent += 1
        producer.poll(0.005)
    if producer.flush(60) != 0:
        errors.append("producer: records left unflushed")
    consumer = Consumer({**security, "group.id": f"soak-{topic}", "enable.partition.eof": False,
                         "error_cb": lambda e: errors.append(f"consumer: {e}")})
    consumer.assign([TopicPartition(topic, 0, 0)])
    read = 0
    deadline = time.monotonic() + 60
    while read < sent and time.monotonic() < deadline:
        for message in consumer.consume(1000, timeout=0.5):
            if message.error() and message.error().code() != KafkaError._PARTITION_EOF:
                errors.append(f"consume: {message.error()}")
            elif not message.error():
                read += 1
    consumer.close()
    p99 = statistics.quantiles(latencies, n=100)[98] if len(latencies) > 1 else float("inf")
    return {"errors": errors, "sent": sent, "acked": len(latencies), "read": read, "p99": p99}


def _in_child(topic: str, address: str, seconds: float):
    pool = multiprocessing.get_context("spawn").Pool(1)
    result = pool.apply_async(good_clients, (address, topic, seconds, RATE))
    pool.close()
    return result


# -- the attackers, in threads of this process, each until the deadline ----------------------------------

def _connect(bootstrap: str) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=10, source_address=(ATTACKER, 0))


def _drain(sock: socket.socket) -> None:
    try:
        while sock.recv(65536):
            pass
    except OSError:
        pass


def _fuzzer(bootstrap: str, deadline: float, seen: dict) -> None:
    """Random bytes, frames of random size and garbage bodies behind valid headers, one connection each."""
    rng = random.Random(17)
    while time.monotonic() < deadline:
        kind = rng.randrange(3)
        body = rng.randbytes(rng.randrange(1, 300))
        if kind == 0:
            payload = body
        elif kind == 1:
            payload = struct.pack(">i", rng.choice([-5, 0, 3, 1 << 30, 100 * 1000 * 1000 + 1])) + body
        else:
            header = struct.pack(">hhih", rng.randrange(0, 70), rng.randrange(0, 15), 1, 3) + b"abc"
            payload = struct.pack(">i", len(header) + len(body)) + header + body
        try:
            with _connect(bootstrap) as sock:
                sock.sendall(payload)
                sock.shutdown(socket.SHUT_WR)
                _drain(sock)
            seen["fuzzed"] += 1
        except OSError:
            seen["refused"] += 1


def _zstd_bomb() -> bytes:
    """A magic-2 zstd batch of 128 records of 1 MiB of zeros: a few KiB on the wire, twice the inflate limit."""
    compressor = zstandard.ZstdCompressor(level=3).compressobj()
    zeros = bytes(MIB)
    parts = [compressor.compress(raw_record(i, zeros)) for i in range(128)]
    return raw_batch(b"", 128, "zstd", compressed=b"".join(parts) + compressor.flush())


def _bomber(bootstrap: str, topic: str, deadline: float, seen: dict) -> None:
    request = produce_request(topic, 0, _zstd_bomb(), version=9, acks=1)
    correlation = 0
    while time.monotonic() < deadline:
        try:
            with _connect(bootstrap) as sock:
                while time.monotonic() < deadline:
                    correlation += 1
                    sock.sendall(encode_request(request, 9, correlation_id=correlation))
                    response = read_response(sock, 0, 9, correlation)
                    assert response.responses[0].partition_responses[0].error_code != 0, "a bomb was stored"
                    seen["bombs"] += 1
        except OSError:
            seen["refused"] += 1


def _slowloris(bootstrap: str, deadline: float, seen: dict, connections: int = 60) -> None:
    """Connections announcing a 100 MB frame, then a byte a second each."""
    socks: list[socket.socket] = []
    while time.monotonic() < deadline:
        while len(socks) < connections and time.monotonic() < deadline:
            try:
                sock = _connect(bootstrap)
                sock.sendall(struct.pack(">i", 100 * 1000 * 1000))
                socks.append(sock)
            except OSError:
                seen["refused"] += 1
                break
        for sock in list(socks):
            try:
                sock.send(b"x")
                seen["trickled"] += 1
            except OSError:
                socks.remove(sock)
                sock.close()
        time.sleep(1)  # the attack's own pace: a byte a second is what slowloris is
    for sock in socks:
        sock.close()


def _non_reader(bootstrap: str, topic: str, deadline: float, seen: dict) -> None:
    """Pipelined 8 MiB fetches of a full topic on a connection that never reads an answer."""
    request = FetchRequest[4](replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=8 * MIB, isolation_level=0,
                              topics=[(topic, [(0, 0, 8 * MIB)])])
    correlation = 0
    while time.monotonic() < deadline:
        try:
            with _connect(bootstrap) as sock:
                sock.setblocking(False)
                while time.monotonic() < deadline:
                    correlation += 1
                    try:
                        sock.send(encode_request(request, 4, correlation_id=correlation))
                        seen["unread fetches"] += 1
                    except BlockingIOError:
                        pass  # the broker stopped reading us: it has our share of answers queued
                    time.sleep(0.05)  # pipelining, not a busy loop
        except OSError:
            seen["refused"] += 1


def _guesser(bootstrap: str, deadline: float, seen: dict) -> None:
    """SCRAM-less PLAIN logins as alice with wrong passwords."""
    while time.monotonic() < deadline:
        try:
            with _connect(bootstrap) as sock:
                sock.sendall(encode_request(SaslHandshakeRequest(mechanism="PLAIN"), 1, 1))
                read_response(sock, SaslHandshakeRequest.API_KEY, 1, 1)
                token = f"\x00{USER}\x00guess-{random.random()}".encode()
                sock.sendall(encode_request(SaslAuthenticateRequest(auth_bytes=token), 1, 2))
                response = read_response(sock, SaslAuthenticateRequest.API_KEY, 1, 2)
                assert response.error_code != 0, "a wrong password was accepted"
                seen["wrong passwords"] += 1
        except OSError:
            seen["refused"] += 1
        time.sleep(0.02)


# -- the test ------------------------------------------------------------------------------------------

def test_good_clients_do_not_notice_a_minute_of_hostile_ones(broker_factory, tmp_path):
    data_dir = str(tmp_path / "soak")
    kgate_users(data_dir, "--create", "add", USER, "--password", PASSWORD)
    broker = broker_factory("soak", listeners=("SASL_PLAINTEXT",), **SETTINGS)
    address = broker.address("SASL_PLAINTEXT")
    for topic in ("quiet", "busy", "bombed", "bulk"):
        create_topic(broker.bootstrap, topic, 1)
    bulk = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
    for i in range(40_000):  # 40 MiB for the fetchers that never read
        bulk.produce("bulk", value=bytes(1024))
        if i % 5000 == 0:
            bulk.poll(0)
    assert bulk.flush(60) == 0

    quiet = _in_child("quiet", address, QUIET_SECONDS).get(QUIET_SECONDS + 120)
    assert quiet["errors"] == [] and quiet["read"] == quiet["sent"] == quiet["acked"], quiet

    deadline = time.monotonic() + SOAK_SECONDS
    seen = dict.fromkeys(["fuzzed", "bombs", "trickled", "unread fetches", "wrong passwords", "refused"], 0)
    attacks = [(_fuzzer, (broker.bootstrap, deadline, seen)),
               (_bomber, (broker.bootstrap, "bombed", deadline, seen)),
               (_slowloris, (broker.bootstrap, deadline, seen)),
               *[(_non_reader, (broker.bootstrap, "bulk", deadline, seen))] * 4,
               (_guesser, (address, deadline, seen))]
    failures: list[BaseException] = []

    def run(attack, args):
        try:
            attack(*args)
        except BaseException as failure:  # noqa: B036 (reported by the test below, not swallowed)
            failures.append(failure)

    threads = [threading.Thread(target=run, args=attack, daemon=True) for attack in attacks]
    for thread in threads:
        thread.start()
    busy = _in_child("busy", address, SOAK_SECONDS)
    peak = 0
    while not busy.ready():
        peak = max(peak, memory_kib(broker.process.pid)["VmRSS"] // 1024)
        busy.wait(0.5)
    soaked = busy.get()
    for thread in threads:
        thread.join(30)
    print(f"\nquiet p99 {quiet['p99'] * 1000:.1f} ms, under attack p99 {soaked['p99'] * 1000:.1f} ms "
          f"({soaked['p99'] / quiet['p99']:.1f}x), "
          f"peak RSS {peak} MiB, VmHWM {memory_kib(broker.process.pid)['VmHWM'] // 1024} MiB, attacks {seen}")

    assert broker.alive()
    assert failures == []
    assert not any(thread.is_alive() for thread in threads), "an attack loop outlived its deadline"
    assert all(seen[kind] > 0 for kind in ("fuzzed", "bombs", "trickled", "unread fetches", "wrong passwords")), seen
    assert soaked["errors"] == [], soaked["errors"][:5]
    assert soaked["read"] == soaked["sent"] == soaked["acked"] > 0, soaked
    assert memory_kib(broker.process.pid)["VmHWM"] // 1024 < RSS_BOUND_MIB
