"""``make demo`` end to end (``jobs/demo.py``, smaller input): a streaming query written with
exactly-once, its driver SIGKILLed while a micro-batch's transactions hold records, restarted
from its checkpoint. The demo's own table must show read_committed reading every row once and
read_uncommitted also reading the killed attempt's aborted rows; the demo exits 0 only then.
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


def _row(output: str, reader: str) -> list[int]:
    """rows, distinct, duplicates, missing of one reader's line of the demo's table."""
    rows = [line.split() for line in output.splitlines() if line.startswith(reader + " ")]
    numbers = [row[1:] for row in rows if len(row) == 5 and all(n.isdigit() for n in row[1:])]
    assert len(numbers) == 1, output
    return [int(n) for n in numbers[0]]


def test_make_demo_shows_exactly_once_through_a_driver_kill(tmp_path: Path) -> None:
    files, rows_per_file = 5, 400
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "jobs" / "demo.py"),
            *("--workdir", str(tmp_path / "demo")),
            *("--files", str(files), "--rows-per-file", str(rows_per_file)),
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
    assert done.returncode == 0, output
    total = files * rows_per_file
    assert _row(output, "read_committed") == [total, total, 0, 0]
    rows, distinct, duplicates, missing = _row(output, "read_uncommitted")
    assert (distinct, missing) == (total, 0)
    # The killed attempt's rows stay in the log, aborted: only read_uncommitted reads them.
    assert duplicates > 0
    assert rows == total + duplicates
    assert "killed the driver (SIGKILL, process group) after 2 committed micro-batches" in output
