"""SaslHandshake and SaslAuthenticate, and the one token step both SASL flows share.

Handshake v0 clients then send raw token frames, which the connection hands to
:func:`authenticate` directly; handshake v1 clients wrap the same tokens in
SaslAuthenticate requests, whose errors travel in the response. Either way a failed
login is logged once, counted against the client's address and the user it claimed, and ends with the
connection closed (Kafka's behaviour), after ``connection.failed.authentication.delay.ms``.
A login starts a session, which a handshake and authentication on the live connection
renew (KIP-368: gateway/sasl/session.py).
"""
import logging
import time

from kafka.protocol.api_key import ApiKey
from kafka.protocol.sasl import SaslAuthenticateResponse, SaslHandshakeResponse

from kgate.protocol.error_codes import ErrorCode

from .. import sasl
from ..sasl.session import Session
from . import Context, handles
from .broker_view import BrokerView

log = logging.getLogger(__name__)


@handles(ApiKey.SaslHandshake)
async def sasl_handshake(ctx: Context, request):
    broker = ctx.broker
    enabled = broker.sasl_mechanisms
    connection = ctx.connection
    if not connection.sasl_listener:  # Kafka lists no mechanisms with it
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    if connection.mechanism is not None:
        session, now = connection.session, time.monotonic()
        if not connection.mechanism.complete or session is None or not session.may_renew(ctx.version, now):
            return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
        assert connection.principal is not None  # set with the mechanism's completion
        session.begin_renewal(connection.mechanism.name, connection.principal, now)
    if request.mechanism not in enabled:
        log.warning("SASL handshake from %s refused: mechanism %r is not enabled", connection.peer, request.mechanism)
        connection.closing = connection.session is not None and connection.session.renewing is not None
        return SaslHandshakeResponse(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled)
    connection.mechanism = sasl.start(request.mechanism, broker.credentials)
    return SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=enabled)


@handles(ApiKey.SaslAuthenticate)
async def sasl_authenticate(ctx: Context, request):
    connection = ctx.connection
    if connection.mechanism is None or connection.mechanism.complete:
        return SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                        error_message="no SASL exchange in progress",
                                        auth_bytes=b"", session_lifetime_ms=0)
    renewing = connection.session.renewing if connection.session is not None else None
    if renewing is not None and renewing[0] != connection.mechanism.name:
        # Kafka closes the connection without an answer (the writer does, on this exception).
        raise sasl.AuthenticationFailed(f"SASL mechanism {connection.mechanism.name!r} requested by client is not "
                                        f"supported for re-authentication of mechanism {renewing[0]!r}")
    try:
        answer = await authenticate(ctx.broker, connection, request.auth_bytes)
    except sasl.AuthenticationFailed as exc:
        connection.closing = renewing is not None  # a first login's failure closes it anyway
        return SaslAuthenticateResponse(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=str(exc),
                                        auth_bytes=b"", session_lifetime_ms=0)
    lifetime = connection.session.lifetime_ms if connection.mechanism.complete and connection.session else 0
    return SaslAuthenticateResponse(error_code=ErrorCode.NONE, error_message=None, auth_bytes=answer,
                                    session_lifetime_ms=lifetime)


async def authenticate(broker: BrokerView, connection, token: bytes | bytearray) -> bytes:
    """One client token through the connection's mechanism; raises AuthenticationFailed."""
    address = connection.peer.rpartition(":")[0]
    mechanism = connection.mechanism
    token = bytes(token)
    user = mechanism.claimed_user(token)
    refusal = broker.login_limiter.refusal(address, user)
    if refusal is not None:
        log.warning("SASL login for %r from %s refused: too many failed logins", user, connection.peer)
        broker.metrics.authentication_failed(mechanism.name, "limited")
        raise sasl.AuthenticationFailed(refusal)
    try:
        answer = await mechanism.evaluate(token)
        if mechanism.complete:
            _check_renewal(connection, mechanism.principal)
    except sasl.AuthenticationFailed as exc:
        broker.login_limiter.failed(address, user)
        broker.metrics.authentication_failed(mechanism.name, "refused")
        log.warning("SASL %s login from %s failed: %s", mechanism.name, connection.peer, exc)
        raise
    if mechanism.complete:
        broker.login_limiter.succeeded(address, user)
        renewed = connection.principal is not None
        connection.principal = mechanism.principal
        connection.session = Session.after_login(broker.settings["connections.max.reauth.ms"], time.monotonic(),
                                                 connection.session)
        log.info("%s %s as %s with SASL %s", connection.peer, "re-authenticated" if renewed else "authenticated",
                 mechanism.principal, mechanism.name)
    return answer


def _check_renewal(connection, principal: str) -> None:
    """A re-authentication must prove the principal the connection has (Kafka's rule)."""
    renewing = connection.session.renewing if connection.session is not None else None
    if renewing is not None and renewing[1] != principal:
        raise sasl.AuthenticationFailed(f"Cannot change principals during re-authentication from {renewing[1]} "
                                        f"to {principal}")
