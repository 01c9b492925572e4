"""Dynamic broker configs over a real (embedded) metadata store: which layer wins, what
is refused, and what a second broker of the same store sees."""
import pytest

from kgate.gateway.broker_configs import BrokerConfigs
from kgate.gateway.config import ConfigError, ConfigSource, Settings
from kgate.metadata.dynamic_configs import BROKER_KIND, DynamicConfigStore
from kgate.metadata.stores.embedded import EmbeddedMetadataStore


def settings(**given) -> Settings:
    chosen = Settings()
    chosen.values.update(given)
    chosen.given = set(given)
    return chosen


def configs(store, node_id=0, **given):
    """(the broker's dynamic configs, its settings, the changes it reported)."""
    changes: list[int] = []
    chosen = settings(**given)
    configs = BrokerConfigs(chosen, DynamicConfigStore(store, BROKER_KIND), node_id, lambda: changes.append(1))
    return configs, chosen, changes


def setter(name, value):
    return lambda current: {**current, name: BrokerConfigs.check(name, value)}


async def test_a_brokers_own_value_wins_over_the_cluster_default_over_the_file_over_the_default(tmp_path):
    store = EmbeddedMetadataStore(str(tmp_path / "metadata.sqlite"))
    mine, mine_settings, changes = configs(store, **{"log.retention.ms": 1000})
    await mine.start(lambda: None)
    assert mine.layers("log.retention.ms")[0][1:] == ("1000", ConfigSource.STATIC_BROKER_CONFIG)
    await mine.alter("", setter("log.retention.ms", "2000"), validate_only=False)
    await mine.alter("0", setter("log.retention.ms", "3000"), validate_only=False)
    assert mine.layers("log.retention.ms") == [
        ("log.retention.ms", "3000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("log.retention.ms", "2000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.ms", "1000", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG)]  # Kafka's log.retention.ms has no default
    assert mine_settings["log.retention.ms"] == 3000 and changes
    other, other_settings, _ = configs(store, node_id=1)  # another broker of the cluster: the default only
    await other.reload()
    assert other_settings["log.retention.ms"] == 2000
    await mine.alter("", lambda current: {}, validate_only=False)
    await other.reload()
    assert other_settings["log.retention.ms"] == 604800000


async def test_static_settings_and_bad_values_are_refused_and_validate_only_stores_nothing(tmp_path):
    store = EmbeddedMetadataStore(str(tmp_path / "metadata.sqlite"))
    mine, _, changes = configs(store)
    await mine.start(lambda: None)
    with pytest.raises(ConfigError, match=r"Cannot update these configs dynamically: \[num.partitions\]"):
        BrokerConfigs.check("num.partitions", "3")
    with pytest.raises(ConfigError, match="max.connections"):
        BrokerConfigs.check("max.connections", "many")
    assert BrokerConfigs.check("log.cleaner.threads", "2") == "2"  # custom: Kafka's, unknown to kgate
    assert BrokerConfigs.check("log.cleaner.min.cleanable.ratio", "0.25") == "0.25"
    await mine.alter("0", setter("max.connections", "5"), validate_only=True)
    assert mine.own == {} and not changes
    await mine.alter("0", setter("log.cleaner.threads", "2"), validate_only=False)
    assert "log.cleaner.threads" in mine.names(cluster_default=False) and not changes


async def test_a_stored_value_this_version_cannot_read_is_ignored(tmp_path):
    store = EmbeddedMetadataStore(str(tmp_path / "metadata.sqlite"))
    await DynamicConfigStore(store, BROKER_KIND).update("<default>", lambda current: {"max.connections": "plenty"})
    mine, mine_settings, _ = configs(store)
    await mine.start(lambda: None)
    assert mine_settings["max.connections"] == 2**31 - 1


async def test_time_forms_are_listed_as_kafka_lists_them(tmp_path):
    """What Kafka 4.4 answers with log.retention.minutes and log.roll.hours in its server
    configuration, log.retention.ms set for the broker and log.roll.ms for the cluster: the
    layers of a setting's forms, layer by layer, from the first of the setting itself on."""
    store = EmbeddedMetadataStore(str(tmp_path / "metadata.sqlite"))
    chosen = Settings.load(overrides=["log.retention.minutes=60", "log.roll.hours=24"])
    mine = BrokerConfigs(chosen, DynamicConfigStore(store, BROKER_KIND), 0, lambda: None)
    await mine.start(lambda: None)
    assert mine.layers("log.retention.ms") == [] and mine.value("log.retention.ms", False) is None
    assert mine.layers("log.retention.minutes") == [
        ("log.retention.minutes", "60", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG)]
    assert mine.layers("log.retention.hours") == [("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG)]
    await mine.alter("0", setter("log.retention.ms", "1000"), validate_only=False)
    await mine.alter("", setter("log.roll.ms", "2000"), validate_only=False)
    assert mine.layers("log.retention.ms") == [
        ("log.retention.ms", "1000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("log.retention.minutes", "60", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG)]
    assert mine.layers("log.roll.ms") == [
        ("log.roll.ms", "2000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.roll.hours", "24", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.roll.hours", "168", ConfigSource.DEFAULT_CONFIG)]
    assert mine.layers("log.retention.hours") == [("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG)]
    with pytest.raises(ConfigError, match=r"Cannot update these configs dynamically: \[log.retention.hours\]"):
        BrokerConfigs.check("log.retention.hours", "1")


def test_a_timestamp_bound_kgate_cannot_keep_is_refused_not_stored_and_ignored():
    """kgate does not check record timestamps: Kafka's dynamic settings of the bounds take only
    the value of no bound, where a custom config would be stored and silently do nothing."""
    for name in ("log.message.timestamp.after.max.ms", "log.message.timestamp.before.max.ms"):
        with pytest.raises(ConfigError, match="kgate does not check record timestamps"):
            BrokerConfigs.check(name, "3600000")
        assert BrokerConfigs.check(name, str(2**63 - 1)) == str(2**63 - 1)
