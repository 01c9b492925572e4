"""Group configs over a real (embedded) metadata store: Kafka's checks, and what another
broker of the same store (or this one, restarted) reads."""
import pytest

from kgate.gateway.config import ConfigError, Settings
from kgate.gateway.group_configs import GroupConfigs
from kgate.metadata.dynamic_configs import GROUP_KIND, DynamicConfigStore
from kgate.metadata.stores.embedded import EmbeddedMetadataStore


@pytest.mark.parametrize("name, value, reason", [
    ("consumer.session.timeout.ms", "1000", "must be in the range 45000 to 60000 inclusive"),
    ("consumer.heartbeat.interval.ms", "60000", "must be in the range 5000 to 15000 inclusive"),
    ("consumer.session.timeout.ms", "soon", "Not a number of type INT"),
    ("streams.session.timeout.ms", "6000", "must be in the range 45000 to 60000 inclusive"),
    ("streams.num.standby.replicas", "3", "must be in the range 0 to 2 inclusive"),
    ("share.auto.offset.reset", "middle", "'earliest', 'latest' or of the format"),
    ("share.isolation.level", "dirty", "String must be one of"),
    ("no.such.config", "1", "Unknown group config name: no.such.config"),
])
def test_kafkas_checks(name, value, reason):
    with pytest.raises(ConfigError, match=reason):
        GroupConfigs(Settings(), DynamicConfigStore(EmbeddedMetadataStore(":memory:"), GROUP_KIND)).check(name, value)


async def test_a_groups_configs_reach_another_broker_and_deleted_ones_fall_back(tmp_path):
    path = str(tmp_path / "metadata.sqlite")
    chosen = Settings()
    chosen.values["group.consumer.max.session.timeout.ms"] = 90_000
    mine = GroupConfigs(chosen, DynamicConfigStore(EmbeddedMetadataStore(path), GROUP_KIND))
    await mine.start(lambda: None)
    await mine.alter("g", lambda current: {**current, "consumer.session.timeout.ms": mine.check(
        "consumer.session.timeout.ms", "90000")}, validate_only=False)
    await mine.alter("h", lambda current: {"share.auto.offset.reset": "earliest"}, validate_only=True)
    other = GroupConfigs(Settings(), DynamicConfigStore(EmbeddedMetadataStore(path), GROUP_KIND))
    await other.start(lambda: None)
    assert other.configured("g", "consumer.session.timeout.ms") == 90_000
    assert other.configured("h", "consumer.session.timeout.ms") is None
    assert other.value("h", "share.auto.offset.reset") == "latest"
    await mine.alter("g", lambda current: {}, validate_only=False)
    await other.reload()
    assert other.value("g", "consumer.session.timeout.ms") == "45000"
