"""Which version of an API a link sends its peer: the highest both brokers serve (Kafka's
NodeApiVersions), with kgate's own APIs at version 0 for a peer that does not list them."""
from kafka.protocol.api_key import ApiKey

from kgate.gateway.peer_links import usable_version
from kgate.protocol.api_versions import KGATE_PRODUCE_REFERENCE, KGATE_READ_END

UPGRADED = {ApiKey.Produce: (0, 11), KGATE_READ_END: (0, 1), KGATE_PRODUCE_REFERENCE: (0, 1)}
NOT_UPGRADED = {ApiKey.Produce: (0, 11), KGATE_READ_END: (0, 0), KGATE_PRODUCE_REFERENCE: (0, 0)}
# A broker from before links asked: its ApiVersions lists Kafka's APIs only.
BEFORE_ASKING = {ApiKey.Produce: (0, 11)}


def test_a_peer_that_serves_version_1_is_sent_version_1():
    assert usable_version(UPGRADED, KGATE_READ_END, 1) == 1
    assert usable_version(UPGRADED, KGATE_PRODUCE_REFERENCE, 1) == 1


def test_never_a_version_higher_than_this_broker_sends():
    assert usable_version(UPGRADED, KGATE_READ_END, 0) == 0
    assert usable_version(UPGRADED, ApiKey.Produce, 9) == 9


def test_a_peer_not_upgraded_is_sent_version_0():
    assert usable_version(NOT_UPGRADED, KGATE_READ_END, 1) == 0
    assert usable_version(NOT_UPGRADED, KGATE_PRODUCE_REFERENCE, 1) == 0


def test_a_peer_that_does_not_list_kgates_own_apis_serves_their_version_0():
    assert usable_version(BEFORE_ASKING, KGATE_READ_END, 1) == 0
    assert usable_version({}, KGATE_PRODUCE_REFERENCE, 1) == 0


def test_no_version_when_the_ranges_do_not_meet_or_the_peer_lacks_the_api():
    assert usable_version({KGATE_READ_END: (2, 3)}, KGATE_READ_END, 1) is None
    assert usable_version(BEFORE_ASKING, ApiKey.Fetch, 16) is None
