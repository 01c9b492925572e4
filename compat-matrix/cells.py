"""What each column checks, against a live broker. A cell passes only when its checks ran.

Every cell works in topics of its own, created by the runner beforehand, and its
result carries what the broker observed: the request versions answered while it ran
and the stored message format of what it produced. Records are checked by
tests.support.records: keys, values, headers (where the generation has them),
timestamps, count, contiguous offsets from 0, every record read back exactly once; the
records column also has today's confluent-kafka read what the row wrote.
"""
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from confluent_kafka import ConsumerGroupState, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

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
SPLIT_TIMEOUT = 30  # seconds two KIP-848 members have to share the partitions


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

    def consumer_group(self, group: str):
        """The group as today's AdminClient describes it (ConsumerGroupDescribe for a KIP-848 group)."""
        return self.admin.describe_consumer_groups([group])[group].result(timeout=30)


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
            "admin": "CreateTopics", "group": "OffsetCommit", "transactions": "EndTxn",
            "kip848": "ConsumerGroupHeartbeat", "share": "ShareFetch"}


def _check_observed(column: str, requests: dict) -> None:
    required = REQUIRED.get(column)
    check(required is None or required in requests, f"the broker saw no {required} request")
    if column == "admin":
        check("DeleteTopics" in requests, "the broker saw no DeleteTopics request")


def _read_back(row: Row, got: list, headers: bool, reader: str = "", expected=None) -> None:
    """Records 0..COUNT-1 with contiguous offsets, or exactly the ``expected`` ones (gaps allowed)."""
    timestamps = row.magic >= 1 if row.timestamps else None
    try:
        if expected is None:
            R.check_read_back(got, COUNT, with_headers=headers, with_timestamps=timestamps)
        else:
            R.check_records(got, expected, with_headers=headers, with_timestamps=timestamps)
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


def transactions(row: Row, topic: str, broker: Broker) -> bool:
    """The row's transactional producer commits a third of the records, aborts the next third
    and commits the last; its read_committed consumer must see exactly the committed ones,
    its read_uncommitted one every record."""
    row.client.transact(broker.bootstrap, topic, COUNT, transactional_id=f"{topic}-tx", headers=row.headers)
    third = COUNT // 3
    committed = [*range(third), *range(2 * third, COUNT)]
    for isolation, expected in (("read_committed", committed), ("read_uncommitted", range(COUNT))):
        got = row.client.read(broker.bootstrap, topic, PARTITIONS, len(expected), isolation=isolation)
        _read_back(row, got, row.headers, f"a {isolation} consumer", expected)
    return True


def kip848(row: Row, topic: str, broker: Broker) -> bool:
    """Two members of a group of KIP-848's protocol share the partitions (the broker assigns
    one each), each reads a quarter of the records, commits them and leaves; a restarted
    member resumes where they committed and reads the rest, and no record is read twice."""
    group_id, share = "kip848", COUNT // 4
    with ThreadPoolExecutor(max_workers=2) as pool:
        members = [pool.submit(row.client.group, broker.bootstrap, topic, group_id, share, group_protocol="consumer")
                   for _ in range(2)]
        try:
            split = _wait_for_split(broker, group_id, members)
        finally:  # the records go in either way, so the members end rather than wait out their timeout
            ConfluentClient.produce(broker.bootstrap, topic, COUNT, with_headers=row.magic == 2, **QUIET)
        first = [member.result() for member in members]
    # A member still short of its share when the other leaves is given the other's partition
    # too and may read on there from the committed offset (Kafka does the same): so each
    # member is checked for its share, and the two for both partitions, not one each.
    partitions = [{record.partition for record in records} for records in first]
    check([len(records) for records in first] == [share, share] and set().union(*partitions) == {0, 1},
          f"the members read {[len(records) for records in first]} records from partitions {partitions} "
          f"(assigned {split}), not {share} each from both partitions between them")
    rest = row.client.group(broker.bootstrap, topic, group_id, COUNT - 2 * share, group_protocol="consumer")
    _read_back(row, first[0] + first[1] + rest, row.magic == 2)
    return False


def _wait_for_split(broker: Broker, group_id: str, members: list[Future]) -> list:
    """Each member's partitions once the group is Stable with one partition per member."""
    deadline = time.monotonic() + SPLIT_TIMEOUT
    seen = None
    while time.monotonic() < deadline:
        for member in members:
            if member.done():
                member.result()  # a member that gave up: its failure is the cell's
                raise CheckFailed(f"a member finished before the group shared its partitions ({seen})")
        seen, stable = _split(broker, group_id)
        if stable and sorted(seen) == [[0], [1]]:
            return seen
        time.sleep(0.2)
    raise CheckFailed(f"the group did not share its partitions between two members within {SPLIT_TIMEOUT} s: "
                      f"last described {seen}")


def _split(broker: Broker, group_id: str) -> tuple[list, bool]:
    """Each member's partitions and whether the group is Stable; no members before the first
    has joined (a JVM member starts slowly, and the group does not exist until it does)."""
    try:
        described = broker.consumer_group(group_id)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.GROUP_ID_NOT_FOUND:
            raise
        return [], False
    seen = [sorted(tp.partition for tp in m.assignment.topic_partitions) for m in described.members]
    return seen, described.state == ConsumerGroupState.STABLE


def share(row: Row, topic: str, broker: Broker) -> bool:
    """A member of a share group reads the records, accepting each, and leaves; after more
    are written a second member reads exactly those: the accepted ones never come back."""
    group_id = f"{topic}-share"
    resource = ConfigResource(ResourceType.GROUP, group_id, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for future in broker.admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    ConfluentClient.produce(broker.bootstrap, topic, COUNT, with_headers=row.magic == 2, **QUIET)
    _read_back(row, row.client.share(broker.bootstrap, topic, group_id, COUNT), row.headers)
    ConfluentClient.produce(broker.bootstrap, topic, COUNT, with_headers=row.magic == 2, first=COUNT, **QUIET)
    _read_back(row, row.client.share(broker.bootstrap, topic, group_id, COUNT), row.headers, "a second member",
               range(COUNT, 2 * COUNT))
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
    "transactions": transactions,
    "kip848": kip848,
    "share": share,
}
