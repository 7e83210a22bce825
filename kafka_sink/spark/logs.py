"""The Spark side's logger: lines that reach the driver's log, and warnings given once per driver.

Role: every module of ``kafka_sink.spark`` logs to the ``kafka_sink.spark`` logger. Spark runs
the driver side (planning, ``commit()``, ``abort()``) in Python workers it starts with no logging
setup, where ``logging``'s last-resort handler would drop INFO lines; :func:`ensure_logging`
gives the logger a stderr handler there, which ends up in the driver's log.

Invariants:
- :func:`ensure_logging` adds a handler only when the logger has none (an application's own
  configuration wins) and never lowers a level that was set.
- :func:`warn_once` logs a given warning once per driver (:func:`first_on_driver`, which
  a streaming query's start work uses too): Spark plans and commits a streaming
  query in two long-lived Python workers, so a flag in one process would not do; the first worker
  creates a marker file in the driver's Spark local directory (``SPARK_LOCAL_DIRS``, removed
  with the SparkContext), and the others see it. A marker that cannot be created means warning
  more than once, never not at all.
- Standard library only: the driver's workers import this without loading anything else.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys

__all__ = ["ensure_logging", "first_on_driver", "logger", "warn_once"]

logger = logging.getLogger("kafka_sink.spark")


def ensure_logging() -> None:
    """Send our INFO lines to stderr when nothing else is configured."""
    if logger.hasHandlers():
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)


_WARNED: set[str] = set()  # (kind, key) already seen in this process


def warn_once(key: str, message: str) -> None:
    """Log ``message`` at WARNING unless a warning with ``key`` was logged on this driver."""
    if not first_on_driver("warned", key):
        return
    ensure_logging()
    logger.warning(message)


def first_on_driver(kind: str, key: str) -> bool:
    """True for the first call with (``kind``, ``key``) on this driver, False after it.

    Across the driver's Python workers through a marker file (see the module docstring); a
    marker that cannot be created answers True (doing a thing twice beats never doing it).
    """
    seen = f"{kind}:{key}"
    if seen in _WARNED:
        return False
    _WARNED.add(seen)
    local_dirs = os.environ.get("SPARK_LOCAL_DIRS", "").split(",")[0]
    if local_dirs and os.path.isdir(local_dirs):
        marker = os.path.join(
            local_dirs, f"pykafka-{kind}-" + hashlib.sha256(key.encode()).hexdigest()[:16]
        )
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            return False  # another Python worker of this driver was first
        except OSError:
            pass
    return True
