"""Apache Kafka 4.4's command-line tools against kgate, beside the same commands against Kafka.

    .venv/bin/python compat-matrix/kafka_tools.py [--ci] [--out DIR]

One Kafka and one kgate are started (StandardAuthorizer / kgate's ACL authorizer on, the
PLAINTEXT listener's ANONYMOUS principal a super user, as an operator's admin host would
be), and the same sequence of tool commands runs against each: create, describe, alter and
delete topics; topic, broker and user (SCRAM) configs; a verifiable producer and consumer
with their own delivery checks; consumer groups (describe, reset offsets, delete); offsets,
record deletion, log dirs, a partition reassignment (to the one broker each side has, executed
and verified), features, ACLs, transactions (a transaction left open by a raw
producer, then described, listed and aborted) and share groups (a group that read and left,
then listed, described, reset, its offsets deleted, and deleted). Each command's exit status and output, after
normalization (addresses, ids, times, paths; stack frames), are compared; a difference is
explained in ``KNOWN`` or fails. Writes ``results/kafka-tools.json`` and ``TOOLS.md``.
Each side's commands run in one JVM (``conformance/tool_host.py``), but for the verifiable
producer and consumer, which end through shutdown hooks and get a JVM each.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [p for p in (ROOT,) if p not in sys.path]

from conformance import scenarios as S  # noqa: E402
from conformance.kafka_broker import KafkaBroker, tool_command  # noqa: E402
from conformance.session import Session  # noqa: E402
from conformance.share_member import ACCEPT, RELEASE, ShareMember  # noqa: E402
from conformance.tool_host import HOSTED, ToolHost  # noqa: E402
from tests.support.broker_process import BrokerProcess  # noqa: E402

TIMEOUT = 120  # seconds one tool may run; a bound, not a speed expectation
MESSAGES = 100
DELETE_BEFORE = 20
KGATE_AUTHORIZER = {"authorizer.class.name": "acl", "super.users": "User:ANONYMOUS"}
BUG, DELIBERATE, INTERNAL = "kgate bug", "deliberate", "internal to Kafka"


@dataclass(frozen=True)
class Case:
    name: str
    tool: str
    args: tuple[str, ...]
    summarize: Callable[[str], str] | None = None  # the delivery check of a verifiable client
    ci: bool = False
    clock_columns: tuple[int, ...] = ()  # columns of a tab-separated table that hold durations


@dataclass
class Outcome:
    case: str
    command: str
    returncode: int
    output: str


@dataclass
class Result:
    case: str
    command: str
    status: str  # "same", "explained", "fail"
    kafka: Outcome
    kgate: Outcome
    kind: str = ""
    reason: str = ""
    checks: dict = field(default_factory=dict)


# -- delivery checks of the verifiable clients ------------------------------------------------

def _events(output: str) -> list[dict]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def producer_check(output: str) -> str:
    """Every message acknowledged once, at offsets 0..n-1 of its partition."""
    events = _events(output)
    acked = [e for e in events if e["name"] == "producer_send_success"]
    errors = [e for e in events if e["name"] == "producer_send_error"]
    offsets: dict[int, list[int]] = {}
    for event in acked:
        offsets.setdefault(event["partition"], []).append(event["offset"])
    contiguous = all(sorted(o) == list(range(len(o))) for o in offsets.values())
    values = sorted(int(e["value"]) for e in acked)
    return (f"acked {len(acked)} of {MESSAGES}, each once: {values == list(range(MESSAGES))}; "
            f"errors {len(errors)}; offsets contiguous from 0: {contiguous}")


def consumer_check(output: str) -> str:
    """Every message consumed, and the offsets committed after them accepted."""
    events = _events(output)
    consumed = sum(e["count"] for e in events if e["name"] == "records_consumed")
    commits = [e for e in events if e["name"] == "offsets_committed"]
    committed = {(o["topic"], o["partition"]): o["offset"] for e in commits if e["success"] for o in e["offsets"]}
    return (f"consumed {consumed}; commits {len(commits)}, all accepted: {all(e['success'] for e in commits)}; "
            f"committed up to {sorted(committed.values())}")


# -- the commands, in order ----------------------------------------------------------------------

T, P, G, X = "{topic}", "{produced}", "{group}", "{txn}"
ST, SG, BG = "{share_topic}", "{share_group}", "{busy_group}"
CASES = [
    Case("topics create", "kafka-topics", ("--create", "--topic", T, "--partitions", "3",
                                           "--replication-factor", "1"), ci=True),
    Case("topics create (1 partition)", "kafka-topics", ("--create", "--topic", P, "--partitions", "1"), ci=True),
    Case("topics create, exists", "kafka-topics", ("--create", "--topic", T, "--partitions", "1"), ci=True),
    Case("topics describe", "kafka-topics", ("--describe", "--topic", T), ci=True),
    Case("topics alter partitions", "kafka-topics", ("--alter", "--topic", T, "--partitions", "4")),
    Case("topics describe after alter", "kafka-topics", ("--describe", "--topic", T)),
    Case("topics list", "kafka-topics", ("--list", "--exclude-internal")),
    Case("configs topic alter", "kafka-configs", ("--entity-type", "topics", "--entity-name", T, "--alter",
                                                  "--add-config", "retention.ms=3600000,cleanup.policy=compact"),
         ci=True),
    Case("configs topic describe", "kafka-configs", ("--entity-type", "topics", "--entity-name", T, "--describe"),
         ci=True),
    Case("configs topic delete config", "kafka-configs", ("--entity-type", "topics", "--entity-name", T, "--alter",
                                                          "--delete-config", "cleanup.policy")),
    Case("configs topic bad value", "kafka-configs", ("--entity-type", "topics", "--entity-name", T, "--alter",
                                                      "--add-config", "retention.ms=soon")),
    Case("configs broker describe", "kafka-configs", ("--entity-type", "brokers", "--entity-name", "0",
                                                      "--describe")),
    Case("configs broker default describe", "kafka-configs", ("--entity-type", "brokers", "--entity-default",
                                                              "--describe")),
    Case("configs broker alter", "kafka-configs", ("--entity-type", "brokers", "--entity-default", "--alter",
                                                   "--add-config", "log.cleaner.threads=2")),
    Case("configs SCRAM user alter", "kafka-configs", ("--entity-type", "users", "--entity-name", "alice", "--alter",
                                                       "--add-config", "SCRAM-SHA-256=[password=alice-secret]")),
    Case("configs users describe", "kafka-configs", ("--entity-type", "users", "--describe")),
    Case("verifiable producer", "kafka-verifiable-producer", ("--topic", P, "--max-messages", str(MESSAGES),
                                                              "--acks", "-1"), producer_check, ci=True),
    Case("verifiable consumer", "kafka-verifiable-consumer", ("--topic", P, "--group-id", G, "--max-messages",
                                                              str(MESSAGES), "--reset-policy", "earliest"),
         consumer_check, ci=True),
    Case("consumer groups list", "kafka-consumer-groups", ("--list",)),
    Case("consumer groups describe", "kafka-consumer-groups", ("--describe", "--group", G), ci=True),
    Case("consumer groups describe state", "kafka-consumer-groups", ("--describe", "--group", G, "--state")),
    Case("consumer groups reset dry run", "kafka-consumer-groups", ("--reset-offsets", "--group", G, "--topic", P,
                                                                    "--to-offset", "10", "--dry-run")),
    Case("consumer groups reset", "kafka-consumer-groups", ("--reset-offsets", "--group", G, "--topic", P,
                                                            "--to-earliest", "--execute"), ci=True),
    Case("get offsets latest", "kafka-get-offsets", ("--topic", P), ci=True),
    Case("delete records", "kafka-delete-records", ("--offset-json-file", "{delete_json}")),
    Case("get offsets earliest", "kafka-get-offsets", ("--topic", P, "--time", "-2")),
    Case("log dirs", "kafka-log-dirs", ("--describe", "--topic-list", P)),
    Case("reassign partitions execute", "kafka-reassign-partitions", ("--reassignment-json-file", "{reassign_json}",
                                                                      "--execute"), ci=True),
    Case("reassign partitions verify", "kafka-reassign-partitions", ("--reassignment-json-file", "{reassign_json}",
                                                                     "--verify"), ci=True),
    Case("features describe", "kafka-features", ("describe",), ci=True),
    Case("acls add topic", "kafka-acls", ("--add", "--allow-principal", "User:alice", "--operation", "Read",
                                          "--topic", T), ci=True),
    Case("acls add prefixed group", "kafka-acls", ("--add", "--deny-principal", "User:bob", "--operation", "All",
                                                   "--group", "conf-", "--resource-pattern-type", "prefixed")),
    Case("acls list topic", "kafka-acls", ("--list", "--topic", T), ci=True),
    Case("acls remove", "kafka-acls", ("--remove", "--allow-principal", "User:alice", "--operation", "Read",
                                       "--topic", T, "--force")),
    Case("transactions list", "kafka-transactions", ("list",)),
    Case("transactions describe", "kafka-transactions", ("describe", "--transactional-id", X), clock_columns=(7,)),
    Case("transactions describe producers", "kafka-transactions", ("describe-producers", "--topic", P,
                                                                   "--partition", "0")),
    Case("transactions find hanging", "kafka-transactions", ("find-hanging", "--broker-id", "0")),
    Case("transactions abort", "kafka-transactions", ("abort", "--topic", P, "--partition", "0", "--start-offset",
                                                      str(MESSAGES))),
    Case("transactions describe unknown", "kafka-transactions", ("describe", "--transactional-id", "no-such-txn")),
    # Share groups (KIP-932): a group that read the share topic and left (share_group_read_and_left),
    # then one with a member still in it (share_group_with_a_member).
    Case("share groups list", "kafka-share-groups", ("--list",), ci=True),
    Case("share groups list state", "kafka-share-groups", ("--list", "--state")),
    Case("share groups describe", "kafka-share-groups", ("--describe", "--group", SG), ci=True),
    Case("share groups describe verbose", "kafka-share-groups", ("--describe", "--group", SG, "--verbose")),
    Case("share groups describe members", "kafka-share-groups", ("--describe", "--group", SG, "--members"),
         ci=True),
    Case("share groups describe state", "kafka-share-groups", ("--describe", "--group", SG, "--state"), ci=True),
    Case("share groups reset dry run", "kafka-share-groups", ("--reset-offsets", "--group", SG, "--topic", ST,
                                                              "--to-offset", "2", "--dry-run")),
    Case("share groups reset to earliest", "kafka-share-groups", ("--reset-offsets", "--group", SG, "--topic", ST,
                                                                  "--to-earliest", "--execute"), ci=True),
    Case("share groups describe after reset", "kafka-share-groups", ("--describe", "--group", SG), ci=True),
    Case("share groups reset to latest", "kafka-share-groups", ("--reset-offsets", "--group", SG, "--all-topics",
                                                                "--to-latest", "--execute")),
    Case("share groups reset to offset", "kafka-share-groups", ("--reset-offsets", "--group", SG, "--topic",
                                                                ST + ":0", "--to-offset", "7", "--execute")),
    Case("share groups describe after resets", "kafka-share-groups", ("--describe", "--group", SG)),
    Case("share groups delete offsets, unknown topic", "kafka-share-groups", ("--delete-offsets", "--group", SG,
                                                                              "--topic", "no-such-topic")),
    Case("share groups delete offsets", "kafka-share-groups", ("--delete-offsets", "--group", SG, "--topic", ST),
         ci=True),
    Case("share groups describe after delete offsets", "kafka-share-groups", ("--describe", "--group", SG),
         ci=True),
    Case("share groups delete offsets, member active", "kafka-share-groups", ("--delete-offsets", "--group", BG,
                                                                              "--topic", ST), ci=True),
    Case("share groups reset, member active", "kafka-share-groups", ("--reset-offsets", "--group", BG, "--topic",
                                                                     ST, "--to-earliest", "--execute")),
    Case("share groups delete", "kafka-share-groups", ("--delete", "--group", SG), ci=True),
    Case("share groups describe deleted", "kafka-share-groups", ("--describe", "--group", SG)),
    Case("consumer groups delete", "kafka-consumer-groups", ("--delete", "--group", G)),
    Case("topics delete", "kafka-topics", ("--delete", "--topic", T)),
]

_TIMES = [(re.compile(r'"timestamp":\d+'), '"timestamp":<t>'), (re.compile(r"Epoch: \d+"), "Epoch: <n>"),
          (re.compile(r"(TopicId: )\S+"), r"\1<id>"), (re.compile(r'"logDir":"[^"]*"'), '"logDir":"<dir>"'),
          (re.compile(r'"log_dirs":\["[^"]*"\]'), '"log_dirs":["<dir>"]'),
          # a non-empty partition's size: the producer's batching and each store's framing decide it
          (re.compile(r'"size":[1-9]\d*'), '"size":<bytes>'),
          (re.compile(r"\b\d{13}\b"), "<time>"), (re.compile(r"\b\d\d:\d\d:\d\d\.\d{3}\b"), "<clock>"),
          (re.compile(r"(?m)^\s+at .*\n"), ""),
          (re.compile(r"(?m)^\s*\.\.\. \d+ more\n"), "")]


def normalize(output: str, bootstrap: str, token: str, clock_columns: tuple[int, ...] = ()) -> str:
    output = output.replace(bootstrap, "<bootstrap>").replace(token, "*")
    if clock_columns:
        rows = [line.split("\t") for line in output.splitlines()]
        output = "\n".join("\t".join("<ms>" if i in clock_columns and n else cell for i, cell in enumerate(row))
                           for n, row in enumerate(rows))
    for pattern, replacement in _TIMES:
        output = pattern.sub(replacement, output)
    return "\n".join(line.rstrip() for line in output.splitlines() if not line.startswith("SLF4J")).strip()


# -- a transaction left open, for kafka-transactions to find ---------------------------------------

def open_transaction(bootstrap: str, token: str, names: dict) -> None:
    """A transactional producer that writes one batch at offset MESSAGES and never ends its
    transaction (as a crashed producer would), so describe, find-hanging and abort have one."""
    session = Session(bootstrap, token)
    try:
        S.await_coordinator(session, names["txn"], key_type=1)
        S.await_producer_ids(session)
        init = S.init_producer(session, "setup", names["txn"], record=False)
        S.add_partitions(session, "setup", names["txn"], init.producer_id, init.producer_epoch, names["produced"])
        S.produce(session, "setup", names["produced"], [b"open"], transactional_id=names["txn"],
                  producer_id=init.producer_id, producer_epoch=init.producer_epoch, base_sequence=0,
                  transactional=True)
    finally:
        session.close()


# -- share groups for kafka-share-groups ---------------------------------------------------------

SHARE_RECORDS, SHARE_ACCEPTED = 10, 4


def share_group_read_and_left(bootstrap: str, token: str, names: dict) -> None:
    """A share group that read both partitions of the share topic (SHARE_RECORDS records each): it
    accepted the first SHARE_ACCEPTED records of partition 0 and released the rest, accepted all of
    partition 1, and left. So the group is empty, its start offsets 4 and 10, its lags 6 and 0."""
    session = Session(bootstrap, token)
    try:
        topic = S.topic(session, "share-tools", partitions=2)
        assert topic == names["share_topic"]
        now = int(time.time() * 1000)  # Kafka's retention would delete records stamped long ago
        for partition in (0, 1):
            S.produce(session, "setup", topic, [b"%d" % i for i in range(SHARE_RECORDS)], partition=partition,
                      timestamps=[now] * SHARE_RECORDS)
        S.incremental_alter(session, "setup", S.GROUP, names["share_group"],
                            [("share.auto.offset.reset", S.SET, "earliest")], record=False)
        member = _share_member(session, names["share_group"], topic)
        member.acquire({0: SHARE_RECORDS, 1: SHARE_RECORDS})
        member.acknowledge_and_close({0: [ACCEPT] * SHARE_ACCEPTED + [RELEASE] * (SHARE_RECORDS - SHARE_ACCEPTED),
                                      1: [ACCEPT] * SHARE_RECORDS})
        member.leave()
    finally:
        session.close()


def share_group_with_a_member(bootstrap: str, token: str, names: dict) -> None:
    """A share group with a member that stays (until its session times out, after the cases that need it)."""
    session = Session(bootstrap, token)
    try:
        _share_member(session, names["busy_group"], names["share_topic"])
    finally:
        session.close()


def _share_member(session: Session, group: str, topic: str) -> ShareMember:
    S.await_coordinator(session, group)
    [described] = S.metadata(session, "setup", [topic]).topics
    member = ShareMember(session, group, topic, described.topic_id)
    member.join(partitions=2)
    return member


SETUP = {"transactions list": open_transaction, "share groups list": share_group_read_and_left,
         "share groups delete offsets, member active": share_group_with_a_member}


def run_all(bootstrap: str, token: str, workdir: str, cases: list[Case]) -> list[Outcome]:
    names = {"topic": f"conf-tools-{token}", "produced": f"conf-produced-{token}", "group": f"conf-group-{token}",
             "txn": f"conf-txn-{token}", "share_topic": f"conf-share-tools-{token}",
             "share_group": f"conf-share-group-{token}", "busy_group": f"conf-busy-group-{token}",
             "delete_json": "delete.json", "reassign_json": "reassign.json"}  # tools run in ``workdir``
    with open(os.path.join(workdir, names["delete_json"]), "w") as fh:
        json.dump({"version": 1, "partitions": [{"topic": names["produced"], "partition": 0,
                                                 "offset": DELETE_BEFORE}]}, fh)
    with open(os.path.join(workdir, names["reassign_json"]), "w") as fh:  # to broker 0, the one each side has
        json.dump({"version": 1, "partitions": [{"topic": names["topic"], "partition": p, "replicas": [0]}
                                                for p in range(2)]}, fh)
    outcomes = []
    with ToolHost(workdir, os.path.join(workdir, "tool-host.log")) as host:
        for case in cases:
            if case.name in SETUP:
                SETUP[case.name](bootstrap, token, names)
            args = [arg.format(**names) for arg in case.args]
            returncode, output = _run_tool(host, workdir, case.tool, "--bootstrap-server", bootstrap, *args)
            outcomes.append(_outcome(case, args, returncode, output, bootstrap, token))
    return outcomes


def _run_tool(host: ToolHost, workdir: str, tool: str, *args: str) -> tuple[int, str]:
    """In the host's JVM where the tool ends through Kafka's Exit, else in a JVM of its own."""
    if tool in HOSTED:
        returncode, output = host.run(tool, *args, timeout=TIMEOUT)
        return returncode, output if returncode != -1 else f"no exit within {TIMEOUT} s"
    try:
        done = subprocess.run(tool_command(tool, *args), capture_output=True, text=True, timeout=TIMEOUT, cwd=workdir)
        return done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired:
        return -1, f"no exit within {TIMEOUT} s"


def _outcome(case: Case, args: list[str], returncode: int, output: str, bootstrap: str, token: str) -> Outcome:
    if case.summarize and returncode == 0:
        output = case.summarize(output)
    return Outcome(case.name, " ".join([case.tool, *args]).replace(token, "*"), returncode,
                   normalize(output, bootstrap, token, case.clock_columns))


# -- what differs, and why ----------------------------------------------------------------------

_NO_SCRAM_API = ("kgate keeps SCRAM users with `kgate users` and does not serve AlterUserScramCredentials, "
                 "DescribeUserScramCredentials or DescribeClientQuotas, which kafka-configs uses for users")
_KRAFT_MIN_ISR = ("Kafka 4's storage format sets a cluster-wide dynamic min.insync.replicas=1 (KIP-966); "
                  "kgate has no replicas")
_SHARE_START = ("a share-partition's start offset: Kafka's share coordinator has it as the partition leader last "
                "wrote it, before the leader moved it past the records just acknowledged (those count as finished "
                "in its delivery-complete count instead); kgate's share state is the coordinator's own, so it "
                "gives the start offset as it is now. The lags agree")
KNOWN: dict[str, tuple[str, str]] = {
    "features describe": (DELIBERATE, "kgate has group.version 1, share.version 1 and transaction.version 0 "
                                      "(KIP-890's second part is not built); KRaft's features and streams groups "
                                      "are not kgate's (conformance/REPORT.md)"),
    "topics describe": (INTERNAL, _KRAFT_MIN_ISR + "; Kafka's Elr/LastKnownElr columns are empty, kgate's say N/A "
                                  "(eligible leader replicas are a KRaft replication feature)"),
    "topics describe after alter": (INTERNAL, "as topics describe"),
    "configs topic describe": (BUG, "synonyms: kgate lists the broker settings it has (log.retention.ms), "
                                    "Kafka the ones kgate has no counterpart for (log.cleanup.policy) "
                                    "(conformance/REPORT.md)"),
    "configs broker default describe": (INTERNAL, _KRAFT_MIN_ISR),
    "share groups describe": (DELIBERATE, _SHARE_START),
    "share groups describe verbose": (DELIBERATE, _SHARE_START),
    "configs SCRAM user alter": (BUG, _NO_SCRAM_API),
    "configs users describe": (BUG, _NO_SCRAM_API),
}


def compare(kafka: list[Outcome], kgate: list[Outcome]) -> list[Result]:
    results = []
    for a, b in zip(kafka, kgate):
        same = (a.returncode == 0) == (b.returncode == 0) and a.output == b.output
        kind, reason = KNOWN.get(a.case, ("", ""))
        status = "same" if same else "explained" if kind else "fail"
        results.append(Result(a.case, a.command, status, a, b, kind if not same else "", reason if not same else ""))
    return results


def run(cases: list[Case], scratch: str) -> list[Result]:
    """Both brokers started, the cases run against each at once (each in its own directory), compared."""
    token = os.urandom(4).hex()
    kafka = KafkaBroker(os.path.join(scratch, "kafka"), authorizer=True)
    kgate = BrokerProcess(os.path.join(scratch, "kgate"), KGATE_AUTHORIZER)
    workdirs = [os.path.join(scratch, f"{name}-tools") for name in ("kafka", "kgate")]
    for workdir in workdirs:
        os.makedirs(workdir)
    try:
        with ThreadPoolExecutor(2) as pool:
            for started in [pool.submit(kafka.start), pool.submit(kgate.start)]:
                started.result()
            runs = [pool.submit(run_all, broker.bootstrap, token, workdir, cases)
                    for broker, workdir in zip((kafka, kgate), workdirs)]
            kafka_outcomes, kgate_outcomes = (r.result() for r in runs)
    finally:
        kgate.stop()
        kafka.stop()
    return compare(kafka_outcomes, kgate_outcomes)


def render(results: list[Result]) -> str:
    counts = {s: sum(r.status == s for r in results) for s in ("same", "explained", "fail")}
    lines = ["# Kafka 4.4's command-line tools against kgate", "",
             "Written by `compat-matrix/kafka_tools.py`: each command run against Apache Kafka 4.4 and kgate, "
             "exit status and output compared after normalization.", "",
             f"{len(results)} commands: {counts['same']} same output, {counts['explained']} explained "
             f"differences, {counts['fail']} unexplained.", "",
             "| command | result | class | reason |", "|---|---|---|---|"]
    for r in results:
        lines.append(f"| `{r.command}` | {r.status} | {r.kind} | {r.reason} |")
    lines += ["", "## Differences", ""]
    for r in results:
        if r.status != "same":
            lines += [f"### {r.case}", "", f"Kafka (exit {r.kafka.returncode}):", "", "```", r.kafka.output[:3000],
                      "```", "", f"kgate (exit {r.kgate.returncode}):", "", "```", r.kgate.output[:3000], "```", ""]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ci", action="store_true", help="only the commands the test suite runs")
    parser.add_argument("--out", default=HERE, help="where TOOLS.md and results/kafka-tools.json go")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kafka-tools-") as scratch:
        results = run([c for c in CASES if c.ci or not args.ci], scratch)
    os.makedirs(os.path.join(args.out, "results"), exist_ok=True)
    with open(os.path.join(args.out, "results", "kafka-tools.json"), "w") as fh:
        json.dump([asdict(r) for r in results], fh, indent=1)
    with open(os.path.join(args.out, "TOOLS.md"), "w") as fh:
        fh.write(render(results))
    failed = [r.case for r in results if r.status == "fail"]
    print(f"{len(results)} commands, {len(failed)} unexplained differences" + (f": {failed}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
