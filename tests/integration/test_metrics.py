"""The Prometheus endpoint, scraped after real traffic: every figure moves as the traffic says."""
import base64
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer

from tests.support.clients import ConfluentClient, create_topic
from tests.support.member_process import wait_for
from tests.support.scrape import scrape, value
from tests.support.wire import closed_by_broker

TOPIC = "measured"
COUNT = 1000


def test_metrics_follow_the_traffic(broker_factory):
    broker = broker_factory(**{"kgate.metrics.listener": "127.0.0.1:0", "group.initial.rebalance.delay.ms": 0})
    before = scrape(broker.metrics_url)
    assert value(before, "kgate_topic_records_in_total", topic=TOPIC) == 0
    create_topic(broker.bootstrap, TOPIC, 3)
    ConfluentClient.produce(broker.bootstrap, TOPIC, COUNT)
    assert len(ConfluentClient.consume(broker.bootstrap, TOPIC, 3, COUNT)) == COUNT
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "watched",
                         "client.software.name": "metrics-test", "client.software.version": "1.2.3"})
    consumer.subscribe([TOPIC])
    try:
        def stable_group():
            consumer.poll(0.2)
            samples = scrape(broker.metrics_url)
            return value(samples, "kgate_groups", state="STABLE") == 1 and samples
        samples = wait_for(stable_group, timeout=30, what="a Stable group in the metrics")
        assert value(samples, "kgate_connections", client_software_name="metrics-test",
                     client_software_version="1.2.3") >= 1
    finally:
        consumer.close()
    assert value(samples, "kgate_topic_records_in_total", topic=TOPIC) == COUNT
    assert value(samples, "kgate_topic_records_out_total", topic=TOPIC) >= COUNT
    assert value(samples, "kgate_topic_bytes_in_total", topic=TOPIC) > COUNT * 100
    produces = sum(v for (name, labels), v in samples.items()
                   if name == "kgate_requests_total" and ("api", "Produce") in labels)
    assert produces >= 1
    for stage in ("queued", "decode", "append", "fsync", "respond"):
        assert value(samples, "kgate_produce_stage_seconds_count", stage=stage) >= 1, stage
    for stage in ("queued", "decode", "read", "respond"):
        assert value(samples, "kgate_fetch_stage_seconds_count", stage=stage) >= 1, stage
    assert value(samples, "kgate_ledgers", topic=TOPIC) == 3
    assert value(samples, "kgate_ledger_bytes", topic=TOPIC) > COUNT * 100
    # Ownership and the metadata event manager: the topic's creation came back as an event.
    assert value(samples, "kgate_partitions_owned", topic=TOPIC) == 3
    assert value(samples, "kgate_metadata_event_processing_seconds_count", event="topics_changed") >= 1
    assert value(samples, "kgate_metadata_event_queue_seconds_count", event="topics_changed") >= 1


def _get(url: str, auth: tuple[str, str] | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url)
    if auth is not None:
        request.add_header("Authorization", "Basic " + base64.b64encode(":".join(auth).encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_the_endpoint_serves_only_metrics(broker_factory):
    broker = broker_factory(**{"kgate.metrics.listener": "127.0.0.1:0"})
    base = broker.metrics_url.removesuffix("/metrics")
    status, body = _get(broker.metrics_url + "?name[]=kgate_requests_total")
    assert status == 200 and b"kgate_queued_request_bytes" in body
    for path in ("/", "/metrics/x", "/metricsx", "/anything", "/favicon.ico"):
        assert _get(base + path)[0] == 404, path


def test_basic_auth_guards_the_endpoint(broker_factory, tmp_path):
    password_file = tmp_path / "metrics-password"
    password_file.write_text("s3cret:with colon\n")
    broker = broker_factory(**{"kgate.metrics.listener": "127.0.0.1:0", "kgate.metrics.basic.auth.user": "prom",
                               "kgate.metrics.basic.auth.password.file": str(password_file)})
    assert _get(broker.metrics_url)[0] == 401
    assert _get(broker.metrics_url, ("prom", "wrong"))[0] == 401
    assert _get(broker.metrics_url, ("other", "s3cret:with colon"))[0] == 401
    status, body = _get(broker.metrics_url, ("prom", "s3cret:with colon"))
    assert status == 200 and b"kgate_queued_request_bytes" in body


@pytest.mark.parametrize("settings,named", [
    ({"kgate.metrics.basic.auth.user": "prom"}, "kgate.metrics.basic.auth.password.file"),
    ({"kgate.metrics.basic.auth.user": "prom", "kgate.metrics.basic.auth.password.file": "/nonexistent/pw"},
     "kgate.metrics.basic.auth.password.file"),
    ({"kgate.metrics.basic.auth.user": "a:b", "kgate.metrics.basic.auth.password.file": "x"},
     "kgate.metrics.basic.auth.user"),
])
def test_bad_metrics_auth_settings_stop_start_up_naming_the_setting(tmp_path, settings, named):
    command = [sys.executable, "-m", "kgate", "serve", "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "b"),
               "--metrics", "127.0.0.1:0"]
    for key, setting in settings.items():
        command += ["--set", f"{key}={setting}"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60,
                            cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert result.returncode == 2 and named in result.stderr


def _threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("Threads:"))


def test_idle_connections_to_the_endpoint_hold_no_thread_and_do_not_pile_up(broker_factory):
    """1,000 idle connections held 1,002 threads (one per connection, no timeout). Served
    from the event loop they hold none; past the endpoint's bound the oldest are closed,
    and a scrape is still answered."""
    broker = broker_factory(**{"kgate.metrics.listener": "127.0.0.1:0"})
    assert _get(broker.metrics_url)[0] == 200
    before = _threads(broker.process.pid)
    host, port = broker.metrics_url.split("/")[2].rsplit(":", 1)
    idle = [socket.create_connection((host, int(port)), timeout=10) for _ in range(1000)]
    try:
        for sock in idle[:10]:
            sock.sendall(b"GET /metrics HTTP/1.1\r\n")  # a request begun, never finished
        status, body = _get(broker.metrics_url)
        assert status == 200 and b"kgate_queued_request_bytes" in body
        assert _threads(broker.process.pid) <= before + 2, "no thread per connection"

        for sock in idle[:900]:
            sock.settimeout(10)
        closed = sum(closed_by_broker(sock) for sock in idle[:900])
        assert closed == 900, "the oldest idle connections were closed to stay within the bound"
    finally:
        for sock in idle:
            sock.close()
