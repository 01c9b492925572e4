"""Run the scenarios against Apache Kafka 4.4 and kgate, compare, classify, report.

``scripts/conformance`` starts one Kafka and one kgate (free ports, temporary directories;
another pair with SASL users and ACL authorizers for the secured scenarios, and a pair of
its own for a scenario that needs settings brokers read at start-up), runs every
scenario (or those named with ``--only``) against both, and writes
``conformance/REPORT.md`` and ``conformance/REPORT.html``. Its exit status is 1 when a
divergence is unexplained (not in ``conformance/known.py``).
"""
import argparse
import secrets
import sys
import tempfile
from fnmatch import fnmatch
from pathlib import Path

from .brokers import Pair
from .compare import Divergence, Normalizer, compare
from .known import classify
from .report import write_report
from .scenarios import SCENARIOS, Scenario
from .session import Exchange, Session

HERE = Path(__file__).resolve().parent


def record(scenario: Scenario, bootstrap: str, token: str) -> list[dict]:
    """The scenario's normalized exchanges with one broker; a scenario that could not go on
    (an answer it needed was missing) ends with an exchange saying why. Both brokers see the
    same names (``token``), so what derives from a name (a coordinator partition) compares."""
    session = Session(bootstrap, token)
    try:
        scenario.run(session)
    except Exception as exc:  # noqa: BLE001 - the failure is the record
        # The message goes in the label, which reports show, so a stop says which wait ran out
        # or which call failed; both brokers stopping alike still compare (type and message).
        why = f"{type(exc).__name__}: {exc}".strip().rstrip(":")
        session.exchanges.append(Exchange(f"scenario stopped ({why[:300]})", -1, -1, {}, {"error": type(exc).__name__}))
    finally:
        session.close()
    normalizer = Normalizer(session.token)
    return [normalizer.exchange(e) for e in session.exchanges]


def run_scenario(scenario: Scenario, kafka: str, kgate: str) -> list[Divergence]:
    token = secrets.token_hex(4)
    return compare(scenario.name, record(scenario, kafka, token), record(scenario, kgate, token))


def select(patterns: list[str], ci_only: bool = False) -> list[Scenario]:
    chosen = [s for s in SCENARIOS if not ci_only or s.ci]
    if patterns:
        chosen = [s for s in chosen if any(fnmatch(s.name, p) or fnmatch(s.family, p) for p in patterns)]
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/conformance", description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", default=[], metavar="PATTERN",
                        help="scenario or family names (glob); default: all")
    parser.add_argument("--ci", action="store_true", help="only the default test suite's subset")
    parser.add_argument("--report", default=str(HERE / "REPORT"), help="report path, without .md/.html")
    args = parser.parse_args(argv)
    scenarios = select(args.only, args.ci)
    results = {}
    with tempfile.TemporaryDirectory(prefix="conformance-") as scratch:
        for kind in dict.fromkeys(s.pair for s in scenarios):  # one pair of brokers at a time
            pair = Pair(scratch, *kind).start()
            try:
                results.update({s.name: classify(run_scenario(s, *pair.addresses))
                                for s in scenarios if s.pair == kind})
            finally:
                pair.stop()
    unexplained = write_report(args.report, scenarios, results)
    print(f"{len(scenarios)} scenarios, {sum(map(len, results.values()))} divergences, {unexplained} unexplained; "
          f"report: {args.report}.md")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
