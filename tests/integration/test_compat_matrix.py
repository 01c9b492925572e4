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

from tests.support.compat_matrix import MATRIX, rows, run

BASELINE = os.path.join(MATRIX, "results", "baseline.json")
SUBSET = rows.subset()


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    """Every subset row, two at a time, each against a broker of its own."""
    out = tmp_path_factory.mktemp("compat-matrix")
    return {result["row"]["id"]: result for result in run.run(SUBSET, str(out), jobs=2)}


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
