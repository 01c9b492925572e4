"""What each column checks, against a live broker. A cell passes only when its checks ran.

Every cell works in topics of its own, created by the runner beforehand, and its
result carries what the broker observed: the request versions answered while it ran
and the stored message format of what it produced. Records are checked by
tests.support.records: keys, values, headers (where the generation has them),
timestamps, count, contiguous offsets from 0, every record read back exactly once; the
records column also has today's confluent-kafka read what the row wrote.
"""
import time
from dataclasses import dataclass, field

from confluent_kafka.admin import AdminClient, NewTopic

import clients
import observe
from rows import CODEC_COLUMNS, Row
from tests.support import records as R
from tests.support.clients import ConfluentClient

COUNT = 60
PARTITIONS = 2
USER, PASSWORD = "compat", "compat-secret"
SCRAM_MECHANISM = "SCRAM-SHA-256"
# Settings the reference producer uses to write a generation's magic (it fills group topics).
REFERENCE_WRITES = {0: {"api.version.request": False, "broker.version.fallback": "0.9.0"},
                    1: {"api.version.request": False, "broker.version.fallback": "0.10.0"},
                    2: {}}
QUIET = {"log_level": 3}  # the runner's own librdkafka clients: warnings and errors only
STORED_AS_PRODUCED = "kafka"  # the entry format whose stored bytes show the client's own magic and codec


@dataclass
class CellResult:
    status: str                     # "pass", "fail" or "n/a"
    message: str = ""               # the failure, or why the column does not apply
    requests: dict = field(default_factory=dict)  # {api: [versions]} the broker answered during the cell
    stored: str = ""                # the message format of what the cell produced, as stored
    seconds: float = 0.0
    known: str = ""                 # a failure the row expects, since Kafka fails it too


class CheckFailed(AssertionError):
    pass


def check(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


@dataclass
class Broker:
    """The live broker a row runs against: its listeners, its metrics endpoint, an admin client."""

    bootstrap: str
    sasl_address: str
    metrics_urls: tuple[str, ...]  # every broker's: a cluster's requests land on all of them
    entry_format: str = STORED_AS_PRODUCED

    def __post_init__(self):
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap, **QUIET})

    def create_topic(self, topic: str) -> None:
        for future in self.admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
            future.result(timeout=30)

    def has_topic(self, topic: str) -> bool:
        return topic in self.admin.list_topics(timeout=30).topics


def topic_for(row: Row, column: str) -> str:
    return f"{row.id}-{column}".replace("@", "-at-").replace("+", "-")


def prepare(row: Row, column: str, broker: Broker) -> None:
    """Create the cell's topic (the admin cell creates its own), and fill a group cell's."""
    if column == "admin":
        return
    topic = topic_for(row, column)
    broker.create_topic(topic)
    if column == "group":
        ConfluentClient.produce(broker.bootstrap, topic, COUNT, with_headers=row.magic == 2,
                                **REFERENCE_WRITES[row.magic], **QUIET)


def run_cell(row: Row, column: str, broker: Broker) -> CellResult:
    reason = row.reason_not_applicable(column)
    if reason:
        return CellResult("n/a", reason)
    started = time.monotonic()
    result = CellResult("fail")
    try:
        prepare(row, column, broker)
        before = observe.request_counts(broker.metrics_urls)
        try:
            produced = COLUMNS[column](row, topic_for(row, column), broker)
        finally:
            result.requests = observe.requests_between(before, observe.request_counts(broker.metrics_urls))
        if produced:
            formats = observe.stored_formats(broker.bootstrap, topic_for(row, column), PARTITIONS)
            result.stored = observe.describe_formats(formats)
            if column in CODEC_COLUMNS and broker.entry_format == STORED_AS_PRODUCED:
                check(all(codec == column for _magic, codec in formats), f"stored as {result.stored}, not {column}")
        _check_observed(column, result.requests)
        if column == "records":  # what the row wrote, as today's clients read it
            _read_back(row, ConfluentClient.consume(broker.bootstrap, topic_for(row, column), PARTITIONS, COUNT,
                                                    timeout=30, **QUIET), row.headers, "today's confluent-kafka")
        if column == "admin":
            check(not broker.has_topic(topic_for(row, column)), "the topic is still there after "
                  "DeleteTopics")
        result.status = "pass"
    except (clients.DriverFailed, CheckFailed, AssertionError) as exc:
        result.message = str(exc) or type(exc).__name__
    except Exception as exc:  # the runner's own calls (topic creation, scraping) failing is a failed cell too
        result.message = f"{type(exc).__name__}: {exc}"
    if result.status == "fail" and column in row.known:
        result.known = row.known[column]
    result.seconds = round(time.monotonic() - started, 1)
    return result


# Requests a column must have been seen to send, or its check proves nothing.
REQUIRED = {"sasl-plain": "SaslHandshake", "sasl-scram": "SaslHandshake", "idempotent": "InitProducerId",
            "admin": "CreateTopics", "group": "OffsetCommit"}


def _check_observed(column: str, requests: dict) -> None:
    required = REQUIRED.get(column)
    check(required is None or required in requests, f"the broker saw no {required} request")
    if column == "admin":
        check("DeleteTopics" in requests, "the broker saw no DeleteTopics request")


def _read_back(row: Row, got: list, headers: bool, reader: str = "") -> None:
    try:
        R.check_read_back(got, COUNT, with_headers=headers, with_timestamps=row.magic >= 1 if row.timestamps else None)
    except AssertionError as exc:
        raise CheckFailed(f"read back{' by ' + reader if reader else ''}: {exc}") from None


def round_trip(row: Row, topic: str, broker: Broker, codec="none", idempotent=False, sasl=None) -> bool:
    address = broker.sasl_address if sasl else broker.bootstrap
    row.client.produce(address, topic, COUNT, codec=codec, headers=row.headers, idempotent=idempotent, sasl=sasl)
    _read_back(row, row.client.read(address, topic, PARTITIONS, COUNT, sasl=sasl), row.headers)
    return True


def group(row: Row, topic: str, broker: Broker) -> bool:
    """A third of the records in one member that commits and leaves; the rest in a new one."""
    first = row.client.group(broker.bootstrap, topic, "resumes", COUNT // 3)
    check(len(first) == COUNT // 3, f"the first member read {len(first)} records, not {COUNT // 3}")
    rest = row.client.group(broker.bootstrap, topic, "resumes", COUNT - len(first))
    _read_back(row, first + rest, row.magic == 2)
    return False


def admin(row: Row, topic: str, broker: Broker) -> bool:
    described = row.client.admin(broker.bootstrap, topic, 3)
    check(described.get("described_partitions") == 3, f"described {described} after creating 3 partitions")
    return False


COLUMNS = {
    "records": round_trip,
    **{codec: (lambda chosen: lambda row, topic, broker: round_trip(row, topic, broker, codec=chosen))(codec)
       for codec in CODEC_COLUMNS},
    "group": group,
    "sasl-plain": lambda row, topic, broker: round_trip(row, topic, broker,
                                                         sasl=clients.Sasl("PLAIN", USER, PASSWORD)),
    "sasl-scram": lambda row, topic, broker: round_trip(row, topic, broker,
                                                         sasl=clients.Sasl(SCRAM_MECHANISM, USER, PASSWORD)),
    "idempotent": lambda row, topic, broker: round_trip(row, topic, broker, idempotent=True),
    "admin": admin,
}
