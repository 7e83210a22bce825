"""Process hygiene for the long-lived JVM children of the test harness (Kafka, S3Proxy, registry).

What every such child needs, in one place: free ports on 127.0.0.1, a start in its own session
with its output appended to a log file, a bounded wait until it is ready, a bounded stop of its
process group, and the tail of its log for the error that says why it did not come up.
:class:`Service` gives the harnesses their ``with`` form (start on entry, close on exit);
:class:`JvmServer` is the whole life of a one-JVM server (S3Proxy, the Schema Registry).

Invariants:
- A child leads its own process group (``start_new_session``): signals go to the whole group, so
  nothing the JVM forked survives it, and Ctrl-C in a terminal reaches Python only, which then
  stops the children in order instead of every JVM racing its own shutdown.
- On Linux a child started from the main thread gets SIGKILL when the Python process dies, even
  when it is SIGKILLed itself (parent-death signal); from other threads no such hook is set,
  because the kernel sends that signal when the forking *thread* ends.
- :func:`stop` always returns with every child reaped: SIGTERM to all groups at once, then each
  child gets its own grace, counted from the signal, before SIGKILL.
- Waiting is polling with a deadline; a child that exits while being waited for is reported by
  the readiness check, not by a timeout.
- A start that lost a port race is retried once, from scratch; a failed start is closed before
  its error propagates.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

__all__ = [
    "BIND_ERRORS",
    "SMALL_SERVER_JVM_FLAGS",
    "JvmServer",
    "Service",
    "accepts",
    "free_ports",
    "launch",
    "lost_bind_race",
    "signal_group",
    "start_with_one_retry",
    "stop",
    "tail",
    "wait_until_ready",
]

# What a JVM logs when the port it was given was taken between picking and binding it.
BIND_ERRORS = ("BindException", "Address already in use")

# For a server that handles a test's few small requests: a small heap and a C1-only JIT, which
# starts faster and uses less CPU than a tiered one on a shared machine.
SMALL_SERVER_JVM_FLAGS = (
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-XX:+ExitOnOutOfMemoryError",
)

_PR_SET_PDEATHSIG = 1


class Service:
    """A harness that starts on entering a ``with`` block and closes on leaving it."""

    def start(self) -> Self:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class JvmServer(Service):
    """One JVM child serving on a free port of 127.0.0.1 out of a temporary directory.

    The life shared by :class:`~kafka_sink.testing.s3.LocalS3` and
    :class:`~kafka_sink.testing.local_schema_registry.LocalSchemaRegistry`: :meth:`start` checks
    what must exist first (:meth:`_resolve`), then makes the directory, picks the port, launches
    :meth:`_command` with its output in ``<workdir>/<log_name>`` and polls :meth:`_ready_problem`
    until it says None; a lost port race is retried once. ``start_error`` is raised when the JVM
    exits or is not ready within ``startup_timeout_s``, ``port_race_error`` (a subclass of it)
    when it could not bind its port. :meth:`close` stops the JVM and removes the directory.
    """

    name = "the server"
    log_name = "server.log"
    workdir_prefix = "kafka-sink-server-"
    start_error: type[RuntimeError] = RuntimeError
    port_race_error: type[RuntimeError] = RuntimeError
    poll_s = 0.1
    stop_timeout_s = 10.0

    def __init__(self, *, startup_timeout_s: float) -> None:
        self.startup_timeout_s = startup_timeout_s
        self._workdir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._port = 0
        self.startup_s: float | None = None

    def start(self) -> Self:
        if self._workdir is not None:
            raise RuntimeError(f"{type(self).__name__} already started")
        self._resolve()
        self.startup_s = start_with_one_retry(
            self._start_once, self._teardown, self.close, self.port_race_error
        )
        return self

    def close(self) -> None:
        """Stop the JVM (bounded) and remove the temporary directory. Idempotent."""
        self._teardown()

    @property
    def workdir(self) -> Path:
        if self._workdir is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return self._workdir

    # -- what a server gives ----------------------------------------------------------------------
    def _resolve(self) -> None:
        """Find what every start needs (java, the jar); raise a setup error naming the fix."""
        raise NotImplementedError

    def _command(self) -> list[str]:
        """The command line, once :attr:`workdir` and ``_port`` are chosen (may write files)."""
        raise NotImplementedError

    def _ready_problem(self, log: Path) -> str | None:
        """None once the server serves, else what it lacks."""
        raise NotImplementedError

    # -- the shared life --------------------------------------------------------------------------
    def _start_once(self) -> None:
        self._workdir = Path(tempfile.mkdtemp(prefix=self.workdir_prefix))
        self._port = free_ports(1)[0]
        log = self._workdir / self.log_name
        process = self._process = launch(self._command(), log, self._workdir)

        def problem() -> str | None:
            rc = process.poll()
            if rc is not None:
                text = tail(log)
                if lost_bind_race(text):
                    raise self.port_race_error(text)
                raise self.start_error(f"{self.name} exited with {rc}:\n{text}")
            return self._ready_problem(log)

        last = wait_until_ready(problem, self.startup_timeout_s, self.poll_s)
        if last is not None:
            raise self.start_error(
                f"{self.name} was not ready within {self.startup_timeout_s:.0f} s ({last}):\n"
                f"{tail(log)}"
            )

    def _teardown(self) -> None:
        proc, self._process = self._process, None
        if proc is not None:
            stop([(proc, self.stop_timeout_s)])
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None


def _ephemeral_low() -> int:
    """The lowest port the OS hands out for outgoing connections (Linux's default otherwise)."""
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text(encoding="ascii")
        return int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports that were free on 127.0.0.1 a moment ago (a child may lose one).

    Taken below the OS's range for outgoing connections where it can: a stopped broker keeps its
    port for its restart, and a port from that range may meanwhile become some client socket's
    own end (a restart then failed with "Address already in use").
    """
    low, high = 10_000, _ephemeral_low() - 1
    # Hold every socket until all are bound, so the ports are distinct from each other.
    socks: list[socket.socket] = []
    try:
        tries = 0
        while len(socks) < count:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            tries += 1
            port = random.randint(low, high) if high > low and tries <= 50 * count else 0
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                sock.close()
                continue
            socks.append(sock)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for sock in socks:
            sock.close()


def tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a child's log, or a note that there is no log."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:])


def http_ready_problem(url: str, timeout_s: float) -> str | None:
    """None once ``GET url`` answers 200, else what it did instead (a server's readiness)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            status = int(response.status)
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (OSError, ValueError) as exc:
        return f"GET {url}: {type(exc).__name__}: {exc}"
    return None if status == 200 else f"GET {url}: HTTP {status}"


def lost_bind_race(log_text: str) -> bool:
    """Whether a child's log says it could not bind a port it was given."""
    return any(marker in log_text for marker in BIND_ERRORS)


def accepts(port: int, timeout_s: float = 1.0) -> bool:
    """Whether something accepts a TCP connection on 127.0.0.1:``port`` now."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout_s):
            return True
    except OSError:
        return False


def parent_death_signal() -> Callable[[], None] | None:
    """A pre-exec hook making the child get SIGKILL when its parent dies (Linux only).

    It covers what atexit and signal handlers cannot: the test process being SIGKILLed (a CI
    timeout, the OOM killer). The kernel sends the signal when the *thread* that forked exits, so
    the hook is used only from the main thread, whose end is the process's end. The function is
    resolved before the fork so the child only makes one foreign call.
    """
    if not sys.platform.startswith("linux"):
        return None
    if threading.current_thread() is not threading.main_thread():
        return None
    try:
        prctl = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    signum = int(signal.SIGKILL)

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)

    return hook


def launch(cmd: Sequence[str], log_path: Path, cwd: Path) -> subprocess.Popen[bytes]:
    """Start ``cmd`` in its own session, stdout and stderr appended to ``log_path``."""
    with log_path.open("ab") as fh:
        return subprocess.Popen(
            list(cmd),
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=cwd,
            preexec_fn=parent_death_signal(),  # noqa: PLW1509 - see parent_death_signal
        )


def signal_group(proc: subprocess.Popen[bytes], signum: signal.Signals) -> None:
    """Signal the child's whole process group (it leads one: see :func:`launch`)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signum)


def stop(children: Iterable[tuple[subprocess.Popen[bytes], float]]) -> None:
    """Stop ``(child, grace_s)`` pairs: SIGTERM to all, SIGKILL to each outliving its grace.

    All are signalled at once (children stopped one by one can wait on each other, as the nodes
    of a cluster losing its quorum do); then each is waited for in the order given, until its
    grace, counted from the signal, has passed.
    """
    live = [(proc, grace_s) for proc, grace_s in children if proc.poll() is None]
    for proc, _ in live:
        signal_group(proc, signal.SIGTERM)
    began = time.monotonic()
    for proc, grace_s in live:
        try:
            proc.wait(timeout=max(began + grace_s - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            signal_group(proc, signal.SIGKILL)
            proc.wait()


def start_with_one_retry(
    attempt: Callable[[], None],
    teardown: Callable[[], None],
    close: Callable[[], None],
    lost_race: type[BaseException],
) -> float:
    """Run ``attempt``, once more after ``teardown`` if it lost a port race; the seconds it took.

    Ports are picked before the child binds them, so another process can take one in between;
    fresh ports almost always win the second time. Any failure (a second lost race included)
    runs ``close`` and propagates, so a failed start leaves no child and no directory behind.
    """
    began = time.monotonic()
    try:
        try:
            attempt()
        except lost_race:
            teardown()
            attempt()
    except BaseException:
        close()
        raise
    return time.monotonic() - began


def wait_until_ready(
    problem: Callable[[], str | None], timeout_s: float, poll_s: float
) -> str | None:
    """Call ``problem()`` every ``poll_s`` until it returns None (ready) or ``timeout_s`` passed.

    Returns None when ready, else the last problem once the time is up. ``problem`` raises for
    what no waiting can fix (a child that exited).
    """
    deadline = time.monotonic() + timeout_s
    while True:
        last = problem()
        if last is None:
            return None
        if time.monotonic() > deadline:
            return last
        time.sleep(poll_s)
