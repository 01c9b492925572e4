"""Reader and writer options, with the names and meanings of Spark's built-in Kafka source.

A pipeline written for ``format("kafka")`` must run unchanged on ``format("kgate")``,
so the option names, defaults and refusals follow Spark's Kafka integration guide:
``startingOffsets`` defaults to ``earliest`` for batch and ``latest`` for streaming,
``latest`` cannot start a batch, ``earliest`` cannot end one, ``kafka.*`` options go
to the Kafka client, and options Spark manages itself (``kafka.auto.offset.reset``,
deserializers, ...) are refused. Everything is checked before any broker is asked,
and every refusal names the option.

Spark hands options over case-insensitively (keys lower-cased), so lookups here
are by lower-cased name and messages use the documented spelling.
"""
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import overload

from .errors import OptionError

EARLIEST, LATEST = "earliest", "latest"
# In offset JSON, as in Spark: -2 means earliest, -1 latest.
EARLIEST_OFFSET, LATEST_OFFSET = -2, -1

DEFAULT_POLL_TIMEOUT_MS = 120_000  # Spark's kafkaConsumer.pollTimeoutMs default
DEFAULT_API_TIMEOUT_MS = 60_000  # the Java consumer's default.api.timeout.ms

SUBSCRIPTIONS = ("subscribe", "subscribePattern", "assign")

KAFKA_LOGGER = logging.getLogger(f"{__package__}.kafka")
KAFKA_LOGGER.addHandler(logging.NullHandler())

# kafka.* options Spark refuses because the source or sink manages them itself.
_REFUSED_READ = {
    "auto.offset.reset": "set startingOffsets instead",
    "key.deserializer": "keys are always read as bytes; cast the key column",
    "value.deserializer": "values are always read as bytes; cast the value column",
    "enable.auto.commit": "the source tracks offsets in Spark's checkpoint, never in a group",
    "interceptor.classes": "interceptors are not supported",
}
_REFUSED_WRITE = {
    "key.serializer": "keys are always written as bytes; cast the key column to binary or string",
    "value.serializer": "values are always written as bytes; cast the value column to binary or string",
}
# Java client settings with no librdkafka counterpart, read by the source itself.
_JAVA_ONLY = {"sasl.jaas.config", "default.api.timeout.ms", "ssl.truststore.type", "ssl.truststore.location"}
_JAAS_FIELD = re.compile(r'\b(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Subscription:
    """Which topics to read: a list, a regular expression, or explicit partitions."""
    kind: str  # one of SUBSCRIPTIONS
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    partitions: tuple[tuple[str, int], ...] = ()

    def matches(self, topic: str) -> bool:
        if self.pattern is not None:  # subscribePattern
            return re.fullmatch(self.pattern, topic) is not None
        return topic in self.topics


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends: ``earliest``, ``latest``, per-partition offsets or a timestamp.

    ``offsets`` maps (topic, partition) to an offset, -2 (earliest) or -1 (latest);
    ``timestamp`` is milliseconds since the epoch for ``startingTimestamp``.
    """
    option: str
    kind: str  # EARLIEST, LATEST, "offsets" or "timestamp"
    offsets: tuple[tuple[tuple[str, int], int], ...] = ()
    timestamp: int | None = None

    def offset_map(self) -> dict[tuple[str, int], int]:
        return dict(self.offsets)


@dataclass(frozen=True)
class ClientOptions:
    """How to reach the cluster: librdkafka settings and the deadlines the source keeps."""
    bootstrap: str
    config: tuple[tuple[str, str], ...] = ()
    api_timeout_ms: int = DEFAULT_API_TIMEOUT_MS

    def librdkafka(self, defaults: dict, forced: dict) -> dict:
        """The user's ``kafka.*`` settings over ``defaults``, under what the source must control.

        librdkafka's log goes to the ``kgate.pipeline.kafka`` logger rather than to stderr: a
        broker that is down would otherwise print a line per reconnect attempt, while the
        failure itself is reported once, by the deadline that ends the task.
        """
        return {"logger": KAFKA_LOGGER, **defaults, **dict(self.config), **forced, "bootstrap.servers": self.bootstrap}


@dataclass(frozen=True)
class ReadOptions:
    client: ClientOptions
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    timestamp_strategy: str = "error"
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS


@dataclass(frozen=True)
class WriteOptions:
    client: ClientOptions
    topic: str | None = None


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(key).lower(): str(value) for key, value in options.items() if value is not None}


@overload
def _positive_int(options: dict, name: str, default: int) -> int: ...


@overload
def _positive_int(options: dict, name: str, default: None = None) -> int | None: ...


def _positive_int(options: dict, name: str, default: int | None = None) -> int | None:
    text = options.get(name.lower())
    if text is None:
        return default
    try:
        number = int(text.strip())
    except ValueError:
        raise OptionError(name, f"expected a positive integer, got {text!r}") from None
    if number <= 0:
        raise OptionError(name, f"expected a positive integer, got {number}")
    return number


def _boolean(options: dict, name: str, default: bool) -> bool:
    text = options.get(name.lower())
    if text is None:
        return default
    if text.strip().lower() not in ("true", "false"):
        raise OptionError(name, f"expected true or false, got {text!r}")
    return text.strip().lower() == "true"


def include_headers(options: Mapping[str, str]) -> bool:
    """Whether the read schema has a ``headers`` column (Spark fixes the schema before reading)."""
    return _boolean(_lower(options), "includeHeaders", False)


def client_options(options: Mapping[str, str], refused: Mapping[str, str] = _REFUSED_READ) -> ClientOptions:
    """``kafka.bootstrap.servers`` and the other ``kafka.*`` options as librdkafka settings.

    Java-only settings are translated: ``sasl.jaas.config`` (PlainLoginModule or
    ScramLoginModule) becomes ``sasl.username``/``sasl.password``, a PEM truststore
    (``ssl.truststore.type=PEM``) becomes ``ssl.ca.location``, and
    ``default.api.timeout.ms`` becomes the deadline of metadata and offset lookups.
    """
    options = _lower(options)
    bootstrap = options.get("kafka.bootstrap.servers", "").strip()
    if not bootstrap:
        raise OptionError("kafka.bootstrap.servers", "required: the brokers to start from, as host:port[,host:port]")
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        if not host or not port.isdigit():
            raise OptionError("kafka.bootstrap.servers", f"expected host:port, got {server.strip()!r}")
    config = {}
    for key, value in options.items():
        if not key.startswith("kafka.") or key == "kafka.bootstrap.servers":
            continue
        name = key[len("kafka."):]
        if name in refused:
            raise OptionError(key, f"not supported: {refused[name]}")
        if name not in _JAVA_ONLY:
            config[name] = value
    jaas = options.get("kafka.sasl.jaas.config")
    if jaas is not None:
        fields = dict(_JAAS_FIELD.findall(jaas))
        if "username" not in fields or "password" not in fields:
            raise OptionError("kafka.sasl.jaas.config",
                              'expected a login module with username="..." and password="..."')
        config.setdefault("sasl.username", fields["username"].replace('\\"', '"'))
        config.setdefault("sasl.password", fields["password"].replace('\\"', '"'))
    truststore = options.get("kafka.ssl.truststore.location")
    if truststore is not None:
        kind = options.get("kafka.ssl.truststore.type", "JKS")
        if kind.upper() != "PEM":
            raise OptionError("kafka.ssl.truststore.type", f"{kind} truststores cannot be read here: give a PEM "
                                                           "file (kafka.ssl.truststore.type=PEM)")
        config.setdefault("ssl.ca.location", truststore)
    api_timeout = _positive_int(options, "kafka.default.api.timeout.ms", DEFAULT_API_TIMEOUT_MS)
    return ClientOptions(bootstrap, tuple(sorted(config.items())), api_timeout)


def _subscription(options: dict) -> Subscription:
    given = [name for name in SUBSCRIPTIONS if name.lower() in options]
    if len(given) != 1:
        raise OptionError("subscribe", "give exactly one of subscribe, subscribePattern or assign"
                          + (f" (got {', '.join(given)})" if given else ""))
    name = given[0]
    text = options[name.lower()]
    if name == "subscribe":
        topics = tuple(t.strip() for t in text.split(",") if t.strip())
        if not topics:
            raise OptionError(name, "expected a comma-separated list of topic names")
        return Subscription(name, topics=topics)
    if name == "subscribePattern":
        try:
            re.compile(text)
        except re.error as exc:
            raise OptionError(name, f"not a valid regular expression: {exc}") from None
        return Subscription(name, pattern=text)
    document = _json_object(name, text, '{"topicA":[0,1],"topicB":[2,4]}')
    partitions = []
    for topic, numbers in document.items():
        if not isinstance(numbers, list) or not all(isinstance(n, int) and n >= 0 for n in numbers):
            raise OptionError(name, f"topic {topic!r}: expected a list of partition numbers")
        partitions += [(topic, n) for n in numbers]
    return Subscription(name, topics=tuple(document), partitions=tuple(partitions))


def _json_object(option: str, text: str, example: str) -> dict:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(option, f"malformed JSON ({exc.msg} at character {exc.pos}); "
                                  f"expected e.g. {example}") from None
    if not isinstance(document, dict) or not document:
        raise OptionError(option, f"expected a JSON object such as {example}")
    return document


def parse_offsets_json(option: str, text: str) -> dict[tuple[str, int], int]:
    """``{"topic": {"0": 42, "1": -2}}`` as {(topic, 0): 42, (topic, 1): -2}."""
    example = '{"topicA":{"0":23,"1":-2},"topicB":{"0":-1}}'
    offsets = {}
    for topic, partitions in _json_object(option, text, example).items():
        if not isinstance(partitions, dict):
            raise OptionError(option, f"topic {topic!r}: expected an object of partition to offset, e.g. {example}")
        for partition, offset in partitions.items():
            if not str(partition).isdigit():
                raise OptionError(option, f"topic {topic!r}: partition {partition!r} is not a partition number")
            if not isinstance(offset, int) or isinstance(offset, bool) or offset < EARLIEST_OFFSET:
                raise OptionError(option, f"{topic}-{partition}: offset {offset!r} is not an offset, "
                                          f"-2 (earliest) or -1 (latest)")
            offsets[(topic, int(partition))] = offset
    return offsets


def _offset_spec(options: dict, name: str, default: str, refused: str | None = None,
                 refused_sentinel: int | None = None) -> OffsetSpec:
    """``earliest``, ``latest`` or offset JSON; ``refused`` (and its JSON sentinel) is not allowed here."""
    text = options.get(name.lower())
    if text is None:
        return OffsetSpec(name, default)
    word = text.strip().lower()
    if word in (EARLIEST, LATEST):
        if refused is not None and word == refused:
            raise OptionError(name, f"{refused!r} is not allowed here (Spark refuses it too)")
        return OffsetSpec(name, word)
    offsets = parse_offsets_json(name, text)
    bad = [tp for tp, offset in offsets.items() if refused_sentinel is not None and offset == refused_sentinel]
    if bad:
        raise OptionError(name, f"{bad[0][0]}-{bad[0][1]}: {refused_sentinel} ({refused}) is not allowed here")
    return OffsetSpec(name, "offsets", offsets=tuple(sorted(offsets.items())))


def parse_read(options: Mapping[str, str], streaming: bool) -> ReadOptions:
    """Check every reader option; OptionError names the first one at fault."""
    lowered = _lower(options)
    client = client_options(lowered)
    subscription = _subscription(lowered)
    if streaming:
        if "endingoffsets" in lowered:
            raise OptionError("endingOffsets", "not valid in streaming queries (Spark refuses it too)")
        starting = _offset_spec(lowered, "startingOffsets", LATEST)
        ending = OffsetSpec("endingOffsets", LATEST)
    else:
        starting = _offset_spec(lowered, "startingOffsets", EARLIEST, refused=LATEST, refused_sentinel=LATEST_OFFSET)
        ending = _offset_spec(lowered, "endingOffsets", LATEST, refused=EARLIEST, refused_sentinel=EARLIEST_OFFSET)
    if "startingtimestamp" in lowered:
        text = lowered["startingtimestamp"].strip()
        if not text.isdigit():
            raise OptionError("startingTimestamp", f"expected milliseconds since the epoch, got {text!r}")
        starting = OffsetSpec("startingTimestamp", "timestamp", timestamp=int(text))
    strategy = lowered.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError("startingOffsetsByTimestampStrategy", f"expected error or latest, got {strategy!r}")
    if subscription.kind == "assign":
        for spec in (starting, ending):
            stray = set(spec.offset_map()) - set(subscription.partitions)
            if stray:
                topic, partition = sorted(stray)[0]
                raise OptionError(spec.option, f"{topic}-{partition} is not among the partitions of 'assign'")
    return ReadOptions(
        client=client, subscription=subscription, starting=starting, ending=ending,
        timestamp_strategy=strategy,
        max_offsets_per_trigger=_positive_int(lowered, "maxOffsetsPerTrigger"),
        min_partitions=_positive_int(lowered, "minPartitions"),
        fail_on_data_loss=_boolean(lowered, "failOnDataLoss", True),
        include_headers=_boolean(lowered, "includeHeaders", False),
        poll_timeout_ms=_positive_int(lowered, "kafkaConsumer.pollTimeoutMs", DEFAULT_POLL_TIMEOUT_MS),
    )


def parse_write(options: Mapping[str, str]) -> WriteOptions:
    lowered = _lower(options)
    client = client_options(lowered, refused=_REFUSED_WRITE)
    topic = lowered.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("topic", "must not be empty")
    return WriteOptions(client=client, topic=topic.strip() if topic else None)
