"""What a Spark worker's Python is, and which of the sink's modules it can import.

Role: the body of the one-row job ``workers.check_workers`` runs. It is shipped to the worker by
value (cloudpickle), not by reference, precisely because the worker may be unable to import
``kafka_sink``: so this module imports the standard library only, and nothing else.

Invariants: ``probe()`` never raises for a missing module (it reports it) and imports nothing it
reports on, so a module with import-time side effects is not run by the check.
"""

from __future__ import annotations

import importlib.util
import json
import platform
import sys

__all__ = ["REQUIRED_MODULES", "probe"]

#: What a worker imports to run the sink: the package and the libraries its tasks load first.
REQUIRED_MODULES = ("kafka_sink", "pyarrow", "numpy")


def probe() -> str:
    """JSON: the worker's interpreter, its version, and the required modules it cannot find."""
    missing = []
    for name in REQUIRED_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return json.dumps(
        {
            "executable": sys.executable,
            "version": platform.python_version(),
            "missing": missing,
        }
    )
