"""Brokers forked from an interpreter that has imported kgate already.

The suite starts brokers hundreds of times, and each ``python -m kgate serve`` spends about
a second of CPU importing kgate before it listens: on a 2-core machine that was minutes of
the suite. A *warm interpreter* (one per test process, started on first use) imports the
broker once and forks each broker from there: the child is the same program with the same
arguments, environment and working directory, only without the imports, so what a test sees
of it (its PID, its ready line, its log, its exit code, signals) is what it sees of an
exec'd one.

The interpreter is single-threaded when it forks (importing kgate starts no thread; fork
with threads running is what makes forking unsafe). Anything that must be set before an
interpreter starts (``LD_PRELOAD``, ``PYTHON*`` variables) cannot be given to a fork, so a
broker whose environment differs there, or that runs under a wrapper command, is exec'd as
before (:func:`can_fork`).

Exit codes reach the test through a pipe per child: the interpreter reaps its children
(it is their parent) and writes each one's code, in :class:`subprocess.Popen`'s convention
(negative for a signal), into that child's pipe. Signals go through a pidfd the interpreter
opened before it could reap the child, so a test never signals a process that merely
reuses a broker's PID.
"""
import atexit
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Read by the interpreter at start-up, so a fork cannot take a different value.
_AT_START = ("LD_", "PYTHON", "MALLOC_")
_MESSAGE = 1 << 20


class ForkedProcess:
    """What tests use of :class:`subprocess.Popen`, for a process forked by the warm interpreter."""

    def __init__(self, pid: int, stdout, status_fd: int, pidfd: int):
        self.pid = pid
        self.stdout = stdout
        self.returncode: int | None = None
        self._status = status_fd
        self._pidfd = pidfd

    def poll(self) -> int | None:
        if self.returncode is None:
            self._take_status(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not self._take_status(remaining) and deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout)
        return self.returncode

    def _take_status(self, timeout: float | None) -> bool:
        """Read the exit code if it is there within ``timeout``; whether anything arrived."""
        with selectors.DefaultSelector() as selector:
            selector.register(self._status, selectors.EVENT_READ)
            if not selector.select(timeout):
                return False
        code = b""
        while chunk := os.read(self._status, 64):  # the interpreter closes the pipe right after the code
            code += chunk
        os.close(self._status)
        # No code before the end: the warm interpreter itself died; the child is an orphan now.
        self.returncode = int(code) if code else _orphan_status(self._pidfd)
        os.close(self._pidfd)
        return True

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            signal.pidfd_send_signal(self._pidfd, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _orphan_status(pidfd: int) -> int:
    try:
        signal.pidfd_send_signal(pidfd, 0)
    except ProcessLookupError:
        return -signal.SIGKILL  # its code went with the interpreter
    raise RuntimeError("the warm interpreter died and left a broker it forked running")


class _Interpreter:
    """The test process's end of the warm interpreter."""

    def __init__(self, env: dict):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.process = subprocess.Popen([sys.executable, "-m", "tests.support.warm_start", str(theirs.fileno())],
                                        pass_fds=[theirs.fileno()], cwd=ROOT, env=env, stdin=subprocess.DEVNULL)
        theirs.close()
        self.socket = ours
        self.owner = os.getpid()
        self.lock = threading.Lock()  # tests start a cluster's brokers from several threads

    def spawn(self, argv: list[str], cwd: str, stderr_fd: int) -> ForkedProcess:
        read, write = os.pipe()
        request = json.dumps({"argv": argv, "cwd": cwd, "env": dict(os.environ)}).encode()
        try:
            with self.lock:
                socket.send_fds(self.socket, [request], [write, stderr_fd])
                reply, fds, _, _ = socket.recv_fds(self.socket, _MESSAGE, 2)
        finally:
            os.close(write)
        if not reply:
            os.close(read)
            raise RuntimeError(f"the warm interpreter (pid {self.process.pid}) has gone; see the test's output")
        status, pidfd = fds
        return ForkedProcess(json.loads(reply)["pid"], os.fdopen(read, "rb", buffering=0), status, pidfd)

    def stop(self) -> None:
        if self.owner != os.getpid():
            return  # a fork of the test process: the interpreter is its parent's
        self.socket.close()  # the interpreter leaves when its socket closes
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# The environment forks were enabled in (None: not enabled), and the interpreter, started on first use.
_env: dict | None = None
_interpreter: _Interpreter | None = None
_starting = threading.Lock()


def enable() -> None:
    """Fork this process's brokers from here on, from an interpreter with today's environment."""
    global _env
    _env = dict(os.environ)


def can_fork(wrapper: tuple) -> bool:
    """Whether a broker can be forked rather than exec'd: forks are enabled in this process,
    it runs under no wrapper command, and nothing read at interpreter start-up differs."""
    if _env is None or wrapper:
        return False
    env = os.environ
    return not any(key.startswith(_AT_START) and env.get(key) != _env.get(key) for key in set(env) | set(_env))


def spawn(argv: list[str], cwd: str, stderr_fd: int) -> ForkedProcess:
    """``python -m kgate *argv`` forked from the warm interpreter (when :func:`can_fork`)."""
    global _interpreter
    with _starting:
        if _interpreter is None or _interpreter.owner != os.getpid():
            assert _env is not None, "warm_start.enable() first"
            _interpreter = _Interpreter(_env)
            atexit.register(_interpreter.stop)
        interpreter = _interpreter
    return interpreter.spawn(argv, cwd, stderr_fd)


def run(argv: list[str], timeout: float, check: bool = False) -> subprocess.CompletedProcess:
    """``python -m kgate *argv`` to its end, its output captured as text, as ``subprocess.run``
    with ``capture_output``: forked when :func:`can_fork` (a ``kgate users`` exec'd spends a
    second of CPU on imports the warm interpreter has made; the suite runs it fifty times)."""
    if not can_fork(()):
        return subprocess.run([sys.executable, "-m", "kgate", *argv], capture_output=True, text=True,
                              timeout=timeout, cwd=ROOT, stdin=subprocess.DEVNULL, check=check)
    deadline = time.monotonic() + timeout
    with tempfile.TemporaryFile() as stderr:
        process = spawn(argv, ROOT, stderr.fileno())
        try:
            out = _read_to_end(process.stdout, deadline)
            code = process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
        stderr.seek(0)
        done = subprocess.CompletedProcess(["kgate", *argv], code, out.decode(), stderr.read().decode())
    if check:
        done.check_returncode()
    return done


def _read_to_end(stream, deadline: float) -> bytes:
    """All a child writes to ``stream`` until it closes it (it exits), or TimeoutExpired at ``deadline``."""
    chunks = []
    with stream, selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        while True:
            if not selector.select(max(0.0, deadline - time.monotonic())):
                raise subprocess.TimeoutExpired("kgate", deadline)
            chunk = os.read(stream.fileno(), _MESSAGE)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)


# The warm interpreter's side.

def _serve(control: socket.socket) -> None:
    """Fork a broker per request until the test process closes the socket; reap them all."""
    # The point of this process: every broker it forks starts with these imported.
    import kgate.broker_commands.serve  # noqa: F401
    import kgate.command  # noqa: F401

    statuses: dict[int, int] = {}  # child PID -> the write end of its status pipe
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so SIGCHLD reaches the wake-up pipe
    with selectors.DefaultSelector() as selector:
        selector.register(control, selectors.EVENT_READ)
        selector.register(wake_read, selectors.EVENT_READ)
        while True:
            for key, _ in selector.select():
                if key.fileobj == wake_read:
                    os.read(wake_read, 4096)
                    _reap(statuses)
                elif not _fork_one(control, statuses):
                    return


def _reap(statuses: dict[int, int]) -> None:
    while statuses:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        fd = statuses.pop(pid, None)
        if fd is not None:
            os.write(fd, str(os.waitstatus_to_exitcode(status)).encode())
            os.close(fd)


def _fork_one(control: socket.socket, statuses: dict[int, int]) -> bool:
    """Serve one request; False when the test process has gone."""
    message, fds, _, _ = socket.recv_fds(control, _MESSAGE, 2)
    if not message:
        return False
    request = json.loads(message)
    status_read, status_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        _run_child(request, fds)
    pidfd = os.pidfd_open(pid)  # before the child can be reaped: it names this process and no other
    for fd in fds:
        os.close(fd)
    statuses[pid] = status_write
    socket.send_fds(control, [json.dumps({"pid": pid}).encode()], [status_read, pidfd])
    os.close(status_read)
    os.close(pidfd)
    return True


def _run_child(request: dict, fds: list[int]) -> None:
    """Become ``python -m kgate *argv`` in the test's environment and directory; never return."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        stdout, stderr = fds
        null = os.open(os.devnull, os.O_RDONLY)
        for fd, target in ((null, 0), (stdout, 1), (stderr, 2)):
            os.dup2(fd, target)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # as exec with close_fds: the interpreter's own, other children's
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = ["kgate", *request["argv"]]
        from kgate.command import main

        code = main(request["argv"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        import logging

        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


if __name__ == "__main__":
    _serve(socket.socket(fileno=int(sys.argv[1])))
