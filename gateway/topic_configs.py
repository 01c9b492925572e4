"""Every topic config Kafka 3.x and 4.x define, as data: type, default, valid values, and
what kgate does with each.

Provisioning tools (Terraform providers, operators, Kafka Connect, Schema Registry)
create topics with Kafka's configs and write back what DescribeConfigs showed them,
so every one of them is accepted, stored and described with Kafka's type and default,
and a bad value is refused as Kafka refuses it: INVALID_CONFIG with Kafka's message
("Invalid value X for configuration NAME: reason").

What kgate does with each config is one of three things (README, "Topic configs"):
- ``ACTS``: it changes what the broker does;
- ``IGNORED``: stored and described only, where ignoring loses nothing a client relies
  on (the reason is given per config);
- ``DEFAULT_ONLY``: ignoring a non-default value would silently change what clients
  read or what the broker accepts, so only the default is accepted; any other value is
  INVALID_CONFIG saying so.

A config whose default is a broker setting (``setting``) takes its default from it, as
Kafka's topic configs default to their ``log.*`` synonyms. Where kgate has no such setting,
``synonym`` names Kafka's, for DescribeConfigs to list as Kafka does. ``flush.ms`` and
``segment.jitter.ms`` have none: their Kafka settings (``log.flush.interval.ms``,
``log.roll.jitter.ms``) have no default, so Kafka lists no synonym for them either.
"""
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from kgate.protocol.log_append_time import TIMESTAMP_TYPES
from kgate.storage import entry_formats

from .config import COMPRESSION_TYPES, ConfigError, ConfigType, Settings, is_compacted


class Use(Enum):
    ACTS = "acts"
    IGNORED = "accepted and ignored"
    DEFAULT_ONLY = "only the default is accepted"


@dataclass(frozen=True)
class TopicConfig:
    type: ConfigType
    default: str
    use: Use
    why: str = ""  # for IGNORED and DEFAULT_ONLY: why that is what kgate does
    valid: tuple[str, Callable] | None = None  # (Kafka's reason when invalid, check of the parsed value)
    setting: str | None = None  # the broker setting the default comes from
    # Without ``setting``: Kafka's broker setting the config defaults to, which kgate does not
    # have; DescribeConfigs lists it as the config's synonym (Kafka's ServerTopicConfigSynonyms).
    synonym: str | None = None


INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
_RANGES = {ConfigType.INT: (-2**31, INT_MAX), ConfigType.LONG: (-2**63, LONG_MAX)}


def at_least(low):
    return f"Value must be at least {low}", lambda v: v >= low


def between(low, high):
    return f"Value must be between {low} and {high}", lambda v: low <= v <= high


def one_of(*names):
    return f"String must be one of: {', '.join(names)}", lambda v: v in names


def _is_throttled_replicas(items: list[str]) -> bool:
    """Kafka's ThrottledReplicaListValidator: ``*`` or ``partition:broker`` pairs."""
    return items == ["*"] or all(re.fullmatch(r"\d+:\d+", item) for item in items)


_OLD_RELEASES = {(0, 8, 0), (0, 8, 1), (0, 8, 2), (0, 9, 0), (0, 10, 0), (0, 10, 1), (0, 10, 2), (0, 11, 0)}
_LAST_MINOR = {1: 1, 2: 8, 3: 9}


def _is_message_format_version(version: str) -> bool:
    """A Kafka release Kafka 3.x accepts as message.format.version: like its MetadataVersion,
    only the first three parts of a 0.x version count (``0.10.0.0`` is 0.10.0) and the first
    two of a later one (``2.8.1`` is 2.8); the release may carry an -IVn suffix."""
    parts = version.split(".")
    kept = ".".join(parts[:3] if version.startswith("0.") else parts[:2])
    match = re.fullmatch(r"(\d+)\.(\d+)(?:\.(\d+))?(?:-IV\d+)?", kept)
    if not match:
        return False
    major, minor, patch = int(match[1]), int(match[2]), match[3]
    if major == 0:
        return patch is not None and (0, minor, int(patch)) in _OLD_RELEASES
    return patch is None and minor <= _LAST_MINOR.get(major, -1)


_THROTTLED = ("must be the wildcard (*) or a list of partitionId:brokerId", _is_throttled_replicas)
_NO_REPLICAS = ("kgate keeps one copy of each partition in its ledger store (durable before a write is "
                "acknowledged) and reports replication factor 1; there are no followers to wait for, "
                "elect or throttle")
_NO_FLUSH = "kgate makes every acknowledged write durable (fsync) before answering: it never flushes later"
_NO_INDEX = "kgate indexes each entry in memory from its header; there are no index files to size"
_TIERED = ("kgate's ledgers already live in its ledger store (file or object storage); retention.ms and "
           "retention.bytes bound the whole log")
_TIMESTAMP_CHECK = "kgate does not check record timestamps against its clock, so it cannot enforce a bound"

TOPIC_CONFIGS: dict[str, TopicConfig] = {
    # Acted on.
    "cleanup.policy": TopicConfig(ConfigType.LIST, "delete", Use.ACTS, valid=(
        "String must be one or both of: compact, delete",
        lambda items: bool(items) and set(items) <= {"compact", "delete"}), synonym="log.cleanup.policy"),
    "compression.type": TopicConfig(ConfigType.STRING, "producer", Use.ACTS, valid=one_of(*COMPRESSION_TYPES),
                                    setting="compression.type"),
    "max.message.bytes": TopicConfig(ConfigType.INT, "", Use.ACTS, valid=at_least(0), setting="message.max.bytes"),
    "retention.bytes": TopicConfig(ConfigType.LONG, "", Use.ACTS, setting="log.retention.bytes"),
    "retention.ms": TopicConfig(ConfigType.LONG, "", Use.ACTS, valid=at_least(-1), setting="log.retention.ms"),
    # Kafka 3.x's lower bound (a legacy record's overhead); 4.x raised it to 1 MiB.
    "segment.bytes": TopicConfig(ConfigType.INT, "", Use.ACTS, valid=at_least(14), setting="log.segment.bytes"),
    "segment.ms": TopicConfig(ConfigType.LONG, "", Use.ACTS, valid=at_least(1), setting="log.roll.ms"),
    # Log compaction (gateway/log_cleaner.py), defaulting to the broker's log.cleaner.* settings.
    "delete.retention.ms": TopicConfig(ConfigType.LONG, "", Use.ACTS, valid=at_least(0),
                                       setting="log.cleaner.delete.retention.ms"),
    "max.compaction.lag.ms": TopicConfig(ConfigType.LONG, "", Use.ACTS, valid=at_least(1),
                                         setting="log.cleaner.max.compaction.lag.ms"),
    "min.cleanable.dirty.ratio": TopicConfig(ConfigType.DOUBLE, "", Use.ACTS, valid=between(0, 1),
                                             setting="log.cleaner.min.cleanable.ratio"),
    "min.compaction.lag.ms": TopicConfig(ConfigType.LONG, "", Use.ACTS, valid=at_least(0),
                                         setting="log.cleaner.min.compaction.lag.ms"),
    "kgate.entry.format": TopicConfig(ConfigType.STRING, "", Use.ACTS, valid=(
        "must be one of the registered entry formats", lambda v: v in entry_formats.names()),
        setting="entry.format"),
    # Stored and described; ignoring them loses nothing.
    "compression.gzip.level": TopicConfig(
        ConfigType.INT, "-1", Use.IGNORED, "recompression (compression.type on mixed_kafka and pulsar topics) "
        "uses each codec's default level; only the compression ratio differs",
        valid=("Value must be between 1 and 9 or -1", lambda v: v == -1 or 1 <= v <= 9),
        synonym="compression.gzip.level"),
    "compression.lz4.level": TopicConfig(ConfigType.INT, "9", Use.IGNORED, "as compression.gzip.level",
                                         valid=between(1, 17), synonym="compression.lz4.level"),
    "compression.zstd.level": TopicConfig(ConfigType.INT, "3", Use.IGNORED, "as compression.gzip.level",
                                          valid=between(-131072, 22), synonym="compression.zstd.level"),
    "file.delete.delay.ms": TopicConfig(ConfigType.LONG, "60000", Use.IGNORED,
                                        "a trimmed or deleted ledger goes at once; no reader keeps using it",
                                        valid=at_least(0), synonym="log.segment.delete.delay.ms"),
    "flush.messages": TopicConfig(ConfigType.LONG, str(LONG_MAX), Use.IGNORED, _NO_FLUSH, valid=at_least(1),
                                  synonym="log.flush.interval.messages"),
    "flush.ms": TopicConfig(ConfigType.LONG, str(LONG_MAX), Use.IGNORED, _NO_FLUSH, valid=at_least(0)),
    "index.interval.bytes": TopicConfig(ConfigType.INT, "4096", Use.IGNORED, _NO_INDEX, valid=at_least(0),
                                        synonym="log.index.interval.bytes"),
    "segment.index.bytes": TopicConfig(ConfigType.INT, "10485760", Use.IGNORED, _NO_INDEX, valid=at_least(4),
                                       synonym="log.index.size.max.bytes"),
    "segment.jitter.ms": TopicConfig(ConfigType.LONG, "0", Use.IGNORED,
                                     "ledgers roll at segment.ms exactly; jitter only spreads roll times",
                                     valid=at_least(0)),
    "preallocate": TopicConfig(ConfigType.BOOLEAN, "false", Use.IGNORED,
                               "ledger files grow as entries are appended", synonym="log.preallocate"),
    "min.insync.replicas": TopicConfig(ConfigType.INT, "1", Use.IGNORED, _NO_REPLICAS, valid=at_least(1),
                                       synonym="min.insync.replicas"),
    "unclean.leader.election.enable": TopicConfig(ConfigType.BOOLEAN, "false", Use.IGNORED, _NO_REPLICAS,
                                                  synonym="unclean.leader.election.enable"),
    "leader.replication.throttled.replicas": TopicConfig(ConfigType.LIST, "", Use.IGNORED, _NO_REPLICAS,
                                                         valid=_THROTTLED),
    "follower.replication.throttled.replicas": TopicConfig(ConfigType.LIST, "", Use.IGNORED, _NO_REPLICAS,
                                                           valid=_THROTTLED),
    "message.downconversion.enable": TopicConfig(
        ConfigType.BOOLEAN, "true", Use.IGNORED, "Kafka 3.x only; kgate always down-converts for fetchers "
        "that cannot read the stored format, so old consumers are served where Kafka would refuse them",
        synonym="log.message.downconversion.enable"),
    "message.format.version": TopicConfig(
        ConfigType.STRING, "3.0-IV1", Use.IGNORED, "Kafka 3.x only, and ignored by Kafka 3.x itself "
        "(inter.broker.protocol.version 3.0 and later); kgate stores what producers send and converts "
        "per fetch to what each consumer reads",
        valid=("Version must be a Kafka release from 0.8.0 to 3.x, such as 2.8 or 0.10.2-IV0",
               _is_message_format_version), synonym="log.message.format.version"),
    "local.retention.bytes": TopicConfig(ConfigType.LONG, "-2", Use.IGNORED, _TIERED, valid=at_least(-2),
                                         synonym="log.local.retention.bytes"),
    "local.retention.ms": TopicConfig(ConfigType.LONG, "-2", Use.IGNORED, _TIERED, valid=at_least(-2),
                                      synonym="log.local.retention.ms"),
    "remote.copy.lag.bytes": TopicConfig(ConfigType.LONG, "0", Use.IGNORED, _TIERED, valid=at_least(-1),
                                         synonym="log.remote.copy.lag.bytes"),
    "remote.copy.lag.ms": TopicConfig(ConfigType.LONG, "0", Use.IGNORED, _TIERED, valid=at_least(-1),
                                      synonym="log.remote.copy.lag.ms"),
    "remote.log.copy.disable": TopicConfig(ConfigType.BOOLEAN, "false", Use.IGNORED, _TIERED),
    "remote.log.delete.on.disable": TopicConfig(ConfigType.BOOLEAN, "false", Use.IGNORED, _TIERED),
    # Kafka 4.4 (KIP-1191): a topic share groups may write dead letters to.
    "errors.deadletterqueue.group.enable": TopicConfig(
        ConfigType.BOOLEAN, "false", Use.IGNORED, "kgate's share groups write no dead-letter records, so no "
        "topic is written as one whatever this says"),
    # LogAppendTime: the broker dates each appended batch (protocol/log_append_time.py).
    "message.timestamp.type": TopicConfig(ConfigType.STRING, "", Use.ACTS, valid=one_of(*TIMESTAMP_TYPES),
                                          setting="log.message.timestamp.type"),
    # Only the default: any other value would change what clients read or may write.
    "message.timestamp.after.max.ms": TopicConfig(ConfigType.LONG, "", Use.DEFAULT_ONLY, _TIMESTAMP_CHECK,
                                                  valid=at_least(0), setting="log.message.timestamp.after.max.ms"),
    "message.timestamp.before.max.ms": TopicConfig(ConfigType.LONG, "", Use.DEFAULT_ONLY, _TIMESTAMP_CHECK,
                                                   valid=at_least(0), setting="log.message.timestamp.before.max.ms"),
    "message.timestamp.difference.max.ms": TopicConfig(ConfigType.LONG, str(LONG_MAX), Use.DEFAULT_ONLY,
                                                       _TIMESTAMP_CHECK + " (Kafka 3.x only)", valid=at_least(0),
                                                       synonym="log.message.timestamp.difference.max.ms"),
    # Kafka 4.4: a cap on one record's decompressed size, Kafka's default being no cap.
    "max.decompressed.message.bytes": TopicConfig(
        ConfigType.INT, str(INT_MAX - 8), Use.DEFAULT_ONLY, "kgate bounds the inflated bytes of a whole batch "
        "(kgate.max.inflated.batch.bytes), not of each record, so it cannot refuse a record past a smaller cap",
        valid=between(1, INT_MAX - 8), synonym="max.decompressed.message.bytes"),
    # Kafka's own answer when tiered storage is off in the broker, which it always is in kgate.
    "remote.storage.enable": TopicConfig(
        ConfigType.BOOLEAN, "false", Use.DEFAULT_ONLY,
        "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage"),
}


def default(name: str, settings: Settings) -> str:
    config = TOPIC_CONFIGS[name]
    return str(settings[config.setting]) if config.setting else config.default


def check(name: str, value: str | None, settings: Settings) -> str:
    """Validate one topic config as Kafka does; return its normalised value or raise ConfigError."""
    config = TOPIC_CONFIGS.get(name)
    if config is None:
        raise ConfigError(f"Unknown topic config name: {name}")
    if value is None:
        raise ConfigError(f"topic config {name} needs a value")
    parsed, normalised = parse_value(name, value.strip(), config.type)
    if config.valid is not None:
        reason, ok = config.valid
        if not ok(parsed):
            raise ConfigError(f"Invalid value {value} for configuration {name}: {reason}")
    if config.use is Use.DEFAULT_ONLY and normalised != default(name, settings):
        raise ConfigError(f"Invalid value {value} for configuration {name}: {config.why}; "
                          f"kgate accepts only {default(name, settings)}")
    return normalised


def check_together(configs: dict[str, str], settings: Settings) -> None:
    """What Kafka checks across configs once each is valid on its own, and one check of kgate's:
    the ``pulsar`` entry format rebuilds records into entries of its own that the log cleaner
    cannot rewrite batch by batch, so a compacted topic must use ``kafka`` or ``mixed_kafka``."""
    low = int(configs.get("min.compaction.lag.ms", default("min.compaction.lag.ms", settings)))
    high = int(configs.get("max.compaction.lag.ms", default("max.compaction.lag.ms", settings)))
    if low > high:
        raise ConfigError(f"conflict topic config setting min.compaction.lag.ms ({low}) > "
                          f"max.compaction.lag.ms ({high})")
    entry_format = configs.get("kgate.entry.format") or settings["entry.format"]
    if is_compacted(configs.get("cleanup.policy") or "delete") and entry_format == "pulsar":
        raise ConfigError("cleanup.policy=compact needs kgate.entry.format kafka or mixed_kafka, not pulsar")


def parse_value(name: str, text: str, kind: ConfigType):
    """``(value to validate, normalised string to store)`` as Kafka's ConfigDef parses ``kind``."""
    def invalid(reason):
        return ConfigError(f"Invalid value {text} for configuration {name}: {reason}")

    if kind is ConfigType.BOOLEAN:
        if text.lower() not in ("true", "false"):
            raise invalid("Expected value to be either true or false")
        return text.lower() == "true", text.lower()
    if kind in _RANGES:
        low, high = _RANGES[kind]
        try:
            number = int(text)
        except ValueError:
            raise invalid(f"Not a number of type {kind.name}") from None
        if not low <= number <= high:
            raise invalid(f"Not a number of type {kind.name}")
        return number, str(number)
    if kind is ConfigType.DOUBLE:
        try:
            real = float(text)
        except ValueError:
            raise invalid("Not a number of type DOUBLE") from None
        if not math.isfinite(real):
            raise invalid("Not a number of type DOUBLE")
        return real, text
    if kind is ConfigType.LIST:
        items = [item.strip() for item in text.split(",") if item.strip()]
        return items, ",".join(items)
    return text, text
