"""The mirror's own state in ZooKeeper: routes, workers, the assignment, positions, status.

Every worker and every ``kgate mirror`` command reads and writes the same nodes, so a
route added from any host reaches every worker through a watch, and a worker's death
(its ephemeral registration gone) reaches the controller. Layout under the chroot:

    routes/<source>:<target>          {"source", "target", "topics", "policy"}
    workers/<worker id>               ephemeral {"host", "pid", "http"}
    controller                        kazoo election (the lowest sequence node leads)
    assignment                        {"generation", "workers": {id: [[route, topic, partition], ...]}}
    positions/<route>/<topic>/<p>     {"offset": next source offset to copy, "target_offset": ...}
    claims/<route>/<topic>/<p>        ephemeral: the worker copying the partition now
    status/<worker id>                ephemeral {"partitions": {"route/topic/p": {rate, lag, ...}}}
    audit/<route>/<topic>/<minute>    {"source": n} records copied, by record timestamp minute
                                      (minutes older than audit.retention.ms are pruned by the controller)

Positions are written only after the target acknowledged every record below them, so
a worker that dies loses nothing: its successor starts from the stored position and at
worst copies again what was acknowledged after the last store (at least once).
A partition moved from a live worker is handed over through its claim: the new worker
takes it only once the old one has stored its last position and dropped the claim (or
lost its session), so it never starts from a position its predecessor was still moving.
"""
import json
import os
import socket
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError
from kazoo.handlers.threading import KazooTimeoutError

from .config import MirrorConfig
from .routes import Route

Item = tuple[str, str, int]  # (route name, source topic, partition)


class StateUnavailable(Exception):
    """ZooKeeper could not be reached."""


def item_key(item: Item) -> str:
    return f"{item[0]}/{item[1]}/{item[2]}"


class MirrorState:
    def __init__(self, config: MirrorConfig):
        self.config = config
        self.root = config.chroot
        self.client = KazooClient(hosts=config.zookeeper, timeout=config["zookeeper.session.timeout.ms"] / 1000)

    def connect(self, timeout: float = 10.0) -> "MirrorState":
        try:
            self.client.start(timeout=timeout)
        except KazooTimeoutError:
            self.client.close()
            raise StateUnavailable(f"cannot reach ZooKeeper at {self.config.zookeeper}") from None
        for folder in ("routes", "workers", "positions", "status", "audit"):
            self.client.ensure_path(self.path(folder))
        return self

    def close(self) -> None:
        self.client.stop()
        self.client.close()

    def __enter__(self) -> "MirrorState":
        return self.connect()

    def __exit__(self, *exc) -> None:
        self.close()

    def path(self, *parts) -> str:
        return "/".join([self.root.rstrip("/"), *map(str, parts)])

    # JSON nodes

    def read(self, *parts, default=None):
        try:
            data, _ = self.client.get(self.path(*parts))
        except NoNodeError:
            return default
        return json.loads(data) if data else default

    def write(self, value, *parts, ephemeral: bool = False) -> None:
        path, data = self.path(*parts), json.dumps(value).encode()
        try:
            self.client.set(path, data)
        except NoNodeError:
            try:
                self.client.create(path, data, makepath=True, ephemeral=ephemeral)
            except NodeExistsError:
                self.client.set(path, data)

    def update(self, change: Callable, *parts) -> object:
        """Compare-and-set ``change(old value or None)`` until no other writer got in between."""
        path = self.path(*parts)
        while True:
            try:
                data, stat = self.client.get(path)
            except NoNodeError:
                value = change(None)
                try:
                    self.client.create(path, json.dumps(value).encode(), makepath=True)
                    return value
                except NodeExistsError:
                    continue
            value = change(json.loads(data) if data else None)
            try:
                self.client.set(path, json.dumps(value).encode(), version=stat.version)
                return value
            except BadVersionError:
                continue

    def children(self, *parts) -> list[str]:
        try:
            return sorted(self.client.get_children(self.path(*parts)))
        except NoNodeError:
            return []

    def delete_if_empty(self, *parts) -> bool:
        """Delete a node unless it has children (a writer may have added one meanwhile)."""
        try:
            self.client.delete(self.path(*parts))
            return True
        except (NoNodeError, NotEmptyError):
            return False

    def delete(self, *parts, recursive: bool = False) -> bool:
        try:
            self.client.delete(self.path(*parts), recursive=recursive)
            return True
        except NoNodeError:
            return False

    # Routes

    def routes(self) -> dict[str, Route]:
        found = {}
        for name in self.children("routes"):
            body = self.read("routes", name)
            if body is not None:
                found[name] = Route.from_json(body)
        return found

    def put_route(self, route: Route) -> None:
        self.write(route.to_json(), "routes", route.name)

    def delete_route(self, name: str) -> bool:
        return self.delete("routes", name)

    def watch_routes(self, callback: Callable[[], None]) -> None:
        """``callback()`` now and whenever a route is added, changed or removed."""
        watched: set[str] = set()

        def route_changed(_data, _stat, _event=None):
            callback()

        def children_changed(names):
            for name in set(names) - watched:
                watched.add(name)
                self.client.DataWatch(self.path("routes", name), route_changed)
            watched.intersection_update(names)
            callback()

        self.client.ChildrenWatch(self.path("routes"), children_changed)

    # Workers, controller, assignment

    def register_worker(self, worker_id: str, info: dict) -> None:
        self.client.create(self.path("workers", worker_id), json.dumps(info).encode(), ephemeral=True)

    def workers(self) -> dict[str, dict]:
        return {w: self.read("workers", w, default={}) for w in self.children("workers")}

    def election(self, worker_id: str):
        return self.client.Election(self.path("controller"), worker_id)

    def controller(self) -> str | None:
        contenders = self.election("").contenders()
        return contenders[0] if contenders else None

    def assignment(self) -> dict:
        return self.read("assignment", default=None) or {"generation": 0, "workers": {}}

    def put_assignment(self, assignment: dict) -> None:
        self.write(assignment, "assignment")

    def watch_assignment(self, callback: Callable[[dict], None]) -> None:
        def changed(data, _stat, _event=None):
            callback(json.loads(data) if data else {"generation": 0, "workers": {}})
        self.client.DataWatch(self.path("assignment"), changed)

    # Positions and status

    def position(self, item: Item) -> dict | None:
        return self.read("positions", *item)

    def put_position(self, item: Item, position: dict) -> None:
        self.write(position, "positions", *item)

    def positions(self, route: str) -> dict[Item, dict]:
        found = {}
        for topic in self.children("positions", route):
            for partition in self.children("positions", route, topic):
                found[(route, topic, int(partition))] = self.read("positions", route, topic, partition)
        return found

    def claim(self, item: Item, worker_id: str) -> bool:
        """Claim ``item`` for this session; False while another session holds it."""
        path = self.path("claims", *item)
        try:
            self.client.create(path, worker_id.encode(), ephemeral=True, makepath=True)
            return True
        except NodeExistsError:
            try:
                _, stat = self.client.get(path)
            except NoNodeError:
                return False  # dropped just now: the next try takes it
            return stat.ephemeralOwner == self.client.client_id[0]

    def unclaim(self, item: Item) -> None:
        """Drop this session's claim of ``item``, after its position is stored."""
        path = self.path("claims", *item)
        try:
            _, stat = self.client.get(path)
            if stat.ephemeralOwner == self.client.client_id[0]:
                self.client.delete(path, version=stat.version)
        except NoNodeError:
            pass

    def put_status(self, worker_id: str, status: dict) -> None:
        self.write(status, "status", worker_id, ephemeral=True)

    def statuses(self) -> dict[str, dict]:
        return {w: self.read("status", w, default={}) for w in self.children("status")}


def worker_info(http: str | None = None) -> dict:
    return {"host": socket.gethostname(), "pid": os.getpid(), "http": http}
