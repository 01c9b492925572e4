"""``kgate mirror serve``: one worker of the mirror, on any host, as many as wanted.

A worker registers itself (an ephemeral node: it vanishes when the worker dies or
loses its session), runs for controller (only the elected one assigns), and copies
what the assignment gives it. Routes and the assignment arrive through watches, so a
route added from the command line or the HTTP API takes effect without a restart.
If its ZooKeeper session is lost the worker stops copying at once (its partitions are
someone else's now) and registers again when it is back.
"""
import logging
import os
import signal
import socket
import threading
import time

from kazoo.client import KazooState

from .config import MirrorConfig
from .controller import Controller
from .http_api import serve_http
from .metrics import MirrorMetrics
from .replicator import Replicator
from .state import MirrorState, worker_info

log = logging.getLogger(__name__)


class Worker:
    def __init__(self, config: MirrorConfig, worker_id: str, http: str | None = None):
        self.config = config
        self.worker_id = worker_id
        self.http = http
        self.stopping = threading.Event()
        self.metrics = MirrorMetrics()
        self.state = MirrorState(config)
        self._changed = threading.Event()
        self._assignment: dict = {"generation": 0, "workers": {}}
        self._session_lost = threading.Event()
        self.replicator: Replicator | None = None

    def start(self) -> "Worker":
        self.state.connect()
        self.state.client.add_listener(self._session_changed)
        self.state.register_worker(self.worker_id, worker_info(self.http))
        self.replicator = Replicator(self.config, self.state, self.metrics, self.worker_id)
        self.state.watch_routes(self._changed.set)
        self.state.watch_assignment(self._assigned)
        controller = Controller(self.config, self.state, self.metrics, self.stopping, self.worker_id)
        threading.Thread(target=self._campaign, args=(controller,), name="mirror-controller", daemon=True).start()
        return self

    def _campaign(self, controller: Controller) -> None:
        while not self.stopping.is_set():
            try:
                self.state.election(self.worker_id).run(controller.lead)
            except Exception as exc:  # lost session mid-election: stand again once reconnected
                log.warning("controller election interrupted: %s", exc)
            self.stopping.wait(1.0)

    def _assigned(self, assignment: dict) -> None:
        self._assignment = assignment
        self._changed.set()

    def _session_changed(self, session: str) -> None:
        if session == KazooState.LOST:
            self._session_lost.set()
            self._changed.set()

    def run(self) -> None:
        replicator = self.replicator
        assert replicator is not None
        status_every = self.config["status.interval.ms"] / 1000
        next_status = 0.0
        while not self.stopping.is_set():
            if self._changed.is_set():
                self._changed.clear()
                self._apply()
            replicator.step()
            if time.monotonic() >= next_status and self.state.client.connected:
                next_status = time.monotonic() + status_every
                self.state.put_status(self.worker_id, replicator.status())
        replicator.close()

    def _apply(self) -> None:
        replicator = self.replicator
        assert replicator is not None
        if self._session_lost.is_set():
            log.warning("ZooKeeper session lost: stopping every partition until registered again")
            replicator.set_work({}, set())
            while not self.stopping.is_set() and not self.state.client.connected:
                self.stopping.wait(0.2)
            if self.stopping.is_set():
                return
            self._session_lost.clear()
            self.state.register_worker(self.worker_id, worker_info(self.http))
            return
        mine = self._assignment.get("workers", {}).get(self.worker_id, [])
        replicator.set_work(self.state.routes(), {(r, t, int(p)) for r, t, p in mine})

    def stop(self) -> None:
        self.stopping.set()

    def close(self) -> None:
        self.state.close()


def serve(config: MirrorConfig, args) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    worker_id = args.worker_id or f"{socket.gethostname()}-{os.getpid()}"
    worker = Worker(config, worker_id, args.http)
    if args.metrics:
        print(f"kgate mirror metrics on http://{worker.metrics.serve(args.metrics)}/metrics", flush=True)
    worker.start()
    if args.http:
        server = serve_http(args.http, config, worker.state)
        host, port = server.socket.getsockname()[:2]  # an IP socket's name: (str, int)
        print(f"kgate mirror http api on http://{host}:{port}", flush=True)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: worker.stop())
    print(f"kgate mirror worker {worker_id} running", flush=True)
    try:
        worker.run()
    finally:
        worker.close()
