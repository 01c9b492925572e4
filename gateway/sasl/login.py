"""Logging in to another broker: the client side of SASL PLAIN and SCRAM (RFC 5802, RFC 7677).

Brokers authenticate to each other as Kafka's do with inter-broker SASL, so that with an
authorizer on, a broker can tell a peer (a principal holding ClusterAction on the
cluster) from a client sending kgate's internal requests, and can trust the client
principal a peer forwards. SaslHandshake v1, then SaslAuthenticate v2 rounds, on a fresh
connection before any other request (the credentials are the
``kgate.inter.broker.sasl.*`` settings), and again on the live connection before the
session the peer answered ends (KIP-368, ``connections.max.reauth.ms``).

Each exchange is a generator: it yields the next client token and is sent the server's
answer, and returns once the exchange is done (raising :class:`LoginFailed` if the
server's answer is wrong).
"""
import asyncio
import base64
import hashlib
import hmac
import itertools
import os
import struct
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass

from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from .credentials import MAX_ITERATIONS, hash_name, salted_password

HANDSHAKE_VERSION = 1
AUTHENTICATE_VERSION = 2
MAX_ANSWER_BYTES = 64 * 1024
_SIZE = struct.Struct(">i")

Exchange = Generator[bytes, bytes, None]


class LoginFailed(ConnectionError):
    """The peer refused the credentials, or answered what a SASL server would not."""


# One request sent and its answer decoded: (request, version, response class) -> response.
Call = Callable[[object, int, type], Awaitable]


@dataclass(frozen=True)
class Login:
    """A broker's credentials towards its peers, and the exchange that proves them."""

    mechanism: str
    username: str
    password: str

    async def on_stream(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str) -> int:
        """Authenticate on a connection just opened; the session lifetime the peer answered
        (ms, 0: for the connection's life). Raises LoginFailed, OSError or IncompleteReadError."""
        correlation = itertools.count(1)

        async def call(request, version: int, response_class):
            request.API_VERSION = version
            request.with_header(correlation_id=next(correlation), client_id=client_id)
            writer.write(request.encode(header=True, framed=True))
            size = _SIZE.unpack(await reader.readexactly(_SIZE.size))[0]
            if not 0 < size <= MAX_ANSWER_BYTES:
                raise LoginFailed(f"a SASL answer of {size} bytes")
            return response_class.decode(await reader.readexactly(size), version=version, header=True)
        return await self.over(call)

    async def over(self, call: Call) -> int:
        """The handshake and token exchange through ``call``: a first login, or a re-authentication
        on a live connection (KIP-368). The session lifetime the peer answered."""
        mechanism, username = self.mechanism, self.username
        handshake = await call(SaslHandshakeRequest(mechanism=mechanism), HANDSHAKE_VERSION, SaslHandshakeResponse)
        if handshake.error_code:
            raise LoginFailed(f"{mechanism} is not enabled there (it offers {', '.join(handshake.mechanisms)})")
        exchange = _plain(username, self.password) if mechanism == "PLAIN" else _scram(mechanism, username,
                                                                                       self.password)
        token = next(exchange)
        while True:
            answer = await call(SaslAuthenticateRequest(auth_bytes=token), AUTHENTICATE_VERSION,
                                SaslAuthenticateResponse)
            if answer.error_code:
                raise LoginFailed(f"as {username} with {mechanism}: {answer.error_message}")
            try:
                token = exchange.send(answer.auth_bytes)
            except StopIteration:
                return answer.session_lifetime_ms


def _plain(username: str, password: str) -> Exchange:
    yield f"\0{username}\0{password}".encode()


def _scram(mechanism: str, username: str, password: str) -> Exchange:
    digest = hash_name(mechanism)
    nonce = base64.b64encode(os.urandom(18)).decode()
    bare = f"n={username.replace('=', '=3D').replace(',', '=2C')},r={nonce}"
    server_first = (yield f"n,,{bare}".encode()).decode()
    fields = dict(part.split("=", 1) for part in server_first.split(",") if "=" in part)
    try:
        salt, iterations = base64.b64decode(fields["s"]), int(fields["i"])
    except (KeyError, ValueError):
        raise LoginFailed(f"a SCRAM server-first message without salt or iterations: {server_first!r}") from None
    if not fields.get("r", "").startswith(nonce) or not 0 < iterations <= MAX_ITERATIONS:
        raise LoginFailed(f"a SCRAM server-first message kgate would not send: {server_first!r}")
    salted = salted_password(mechanism, password.encode(), salt, iterations)
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{bare},{server_first},{without_proof}".encode()
    client_key = hmac.digest(salted, b"Client Key", digest)
    signature = hmac.digest(hashlib.new(digest, client_key).digest(), auth_message, digest)
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
    server_final = (yield f"{without_proof},p={proof}".encode()).decode()
    expected = hmac.digest(hmac.digest(salted, b"Server Key", digest), auth_message, digest)
    if not hmac.compare_digest(server_final.encode(), b"v=" + base64.b64encode(expected)):
        raise LoginFailed("the server's SCRAM signature is wrong: it does not hold this user's credential")
