"""Run the compatibility matrix: real clients of every generation against a live kgate.

    .venv/bin/python compat-matrix/run.py [--full | --subset] [--rows PATTERN] [--jobs N]
                                          [--out DIR] [--entry-format NAME] [--cluster [--storage s3]]
                                          [--no-install]

Installs the clients (scripts/setup-compat, idempotent), then runs each row against a
broker of its own (single node, a SASL listener, its metrics endpoint; fresh data
directory) or, with ``--cluster``, a 3-broker cluster of its own over a ZooKeeper
ensemble started for the run (see deployments.py; with ``--storage s3`` its brokers keep their logs
in a SeaweedFS started for the run, each with a data directory of its own and the S3 WAL, no
shared filesystem), one cell after another, so what the broker
reports during a cell is that cell's doing. Rows run ``--jobs`` at a time. Writes ``<out>/<row>.json`` per row and
``<out>/run.json`` (commit, date, counts); a full run into the default folder also
writes ``baseline.json`` (the passing cells, which the CI subset holds the build to)
and renders MATRIX.md and MATRIX.html. Progress goes to stderr: a bar on a terminal,
one line per finished row otherwise.
"""
import argparse
import datetime
import fnmatch
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import cells  # noqa: E402
import clients  # noqa: E402
import deployments  # noqa: E402
import render  # noqa: E402
import rows as catalogue  # noqa: E402
from tests.support.seaweedfs import SeaweedFS  # noqa: E402
from tests.support.zookeeper import Ensemble  # noqa: E402

RESULTS = os.path.join(HERE, "results")
CLUSTER_RESULTS = os.path.join(RESULTS, "cluster")
S3_CLUSTER_RESULTS = os.path.join(RESULTS, "cluster-s3")
S3_BUCKET = "kgate-compat"
BASELINE = os.path.join(RESULTS, "baseline.json")


def select(subset: bool, pattern: str | None) -> list:
    chosen = catalogue.subset() if subset else list(catalogue.ROWS)
    if pattern:
        chosen = [row for row in chosen if fnmatch.fnmatch(row.id, pattern) or pattern in row.id]
    return chosen


def install() -> None:
    subprocess.run([os.path.join(clients.ROOT, "scripts", "setup-compat")], check=True)


def run_row(row, progress, deployment) -> dict:
    """Every cell of ``row`` against a deployment of its own; one that will not start fails them all."""
    results = {}
    try:
        target = deployment.start()
        for column in catalogue.COLUMNS:
            results[column] = cells.run_cell(row, column, target)
            progress.cell_done(row)
            if not deployment.alive():
                results[column].status, results[column].message = "fail", (
                    results[column].message + " (a broker exited: " + deployment.dead_log() + ")").strip()
                break
    except Exception as exc:
        message = f"broker: {type(exc).__name__}: {exc}"
        for column in catalogue.COLUMNS:
            results.setdefault(column, cells.CellResult("fail", message))
    finally:
        target = None  # its admin client goes before the brokers, so it never logs a refused reconnect
        deployment.stop()
    for column in catalogue.COLUMNS:  # cells after a broker crash never ran: they fail, saying so
        if column not in results:
            reason = row.reason_not_applicable(column)
            results[column] = cells.CellResult("n/a", reason) if reason else \
                cells.CellResult("fail", "not run: a broker had exited")
            progress.cell_done(row)
    return {"row": {"id": row.id, "family": row.family, "release": row.release, "pin": row.pin,
                    "generation": row.generation, "magic": row.magic, "subset": row.subset},
            "cells": {column: vars(result) for column, result in results.items()}}


class Progress:
    """Cells done and remaining on stderr: a bar on a terminal, a line per finished row otherwise."""

    def __init__(self, total_cells: int, stream=sys.stderr):
        self.total, self.done, self.stream = total_cells, 0, stream
        self.tty = stream.isatty()
        self.lock = threading.Lock()
        self.started = time.monotonic()

    def cell_done(self, row) -> None:
        with self.lock:
            self.done += 1
            if self.tty:
                filled = int(30 * self.done / self.total)
                self.stream.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total} cells, "
                                  f"{self.total - self.done} to go  {row.id[:40]:<40}")
                self.stream.flush()

    def row_done(self, result: dict) -> None:
        with self.lock:
            statuses = [cell["status"] for cell in result["cells"].values()]
            line = (f"{result['row']['id']}: {statuses.count('pass')} pass, {statuses.count('fail')} fail, "
                    f"{statuses.count('n/a')} n/a ({self.done}/{self.total} cells, "
                    f"{time.monotonic() - self.started:.0f} s)")
            self.stream.write(("\r" + " " * 100 + "\r" if self.tty else "") + line + "\n")
            self.stream.flush()


def file_name(row_id: str) -> str:
    return row_id.replace("@", "_at_").replace("/", "_") + ".json"


def commit_of_tree() -> str:
    result = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE)
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "gateway", "protocol", "storage", "metadata"],
                           capture_output=True, text=True, cwd=HERE).stdout.strip()
    return (result.stdout.strip() or "unknown") + ("+changes" if dirty else "")


def run(selected: list, out: str, jobs: int, entry_format: str = cells.STORED_AS_PRODUCED,
        zookeeper: str | None = None, s3_endpoint: str | None = None) -> list[dict]:
    """Run ``selected`` rows, each against a broker of its own or, given a ZooKeeper
    ensemble address, a 3-broker cluster of its own (over that S3 endpoint's bucket, given one)."""
    os.makedirs(out, exist_ok=True)
    progress = Progress(len(selected) * len(catalogue.COLUMNS))
    started = time.monotonic()
    results = []

    def one(row):
        with tempfile.TemporaryDirectory(prefix="kgate-compat-") as scratch:
            storage = f"s3://{S3_BUCKET}/{os.path.basename(scratch)}?endpoint={s3_endpoint}&region=us-east-1" \
                if s3_endpoint else None
            deployment = deployments.Cluster(scratch, entry_format, zookeeper, storage) if zookeeper else \
                deployments.SingleNode(scratch, entry_format)
            result = run_row(row, progress, deployment)
        with open(os.path.join(out, file_name(row.id)), "w") as fh:
            json.dump(result, fh, indent=1)
        progress.row_done(result)
        return result

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(one, selected))
    statuses = [cell["status"] for result in results for cell in result["cells"].values()]
    summary = {"commit": commit_of_tree(), "date": datetime.datetime.now(datetime.UTC).strftime(
        "%Y-%m-%d %H:%M UTC"), "seconds": round(time.monotonic() - started), "rows": [r["row"]["id"] for r in results],
        "entry_format": entry_format, "deployment": _deployment(zookeeper, s3_endpoint),
        "pass": statuses.count("pass"), "fail": statuses.count("fail"), "n/a": statuses.count("n/a")}
    with open(os.path.join(out, "run.json"), "w") as fh:
        json.dump(summary, fh, indent=1)
    return results


def _deployment(zookeeper: str | None, s3_endpoint: str | None) -> str:
    if not zookeeper:
        return "single node"
    return "3-broker ZooKeeper cluster" + (" on S3 (SeaweedFS, S3 WAL)" if s3_endpoint else "")


def passing(results: list[dict]) -> list[str]:
    return sorted(f"{r['row']['id']}/{column}" for r in results for column, cell in r["cells"].items()
                  if cell["status"] == "pass")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("--full", action="store_true", help="every row (the default)")
    scope.add_argument("--subset", action="store_true", help="one row per client family and generation (CI)")
    parser.add_argument("--rows", help="only rows whose id matches this shell pattern or contains it")
    parser.add_argument("--jobs", type=int, default=2, help="rows run at once, each with its own broker")
    parser.add_argument("--out", default=RESULTS, help="where the result files go")
    parser.add_argument("--entry-format", default=cells.STORED_AS_PRODUCED,
                        help="the brokers' entry.format (kafka, mixed_kafka, pulsar)")
    parser.add_argument("--cluster", action="store_true",
                        help="run each row against a 3-broker ZooKeeper cluster instead "
                             f"(results into {CLUSTER_RESULTS})")
    parser.add_argument("--storage", choices=("file", "s3"), default="file",
                        help="with --cluster: the brokers' ledger store, a shared directory (file) or a "
                             f"SeaweedFS started for the run (s3; results into {S3_CLUSTER_RESULTS})")
    parser.add_argument("--no-install", action="store_true", help="skip scripts/setup-compat")
    args = parser.parse_args(argv)
    if args.storage == "s3" and not args.cluster:
        parser.error("--storage s3 runs with --cluster")
    selected = select(args.subset, args.rows)
    if not selected:
        print(f"compat-matrix: no row matches {args.rows!r}", file=sys.stderr)
        return 2
    if not args.no_install:
        install()
    if args.cluster:
        return run_on_cluster(selected, args)
    complete = not args.subset and not args.rows and os.path.abspath(args.out) == RESULTS and \
        args.entry_format == cells.STORED_AS_PRODUCED
    if complete:  # a full run replaces every row's file, so rows dropped from the catalogue disappear
        for name in os.listdir(RESULTS):
            if name.endswith(".json"):
                os.remove(os.path.join(RESULTS, name))
    results = run(selected, args.out, args.jobs, args.entry_format)
    if complete:
        with open(BASELINE, "w") as fh:
            json.dump({"passing": passing(results)}, fh, indent=1)
        render.write(RESULTS, os.path.join(HERE, "MATRIX.md"), os.path.join(HERE, "MATRIX.html"))
    return report(args.out)


def run_on_cluster(selected: list, args) -> int:
    """The rows against 3-broker clusters over one ZooKeeper ensemble started for the run;
    its results and report go to their own folder, never into the single-node baseline."""
    default = S3_CLUSTER_RESULTS if args.storage == "s3" else CLUSTER_RESULTS
    out = default if os.path.abspath(args.out) == RESULTS else args.out
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kgate-compat-zk-") as scratch:
        ensemble = Ensemble(scratch).start()
        try:
            if args.storage == "s3":
                with SeaweedFS.started(os.path.join(scratch, "seaweedfs")) as seaweedfs:
                    seaweedfs.make_bucket(S3_BUCKET)
                    # The brokers read credentials from the standard AWS environment (SeaweedFS
                    # without an -s3.config takes any).
                    os.environ.setdefault("AWS_ACCESS_KEY_ID", "kgate-compat")
                    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "kgate-compat")
                    run(selected, out, args.jobs, args.entry_format, ensemble.address, seaweedfs.endpoint)
            else:
                run(selected, out, args.jobs, args.entry_format, zookeeper=ensemble.address)
        finally:
            ensemble.stop()
    render.write(out, os.path.join(out, "MATRIX.md"), os.path.join(out, "MATRIX.html"))
    return report(out)


def report(out: str) -> int:
    with open(os.path.join(out, "run.json")) as fh:
        summary = json.load(fh)
    print(f"{summary['pass']} passed, {summary['fail']} failed, {summary['n/a']} n/a in {summary['seconds']} s",
          file=sys.stderr)
    return 1 if summary["fail"] else 0


if __name__ == "__main__":
    os.chdir(clients.ROOT)
    sys.exit(main())
