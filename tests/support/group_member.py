"""One consumer-group member as its own process, so a test can kill -9 it.

    python -m tests.support.group_member CLIENT BOOTSTRAP TOPIC GROUP OUT [--instance ID]
        [--assignor NAME] [--session-ms N] [--group-protocol classic|consumer] [--max-seconds N]

It subscribes, and for every batch it writes one line per record to OUT
(``record PARTITION OFFSET KEY``) and flushes, then commits synchronously: processing
before commit, so a crash re-delivers rather than loses. Every assignment it receives
is written as ``assigned P,P,...``. SIGTERM closes the consumer cleanly (leaving the
group, except a static member, which Kafka clients never make leave).
"""
import argparse
import signal
import time


def _confluent(args, out, stopping):
    from confluent_kafka import Consumer, KafkaException

    config = {"bootstrap.servers": args.bootstrap, "group.id": args.group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False}
    if args.group_protocol == "consumer":
        # KIP-848: the broker sets the session and assigns; the client may name the assignor.
        config["group.protocol"] = "consumer"
        if args.assignor:
            config["group.remote.assignor"] = args.assignor
    else:
        config.update({"session.timeout.ms": args.session_ms, "heartbeat.interval.ms": 1000,
                       "partition.assignment.strategy": args.assignor or "range,roundrobin"})
    if args.instance:
        config["group.instance.id"] = args.instance
    consumer = Consumer(config)
    incremental = args.assignor == "cooperative-sticky" or args.group_protocol == "consumer"

    def assigned(c, partitions):
        if incremental:
            c.incremental_assign(partitions)
            partitions = c.assignment()
        _write(out, "assigned " + ",".join(str(p.partition) for p in sorted(partitions, key=lambda p: p.partition)))

    consumer.subscribe([args.topic], on_assign=assigned)
    deadline = time.monotonic() + args.max_seconds
    try:
        while not stopping and time.monotonic() < deadline:
            messages = consumer.consume(1000, timeout=0.2)
            for message in messages:
                if message.error():
                    raise KafkaException(message.error())
            if messages:
                _write(out, "\n".join(f"record {m.partition()} {m.offset()} {m.key().decode()}" for m in messages))
                consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def _kafka_python(args, out, stopping):
    from kafka import KafkaConsumer
    from kafka.consumer.subscription_state import ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            pass

        def on_partitions_assigned(self, assigned):
            _write(out, "assigned "
                   + ",".join(str(tp.partition) for tp in sorted(assigned, key=lambda tp: tp.partition)))

    consumer = KafkaConsumer(bootstrap_servers=args.bootstrap, group_id=args.group, auto_offset_reset="earliest",
                             enable_auto_commit=False, session_timeout_ms=args.session_ms,
                             heartbeat_interval_ms=1000, group_instance_id=args.instance)
    consumer.subscribe([args.topic], listener=Listener())
    deadline = time.monotonic() + args.max_seconds
    try:
        while not stopping and time.monotonic() < deadline:
            batches = consumer.poll(timeout_ms=200, max_records=1000)
            lines = [f"record {m.partition} {m.offset} {m.key.decode()}"
                     for records in batches.values() for m in records]
            if lines:
                _write(out, "\n".join(lines))
                consumer.commit()
    finally:
        consumer.close()


def _write(out, text: str) -> None:
    out.write(text + "\n")
    out.flush()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("client", choices=["confluent-kafka", "kafka-python"])
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("group")
    parser.add_argument("out")
    parser.add_argument("--instance")
    parser.add_argument("--assignor")
    parser.add_argument("--session-ms", type=int, default=6000)
    parser.add_argument("--group-protocol", choices=["classic", "consumer"], default="classic")
    parser.add_argument("--max-seconds", type=float, default=300)
    args = parser.parse_args()
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _frame: stopping.append(signum))
    with open(args.out, "a") as out:
        (_confluent if args.client == "confluent-kafka" else _kafka_python)(args, out, stopping)


if __name__ == "__main__":
    main()
