"""SaslHandshake and SaslAuthenticate, and the one token step both SASL flows share.

Handshake v0 clients then send raw token frames, which the connection hands to
:func:`authenticate` directly; handshake v1 clients wrap the same tokens in
SaslAuthenticate requests, whose errors travel in the response. Either way a failed
login is logged once, counted against the client's address and the user it claimed, and ends with the
connection closed (Kafka's behaviour), after ``connection.failed.authentication.delay.ms``.
"""
import logging

from kafka.protocol.api_key import ApiKey
from kafka.protocol.sasl import SaslAuthenticateResponse, SaslHandshakeResponse

from kgate.protocol.error_codes import ErrorCode

from .. import sasl
from . import Context, handles
from .broker_view import BrokerView

log = logging.getLogger(__name__)


@handles(ApiKey.SaslHandshake)
async def sasl_handshake(ctx: Context, request):
    broker = ctx.broker
    enabled = broker.sasl_mechanisms
    connection = ctx.connection
    if not connection.sasl_listener or connection.mechanism is not None:  # Kafka lists no mechanisms with it
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    if request.mechanism not in enabled:
        log.warning("SASL handshake from %s refused: mechanism %r is not enabled", connection.peer, request.mechanism)
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
    try:
        answer = await authenticate(ctx.broker, connection, request.auth_bytes)
    except sasl.AuthenticationFailed as exc:
        return SaslAuthenticateResponse(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=str(exc),
                                        auth_bytes=b"", session_lifetime_ms=0)
    return SaslAuthenticateResponse(error_code=ErrorCode.NONE, error_message=None, auth_bytes=answer,
                                    session_lifetime_ms=0)


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
    except sasl.AuthenticationFailed as exc:
        broker.login_limiter.failed(address, user)
        broker.metrics.authentication_failed(mechanism.name, "refused")
        log.warning("SASL %s login from %s failed: %s", mechanism.name, connection.peer, exc)
        raise
    if mechanism.complete:
        broker.login_limiter.succeeded(address, user)
        connection.principal = mechanism.principal
        log.info("%s authenticated as %s with SASL %s", connection.peer, mechanism.principal, mechanism.name)
    return answer
