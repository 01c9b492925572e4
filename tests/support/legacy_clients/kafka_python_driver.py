"""Drive an old kafka-python release (run with its own venv's python): one JSON argument in,
one JSON object per line out.

Modes: ``produce`` prints each record's delivered partition/offset, ``consume`` reads the
topic's partitions from the start, ``group`` reads as a member of a group and commits
exactly what it printed. Records follow tests/support/records.py (key k<i>, value
v<i>- padded to 100 bytes, create time BASE + i where the generation carries it).
"""
import json
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

BASE_TIMESTAMP_MS = 1_700_000_000_000


def options(args):
    out = {"bootstrap_servers": args["bootstrap"], "api_version": tuple(args["api_version"]),
           "client_id": "kafka-python-driver"}
    if args.get("sasl_mechanism"):
        out.update(security_protocol="SASL_PLAINTEXT", sasl_mechanism=args["sasl_mechanism"],
                   sasl_plain_username=args["user"], sasl_plain_password=args["password"])
    return out


def emit(**fields):
    print(json.dumps(fields), flush=True)


def produce(args):
    producer = KafkaProducer(compression_type=None if args["codec"] == "none" else args["codec"], linger_ms=5,
                             acks="all", retries=0, **options(args))
    futures = [(i, producer.send(args["topic"], key=b"k%d" % i, value=(b"v%d-" % i).ljust(100, b"x"),
                                 timestamp_ms=BASE_TIMESTAMP_MS + i)) for i in range(args["count"])]
    producer.flush(args["timeout"])
    for i, future in futures:
        metadata = future.get(timeout=1)
        emit(index=i, partition=metadata.partition, offset=metadata.offset)
    producer.close(10)


def poll(consumer, args):
    """Print up to ``count`` records; the next offset per partition of what was printed."""
    seen, positions = 0, {}
    deadline = time.monotonic() + args["timeout"]
    while seen < args["count"] and time.monotonic() < deadline:
        for messages in consumer.poll(timeout_ms=200, max_records=args["count"] - seen).values():
            for m in messages:
                emit(partition=m.partition, offset=m.offset, key=m.key.decode(), value=m.value.decode(),
                     timestamp=-1 if m.timestamp is None else m.timestamp)
                positions[m.partition] = m.offset + 1
                seen += 1
    return positions


def consume(args):
    consumer = KafkaConsumer(enable_auto_commit=False, group_id=None, **options(args))
    partitions = [TopicPartition(args["topic"], p) for p in range(args["partitions"])]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    poll(consumer, args)
    consumer.close()


def group(args):
    consumer = KafkaConsumer(args["topic"], group_id=args["group"], enable_auto_commit=False,
                             auto_offset_reset="earliest", **options(args))
    positions = poll(consumer, args)
    consumer.commit({TopicPartition(args["topic"], p): OffsetAndMetadata(o, "") for p, o in positions.items()})
    consumer.close()


if __name__ == "__main__":
    arguments = json.loads(sys.argv[1])
    {"produce": produce, "consume": consume, "group": group}[arguments["mode"]](arguments)
