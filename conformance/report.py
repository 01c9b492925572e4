"""The conformance report: every divergence, grouped by scenario, with its classification.

Markdown for the repository (conformance/REPORT.md) and a standalone HTML page beside it.
"""
import html
from collections import Counter
from pathlib import Path

from .compare import Divergence
from .known import KNOWN, Known
from .scenarios import Scenario

UNEXPLAINED = "unexplained"


def _cell(value) -> str:
    text = str(value)
    return (text[:157] + "...") if len(text) > 160 else text


def rows(results: dict[str, list[tuple[Divergence, Known | None]]]) -> list[list[str]]:
    return [[d.scenario, d.label, d.path or "(whole answer)", _cell(d.kafka), _cell(d.kgate),
             known.kind if known else UNEXPLAINED, known.reason if known else ""]
            for classified in results.values() for d, known in classified]


def write_report(path: str, scenarios: list[Scenario], results) -> int:
    """Write ``path``.md and ``path``.html; the number of unexplained divergences."""
    table = rows(results)
    kinds = Counter(row[5] for row in table)
    header = ["scenario", "exchange", "field", "Kafka 4.4", "kgate", "class", "reason"]
    summary = (f"{len(scenarios)} scenarios ({len({s.family for s in scenarios})} families), "
               f"{len(table)} divergences: " + ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items())))
    families = ", ".join(sorted({s.family for s in scenarios}))
    md = ["# Conformance report: kgate against Apache Kafka 4.4", "",
          "Written by `scripts/conformance` (conformance/run.py); "
          "docs/clients/kafka-reference.md says how it works.", "",
          summary + ".", "", f"Families: {families}.", "",
          "Scenarios with no divergence: " + (", ".join(s.name for s in scenarios if not results.get(s.name))
                                              or "none") + ".", "",
          "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    md += ["| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in row) + " |" for row in table]
    used = {known for classified in results.values() for _, known in classified if known}
    unused = [k for k in KNOWN if k not in used]
    if unused:  # fixed since, or a divergence of timing that did not happen this run
        md += ["", "Entries of conformance/known.py that matched nothing in this run:", ""]
        md += [f"- `{k.scenario}` / `{k.label}` / `{k.path}`: {k.kind}" for k in unused]
    Path(path + ".md").write_text("\n".join(md) + "\n")
    cells = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>\n" for row in table)
    Path(path + ".html").write_text(
        "<!doctype html><meta charset=utf-8><title>kgate conformance</title>"
        "<style>body{font-family:sans-serif}td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px;"
        "vertical-align:top}table{border-collapse:collapse}</style>"
        f"<h1>Conformance report: kgate against Apache Kafka 4.4</h1><p>{html.escape(summary)}</p>"
        "<table><tr>" + "".join(f"<th>{h}</th>" for h in header) + f"</tr>\n{cells}</table>\n")
    return kinds[UNEXPLAINED]
