"""Test-only fault hooks: hold the driver at a chosen point so a test can fail brokers or kill
the driver there, or leave out a safeguard (a streaming query's start sweep, an exactly-once
task's slot choice) to show what it prevents.

Role: when ``$PYKAFKA_TEST_COMMIT_PAUSE_DIR`` names a directory, :func:`pause_commit` creates
``paused-<name>`` there and waits (at most 120 s) for ``resume-<name>``, at the point that
``$PYKAFKA_TEST_PAUSE_AT`` names (unset: :data:`COMMITTING`):

- :data:`COMMITTING` (name: the batch id, ``job`` for a batch job): an exactly-once commit once
  the batch's intent is durable and before its first EndTxn; an at-least-once commit before it
  writes its commit-log file (every row acknowledged, the batch not yet recorded by Spark);
- :data:`BEFORE_COMMIT` (name: ``before-commit-<batch id>``): ``commit()`` entered, the tasks'
  transactions prepared and nothing of the batch recorded yet;
- :data:`STARTED` (name: ``started``): a streaming query's start work done (``eos/start.py``),
  before its first batch's tasks run;
- :data:`TASK_DONE` (name: ``task-done-<batch id>``, on the executors): a task's rows all
  acknowledged (exactly-once: its transaction prepared), before it returns its commit message,
  so a test can stop the query while its batch is running.

The steps of an exactly-once batch job's commit (``step``: ``before-intent``, once the tasks are
done; ``after-done``, once the commit is recorded done) hold only when the test asked for them with
a file ``pause-<name>-<step>``, as ``paused-<name>-<step>`` / ``resume-<name>-<step>``, whatever
``$PYKAFKA_TEST_PAUSE_AT`` says.

While a file ``marker-unreadable`` exists in ``$PYKAFKA_TEST_COMMIT_PAUSE_DIR``,
:func:`marker_unreadable` is true and the driver's read of a refused commit's marker
(``eos/outcomes.py``) fails with a ``KafkaError`` saying so, as a principal without READ on the
topic, or a marker removed by retention, would: a test makes an outcome unknown on a cluster it
cannot otherwise deny a read, and removes the file to let the next run read the marker. It injects
a failure; it leaves out no safeguard.

``$PYKAFKA_TEST_NO_START_SWEEP`` set to ``1`` makes :func:`start_sweep_disabled` true.
``$PYKAFKA_TEST_EVERY_SLOT_FREE`` set to ``1`` (in the executors' environment) makes
:func:`every_slot_free` true: an exactly-once task sees every transactional id of its partition
free (``eos/slots.py``), so it takes its attempt number's, as ids built from the attempt number
alone did.
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
    "EVERY_SLOT_FREE_ENV",
    "MARKER_UNREADABLE",
    "NO_FENCE_ENV",
    "NO_START_SWEEP_ENV",
    "PAUSE_ENV",
    "POINT_ENV",
    "STARTED",
    "TASK_DONE",
    "every_slot_free",
    "fence_disabled",
    "marker_unreadable",
    "pause_commit",
    "start_sweep_disabled",
]

PAUSE_ENV = "PYKAFKA_TEST_COMMIT_PAUSE_DIR"
POINT_ENV = "PYKAFKA_TEST_PAUSE_AT"
NO_START_SWEEP_ENV = "PYKAFKA_TEST_NO_START_SWEEP"
EVERY_SLOT_FREE_ENV = "PYKAFKA_TEST_EVERY_SLOT_FREE"
NO_FENCE_ENV = "PYKAFKA_TEST_NO_FENCE"
COMMITTING = "committing"
BEFORE_COMMIT = "before-commit"
STARTED = "started"
TASK_DONE = "task-done"
MARKER_UNREADABLE = "marker-unreadable"
_PAUSE_LIMIT_S = 120.0


def pause_commit(batch_id: int | None, point: str = COMMITTING, *, step: str | None = None) -> None:
    """Hold the driver at ``point`` (or the opt-in ``step``) of ``batch_id`` while the test asks
    for it (see the module docstring)."""
    directory = os.environ.get(PAUSE_ENV)
    if not directory:
        return
    name = "job" if batch_id is None else str(batch_id)
    if step is not None:
        name = f"{name}-{step}"
        if not os.path.exists(os.path.join(directory, f"pause-{name}")):
            return
    elif os.environ.get(POINT_ENV, COMMITTING) != point:
        return
    elif point == STARTED:
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


def every_slot_free() -> bool:
    """True when a test asks exactly-once tasks to see every slot free (see above)."""
    return os.environ.get(EVERY_SLOT_FREE_ENV) == "1"


def fence_disabled() -> bool:
    """True when a test asks a streaming query's driver to take no fence."""
    return os.environ.get(NO_FENCE_ENV) == "1"


def marker_unreadable() -> bool:
    """True while a test asks the driver's marker reads to fail (see above)."""
    directory = os.environ.get(PAUSE_ENV)
    if not directory:
        return False
    return os.path.exists(os.path.join(directory, MARKER_UNREADABLE))
