"""max.connections and max.connections.per.ip (with overrides): counted at accept, given back at close,
refusals logged at most once per interval."""
import logging

import pytest

from kgate.gateway.connection_limits import LOG_INTERVAL, ConnectionLimits, parse_overrides


def test_per_address_total_and_override_limits_are_each_enforced_and_given_back():
    limits = ConnectionLimits(total=5, per_ip=2, overrides={"10.0.0.9": 3})
    assert limits.admit("10.0.0.1") and limits.admit("10.0.0.1")
    assert not limits.admit("10.0.0.1")  # per address
    assert all(limits.admit("10.0.0.9") for _ in range(3))  # its override
    assert not limits.admit("10.0.0.2")  # five open in all
    limits.release("10.0.0.1")
    assert limits.admit("10.0.0.2") and not limits.admit("10.0.0.3")


def test_refusals_are_logged_once_per_interval_with_their_count(caplog):
    now = [0.0]
    limits = ConnectionLimits(total=10, per_ip=1, overrides={}, clock=lambda: now[0])
    limits.admit("10.0.0.1")
    with caplog.at_level(logging.WARNING):
        for _ in range(50):
            assert not limits.admit("10.0.0.1")
        now[0] += LOG_INTERVAL
        assert not limits.admit("10.0.0.1")
    assert len(caplog.records) == 2
    assert "max.connections.per.ip=1" in caplog.records[0].getMessage()
    assert "(50 refused" in caplog.records[1].getMessage()


@pytest.mark.parametrize("text,parsed", [("", {}), ("10.0.0.1:5", {"10.0.0.1": 5}),
                                         ("a:1, ::1:0", {"a": 1, "::1": 0})])
def test_overrides_parse_as_kafka_writes_them(text, parsed):
    assert parse_overrides(text) == parsed


@pytest.mark.parametrize("text", ["a", "a:", ":3", "a:-1", "a:x"])
def test_bad_overrides_are_refused(text):
    with pytest.raises(ValueError):
        parse_overrides(text)
