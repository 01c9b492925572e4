"""The ``kgate`` client commands, run as scripts run them: the real entry point in a
subprocess against a live broker, checking what they print, their exit code, and
what the broker holds afterwards (through kafka-python, not through the CLI).
"""
import datetime
import json
import os
import subprocess
import sys

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import ConfigResource
from kafka.protocol.consumer import OffsetSpec
from kafka.structs import OffsetAndMetadata, TopicPartition

from conformance import scenarios as S
from conformance.session import Session
from conformance.share_member import ACCEPT, RELEASE, ShareMember
from kgate.protocol.messages import ConsumerGroupHeartbeatRequest, StreamsGroupHeartbeatRequest
from tests.support.member_process import wait_for
from tests.support.ports import free_ports
from tests.support.scrape import scrape

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
USER, PASSWORD = "alice", "alice-secret"
FAST_GROUPS = {"group.initial.rebalance.delay.ms": 0}


def kgate(*args, input=None, timeout=60) -> subprocess.CompletedProcess:
    """The CLI as a script runs it; stdin is never a terminal (input, or /dev/null)."""
    stdin = {"input": input} if input is not None else {"stdin": subprocess.DEVNULL}
    return subprocess.run([sys.executable, "-m", "kgate", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, **stdin)


def client(broker, *args, **kwargs) -> subprocess.CompletedProcess:
    """A client command against ``broker``; it must succeed."""
    result = kgate(*args, "--bootstrap-server", broker.bootstrap, **kwargs)
    assert result.returncode == 0, result
    return result


def assert_fails(result, code: int, *words: str) -> None:
    """Exit ``code`` and exactly one line on stderr that names the problem; no traceback."""
    assert result.returncode == code, result
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], lines[0]


@pytest.fixture
def admin(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    yield admin
    admin.close()


def topic_configs(admin, topic) -> dict:
    described = admin.describe_configs([ConfigResource("TOPIC", topic)])["topic"][topic]
    return {key: entry["value"] for key, entry in described.items()}


def partition_count(admin, topic) -> int:
    [described] = admin.describe_topics([topic])
    assert described["error_code"] == 0, described
    return len(described["partitions"])


def committed(admin, group) -> dict:
    """OffsetFetch for the whole group: {(topic, partition): offset}."""
    return {(tp.topic, tp.partition): meta.offset for tp, meta in admin.list_group_offsets(group)[group].items()}


def end_offsets(admin, topic, partitions) -> dict:
    found = admin.list_partition_offsets({TopicPartition(topic, p): OffsetSpec.LATEST for p in range(partitions)})
    return {tp.partition: offset.offset for tp, offset in found.items()}


def produce(broker, topic, count, partition=None, timestamp_ms=None) -> None:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5)
    try:
        futures = [producer.send(topic, value=b"r%d" % i, partition=partition if partition is not None else i % 2,
                                 timestamp_ms=timestamp_ms) for i in range(count)]
        producer.flush(30)
        for future in futures:
            future.get(timeout=10)
    finally:
        producer.close()


def test_topics_create_list_describe_alter_and_delete(broker, admin):
    created = client(broker, "topics", "create", "orders", "--partitions", "3", "--config", "retention.ms=60000")
    assert "orders" in created.stdout
    assert partition_count(admin, "orders") == 3
    assert topic_configs(admin, "orders")["retention.ms"] == "60000"
    for name in ("logs-a", "logs-b"):
        client(broker, "topics", "create", name)

    listed = {t["name"]: t for t in json.loads(client(broker, "topics", "list", "--output", "json").stdout)}
    assert listed["orders"] == {"name": "orders", "partitions": 3, "internal": False}
    assert {"logs-a", "logs-b", "__consumer_offsets"} <= set(listed)
    table = client(broker, "topics", "list").stdout.splitlines()
    assert table[0].split() == ["TOPIC", "PARTITIONS", "INTERNAL"]
    assert ["orders", "3", "no"] in [line.split() for line in table]

    client(broker, "topics", "alter-config", "orders", "--set", "retention.ms=120000", "cleanup.policy=compact")
    assert topic_configs(admin, "orders") == {"retention.ms": "120000", "cleanup.policy": "compact"}
    client(broker, "topics", "alter-config", "orders", "--delete", "cleanup.policy")
    assert topic_configs(admin, "orders") == {"retention.ms": "120000"}

    [described] = json.loads(client(broker, "topics", "describe", "orders", "--output", "json").stdout)
    assert described["configs"] == {"retention.ms": "120000"}
    assert [(p["partition"], p["leader"], p["replicas"]) for p in described["partitions"]] == \
        [(0, 0, [0]), (1, 0, [0]), (2, 0, [0])]
    text = client(broker, "topics", "describe", "orders").stdout
    assert "retention.ms=120000" in text and "LEADER" in text

    refused = kgate("topics", "delete", "logs-*", "--bootstrap-server", broker.bootstrap)
    assert_fails(refused, 2, "logs-a", "logs-b", "--yes")
    assert {"logs-a", "logs-b"} <= set(admin.list_topics())
    deleted = client(broker, "topics", "delete", "logs-*", "--yes")
    assert deleted.stdout.count("deleted topic") == 2
    client(broker, "topics", "delete", "orders")
    assert not {"logs-a", "logs-b", "orders"} & set(admin.list_topics())


def test_topics_add_partitions(broker, admin):
    client(broker, "topics", "create", "growing", "--partitions", "2")
    result = client(broker, "topics", "add-partitions", "growing", "--total", "5")
    assert "5 partitions" in result.stdout
    assert partition_count(admin, "growing") == 5
    assert_fails(kgate("topics", "add-partitions", "growing", "--total", "3", "--bootstrap-server", broker.bootstrap),
                 1, "INVALID_PARTITIONS")


def test_produce_from_stdin_then_consume_as_json(broker):
    client(broker, "topics", "create", "lines", "--partitions", "1")
    lines = ["k1|first value", "k2|second|with separator", "|empty key", "k4|", "k5|caf\u00e9"]
    client(broker, "produce", "lines", "--key-separator", "|", "--header", "source=cli", "--header", "n=1",
           input="\n".join(lines) + "\n")

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
    consumer.assign([TopicPartition("lines", 0)])
    stored = []
    try:
        def all_read():
            stored.extend(r for rs in consumer.poll(timeout_ms=500).values() for r in rs)
            return len(stored) >= len(lines)
        wait_for(all_read, timeout=30, what="the produced records")
    finally:
        consumer.close()
    assert [(r.key, r.value, r.headers) for r in stored] == \
        [(k.encode(), v.encode(), [("source", b"cli"), ("n", b"1")]) for k, v in (line.split("|", 1) for line in lines)]

    result = client(broker, "consume", "lines", "--from-beginning", "--max-messages", str(len(lines)),
                    "--timeout-ms", "20000", "--output", "json")
    consumed = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(c["partition"], c["offset"], c["key"], c["value"], c["headers"]) for c in consumed] == \
        [(0, i, k, v, [["source", "cli"], ["n", "1"]]) for i, (k, v) in enumerate(line.split("|", 1) for line in lines)]
    assert [c["timestamp"] for c in consumed] == [r.timestamp for r in stored]
    assert result.stderr == ""  # no progress when stderr is not a terminal

    text = client(broker, "consume", "lines", "--from-beginning", "--max-messages", "2", "--timeout-ms", "20000")
    assert text.stdout.splitlines() == ["first value", "second|with separator"]


def test_groups_describe_shows_the_lag_a_consumer_has_left(broker_factory):
    broker = broker_factory(**FAST_GROUPS)
    client(broker, "topics", "create", "work", "--partitions", "2")
    produce(broker, "work", 100)
    consumer = KafkaConsumer("work", bootstrap_servers=broker.bootstrap, group_id="G", enable_auto_commit=False,
                             auto_offset_reset="earliest", max_poll_records=7)
    taken = []
    try:
        def forty():
            taken.extend(r for rs in consumer.poll(timeout_ms=500).values() for r in rs)
            return len(taken) >= 40
        wait_for(forty, timeout=30, what="40 records")
        positions = {TopicPartition("work", p): 0 for p in range(2)}
        for record in taken[:40]:
            positions[TopicPartition("work", record.partition)] = record.offset + 1
        consumer.commit({tp: OffsetAndMetadata(offset, "", -1) for tp, offset in positions.items()})
    finally:
        consumer.close(autocommit=False)

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        offsets, ends = committed(admin, "G"), end_offsets(admin, "work", 2)
    finally:
        admin.close()
    described = json.loads(client(broker, "groups", "describe", "G", "--output", "json").stdout)
    assert (described["type"], described["state"], described["total_lag"]) == ("classic", "Empty", 60)
    assert [(p["partition"], p["committed_offset"], p["log_end_offset"], p["lag"]) for p in described["partitions"]] \
        == [(p, offsets[("work", p)], ends[p], ends[p] - offsets[("work", p)]) for p in range(2)]
    assert "total lag 60" in client(broker, "groups", "describe", "G").stdout
    listed = json.loads(client(broker, "groups", "list", "--output", "json").stdout)
    assert {"group": "G", "type": "classic", "state": "Empty", "protocol_type": "consumer"} in listed

    # The lag is what a consumer resuming in the group actually reads.
    rest = client(broker, "consume", "work", "--group", "G", "--timeout-ms", "3000", "--output", "json")
    assert len(rest.stdout.splitlines()) == 60
    assert json.loads(client(broker, "groups", "describe", "G", "--output", "json").stdout)["total_lag"] == 0

    client(broker, "groups", "delete", "G")
    assert_fails(kgate("groups", "describe", "G", "--bootstrap-server", broker.bootstrap), 1, "'G'")


def test_groups_list_and_describe_show_a_share_groups_type_start_offsets_and_records_in_flight(broker_factory):
    """A share member read 10 records of each partition, accepted 4 of partition 0 and released
    the rest, accepted all of partition 1, and stays in the group."""
    broker = broker_factory(**FAST_GROUPS)
    client(broker, "topics", "create", "shared", "--partitions", "2")
    for partition in (0, 1):
        produce(broker, "shared", 10, partition=partition)
    session = Session(broker.bootstrap)
    try:
        S.incremental_alter(session, "setup", S.GROUP, "SG", [("share.auto.offset.reset", S.SET, "earliest")],
                            record=False)
        [described] = S.metadata(session, "setup", ["shared"]).topics
        member = ShareMember(session, "SG", "shared", described.topic_id)
        member.join(partitions=2)
        member.acquire({0: 10, 1: 10})
        member.acknowledge_and_close({0: [ACCEPT] * 4 + [RELEASE] * 6, 1: [ACCEPT] * 10})

        listed = json.loads(client(broker, "groups", "list", "--output", "json").stdout)
        assert {"group": "SG", "type": "share", "state": "Stable", "protocol_type": "share"} in listed
        shown = json.loads(client(broker, "groups", "describe", "SG", "--output", "json").stdout)
        assert (shown["type"], shown["state"], shown["total_lag"]) == ("share", "Stable", 6)
        assert [(m["member_id"], m["partitions"]) for m in shown["members"]] == [
            (member.member_id, ["shared-0", "shared-1"])]
        assert [(p["partition"], p["start_offset"], p["log_end_offset"], p["lag"], p["in_flight"])
                for p in shown["partitions"]] == [(0, 4, 10, 6, 6), (1, 10, 10, 0, 0)]
        text = client(broker, "groups", "describe", "SG").stdout
        assert "type share  state Stable  members 1  total lag 6" in text and "IN-FLIGHT" in text
        member.leave()
        assert json.loads(client(broker, "groups", "describe", "SG", "--output", "json").stdout)["state"] == "Empty"
    finally:
        session.close()


def test_groups_list_and_describe_show_a_streams_group_and_the_partitions_of_its_members_tasks(broker_factory):
    """A raw-wire streams member (KIP-1071) of an application with one subtopology reading a
    two-partition topic is given both tasks; the CLI names the group's type and shows the
    partitions the member's active tasks read."""
    broker = broker_factory()
    client(broker, "topics", "create", "clicks", "--partitions", "2")
    session = Session(broker.bootstrap)
    H = StreamsGroupHeartbeatRequest
    topology = H.Topology(epoch=0, subtopologies=[H.Topology.Subtopology(
        subtopology_id="0", source_topics=["clicks"], source_topic_regex=[], state_changelog_topics=[],
        repartition_sink_topics=[], repartition_source_topics=[], copartition_groups=[])])
    state = {"epoch": 0, "tasks": None}

    def beat():
        joining = state["epoch"] == 0
        answer = session.call("setup", H(
            group_id="SA", member_id="streams-member-1", member_epoch=state["epoch"], endpoint_information_epoch=0,
            rebalance_timeout_ms=30_000 if joining else -1, topology=topology if joining else None,
            active_tasks=[] if joining else None, standby_tasks=[] if joining else None,
            warmup_tasks=[] if joining else None, process_id="process-1" if joining else None), 0, record=False)
        assert answer.error_code == 0, answer
        state["epoch"] = answer.member_epoch
        state["tasks"] = answer.active_tasks if answer.active_tasks is not None else state["tasks"]
        return state["tasks"] and [p for t in state["tasks"] for p in t.partitions] == [0, 1]
    try:
        wait_for(beat, 30, "the streams member to be given both tasks", interval=0.2)
        listed = json.loads(client(broker, "groups", "list", "--output", "json").stdout)
        assert {"group": "SA", "type": "streams", "state": "Stable", "protocol_type": "streams"} in listed
        shown = json.loads(client(broker, "groups", "describe", "SA", "--output", "json").stdout)
        assert (shown["type"], shown["state"], shown["protocol"]) == ("streams", "Stable", "sticky")
        assert [(m["member_id"], m["partitions"]) for m in shown["members"]] == [
            ("streams-member-1", ["clicks-0", "clicks-1"])]
        assert "type streams  state Stable  protocol sticky  members 1" in client(broker, "groups", "describe",
                                                                                "SA").stdout
    finally:
        session.close()


def test_groups_describe_shows_a_consumer_groups_type_and_its_members_assignment(broker_factory):
    """A KIP-848 consumer group, which DescribeGroups does not describe (ConsumerGroupDescribe does)."""
    broker = broker_factory(**FAST_GROUPS)
    client(broker, "topics", "create", "kip848", "--partitions", "2")
    session = Session(broker.bootstrap)
    member, epoch, assigned = "cgmember0000000000000", 0, []
    try:
        S.await_coordinator(session, "CG")

        def beat():
            nonlocal epoch, assigned
            answer = session.call("setup", ConsumerGroupHeartbeatRequest(
                group_id="CG", member_id=member, member_epoch=epoch, rebalance_timeout_ms=30_000,
                subscribed_topic_names=["kip848"], server_assignor="uniform", topic_partitions=[]), 0, record=False)
            assert answer.error_code == 0, answer
            epoch = answer.member_epoch
            if answer.assignment is not None:
                assigned = [p for t in answer.assignment.topic_partitions for p in t.partitions]
            return len(assigned) == 2
        wait_for(beat, timeout=30, what="both partitions assigned")
        listed = json.loads(client(broker, "groups", "list", "--output", "json").stdout)
        assert [g["type"] for g in listed if g["group"] == "CG"] == ["consumer"]
        shown = json.loads(client(broker, "groups", "describe", "CG", "--output", "json").stdout)
        assert (shown["type"], shown["protocol"]) == ("consumer", "uniform")
        assert [(m["member_id"], m["partitions"]) for m in shown["members"]] == [
            (member, ["kip848-0", "kip848-1"])]
        assert "type consumer" in client(broker, "groups", "describe", "CG").stdout
    finally:
        session.close()


def test_reset_offsets_plans_then_executes_and_refuses_a_live_group(broker_factory):
    broker = broker_factory(**FAST_GROUPS)
    client(broker, "topics", "create", "events", "--partitions", "2")
    day = datetime.datetime(2024, 5, 1, tzinfo=datetime.UTC)
    produce(broker, "events", 10, partition=0, timestamp_ms=int(day.timestamp() * 1000))
    produce(broker, "events", 10, partition=0, timestamp_ms=int((day + datetime.timedelta(days=1)).timestamp() * 1000))
    produce(broker, "events", 6, partition=1)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.alter_group_offsets("R", {TopicPartition("events", 0): OffsetAndMetadata(15, "", -1),
                                        TopicPartition("events", 1): OffsetAndMetadata(4, "", -1)})
        before = committed(admin, "R")

        dry = client(broker, "groups", "reset-offsets", "R", "--topic", "events", "--to-earliest")
        assert [line.split() for line in dry.stdout.splitlines()] == [
            ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
            ["R", "events", "0", "15", "0"], ["R", "events", "1", "4", "0"]]
        assert "--execute" in dry.stderr
        assert committed(admin, "R") == before

        for option, expected in ((["--shift-by", "-3"], {0: 12, 1: 1}), (["--to-offset", "100"], {0: 20, 1: 6}),
                                 (["--to-datetime", "2024-05-02T00:00:00Z"], {0: 10, 1: 0}),
                                 (["--to-latest"], {0: 20, 1: 6}), (["--to-earliest"], {0: 0, 1: 0})):
            result = client(broker, "groups", "reset-offsets", "R", "--topic", "events", *option, "--execute",
                            "--output", "json")
            assert {r["partition"]: r["new_offset"] for r in json.loads(result.stdout)} == expected, option
            assert committed(admin, "R") == {("events", p): o for p, o in expected.items()}, option

        member = KafkaConsumer("events", bootstrap_servers=broker.bootstrap, group_id="R", enable_auto_commit=False)
        try:
            # A member of the group (kafka-python may take its first assignment without the topic's
            # metadata, and one without partitions is as live: seen once on a loaded machine).
            wait_for(lambda: member.poll(timeout_ms=200) is not None and admin.describe_groups(["R"])["R"]["members"],
                     timeout=30, what="a member in the group")
            refused = kgate("groups", "reset-offsets", "R", "--topic", "events", "--to-latest", "--execute",
                            "--bootstrap-server", broker.bootstrap)
            # Stable, or rebalancing if a heartbeat came late on a loaded machine: live either way.
            assert_fails(refused, 1, "'R'", "only be reset when it is Empty or Dead")
            assert committed(admin, "R") == {("events", 0): 0, ("events", 1): 0}
        finally:
            member.close(autocommit=False)
    finally:
        admin.close()


def test_brokers_list(broker):
    [row] = [line.split() for line in client(broker, "brokers", "list").stdout.splitlines()[1:]]
    assert row[:5] == ["0", "127.0.0.1", str(broker.port), "-", "yes"]
    assert all(field.isdigit() for field in row[5:]) and len(row) == 8  # its partitions, bytes in and out per second
    listed = json.loads(client(broker, "brokers", "list", "--output", "json").stdout)
    assert listed["controller_id"] == 0 and listed["cluster_id"]
    [described] = listed["brokers"]
    assert described | {"partitions": 0, "bytes_in_per_second": 0.0, "bytes_out_per_second": 0.0} == \
        {"id": 0, "host": "127.0.0.1", "port": broker.port, "rack": None, "controller": True, "partitions": 0,
         "bytes_in_per_second": 0.0, "bytes_out_per_second": 0.0}
    assert described["partitions"] >= 0 and described["bytes_in_per_second"] >= 0


def test_bad_input_exits_with_one_line_and_the_documented_code(broker):
    bootstrap = ("--bootstrap-server", broker.bootstrap)
    for args in (("topics", "describe", "missing"), ("consume", "missing", "--max-messages", "1"),
                 ("groups", "reset-offsets", "nobody", "--topic", "missing", "--to-latest"),
                 ("topics", "delete", "missing"), ("topics", "alter-config", "missing", "--set", "retention.ms=1"),
                 ("topics", "add-partitions", "missing", "--total", "2")):
        assert_fails(kgate(*args, *bootstrap), 1, "missing")
    assert_fails(kgate("groups", "describe", "nobody", *bootstrap), 1, "nobody")
    client(broker, "topics", "create", "dup")
    assert_fails(kgate("topics", "create", "dup", *bootstrap), 1, "TOPIC_ALREADY_EXISTS")

    for args in (("topics", "create"), ("groups", "reset-offsets", "g", "--topic", "t"),
                 ("topics", "alter-config", "dup"), ("topics", "create", "x", "--config", "novalue"),
                 ("produce", "dup", "--header", "nokey"), ("topics",), ("consume",)):
        result = kgate(*args, *bootstrap)
        assert result.returncode == 2, result
        assert "Traceback" not in result.stderr and result.stderr.strip()

    # Nothing listens there: exit 3 at once, not after the (here ten-minute) connect timeout.
    unreachable = kgate("brokers", "list", "--bootstrap-server", f"127.0.0.1:{free_ports(1)[0]}",
                        "--connect-timeout-ms", "600000", timeout=60)
    assert_fails(unreachable, 3, "cannot connect", "connection refused")


def test_usage_errors_show_the_subcommands_usage_and_options_go_either_side_of_the_action(broker):
    misplaced = kgate("topics", "list", "--bogus")
    assert misplaced.returncode == 2
    assert misplaced.stderr.startswith("usage: kgate topics list "), misplaced.stderr
    assert "unrecognized arguments: --bogus" in misplaced.stderr
    client(broker, "topics", "create", "either-side")
    before = kgate("topics", "--bootstrap-server", broker.bootstrap, "list", "--output", "json")
    after = kgate("topics", "list", "--output", "json", "--bootstrap-server", broker.bootstrap)
    assert before.returncode == after.returncode == 0, (before, after)
    assert before.stdout == after.stdout and "either-side" in before.stdout


def test_users_refuses_a_directory_that_holds_no_cluster_unless_asked_to_create_one(tmp_path):
    typo = tmp_path / "typo"
    for args in (("users", "--data-dir", str(typo), "list"), ("users", "list", "--data-dir", str(typo))):
        assert_fails(kgate(*args), 2, str(typo), "holds no kgate cluster", "--create")
    assert not typo.exists()
    created = kgate("users", "add", USER, "--password", PASSWORD, "--data-dir", str(typo), "--create")
    assert created.returncode == 0, created
    listed = kgate("users", "list", "--data-dir", str(typo), "--output", "json")
    assert json.loads(listed.stdout)[0]["name"] == USER


def test_a_consumer_says_when_its_broker_went_away(broker_factory):
    broker = broker_factory(**{"kgate.metrics.listener": "127.0.0.1:0"})
    client(broker, "topics", "create", "watched")
    consumer = subprocess.Popen([sys.executable, "-m", "kgate", "consume", "watched", "--bootstrap-server",
                                 broker.bootstrap, "--timeout-ms", "60000"], cwd=ROOT, text=True,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: fetches(broker) > 0, 30, "the console consumer to fetch")
        broker.kill()
        line = consumer.stderr.readline()
        assert line.startswith("kgate consume: lost the connection to the broker"), line
    finally:
        consumer.kill()
        consumer.wait()


def fetches(broker) -> float:
    return sum(count for (name, labels), count in scrape(broker.metrics_url).items()
               if name == "kgate_requests_total" and ("api", "Fetch") in labels)
