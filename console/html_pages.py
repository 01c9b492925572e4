"""The console's pages, rendered on the server as plain HTML (no script).

Every value from the cluster is escaped; only the page's own markup is passed as
:class:`Raw`. Pages carry their data in tables with stable ids, which is also what the
browser tests read."""
import datetime
import html
from urllib.parse import quote

from . import record_view

STYLE = """
body{font-family:system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:.6em 1.2em;display:flex;gap:1.5em;align-items:baseline}
header a{color:#cfd6e4;text-decoration:none}header a.on{color:#fff;font-weight:600}
header .cluster{margin-left:auto;font-size:.85em;color:#9aa5b8}
main{padding:1em 1.5em}table{border-collapse:collapse;background:#fff;margin:.5em 0 1.5em}
th,td{border:1px solid #d9dde5;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#eef1f5}td.n{text-align:right;font-variant-numeric:tabular-nums}
.notice{padding:.6em 1em;border-radius:4px;margin:.5em 0}.ok{background:#e3f4e8}.bad{background:#fbe4e4}
.tag{background:#e6ebf5;border-radius:3px;padding:0 .4em;font-size:.85em}pre{margin:0;white-space:pre-wrap}
form.inline{display:inline-flex;gap:.4em;align-items:center}svg{background:#fff;border:1px solid #d9dde5}
"""
NAV = (("/", "Overview"), ("/topics", "Topics"), ("/groups", "Consumer groups"), ("/acls", "ACLs"))


class Raw(str):
    """Markup made here, put in a page as it is."""


def esc(value) -> str:
    if isinstance(value, Raw):
        return value
    return html.escape("" if value is None else str(value))


def link(href: str, text) -> Raw:
    return Raw(f'<a href="{esc(href)}">{esc(text)}</a>')


def table(table_id: str, headers, rows) -> Raw:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in rows)
    return Raw(f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>')


def _cell(value) -> str:
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    return f'<td class="n">{value}</td>' if numeric else f"<td>{esc(value)}</td>"


def layout(title: str, body: str, bootstrap: str, active: str = "", notice: tuple[str, str] | None = None,
           logout: str = "") -> str:
    nav = "".join(f'<a href="{href}"{" class=on" if href == active else ""}>{name}</a>' for href, name in NAV)
    shown = f'<div class="notice {notice[0]}" id="notice">{esc(notice[1])}</div>' if notice else ""
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{esc(title)} - kgate console</title>"
            f"<style>{STYLE}</style></head><body><header><strong>kgate console</strong>{nav}"
            f'<span class="cluster">{esc(bootstrap)}</span>{logout}</header><main><h1>{esc(title)}</h1>{shown}{body}'
            f"</main></body></html>")


def size(count: int | None) -> str:
    if count is None:
        return "-"
    amount = float(count)
    for unit in ("B", "KiB", "MiB"):
        if amount < 1024:
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{amount:.1f} GiB"


def overview(data: dict, charts: str) -> str:
    brokers = table("brokers", ("id", "host", "port", "rack", "controller"),
                    [(b["broker_id"], b["host"], b["port"], b.get("rack") or "-",
                      "yes" if b["broker_id"] == data["controller"] else "") for b in data["brokers"]])
    kgate = data["kgate"]
    if kgate:
        extra = ("<h2>kgate</h2><p>This cluster is kgate: brokers are stateless over shared storage.</p>"
                 + table("kgate-settings", ("setting", "value"), sorted(kgate.items())))
    else:
        extra = "<p>The brokers describe no kgate settings: a Kafka cluster.</p>"
    return (f'<p>Cluster id <span class="tag" id="cluster-id">{esc(data["cluster_id"])}</span></p>'
            f"<h2>Brokers</h2>{brokers}{extra}{charts}")


def topics(rows: list[dict], rates: dict[str, float]) -> str:
    shown = [(link(f"/topics/{quote(t['name'], safe='')}", t["name"]), t["partitions"], size(t["bytes"]),
              f"{rates[t['name']] / 1024:,.1f} KiB/s" if t["name"] in rates else "-",
              "internal" if t["internal"] else "") for t in rows]
    return (f"<p>{len(rows):,} topics.</p>"
            + table("topics", ("topic", "partitions", "stored", "bytes in (1 min)", ""), shown))


def topic(data: dict) -> str:
    name = quote(data["name"], safe="")
    partitions = table("partitions", ("partition", "leader", "earliest", "latest", "records", "stored", ""),
                       [(p["partition"], p["leader"], p["earliest"], p["latest"], p["latest"] - p["earliest"],
                         size(p["bytes"]),
                         link(f"/topics/{name}/partitions/{p['partition']}?offset={p['earliest']}", "browse"))
                        for p in data["partitions"]])
    configs = table("configs", ("config", "value", "set"),
                    [(key, value, "set" if changed else "default") for key, value, changed in data["configs"]])
    return f"<h2>Partitions</h2>{partitions}<h2>Configs</h2>{configs}"


def records(topic_name: str, partition: int, offset: int, found: list, form: str) -> str:
    base = f"/topics/{quote(topic_name, safe='')}/partitions/{partition}"
    forms = " ".join(link(f"{base}?offset={offset}&format={f}", f) if f != form else f"<b>{f}</b>"
                     for f in record_view.FORMATS)
    rows = [(r.offset, _time(r.timestamp), Raw(f"<pre>{esc(record_view.show(r.key, form))}</pre>"),
             Raw(f"<pre>{esc(record_view.show(r.value, form))}</pre>"),
             Raw("<br>".join(f"{esc(k)}: {esc(record_view.show(v, form))}" for k, v in r.headers or ())))
            for r in found]
    after = found[-1].offset + 1 if found else offset
    back = link("/topics/" + quote(topic_name, safe=""), topic_name)
    more = link(f"{base}?offset={after}&format={form}", "next records")
    return (f"<p>{back} partition {partition}, from offset {offset}. Show as: {forms}</p>"
            + table("records", ("offset", "timestamp", "key", "value", "headers"), rows)
            + (f"<p>{more}</p>" if found else "<p>No records at this offset.</p>"))


def _time(ms: int) -> str:
    if ms is None or ms < 0:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def groups(views: list) -> str:
    rows = [(link(f"/groups/{quote(g.group_id, safe='')}", g.group_id), g.state, g.protocol_type or "-",
             len({p.topic for p in g.partitions}), g.total_lag) for g in views]
    return f"<p>{len(views):,} groups.</p>" + table("groups", ("group", "state", "type", "topics", "lag"), rows)


def group(view, allow_writes: bool, csrf_token: str, charts: str) -> str:
    members = table("members", ("member", "client", "host", "partitions"),
                    [(m["member_id"], m["client_id"], m["host"], ", ".join(m["partitions"])) for m in view.members])
    partitions = table("lag", ("topic", "partition", "committed", "log end", "lag", "member"),
                       [(p.topic, p.partition, "-" if p.committed is None else p.committed, p.end,
                         "-" if p.lag is None else p.lag, p.member or "-") for p in view.partitions])
    members_said = "members not described" if view.note else f"{len(view.members)} members"
    summary = (f'<p>State <span class="tag" id="state">{esc(view.state)}</span> type {esc(view.protocol_type or "-")}'
               f', {members_said}, total lag <b id="total-lag">{view.total_lag:,}</b></p>')
    note = f'<p id="group-note">{esc(view.note)}</p>' if view.note else ""
    return summary + "<h2>Members</h2>" + note + members + "<h2>Offsets and lag</h2>" + partitions + charts + \
        _reset_form(view, allow_writes, csrf_token)


def _reset_form(view, allow_writes: bool, csrf_token: str) -> str:
    if not allow_writes:
        return "<h2>Reset offsets</h2><p>The console is read-only (start it with --allow-writes to reset offsets).</p>"
    topics_known = sorted({p.topic for p in view.partitions})
    options = "".join(f"<option>{esc(t)}</option>" for t in topics_known)
    action = f"/groups/{quote(view.group_id, safe='')}/reset-offsets"
    return (f'<h2>Reset offsets</h2><p>Only while the group has no members (Empty).</p>'
            f'<form class="inline" id="reset" method="post" action="{esc(action)}">'
            f'<input type="hidden" name="csrf" value="{esc(csrf_token)}">'
            f'<label>topic <select name="topic">{options}</select></label>'
            f'<label>to <select name="to"><option>earliest</option><option>latest</option>'
            f'<option>offset</option></select></label>'
            f'<label>offset <input name="offset" type="number" min="0" size="8"></label>'
            f'<button type="submit">Reset</button></form>')


def acls(bindings: list, reason: str | None) -> str:
    if reason:
        return f'<p id="acls-note">{esc(reason)}</p>'
    rows = [(a.resource_pattern.resource_type.name, a.resource_pattern.resource_name,
             a.resource_pattern.pattern_type.name, a.principal, a.host, a.operation.name, a.permission_type.name)
            for a in bindings]
    return table("acls", ("resource", "name", "pattern", "principal", "host", "operation", "permission"), rows)


def trouble(kind: str, message: str, bootstrap: str) -> str:
    """The page for a cluster that cannot be reached or refuses the console's credentials."""
    advice = {"unreachable": "Check that the brokers run and that --bootstrap names one of them; this page "
                             "tries again when reloaded.",
              "refused": "The cluster refused the console's SASL credentials (--sasl-username, "
                         "--sasl-password or KGATE_SASL_PASSWORD).",
              "failed": "The cluster answered with an error."}[kind]
    return f'<div class="notice bad" id="trouble"><b>{esc(message)}</b></div><p>{esc(advice)}</p>'


def login(csrf_token: str) -> str:
    return (f"<p>Log in with your SASL credentials for this cluster: the console connects as you, so the "
            f"cluster's ACLs decide what you see and may change.</p>"
            f'<form id="login" method="post" action="/login"><input type="hidden" name="csrf" '
            f'value="{esc(csrf_token)}"><p><label>user <input name="username" autocomplete="username"></label></p>'
            f'<p><label>password <input name="password" type="password" autocomplete="current-password"></label></p>'
            f'<p><button type="submit">Log in</button></p></form>')


def logout_form(csrf_token: str) -> str:
    return (f'<form class="inline" method="post" action="/logout"><input type="hidden" name="csrf" '
            f'value="{esc(csrf_token)}"><button type="submit" id="logout">Log out</button></form>')
