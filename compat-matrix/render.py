"""Render the matrix from results/*.json: MATRIX.md for the repository, MATRIX.html to browse.

The Markdown table has one row per client row and a mark per column (pass, FAIL,
n/a); failures are listed below it with their messages, and each row states the
request versions the broker answered and the stored message format. The HTML page is
self-contained: colour-coded cells showing the observed versions and format, the
failure (or the reason a column does not apply) on hover.

    .venv/bin/python compat-matrix/render.py [RESULTS_DIR]
"""
import html
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from rows import COLUMNS  # noqa: E402

MARKS = {"pass": "pass", "fail": "**FAIL**", "n/a": "n/a", "known": "fail (client)"}
# The APIs that say most about a generation, in the order shown.
KEY_APIS = ["ApiVersions", "Metadata", "Produce", "Fetch", "ListOffsets", "FindCoordinator", "JoinGroup",
            "SyncGroup", "OffsetCommit", "OffsetFetch", "SaslHandshake", "SaslAuthenticate", "InitProducerId",
            "CreateTopics", "DeleteTopics", "EndTxn", "ConsumerGroupHeartbeat"]


def load(results_dir: str) -> tuple[dict, list[dict]]:
    with open(os.path.join(results_dir, "run.json")) as fh:
        summary = json.load(fh)
    rows = []
    for row_id in summary["rows"]:
        name = row_id.replace("@", "_at_").replace("/", "_") + ".json"
        with open(os.path.join(results_dir, name)) as fh:
            rows.append(json.load(fh))
    return summary, rows


def versions(requests: dict, apis=None) -> str:
    """``Produce v2, Fetch v3`` for the given APIs (all the cell sent when ``apis`` is None)."""
    names = [api for api in (apis or requests) if api in requests]
    return ", ".join(f"{api} v{'/'.join(map(str, requests[api]))}" for api in names)


def row_requests(row: dict) -> dict:
    merged: dict[str, set] = {}
    for cell in row["cells"].values():
        for api, seen in cell.get("requests", {}).items():
            merged.setdefault(api, set()).update(seen)
    return {api: sorted(seen) for api, seen in merged.items()}


def row_label(row: dict) -> str:
    info = row["row"]
    return f"{info['family']} {info['release']}" + (f" @ {info['pin']}" if info["pin"] else "")


def kind(cell: dict) -> str:
    """pass, fail, n/a, or known: a failure the client has against Kafka too."""
    return "known" if cell["status"] == "fail" and cell.get("known") else cell["status"]


def _stored(row: dict) -> str:
    return row["cells"]["records"].get("stored") or next(
        (cell["stored"] for cell in row["cells"].values() if cell.get("stored")), "")


def markdown(summary: dict, rows: list[dict]) -> str:
    out = ["# Compatibility matrix", "",
           f"Produced by `scripts/compat-matrix` from kgate commit `{summary['commit']}` on {summary['date']} "
           f"(entry format `{summary.get('entry_format', 'kafka')}`, "
           f"{summary.get('deployment', 'single node')}) "
           f"in {summary['seconds'] // 60} min {summary['seconds'] % 60} s: "
           f"{summary['pass']} cells passed, {summary['fail']} failed "
           f"({sum(kind(c) == 'known' for r in rows for c in r['cells'].values())} of them client limitations "
           f"that fail against Kafka too), {summary['n/a']} do not apply.", "",
           "Each cell ran the real client against a live broker and passes only on its checks: every record "
           "read back once with its key, value, headers (magic 2) and timestamp (magic 1+), contiguous offsets "
           "from 0; codec cells also check the stored codec; group cells commit, restart and resume; "
           "transactions cells commit, abort and commit with the client's transactional producer, then its "
           "read_committed consumer must see exactly the committed records and its read_uncommitted one all of "
           "them; kip848 cells run two members of a `group.protocol=consumer` group that must each be assigned "
           "one partition and read only from it, commit and leave, then a restarted member resumes; share cells "
           "run a share-group (KIP-932) member that accepts every record and leaves, then a second member that "
           "must get exactly the records written since. SASL, "
           "idempotent, admin, transactions, kip848 and share cells also require the broker to have seen "
           "SaslHandshake, InitProducerId, CreateTopics/DeleteTopics, EndTxn, ConsumerGroupHeartbeat, ShareFetch. "
           "`n/a`: the generation or "
           "library lacks the feature (reasons in "
           "MATRIX.html and results/). Request versions below are the ones the broker answered for the row.",
           "", "| client | generation | " + " | ".join(COLUMNS) + " |",
           "|---|---|" + "---|" * len(COLUMNS)]
    for row in rows:
        marks = [MARKS[kind(row["cells"][column])] for column in COLUMNS]
        out.append(f"| {row_label(row)} | {row['row']['generation']} | " + " | ".join(marks) + " |")
    out += ["", "## Observed request versions and message format", "",
            "| client | requests the broker answered | stored |", "|---|---|---|"]
    for row in rows:
        out.append(f"| {row_label(row)} | {versions(row_requests(row), KEY_APIS)} | {_stored(row)} |")
    failures = [(row, column, cell) for row in rows for column, cell in row["cells"].items()
                if kind(cell) == "fail"]
    out += ["", "## Failures", ""]
    out += [f"- **{row_label(row)}**, {column}: {cell['message']}".replace("\n", " ")
            for row, column, cell in failures] or ["None."]
    known = [(row, column, cell) for row in rows for column, cell in row["cells"].items() if kind(cell) == "known"]
    out += ["", "## Client limitations (`fail (client)`: these fail against Kafka too)", ""]
    out += [f"- **{row_label(row)}**, {column}: {cell['known']}. Observed: {cell['message']}".replace("\n", " ")
            for row, column, cell in known] or ["None."]
    return "\n".join(out) + "\n"


STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; font-size: 12px; }
th, td { border: 1px solid #bbb; padding: 3px 5px; vertical-align: top; }
th { background: #eee; position: sticky; top: 0; }
td.pass { background: #c8efc8; }
td.fail { background: #f6b8b8; font-weight: bold; }
td.na { background: #e4e4e4; color: #777; }
td.known { background: #f6dca0; }
td small { display: block; font-weight: normal; color: #333; max-width: 16em; }
"""


def page(summary: dict, rows: list[dict]) -> str:
    head = "".join(f"<th>{html.escape(column)}</th>" for column in COLUMNS)
    body = []
    for row in rows:
        cells = []
        for column in COLUMNS:
            cell = row["cells"][column]
            status = kind(cell)
            hover = cell["message"] or f"passed in {cell.get('seconds', 0)} s"
            if cell.get("known"):
                hover = f"{cell['known']} (fails against Kafka too). Observed: {hover}"
            detail = versions(cell.get("requests", {}))
            if cell.get("stored"):
                detail += f"; stored {cell['stored']}"
            label = {"known": "fail (client)"}.get(status, status)
            cells.append(f'<td class="{"na" if status == "n/a" else status}" title="{html.escape(hover)}">'
                         f'{html.escape(label)}<small>{html.escape(detail)}</small></td>')
        body.append(f"<tr><th>{html.escape(row_label(row))}</th><td>{html.escape(row['row']['generation'])}</td>"
                    + "".join(cells) + "</tr>")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>kgate compatibility matrix</title>"
            f"<style>{STYLE}</style></head><body><h1>kgate compatibility matrix</h1>"
            f"<p>kgate commit <code>{html.escape(summary['commit'])}</code>, {html.escape(summary['date'])}, "
            f"{html.escape(summary.get('deployment', 'single node'))}: "
            f"{summary['pass']} passed, {summary['fail']} failed, {summary['n/a']} n/a. Green: passed; red: "
            f"failed; orange: fails against Kafka too (a client limitation); grey: does not apply. Hover a cell "
            f"for its failure or why it does not apply; each cell lists the request versions the broker answered "
            f"while it ran and the stored message format.</p>"
            f"<table><tr><th>client</th><th>generation</th>{head}</tr>{''.join(body)}</table></body></html>\n")


def write(results_dir: str, markdown_path: str, html_path: str) -> None:
    summary, rows = load(results_dir)
    with open(markdown_path, "w") as fh:
        fh.write(markdown(summary, rows))
    with open(html_path, "w") as fh:
        fh.write(page(summary, rows))


if __name__ == "__main__":
    results = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "results")
    write(results, os.path.join(HERE, "MATRIX.md"), os.path.join(HERE, "MATRIX.html"))
