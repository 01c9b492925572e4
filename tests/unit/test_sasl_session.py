"""KIP-368's session rules: when a login ends, and when a handshake may renew it."""
from kgate.gateway.sasl.session import Session


def test_a_login_holds_its_lifetime_or_for_ever():
    assert Session.after_login(0, 100.0, None) is None
    session = Session.after_login(3000, 100.0, None)
    assert session is not None and session.lifetime_ms == 3000
    assert not session.expired(103.0) and session.expired(103.001)


def test_a_renewal_needs_handshake_v1_and_a_second_since_the_last_one():
    session = Session.after_login(3000, 100.0, None)
    assert not session.may_renew(0, 100.0), "SaslHandshake v0 cannot begin a re-authentication"
    assert session.may_renew(1, 100.0), "the first one may begin at once"
    session.begin_renewal("PLAIN", "alice", 100.5)
    renewed = Session.after_login(3000, 100.6, session)
    assert renewed.renewing is None and renewed.expires_at == 103.6
    assert not renewed.may_renew(1, 101.4) and renewed.may_renew(1, 101.5)
