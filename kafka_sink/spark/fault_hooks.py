"""Test-only fault hooks: hold the driver at a chosen point so a test can fail brokers or kill
the driver there, fail the driver's marker reads, and the safeguards a test may leave out (the
fence, a streaming query's start sweep, an exactly-once task's slot choice) to show what each
prevents.

Role: the package calls :func:`pause_commit` at the points below and :func:`marker_unreadable`
before it reads a refused commit's marker; both ask :data:`faults`, a :class:`Faults` whose
default holds nothing and fails nothing. Nothing in the package assigns it: only a test's
fixture installs another one, in the test's own process or, through a test-only module put on
their path, in the processes a test starts (child drivers, Spark's Python workers on the driver
and on the executors). The points, each with the ``batch_id`` it is called with (None for a
batch job):

- :data:`COMMITTING`: an exactly-once commit once the batch's intent is durable and before its
  first EndTxn; an at-least-once commit before it writes its commit-log file (every row
  acknowledged, the batch not yet recorded by Spark);
- :data:`BEFORE_COMMIT`: ``commit()`` entered, the tasks' transactions prepared and nothing of
  the batch recorded yet;
- :data:`STARTED`: a streaming query's start work done (``eos/start.py``), before its first
  batch's tasks run;
- :data:`TASK_DONE` (on the executors): a task's rows all acknowledged (exactly-once: its
  transaction prepared), before it returns its commit message, so a test can stop the query
  while its batch is running.

The steps of an exactly-once batch job's commit (``step``: ``before-intent``, once the tasks are
done; ``after-done``, once the commit is recorded done) are passed with :data:`COMMITTING`.

While :func:`marker_unreadable` is true the driver's read of a refused commit's marker
(``eos/outcomes.py``) fails with a ``KafkaError`` saying so, as a principal without READ on the
topic, or a marker removed by retention, would. A pause or an unreadable marker holds a step or
fails a read the way a slow cluster or a missing ACL would; neither leaves a safeguard out.

Safeguards. The fence (``driver/eos/fence.py``), a streaming query's start sweep
(``driver/eos/start.py``) and an exactly-once task's slot choice (``executor/slots.py``) each
consult :data:`safeguards`, a :class:`Safeguards` whose fields are all true. Nothing in the
package assigns it, and no option, configuration key or environment variable changes it: only a
test's fixture installs a weaker one (in the test's own process, or in Spark's Python workers
through a test-only module put on their path) to show what a safeguard prevents.

Invariants: the module reads no environment variable, file or option; the default
:data:`faults` returns at once (no pause, every marker read) and :data:`safeguards` keeps every
safeguard on unless a test replaced them; the module imports nothing beyond the standard library
(the driver's workers stay light).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "BEFORE_COMMIT",
    "COMMITTING",
    "STARTED",
    "TASK_DONE",
    "Faults",
    "Safeguards",
    "faults",
    "marker_unreadable",
    "pause_commit",
    "safeguards",
]

COMMITTING = "committing"
BEFORE_COMMIT = "before-commit"
STARTED = "started"
TASK_DONE = "task-done"


class Faults:
    """The faults a test injects; this default injects none. A test's subclass overrides
    :meth:`pause` and :meth:`marker_unreadable`."""

    def pause(self, batch_id: int | None, point: str, step: str | None) -> None:
        """Hold the calling thread at ``point`` (or ``step``) of ``batch_id``: here, not at all."""

    def marker_unreadable(self) -> bool:
        """Whether the driver's marker reads fail: here, never."""
        return False


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


#: What the package consults; it never assigns them (see the module docstring).
faults = Faults()
safeguards = Safeguards()


def pause_commit(batch_id: int | None, point: str = COMMITTING, *, step: str | None = None) -> None:
    """Hold the driver (or, at :data:`TASK_DONE`, a task) at ``point`` or ``step`` of
    ``batch_id`` while the installed :data:`faults` asks for it (see the module docstring)."""
    faults.pause(batch_id, point, step)


def marker_unreadable() -> bool:
    """True while the installed :data:`faults` asks the driver's marker reads to fail."""
    return faults.marker_unreadable()
