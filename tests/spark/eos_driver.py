"""The driver of a streaming query run in a child process (``eos_restart_child.py``), for tests
that kill, pause and restart it, and the clean-up an operator does after a SIGKILL."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

CHILD = str(Path(__file__).with_name("eos_restart_child.py"))


def drop_cut_metadata_writes(checkpoint: Path) -> None:
    """Remove what a SIGKILL left of Spark's own metadata writes, as an operator would.

    Spark writes each offset and commit file under a hidden temporary name, then renames it; a
    kill in between leaves ``.<batch>.<uuid>.tmp`` (and its ``.crc``), which Spark never reads
    nor removes. When that happens before the first offset file exists, Spark 4.3 refuses to
    restart the query (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY on batch 0); the sink is not
    involved. README says how to recover from it.
    """
    for log in ("offsets", "commits"):
        for leftover in (checkpoint / log).glob(".*.tmp*"):
            leftover.unlink()


class Driver:
    """One run of the child driver, in its own process group."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str]) -> None:
        self.log = log
        self._out = open(log, "w", encoding="utf-8")  # noqa: SIM115 (closed in finish)
        self.process = subprocess.Popen(
            [sys.executable, CHILD, *args],
            stdout=self._out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )

    def wait_started(self, timeout_s: float = 180) -> bool:
        """True once the query runs; False when the process ended first."""
        deadline = time.monotonic() + timeout_s
        while "STARTED" not in self.log.read_text(encoding="utf-8", errors="replace"):
            if self.process.poll() is not None:
                return False
            assert time.monotonic() < deadline, self.tail()
            time.sleep(0.2)
        return True

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)
        self._out.close()

    def finish(self, timeout_s: float = 300) -> int:
        try:
            code = self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"the last run did not finish in {timeout_s} s: {self.tail()}"
            ) from None
        self._out.close()
        return code

    def tail(self) -> str:
        lines = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        kept = [line for line in lines if not line.lstrip().startswith("at ")]
        return "\n".join(kept[-40:])


def wait_for(path: Path, driver: Driver, timeout_s: float = 180) -> None:
    """Wait until ``path`` exists (a pause point reached), failing if the driver ends first."""
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert driver.process.poll() is None, driver.tail()
        assert time.monotonic() < deadline, f"{path.name} never appeared: {driver.tail()}"
        time.sleep(0.1)
