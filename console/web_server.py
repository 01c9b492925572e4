"""The console's HTTP server: routes, the read-only switch, CSRF checks, and a page (never a
traceback) for every failure, above all a cluster that cannot be reached or refuses the
console's credentials."""
import functools
import http.cookies
import http.server
import logging
import re
from urllib.parse import parse_qs, quote, unquote, urlsplit

from kafka import errors as kafka_errors

from kgate.cli.client_options import ConnectError, Failed, UsageError, reason

from . import html_pages as pages
from . import record_view
from .cluster_reader import ClusterReader
from .csrf import CsrfGuard

log = logging.getLogger(__name__)
RECORDS_PER_PAGE = 20


class ConsoleServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, login, bootstrap: str, history, allow_writes: bool):
        super().__init__(address, ConsoleHandler)
        self.login = login
        self.bootstrap = bootstrap
        self.history = history
        self.allow_writes = allow_writes
        self.csrf = CsrfGuard(self.server_address[1])


class ConsoleHandler(http.server.BaseHTTPRequestHandler):
    server: ConsoleServer
    server_version = "kgate-console"
    _reader: ClusterReader | None = None  # whom this request reads the cluster as; None: not logged in
    ROUTES = (
        (re.compile(r"/"), "overview"),
        (re.compile(r"/topics"), "topics"),
        (re.compile(r"/topics/(?P<topic>[^/]+)"), "topic"),
        (re.compile(r"/topics/(?P<topic>[^/]+)/partitions/(?P<partition>\d+)"), "records"),
        (re.compile(r"/groups"), "groups"),
        (re.compile(r"/groups/(?P<group>[^/]+)"), "group"),
        (re.compile(r"/acls"), "acls"),
    )

    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        log.debug("%s %s", self.address_string(), format % args)

    def _session(self) -> str | None:
        cookie = http.cookies.SimpleCookie(self.headers.get("Cookie", ""))
        name = self.server.csrf.cookie_name
        return cookie[name].value if name in cookie else None

    def _send(self, status: int, body: str, session: str | None = None, headers: dict | None = None) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        # No script runs and no page may frame the console (clickjacking of its forms).
        self.send_header("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; "
                                                    "form-action 'self'; frame-ancestors 'none'")
        self.send_header("X-Frame-Options", "DENY")
        if session is not None:
            self.send_header("Set-Cookie", self.server.csrf.cookie(session))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _page(self, title: str, body: str, active: str = "", notice=None, status: int = 200,
              session: str | None = None) -> None:
        signed_in = self.server.login.asks_credentials and self._reader is not None
        logout = pages.logout_form(self.server.csrf.token(self._session() or "")) if signed_in else ""
        self._send(status, pages.layout(title, body, self.server.bootstrap, active, notice, logout), session)

    def do_GET(self):
        url = urlsplit(self.path)
        query = {key: values[-1] for key, values in parse_qs(url.query).items()}
        session = self._session()
        fresh = None if session else CsrfGuard.new_session()
        session = session or fresh
        self._reader = self.server.login.reader(session)
        if self._reader is None:
            self._login_page(session, fresh)
            return
        for pattern, name in self.ROUTES:
            match = pattern.fullmatch(url.path.rstrip("/") or "/")
            if match:
                render = getattr(self, f"_{name}")
                params = {key: unquote(value) for key, value in match.groupdict().items()}
                self._guarded(functools.partial(render, query, session, **params), fresh)
                return
        self._page("Not found", f"<p>No page at {pages.esc(url.path)}.</p>", status=404, session=fresh)

    do_HEAD = do_GET

    def _guarded(self, render, fresh: str | None) -> None:
        """``render()`` -> (title, body, active, notice), or None when it answered itself (a
        redirect); failures become pages of their own."""
        try:
            rendered = render()
        except ConnectError as exc:
            kind = "refused" if str(exc).startswith("authentication failed") else "unreachable"
            self._trouble(kind, str(exc), 503, fresh)
        except (kafka_errors.SaslAuthenticationFailedError, kafka_errors.UnsupportedSaslMechanismError) as exc:
            self._trouble("refused", f"authentication failed: {reason(exc)}", 503, fresh)
        except (Failed, UsageError, kafka_errors.KafkaError) as exc:
            self._trouble("failed", reason(exc), 404 if isinstance(exc, Failed) else 502, fresh)
        except Exception as exc:  # a bug: still a page, and the traceback in the log only
            log.exception("console page %s failed", self.path)
            self._trouble("failed", f"unexpected {type(exc).__name__}: {exc}", 500, fresh)
        else:
            if rendered is not None:
                title, body, active, notice = rendered
                self._page(title, body, active, notice, session=fresh)

    def _trouble(self, kind: str, message: str, status: int, fresh: str | None) -> None:
        titles = {"unreachable": "Cluster unreachable", "refused": "Credentials refused", "failed": "Request failed"}
        self._page(titles[kind], pages.trouble(kind, message, self.server.bootstrap), status=status,
                   session=fresh)

    def _overview(self, query, session):
        history = self.server.history
        charts = history.storage_table() + history.throughput_chart()
        return "Overview", pages.overview(self._reader.overview(), charts), "/", None

    def _topics(self, query, session):
        rows = self._reader.topics()
        return "Topics", pages.topics(rows, self.server.history.topic_rates()), "/topics", None

    def _topic(self, query, session, topic):
        return f"Topic {topic}", pages.topic(self._reader.topic(topic)), "/topics", None

    def _records(self, query, session, topic, partition):
        form = query.get("format", "auto")
        if form not in record_view.FORMATS:
            raise UsageError(f"format must be one of {', '.join(record_view.FORMATS)}")
        try:
            offset = max(0, int(query.get("offset", "0")))
        except ValueError:
            raise UsageError("offset must be a number") from None
        found = self._reader.records(topic, int(partition), offset, RECORDS_PER_PAGE)
        return (f"Records of {topic}-{partition}", pages.records(topic, int(partition), offset, found, form),
                "/topics", None)

    def _groups(self, query, session):
        return "Consumer groups", pages.groups(self._reader.groups()), "/groups", None

    def _group(self, query, session, group):
        view = self._reader.group(group)
        notice = ("ok", f"Committed new offsets for {query['reset']}") if "reset" in query else None
        charts = self.server.history.lag_chart(group)
        body = pages.group(view, self.server.allow_writes, self.server.csrf.token(session), charts)
        return f"Group {group}", body, "/groups", notice

    def _acls(self, query, session):
        return "ACLs", pages.acls(*self._reader.acls()), "/acls", None

    def _login_page(self, session: str, fresh: str | None, refused: str | None = None) -> None:
        notice = ("bad", refused) if refused else None
        self._page("Log in", pages.login(self.server.csrf.token(session)), notice=notice,
                   status=401 if refused else 200, session=fresh)

    def do_POST(self):
        url = urlsplit(self.path)
        length = min(int(self.headers.get("Content-Length") or 0), 64 * 1024)
        form = {key: values[-1] for key, values in parse_qs(self.rfile.read(length).decode(errors="replace")).items()}
        session = self._session()
        if not self.server.csrf.allows(session, form.get("csrf"), self.headers.get("Origin"),
                                       self.headers.get("Host")):
            self._page("Refused", "<p>The form did not come from this console (a missing or wrong CSRF token, "
                                  "or another site's origin). Reload the page and try again.</p>", status=403)
            return
        if url.path in ("/login", "/logout") and self.server.login.asks_credentials:
            self._sign_in_or_out(url.path, session, form)
            return
        self._reader = self.server.login.reader(session)
        match = re.fullmatch(r"/groups/(?P<group>[^/]+)/reset-offsets", url.path)
        if match is None:
            self._page("Not found", "<p>No action here.</p>", status=404)
            return
        if self._reader is None:
            self._login_page(session, None)
            return
        if not self.server.allow_writes:
            self._page("Read-only", "<p>This console is read-only: start it with --allow-writes to change "
                                    "offsets.</p>", status=403)
            return
        group = unquote(match["group"])
        self._guarded(functools.partial(self._reset, self._reader, group, form), None)

    def _sign_in_or_out(self, path: str, session: str, form: dict) -> None:
        if path == "/logout":
            self.server.login.logout(session)
        else:
            try:
                self.server.login.login(session, form.get("username", ""), form.get("password", ""))
            except ConnectError as exc:
                self._reader = None
                self._login_page(session, None, refused=str(exc))
                return
        self._send(303, '<a href="/">continue</a>', headers={"Location": "/"})

    def _reset(self, reader: ClusterReader, group: str, form: dict):
        to = form.get("to", "")
        if to not in ("earliest", "latest", "offset") or not form.get("topic"):
            raise UsageError("choose a topic and where to reset it: earliest, latest or an offset")
        try:
            offset = int(form["offset"]) if to == "offset" else None
        except (KeyError, ValueError):
            raise UsageError("an offset reset needs a number in the offset field") from None
        plan = reader.reset_offsets(group, form["topic"], to, offset)
        done = f"{form['topic']} ({to}: " + ", ".join(f"partition {p} at {o}" for p, o in sorted(plan.items())) + ")"
        location = f"/groups/{quote(group, safe='')}?reset={quote(done)}"
        self._send(303, f'<a href="{pages.esc(location)}">done</a>', headers={"Location": location})
        return None
