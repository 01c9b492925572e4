"""Short fault schedules with fixed seeds against a real cluster in network namespaces (needs
root, ip and nftables: scripts/setup-faults). Longer ones: scripts/faults --minutes N --seed S.

Each run must lose, duplicate and misplace no acknowledged write, and have done enough to mean
something: faults injected, sends acknowledged and read back, transactions committed and
aborted. What consumers see of the order, and whether every client call returned, is judged
apart."""
import pytest

from tests.faults.checker import PROTOCOL_ALLOWS
from tests.faults.history import FAIL, OK, read
from tests.faults.run import broker_log_lines, run

# One worker runs the module, so each schedule's cluster runs once for the three tests that judge it.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("faults")]

SCHEDULES = {
    # Processes and disks: kill -9, SIGSTOP and SIGTERM of brokers and ZooKeeper nodes, a full
    # local WAL disk, partitions added (owners move). Seed 21 found duplicates from idempotent
    # producers (a ledger fenced after its WAL object was written; a producer renumbering what the
    # broker stored but had not answered, after a local timeout; a batch skipping ahead of a log
    # just read back answered out of sequence), fixed since.
    21: ("kill-broker", "pause-broker", "kill-zookeeper", "pause-zookeeper", "restart-broker", "wal-disk-full",
         "grow-partitions"),
    # The network, object storage and clocks: link-down isolation, nftables partitions and
    # bridges, object-storage pauses, delay and resets, clock jumps on one broker. Seed 12 found
    # acknowledged records lost to a compaction that thought it had lost, a consumer sent back to
    # offset 0 by a broker that had lost its partitions, duplicates after an epoch bump nobody
    # asked for, a broker serving nothing after two session expiries and one that could not
    # register again beside a whole suite, fixed since (docs/operating/fault-testing.md).
    12: ("isolate-broker", "isolate-zookeeper", "broker-from-zookeeper", "broker-from-storage", "majority-minority",
         "bridge", "pause-storage", "storage-delay", "storage-loss", "clock-jump"),
}


def complaints(directory, limit: int = 40) -> str:
    """The brokers' warnings and errors, for the failure message: a run's directory does not
    outlive pytest's rotation of temporary directories, and they are where a diagnosis starts."""
    lines = broker_log_lines(str(directory), lambda line: "level=warning" in line or "level=error" in line)
    return "\n".join(f"{broker}: {line}" for broker, line in lines[-limit:])


# What consumers see of the log's order: consumers of both group protocols skipped acknowledged
# records and read ranges twice while partitions changed owners, until OffsetForLeaderEpoch
# answered after the fetch pipelined before it (docs/operating/fault-testing.md, "Anomalies found
# and fixed").
CONSUMER_ORDER = {"nonmonotonic-poll", "poll-skip"}
# Whether every client call returns. Open, in the client: librdkafka's send_offsets_to_transaction
# can wait past its timeout for good when the group coordinator is killed during the call or
# stopped cleanly just before it (librdkafka issues 5456 and 5511; docs/operating/fault-testing.md,
# "Open anomalies"; against Kafka 4.4 too, by tests/faults/coordinator_kill.py, more often there
# after a clean stop). Not strict: it depends on the timing of a kill or a stop (about one full
# run in two).
LIVENESS_OPEN = pytest.mark.xfail(reason="librdkafka's send_offsets_to_transaction can block past its timeout when "
                                         "the group coordinator dies during the call or stops just before it "
                                         "(librdkafka issues 5456, 5511)",
                                  strict=False)


@pytest.fixture(scope="module", params=sorted(SCHEDULES))
def outcome(request, tmp_path_factory):
    """One run per schedule, judged by the tests below."""
    directory = tmp_path_factory.mktemp(f"faults-{request.param}")
    return run(60, request.param, str(directory), SCHEDULES[request.param], log=lambda line: None), directory


def test_a_fault_schedule_loses_duplicates_and_reorders_no_acknowledged_write(outcome):
    outcome, directory = outcome
    report = outcome.report
    assert outcome.faults, "no fault was injected"
    writes = {anomaly: n for anomaly, n in report.counts().items() if anomaly not in CONSUMER_ORDER}
    found = f"seed {outcome.seed}, faults {outcome.faults}:\n{report.render()}\n{complaints(directory)}"
    assert set(writes) <= PROTOCOL_ALLOWS, found
    assert report.acknowledged > 1000 and report.read > 1000, report.render()
    with open(directory / "history.jsonl") as lines:
        transactions = [op.outcome for op in read(lines) if op.kind == "txn"]
    assert transactions.count(OK) > 0 and transactions.count(FAIL) > 0, transactions


def test_consumers_read_each_partition_in_order_without_gaps(outcome):
    outcome, _ = outcome
    found = {anomaly: n for anomaly, n in outcome.report.counts().items() if anomaly in CONSUMER_ORDER}
    assert not found, f"seed {outcome.seed}, faults {outcome.faults}:\n{outcome.report.render()}"


def test_no_broker_fails_a_request_inside(outcome):
    """Whatever the faults, a broker answers each request with Kafka's error or closes the
    connection on purpose, never by a request failing inside it."""
    outcome, _directory = outcome
    assert not outcome.request_failures, "\n".join(outcome.request_failures[:5])


@LIVENESS_OPEN
def test_every_client_call_returns(outcome):
    outcome, directory = outcome
    assert not outcome.blocked, f"seed {outcome.seed}: clients {outcome.blocked}\n{complaints(directory)}"
