"""The faults harness's TCP proxy (tests/faults/proxy.py) in front of one server on 127.0.0.1:
a test slows or breaks what goes through it, on command. Started and stopped by PID."""
import json
import os
import socket
import subprocess
import sys

from .broker_process import terminate
from .member_process import wait_for
from .ports import free_ports

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def tell_proxy(control: str, **settings: float) -> None:
    """Set a running proxy's ``delay_ms``, ``jitter_ms`` or ``loss``; returns once it took them."""
    with socket.socket(socket.AF_UNIX) as connection:
        connection.settimeout(10)
        connection.connect(control)
        connection.sendall(json.dumps(settings).encode() + b"\n")
        connection.recv(16)


class DelayProxy:
    def __init__(self, target: str, work_dir: str):
        self.target = target
        self.port = free_ports(1)[0]
        self.control = os.path.join(work_dir, "proxy.sock")
        self.process: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "DelayProxy":
        self.process = subprocess.Popen([sys.executable, "-m", "tests.faults.proxy", self.address, self.target,
                                         self.control], cwd=_ROOT, stdout=subprocess.DEVNULL)
        wait_for(lambda: os.path.exists(self.control), 30, "the proxy's control socket")
        return self

    def set(self, **settings: float) -> None:
        tell_proxy(self.control, **settings)

    def stop(self) -> None:
        if self.process is not None:
            terminate(self.process, 10)
