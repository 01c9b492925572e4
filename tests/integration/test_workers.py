"""``kgate serve --workers 2``: one cluster of two broker processes over the supervisor's
metadata store and one ledger directory, driven by real clients; a worker killed with
kill -9, the supervisor stopped with SIGTERM or killed with kill -9."""
import glob
import os
import re
import signal
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import NewTopic

from tests.support import records as R
from tests.support.broker_process import BrokerProcess
from tests.support.cluster import AckedProducer, check_delivery, read_all
from tests.support.member_process import wait_for
from tests.support.ports import free_ports

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("workers")]
PARTITIONS = 8
SESSION_TIMEOUT_MS = 3000
TOOK_SOME = re.compile(r"ownership of [^:]+: took [1-9]")


def workers_of(supervisor: BrokerProcess) -> dict[int, int]:
    """Worker index -> PID, read from the supervisor's children in /proc."""
    found = {}
    for listing in glob.glob(f"/proc/{supervisor.process.pid}/task/*/children"):
        with open(listing) as children:
            for pid in children.read().split():
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                        argv = cmdline.read().split(b"\0")
                except OSError:
                    continue
                if b"--worker" in argv:
                    found[int(argv[argv.index(b"--worker") + 1])] = int(pid)
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def log_lines(supervisor: BrokerProcess) -> list[str]:
    with open(supervisor.log_path, errors="replace") as log:
        return log.readlines()


def wait_logged(supervisor: BrokerProcess, since: int, wanted, what: str) -> None:
    """Until a line of the log after its first ``since`` lines is ``wanted``: what a worker logs
    comes after what clients see (Metadata names a worker the leader once it has registered)."""
    wait_for(lambda: any(wanted(line) for line in log_lines(supervisor)[since:]), 30, what)


def admin(supervisor: BrokerProcess):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": supervisor.bootstrap})


def leaders(supervisor: BrokerProcess, topic: str) -> dict[int, int]:
    metadata = admin(supervisor).list_topics(topic, timeout=10).topics[topic]
    return {p.id: p.leader if p.error is None else -1 for p in metadata.partitions.values()}


def wait_leaders(supervisor: BrokerProcess, topic: str, among: set[int], timeout: float = 60) -> dict[int, int]:
    """Until every partition of ``topic`` has a leader and the leaders are exactly ``among``."""
    def settled():
        found = leaders(supervisor, topic)
        return found if len(found) == PARTITIONS and set(found.values()) == among else None
    return wait_for(settled, timeout, f"leaders of {topic} to be {sorted(among)}", interval=0.25)


def create(supervisor: BrokerProcess, topic: str) -> dict[int, int]:
    client = admin(supervisor)
    for future in client.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        future.result(timeout=30)
    return wait_leaders(supervisor, topic, {0, 1})


def free_port_pair() -> int:
    """A port P with P and P+1 free now: a restarted worker comes back on its own port, so the
    bootstrap list stays good (with port 0 it would come back on another free port)."""
    return free_ports(1, twin=1)[0]


def start(tmp_path_factory, name: str) -> BrokerProcess:
    return BrokerProcess(str(tmp_path_factory.mktemp(name)), {
        "offsets.topic.num.partitions": 4, "group.initial.rebalance.delay.ms": 0,
        "broker.session.timeout.ms": SESSION_TIMEOUT_MS}, port=free_port_pair(), workers=2).start(timeout=60)


@pytest.fixture(scope="module")
def supervisor(tmp_path_factory):
    started = start(tmp_path_factory, "workers")
    yield started
    started.stop(timeout=60)


def test_two_workers_are_two_brokers_that_share_the_partitions(supervisor):
    client = admin(supervisor)  # kept: a future outlives no client
    described = client.describe_cluster(request_timeout=10).result(timeout=15)
    assert sorted(node.id for node in described.nodes) == [0, 1]
    assert sorted(node.port for node in described.nodes) == sorted(supervisor.worker_ports)
    owners = create(supervisor, "spread")
    assert set(owners.values()) == {0, 1}
    producer = Producer({"bootstrap.servers": supervisor.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(400):
        producer.produce("spread", key=R.key(i), value=R.value(i, 100), partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    stored = read_all(supervisor.bootstrap, "spread", PARTITIONS)
    assert sorted(stored.values()) == sorted(R.key(i) for i in range(400))
    assert {partition for partition, _ in stored} == set(range(PARTITIONS))
    lines = log_lines(supervisor)
    assert any(" worker=0 " in line for line in lines) and any(" worker=1 " in line for line in lines)


def test_a_group_consumes_across_both_workers(supervisor):
    create(supervisor, "grouped")
    producer = Producer({"bootstrap.servers": supervisor.bootstrap, "linger.ms": 5})
    for i in range(200):
        producer.produce("grouped", key=R.key(i), value=R.value(i, 50), partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": supervisor.bootstrap, "group.id": "across-workers",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["grouped"])
    keys = set()
    deadline = time.monotonic() + 60
    while len(keys) < 200 and time.monotonic() < deadline:
        for message in consumer.consume(500, timeout=0.5):
            assert message.error() is None, message.error()
            keys.add(message.key())
    consumer.commit(asynchronous=False)
    consumer.close()
    assert keys == {R.key(i) for i in range(200)}


def test_a_worker_killed_loses_nothing_acknowledged_and_its_partitions_move_and_come_back(supervisor):
    create(supervisor, "failover")
    before = workers_of(supervisor)
    producer = AckedProducer("confluent", supervisor.bootstrap, "failover", 6000, per_second=1500,
                             **{"enable.idempotence": True}).start()
    wait_for(lambda: len(producer.acked) > 1500, 30, "records acknowledged before the kill")
    seen = len(log_lines(supervisor))
    os.kill(before[1], signal.SIGKILL)
    producer.join(180)
    assert not producer.failed, producer.failed[:3]
    check_delivery(read_all(supervisor.bootstrap, "failover", PARTITIONS), producer.acked)
    # Worker 0 took the dead worker's partitions, then the supervisor started worker 1 again.
    wait_logged(supervisor, seen, lambda line: " worker=0 " in line and TOOK_SOME.search(line),
                "worker 0 to take worker 1's share")
    wait_logged(supervisor, seen, lambda line: f"worker 1 (pid {before[1]}) exited with -9: starting it again" in line,
                "the supervisor to start worker 1 again")
    wait_for(lambda: workers_of(supervisor).get(1) not in (None, before[1]), 30, "worker 1 running again")
    wait_leaders(supervisor, "failover", {0, 1})  # and back: both workers own partitions again
    wait_logged(supervisor, seen, lambda line: " worker=1 " in line and TOOK_SOME.search(line),
                "the new worker 1 to take its share back")


def test_a_stopped_worker_loses_its_session_and_is_replaced(supervisor):
    create(supervisor, "paused")
    before = workers_of(supervisor)
    seen = len(log_lines(supervisor))
    os.kill(before[0], signal.SIGSTOP)  # a hang: its sockets stay open, its heartbeats stop
    try:
        wait_for(lambda: workers_of(supervisor).get(0) not in (None, before[0]), SESSION_TIMEOUT_MS / 1000 + 30,
                 "worker 0 replaced")
    finally:
        if alive(before[0]):
            os.kill(before[0], signal.SIGCONT)
    assert any(f"(pid {before[0]}) silent for" in line for line in log_lines(supervisor)[seen:])
    wait_logged(supervisor, seen, lambda line: " worker=1 " in line and TOOK_SOME.search(line),
                "worker 1 to take worker 0's share")
    wait_leaders(supervisor, "paused", {0, 1})
    producer = Producer({"bootstrap.servers": supervisor.bootstrap, "acks": "all"})
    for i in range(PARTITIONS * 10):
        producer.produce("paused", key=R.key(i), value=R.value(i, 10), partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    assert len(read_all(supervisor.bootstrap, "paused", PARTITIONS)) == PARTITIONS * 10


def test_sigterm_on_the_supervisor_stops_every_worker_cleanly(tmp_path_factory):
    supervisor = start(tmp_path_factory, "stopped")
    try:
        create(supervisor, "sealed")
        pids = workers_of(supervisor)
        assert sorted(pids) == [0, 1]
        assert supervisor.stop(timeout=60) == 0
        for pid in pids.values():
            wait_for(lambda pid=pid: not alive(pid), 10, f"worker pid {pid} gone")
        lines = log_lines(supervisor)
        for index in (0, 1):
            assert any(f" worker={index} " in line and "sealed and handed over" in line for line in lines)
    finally:
        supervisor.stop(timeout=60)  # a no-op once the test has stopped it


def test_a_supervisor_killed_takes_its_workers_and_a_new_one_reads_everything_back(tmp_path_factory):
    supervisor = start(tmp_path_factory, "restarted")
    try:
        create(supervisor, "kept")
        producer = AckedProducer("confluent", supervisor.bootstrap, "kept", 800, per_second=4000,
                                 **{"enable.idempotence": True}).start().join(60)
        assert not producer.failed
        pids = workers_of(supervisor)
        supervisor.kill()
        for pid in pids.values():
            wait_for(lambda pid=pid: not alive(pid), 10, f"worker pid {pid} gone with its supervisor")
        supervisor.port = free_port_pair()  # the last run's ports may be taken by now
        supervisor.start(timeout=60)
        wait_leaders(supervisor, "kept", {0, 1})
        check_delivery(read_all(supervisor.bootstrap, "kept", PARTITIONS), producer.acked)
    finally:
        supervisor.stop(timeout=60)  # by PID, whichever of the two supervisors runs (none: a no-op)
