"""SASL PLAIN (RFC 4616), checked against the user's stored SCRAM credential.

Kafka reads PLAIN passwords from a JAAS file; kgate keeps one salted credential per
user for every mechanism, so the CLI manages PLAIN and SCRAM users alike and no
password is ever stored. PLAIN sends the password itself: use it over TLS.
"""
from kgate.protocol.security import SCRAM_MECHANISMS

from .credentials import CredentialStore
from .mechanism import AuthenticationFailed, Mechanism

INVALID = "Authentication failed: Invalid username or password"


class PlainMechanism(Mechanism):
    name = "PLAIN"

    def __init__(self, credentials: CredentialStore):
        self._credentials = credentials

    def claimed_user(self, token: bytes) -> str | None:
        parts = token.split(b"\x00")
        try:
            return parts[1].decode() if len(parts) == 3 else None
        except UnicodeDecodeError:
            return None

    async def evaluate(self, token: bytes) -> bytes:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens")
        authzid, user, password = parts
        username = self.claimed_user(token)
        if username is None:
            raise AuthenticationFailed(INVALID)
        if not username or not password:
            raise AuthenticationFailed("Authentication failed: username or password is empty")
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id "
                                       "that is different from username")
        stored = await self._credentials.get(username)
        mechanism = next((m for m in SCRAM_MECHANISMS if m in stored), None)
        if mechanism is None or not stored[mechanism].verifies(mechanism, password):
            raise AuthenticationFailed(INVALID)
        self.principal = username
        return b""
