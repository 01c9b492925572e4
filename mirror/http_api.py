"""``kgate mirror serve --http HOST:PORT``: routes and status as JSON, as uReplicator's front end had.

    GET    /routes                  the routes
    POST   /routes                  {"source", "target", "topics": [..] or "a,b*", "policy"} -> the route
    DELETE /routes/SOURCE:TARGET    the whole route (?topics=a,b removes only those patterns)
    GET    /status                  every assigned partition: worker, lag, throughput

The same operations as the command line (operations.py), so a route refused there is
refused here with the same message (HTTP 409; 400 for malformed input, 404 for none).
"""
import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from . import operations
from .config import ConfigError, MirrorConfig
from .routes import POLICIES, Route, RouteError, parse_topics
from .state import MirrorState

log = logging.getLogger(__name__)
MAX_BODY = 64 * 1024


class _BadRequest(Exception):
    pass


def serve_http(address: str, config: MirrorConfig, state: MirrorState) -> ThreadingHTTPServer:
    host, _, port = address.rpartition(":")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format, *args):  # noqa: A002 - the base class's signature
            log.debug("http: " + format, *args)

        def do_GET(self):
            path = urlsplit(self.path).path.rstrip("/")
            if path == "/routes":
                self._answer(200, [r.to_json() | {"route": r.name} for r in state.routes().values()])
            elif path == "/status":
                self._answer(200, operations.status_rows(state))
            else:
                self._answer(404, {"error": f"no resource {path}"})

        def do_POST(self):
            if urlsplit(self.path).path.rstrip("/") != "/routes":
                return self._answer(404, {"error": "POST /routes only"})
            self._act(lambda: operations.add_route(config, state, self._route()).to_json(), 200)

        def do_DELETE(self):
            parts = urlsplit(self.path)
            if not parts.path.startswith("/routes/"):
                return self._answer(404, {"error": "DELETE /routes/SOURCE:TARGET only"})
            topics = parse_qs(parts.query).get("topics")
            name = parts.path[len("/routes/"):]
            self._act(lambda: {"route": name, "remaining": _json(operations.remove_route(
                state, name, parse_topics(topics[0]) if topics else None))}, 200)

        def _route(self) -> Route:
            length = int(self.headers.get("Content-Length") or 0)
            if not 0 < length <= MAX_BODY:
                raise _BadRequest(f"a JSON body of at most {MAX_BODY} bytes is required")
            try:
                body = json.loads(self.rfile.read(length))
                topics = body["topics"]
                topics = parse_topics(topics if isinstance(topics, str) else ",".join(topics))
                policy = body.get("policy", "prefix")
                if policy not in POLICIES:
                    raise _BadRequest(f"policy must be one of {', '.join(POLICIES)}")
                return Route(str(body["source"]), str(body["target"]), topics, policy)
            except (ValueError, KeyError, TypeError) as exc:
                raise _BadRequest(f"expected {{source, target, topics, policy}}: {exc}") from None

        def _act(self, action, status: int) -> None:
            try:
                self._answer(status, action())
            except (_BadRequest, ConfigError) as exc:
                self._answer(400, {"error": str(exc)})
            except RouteError as exc:
                self._answer(404 if str(exc).startswith("no route") else 409, {"error": str(exc)})

        def _answer(self, status: int, body) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer((host or "127.0.0.1", int(port)), Handler)
    threading.Thread(target=server.serve_forever, name="mirror-http", daemon=True).start()
    return server


def _json(route: Route | None):
    return route.to_json() if route else None
