"""Back-pressure keeps the broker's memory bounded: a flood of producers against a
small broker-wide request budget all complete with nothing lost, and the broker's RSS
stays under a bound; a consumer that stops reading its socket holds no more fetched
bytes than its share while other consumers go on reading."""
import select
import socket
import struct
import threading
import time

import confluent_kafka
import pytest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest

from bench.side_by_side import memory_kib
from tests.support.clients import ConfluentClient, create_topic
from tests.support.member_process import wait_for
from tests.support.scrape import scrape, value
from tests.support.wire import TIMEOUT, encode_request, read_response

PRODUCERS = 8
RECORDS = 4000
VALUE = 1024


def _flood(bootstrap: str, topic: str, index: int, failures: list) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                                         "message.timeout.ms": 120_000})
    errors = []
    for i in range(RECORDS):
        value = f"{index}:{i}:".encode().ljust(VALUE, b"x")
        while True:
            try:
                producer.produce(topic, value, on_delivery=lambda error, _m: error and errors.append(error))
                break
            except BufferError:
                producer.poll(0.1)
    left = producer.flush(180)
    if left or errors:
        failures.append(f"producer {index}: {left} undelivered, errors {errors[:3]}")


def test_a_flood_of_producers_under_a_small_request_budget_loses_nothing(broker_factory):
    broker = broker_factory(**{"queued.max.request.bytes": 256 * 1024,
                               "kgate.queued.max.request.bytes.per.connection": 128 * 1024})
    create_topic(broker.bootstrap, "flood", 4)
    failures = []
    threads = [threading.Thread(target=_flood, args=(broker.bootstrap, "flood", i, failures))
               for i in range(PRODUCERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert not any(thread.is_alive() for thread in threads) and failures == []

    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "flood-check",
                                         "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition("flood", p, 0) for p in range(4)])
    seen = set()
    for _ in range(600):  # bounded: at most 600 polls of up to 0.5 s
        for message in consumer.consume(5000, timeout=0.5):
            assert message.error() is None
            seen.add(message.value()[:16].split(b"x")[0])
        if len(seen) >= PRODUCERS * RECORDS:
            break
    consumer.close()
    assert len(seen) == PRODUCERS * RECORDS
    # 32 MB went through; a broker that buffered it all would pass this bound together with its baseline.
    assert memory_kib(broker.process.pid)["VmHWM"] < 400 * 1024


MIB = 1024 * 1024
SHARE = 4 * MIB  # the slow consumer's connection may hold this much fetched data
BATCH_MAX = 1_000_000  # librdkafka's batch.size: one entry may run past the share by this much
SLOW_FETCHES = 30
FETCH_MAX = 8 * MIB


def _stalled_consumer(bootstrap: str) -> socket.socket:
    """A raw connection with a small receive buffer (set before connecting, so the kernel keeps it)."""
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    sock.settimeout(TIMEOUT)
    sock.connect((host, int(port)))
    return sock


def _fetch(correlation_id: int, topic: str = "stalled", size: int = FETCH_MAX) -> bytes:
    request = FetchRequest[4](replica_id=-1, max_wait_ms=200, min_bytes=1, max_bytes=size, isolation_level=0,
                              topics=[(topic, [(0, 0, size)])])
    return encode_request(request, 4, correlation_id=correlation_id)


def test_a_consumer_that_stops_reading_holds_no_more_than_its_share(broker_factory):
    broker = broker_factory(**{"kgate.metrics.listener": "127.0.0.1:0",
                               "kgate.queued.max.response.bytes.per.connection": SHARE,
                               "kgate.queued.max.response.bytes": 4 * SHARE})
    records = 24_000
    create_topic(broker.bootstrap, "stalled", 1)
    ConfluentClient.produce(broker.bootstrap, "stalled", records, value_size=1000)
    assert len(ConfluentClient.consume(broker.bootstrap, "stalled", 1, records)) == records
    rss_before = memory_kib(broker.process.pid)["VmRSS"]

    stalled = _stalled_consumer(broker.bootstrap)
    try:
        # Each asks for 8 MiB from offset 0; unbounded, the broker would read 240 MiB for a client reading nothing.
        stalled.sendall(b"".join(_fetch(i) for i in range(SLOW_FETCHES)))
        wait_for(lambda: value(scrape(broker.metrics_url), "kgate_fetch_budget_waits_total") >= SLOW_FETCHES // 2,
                 60, "fetches to find the stalled connection's share full")
        samples = scrape(broker.metrics_url)
        assert 0 < value(samples, "kgate_queued_response_bytes") <= SHARE + BATCH_MAX
        assert memory_kib(broker.process.pid)["VmRSS"] - rss_before < 64 * 1024

        # The others read on: the broker-wide budget has room beyond the stalled connection's share.
        assert len(ConfluentClient.consume(broker.bootstrap, "stalled", 1, records)) == records

        # The stalled consumer reads again and gets every answer, in order, none failed.
        first_offsets = []
        for i in range(SLOW_FETCHES):
            response = read_response(stalled, ApiKey.Fetch, 4, i)
            (topic,) = response.responses
            (partition,) = topic.partitions
            assert partition.error_code == 0 and partition.high_watermark == records
            if partition.records:
                first_offsets.append(int.from_bytes(partition.records[:8], "big"))
        assert first_offsets and set(first_offsets) == {0}
    finally:
        stalled.close()
    wait_for(lambda: value(scrape(broker.metrics_url), "kgate_queued_response_bytes") == 0, 30,
             "the fetched-bytes budget to drain")


def test_consumers_that_stop_reading_do_not_starve_the_others(broker_factory):
    """Stalled connections as many as the budget holds of their caps (four at the defaults' ratio) used to
    leave every other consumer empty fetches for as long as they stayed."""
    share = 2 * MIB
    broker = broker_factory(**{"kgate.metrics.listener": "127.0.0.1:0",
                               "kgate.queued.max.response.bytes.per.connection": share,
                               "kgate.queued.max.response.bytes": 4 * share})
    records = 4000
    create_topic(broker.bootstrap, "shared", 1)
    ConfluentClient.produce(broker.bootstrap, "shared", records, value_size=1000)
    stalled = [_stalled_consumer(broker.bootstrap) for _ in range(4)]
    try:
        for sock in stalled:
            sock.sendall(b"".join(_fetch(i, "shared", 4 * MIB) for i in range(10)))
        try:
            wait_for(lambda: value(scrape(broker.metrics_url), "kgate_fetch_budget_waits_total") >= 12, 60,
                     "fetches of the stalled connections to find their shares full")
        except AssertionError as timed_out:
            samples = scrape(broker.metrics_url)
            raise AssertionError(f"{timed_out}: {value(samples, 'kgate_fetch_budget_waits_total')} waits, "
                                 f"{value(samples, 'kgate_queued_response_bytes')} bytes held; the stalled "
                                 f"connections' answers: {[_answers(sock, 10) for sock in stalled]}") from None
        assert value(scrape(broker.metrics_url), "kgate_queued_response_bytes") > 0
        read = ConfluentClient.consume(broker.bootstrap, "shared", 1, records, timeout=30)
        assert [m.offset for m in read] == list(range(records))
    finally:
        for sock in stalled:
            sock.close()
    wait_for(lambda: value(scrape(broker.metrics_url), "kgate_queued_response_bytes") == 0, 30,
             "the fetched-bytes budget to drain")


def _answers(sock: socket.socket, count: int) -> list:
    """(error, high watermark, record bytes) of the fetch answers ``sock`` can read within a second each."""
    sock.settimeout(1)
    answers = []
    try:
        for i in range(count):
            (topic,) = read_response(sock, ApiKey.Fetch, 4, i).responses
            answers += [(p.error_code, p.high_watermark, len(p.records or b"")) for p in topic.partitions]
    except OSError as stopped:
        answers.append(repr(stopped))
    return answers


def _trickle_large_prefixes(bootstrap: str, connections: int, payload: int) -> list[socket.socket]:
    """Connections that each announce a 100 MB frame and send ``payload`` bytes of it, as fast as the broker reads
    (bounded in time); returns them open."""
    host, port = bootstrap.rsplit(":", 1)
    socks = []
    for _ in range(connections):
        sock = socket.create_connection((host, int(port)), timeout=TIMEOUT)
        sock.setblocking(False)
        sock.send(struct.pack(">i", 100 * 1000 * 1000))
        socks.append(sock)
    left = {sock: payload for sock in socks}
    chunk = bytes(64 * 1024)
    deadline = time.monotonic() + 20
    while left and time.monotonic() < deadline:
        _, writable, _ = select.select([], list(left), [], 1.0)
        if not writable:
            break  # every connection is paused: the broker reads none of them
        for sock in writable:
            try:
                left[sock] -= sock.send(chunk[:left[sock]])
            except BlockingIOError:
                continue
            if left[sock] <= 0:
                del left[sock]
    return socks


def test_frames_still_arriving_count_against_the_request_budget(broker_factory):
    """Peers sending a 100 MB size prefix and then bytes slowly used to hold their buffers past the budget."""
    limit = 32 * MIB
    broker = broker_factory(**{"kgate.metrics.listener": "127.0.0.1:0", "queued.max.request.bytes": limit})
    rss_before = memory_kib(broker.process.pid)["VmRSS"]
    socks = _trickle_large_prefixes(broker.bootstrap, 40, 4 * MIB)
    try:
        queued = value(scrape(broker.metrics_url), "kgate_queued_request_bytes")
        # Frames still arriving hold half the budget, and one frame's next buffer (8 MiB, once 4 MiB have
        # arrived) more: a frame larger than the budget must still be able to arrive alone.
        assert limit // 2 <= queued <= limit // 2 + 8 * MIB
        # Unbounded, the 40 buffers would hold 160 MiB.
        assert memory_kib(broker.process.pid)["VmRSS"] - rss_before < 64 * 1024
        # Whole requests keep the other half: the broker still serves.
        create_topic(broker.bootstrap, "meanwhile", 1)
        ConfluentClient.produce(broker.bootstrap, "meanwhile", 100)
    finally:
        for sock in socks:
            sock.close()
    wait_for(lambda: value(scrape(broker.metrics_url), "kgate_queued_request_bytes") == 0, 30,
             "the request budget to be given back")


IDLE = 2000


def _open_idle(bootstrap: str, count: int, source: str = "127.0.0.1") -> list[socket.socket]:
    """Connections that each make one ApiVersions call (so the broker has read from them), then stay idle."""
    host, port = bootstrap.rsplit(":", 1)
    socks = []
    for i in range(count):
        sock = socket.create_connection((host, int(port)), timeout=TIMEOUT, source_address=(source, 0))
        socks.append(sock)
        sock.sendall(encode_request(ApiVersionsRequest[0](), 0, correlation_id=i))
    for i, sock in enumerate(socks):
        read_response(sock, ApiKey.ApiVersions, 0, i)
    return socks


def _open_connections(broker) -> float:
    return sum(v for (name, _), v in scrape(broker.metrics_url).items() if name == "kgate_connections")


def test_idle_connections_hold_little_and_give_it_back(broker_factory):
    """2,000 idle connections held 560 MiB (a 256 KiB receive buffer each), and 1.3 GiB of RSS after they closed."""
    broker = broker_factory(**{"kgate.metrics.listener": "127.0.0.1:0"})
    before = memory_kib(broker.process.pid)["VmRSS"]
    socks = _open_idle(broker.bootstrap, IDLE)
    try:
        wait_for(lambda: _open_connections(broker) == IDLE, 30, "every connection to be open")
        held = memory_kib(broker.process.pid)["VmRSS"] - before
        print(f"\nRSS {before} KiB before, +{held} KiB with {IDLE} idle connections ({held / IDLE:.1f} KiB each)")
        assert held < IDLE * 48
    finally:
        for sock in socks:
            sock.close()
    wait_for(lambda: _open_connections(broker) == 0, 30, "every connection to be closed")
    after = memory_kib(broker.process.pid)["VmRSS"] - before
    print(f"RSS +{after} KiB after they closed")
    # The allocator keeps what it freed for reuse (RSS does not fall back), but it is what 2,000 idle
    # connections need now, not 1.3 GiB.
    assert after < IDLE * 48


def test_connections_past_the_limits_are_closed_at_accept(broker_factory):
    broker = broker_factory(**{"kgate.metrics.listener": "127.0.0.1:0", "max.connections.per.ip": 3,
                               "max.connections.per.ip.overrides": "127.0.0.2:5", "max.connections": 9})
    kept = _open_idle(broker.bootstrap, 3) + _open_idle(broker.bootstrap, 5, source="127.0.0.2")
    try:
        for source in ("127.0.0.1", "127.0.0.2"):
            with pytest.raises((ConnectionError, socket.timeout)):
                _open_idle(broker.bootstrap, 1, source=source)
        kept += _open_idle(broker.bootstrap, 1, source="127.0.0.3")  # the ninth
        with pytest.raises((ConnectionError, socket.timeout)):
            _open_idle(broker.bootstrap, 1, source="127.0.0.4")  # one more than max.connections
        assert _open_connections(broker) == 9
    finally:
        for sock in kept[:3]:
            sock.close()
    wait_for(lambda: _open_connections(broker) == 6, 30, "three connections to close")
    kept += _open_idle(broker.bootstrap, 1)  # room again for 127.0.0.1
    for sock in kept:
        sock.close()
    with open(broker.log_path) as log:
        refusals = [line for line in log if "refusing connections" in line]
    assert 1 <= len(refusals) <= 3  # at most once per interval, per cause
