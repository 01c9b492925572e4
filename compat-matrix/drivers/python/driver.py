"""One Python client library driven through the matrix's driver command line.

    python driver.py LIBRARY --mode=produce|transact|read|group|share|admin [options]

LIBRARY names the adapter module beside this file (``kafka_python`` for kafka-python
and kafka-python-ng, ``aiokafka_client``, ``confluent``); the interpreter is the one
of the venv (or Debian package) holding that library release, so this file and the
adapters keep to the standard library and what every release of their library shares.
Records are tests/support/records.py's; consumed records are printed one JSON object
per line for the runner to check. Any failure exits non-zero with one message on stderr.
"""
import argparse
import importlib
import json
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(os.path.dirname(os.path.dirname(HERE)))]

from tests.support import records  # noqa: E402  (the repository root is on the path only now)


def arguments(argv: list[str]) -> argparse.Namespace:
    """The options every driver of the matrix takes, whatever its language."""
    parser = argparse.ArgumentParser()
    parser.add_argument("library")
    parser.add_argument("--mode", required=True, choices=["produce", "transact", "read", "group", "share", "admin"])
    parser.add_argument("--brokers", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--pin", default="", help="the protocol generation to speak; empty: negotiate")
    parser.add_argument("--codec", default="none")
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--group", default="")
    parser.add_argument("--headers", action="store_true", help="give each record its headers")
    parser.add_argument("--idempotent", action="store_true")
    parser.add_argument("--transactional-id", default="kgate-compat-tx")
    parser.add_argument("--isolation", default="", help="read_committed or read_uncommitted; empty: the library's")
    parser.add_argument("--group-protocol", default="", help="consumer: KIP-848's; empty: the classic protocol")
    parser.add_argument("--sasl-mechanism", default="")
    parser.add_argument("--sasl-user", default="")
    parser.add_argument("--sasl-password", default="")
    parser.add_argument("--client-id", default="kgate-compat")
    parser.add_argument("--timeout", type=float, default=60)
    return parser.parse_args(argv)


def produced(args: argparse.Namespace):
    """(key, value, headers or None, timestamp) of each record to produce."""
    for i in range(args.first, args.first + args.count):
        yield records.key(i), records.value(i), records.headers(i) if args.headers else None, records.timestamp(i)


def transactions(args: argparse.Namespace) -> list[tuple[list, bool]]:
    """What transact mode writes: the records in three transactions of a third each, the
    first and last committed, the middle one aborted (each one's records flushed first, so
    the abort has stored records to mark), as (records, commit)."""
    records = list(produced(args))
    third = len(records) // 3
    return [(records[:third], True), (records[third:2 * third], False), (records[2 * third:], True)]


def emit(partition: int, offset: int, key: bytes, value: bytes, timestamp, headers) -> None:
    print(json.dumps({"partition": partition, "offset": offset, "key": key.decode(), "value": value.decode(),
                      "timestamp": records.NO_TIMESTAMP if timestamp is None or timestamp < 0 else timestamp,
                      "headers": [[k, v.decode()] for k, v in headers or ()]}), flush=True)


def consume(poll, args: argparse.Namespace) -> dict:
    """Print records from ``poll(max_records)`` (tuples as ``emit`` takes them) until
    ``count`` are read; returns the next offset of each partition read, to commit."""
    seen, positions = 0, {}
    deadline = time.monotonic() + args.timeout
    while seen < args.count:
        if time.monotonic() > deadline:
            raise Shortfall(seen, args.count)
        for record in poll(args.count - seen):
            emit(*record)
            positions[record[0]] = record[1] + 1
            seen += 1
    return positions


def emit_topic(partitions: int) -> None:
    """What admin mode saw when it described the topic it created."""
    print(json.dumps({"described_partitions": partitions}), flush=True)


def watchdog(timeout: float) -> None:
    """Exit once ``timeout`` (and a grace for a clean stop) has passed, whatever the library
    is doing: an old release can loop forever in a call no deadline of ours reaches (kafka-python
    2.0.2 resets offsets on and on after a failed login), and the runner would otherwise wait
    for its own, longer, margin."""
    def expire():
        sys.stderr.write(f"TimeoutError: did not finish within {timeout:.0f} s\n")
        sys.stderr.flush()
        os._exit(3)
    timer = threading.Timer(timeout + WATCHDOG_GRACE, expire)
    timer.daemon = True
    timer.start()


WATCHDOG_GRACE = 5  # seconds past --timeout for the adapter's own deadline to end it cleanly


class Shortfall(Exception):
    def __init__(self, seen: int, wanted: int):
        super().__init__(f"read {seen} of {wanted} records")


if __name__ == "__main__":
    options = arguments(sys.argv[1:])
    watchdog(options.timeout)
    adapter = importlib.import_module(options.library)
    try:
        getattr(adapter, options.mode)(options)
    except Exception as exc:  # one line for the matrix cell, whatever the library raised
        sys.exit(f"{type(exc).__name__}: {exc}")
