"""``make demo`` end to end (``jobs/demo.py``, smaller input): a streaming query written with
exactly-once, its driver SIGKILLed while a micro-batch's transactions hold records, restarted
from its checkpoint. The demo's own table must show read_committed reading every row once and
read_uncommitted also reading the killed attempt's aborted rows; the demo exits 0 only then.
The same crash under at-least-once makes the demo fail on read_committed's duplicates.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Two Spark start-ups and a Kafka start: about 2-4 minutes on a busy 2-core machine.
pytestmark = pytest.mark.slow
_DEMO_TIMEOUT_S = 900
FILES, ROWS_PER_FILE = 5, 400
TOTAL = FILES * ROWS_PER_FILE


def _row(output: str, reader: str) -> list[int]:
    """rows, distinct, duplicates, missing of one reader's line of the demo's table."""
    rows = [line.split() for line in output.splitlines() if line.startswith(reader + " ")]
    numbers = [row[1:] for row in rows if len(row) == 5 and all(n.isdigit() for n in row[1:])]
    assert len(numbers) == 1, output
    return [int(n) for n in numbers[0]]


def _demo(workdir: Path, guarantee: str) -> tuple[int, str]:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "jobs" / "demo.py"),
            *("--workdir", str(workdir), "--delivery-guarantee", guarantee),
            *("--files", str(FILES), "--rows-per-file", str(ROWS_PER_FILE)),
            *("--kill-after", "2"),
        ],
        cwd=str(ROOT),
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=_DEMO_TIMEOUT_S,
        check=False,
    )
    output = done.stdout + done.stderr
    assert "killed the driver (SIGKILL, process group) after 2 committed micro-batches" in output
    return done.returncode, output


def test_make_demo_shows_exactly_once_through_a_driver_kill(tmp_path: Path) -> None:
    code, output = _demo(tmp_path / "demo", "exactly-once")
    assert code == 0, output
    assert _row(output, "read_committed") == [TOTAL, TOTAL, 0, 0]
    rows, distinct, duplicates, missing = _row(output, "read_uncommitted")
    assert (distinct, missing) == (TOTAL, 0)
    # The killed attempt's rows stay in the log, aborted: only read_uncommitted reads them.
    assert duplicates > 0
    assert rows == TOTAL + duplicates


def test_the_demo_fails_on_the_duplicates_of_at_least_once(tmp_path: Path) -> None:
    """The same crash under at-least-once: the re-run batch is read twice, and the demo's check
    of read_committed fails the demo, as it would if exactly-once ever let a duplicate through."""
    code, output = _demo(tmp_path / "demo", "at-least-once")
    assert code == 1, output
    rows, distinct, duplicates, missing = _row(output, "read_committed")
    assert (distinct, missing) == (TOTAL, 0)
    assert duplicates > 0
    assert rows == TOTAL + duplicates
    assert "FAILED: read_committed is not exactly once" in output
