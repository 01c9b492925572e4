"""Run inside an old kafka-python's own venv: produce, read, or consume as a group.

Kept to what kafka-python 1.4 and 2.0 share, standard library only, so it runs under
any of them. Arguments are one JSON object; consumed records come back as JSON lines.
Records follow tests/support/records.py (key k<i>, value v<i>- padded to 100 bytes,
create time BASE+i).
"""
import json
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

BASE_TIMESTAMP_MS = 1_700_000_000_000


def value(i: int) -> bytes:
    return (b"v%d-" % i).ljust(100, b"x")


def common(args: dict) -> dict:
    options = {"bootstrap_servers": args["bootstrap"], "api_version": tuple(args["api_version"])}
    if args.get("sasl_mechanism"):
        options.update(security_protocol="SASL_PLAINTEXT", sasl_mechanism=args["sasl_mechanism"],
                       sasl_plain_username=args["user"], sasl_plain_password=args["password"])
    return options


def emit(message) -> None:
    timestamp = message.timestamp if message.timestamp is not None else -1
    print(json.dumps({"partition": message.partition, "offset": message.offset, "key": message.key.decode(),
                      "value": message.value.decode(), "timestamp": timestamp}), flush=True)


def produce(args: dict) -> None:
    codec = None if args["codec"] == "none" else args["codec"]
    producer = KafkaProducer(compression_type=codec, linger_ms=5, acks="all", **common(args))
    futures = [producer.send(args["topic"], key=b"k%d" % i, value=value(i), timestamp_ms=BASE_TIMESTAMP_MS + i)
               for i in range(args["first"], args["first"] + args["count"])]
    producer.flush(60)
    for future in futures:
        future.get(timeout=10)
    producer.close(10)


def read(args: dict) -> None:
    consumer = KafkaConsumer(enable_auto_commit=False, **common(args))
    partitions = [TopicPartition(args["topic"], p) for p in range(args["partitions"])]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    consume(consumer, args)
    consumer.close()


def group(args: dict) -> None:
    """Read ``count`` records as a member of ``group``, commit exactly those, leave."""
    consumer = KafkaConsumer(args["topic"], group_id=args["group"], enable_auto_commit=False,
                             auto_offset_reset="earliest", **common(args))
    positions = consume(consumer, args)
    consumer.commit({TopicPartition(args["topic"], p): OffsetAndMetadata(o, "") for p, o in positions.items()})
    consumer.close()


def consume(consumer, args: dict) -> dict:
    seen, positions = 0, {}
    deadline = time.monotonic() + args.get("timeout", 60)
    while seen < args["count"]:
        if time.monotonic() > deadline:
            sys.exit(f"read {seen} of {args['count']} records")
        for messages in consumer.poll(timeout_ms=500, max_records=args["count"] - seen).values():
            for message in messages:
                emit(message)
                positions[message.partition] = message.offset + 1
                seen += 1
    return positions


if __name__ == "__main__":
    arguments = json.loads(sys.argv[1])
    {"produce": produce, "read": read, "group": group}[arguments["mode"]](arguments)
