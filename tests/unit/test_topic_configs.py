"""Kafka's topic configs: parsed, validated and refused as Kafka does, with kgate's defaults."""
import pytest

from kgate.gateway.config import ConfigError, ConfigType, Settings
from kgate.gateway.topic_configs import TOPIC_CONFIGS, Use, check, check_together, default

SETTINGS = Settings()

# Kafka 3.9 and 4.x's LogConfig (4.4's included), plus 3.x's three removed in 4.0; kgate adds only its entry format.
KAFKA_TOPIC_CONFIGS = {
    "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
    "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages", "flush.ms",
    "follower.replication.throttled.replicas", "index.interval.bytes", "leader.replication.throttled.replicas",
    "local.retention.bytes", "local.retention.ms", "max.compaction.lag.ms", "max.message.bytes",
    "message.timestamp.after.max.ms", "message.timestamp.before.max.ms", "message.timestamp.type",
    "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
    "remote.copy.lag.bytes", "remote.copy.lag.ms", "remote.log.copy.disable", "remote.log.delete.on.disable",
    "remote.storage.enable", "retention.bytes", "retention.ms", "segment.bytes", "segment.index.bytes",
    "segment.jitter.ms", "segment.ms", "unclean.leader.election.enable",
    "message.downconversion.enable", "message.format.version", "message.timestamp.difference.max.ms",
    "errors.deadletterqueue.group.enable", "max.decompressed.message.bytes",
}


def test_every_kafka_topic_config_is_known_and_its_default_passes_its_own_check():
    assert set(TOPIC_CONFIGS) == KAFKA_TOPIC_CONFIGS | {"kgate.entry.format"}
    for name in TOPIC_CONFIGS:
        assert check(name, default(name, SETTINGS), SETTINGS) == default(name, SETTINGS), name


def test_every_config_kgate_does_not_act_on_says_why():
    assert all(config.why for config in TOPIC_CONFIGS.values() if config.use is not Use.ACTS)


@pytest.mark.parametrize("name, value, normalised", [
    ("delete.retention.ms", " 3600000 ", "3600000"),
    ("preallocate", "TRUE", "true"),
    ("min.cleanable.dirty.ratio", "0.25", "0.25"),
    ("cleanup.policy", "compact, delete", "compact,delete"),
    ("leader.replication.throttled.replicas", "0:1,1:2", "0:1,1:2"),
    ("follower.replication.throttled.replicas", "*", "*"),
    ("message.format.version", "0.10.2-IV0", "0.10.2-IV0"),
    ("message.format.version", "2.8", "2.8"),
    # Kafka 3.x keeps the first three parts of a 0.x version, the first two of a later one.
    ("message.format.version", "0.10.0.0", "0.10.0.0"),
    ("message.format.version", "0.8.2.2", "0.8.2.2"),
    ("message.format.version", "2.8.1", "2.8.1"),
    ("compression.gzip.level", "-1", "-1"),
    ("compression.zstd.level", "-5", "-5"),
    ("retention.bytes", "-7", "-7"),
])
def test_values_are_normalised_as_kafka_parses_them(name, value, normalised):
    assert check(name, value, SETTINGS) == normalised


@pytest.mark.parametrize("name, value, reason", [
    ("delete.retention.ms", "soon", "Not a number of type LONG"),
    ("delete.retention.ms", "-1", "Value must be at least 0"),
    ("segment.index.bytes", str(2**31), "Not a number of type INT"),
    ("preallocate", "yes", "Expected value to be either true or false"),
    ("min.cleanable.dirty.ratio", "1.5", "Value must be between 0 and 1"),
    ("min.cleanable.dirty.ratio", "half", "Not a number of type DOUBLE"),
    ("cleanup.policy", "compact,forever", "compact, delete"),
    ("compression.type", "brotli", "String must be one of"),
    ("compression.lz4.level", "18", "Value must be between 1 and 17"),
    ("compression.gzip.level", "0", "between 1 and 9 or -1"),
    ("leader.replication.throttled.replicas", "broker-1", "partitionId:brokerId"),
    ("message.format.version", "4.0", "Version must be"),
    ("message.format.version", "0.10", "Version must be"),
    ("message.format.version", "0.12.0", "Version must be"),
    ("message.timestamp.type", "WallClock", "CreateTime, LogAppendTime"),
])
def test_a_bad_value_names_the_config_and_kafkas_reason(name, value, reason):
    with pytest.raises(ConfigError, match=f"Invalid value {value.strip()} for configuration {name}: ") as raised:
        check(name, value, SETTINGS)
    assert reason in str(raised.value)


@pytest.mark.parametrize("name, value", [
    ("message.timestamp.after.max.ms", "3600000"),
    ("remote.storage.enable", "true"),
])
def test_configs_kgate_cannot_honour_accept_only_their_default(name, value):
    with pytest.raises(ConfigError, match=f"for configuration {name}: .*kgate accepts only"):
        check(name, value, SETTINGS)


def test_unknown_configs_and_conflicting_compaction_lags_are_refused():
    with pytest.raises(ConfigError, match="Unknown topic config name: retention.days"):
        check("retention.days", "1", SETTINGS)
    with pytest.raises(ConfigError, match=r"min.compaction.lag.ms \(10\) > max.compaction.lag.ms \(5\)"):
        check_together({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, SETTINGS)
    with pytest.raises(ConfigError, match="needs kgate.entry.format kafka or mixed_kafka"):
        check_together({"cleanup.policy": "compact,delete", "kgate.entry.format": "pulsar"}, SETTINGS)


def test_defaults_of_configs_kgate_acts_on_follow_the_broker_settings():
    settings = Settings.load(overrides=["log.retention.ms=1000", "entry.format=pulsar"])
    assert default("retention.ms", settings) == "1000"
    assert default("kgate.entry.format", settings) == "pulsar"
    assert TOPIC_CONFIGS["retention.ms"].type is ConfigType.LONG
    assert TOPIC_CONFIGS["segment.bytes"].type is ConfigType.INT
