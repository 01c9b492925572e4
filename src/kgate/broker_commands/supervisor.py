"""``kgate serve --workers N``: N broker processes on one host, one cluster, one core each.

A broker is one Python process, so one core. This process, the supervisor, runs none of the
Kafka protocol: it holds the embedded metadata store and serves it to its workers over a
Unix socket (metadata/stores/shared_server.py), starts the workers, starts a worker again
when it dies, and stops them all on SIGTERM. Each worker is a broker of the cluster as a
ZooKeeper-backed broker is: its own id (``broker.id`` + its index), its own ports (each
listener's port + its index; port 0 stays 0, a free port each), its partitions claimed as
ephemeral nodes of its connection, so a worker killed with kill -9 loses its claims the
moment the kernel closes its socket and the other workers take its partitions.

Why a socket to one process rather than SQLite shared by all workers: SQLite has no
sessions and no change notices, so ephemeral claims would be leases renewed by every
worker and watches a poll of the file; failover would wait for a lease to run out and
every change for the next poll. Over the socket a dead worker's claims go at once and
watches fire from the writes, as in ZooKeeper, for one small protocol.
"""
import asyncio
import contextlib
import ctypes
import logging
import os
import shutil
import signal
import sys
import tempfile
from dataclasses import dataclass, replace
from functools import partial

from kgate.gateway.broker import EMBEDDED_STORE_FILE
from kgate.gateway.config import SHARED_METADATA, Listener, Settings
from kgate.metadata.stores.embedded import EmbeddedMetadataStore
from kgate.metadata.stores.shared_server import StoreServer

log = logging.getLogger(__name__)

EXIT_USAGE = 2  # serve's: a worker that exits with it will not do better started again
STOP_SECONDS = 30  # a worker's clean stop: drain, seal, hand over
FIRST_RESTART_SECONDS, MAX_RESTART_SECONDS = 0.5, 30.0
STEADY_SECONDS = 60  # a worker that ran this long before dying is started again without delay
_PR_SET_PDEATHSIG = 1


def worker_count(text: str) -> int:
    """``--workers``: a number of at least 1, or ``auto`` for one per core."""
    if text == "auto":
        return os.cpu_count() or 1
    count = int(text)
    if count < 1:
        raise ValueError("--workers must be at least 1")
    return count


def _moved(address: str, index: int) -> str:
    """HOST:PORT with the port moved up by ``index`` (port 0 stays 0: a free port each)."""
    host, _, port = address.rpartition(":")
    return f"{host}:{int(port) + index if int(port) else 0}"


@dataclass(frozen=True)
class WorkerPlan:
    """What the supervisor runs: the ``serve`` command line every worker shares."""
    command: tuple[str, ...]
    settings: Settings
    count: int

    def command_of(self, index: int, socket_path: str) -> list[str]:
        settings = self.settings
        command = [*self.command, "--worker", str(index)]
        for listener in settings.listeners:
            moved = replace(listener, port=listener.port + index if listener.port else 0)
            command += ["--listen", _listener_text(moved)]
        worker_settings = {"kgate.metadata": SHARED_METADATA + socket_path,
                           "broker.id": max(settings["broker.id"], 0) + index}
        for name in ("advertised.listeners", "kgate.metrics.listener"):
            if settings[name]:
                worker_settings[name] = _moved(settings[name], index)
        for name, value in worker_settings.items():
            command += ["--set", f"{name}={value}"]
        return command


def _listener_text(listener: Listener) -> str:
    host = f"[{listener.host}]" if ":" in listener.host else listener.host
    return f"{listener.security_protocol}://{host}:{listener.port}"


def _die_with_supervisor() -> None:
    """In the worker before it runs: the kernel kills it when the supervisor dies, however it
    dies, so no worker outlives the store its claims live in."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else (lambda *_: 0)


class Worker:
    def __init__(self, index: int, command: list[str]):
        self.index = index
        self.command = command
        self.process: asyncio.subprocess.Process | None = None
        self.refused = False  # exited with a usage error: starting it again would not help

    async def keep_running(self, stop: asyncio.Event) -> None:
        delay = FIRST_RESTART_SECONDS
        while not stop.is_set():
            loop = asyncio.get_running_loop()
            began = loop.time()
            self.process = await asyncio.create_subprocess_exec(*self.command, preexec_fn=_die_with_supervisor)
            log.info("worker %d started (pid %d)", self.index, self.process.pid)
            code = await self.process.wait()
            if stop.is_set():
                log.info("worker %d (pid %d) stopped with %d", self.index, self.process.pid, code)
                return
            if code == EXIT_USAGE:
                log.error("worker %d exited with a configuration error: stopping every worker", self.index)
                self.refused = True
                stop.set()
                return
            delay = FIRST_RESTART_SECONDS if loop.time() - began > STEADY_SECONDS else delay
            log.error("worker %d (pid %d) exited with %d: starting it again in %.1f s",
                      self.index, self.process.pid, code, delay)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await stop.wait()
            delay = min(delay * 2, MAX_RESTART_SECONDS)

    def signal(self, sig: int) -> None:
        """Signal the worker by its PID, if it is running."""
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(sig)


def _replace_silent(workers: list[Worker], pid: int) -> None:
    """A worker whose session ended for silence is killed (a stopped process too): it is
    started again as after any death, and must not wake up still serving what it held."""
    for worker in workers:
        if worker.process is not None and worker.process.pid == pid:
            log.error("worker %d (pid %d) went silent: killing it", worker.index, pid)
            worker.signal(signal.SIGKILL)


async def supervise(plan: WorkerPlan) -> int:
    """Serve the store, run the workers until SIGTERM or SIGINT, stop them; serve's exit code."""
    os.makedirs(plan.settings.data_dir, exist_ok=True)
    store = EmbeddedMetadataStore(os.path.join(plan.settings.data_dir, EMBEDDED_STORE_FILE))
    socket_dir = tempfile.mkdtemp(prefix="kgate-workers-")  # short, private: a socket path has ~100 bytes
    workers: list[Worker] = []
    server = StoreServer(store, os.path.join(socket_dir, "metadata.sock"),
                         plan.settings["broker.session.timeout.ms"] / 1000, partial(_replace_silent, workers))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await server.start()
        workers += [Worker(index, plan.command_of(index, server.socket_path)) for index in range(plan.count)]
        log.info("supervising %d workers (broker ids %d-%d) over metadata in %s", plan.count,
                 max(plan.settings["broker.id"], 0), max(plan.settings["broker.id"], 0) + plan.count - 1,
                 plan.settings.data_dir)
        running = [asyncio.create_task(worker.keep_running(stop)) for worker in workers]
        await stop.wait()
        log.info("stopping %d workers", plan.count)
        for worker in workers:
            worker.signal(signal.SIGTERM)
        _, late = await asyncio.wait(running, timeout=STOP_SECONDS)
        for worker, task in zip(workers, running):
            if task in late:
                log.error("worker %d did not stop within %d s: killing it", worker.index, STOP_SECONDS)
                worker.signal(signal.SIGKILL)
        await asyncio.gather(*running)
        return EXIT_USAGE if any(worker.refused for worker in workers) else 0
    finally:
        await server.close()
        await store.close()
        shutil.rmtree(socket_dir, ignore_errors=True)
