"""A test-only fault hook in the driver's commit: hold it at a chosen point so a test can fail
brokers or kill the driver there.

Role: when ``$PYKAFKA_TEST_COMMIT_PAUSE_DIR`` names a directory, :func:`pause_commit` creates
``paused-<batch id>`` there (``job`` for an at-least-once batch job, 0 for an exactly-once one)
and waits (at most 120 s) for
``resume-<batch id>``. An exactly-once commit calls it once the batch's intent is durable and
before its first EndTxn; an at-least-once commit before it writes its commit-log file (every row
acknowledged, the batch not yet recorded by Spark). The other steps of an exactly-once batch
job's commit (``step``: ``before-intent``, once the tasks are done; ``after-done``, once the
commit is recorded done) hold only when the test asked for them with a file
``pause-<batch id>-<step>``, as ``paused-<batch id>-<step>`` / ``resume-<batch id>-<step>``.

Invariants: unset (as in any real deployment) it costs one environment lookup per batch and does
nothing; it imports nothing beyond the standard library (the driver's workers stay light).
"""

from __future__ import annotations

import os
import time

__all__ = ["PAUSE_ENV", "pause_commit"]

PAUSE_ENV = "PYKAFKA_TEST_COMMIT_PAUSE_DIR"
_PAUSE_LIMIT_S = 120.0


def pause_commit(batch_id: int | None, step: str | None = None) -> None:
    """Hold the commit of ``batch_id`` while the test asks for it (see the module docstring)."""
    directory = os.environ.get(PAUSE_ENV)
    if not directory:
        return
    name = "job" if batch_id is None else str(batch_id)
    if step is not None:
        name = f"{name}-{step}"
        if not os.path.exists(os.path.join(directory, f"pause-{name}")):
            return
    with open(os.path.join(directory, f"paused-{name}"), "w", encoding="utf-8"):
        pass
    resume = os.path.join(directory, f"resume-{name}")
    deadline = time.monotonic() + _PAUSE_LIMIT_S
    while not os.path.exists(resume) and time.monotonic() < deadline:
        time.sleep(0.05)
