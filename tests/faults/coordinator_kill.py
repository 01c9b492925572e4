"""A transactional producer's ``send_offsets_to_transaction`` while its group coordinator dies:
does the call return within its timeout? The same rounds against kgate's fault cluster and
Apache Kafka 4.4's, so what differs is the broker's.

    python -m tests.faults.coordinator_kill [--target kgate|kafka] [--rounds N] [--down S] [--stop kill|term]
        [--dir DIR]

Each round takes a fresh group and a transactional id whose coordinators are on different
brokers, commits one transaction with offsets (so the producer knows the group coordinator),
begins a second one, calls ``send_offsets_to_transaction`` with a 10 s timeout and, 0 to 7.5
ms into the call (rounds cycle through the delays), kills the group coordinator's broker with
kill -9, restarting it ``--down`` seconds later. With ``--stop term`` the broker is stopped
cleanly instead (SIGTERM: its partitions handed over, then it leaves) and the call made 0 to
250 ms after the stop has ended, as a producer between two transactions meets it. A call
still running 60 s after the restart is reported as blocked. The producers' librdkafka debug
log (eos, broker, metadata) goes to stderr, from librdkafka's own threads (a blocked producer
is never polled again, so a Python logger would not get its last lines). The fault-testing
guide's open anomalies say what the rounds found.
"""
import argparse
import json
import os
import sys
import tempfile
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from conformance import scenarios as S
from conformance.session import Session

from .cluster import wait_until
from .fault_clients import create_topics
from .network import Network
from .run import TARGETS

CALL_TIMEOUT = 10
IN, OUT = "txn-in", "txn-out"  # the workload's topics (fault_clients.TOPICS), at each target's replication
BLOCKED_AFTER = 60


def coordinator(bootstrap: str, key: str, key_type: int) -> int:
    """The node id FindCoordinator names for ``key``, once one is named."""
    session = Session(bootstrap.split(",")[0], "probe")
    try:
        def named():
            found = S.find_coordinator(session, "probe", key, key_type, record=False).coordinators[0]
            return not found.error_code and found.node_id
        return wait_until(named, 60, f"a coordinator for {key}")
    finally:
        session.close()


def one_round(cluster, n: int, down: float, stop: str) -> dict:
    bootstrap, group = cluster.bootstrap, f"group-{n}"
    group_node = coordinator(bootstrap, group, 0)
    transactional_id = next(t for t in (f"txn-{n}-{i}" for i in range(100))
                            if coordinator(bootstrap, t, 1) != group_node)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "debug": "eos,broker,metadata"})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})  # for the group's metadata only
    meta = consumer.consumer_group_metadata()
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(OUT, b"first")
    producer.send_offsets_to_transaction([TopicPartition(IN, 0, 1)], meta, 30)
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(OUT, b"second")
    producer.flush(30)
    outcome: dict = {"round": n, "group_coordinator": group_node}

    def call() -> None:
        began = time.monotonic()
        try:
            producer.send_offsets_to_transaction([TopicPartition(IN, 0, 2)], meta, CALL_TIMEOUT)
            outcome["result"] = "ok"
        except Exception as exc:  # noqa: BLE001 - the outcome is what the probe reports
            outcome["result"] = str(exc)[:160]
        outcome["seconds"] = round(time.monotonic() - began, 1)
    caller = threading.Thread(target=call, daemon=True)
    broker = cluster.brokers[group_node - 1]
    if stop == "kill":
        caller.start()
        time.sleep(0.0015 * (n % 6))
        broker.kill()
    else:
        broker.stop()
        time.sleep(0.05 * (n % 6))
        caller.start()
    time.sleep(down)
    broker.restart(timeout=120)
    caller.join(BLOCKED_AFTER)
    outcome["returned"] = not caller.is_alive()
    consumer.close()
    return outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", choices=sorted(TARGETS), default="kgate")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--down", type=float, default=10, help="seconds the broker stays down")
    parser.add_argument("--stop", choices=("kill", "term"), default="kill",
                        help="kill -9 the group coordinator during the call, or stop it cleanly before it")
    parser.add_argument("--dir", help="where the cluster's logs go (default: a new temporary directory)")
    args = parser.parse_args(argv)
    directory = args.dir or tempfile.mkdtemp(prefix="coordinator-kill-")
    os.makedirs(directory, exist_ok=True)
    blocked = 0
    with Network() as network:
        cluster = TARGETS[args.target][0](directory, network)
        try:
            cluster.start()
            cluster.client.call(lambda: create_topics(cluster.bootstrap), 120)
            for n in range(args.rounds):
                outcome = cluster.client.call(
                    lambda n=n: one_round(cluster, n, args.down, args.stop),
                    args.down + BLOCKED_AFTER + 180)
                blocked += not outcome["returned"]
                print(json.dumps(outcome), flush=True)
        finally:
            cluster.stop()
    print(f"{args.target}: {blocked} of {args.rounds} calls blocked past {BLOCKED_AFTER} s after the restart "
          f"(logs in {directory})", flush=True)
    sys.stdout.flush()
    os._exit(1 if blocked else 0)  # a blocked call's producer would hold the interpreter's exit


if __name__ == "__main__":
    main()
