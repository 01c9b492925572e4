"""Broker settings that change at run time: Kafka's dynamic broker configs, for the
settings kgate can change without a restart.

Kafka 4.4 lets ``kafka-configs --entity-type brokers --alter`` change a setting while
the broker runs when DescribeConfigs calls it not read-only. Of those kgate has, it
honours a change at once: the log defaults topic configs fall back to (read on every
produce, and re-applied to the ledgers served here), the log cleaner's (read each
round), the connection limits (from the next accept) and the balancer's (each round). A setting's value is then the
first of Kafka's layers that holds one: this broker's dynamic value, the cluster-wide
dynamic default, the server's configuration (file or ``--set``), the built-in default.
DescribeConfigs reports the source of the first and the layers as synonyms.

kgate's other settings are static, and a change to one is refused with INVALID_REQUEST,
as Kafka refuses its read-only ones. A name kgate does not know is stored and described
but used by nothing, as Kafka keeps custom configs (for plugins): among them Kafka's own
dynamic settings that have no counterpart in kgate (``num.io.threads``,
``log.cleaner.threads``: kgate has no thread pools to size).
"""
import logging
from collections.abc import Callable
from itertools import dropwhile

from kgate.metadata.dynamic_configs import DEFAULT_ENTITY, DynamicConfigStore

from .config import (
    BROKER_SETTINGS,
    NO_DEFAULT,
    TIME_FORMS,
    ConfigError,
    ConfigSource,
    Settings,
    check_setting,
    setting_text,
)

log = logging.getLogger(__name__)

DYNAMIC = frozenset({
    # Defaults of topic configs.
    "compression.type", "message.max.bytes", "log.message.timestamp.type", "log.retention.ms",
    "log.message.timestamp.after.max.ms", "log.message.timestamp.before.max.ms",
    "log.retention.bytes", "log.roll.ms", "log.segment.bytes", "log.cleaner.delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms", "log.cleaner.min.cleanable.ratio",
    # The log cleaner's own.
    "log.cleaner.backoff.ms", "log.cleaner.dedupe.buffer.size",
    # Connection limits.
    "max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
    # The balancer's (read each round): switched on and tuned across the cluster without a restart.
    "kgate.balancer.enable", "kgate.balancer.interval.ms", "kgate.balancer.max.moves",
    "kgate.balancer.move.cooldown.ms", "kgate.balancer.tolerance.percent", "kgate.balancer.load.report.interval.ms",
})

Layer = tuple[str, str, ConfigSource]  # (setting, value, source)


class BrokerConfigs:
    def __init__(self, settings: Settings, store: DynamicConfigStore, node_id: int, changed: Callable[[], None]):
        """``changed`` is called after a change of any setting's value here."""
        self._settings = settings
        self._store = store
        self._entity = str(node_id)
        self._static = dict(settings.values)
        self._changed = changed
        self.default: dict[str, str] = {}
        self.own: dict[str, str] = {}

    async def start(self, changed_elsewhere: Callable[[], None]) -> None:
        """Read this broker's dynamic configs; ``changed_elsewhere`` is called whenever any broker alters them."""
        self._store.watch(changed_elsewhere)
        await self.reload()

    async def reload(self, _key=None) -> None:
        self.default = await self._store.load(DEFAULT_ENTITY)
        self.own = await self._store.load(self._entity)
        before = dict(self._settings.values)
        for name in DYNAMIC:
            self._settings.values[name] = self._effective(name)
        if self._settings.values != before:
            self._changed()

    def _effective(self, name: str):
        for entity, layer in ((self._entity, self.own), (DEFAULT_ENTITY, self.default)):
            if name in layer:
                try:
                    return check_setting(name, layer[name])
                except ConfigError as exc:  # written by another version, or by hand in the store
                    log.warning("dynamic config %s of broker %s ignored: %s", name, entity, exc)
        return self._static[name]

    def layers(self, name: str) -> list[Layer]:
        """Kafka's synonyms of ``name`` (ConfigHelper): each layer's value of each of its forms
        (TIME_FORMS: ``log.retention.ms``, ``.minutes``, ``.hours``), layer by layer, from the
        first of ``name`` itself on. So ``log.retention.ms`` set nowhere has none, although
        ``log.retention.hours``'s default gives its value."""
        forms = _forms(name)
        found: list[Layer] = []
        for layer, source in ((self.own, ConfigSource.DYNAMIC_BROKER_CONFIG),
                              (self.default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)):
            found += [(form, layer[form], source) for form in forms if form in layer]
        found += [(form, setting_text(self._static[form]), ConfigSource.STATIC_BROKER_CONFIG)
                  for form in forms if form in self._settings.given]
        found += [(form, setting_text(BROKER_SETTINGS[form][0]), ConfigSource.DEFAULT_CONFIG)
                  for form in forms if form in BROKER_SETTINGS and form not in NO_DEFAULT]
        return list(dropwhile(lambda layer: layer[0] != name, found))

    def names(self, cluster_default: bool) -> list[str]:
        """What DescribeConfigs lists: for the cluster default, only what is set there (as Kafka);
        for this broker, every setting and every custom config set for it."""
        if cluster_default:
            return sorted(self.default)
        return sorted(set(BROKER_SETTINGS) | {n for n in (*self.own, *self.default) if n not in BROKER_SETTINGS})

    def value(self, name: str, cluster_default: bool) -> str | None:
        """None: a setting Kafka defines without a default, not set anywhere."""
        if cluster_default:
            return self.default[name]
        layers = self.layers(name)
        return layers[0][1] if layers else None

    @staticmethod
    def check_name(name: str) -> None:
        if name in BROKER_SETTINGS and name not in DYNAMIC:
            raise ConfigError(f"Cannot update these configs dynamically: [{name}]")

    @classmethod
    def check(cls, name: str, value: str) -> str:
        """The value to store for ``name``, or ConfigError with why it cannot be set."""
        cls.check_name(name)
        return setting_text(check_setting(name, value)) if name in BROKER_SETTINGS else value

    async def alter(self, broker_id: str, change: Callable[[dict[str, str]], dict[str, str]],
                    validate_only: bool) -> None:
        """Replace the configs of ``broker_id`` ("": the cluster default) with ``change(them)``;
        ``change`` raises ConfigError to refuse, and runs on the stored configs as they are then."""
        entity = broker_id or DEFAULT_ENTITY
        if validate_only:
            change(dict(self.default if entity == DEFAULT_ENTITY else self.own))
            return
        await self._store.update(entity, change)
        log.info("dynamic configs of %s altered", "the cluster default" if entity == DEFAULT_ENTITY
                 else f"broker {entity}")
        await self.reload()


def _forms(name: str) -> list[str]:
    """The setting's forms in Kafka's order (DynamicBrokerConfig.brokerConfigSynonyms)."""
    for first, others in TIME_FORMS.items():
        forms = [first, *(form for form, _factor in others)]
        if name in forms:
            return forms
    return [name]
