"""The faults the tests inject through the environment: pauses at the driver's (and a task's)
commit points and unreadable markers, in every process a test runs or starts.

Role: :func:`install` sets ``kafka_sink.spark.fault_hooks.faults`` to an :class:`EnvFaults`,
which reads the variables below each time the package asks (the package itself reads none):

- when ``$PYKAFKA_TEST_COMMIT_PAUSE_DIR`` (:data:`PAUSE_ENV`) names a directory, a pause creates
  ``paused-<name>`` there and waits (at most 120 s) for ``resume-<name>``, at the point that
  ``$PYKAFKA_TEST_PAUSE_AT`` (:data:`POINT_ENV`) names (unset: ``committing``). The name is the
  batch id (``job`` for a batch job) at ``committing``; ``before-commit-<batch id>`` at
  ``before-commit``; ``started`` at ``started``; ``task-done-<batch id>`` at ``task-done``;
- the steps of an exactly-once batch job's commit (``before-intent``, ``after-done``) hold only
  when the test asked for them with a file ``pause-<name>-<step>``, as ``paused-<name>-<step>`` /
  ``resume-<name>-<step>``, whatever ``$PYKAFKA_TEST_PAUSE_AT`` says;
- while a file ``marker-unreadable`` (:data:`MARKER_UNREADABLE`) exists in the pause directory,
  the driver's marker reads fail: a test makes an outcome unknown on a cluster it cannot
  otherwise deny a read, and removes the file to let the next run read the marker.

Where: ``tests/conftest.py`` installs it in the pytest process and puts this directory first on
``PYTHONPATH``, so every process the tests start (child drivers, Spark's JVM and the Python
workers it starts, which inherit ``PYTHONPATH``) runs ``sitecustomize.py`` here, which installs
it as the interpreter starts when the pause directory is set (a process without it imports
nothing of the package early). ``tests/spark/weakened.py``'s own ``sitecustomize.py``, first on
the path where a test leaves a safeguard out, installs it too.

Invariants: a pause waits at most 120 s; with the pause directory unset nothing is held or
failed; only the standard library and ``fault_hooks`` are imported.
"""

from __future__ import annotations

import os
import time

from kafka_sink.spark import fault_hooks

__all__ = [
    "MARKER_UNREADABLE",
    "PAUSE_ENV",
    "POINT_ENV",
    "EnvFaults",
    "install",
    "install_if_asked",
]

PAUSE_ENV = "PYKAFKA_TEST_COMMIT_PAUSE_DIR"
POINT_ENV = "PYKAFKA_TEST_PAUSE_AT"
MARKER_UNREADABLE = "marker-unreadable"
_PAUSE_LIMIT_S = 120.0


class EnvFaults(fault_hooks.Faults):
    """Pauses and unreadable markers as the environment asks (see the module docstring)."""

    def pause(self, batch_id: int | None, point: str, step: str | None) -> None:
        directory = os.environ.get(PAUSE_ENV)
        if not directory:
            return
        name = "job" if batch_id is None else str(batch_id)
        if step is not None:
            name = f"{name}-{step}"
            if not os.path.exists(os.path.join(directory, f"pause-{name}")):
                return
        elif os.environ.get(POINT_ENV, fault_hooks.COMMITTING) != point:
            return
        elif point == fault_hooks.STARTED:
            name = fault_hooks.STARTED
        elif point != fault_hooks.COMMITTING:
            name = f"{point}-{name}"
        with open(os.path.join(directory, f"paused-{name}"), "w", encoding="utf-8"):
            pass
        resume = os.path.join(directory, f"resume-{name}")
        deadline = time.monotonic() + _PAUSE_LIMIT_S
        while not os.path.exists(resume) and time.monotonic() < deadline:
            time.sleep(0.05)

    def marker_unreadable(self) -> bool:
        directory = os.environ.get(PAUSE_ENV)
        if not directory:
            return False
        return os.path.exists(os.path.join(directory, MARKER_UNREADABLE))


def install() -> None:
    """Make the package's fault hooks follow the environment in this process."""
    fault_hooks.faults = EnvFaults()


def install_if_asked() -> None:
    """:func:`install` when this process was started with a pause directory (sitecustomize)."""
    if os.environ.get(PAUSE_ENV):
        install()
