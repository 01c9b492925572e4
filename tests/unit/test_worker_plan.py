"""What ``kgate serve --workers N`` gives each worker: its id, its ports, the supervisor's store,
and the stdout it shares with the others."""
import io
import sys

import pytest

from kgate.broker_commands.supervisor import WorkerPlan, worker_count
from kgate.gateway.config import Settings
from kgate.gateway.server import _announce


def plan(listen, *overrides, count=3):
    return WorkerPlan(("kgate", "serve", "--data-dir", "d"), Settings.load(listen, "d", None, list(overrides)), count)


def sets(command: list[str]) -> dict[str, str]:
    return dict(command[i + 1].split("=", 1) for i, arg in enumerate(command) if arg == "--set")


def listens(command: list[str]) -> list[str]:
    return [command[i + 1] for i, arg in enumerate(command) if arg == "--listen"]


def test_worker_i_is_broker_id_plus_i_on_each_listener_port_plus_i():
    workers = plan(["127.0.0.1:9092", "SASL_PLAINTEXT://0.0.0.0:9192"], "broker.id=10",
                   "advertised.listeners=kafka.example:19092", "kgate.metrics.listener=127.0.0.1:9404")
    command = workers.command_of(2, "/run/s.sock")
    assert command[:4] == ["kgate", "serve", "--data-dir", "d"] and command[4:6] == ["--worker", "2"]
    assert listens(command) == ["PLAINTEXT://127.0.0.1:9094", "SASL_PLAINTEXT://0.0.0.0:9194"]
    assert sets(command) == {"kgate.metadata": "shared:/run/s.sock", "broker.id": "12",
                             "advertised.listeners": "kafka.example:19094", "kgate.metrics.listener": "127.0.0.1:9406"}


def test_port_0_stays_0_and_a_derived_id_starts_at_0():
    command = plan(["127.0.0.1:0"]).command_of(1, "/s")
    assert listens(command) == ["PLAINTEXT://127.0.0.1:0"]
    assert sets(command) == {"kgate.metadata": "shared:/s", "broker.id": "1"}


def test_the_worker_count():
    assert worker_count("4") == 4
    assert worker_count("auto") >= 1
    for bad in ("0", "-1"):
        with pytest.raises(ValueError):
            worker_count(bad)


def test_workers_need_the_embedded_store(capsys, tmp_path):
    from kgate.command import main

    assert main(["serve", "--workers", "2", "--data-dir", str(tmp_path),
                 "--metadata", "zookeeper://127.0.0.1:2181"]) == 2
    assert "--workers runs one cluster over the embedded metadata store" in capsys.readouterr().err


class _Writes(io.RawIOBase):
    """A raw stream that keeps each write apart, as the pipe a supervisor's workers share does."""

    def __init__(self):
        self.writes: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.writes.append(bytes(data))
        return len(data)


def test_a_workers_ready_line_is_one_write_on_an_unbuffered_stdout(monkeypatch):
    """Two workers' ready lines once reached the test reading them run into one, then an empty
    line: with PYTHONUNBUFFERED a print writes its text and its newline apart."""
    raw = _Writes()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, write_through=True))
    _announce("kgate listening on 127.0.0.1:9092")
    assert raw.writes == [b"kgate listening on 127.0.0.1:9092\n"]
