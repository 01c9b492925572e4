"""``kgate produce`` and ``kgate consume``: records between stdin/stdout and a topic.

``produce`` sends one record per input line (bytes as read; ``--key-separator``
splits off a key) with acks=all and reports the first failed delivery. ``consume``
prints values as text, or one JSON object per record for scripts; without ``--group``
it reads every partition directly, with ``--group`` it joins the group and commits
exactly what it printed, so a later consumer in the group resumes after it.
"""
import json
import sys
import time

from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError, KafkaTimeoutError
from kafka.producer.future import FutureRecordMetadata
from kafka.structs import OffsetAndMetadata, TopicPartition

from . import client_options as options
from . import output
from .client_options import Failed, UsageError

POLL_MS = 500
COMMIT_INTERVAL_S = 1.0
PROGRESS_EVERY = 100


def add_parser(commands) -> None:
    produce = options.subcommand(commands, "produce", "send lines from stdin to a topic, one record per line",
                                 in_family=False, description="Send each line of standard input to TOPIC as one record "
                                             "(acks=all). Exits 1 if any record was not delivered.")
    produce.add_argument("topic")
    produce.add_argument("--key-separator", metavar="SEP",
                         help="split each line at the first SEP into key and value (a line without SEP is "
                              "an error, exit 2); without it records have no key")
    produce.add_argument("--header", action="append", metavar="KEY=VALUE",
                         help="a header on every record (repeatable)")
    produce.add_argument("--partition", type=int, metavar="N", help="send to partition N (default: by key)")
    consume = options.subcommand(commands, "consume", "print records from a topic", in_family=False,
                                 description="Print records of TOPIC, from its end unless --from-beginning "
                                             "(with --group: from the group's committed offsets).")
    consume.add_argument("topic")
    consume.add_argument("--from-beginning", action="store_true",
                         help="start at the earliest offset (with --group: where the group has no commit)")
    consume.add_argument("--max-messages", type=int, metavar="N", help="stop after N records")
    consume.add_argument("--timeout-ms", type=int, metavar="MS", help="stop when no record arrives for MS")
    consume.add_argument("--group", metavar="G", help="consume as a member of group G and commit what is printed")
    consume.add_argument("--output", choices=("text", "json"), default="text",
                         help="text: the value per line; json: one object per record with partition, offset, "
                              "key, value, headers, timestamp (default text)")


def run(args) -> int:
    return options.run(_produce if args.command == "produce" else _consume, args, f"kgate {args.command}")


def _produce(args) -> None:
    headers = [(k, v.encode()) for k, v in options.key_values(args.header, "--header").items()]
    separator = args.key_separator.encode() if args.key_separator is not None else None
    if separator == b"":
        raise UsageError("--key-separator must not be empty")
    producer = options.connect(args, KafkaProducer, acks="all", linger_ms=5,
                               max_block_ms=args.connect_timeout_ms)
    try:
        _check_partition(args, _topic_partitions(producer, args.topic))
        sent: list[FutureRecordMetadata] = []
        with output.Progress(f"produced to {args.topic}", every=PROGRESS_EVERY) as progress:
            for number, line in enumerate(sys.stdin.buffer, start=1):
                line = line[:-1] if line.endswith(b"\n") else line
                line = line[:-1] if line.endswith(b"\r") else line
                key, value = None, line
                if separator is not None:
                    key, found, value = line.partition(separator)
                    if not found:
                        producer.flush()
                        raise UsageError(f"line {number} has no key separator {args.key_separator!r} "
                                         f"({_delivered(sent)} records before it were sent)")
                sent.append(producer.send(args.topic, value=value, key=key, headers=headers or None,
                                          partition=args.partition))
                progress.advance()
        producer.flush()
        _delivered(sent)
    finally:
        producer.close(timeout=10)


def _delivered(futures) -> int:
    """How many of ``futures`` were delivered; Failed naming the first that was not."""
    for number, future in enumerate(futures, start=1):
        try:
            future.get(timeout=60)
        except KafkaError as exc:
            raise Failed(f"record {number} was not delivered: {options.reason(exc)}"
                         + (f" ({exc.message})" if getattr(exc, "message", None) else "")) from None
    return len(futures)


def _topic_partitions(producer, topic: str) -> set:
    try:
        partitions = producer.partitions_for(topic)
    except KafkaTimeoutError:
        partitions = None
    if not partitions:
        raise Failed(f"topic {topic!r} does not exist (UNKNOWN_TOPIC_OR_PARTITION)")
    return partitions


def _check_partition(args, partitions) -> None:
    if args.partition is not None and args.partition not in partitions:
        raise Failed(f"topic {args.topic!r} has no partition {args.partition} (it has {len(partitions)})")


def _consume(args) -> None:
    for option in ("max_messages", "timeout_ms"):
        if getattr(args, option) is not None and getattr(args, option) <= 0:
            raise UsageError(f"--{option.replace('_', '-')} must be positive")
    outage = _Outage("kgate consume")
    consumer = options.connect(args, KafkaConsumer, group_id=args.group, enable_auto_commit=False,
                               allow_auto_create_topics=False,
                               auto_offset_reset="earliest" if args.from_beginning else "latest")
    try:
        partitions = consumer.partitions_for_topic(args.topic)
        if not partitions:
            raise Failed(f"topic {args.topic!r} does not exist (UNKNOWN_TOPIC_OR_PARTITION)")
        if args.group:
            consumer.subscribe([args.topic])
        else:
            assigned = [TopicPartition(args.topic, p) for p in sorted(partitions)]
            consumer.assign(assigned)
            (consumer.seek_to_beginning if args.from_beginning else consumer.seek_to_end)(*assigned)
        with options.ConnectionWatch(on_lost=outage.lost):
            _print_records(args, consumer, outage)
    finally:
        consumer.close(autocommit=False)


class _Outage:
    """A consumer whose broker went away only polls nothing: say so on stderr, once per
    outage, so a person or a script's log can tell a dead broker from a quiet topic."""

    def __init__(self, name: str):
        self.name = name
        self.down = False

    def lost(self, cause) -> None:
        if not self.down:
            self.down = True
            output.note(f"{self.name}: lost the connection to the broker ({options.reason(cause)}); "
                        f"still trying")

    def records_arrived(self) -> None:
        if self.down:
            self.down = False
            output.note(f"{self.name}: connected again")


def _print_records(args, consumer, outage: _Outage) -> None:
    """Poll and print until --max-messages or --timeout-ms of silence; commit what was printed (--group)."""
    printed, pending = 0, {}
    last_record = last_commit = time.monotonic()
    with output.Progress(f"consumed from {args.topic}", total=args.max_messages, every=PROGRESS_EVERY) as progress:
        try:
            while args.max_messages is None or printed < args.max_messages:
                wait_ms = POLL_MS
                if args.timeout_ms is not None:
                    idle_ms = (time.monotonic() - last_record) * 1000
                    if idle_ms >= args.timeout_ms:
                        break
                    wait_ms = max(1, min(POLL_MS, int(args.timeout_ms - idle_ms)))
                batches = consumer.poll(timeout_ms=wait_ms)
                if batches:
                    outage.records_arrived()
                for record in (r for records in batches.values() for r in records):
                    if args.max_messages is not None and printed >= args.max_messages:
                        break
                    print(_render(args.output, record), flush=True)
                    pending[TopicPartition(record.topic, record.partition)] = record.offset + 1
                    printed += 1
                    progress.advance()
                    last_record = time.monotonic()
                if args.group and pending and time.monotonic() - last_commit >= COMMIT_INTERVAL_S:
                    _commit(consumer, pending)
                    last_commit = time.monotonic()
        finally:
            if args.group and pending:
                _commit(consumer, pending)


def _commit(consumer, pending: dict) -> None:
    consumer.commit({tp: OffsetAndMetadata(offset, "", -1) for tp, offset in pending.items()})
    pending.clear()


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="replace")


def _render(kind: str, record) -> str:
    if kind == "text":
        return _text(record.value) or ""
    return json.dumps({"topic": record.topic, "partition": record.partition, "offset": record.offset,
                       "timestamp": record.timestamp, "key": _text(record.key), "value": _text(record.value),
                       "headers": [[k, _text(v)] for k, v in record.headers or ()]})
