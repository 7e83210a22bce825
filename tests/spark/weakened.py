"""Safeguards left out inside Spark's own processes, for the tests that show what each prevents.

Role: the package has no switch that leaves a safeguard out (``kafka_sink/spark/fault_hooks.py``:
``safeguards`` is only ever replaced by a test). A test whose weakened code runs in processes it
does not start itself (a child driver, the Python workers Spark starts for it on the driver and
on the executors) gets :func:`weakened_env`: it writes a ``sitecustomize.py`` into a directory
of the test's own and returns the environment with that directory first on ``PYTHONPATH``.
Every Python process started with it (and Spark's workers, which inherit ``PYTHONPATH``; an
executor through ``spark.executorEnv.PYTHONPATH``) installs the weaker ``Safeguards`` as the
interpreter starts, before Spark imports the sink. That file shadows the ``sitecustomize.py`` of
``tests/fault_site`` (the environment's pauses and unreadable markers), so it installs those
too, and the directory of the latter stays on the path after the test's own.

Invariants: only the directory a test names holds the file, so no other process is weakened;
the safeguards named are left out, every other one stays on.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path

from kafka_sink.spark.fault_hooks import Safeguards

__all__ = ["weakened_env"]

_SITECUSTOMIZE = '''"""Test-only: leaves out {left_out} in this process (weakened.py). It
shadows the sitecustomize.py of tests/fault_site, so it installs the environment's faults too."""

import fault_env
from kafka_sink.spark import fault_hooks

fault_hooks.safeguards = fault_hooks.Safeguards({arguments})
fault_env.install_if_asked()
'''

_FAULT_SITE = str(Path(__file__).resolve().parents[1] / "fault_site")


def weakened_env(env: Mapping[str, str], directory: Path, **left_out: bool) -> dict[str, str]:
    """``env`` for processes that leave out the safeguards given as ``name=False``."""
    names = {f.name for f in fields(Safeguards)}
    unknown = set(left_out) - names
    if unknown or any(left_out.values()):
        raise ValueError(f"leave out safeguards of {sorted(names)} with name=False: {left_out}")
    arguments = ", ".join(f"{name}=False" for name in sorted(left_out))
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sitecustomize.py").write_text(
        _SITECUSTOMIZE.format(left_out=", ".join(sorted(left_out)), arguments=arguments),
        encoding="utf-8",
    )
    weakened = dict(env)
    rest = [p for p in weakened.get("PYTHONPATH", "").split(os.pathsep) if p and p != _FAULT_SITE]
    path = [str(directory), _FAULT_SITE, *rest]
    weakened["PYTHONPATH"] = os.pathsep.join(path)
    return weakened
