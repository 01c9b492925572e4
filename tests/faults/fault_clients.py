"""The clients of a fault run, recording every operation (history.py) as it completes.

``run``: idempotent producers (acks=all) to ``idem``; transactional consume-transform-produce
workers that read ``txn-in``, write what they read to ``txn-out`` and fresh values to
``txn-in`` and commit their offsets in the transaction (a tenth aborted on purpose, the second
among them); and consumers in groups, read_committed and read_uncommitted, classic and consumer
protocols.
``drain``: after the faults are healed, reads every partition from 0 to its end, so every
acknowledged value is either found or proven lost.

    python -m tests.faults.fault_clients run|drain BOOTSTRAP OUT_DIR [--seconds N] [--seed S]
"""
import argparse
import faulthandler
import os
import random
import sys
import threading
import time
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.cluster import log_end

from .history import FAIL, INFO, OK, READ_COMMITTED, READ_UNCOMMITTED, Operation, Poll, Send

TOPICS = {"idem": 4, "txn-in": 4, "txn-out": 4}
ISOLATION = {"idem": READ_UNCOMMITTED, "txn-in": READ_COMMITTED, "txn-out": READ_COMMITTED}
# (process, topics, isolation, group protocol)
CONSUMERS = [("c-idem-classic", ["idem"], READ_UNCOMMITTED, "classic"),
             ("c-idem-consumer", ["idem"], READ_COMMITTED, "consumer"),
             ("c-txn-classic", ["txn-in", "txn-out"], READ_COMMITTED, "classic"),
             ("c-txn-consumer", ["txn-in", "txn-out"], READ_UNCOMMITTED, "consumer")]
BLOCKED = 3  # the run's exit code when a client call never returned
WIND_DOWN_SECONDS = 150  # after the run's end, for the last transaction, flush and close
# message.timeout.ms is Kafka's default delivery.timeout.ms (librdkafka's own is 300 s). A shorter
# one measures librdkafka as much as the broker: when any record of the producer times out
# locally, it bumps its epoch and renumbers every record not yet acknowledged, so a record the
# broker stored but had not yet answered (its partition moving, its owner paused) is stored
# again under the new epoch, as it would be on Kafka; with 30 s, seed 21 showed it.
PRODUCER = {"acks": "all", "enable.idempotence": True, "linger.ms": 5, "message.timeout.ms": 120_000,
            "topic.metadata.refresh.interval.ms": 1000, "socket.timeout.ms": 10_000,
            # librdkafka's debug contexts for the producers' log (e.g. "eos" for every epoch bump
            # and retry of the idempotent producer), when a run is diagnosed.
            **({"debug": os.environ["KGATE_FAULTS_PRODUCER_DEBUG"]} if os.environ.get("KGATE_FAULTS_PRODUCER_DEBUG")
               else {})}


# What each client thread is doing now, by thread name: said for the ones still blocked at the end.
DOING: dict[str, str] = {}


def doing(what: str) -> None:
    DOING[threading.current_thread().name] = what


class Recorder:
    """Appends each operation to the process's history file the moment it completes."""

    def __init__(self, path: str):
        self._out = open(path, "a")
        self._lock = threading.Lock()

    def __call__(self, op: Operation) -> None:
        with self._lock:
            self._out.write(op.to_json() + "\n")
            self._out.flush()

    def close(self) -> None:
        self._out.close()


def _name(message) -> str:
    return f"{message.topic()}/{message.partition()}"


def _polls(messages) -> tuple[Poll, ...]:
    return tuple(Poll(_name(m), m.offset(), m.value().decode()) for m in messages if m.error() is None)


def group_member(bootstrap: str, group: str, isolation: str, protocol: str) -> dict:
    """A consumer's settings in ``group`` with the classic protocol or KIP-848's (``consumer``),
    where the session timeout is the group's, not the member's."""
    config = {"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": isolation,
              "auto.offset.reset": "earliest"}
    if protocol == "consumer":
        config["group.protocol"] = "consumer"
    else:
        config["session.timeout.ms"] = 10_000
    if os.environ.get("KGATE_FAULTS_CONSUMER_DEBUG"):  # librdkafka's debug contexts, when a run is diagnosed
        config["debug"] = os.environ["KGATE_FAULTS_CONSUMER_DEBUG"]
    return config


def create_topics(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, n) for t, n in TOPICS.items()]).values():
        try:
            future.result(30)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise


def produce_idempotent(bootstrap: str, name: str, record: Recorder, until: float, rng: random.Random) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER})
    i = 0
    while time.monotonic() < until:
        value, partition, invoked = f"{name}-{i}", rng.randrange(TOPICS["idem"]), time.monotonic()

        def delivered(err, msg, value=value, invoked=invoked, partition=partition):
            offset = msg.offset() if err is None else None
            record(Operation(name, "send", invoked, time.monotonic(), OK if err is None else INFO,
                             sends=(Send(f"idem/{partition}", value, offset),)))
        producer.produce("idem", value=value.encode(), partition=partition, on_delivery=delivered)
        producer.poll(0.02)
        i += 1
    doing("flush")
    producer.flush(60)


class TransformWorker:
    """Consume-transform-produce in transactions; a transaction's reads and writes are one operation."""

    def __init__(self, bootstrap: str, name: str, record: Recorder, rng: random.Random, protocol: str):
        self.bootstrap, self.name, self.record, self.rng = bootstrap, name, record, rng
        self.consumer = Consumer({**group_member(bootstrap, "transform", READ_COMMITTED, protocol),
                                  "enable.auto.commit": False})
        self.consumer.subscribe(["txn-in"], on_assign=self._assigned, on_revoke=self._assigned)
        self.session = 0
        self.in_flight: Callable[[], Operation] | None = None
        self.producer = self._producer()

    def _producer(self) -> Producer:
        self.session += 1
        producer = Producer({"bootstrap.servers": self.bootstrap, **PRODUCER, "transactional.id": self.name,
                             "message.timeout.ms": 10_000, "transaction.timeout.ms": 15_000})
        doing("init_transactions")
        producer.init_transactions(60)
        return producer

    @property
    def process(self) -> str:
        return f"{self.name}.{self.session}"

    def _assigned(self, consumer, partitions) -> None:
        now = time.monotonic()
        self.record(Operation(self.process, "assign", now, now, OK))

    def run(self, until: float) -> None:
        t = 0
        while time.monotonic() < until:
            try:
                self.transaction(t)
            except KafkaException:
                self.producer = self._producer()  # fatal: a new producer session fences the old one
                self._rewind()
            t += 1
        doing("consumer.close")
        self.consumer.close()

    def transaction(self, t: int) -> None:
        """One transaction, recorded however it ends: a call that raises leaves its outcome
        unknown (the new producer session the caller starts aborts it, or it was committed)."""
        invoked, messages, outcome = time.monotonic(), [], INFO
        planned: dict[str, str] = {}  # value -> partition, recorded even if its report never comes
        offsets: dict[str, int] = {}

        def operation() -> Operation:
            sends = tuple(Send(partition, value, offsets.get(value)) for value, partition in planned.items())
            return Operation(self.process, "txn", invoked, time.monotonic(), outcome, sends=sends,
                             polls=_polls(messages))
        self.in_flight = operation  # what the run records as unknown if this transaction never ends

        def send(topic: str, partition: int, value: str) -> None:
            planned[value] = f"{topic}/{partition}"
            self.producer.produce(topic, value=value.encode(), partition=partition, on_delivery=delivered)

        def delivered(err, msg):
            if err is None:
                offsets[msg.value().decode()] = msg.offset()
        try:
            doing(f"transaction {t}")
            self.producer.begin_transaction()
            messages = [m for m in self.consumer.consume(20, 1.0) if m.error() is None]
            for m in messages:
                send("txn-out", m.partition(), f"{m.value().decode()}>{self.name}.{t}")
            for j in range(2):
                send("txn-in", self.rng.randrange(TOPICS["txn-in"]), f"{self.name}.{t}.{j}")
            outcome = self._finish(t, messages)
        finally:
            self.in_flight = None
            self.record(operation())
        if outcome != OK:
            self._rewind()

    def _finish(self, t: int, messages) -> str:
        """Commit, or abort on purpose: the second transaction and every tenth after it, so that
        a worker the faults hold to a few transactions still aborts one (a seed-12 run in a whole
        suite: ten transactions in all, none of them aborted by a draw of one in ten)."""
        try:
            doing("committing or aborting a transaction")
            if messages:
                positions = self.consumer.position(self.consumer.assignment())
                self.producer.send_offsets_to_transaction(positions, self.consumer.consumer_group_metadata(), 30)
            if t % 10 == 1:
                self.producer.abort_transaction(30)
                return FAIL
            self.producer.commit_transaction(30)
            return OK
        except KafkaException as exc:
            if exc.args[0].fatal():
                raise
            try:
                self.producer.abort_transaction(30)
                return FAIL
            except KafkaException:
                self.producer = self._producer()
                return INFO

    def _rewind(self) -> None:
        """Back to the committed offsets, as an aborted transaction's reads must be done again."""
        doing("rewind to the committed offsets")
        assignment = self.consumer.assignment()
        for tp in self.consumer.committed(assignment, 30) if assignment else ():
            self.consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))
        now = time.monotonic()
        self.record(Operation(self.process, "assign", now, now, OK))


def consume(bootstrap: str, name: str, topics: list[str], isolation: str, protocol: str, record: Recorder,
            until: float) -> None:
    consumer = Consumer(group_member(bootstrap, f"group-{name}", isolation, protocol))

    def assigned(_, partitions):
        now = time.monotonic()
        record(Operation(name, "assign", now, now, OK, isolation=isolation))
    consumer.subscribe(topics, on_assign=assigned, on_revoke=assigned)
    while time.monotonic() < until:
        invoked = time.monotonic()
        polls = _polls(consumer.consume(200, 0.5))
        if polls:
            record(Operation(name, "poll", invoked, time.monotonic(), OK, polls=polls, isolation=isolation))
    doing("close")
    consumer.close()


def run(bootstrap: str, out_dir: str, seconds: float, seed: int) -> None:
    create_topics(bootstrap)
    record = Recorder(os.path.join(out_dir, "history.jsonl"))
    until = time.monotonic() + seconds
    rng = random.Random(seed)
    workers = [threading.Thread(target=produce_idempotent, name=f"p{i}", daemon=True,
                                args=(bootstrap, f"p{i}", record, until, random.Random(rng.random())))
               for i in range(2)]
    workers += [threading.Thread(target=consume, args=(bootstrap, *c, record, until), name=c[0], daemon=True)
                for c in CONSUMERS]
    transforms = [TransformWorker(bootstrap, f"t{i}", record, random.Random(rng.random()), protocol)
                  for i, protocol in enumerate(["classic", "consumer"])]
    workers += [threading.Thread(target=w.run, args=(until,), name=w.name, daemon=True) for w in transforms]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(max(0.0, until + WIND_DOWN_SECONDS - time.monotonic()))
    blocked = [f"{w.name} ({DOING.get(w.name, 'running')})" for w in workers if w.is_alive()]
    for transform in transforms:
        if transform.in_flight is not None:  # never ended: committed or not, unknown
            record(transform.in_flight())
    record.close()
    if blocked:
        # A client call that never returns is the cluster's liveness failure, not a reason to
        # hang the run: said here, its operation left without a completion, and the process
        # ends without waiting for librdkafka's threads.
        print(f"still blocked {WIND_DOWN_SECONDS} s after the end: {', '.join(blocked)}", flush=True)
        faulthandler.dump_traceback(sys.stdout, all_threads=True)  # the call each one is in
        os._exit(BLOCKED)
    # Every call returned; the handles left (a transactional producer just fenced, its successor
    # still asking for a producer id) are not destroyed at interpreter exit, where two seed-12 runs
    # hung with no client blocked.
    sys.stdout.flush()
    os._exit(0)


def drain(bootstrap: str, out_dir: str, timeout: float = 120) -> None:
    """Every partition from offset 0 to its end, each topic at the isolation its writers need.
    A topic that cannot be read to its end within ``timeout`` is said and left: what it held
    then shows in the checker's report as unseen writes, the signal that belongs there."""
    record = Recorder(os.path.join(out_dir, "history.jsonl"))
    for topic in TOPICS:
        deadline = time.monotonic() + timeout
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"drain-{topic}",
                             "isolation.level": ISOLATION[topic], "enable.auto.commit": False})
        try:
            _drain_topic(consumer, topic, record, deadline)
        except KafkaException as exc:
            print(f"drain of {topic} gave up: {exc}", flush=True)
        finally:
            consumer.close()
    record.close()


def _drain_topic(consumer: Consumer, topic: str, record: Recorder, deadline: float) -> None:
    partitions = len(consumer.list_topics(topic, timeout=30).topics[topic].partitions)  # the nemesis adds some
    ends = {p: log_end(consumer, TopicPartition(topic, p), deadline) for p in range(partitions)}
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    behind = [TopicPartition(topic, p) for p in range(partitions)]  # until a position says otherwise
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        invoked = time.monotonic()
        polls = _polls(consumer.consume(1000, 0.5))
        if polls:
            quiet_since = time.monotonic()
            record(Operation(f"drain-{topic}", "poll", invoked, time.monotonic(), OK, polls=polls,
                             isolation=ISOLATION[topic]))
        positions = consumer.position([TopicPartition(topic, p) for p in range(partitions)])
        behind = [tp for tp in positions if tp.offset < ends[tp.partition]]
        if not behind:
            return
        # Quiet for a while with every partition read some way: a read_committed position stops below
        # the end at a transaction left open. One not read at all may be its owner still opening it
        # (a seed-12 run: 22 partitions reopened after a late session expiry, 30 s), so it is waited for.
        if time.monotonic() - quiet_since >= 15 and all(tp.offset > 0 for tp in behind):
            print(f"drain of {topic}: nothing more read for 15 s; short of the end: {_short(behind, ends)}", flush=True)
            return
    print(f"drain of {topic}: out of time; short of the end: {_short(behind, ends)}", flush=True)


def _short(behind: list[TopicPartition], ends: dict[int, int]) -> str:
    """Each partition a drain left short of its end, as partition@position/end."""
    return ", ".join(f"{tp.partition}@{tp.offset}/{ends[tp.partition]}" for tp in behind)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["run", "drain"])
    parser.add_argument("bootstrap")
    parser.add_argument("out_dir")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.mode == "run":
        run(args.bootstrap, args.out_dir, args.seconds, args.seed)
    else:
        drain(args.bootstrap, args.out_dir)


if __name__ == "__main__":
    main()
