"""Real ZooKeeper servers for tests: standalone or a loopback ensemble, by scripts/zookeeper.

Each server listens on 127.0.0.1 with free ports, keeps its data in a directory the
test owns and is stopped by PID. Ready means it answers ``srvr`` as standalone,
leader or follower *and* its own process is still alive (a leftover server on the
same port could otherwise answer for one that already exited).
"""
import os
import socket
import subprocess
import time

import pytest

from .broker_process import exited_error, terminate
from .ports import free_ports

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(_ROOT, "scripts", "zookeeper")


def four_letter(port: int, command: str, timeout: float = 1.0) -> str:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(command.encode())
            chunks = []
            while chunk := s.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


class ZooKeeperServer:
    def __init__(self, data_dir: str, port: int, wrapper: tuple[str, ...] = ()):
        """``wrapper``: a command the server runs under that execs it (``ip netns exec NS``)."""
        self.data_dir = data_dir
        self.port = port
        self.wrapper = wrapper
        self.process: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "ZooKeeperServer":
        os.makedirs(self.data_dir, exist_ok=True)
        log = open(os.path.join(self.data_dir, "server.log"), "ab")
        self.process = subprocess.Popen([*self.wrapper, SCRIPT, self.data_dir, str(self.port)], stdout=log, stderr=log)
        log.close()
        return self

    def serving(self) -> bool:
        mode = four_letter(self.port, "srvr")
        return self.alive() and any(f"Mode: {m}" in mode for m in ("standalone", "leader", "follower"))

    def wait_serving(self, timeout: float = 30.0) -> "ZooKeeperServer":
        deadline = time.monotonic() + timeout
        while not self.serving():
            if not self.alive():
                raise exited_error("ZooKeeper", os.path.join(self.data_dir, "server.log"))
            if time.monotonic() > deadline:
                raise RuntimeError(f"ZooKeeper not serving within {timeout} s; see {self.data_dir}/server.log")
            time.sleep(0.1)
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        if self.process is not None:
            terminate(self.process, 10)
            self.process = None


class Ensemble:
    """``size`` servers on loopback, each with client, quorum and election ports of its own; or,
    given ``hosts`` (one namespace address each) and ``wrappers`` (the commands that enter
    them), one server per namespace on ZooKeeper's usual ports, listening on all of its
    namespace's addresses."""

    def __init__(self, base_dir: str, size: int = 3, hosts: list[str] | None = None,
                 wrappers: list[tuple[str, ...]] | None = None):
        ports = free_ports(3 * size) if hosts is None else [2181, 2888, 3888] * size
        hosts = hosts or ["127.0.0.1"] * size
        self.servers = []
        peers = [f"server.{i + 1}={hosts[i]}:{ports[3 * i + 1]}:{ports[3 * i + 2]}" for i in range(size)]
        for i in range(size):
            data_dir = os.path.join(base_dir, f"zk{i + 1}")
            os.makedirs(data_dir, exist_ok=True)
            with open(os.path.join(data_dir, "myid"), "w") as fh:
                fh.write(f"{i + 1}\n")
            listen = ["clientPortAddress=127.0.0.1"] if wrappers is None else []
            with open(os.path.join(data_dir, "zoo.cfg"), "w") as fh:
                fh.write("\n".join([
                    "tickTime=500", "initLimit=20", "syncLimit=10", f"dataDir={data_dir}",
                    f"clientPort={ports[3 * i]}", *listen, "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr", "minSessionTimeout=1000", "maxSessionTimeout=60000",
                    *peers, ""]))
            self.servers.append(ZooKeeperServer(data_dir, ports[3 * i], wrappers[i] if wrappers else ()))
        self.hosts = hosts

    @property
    def address(self) -> str:
        return ",".join(f"{host}:{s.port}" for host, s in zip(self.hosts, self.servers))

    def start(self, timeout: float = 60.0) -> "Ensemble":
        for server in self.servers:
            server.start()
        for server in self.servers:
            server.wait_serving(timeout)
        return self

    def stop(self) -> None:
        for server in self.servers:
            server.stop()


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory):
    """A three-server ensemble shared by a module's clusters (each in a chroot of its own)."""
    zookeeper = Ensemble(str(tmp_path_factory.mktemp("zookeeper"))).start()
    yield zookeeper
    zookeeper.stop()
