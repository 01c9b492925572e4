"""Kafka 4.4's command-line tools against kgate (compat-matrix/kafka_tools.py, its CI subset):
each command's exit status and output must match Kafka's after normalization or be
explained, and the verifiable producer and consumer must pass their delivery checks."""
import re
import subprocess

import pytest

from conformance.kafka_broker import tool_command
from conformance.tool_host import ToolHost
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


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    """One tool host for the module's comparisons, as its callers keep one."""
    directory = tmp_path_factory.mktemp("tool-host")
    with ToolHost(directory, directory / "tool-host.log") as started:
        yield started


# The host's own frames at the bottom of a stack trace a tool prints (below the tool's main), and
# so the count of frames a "Caused by" shares with it: the one way a hosted tool's output differs.
HOST_FRAMES = re.compile(r"(?m)^\tat (java\.base/jdk\.internal\.reflect\.|java\.base/java\.lang\.reflect\.Method"
                         r"\.invoke|ToolHost\.|java\.base/java\.lang\.Thread\.run).*\n|(?<=\.\.\. )\d+(?= more)")


@pytest.mark.parametrize("command", [("kafka-topics", "--version"), ("kafka-topics", "--bogus"),
                                     ("kafka-configs", "--bootstrap-server", "127.0.0.1:1", "--describe",
                                      "--entity-type", "topics", "--entity-name", "t", "--command-config",
                                      "missing.properties")], ids=lambda command: " ".join(command[:2]))
def test_a_tool_answers_in_the_tool_host_as_in_a_jvm_of_its_own(command, host):
    """The host's answer (conformance/tool_host.py) is the tool's own: exit status, stdout then
    stderr, but for the host's frames under a stack trace. A version printed (0), an unknown
    option (1, usage and a stack trace on stderr), a file that is not there (1, Kafka's error)."""
    status, output = host.run(*command)
    alone = subprocess.run(tool_command(*command), capture_output=True, text=True, timeout=120, cwd=host.cwd)
    assert status == alone.returncode
    assert HOST_FRAMES.sub("", output) == HOST_FRAMES.sub("", alone.stdout + alone.stderr)
