"""SCRAM credentials in the metadata store: salted, never the password itself.

Stored as Kafka stores them under ``/config/users/<user>`` in ZooKeeper: per SCRAM
mechanism a salt, an iteration count, StoredKey and ServerKey (RFC 5802). A server
holding only these can verify a SCRAM proof, and a PLAIN password too (by deriving
StoredKey from it), but cannot recover or replay the password.
"""
import base64
import hashlib
import hmac
import json
import os
from dataclasses import dataclass
from urllib.parse import quote, unquote

from kgate.metadata.store import BadVersion, MetadataStore, NodeExists, NoNode

USERS = "/config/users"
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka's minimum for SCRAM iterations, and what its tools use by default.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


def hash_name(mechanism: str) -> str:
    return _HASHES[mechanism]


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    @classmethod
    def derive(cls, mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
               salt: bytes | None = None) -> "ScramCredential":
        salt = salt if salt is not None else os.urandom(32)
        salted = salted_password(mechanism, password.encode(), salt, iterations)
        digest = _HASHES[mechanism]
        client_key = hmac.digest(salted, b"Client Key", digest)
        return cls(salt, iterations, hashlib.new(digest, client_key).digest(),
                   hmac.digest(salted, b"Server Key", digest))

    def verifies(self, mechanism: str, password: bytes) -> bool:
        salted = salted_password(mechanism, password, self.salt, self.iterations)
        digest = _HASHES[mechanism]
        stored_key = hashlib.new(digest, hmac.digest(salted, b"Client Key", digest)).digest()
        return hmac.compare_digest(stored_key, self.stored_key)

    def to_json(self) -> dict:
        return {"salt": _b64(self.salt), "iterations": self.iterations,
                "stored_key": _b64(self.stored_key), "server_key": _b64(self.server_key)}

    @classmethod
    def from_json(cls, data: dict) -> "ScramCredential":
        return cls(base64.b64decode(data["salt"]), int(data["iterations"]), base64.b64decode(data["stored_key"]),
                   base64.b64decode(data["server_key"]))


def salted_password(mechanism: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_HASHES[mechanism], password, salt, iterations)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class CredentialStore:
    """Users and their SCRAM credentials, one metadata node per user."""

    def __init__(self, store: MetadataStore):
        self.store = store

    @staticmethod
    def _path(user: str) -> str:
        return f"{USERS}/{quote(user, safe='')}"

    async def get(self, user: str) -> dict[str, ScramCredential]:
        """The user's credentials by mechanism; empty when there is no such user."""
        node = await self.store.get(self._path(user))
        if node is None:
            return {}
        return {mechanism: ScramCredential.from_json(value) for mechanism, value in json.loads(node.data).items()}

    async def put(self, user: str, credentials: dict[str, ScramCredential]) -> None:
        """Set (or replace) the user's credentials for the mechanisms given, keeping the others."""
        while True:
            node = await self.store.get(self._path(user))
            current = json.loads(node.data) if node is not None else {}
            current.update({mechanism: credential.to_json() for mechanism, credential in credentials.items()})
            data = json.dumps(current, sort_keys=True).encode()
            try:
                if node is None:
                    await self.store.create(self._path(user), data)
                else:
                    await self.store.set(self._path(user), data, node.version)
                return
            except (NodeExists, NoNode, BadVersion):
                continue

    async def delete(self, user: str) -> bool:
        try:
            await self.store.delete(self._path(user))
            return True
        except NoNode:
            return False

    async def users(self) -> dict[str, list[str]]:
        """Every user and the mechanisms it has credentials for."""
        out = {}
        for child in sorted(await self.store.children(USERS)):
            node = await self.store.get(f"{USERS}/{child}")
            if node is not None:
                out[unquote(child)] = sorted(json.loads(node.data))
        return out
