"""Ports for servers a test starts on a port it names (ZooKeeper, SeaweedFS, Kafka, proxies).

A port found free now is bound by the server only later, seconds later for a JVM or SeaweedFS
(whose filer binds its gRPC port last), and in that gap any outgoing connection on the machine
may take it as its local port if it lies in the kernel's ephemeral range: a whole suite makes
thousands, and a SeaweedFS once exited "bind: address already in use" so. Ports are therefore
drawn at random from below that range, where the kernel never hands one out by itself, and
checked bindable (with their twin, where a server binds port + offset too).
"""
import os
import socket

_FLOOR = 10000  # below it sit well-known services' ports
_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"


def _ephemeral_floor() -> int:
    try:
        with open(_RANGE_FILE) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _kernel_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(count: int, twin: int = 0) -> list[int]:
    """``count`` distinct ports free on 127.0.0.1 now, each with ``port + twin`` free too
    (``twin``: the offset of a second port the server binds, 0 for none), all below the
    ephemeral range unless the machine leaves too little room there."""
    ceiling = _ephemeral_floor() - twin
    ports: list[int] = []
    while len(ports) < count:
        if ceiling - _FLOOR >= 1000:
            port = _FLOOR + int.from_bytes(os.urandom(2), "big") % (ceiling - _FLOOR)
        else:
            port = _kernel_port()
        if port + twin <= 65535 and port not in ports and _bindable(port) and (twin == 0 or _bindable(port + twin)):
            ports.append(port)
    return ports
