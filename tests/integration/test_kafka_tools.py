"""Kafka 4.4's command-line tools against kgate (compat-matrix/kafka_tools.py, its CI subset):
each command's exit status and output must match Kafka's after normalization or be
explained, and the verifiable producer and consumer must pass their delivery checks."""
import pytest

from tests.support.compat_matrix import MATRIX  # noqa: F401 - puts compat-matrix/ on the import path

import kafka_tools  # noqa: E402  (isort: skip)

CI = [case for case in kafka_tools.CASES if case.ci]
# One worker runs the module, so its Kafka broker and kgate start once (scripts/test: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("kafka_tools")


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    return {r.case: r for r in kafka_tools.run(CI, str(tmp_path_factory.mktemp("kafka-tools")))}


def test_every_command_answers_as_kafka_does_or_the_difference_is_explained(results):
    unexplained = {name: (r.kafka, r.kgate) for name, r in results.items() if r.status == "fail"}
    assert not unexplained, unexplained


def test_the_verifiable_clients_deliver_every_message_once_through_kgate(results):
    produced, consumed = results["verifiable producer"].kgate, results["verifiable consumer"].kgate
    assert produced.returncode == 0 and consumed.returncode == 0
    messages = kafka_tools.MESSAGES
    assert produced.output == (f"acked {messages} of {messages}, each once: True; errors 0; "
                               "offsets contiguous from 0: True")
    assert consumed.output.startswith(f"consumed {messages}; ") and "all accepted: True" in consumed.output
    assert consumed.output.endswith(f"committed up to [{messages}]")


def test_kafka_features_describe_shows_kgates_group_version(results):
    assert "Feature: group.version" in results["features describe"].kgate.output


def test_kafka_share_groups_resets_and_deletes_a_share_groups_offsets_on_kgate(results):
    """The share group read 10 records of each partition and left; reset to earliest, both
    share-partitions start at 0 again with all 10 records to read; deleted, nothing is left."""
    reset = results["share groups describe after reset"].kgate
    assert reset.returncode == 0
    rows = [line.split()[2:] for line in reset.output.splitlines() if line.startswith("conf-share-group-")]
    assert rows == [["0", "0", "10"], ["1", "0", "10"]], reset.output
    assert results["share groups delete offsets"].kgate.output.splitlines()[-1].endswith("Successful")
    assert "has no offset information" in results["share groups describe after delete offsets"].kgate.output
    assert "The group is not empty." in results["share groups delete offsets, member active"].kgate.output
