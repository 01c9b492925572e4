"""Short fault schedules with fixed seeds against a real cluster in network namespaces (needs
root, ip and nftables: scripts/setup-faults). Longer ones: scripts/faults --minutes N --seed S.

Each run must find no anomaly in its history, and must have done enough to mean something:
faults injected, sends acknowledged and read back, transactions committed and aborted."""
import pytest

from tests.faults.history import FAIL, OK, read
from tests.faults.run import run

pytestmark = pytest.mark.slow

SCHEDULES = {
    # Processes: kill -9, SIGSTOP and SIGTERM of brokers and ZooKeeper nodes. Seed 21 found
    # duplicates from an idempotent producer (a ledger fenced after its WAL object was written).
    21: ("kill-broker", "pause-broker", "kill-zookeeper", "pause-zookeeper", "restart-broker"),
    # The network, object storage and clocks.
    12: ("isolate-broker", "isolate-zookeeper", "broker-from-zookeeper", "broker-from-storage",
         "majority-minority", "bridge", "pause-storage", "storage-delay", "storage-loss", "clock-jump"),
}


def complaints(directory, limit: int = 40) -> str:
    """The brokers' warnings and errors, for the failure message: a run's directory does not
    outlive pytest's rotation of temporary directories, and they are where a diagnosis starts."""
    lines = []
    for log in sorted(directory.glob("broker-*/broker.log")):
        lines += [f"{log.parent.name}: {line.strip()}" for line in open(log, errors="replace")
                  if "level=warning" in line or "level=error" in line]
    return "\n".join(lines[-limit:])


@pytest.mark.parametrize("seed", sorted(SCHEDULES))
def test_a_fault_schedule_leaves_no_anomaly(tmp_path, seed):
    outcome = run(60, seed, str(tmp_path), SCHEDULES[seed], log=lambda line: None)
    report = outcome.report
    assert outcome.faults, "no fault was injected"
    assert report.valid, f"seed {seed}, faults {outcome.faults}:\n{report.render()}\n{complaints(tmp_path)}"
    assert not outcome.blocked, f"seed {seed}, faults {outcome.faults}: clients {outcome.blocked}\n" \
                                f"{complaints(tmp_path)}"
    assert report.acknowledged > 1000 and report.read > 1000, report.render()
    with open(tmp_path / "history.jsonl") as lines:
        transactions = [op.outcome for op in read(lines) if op.kind == "txn"]
    assert transactions.count(OK) > 0 and transactions.count(FAIL) > 0, transactions
