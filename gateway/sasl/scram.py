"""SASL SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), server side.

Two rounds: client-first gets server-first (our nonce, the user's salt and
iterations); client-final carries the proof, checked against StoredKey, and gets
server-final (the server signature, so the client knows we hold the credential).
Channel binding is not offered, as in Kafka.
"""
import base64
import hashlib
import hmac
import os

from .credentials import CredentialStore, ScramCredential, hash_name
from .mechanism import AuthenticationFailed, Mechanism

INVALID = "Authentication failed: Invalid username or password"


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        name, sep, value = part.partition("=")
        if not sep or len(name) != 1:
            raise AuthenticationFailed(f"Invalid SCRAM message attribute {part[:20]!r}")
        out.setdefault(name, value)
    return out


def _saslname(name: str) -> str:
    """Undo RFC 5802's escaping of ',' and '=' in user names."""
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise AuthenticationFailed("Invalid SCRAM user name escape")
    return name.replace("=2C", ",").replace("=3D", "=")


def _client_first_parts(message: str) -> tuple[str, str, str, dict[str, str]]:
    """The GS2 flag, authzid, bare message and its attributes (user name and nonce among them)."""
    flag, sep1, rest = message.partition(",")
    authzid, sep2, bare = rest.partition(",")
    if not (sep1 and sep2) or flag not in ("n", "y"):
        raise AuthenticationFailed("Invalid SCRAM client-first message (channel binding is not supported)")
    fields = _attributes(bare)
    if "n" not in fields or "r" not in fields or not fields["r"]:
        raise AuthenticationFailed("Invalid SCRAM client-first message: user name or nonce missing")
    return flag, authzid, bare, fields


class ScramMechanism(Mechanism):
    def __init__(self, name: str, credentials: CredentialStore):
        self.name = name
        self._digest = hash_name(name)
        self._credentials = credentials
        self._state = "first"
        self._credential: ScramCredential | None = None
        self._gs2_header = ""
        self._nonce = ""
        self._auth_message = ""
        self._user = ""

    async def evaluate(self, token: bytes) -> bytes:
        try:
            message = token.decode()
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SCRAM message: not UTF-8") from None
        if self._state == "first":
            return await self._client_first(message)
        if self._state == "final":
            return self._client_final(message)
        raise AuthenticationFailed("Unexpected SCRAM message after the exchange completed")

    def claimed_user(self, token: bytes) -> str | None:
        if self._state != "first":
            return self._user
        try:
            return _saslname(_client_first_parts(token.decode())[3]["n"])
        except (UnicodeDecodeError, AuthenticationFailed):
            return None

    async def _client_first(self, message: str) -> bytes:
        flag, authzid, bare, fields = _client_first_parts(message)
        self._user = _saslname(fields["n"])
        if authzid and _saslname(authzid.removeprefix("a=")) != self._user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id "
                                       "that is different from username")
        self._credential = (await self._credentials.get(self._user)).get(self.name)
        if self._credential is None:
            raise AuthenticationFailed(INVALID)
        self._gs2_header = f"{flag},{authzid},"
        self._nonce = fields["r"] + self._server_nonce()
        server_first = (f"r={self._nonce},s={base64.b64encode(self._credential.salt).decode()},"
                        f"i={self._credential.iterations}")
        self._auth_message = f"{bare},{server_first}"
        self._state = "final"
        return server_first.encode()

    @staticmethod
    def _server_nonce() -> str:
        return base64.b64encode(os.urandom(18)).decode()

    def _client_final(self, message: str) -> bytes:
        without_proof, sep, proof = message.rpartition(",p=")
        if not sep:
            raise AuthenticationFailed("Invalid SCRAM client-final message: proof missing")
        fields = _attributes(without_proof)
        # Kafka accepts any nonce that ends with ours, and librdkafka up to 2.0 relies on
        # it: it sends its own nonce again in front of the one it was given.
        if not fields.get("r", "").endswith(self._nonce):
            raise AuthenticationFailed("Invalid SCRAM client-final message: nonce mismatch")
        if fields.get("c") != base64.b64encode(self._gs2_header.encode()).decode():
            raise AuthenticationFailed("Invalid SCRAM client-final message: channel binding mismatch")
        self._auth_message += f",{without_proof}"
        credential = self._credential
        assert credential is not None  # the "final" state is entered only with the user's credential
        signature = hmac.digest(credential.stored_key, self._auth_message.encode(), self._digest)
        try:
            client_proof = base64.b64decode(proof, validate=True)
        except ValueError:
            raise AuthenticationFailed("Invalid SCRAM client proof encoding") from None
        if len(client_proof) != len(signature):
            raise AuthenticationFailed(INVALID)
        client_key = bytes(a ^ b for a, b in zip(client_proof, signature))
        if not hmac.compare_digest(hashlib.new(self._digest, client_key).digest(), credential.stored_key):
            raise AuthenticationFailed(INVALID)
        self._state = "done"
        self.principal = self._user
        server_signature = hmac.digest(credential.server_key, self._auth_message.encode(), self._digest)
        return b"v=" + base64.b64encode(server_signature)
