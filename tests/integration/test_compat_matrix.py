"""The compatibility matrix's CI subset: one row per client family and generation, run by
the matrix's own runner against live brokers, held to the last full run.

A cell that passed in the last full run (compat-matrix/results/baseline.json) and fails
now fails the build with the cell's failure message. Cells that failed before may
still fail (they are listed in MATRIX.md for the broker to fix); whatever passes must
have been seen by the broker, and whatever fails must say why.
"""
import json
import os

import pytest

from tests.support.compat_matrix import MATRIX, render, rows, run

# One worker runs the module, so its module-scoped servers start once (scripts/test: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("compat_matrix")

BASELINE = os.path.join(MATRIX, "results", "baseline.json")
SUBSET = rows.subset()


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("compat-matrix"))


@pytest.fixture(scope="module")
def results(out) -> dict:
    """Every subset row, two at a time, each against a broker of its own."""
    return {result["row"]["id"]: result for result in run.run(SUBSET, out, jobs=2)}


@pytest.fixture(scope="module")
def baseline() -> set:
    with open(BASELINE) as fh:
        return set(json.load(fh)["passing"])


def test_the_subset_has_a_row_of_every_client_family():
    assert {row.family for row in SUBSET} >= {"kafka-python", "aiokafka", "confluent-kafka", "kcat", "sarama",
                                                "kafkajs", "kafka-clients"}


@pytest.mark.parametrize("row", SUBSET, ids=[row.id for row in SUBSET])
def test_no_cell_that_passed_in_the_last_full_run_fails(results, baseline, row):
    cells = results[row.id]["cells"]
    regressions = {column: cell["message"] for column, cell in cells.items()
                   if f"{row.id}/{column}" in baseline and cell["status"] != "pass"}
    assert not regressions, f"{row.id}: cells that passed in the last full run fail now: {regressions}"


@pytest.mark.parametrize("row", SUBSET, ids=[row.id for row in SUBSET])
def test_every_cell_ran_or_says_why_not(results, row):
    for column, cell in results[row.id]["cells"].items():
        reason = row.reason_not_applicable(column)
        assert (cell["status"] == "n/a") == (reason is not None), f"{column}: {cell}"
        if cell["status"] == "pass":
            assert cell["requests"], f"{column} passed, but the broker saw no request during it"
        else:
            assert cell["message"], f"{column} is {cell['status']} without saying why"


def test_the_report_shows_every_row_what_the_broker_saw_and_every_failure(results, out):
    summary, rendered_rows = render.load(out)
    text = render.markdown(summary, rendered_rows)
    page = render.page(summary, rendered_rows)
    for result in results.values():
        assert render.row_label(result) in text and render.row_label(result) in page
        for cell in result["cells"].values():
            if cell["status"] == "fail":
                assert cell["message"] in text
            if cell["status"] == "pass":
                assert render.versions(cell["requests"]) in page
