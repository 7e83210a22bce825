"""Test-only fault hooks: hold the driver at a chosen point so a test can fail brokers or kill
the driver there, and the safeguards a test may leave out (the fence, a streaming query's start
sweep, an exactly-once task's slot choice) to show what each prevents.

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

These pauses and the unreadable marker stay driven by the environment: they hold a step or fail
a read the way a slow cluster or a missing ACL would, and never leave a safeguard out, so a
process that has them set is held or failed, never left unprotected.

Safeguards. The fence (``driver/eos/fence.py``), a streaming query's start sweep
(``driver/eos/start.py``) and an exactly-once task's slot choice (``executor/slots.py``) each
consult :data:`safeguards`, a :class:`Safeguards` whose fields are all true. Nothing in the
package assigns it, and no option, configuration key or environment variable changes it: only a
test's fixture installs a weaker one (in the test's own process, or in Spark's Python workers
through a test-only module put on their path) to show what a safeguard prevents.

Invariants: unset (as in any real deployment) each pause hook costs one environment lookup and
does nothing; :data:`safeguards` keeps every safeguard on unless a test replaced it; the module
imports nothing beyond the standard library (the driver's workers stay light).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

__all__ = [
    "BEFORE_COMMIT",
    "COMMITTING",
    "MARKER_UNREADABLE",
    "PAUSE_ENV",
    "POINT_ENV",
    "STARTED",
    "TASK_DONE",
    "Safeguards",
    "marker_unreadable",
    "pause_commit",
    "safeguards",
]

PAUSE_ENV = "PYKAFKA_TEST_COMMIT_PAUSE_DIR"
POINT_ENV = "PYKAFKA_TEST_PAUSE_AT"
COMMITTING = "committing"
BEFORE_COMMIT = "before-commit"
STARTED = "started"
TASK_DONE = "task-done"
MARKER_UNREADABLE = "marker-unreadable"
_PAUSE_LIMIT_S = 120.0


@dataclass(frozen=True)
class Safeguards:
    """Which safeguards run: all of them, unless a test installed a weaker instance."""

    #: A fenced plan's driver takes the prefix's fence (``fence.py``, ``job_fence.py``).
    fence: bool = True
    #: A streaming query's start aborts what an earlier run left open (``start.py``).
    start_sweep: bool = True
    #: An exactly-once task asks which of its partition's slots are free (``slots.py``);
    #: without it every slot counts as free, so the task takes its attempt number's.
    slot_choice: bool = True


#: What the package consults; it never assigns it (see the module docstring).
safeguards = Safeguards()


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


def marker_unreadable() -> bool:
    """True while a test asks the driver's marker reads to fail (see above)."""
    directory = os.environ.get(PAUSE_ENV)
    if not directory:
        return False
    return os.path.exists(os.path.join(directory, MARKER_UNREADABLE))
