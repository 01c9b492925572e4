"""Brokers forked from the warm interpreter (tests/support/warm_start.py) behave, to a test,
as exec'd ones: the same exit codes, and signals reach them. (That they see the test's
environment, set after the interpreter started, the S3 tests show: their credentials are.)"""
import os
import signal

from tests.support import warm_start
from tests.support.broker_process import BrokerProcess


def test_a_forked_broker_exits_as_an_execd_one_would(tmp_path):
    stopped = BrokerProcess(str(tmp_path / "stopped")).start()
    assert isinstance(stopped.process, warm_start.ForkedProcess)
    os.kill(stopped.process.pid, signal.SIGSTOP)
    assert stopped.process.poll() is None
    os.kill(stopped.process.pid, signal.SIGCONT)
    assert stopped.stop() == 0
    killed = BrokerProcess(str(tmp_path / "killed")).start()
    process = killed.process
    killed.kill()
    assert process.returncode == -signal.SIGKILL


def test_a_broker_whose_start_up_environment_differs_is_execd(monkeypatch):
    assert warm_start.can_fork(())
    assert not warm_start.can_fork(("ip", "netns", "exec", "ns"))
    monkeypatch.setenv("LD_PRELOAD", "libfaketime.so.1")
    assert not warm_start.can_fork(())
