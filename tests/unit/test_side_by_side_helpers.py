"""The pure helpers of bench.side_by_side: Kafka's perf-test tools' output as bench/kafka_perf.py
reads it (lines printed by Kafka 4.4's tools), and the idle connections' hand-written request."""
import pytest

from bench.idle_connections import api_versions_request
from bench.kafka_perf import parse_consumer_perf, parse_producer_perf
from kgate.protocol.connection import RequestReceived, ServerConnection

PRODUCER = """\
Option --producer-props has been deprecated and will be removed in a future version.
49981 records sent, 9996.2 records/sec (9.76 MB/sec), 1203.4 ms avg latency, 1490.0 ms max latency.
60000 records sent, 10045.203415 records/sec (9.81 MB/sec), 938.80 ms avg latency, 1516.00 ms max latency, \
970 ms 50th, 1463 ms 95th, 1506 ms 99th, 1515 ms 99.9th.
"""

CONSUMER = """\
Warning: --messages is deprecated. Use --num-records instead.
start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, \
fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
2026-11-27 19:11:25:169, 2026-11-27 19:11:26:125, 19.5313, 20.4302, 20000, 20920.5021, 792, 164, 119.0930, \
121951.2195
"""


def test_the_producer_summary_line_is_read_and_mib_become_mb():
    figures = parse_producer_perf(PRODUCER, record_size=1024)
    assert figures["records"] == 60000  # the summary, not the interval line before it
    assert figures["records_s"] == pytest.approx(10045.203415)
    assert figures["mb_s"] == pytest.approx(10045.203415 * 1024 / 1e6)
    assert (figures["p50_ms"], figures["p99_ms"], figures["p999_ms"]) == (970, 1506, 1515)


def test_the_consumer_figures_are_over_fetch_time_with_the_group_join_apart():
    figures = parse_consumer_perf(CONSUMER)
    assert figures["records"] == 20000
    assert figures["records_s"] == pytest.approx(121951.2195)
    assert figures["mb_s"] == pytest.approx(119.0930 * 1.048576)
    assert figures["rebalance_ms"] == 792


def test_a_producer_run_that_sent_nothing_is_an_error():
    nothing = ("0 records sent, 0.000000 records/sec (0.00 MB/sec), NaN ms avg latency, 0.00 ms max latency, "
               "0 ms 50th, 0 ms 95th, 0 ms 99th, 0 ms 99.9th.\n")
    with pytest.raises(ValueError):
        parse_producer_perf(nothing, 100)


def test_a_consumer_header_without_its_line_is_an_error():
    with pytest.raises(ValueError):
        parse_consumer_perf(CONSUMER.rsplit("\n", 2)[0])


def test_an_idle_connections_opening_request_is_an_api_versions_v0_a_broker_decodes():
    """bench/idle_connections.py writes its request by hand; kgate's own decoder is the judge."""
    connection = ServerConnection(max_frame_bytes=1 << 20)
    connection.receive_data(api_versions_request(7))
    event = connection.next_event()
    assert isinstance(event, RequestReceived)
    assert (event.header.api_key, event.header.api_version, event.header.correlation_id) == (18, 0, 7)
    assert event.header.client_id == "idle"
