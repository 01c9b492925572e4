"""A SASL connection's session (KIP-368): how long its authentication holds, and its renewal.

With ``connections.max.reauth.ms`` above 0, a login holds for that long: SaslAuthenticate
v1+ tells the client so (``session_lifetime_ms``), and a request that arrives after it
closes the connection, as Kafka closes it, unless it is the SaslHandshake that begins a
re-authentication. A re-authentication is that handshake and its SaslAuthenticate
exchange on the live connection: it must use the same mechanism (else the connection is
closed) and prove the same principal (else SASL_AUTHENTICATION_FAILED, then closed), and
it starts a new session. As in Kafka, one may begin at most once a second, and a
handshake that may not begin one is answered as any handshake on an authenticated
connection is (ILLEGAL_SASL_STATE). With the setting at 0 (the default) a login holds
for the connection's life.
"""
from dataclasses import dataclass

# Kafka's least interval between two re-authentications of one connection.
MIN_REAUTHENTICATION_INTERVAL = 1.0  # seconds


@dataclass
class Session:
    lifetime_ms: int
    expires_at: float  # time.monotonic()
    # While re-authenticating: the mechanism and principal the new login must match.
    renewing: tuple[str, str] | None = None
    renewal_started: float | None = None

    @classmethod
    def after_login(cls, lifetime_ms: int, now: float, previous: "Session | None") -> "Session | None":
        """The session a login (or re-authentication) starts; None when logins never expire."""
        if lifetime_ms <= 0:
            return None
        return cls(lifetime_ms, now + lifetime_ms / 1000,
                   renewal_started=previous.renewal_started if previous is not None else None)

    def expired(self, now: float) -> bool:
        return now > self.expires_at

    def may_renew(self, handshake_version: int, now: float) -> bool:
        """Whether a SaslHandshake at ``handshake_version`` begins a re-authentication now."""
        return handshake_version >= 1 and (self.renewal_started is None
                                           or now - self.renewal_started >= MIN_REAUTHENTICATION_INTERVAL)

    def begin_renewal(self, mechanism: str, principal: str, now: float) -> None:
        self.renewing, self.renewal_started = (mechanism, principal), now
