"""Group configs (KIP-848's, Kafka 4.x): a group's own settings, kept in the metadata store.

``kafka-configs --entity-type groups --entity-name G --alter`` (IncrementalAlterConfigs on
a GROUP resource) sets them; DescribeConfigs shows each with Kafka's type and default and,
where kgate has it, the broker setting it defaults to as its synonym. Every Kafka 4.4
group config is accepted, checked and stored, as topic configs are
(gateway/topic_configs.py says how the three uses read). The consumer group coordinator
reads a group's ``consumer.session.timeout.ms`` when it arms a member's session timer and
its ``consumer.heartbeat.interval.ms`` when it answers a heartbeat, so a change applies
from each member's next heartbeat; a share group's ``share.*`` configs apply to each ShareFetch and
lock as it happens (:meth:`GroupConfigs.share_config`). A group needs no members, nor even to exist, to
have configs, as in Kafka.
"""
from collections.abc import Callable

from kgate.metadata.dynamic_configs import DynamicConfigStore

from .config import ConfigError, ConfigType, Settings
from .shares.partition_state import ShareConfig
from .topic_configs import TopicConfig, Use, one_of, parse_value

_SHARE_ASSIGNMENT = "kgate deals a share group's partitions on the heartbeat that changes it; no interval batches it"
_NO_RENEW = "kgate serves ShareFetch and ShareAcknowledge v1, before KIP-1222's renew acknowledgements"
_STREAMS_AT_ONCE = "kgate assigns a streams group's tasks on the heartbeat that changes it, with no initial delay"
_STREAMS_STICKY = "kgate's streams groups have the sticky assignor only, which is not rack-aware"
_NO_DLQ = "kgate's streams groups have no dead-letter queue (KIP-1034's broker side)"
_ASSIGNMENT = "kgate assigns on the heartbeat that changes a group; there is no interval to batch changes over"

GROUP_CONFIGS: dict[str, TopicConfig] = {
    "consumer.session.timeout.ms": TopicConfig(ConfigType.INT, "", Use.ACTS,
                                               setting="group.consumer.session.timeout.ms"),
    "consumer.heartbeat.interval.ms": TopicConfig(ConfigType.INT, "", Use.ACTS,
                                                  setting="group.consumer.heartbeat.interval.ms"),
    "consumer.assignment.interval.ms": TopicConfig(ConfigType.INT, "1000", Use.IGNORED, _ASSIGNMENT),
    "share.auto.offset.reset": TopicConfig(
        ConfigType.STRING, "latest", Use.ACTS,
        valid=("The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.",
               lambda v: v in ("earliest", "latest") or v.startswith("by_duration:P"))),
    "share.session.timeout.ms": TopicConfig(ConfigType.INT, "", Use.ACTS, setting="group.share.session.timeout.ms"),
    "share.heartbeat.interval.ms": TopicConfig(ConfigType.INT, "", Use.ACTS,
                                               setting="group.share.heartbeat.interval.ms"),
    "share.record.lock.duration.ms": TopicConfig(ConfigType.INT, "", Use.ACTS,
                                                 setting="group.share.record.lock.duration.ms"),
    "share.delivery.count.limit": TopicConfig(ConfigType.INT, "", Use.ACTS, setting="group.share.delivery.count.limit"),
    "share.partition.max.record.locks": TopicConfig(ConfigType.INT, "", Use.ACTS,
                                                    setting="group.share.partition.max.record.locks"),
    "share.isolation.level": TopicConfig(ConfigType.STRING, "read_uncommitted", Use.ACTS,
                                         valid=one_of("read_committed", "read_uncommitted")),
    "share.assignment.interval.ms": TopicConfig(ConfigType.INT, "1000", Use.IGNORED, _SHARE_ASSIGNMENT),
    "share.renew.acknowledge.enable": TopicConfig(ConfigType.BOOLEAN, "true", Use.IGNORED, _NO_RENEW),
    "streams.session.timeout.ms": TopicConfig(ConfigType.INT, "", Use.ACTS, setting="group.streams.session.timeout.ms"),
    "streams.heartbeat.interval.ms": TopicConfig(ConfigType.INT, "", Use.ACTS,
                                                 setting="group.streams.heartbeat.interval.ms"),
    "streams.num.standby.replicas": TopicConfig(ConfigType.INT, "", Use.ACTS,
                                                setting="group.streams.num.standby.replicas"),
    "streams.initial.rebalance.delay.ms": TopicConfig(ConfigType.INT, "3000", Use.IGNORED, _STREAMS_AT_ONCE),
    "streams.assignment.interval.ms": TopicConfig(ConfigType.INT, "1000", Use.IGNORED, _ASSIGNMENT),
    "streams.assignor.name": TopicConfig(ConfigType.STRING, "sticky", Use.IGNORED, _STREAMS_STICKY),
    "streams.rack.aware.assignment.tags": TopicConfig(ConfigType.LIST, "", Use.IGNORED, _STREAMS_STICKY),
    "errors.deadletterqueue.topic.name": TopicConfig(ConfigType.STRING, "", Use.IGNORED, _NO_DLQ),
    "errors.deadletterqueue.copy.record.enable": TopicConfig(ConfigType.BOOLEAN, "false", Use.IGNORED, _NO_DLQ),
}

# Group configs bounded by broker settings, as Kafka bounds them: (least, most), each a setting's name or a number.
_BOUNDS = {
    "consumer.session.timeout.ms": ("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
    "consumer.heartbeat.interval.ms": ("group.consumer.min.heartbeat.interval.ms",
                                       "group.consumer.max.heartbeat.interval.ms"),
    "share.session.timeout.ms": ("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    "share.heartbeat.interval.ms": ("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
    "share.record.lock.duration.ms": ("group.share.min.record.lock.duration.ms",
                                      "group.share.max.record.lock.duration.ms"),
    "share.delivery.count.limit": ("group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit"),
    "streams.session.timeout.ms": ("group.streams.min.session.timeout.ms", "group.streams.max.session.timeout.ms"),
    "streams.heartbeat.interval.ms": ("group.streams.min.heartbeat.interval.ms",
                                      "group.streams.max.heartbeat.interval.ms"),
    "streams.num.standby.replicas": (0, "group.streams.max.standby.replicas"),
}


class GroupConfigs:
    def __init__(self, settings: Settings, store: DynamicConfigStore):
        self._settings = settings
        self._store = store
        self.by_group: dict[str, dict[str, str]] = {}

    async def start(self, changed_elsewhere: Callable[[], None]) -> None:
        """Read every group's configs; ``changed_elsewhere`` is called whenever any broker alters them."""
        self._store.watch(changed_elsewhere)
        await self.reload()

    async def reload(self, _key=None) -> None:
        self.by_group = await self._store.load_all()

    def default(self, name: str) -> str:
        config = GROUP_CONFIGS[name]
        return str(self._settings[config.setting]) if config.setting else config.default

    def value(self, group_id: str, name: str) -> str:
        return self.by_group.get(group_id, {}).get(name) or self.default(name)

    def share_config(self, group_id: str) -> ShareConfig:
        """What a share group's partitions follow now (by_duration: resets are read as latest)."""
        return ShareConfig(lock_ms=int(self.value(group_id, "share.record.lock.duration.ms")),
                           delivery_limit=int(self.value(group_id, "share.delivery.count.limit")),
                           max_record_locks=int(self.value(group_id, "share.partition.max.record.locks")),
                           auto_offset_reset=self.value(group_id, "share.auto.offset.reset"),
                           isolation_level=self.value(group_id, "share.isolation.level"))

    def configured(self, group_id: str, name: str) -> int | None:
        """A number config set for the group itself; None when the broker's default applies."""
        value = self.by_group.get(group_id, {}).get(name)
        return int(value) if value is not None else None

    def check(self, name: str, value: str) -> str:
        """The value to store, or ConfigError with Kafka's reason."""
        self.check_name(name)
        config = GROUP_CONFIGS[name]
        parsed, normalised = parse_value(name, value.strip(), config.type)
        if config.valid is not None and not config.valid[1](parsed):
            raise ConfigError(f"Invalid value {value} for configuration {name}: {config.valid[0]}")
        if name in _BOUNDS:
            low, high = (self._settings[bound] if isinstance(bound, str) else bound for bound in _BOUNDS[name])
            if not low <= parsed <= high:
                raise ConfigError(f"{name} must be in the range {low} to {high} inclusive.")
        return normalised

    @staticmethod
    def check_name(name: str) -> None:
        if name not in GROUP_CONFIGS:
            raise ConfigError(f"Unknown group config name: {name}")

    async def alter(self, group_id: str, change: Callable[[dict[str, str]], dict[str, str]],
                    validate_only: bool) -> None:
        """Replace the group's configs with ``change(them)``, which raises ConfigError to refuse."""
        if validate_only:
            change(dict(self.by_group.get(group_id, {})))
            return
        await self._store.update(group_id, change)
        await self.reload()
