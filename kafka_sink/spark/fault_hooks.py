"""Test-only fault hooks in the driver: hold it at a chosen point so a test can fail brokers or
kill the driver there, or leave out a streaming query's start sweep to show what it prevents.

Role: when ``$PYKAFKA_TEST_COMMIT_PAUSE_DIR`` names a directory, :func:`pause_commit` creates
``paused-<name>`` there and waits (at most 120 s) for ``resume-<name>``, at the point that
``$PYKAFKA_TEST_PAUSE_AT`` names (unset: :data:`COMMITTING`):

- :data:`COMMITTING` (name: the batch id, ``job`` for a batch job): an exactly-once commit once
  the batch's intent is durable and before its first EndTxn; an at-least-once commit before it
  writes its commit-log file (every row acknowledged, the batch not yet recorded by Spark);
- :data:`BEFORE_COMMIT` (name: ``before-commit-<batch id>``): ``commit()`` entered, the tasks'
  transactions prepared and nothing of the batch recorded yet;
- :data:`STARTED` (name: ``started``): a streaming query's start work done (``eos/start.py``),
  before its first batch's tasks run.

``$PYKAFKA_TEST_NO_START_SWEEP`` set to ``1`` makes :func:`start_sweep_disabled` true, and
``$PYKAFKA_TEST_NO_FENCE`` set to ``1`` makes :func:`fence_disabled` true (a streaming query's
driver then takes no fence: what a zombie driver does without it).

Invariants: unset (as in any real deployment) each hook costs one environment lookup and does
nothing; it imports nothing beyond the standard library (the driver's workers stay light).
"""

from __future__ import annotations

import os
import time

__all__ = [
    "BEFORE_COMMIT",
    "COMMITTING",
    "NO_FENCE_ENV",
    "NO_START_SWEEP_ENV",
    "PAUSE_ENV",
    "POINT_ENV",
    "STARTED",
    "fence_disabled",
    "pause_commit",
    "start_sweep_disabled",
]

PAUSE_ENV = "PYKAFKA_TEST_COMMIT_PAUSE_DIR"
POINT_ENV = "PYKAFKA_TEST_PAUSE_AT"
NO_START_SWEEP_ENV = "PYKAFKA_TEST_NO_START_SWEEP"
NO_FENCE_ENV = "PYKAFKA_TEST_NO_FENCE"
COMMITTING = "committing"
BEFORE_COMMIT = "before-commit"
STARTED = "started"
_PAUSE_LIMIT_S = 120.0


def pause_commit(batch_id: int | None, point: str = COMMITTING) -> None:
    """Hold the driver at ``point`` of ``batch_id`` while the test asks for it (see above)."""
    directory = os.environ.get(PAUSE_ENV)
    if not directory or os.environ.get(POINT_ENV, COMMITTING) != point:
        return
    name = "job" if batch_id is None else str(batch_id)
    if point == STARTED:
        name = STARTED
    elif point != COMMITTING:
        name = f"{point}-{name}"
    with open(os.path.join(directory, f"paused-{name}"), "w", encoding="utf-8"):
        pass
    resume = os.path.join(directory, f"resume-{name}")
    deadline = time.monotonic() + _PAUSE_LIMIT_S
    while not os.path.exists(resume) and time.monotonic() < deadline:
        time.sleep(0.05)


def start_sweep_disabled() -> bool:
    """True when a test asks a streaming query's start to leave leftovers open."""
    return os.environ.get(NO_START_SWEEP_ENV) == "1"


def fence_disabled() -> bool:
    """True when a test asks a streaming query's driver to take no fence."""
    return os.environ.get(NO_FENCE_ENV) == "1"
