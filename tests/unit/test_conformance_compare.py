"""The conformance suite's comparison: what normalization hides and what it must not."""
import time

from conformance.compare import Normalizer, compare, diff
from conformance.known import classify
from conformance.session import Exchange


def answers(token, **response):
    return [Normalizer(token).exchange(Exchange("ask", 3, 12, {}, response))]


def test_broker_chosen_values_and_unordered_lists_do_not_diverge():
    kafka = answers("aaaa", cluster_id="k1", throttle_time_ms=0, topics=[
        {"name": "t-aaaa", "error_code": 0}, {"name": "u-aaaa", "error_code": 0}], member_id="kafka-1")
    kgate = answers("bbbb", cluster_id="g1", throttle_time_ms=5, topics=[
        {"name": "u-bbbb", "error_code": 0}, {"name": "t-bbbb", "error_code": 0}], member_id="kgate-x")
    assert compare("s", kafka, kgate) == []


def test_a_different_error_code_or_a_missing_element_diverges():
    kafka = answers("t", topics=[{"name": "a", "error_code": 0}, {"name": "b", "error_code": 0}])
    kgate = answers("t", topics=[{"name": "a", "error_code": 3}])
    assert {d.path for d in compare("s", kafka, kgate)} == {"topics.name=a.error_code", "topics.name=b"}


def test_a_reused_member_id_must_be_the_same_one():
    assert diff(Normalizer("t").any([{"member_id": "x"}, {"member_id": "y"}]),
                Normalizer("t").any([{"member_id": "x"}, {"member_id": "x"}]))


def test_an_unknown_divergence_is_unexplained():
    divergences = compare("no_such_scenario", answers("t", error_code=0), answers("t", error_code=1))
    assert [known for _, known in classify(divergences)] == [None]


def test_clock_readings_compare_by_identity_and_producer_times_by_value():
    now = int(time.time() * 1000)

    def normalized(produced, records):
        return Normalizer("t").any([{"log_append_time_ms": produced},
                                    {"records": [{"timestamp": r} for r in records]}])
    assert not diff(normalized(now, [now, now]), normalized(now + 7, [now + 7, now + 7]))
    assert diff(normalized(now, [now, now]), normalized(now, [now, now + 1]))
    assert diff(normalized(now, [1_700_000_000_000]), normalized(now, [1_700_000_000_001]))
