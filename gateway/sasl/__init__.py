"""SASL authentication: the mechanisms kgate offers and one connection's progress through one.

A mechanism is a small state machine fed client tokens (from SaslAuthenticate
requests, or raw frames after SaslHandshake v0) that answers server tokens until it
succeeds or raises :class:`AuthenticationFailed`. Credentials come from the metadata
store on every login, so users added or removed by the CLI take effect at once.
"""
from kgate.protocol.security import SASL_MECHANISMS as MECHANISMS

from .credentials import CredentialStore
from .mechanism import AuthenticationFailed, Mechanism
from .plain import PlainMechanism
from .scram import ScramMechanism


def start(name: str, credentials: CredentialStore) -> Mechanism:
    """A fresh server-side exchange for mechanism ``name`` (one of :data:`MECHANISMS`)."""
    if name == "PLAIN":
        return PlainMechanism(credentials)
    return ScramMechanism(name, credentials)


__all__ = ["MECHANISMS", "AuthenticationFailed", "CredentialStore", "Mechanism", "start"]
