"""SASL mechanisms, credentials and the unauthenticated protocol states, each on its own.

SCRAM is checked against RFC 7677's published exchange and against kafka-python's
client (an implementation we did not write); the protocol machine against the frames
0.10-era (raw tokens) and current (SaslAuthenticate) clients send.
"""
import asyncio
import base64

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.net.sasl.scram import ScramClient
from kafka.protocol.api_key import ApiKey
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from kgate.gateway.sasl import AuthenticationFailed, CredentialStore, start
from kgate.gateway.sasl.credentials import ScramCredential
from kgate.gateway.sasl.login_limiter import LoginLimiter
from kgate.gateway.sasl.scram import ScramMechanism
from kgate.metadata.stores.embedded import EmbeddedMetadataStore
from kgate.protocol.connection import (
    NEED_DATA,
    PAUSED,
    AuthState,
    LocalProtocolError,
    ProtocolViolation,
    RequestReceived,
    SaslTokenReceived,
    ServerConnection,
)
from kgate.protocol.frames import frame_prefix
from tests.support.wire import encode_request
from tests.unit.request_frames import metadata_request


@pytest.fixture
def credentials(tmp_path):
    store = EmbeddedMetadataStore(str(tmp_path / "metadata.sqlite"))
    yield CredentialStore(store)
    asyncio.run(store.close())


def put(credentials, user, password, mechanisms=("SCRAM-SHA-256", "SCRAM-SHA-512"), salt=None):
    asyncio.run(credentials.put(user, {m: ScramCredential.derive(m, password, 4096, salt) for m in mechanisms}))


def evaluate(mechanism, token: bytes) -> bytes:
    return asyncio.run(mechanism.evaluate(token))


class _Rfc7677Server(ScramMechanism):
    @staticmethod
    def _server_nonce() -> str:
        return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"


def test_scram_sha256_follows_rfc7677s_example(credentials):
    put(credentials, "user", "pencil", ["SCRAM-SHA-256"], salt=base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="))
    server = _Rfc7677Server("SCRAM-SHA-256", credentials)
    nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    assert evaluate(server, b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO") == \
        f"r={nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".encode()
    final = evaluate(server, f"c=biws,r={nonce},p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=".encode())
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.principal == "user"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kafka_pythons_scram_client_authenticates(credentials, mechanism):
    put(credentials, "alice", "s3cret")
    client = ScramClient("alice", "s3cret", mechanism)
    server = start(mechanism, credentials)
    client.process_server_first_message(evaluate(server, client.first_message()))
    client.process_server_final_message(evaluate(server, client.final_message()))
    assert server.principal == "alice"


@pytest.mark.parametrize("user, password", [("alice", "wrong"), ("nobody", "s3cret")])
def test_scram_refuses_a_wrong_password_or_unknown_user(credentials, user, password):
    put(credentials, "alice", "s3cret")
    client = ScramClient(user, password, "SCRAM-SHA-256")
    server = start("SCRAM-SHA-256", credentials)
    with pytest.raises(AuthenticationFailed, match="Invalid username or password"):
        client.process_server_first_message(evaluate(server, client.first_message()))
        evaluate(server, client.final_message())
    assert not server.complete


@pytest.mark.parametrize("token", [b"p=tls-unique,,n=a,r=x", b"n,,r=abc", b"n,,n=alice", b"garbage", b"\xff\xfe",
                                   b"n,a=bob,n=alice,r=abc"])
def test_scram_refuses_malformed_client_first_messages(credentials, token):
    put(credentials, "alice", "s3cret")
    with pytest.raises(AuthenticationFailed):
        evaluate(start("SCRAM-SHA-256", credentials), token)


def test_scram_refuses_a_tampered_nonce(credentials):
    put(credentials, "alice", "s3cret")
    server = start("SCRAM-SHA-256", credentials)
    first = evaluate(server, b"n,,n=alice,r=abc").decode()
    nonce = first.split(",")[0][2:]
    with pytest.raises(AuthenticationFailed, match="nonce"):
        evaluate(server, f"c=biws,r={nonce}x,p=AAAA".encode())


def test_plain_checks_the_password_against_the_stored_scram_credential(credentials):
    put(credentials, "alice", "s3cret", ["SCRAM-SHA-512"])
    good = start("PLAIN", credentials)
    assert evaluate(good, b"\x00alice\x00s3cret") == b"" and good.principal == "alice"
    assert evaluate(start("PLAIN", credentials), b"alice\x00alice\x00s3cret") == b""
    for token, reason in [(b"\x00alice\x00wrong", "Invalid username or password"),
                          (b"\x00bob\x00s3cret", "Invalid username or password"),
                          (b"bob\x00alice\x00s3cret", "authorization id"),
                          (b"alice\x00s3cret", "expected 3 tokens"),
                          (b"\x00\x00", "empty")]:
        with pytest.raises(AuthenticationFailed, match=reason):
            evaluate(start("PLAIN", credentials), token)


def test_credentials_are_salted_and_never_hold_the_password(credentials):
    put(credentials, "alice", "s3cret")
    put(credentials, "bob", "s3cret")
    node = asyncio.run(credentials.store.get("/config/users/alice"))
    assert b"s3cret" not in node.data
    alice, bob = asyncio.run(credentials.get("alice")), asyncio.run(credentials.get("bob"))
    assert alice["SCRAM-SHA-256"].salt != bob["SCRAM-SHA-256"].salt
    assert alice["SCRAM-SHA-256"].stored_key != bob["SCRAM-SHA-256"].stored_key
    assert asyncio.run(credentials.users()) == {"alice": ["SCRAM-SHA-256", "SCRAM-SHA-512"],
                                                 "bob": ["SCRAM-SHA-256", "SCRAM-SHA-512"]}
    assert asyncio.run(credentials.delete("alice")) and not asyncio.run(credentials.delete("alice"))
    assert asyncio.run(credentials.get("alice")) == {}


def test_user_names_with_slashes_are_kept_apart(credentials):
    put(credentials, "a/b,c=d", "one")
    put(credentials, "a", "two")
    assert set(asyncio.run(credentials.users())) == {"a/b,c=d", "a"}
    assert evaluate(start("PLAIN", credentials), b"\x00a/b,c=d\x00one") == b""
    with pytest.raises(AuthenticationFailed):
        evaluate(start("PLAIN", credentials), b"\x00a\x00one")


def test_the_login_limiter_blocks_a_user_behind_an_address_for_the_window_only():
    now = [0.0]
    limiter = LoginLimiter(3, 100, 100, window=60, clock=lambda: now[0])
    for _ in range(3):
        assert limiter.refusal("10.0.0.1", "bob") is None
        limiter.failed("10.0.0.1", "bob")
        now[0] += 1
    assert "Too many failed logins" in limiter.refusal("10.0.0.1", "bob")
    # Other users behind the same address, and the same user elsewhere, still log in.
    assert limiter.refusal("10.0.0.1", "alice") is None and limiter.refusal("10.0.0.2", "bob") is None
    now[0] = 60.5  # the first failure has left the window
    assert limiter.refusal("10.0.0.1", "bob") is None


def test_failures_across_users_from_one_address_are_bounded_too():
    """Password spraying: a few guesses for each of many users still meets the address's bound."""
    limiter = LoginLimiter(3, 10, 100, clock=lambda: 0.0)
    for i in range(5):
        limiter.failed("10.0.0.1", f"user{i}")
        limiter.failed("10.0.0.1", f"user{i}")
    assert "from 10.0.0.1" in limiter.refusal("10.0.0.1", "alice")
    assert limiter.refusal("10.0.0.2", "alice") is None


def test_failures_for_one_user_from_many_addresses_are_bounded_but_its_own_addresses_still_log_in():
    now = [0.0]
    limiter = LoginLimiter(3, 10, 5, window=60, trusted_for=3600, clock=lambda: now[0])
    limiter.succeeded("10.0.0.1", "alice")
    for i in range(5):
        assert limiter.refusal(f"10.0.1.{i}", "alice") is None
        limiter.failed(f"10.0.1.{i}", "alice")
    assert limiter.refusal("10.0.2.1", "alice") == "Too many failed logins for this user; retry later"
    assert limiter.refusal("10.0.0.1", "alice") is None, "an address alice logged in from lately"
    assert limiter.refusal("10.0.2.1", "bob") is None
    now[0] = 3600.5  # the trust has lapsed, and so have the failures
    assert limiter.refusal("10.0.2.1", "alice") is None
    for i in range(5):
        limiter.failed(f"10.0.1.{i}", "alice")
    assert limiter.refusal("10.0.0.1", "alice") is not None


@pytest.mark.parametrize("mechanism,token,user", [
    ("PLAIN", b"\x00bob\x00secret", "bob"),
    ("PLAIN", b"bob\x00bob\x00secret", "bob"),
    ("PLAIN", b"bob-only", None),
    ("PLAIN", b"\x00\xff\x00pw", None),
    ("SCRAM-SHA-256", b"n,,n=b=2Cob,r=nonce", "b,ob"),
    ("SCRAM-SHA-512", b"n,,r=nonce", None),
    ("SCRAM-SHA-512", b"\xff", None),
])
def test_each_mechanism_tells_the_user_a_token_claims_before_checking_it(credentials, mechanism, token, user):
    assert start(mechanism, credentials).claimed_user(token) == user


# -- the unauthenticated states of the protocol machine ------------------------------------

def sasl_connection() -> ServerConnection:
    return ServerConnection(1 << 20, sasl_max_bytes=64 * 1024)


def raw(token: bytes) -> bytes:
    return frame_prefix(len(token)) + token


def handshake(version: int) -> bytes:
    return encode_request(SaslHandshakeRequest(mechanism="PLAIN"), version)


def test_only_api_versions_and_handshake_before_authentication():
    connection = sasl_connection()
    connection.receive_data(encode_request(metadata_request(), 1))
    event = connection.next_event()
    assert isinstance(event, ProtocolViolation) and "before authentication" in event.reason


def test_handshake_v0_switches_to_raw_tokens_and_pauses_between_them():
    connection = sasl_connection()
    connection.receive_data(handshake(0) + raw(b"\x00alice\x00pass") + raw(b"abc"))
    assert isinstance(connection.next_event(), RequestReceived)
    assert connection.next_event() is PAUSED and connection.auth_state is AuthState.PAUSED
    connection.resume()
    assert connection.next_event() == SaslTokenReceived(b"\x00alice\x00pass")
    assert connection.next_event() is PAUSED, "nothing more is read until the token's outcome is known"
    connection.resume()
    assert connection.next_event() == SaslTokenReceived(b"abc")
    connection.authenticated()
    connection.receive_data(encode_request(metadata_request(), 1))
    assert isinstance(connection.next_event(), RequestReceived)


def test_need_data_and_paused_are_told_apart_and_steps_out_of_order_raise():
    connection = sasl_connection()
    wire = handshake(0)
    connection.receive_data(wire[:5])
    assert connection.next_event() is NEED_DATA
    with pytest.raises(LocalProtocolError, match="no SASL step"):
        connection.resume()  # nothing was paused on: a bug in the I/O layer, not the client's
    connection.receive_data(wire[5:])
    assert isinstance(connection.next_event(), RequestReceived)
    assert connection.next_event() is PAUSED
    connection.resume()
    assert connection.next_event() is NEED_DATA
    with pytest.raises(LocalProtocolError):
        connection.authenticated()


def test_handshake_v1_then_only_sasl_authenticate():
    connection = sasl_connection()
    connection.receive_data(handshake(1))
    assert isinstance(connection.next_event(), RequestReceived)
    connection.resume()
    connection.receive_data(encode_request(SaslAuthenticateRequest(auth_bytes=b"\x00a\x00b"), 1))
    event = connection.next_event()
    assert isinstance(event, RequestReceived) and event.header.api_key == ApiKey.SaslAuthenticate
    connection.resume()
    connection.receive_data(raw(b"\x00a\x00b"))  # a raw token where a request belongs
    assert isinstance(connection.next_event(), ProtocolViolation)


def test_unauthenticated_frames_are_capped():
    connection = sasl_connection()
    connection.receive_data(handshake(0))
    connection.next_event()
    connection.resume()
    connection.receive_data(frame_prefix(64 * 1024 + 1) + b"x" * 100)
    event = connection.next_event()
    assert isinstance(event, ProtocolViolation) and "sasl.server.max.receive.size" in event.reason


def read_in_pieces(connection: ServerConnection, data: bytes, piece: int) -> None:
    """As the event loop reads: into the buffer the connection lends, at most ``piece`` bytes a time."""
    while data:
        buffer = connection.get_buffer()
        count = min(piece, len(buffer), len(data))
        buffer[:count] = data[:count]
        connection.buffer_updated(count)
        data = data[count:]


@pytest.mark.parametrize("authenticated", [True, False])
def test_a_frame_received_while_waiting_for_the_outcome_is_measured_against_the_limit_after_it(authenticated):
    """A client should wait for the answer to its token; if it does not, its next frame is
    measured when it is taken, against the cap for authenticated connections or not."""
    connection = sasl_connection()
    connection.receive_data(handshake(0) + raw(b"\x00alice\x00pass"))
    assert isinstance(connection.next_event(), RequestReceived)
    connection.resume()
    assert isinstance(connection.next_event(), SaslTokenReceived)
    read_in_pieces(connection, encode_request(metadata_request(topics=["t" * 100] * 3000), 1), 50_000)
    assert connection.next_event() is PAUSED
    if authenticated:
        connection.authenticated()
        assert isinstance(connection.next_event(), RequestReceived)
    else:
        connection.resume()
        event = connection.next_event()
        assert isinstance(event, ProtocolViolation) and "sasl.server.max.receive.size" in event.reason


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mechanism=st.sampled_from(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]),
       tokens=st.lists(st.binary(max_size=200) | st.text(max_size=80).map(str.encode), min_size=1, max_size=3))
def test_arbitrary_tokens_only_ever_fail_authentication(credentials, mechanism, tokens):
    put_once(credentials)
    server = start(mechanism, credentials)
    for token in tokens:
        try:
            evaluate(server, token)
        except AuthenticationFailed:
            return
    assert not server.complete


def put_once(credentials):
    if not asyncio.run(credentials.get("alice")):
        put(credentials, "alice", "s3cret")


def test_a_client_nonce_repeated_before_ours_is_accepted_as_kafka_accepts_it(credentials):
    """librdkafka 2.0 sends r=<its nonce><our whole nonce>; Kafka checks only the suffix."""
    put(credentials, "alice", "s3cret")
    client = ScramClient("alice", "s3cret", "SCRAM-SHA-256")
    server = start("SCRAM-SHA-256", credentials)
    client_nonce = client.nonce
    client.process_server_first_message(evaluate(server, client.first_message()))
    client.nonce = client_nonce + client.nonce
    client.auth_message = client.auth_message.replace(b"c=biws,r=", b"c=biws,r=" + client_nonce)
    client.client_signature = client.hmac(client.stored_key, client.auth_message)
    client.client_proof = bytes(a ^ b for a, b in zip(client.client_key, client.client_signature))
    evaluate(server, client.final_message())
    assert server.principal == "alice"
