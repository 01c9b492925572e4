"""``kgate console`` against a live kgate broker, looked at in headless chromium: its pages
show the cluster's actual topics, groups and lag; a reset of offsets round-trips to the
cluster; writes need --allow-writes and a token from the console's own page; a cluster
that cannot be reached, or refuses the credentials, gets a page saying so."""
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from kgate.console.metrics_history import MetricsHistory
from tests.support.broker_process import BrokerProcess
from tests.support.browser import headless_chromium, wait_for
from tests.support.clients import create_topic, kgate_users
from tests.support.console_process import ConsoleProcess
from tests.support.member_process import wait_for as wait_until
from tests.support.ports import free_ports

ORDERS, EVENTS, GROUP = "console-orders", "console-events", "console-billing"
USER, PASSWORD = "alice", "alice-secret"
RECORDS_PER_PARTITION = 10


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    data_dir = str(tmp_path_factory.mktemp("broker"))
    kgate_users(data_dir, "--create", "add", USER, "--password", PASSWORD)
    started = BrokerProcess(data_dir, {"kgate.metrics.listener": "127.0.0.1:0"}, listeners=("SASL_PLAINTEXT",)).start()
    create_topic(started.bootstrap, ORDERS, 3)
    create_topic(started.bootstrap, EVENTS, 1)
    producer = Producer({"bootstrap.servers": started.bootstrap})
    for partition in range(3):
        for index in range(RECORDS_PER_PARTITION):
            producer.produce(ORDERS, key=b"k%d" % index, value=b'{"order": %d}' % index, partition=partition,
                             headers=[("source", b"test")])
    producer.produce(EVENTS, value=bytes(range(256)))
    producer.flush(30)
    _commit(started.bootstrap, {0: 4, 1: 7, 2: 10})  # lag 6 + 3 + 0
    yield started
    started.stop()


def _commit(bootstrap: str, offsets: dict[int, int]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(ORDERS, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def _committed(bootstrap: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    try:
        found = consumer.committed([TopicPartition(ORDERS, p) for p in range(3)], timeout=10)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found}


@pytest.fixture(scope="module")
def console(broker):
    started = ConsoleProcess(broker.bootstrap, "--allow-writes", "--metrics", broker.metrics_url).start()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    with headless_chromium(str(tmp_path_factory.mktemp("profile"))) as driver:
        yield driver


def _cells(browser, table_id: str) -> list[list[str]]:
    rows = browser.find_elements(By.CSS_SELECTOR, f"table#{table_id} tbody tr")
    return [[cell.text for cell in row.find_elements(By.TAG_NAME, "td")] for row in rows]


def test_pages_show_the_clusters_topics_groups_and_lag(console, browser):
    browser.get(console.url + "/")
    assert wait_for(browser, lambda b: b.find_element(By.ID, "brokers")).is_displayed()
    assert "kgate" in browser.find_element(By.ID, "kgate-settings").text
    assert "Bytes produced per second" in browser.find_element(By.TAG_NAME, "main").text  # given --metrics
    browser.find_element(By.LINK_TEXT, "Topics").click()
    topics = {row[0]: row for row in wait_for(browser, lambda b: _cells(b, "topics"))}
    assert topics[ORDERS][1] == "3" and topics[EVENTS][1] == "1"
    browser.find_element(By.LINK_TEXT, ORDERS).click()
    partitions = wait_for(browser, lambda b: _cells(b, "partitions"))
    assert [(row[0], row[2], row[3]) for row in partitions] == [(str(p), "0", str(RECORDS_PER_PARTITION))
                                                               for p in range(3)]
    browser.find_element(By.LINK_TEXT, "Consumer groups").click()
    groups = {row[0]: row for row in wait_for(browser, lambda b: _cells(b, "groups"))}
    assert groups[GROUP][1] == "Empty" and groups[GROUP][4] == "9"
    browser.find_element(By.LINK_TEXT, GROUP).click()
    lag = wait_for(browser, lambda b: _cells(b, "lag"))
    assert [(row[1], row[2], row[4]) for row in lag] == [("0", "4", "6"), ("1", "7", "3"), ("2", "10", "0")]
    assert browser.find_element(By.ID, "total-lag").text == "9"


def test_records_of_a_partition_are_shown_as_json_text_and_hex(console, browser):
    browser.get(f"{console.url}/topics/{ORDERS}/partitions/1?offset=8")
    rows = wait_for(browser, lambda b: _cells(b, "records"))
    assert [row[0] for row in rows] == ["8", "9"]
    assert rows[0][2] == "k8" and '"order": 8' in rows[0][3] and rows[0][4] == "source: test"
    browser.get(f"{console.url}/topics/{EVENTS}/partitions/0?offset=0")
    value = wait_for(browser, lambda b: _cells(b, "records"))[0][3]
    assert value.startswith("00 01 02 03")
    browser.get(f"{console.url}/topics/{ORDERS}/partitions/1?offset=9&format=hex")
    assert wait_for(browser, lambda b: _cells(b, "records"))[0][2] == "6b 39"


def test_a_reset_of_offsets_round_trips_to_the_cluster(broker, console, browser):
    browser.get(f"{console.url}/groups/{GROUP}")
    form = wait_for(browser, lambda b: b.find_element(By.ID, "reset"))
    Select(form.find_element(By.NAME, "topic")).select_by_visible_text(ORDERS)
    Select(form.find_element(By.NAME, "to")).select_by_visible_text("earliest")
    form.find_element(By.TAG_NAME, "button").click()
    notice = wait_for(browser, lambda b: b.find_elements(By.ID, "notice"))[0]
    assert "Committed new offsets" in notice.text
    assert browser.find_element(By.ID, "total-lag").text == str(3 * RECORDS_PER_PARTITION)
    assert _committed(broker.bootstrap) == {0: 0, 1: 0, 2: 0}
    _commit(broker.bootstrap, {0: 4, 1: 7, 2: 10})  # as the other tests expect it


def _post(url: str, fields: dict, headers: dict | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, data=urllib.parse.urlencode(fields).encode(), headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


def _get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode(), response.headers.get("Set-Cookie", "")
    except urllib.error.HTTPError as failed:
        return failed.code, failed.read().decode(), ""


def test_writes_need_allow_writes_and_a_token_from_the_consoles_own_page(broker, console):
    reset = f"{console.url}/groups/{GROUP}/reset-offsets"
    fields = {"topic": ORDERS, "to": "latest"}
    assert _post(reset, fields)[0] == 403  # no session, no token: a request forged elsewhere
    status, page, cookie = _get(f"{console.url}/groups/{GROUP}")
    token = page.split('name="csrf" value="')[1].split('"')[0]
    session = {"Cookie": cookie.split(";")[0]}
    assert _post(reset, {**fields, "csrf": "0" * 64}, session)[0] == 403
    assert _post(reset, {**fields, "csrf": token}, {**session, "Origin": "http://evil.example"})[0] == 403
    assert _committed(broker.bootstrap) == {0: 4, 1: 7, 2: 10}
    read_only = ConsoleProcess(broker.bootstrap).start()
    try:
        status, page, cookie = _get(f"{read_only.url}/groups/{GROUP}")
        assert status == 200 and 'id="reset"' not in page and "read-only" in page
        assert _post(f"{read_only.url}/groups/{GROUP}/reset-offsets", fields)[0] == 403
    finally:
        read_only.stop()
    assert _committed(broker.bootstrap) == {0: 4, 1: 7, 2: 10}


def test_an_unreachable_cluster_and_refused_credentials_get_a_page_saying_so(broker):
    unreachable = ConsoleProcess(f"127.0.0.1:{free_ports(1)[0]}", "--connect-timeout-ms", "3000").start()
    refused = ConsoleProcess(broker.address("SASL_PLAINTEXT"), "--security-protocol", "SASL_PLAINTEXT",
                             "--sasl-mechanism", "SCRAM-SHA-256", "--sasl-username", "nobody",
                             "--sasl-password", "wrong", "--connect-timeout-ms", "5000").start()
    try:
        status, page, _ = _get(unreachable.url + "/topics")
        assert status == 503 and "Cluster unreachable" in page and "connection refused" in page
        status, page, _ = _get(refused.url + "/groups")
        assert status == 503 and "Credentials refused" in page and "Traceback" not in page
    finally:
        unreachable.stop()
        refused.stop()


def test_the_charts_follow_the_brokers_metrics(broker):
    history = MetricsHistory([broker.metrics_url])  # not started: scraped by hand
    history.scrape_once()
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for _ in range(2):  # two intervals with traffic: two points of the throughput line
        for _ in range(50):
            producer.produce(EVENTS, value=b"z" * 1024)
        producer.flush(30)
        history.scrape_once()
    assert history.topic_rates()[EVENTS] > 0
    assert history.topic_rates().get(ORDERS, 0) == 0
    assert "<polyline" in history.throughput_chart()
    assert "<polyline" in history.lag_chart(GROUP) and "peak 9" in history.lag_chart(GROUP)


def test_a_kip848_consumer_group_shows_its_state_offsets_and_lag(broker, console):
    group = "console-kip848"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([ORDERS])
    try:
        read = []
        wait_for_records = time.monotonic() + 30
        while len(read) < 5 and time.monotonic() < wait_for_records:
            record = consumer.poll(0.5)
            if record is not None and not record.error():
                read.append(record)
        assert len(read) == 5
        consumer.commit(asynchronous=False)
        status, page, _ = _get(f"{console.url}/groups/{group}")
        assert status == 200 and 'id="group-note"' in page and "Stable" in page
        positions = {}
        for record in read:
            positions[record.partition()] = max(positions.get(record.partition(), 0), record.offset() + 1)
        lag = sum(RECORDS_PER_PARTITION - position for position in positions.values())
        assert f'<b id="total-lag">{lag}</b>' in page
        status, page, _ = _get(f"{console.url}/groups")
        assert status == 200 and f">{group}</a>" in page
    finally:
        consumer.close()


def test_each_person_logs_in_with_the_clusters_sasl_credentials(broker, browser):
    console = ConsoleProcess(broker.address("SASL_PLAINTEXT"), "--security-protocol", "SASL_PLAINTEXT",
                             "--sasl-mechanism", "SCRAM-SHA-256").start()
    try:
        browser.get(console.url + "/topics")
        form = wait_for(browser, lambda b: b.find_element(By.ID, "login"))
        form.find_element(By.NAME, "username").send_keys(USER)
        form.find_element(By.NAME, "password").send_keys("not-the-password")
        form.find_element(By.TAG_NAME, "button").click()
        refused = wait_for(browser, lambda b: b.find_elements(By.ID, "notice"))[0]  # the login page again
        assert "authentication failed" in refused.text
        form = browser.find_element(By.ID, "login")
        form.find_element(By.NAME, "username").send_keys(USER)
        form.find_element(By.NAME, "password").send_keys(PASSWORD)
        form.find_element(By.TAG_NAME, "button").click()
        wait_for(browser, lambda b: b.find_element(By.ID, "logout"))  # the overview, logged in
        browser.find_element(By.LINK_TEXT, "Topics").click()
        assert ORDERS in [row[0] for row in wait_for(browser, lambda b: _cells(b, "topics"))]
        browser.find_element(By.ID, "logout").click()
        assert wait_for(browser, lambda b: b.find_element(By.ID, "login")).is_displayed()
    finally:
        console.stop()


def test_the_overview_of_a_broker_on_object_storage_shows_its_wal(broker_factory, bucket_url):
    on_s3 = broker_factory(**{"kgate.storage": bucket_url, "kgate.metrics.listener": "127.0.0.1:0"})
    console = ConsoleProcess(on_s3.bootstrap, "--metrics", on_s3.metrics_url).start()
    try:
        def scraped():
            status, page, _ = _get(console.url + "/")
            return status == 200 and 'id="wal"' in page and page
        page = wait_until(scraped, timeout=30, what="the WAL upload lag on the overview")
        assert "kgate.storage" in page and "s3://" in page and on_s3.metrics_url in page
    finally:
        console.stop()
