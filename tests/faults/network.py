"""Network namespaces for a fault run: one per server and one for the clients, each joined
by a veth pair to a bridge in a hub namespace of the run's own.

Nothing is added to the machine's own namespace: every address lives inside the run's
namespaces, whose names start with a prefix unique to the run (it carries the harness's
PID, so a later run can tell a crashed run's leftovers from a live run's namespaces).
Partitions are drawn either by taking a host's link down on the hub (cut off from
everyone) or with nftables inside the hosts (who may not talk to whom).
"""
import ctypes
import os
import re
import secrets
import subprocess
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

SUBNET = "10.77.0"
CLONE_NEWNET = 0x40000000
_PREFIX = re.compile(r"^kf([0-9a-f]+)x[0-9a-f]{4}-")
_T = TypeVar("_T")


def ip(*args: str, input: str | None = None) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, input=input)


@dataclass(frozen=True)
class Host:
    name: str
    namespace: str
    address: str

    def wrap(self, *command: str) -> list[str]:
        """``command`` run inside this host's namespace (``ip netns exec`` execs it: same PID)."""
        return ["ip", "netns", "exec", self.namespace, *command]

    def call(self, function: Callable[[], _T], timeout: float = 60) -> _T:
        """``function`` run on a thread that has entered this host's namespace, so the sockets it
        opens (and the threads it starts, such as librdkafka's) live there."""
        outcome: list = []

        def run() -> None:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = os.open(f"/run/netns/{self.namespace}", os.O_RDONLY)
            try:
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    outcome.append(OSError(ctypes.get_errno(), f"setns into {self.namespace}"))
                    return
            finally:
                os.close(fd)
            try:
                outcome.append((function(),))
            except Exception as exc:  # noqa: BLE001 - raised again on the caller's thread
                outcome.append(exc)

        thread = threading.Thread(target=run, name=f"in-{self.name}", daemon=True)
        thread.start()
        thread.join(timeout)
        if not outcome:
            raise TimeoutError(f"call in {self.name} still running after {timeout} s")
        if isinstance(outcome[0], BaseException):
            raise outcome[0]
        return outcome[0][0]


class Network:
    def __init__(self):
        self.prefix = f"kf{os.getpid():x}x{secrets.token_hex(2)}-"
        self.hub = self.prefix + "hub"
        self.hosts: dict[str, Host] = {}
        self._filtered: set[str] = set()

    def __enter__(self) -> "Network":
        sweep_leftovers()
        ip("netns", "add", self.hub)
        ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
        ip("-n", self.hub, "link", "set", "br0", "up")
        return self

    def __exit__(self, *exc_info) -> None:
        self.remove()

    def add(self, name: str) -> Host:
        host = Host(name, self.prefix + name, f"{SUBNET}.{len(self.hosts) + 2}")
        ip("netns", "add", host.namespace)
        self.hosts[name] = host
        ip("-n", self.hub, "link", "add", self._port(host), "type", "veth", "peer", "name", "eth0", "netns",
           host.namespace)
        ip("-n", self.hub, "link", "set", self._port(host), "master", "br0", "up")
        ip("-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", "eth0")
        ip("-n", host.namespace, "link", "set", "eth0", "up")
        ip("-n", host.namespace, "link", "set", "lo", "up")
        return host

    def _port(self, host: Host) -> str:
        return f"v-{host.name}"[:15]

    def isolate(self, host: Host) -> None:
        """Cut ``host`` off from every other host: its port on the bridge goes down."""
        ip("-n", self.hub, "link", "set", self._port(host), "down")

    def partition(self, *sides: Iterable[Host]) -> None:
        """Only hosts on the same side talk; a host on no side talks to everyone."""
        groups = [list(side) for side in sides]
        for side in groups:
            others = [h.address for g in groups if g is not side for h in g]
            for host in side:
                self._drop(host, others)

    def cut(self, host: Host, peers: Iterable[Host]) -> None:
        """``host`` and ``peers`` no longer talk to each other; everyone else is unaffected."""
        peers = list(peers)
        self._drop(host, [p.address for p in peers])
        for peer in peers:
            self._drop(peer, [host.address])

    def _drop(self, host: Host, addresses: list[str]) -> None:
        if not addresses:
            return
        table = "add table inet kfault\n"
        if host.namespace not in self._filtered:
            table += ("add chain inet kfault input { type filter hook input priority 0; }\n"
                      "add chain inet kfault output { type filter hook output priority 0; }\n")
        listed = ", ".join(addresses)
        rules = (f"add rule inet kfault input ip saddr {{ {listed} }} drop\n"
                 f"add rule inet kfault output ip daddr {{ {listed} }} drop\n")
        ip("netns", "exec", host.namespace, "nft", "-f", "-", input=table + rules)
        self._filtered.add(host.namespace)

    def heal(self) -> None:
        """Every link up, every filter gone."""
        for host in self.hosts.values():
            ip("-n", self.hub, "link", "set", self._port(host), "up")
        for namespace in self._filtered:
            ip("netns", "exec", namespace, "nft", "delete", "table", "inet", "kfault")
        self._filtered.clear()

    def remove(self) -> None:
        for namespace in [h.namespace for h in self.hosts.values()] + [self.hub]:
            _delete(namespace)
        self.hosts.clear()


def _delete(namespace: str) -> None:
    """Stop what still runs in ``namespace`` (by PID: only this harness starts processes there),
    then delete it; deleting a namespace takes its veth pairs with it."""
    listed = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True).stdout.split()
    for pid in listed:
        try:
            os.kill(int(pid), 9)
        except ProcessLookupError:
            pass
    subprocess.run(["ip", "netns", "del", namespace], capture_output=True)


def sweep_leftovers() -> None:
    """Namespaces of runs whose harness is gone (killed before it could clean up)."""
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    for name in names:
        match = _PREFIX.match(name)
        if match and not os.path.exists(f"/proc/{int(match.group(1), 16)}"):
            _delete(name)
