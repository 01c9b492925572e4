"""The two brokers a conformance run compares: Apache Kafka 4.4 and kgate, started alike.

Plain: a PLAINTEXT listener each. Secured: a SASL_PLAINTEXT listener too, the same SCRAM
(and PLAIN) users on both, and each broker's ACL authorizer with ``admin`` a super user;
secured scenarios speak to the SASL listeners.
"""
from pathlib import Path

from tests.support.broker_process import BrokerProcess
from tests.support.clients import kgate_users

from .kafka_broker import KafkaBroker

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
# What Kafka's server.properties (conformance/kafka_broker.py) sets that kgate has too, given
# to kgate alike, so that both describe it as the server's configuration (STATIC_BROKER_CONFIG).
KGATE_SETTINGS = {"num.partitions": "1"}
SUPER_USER = "admin"


class Pair:
    def __init__(self, scratch: str, secured: bool = False, settings: tuple[tuple[str, str], ...] = ()):
        """``settings``: what both brokers start with beside their own (under the same names)."""
        self.secured = secured
        root = Path(scratch) / ("-".join(["secured" if secured else "plain", *(f"{k}={v}" for k, v in settings)]))
        self.kafka = KafkaBroker(str(root / "kafka"), dict(settings), scram_users=USERS if secured else None,
                                 authorizer=secured, super_users=(SUPER_USER,) if secured else ())
        kgate_dir = str(root / "kgate")
        if secured:
            for user, password in USERS.items():
                kgate_users(kgate_dir, "--create", "add", user, "--password", password)
        authorizer = {"authorizer.class.name": "acl", "super.users": f"User:{SUPER_USER}"} if secured else {}
        self.kgate = BrokerProcess(kgate_dir, {**KGATE_SETTINGS, **authorizer, **dict(settings)},
                                   listeners=("SASL_PLAINTEXT",) if secured else ())

    def start(self) -> "Pair":
        try:
            self.kafka.start()
            self.kgate.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        self.kgate.stop()
        self.kafka.stop()

    @property
    def addresses(self) -> tuple[str, str]:
        """Where scenarios connect: (Kafka's, kgate's)."""
        if self.secured:
            return self.kafka.sasl_bootstrap, self.kgate.address("SASL_PLAINTEXT")
        return self.kafka.bootstrap, self.kgate.bootstrap
