"""The reference pages, generated from the code at every build (an MkDocs hook).

A page holding ``<!-- reference: NAME -->`` gets that reference in its place: broker
settings (``gateway/config.py`` with ``gateway/setting_docs.py``), topic configs
(``gateway/topic_configs.py``), metrics (every ``kgate_*`` metric defined in the
source) and the command line (the ``kgate`` argument parsers). ``<!-- include: PATH -->``
puts a file of the repository in its place (the compatibility matrix). A setting
without documentation, a metric without help text or an ignored topic config without
its reason raises, which fails the build: the reference cannot drift from the code.
"""
import argparse
import ast
import pathlib
import re
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parents[2]
MARKER = re.compile(r"<!-- (reference|include): ([\w./-]+) -->")

# Where metrics are defined, and which process serves them.
METRIC_SOURCES = {
    "gateway/metrics.py": "broker (`kgate serve --metrics`)",
    "storage/stores/object_store_metrics.py": "broker on `s3://` storage",
    "storage/stores/object_client.py": "broker on `s3://` storage",
    "mirror/metrics.py": "mirror worker (`kgate mirror serve --metrics`)",
    "processing/metrics.py": "processor (`kgate process --metrics`, `app.metrics.registry`)",
}
_METRIC_TYPES = {"Counter": "counter", "CounterMetricFamily": "counter", "Gauge": "gauge",
                 "GaugeMetricFamily": "gauge", "Histogram": "histogram", "HistogramMetricFamily": "histogram"}


class ReferenceError(Exception):
    """The code holds something the reference cannot document."""


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def settings_page() -> str:
    from kgate.gateway.broker_configs import DYNAMIC
    from kgate.gateway.config import BROKER_SETTINGS, config_type, is_sensitive
    from kgate.gateway.setting_docs import SETTING_DOCS

    missing = sorted(set(BROKER_SETTINGS) - set(SETTING_DOCS))
    if missing:
        raise ReferenceError(f"broker settings without documentation in gateway/setting_docs.py: {missing}")
    stale = sorted(set(SETTING_DOCS) - set(BROKER_SETTINGS))
    if stale:
        raise ReferenceError(f"gateway/setting_docs.py documents settings that do not exist: {stale}")
    rows = ["| setting | type | default | Kafka | changes | what it does |", "|---|---|---|---|---|---|"]
    for name, (default, (rule, _check)) in BROKER_SETTINGS.items():
        doc = SETTING_DOCS[name]
        kafka = "same name" if doc.kafka_name else (f"instead of `{doc.kafka_counterpart}`"
                                                    if doc.kafka_counterpart else "kgate's own")
        shown = "(sensitive)" if is_sensitive(name) and default else f"`{default!r}`" if default != "" else "empty"
        text = doc.text + (f" Value {rule}." if rule else "")
        changes = "at run time" if name in DYNAMIC else "at restart"
        rows.append(f"| `{name}` | {config_type(name).name.lower()} | {_cell(shown)} | {kafka} | {changes} | "
                    f"{_cell(text)} |")
    return "\n".join(rows) + "\n"


def topic_configs_page() -> str:
    from kgate.gateway.topic_configs import TOPIC_CONFIGS, Use

    rows = ["| config | type | default | kgate | why, and valid values |", "|---|---|---|---|---|"]
    for name, config in sorted(TOPIC_CONFIGS.items(), key=lambda item: (item[1].use.value, item[0])):
        if config.use is not Use.ACTS and not config.why:
            raise ReferenceError(f"topic config {name} is {config.use.value} without saying why")
        default = f"broker setting `{config.setting}`" if config.setting else f"`{config.default}`"
        notes = [config.why] if config.why else []
        if config.valid:
            notes.append(f"valid: {config.valid[0]}")
        rows.append(f"| `{name}` | {config.type.name.lower()} | {default} | {config.use.value} | "
                    f"{_cell('; '.join(notes))} |")
    return "\n".join(rows) + "\n"


@dataclass(frozen=True)
class Metric:
    name: str  # as exposed: counters end in _total
    kind: str
    labels: tuple[str, ...]
    help: str
    served_by: str


def _constant(node, scope: dict):
    """The literal value of ``node``, following names bound to literals in the enclosing function."""
    if isinstance(node, ast.Name) and node.id in scope:
        node = scope[node.id]
    return ast.literal_eval(node)


def _metric_calls(tree: ast.Module):
    """``(call, scope)`` for each metric constructed, with loops over literal tuples unrolled."""
    module = _assignments(tree.body)
    for function in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
        literals = {**module, **_assignments(ast.walk(function))}
        for node in ast.walk(function):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in _METRIC_TYPES and node.args:
                yield node, literals
            if isinstance(node, ast.For) and isinstance(node.target, ast.Tuple) \
                    and all(isinstance(target, ast.Name) for target in node.target.elts):
                names = [target.id for target in node.target.elts]
                loop = literals.get(node.iter.id) if isinstance(node.iter, ast.Name) else node.iter
                if isinstance(loop, ast.Tuple):
                    yield from _unrolled(node, names, loop, literals)


def _assignments(nodes) -> dict:
    return {target.id: node.value for node in nodes if isinstance(node, ast.Assign)
            for target in node.targets if isinstance(target, ast.Name)}


def _unrolled(loop: ast.For, names: list[str], values: ast.Tuple, literals: dict):
    for element in values.elts:
        bound = {**literals, **dict(zip(names, element.elts))}
        for node in ast.walk(loop):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in _METRIC_TYPES and node.args:
                yield node, bound


def metric_catalogue() -> list[Metric]:
    """Every ``kgate_*`` metric the source defines, as Prometheus exposes it."""
    found: dict[str, Metric] = {}
    for path, served_by in METRIC_SOURCES.items():
        tree = ast.parse((ROOT / path).read_text(), path)
        for call, scope in _metric_calls(tree):
            try:
                name = _constant(call.args[0], scope)
            except ValueError:
                continue  # a name only known at run time: the unrolled loop yields it
            if not name.startswith("kgate_"):
                continue
            keywords = {k.arg: k.value for k in call.keywords}
            help_text = _constant(call.args[1] if len(call.args) > 1 else keywords["documentation"], scope)
            label_node = call.args[2] if len(call.args) > 2 else keywords.get("labels") or keywords.get("labelnames")
            labels = tuple(_constant(label_node, scope)) if label_node is not None else ()
            kind = _METRIC_TYPES[call.func.id]
            if not help_text.strip():
                raise ReferenceError(f"metric {name} in {path} has no help text")
            exposed = name.removesuffix("_total") + "_total" if kind == "counter" else name
            found[exposed] = Metric(exposed, kind, labels, help_text, served_by)
    return sorted(found.values(), key=lambda metric: metric.name)


def metrics_page() -> str:
    sections = []
    for served_by in METRIC_SOURCES.values():
        metrics = [metric for metric in metric_catalogue() if metric.served_by == served_by]
        rows = [f"## Served by the {served_by}", "", "| metric | type | labels | meaning |", "|---|---|---|---|"]
        for metric in metrics:
            labels = ", ".join(f"`{label}`" for label in metric.labels) or "none"
            rows.append(f"| `{metric.name}` | {metric.kind} | {labels} | {_cell(metric.help)} |")
        sections.append("\n".join(rows))
    return "\n\n".join(sections) + "\n"


def _leaves(parser: argparse.ArgumentParser, path: tuple[str, ...]):
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subparsers:
        yield path, parser
    for action in subparsers:
        for name, child in action.choices.items():
            if child.prog.split()[-1] == name:  # aliases share one parser: list it once
                yield from _leaves(child, path + (name,))


def _option_rows(actions) -> list[str]:
    rows = ["| option | what it does |", "|---|---|"]
    for action in actions:
        if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        names = ", ".join(action.option_strings) or action.dest
        if action.option_strings and action.nargs != 0:
            names += f" {action.metavar or action.dest.upper()}"
        text = (action.help or "").replace("%(default)s", str(action.default))
        if action.choices and "{" not in names:
            text += f" (one of: {', '.join(map(str, action.choices))})"
        if not text and action.option_strings:
            raise ReferenceError(f"option {names} has no help text")
        text = text or "(positional argument)"
        rows.append(f"| `{_cell(names)}` | {_cell(text)} |")
    return rows


def cli_page() -> str:
    from kgate.command import parser

    shared: list[str] = []
    sections = []
    for path, leaf in _leaves(parser(), ("kgate",)):
        groups = {group.title: group._group_actions for group in leaf._action_groups}
        if "connection" in groups and not shared:
            shared = _option_rows(groups["connection"])
        own = [a for title, actions in groups.items() if title != "connection" for a in actions]
        usage = leaf.format_usage().removeprefix("usage: ").strip()
        lines = [f"## {' '.join(path)}", "", leaf.description or "", "", f"```\n{usage}\n```", ""]
        lines += _option_rows(own)
        if "connection" in groups:
            lines += ["", "It also takes the [connection options](#connection-options)."]
        sections.append("\n".join(lines))
    head = ["## Connection options", "", "Every client command takes these, before or after its action:", ""]
    return "\n".join(head + shared) + "\n\n" + "\n\n".join(sections) + "\n"


PAGES = {"settings": settings_page, "topic-configs": topic_configs_page, "metrics": metrics_page, "cli": cli_page}


def _replace(match: re.Match) -> str:
    kind, name = match.groups()
    if kind == "include":
        text = (ROOT / name).read_text()
        return text.split("\n", 1)[1] if text.startswith("# ") else text
    if name not in PAGES:
        raise ReferenceError(f"no reference named {name!r} (known: {', '.join(PAGES)})")
    return PAGES[name]()


def on_page_markdown(markdown: str, **_kwargs) -> str:
    return MARKER.sub(_replace, markdown)
