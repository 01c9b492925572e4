"""One fault run: the cluster up in its namespaces, the workload recording a history while
the nemesis injects faults, everything healed, the drain, and the checker's verdict.

    python -m tests.faults.run --minutes N --seed S [--dir DIR] [--faults kill-broker,...] [--target kafka]

``--target kafka`` meets Apache Kafka 4.4 (kafka_cluster.py) with the same workloads,
faults (those it has a counterpart of) and checker: the control.

Exits 0 when the checker finds no anomaly, 1 when it finds one (its report says which,
with the smallest counterexample of each), a client call never returned, or a broker failed
a request inside, 2 when the run itself could not be made.
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka.admin import AdminClient

from . import history, kafka_cluster
from .checker import Report, check
from .cluster import _ROOT, FaultCluster, wait_until
from .fault_clients import BLOCKED, WIND_DOWN_SECONDS
from .kafka_cluster import KafkaFaultCluster
from .nemesis import Nemesis
from .network import Network

SETTLE_SECONDS = 15  # after the last fault healed: clients reconnect, transactions time out


@dataclass
class Outcome:
    seed: int
    faults: list[str]
    report: Report
    directory: str
    blocked: str = ""  # the clients whose calls never returned, as the workload said

    @property
    def request_failures(self) -> list[str]:
        """Requests a kgate broker failed with an exception, closing the client's connection
        (its log's error): a bug whatever the client did next, though clients retry and the
        history may show nothing (seed 21: InitProducerId while the metadata store was out of
        reach, a consumer heartbeat whose record met a fenced ledger). The first line of each."""
        return [f"{broker}: {_request_failure(line)}"
                for broker, line in broker_log_lines(self.directory, lambda line: "failed; closing connection" in line)]


def broker_log_lines(directory: str, wanted: Callable[[str], bool]) -> list[tuple[str, str]]:
    """The ``wanted`` lines of every kgate broker's log in a run's directory, each with its
    broker's directory name, broker by broker."""
    found = []
    for log in sorted(glob.glob(os.path.join(directory, "broker-*", "broker.log"))):
        with open(log, errors="replace") as lines:
            found += [(os.path.basename(os.path.dirname(log)), line.strip()) for line in lines if wanted(line)]
    return found


def _request_failure(line: str) -> str:
    """A broker log's line of a failed request, short: its time, what failed, and the exception."""
    time_, _, rest = line.partition(" ")
    what = rest.partition('msg="')[2].partition('"')[0]
    exception = line.rstrip('"').rsplit("\\n", 1)[-1]
    return f"{time_} {what}: {exception}"


# What a run meets: kgate's cluster, or Apache Kafka's as the control, and the faults each can take.
TARGETS = {"kgate": (FaultCluster, Nemesis.KINDS), "kafka": (KafkaFaultCluster, kafka_cluster.KINDS)}


def _workload(cluster: FaultCluster | KafkaFaultCluster, mode: str, out_dir: str, *args: str) -> subprocess.Popen:
    with open(os.path.join(out_dir, f"workload-{mode}.log"), "ab") as log:
        return subprocess.Popen(cluster.client.wrap(sys.executable, "-m", "tests.faults.fault_clients", mode,
                                                    cluster.bootstrap, out_dir, *args), cwd=_ROOT,
                                stdout=log, stderr=log)


def _last_lines(path: str, count: int = 5) -> str:
    """The end of a workload's log (its own lines, not librdkafka's), for an error that names why."""
    with open(path, errors="replace") as log:
        lines = [line.rstrip() for line in log if not line.startswith("%")]
    return " | ".join(lines[-count:])


def _wait(process: subprocess.Popen, timeout: float, mode: str, directory: str) -> int:
    what, log = f"the workload's {mode}", os.path.join(directory, f"workload-{mode}.log")
    try:
        code = process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise TimeoutError(f"{what} still running after {timeout} s") from None
    if code not in (0, BLOCKED):
        raise RuntimeError(f"{what} exited with {code}: {_last_lines(log)}")
    return code


def _dump_stacks(cluster) -> None:
    """Every live kgate broker's threads, as they stand at the end, into its directory
    (``stacks.txt``): where a broker that stopped making progress is stuck (py-spy, from
    scripts/setup-bench; without it, nothing)."""
    spy = shutil.which("py-spy", path=os.path.dirname(sys.executable))
    for broker in cluster.brokers if spy and isinstance(cluster, FaultCluster) else ():
        if broker.alive():
            with open(os.path.join(broker.data_dir, "stacks.txt"), "wb") as out:
                subprocess.run([spy, "dump", "--pid", str(broker.process.pid)], stdout=out,
                               stderr=subprocess.STDOUT, timeout=60, check=False)


def run(seconds: float, seed: int, directory: str, kinds: tuple[str, ...] | None = None, log=print,
        target: str = "kgate") -> Outcome:
    make, possible = TARGETS[target]
    kinds = kinds or possible
    if not set(kinds) <= set(possible):
        raise ValueError(f"{target} has no counterpart of {sorted(set(kinds) - set(possible))}")
    blocked = ""
    with Network() as network:
        cluster = make(directory, network)
        try:
            cluster.start()
            expected = set(range(1, len(cluster.brokers) + 1))
            wait_until(lambda: cluster.client.call(lambda: set(AdminClient(
                {"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=10).brokers)) == expected,
                60, "every broker live")
            workload = _workload(cluster, "run", directory, "--seconds", str(seconds + SETTLE_SECONDS),
                                 "--seed", str(seed))
            path = os.path.join(directory, "history.jsonl")
            wait_until(lambda: os.path.exists(path) and os.path.getsize(path) > 0 or workload.poll() is not None,
                       120, "the workload's first operation")
            nemesis = Nemesis(cluster, seed, kinds, log)
            began = time.monotonic()
            nemesis.run(seconds)
            log(f"faults over after {time.monotonic() - began:.0f} s; settling")
            try:
                if _wait(workload, SETTLE_SECONDS + WIND_DOWN_SECONDS + 60, "run", directory) == BLOCKED:
                    with open(os.path.join(directory, "workload-run.log")) as lines:
                        blocked = next((line.strip() for line in lines if line.startswith("still blocked")),
                                       "blocked")
            except TimeoutError as hung:
                # Past its own bound on blocked calls, so stuck outside them (a seed-12 run: no client
                # said blocked, the process never ended): a liveness failure like theirs, and the
                # history it wrote, an operation a line, is drained and judged all the same.
                blocked = str(hung)
            _wait(_workload(cluster, "drain", directory), 600, "drain", directory)
        finally:
            _dump_stacks(cluster)
            cluster.stop()
    with open(os.path.join(directory, "history.jsonl")) as lines:
        report = check(list(history.read(lines)))
    return Outcome(seed, nemesis.applied, report, directory, blocked)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dir", help="where logs and the history go (default: a new temporary directory)")
    parser.add_argument("--faults", help=f"comma-separated, of: {', '.join(Nemesis.KINDS)} "
                                         f"(against Kafka: {', '.join(kafka_cluster.KINDS)})")
    parser.add_argument("--target", choices=sorted(TARGETS), default="kgate",
                        help="the cluster the run meets (kafka: Apache Kafka 4.4, the control)")
    args = parser.parse_args()
    directory = args.dir or tempfile.mkdtemp(prefix=f"faults-{args.seed}-")
    os.makedirs(directory, exist_ok=True)
    kinds = tuple(args.faults.split(",")) if args.faults else None
    try:
        outcome = run(args.minutes * 60, args.seed, directory, kinds, target=args.target)
    except (TimeoutError, RuntimeError, ValueError) as exc:
        print(f"run failed: {exc}; logs in {directory}")
        return 2
    print(f"seed {args.seed}: {len(outcome.faults)} faults: {'; '.join(outcome.faults)}")
    print(outcome.report.render())
    if outcome.blocked:
        print(f"liveness: clients {outcome.blocked}")
    failures = outcome.request_failures
    if failures:
        print(f"requests failed inside the brokers: {len(failures)}; the first: {failures[0]}")
    print(f"history and logs in {directory}")
    return 0 if outcome.report.valid and not outcome.blocked and not failures else 1


if __name__ == "__main__":
    sys.exit(main())
