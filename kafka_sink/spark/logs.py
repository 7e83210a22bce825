"""The Spark side's logging: one line format, the sink's level, warnings given once per driver.

Role: every module of ``kafka_sink.spark`` logs to the ``kafka_sink.spark`` logger; the producer
and the network client below it log under ``kafka_sink`` too. Spark runs the driver side
(planning, ``commit()``, ``abort()``) and the tasks in Python workers it starts with no logging
setup, where ``logging``'s last-resort handler would drop INFO lines and print the others without
time or source; :func:`ensure_logging` gives the ``kafka_sink`` logger a stderr handler there
(which ends up in the driver's or the executor's log) with :data:`LOG_FORMAT`, so every line the
sink prints, connection warnings included, carries its time, level and logger name.

The level: the sink option ``logLevel``, else Spark's conf :data:`LEVEL_CONF` (``DEBUG``,
``INFO``, ``WARN``/``WARNING``, ``ERROR`` or ``OFF``, any case; :func:`parse_level`). Spark gives a
Python data source's driver side no access to its conf; its tasks see the session's conf as local
properties, so the conf's level reaches the driver's ``commit()`` / ``abort()`` in the tasks'
commit messages. Lines the driver logs while planning follow the option only.

Invariants:
- :func:`ensure_logging` adds a handler only when neither ``kafka_sink`` nor an ancestor has one
  (an application's own configuration wins), and then sets INFO if no level was set.
- :func:`apply_level` runs where a write's work starts (planning, each task, ``commit()``,
  ``abort()``): it sets the write's level; without one, it sets INFO only in a process where
  :func:`ensure_logging` added the handler. Spark reuses its Python workers across queries, and
  one query's ``logLevel`` must not quiet the next; an application's own level is left alone.
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

__all__ = [
    "LEVEL_CONF",
    "LEVEL_NAMES",
    "LOG_FORMAT",
    "OFF",
    "apply_level",
    "ensure_logging",
    "first_on_driver",
    "logger",
    "parse_level",
    "warn_once",
]

logger = logging.getLogger("kafka_sink.spark")
_package_logger = logging.getLogger("kafka_sink")

#: Every line the sink prints: time, level, logger name, message.
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: Spark's conf that sets the sink's level where the option ``logLevel`` does not.
LEVEL_CONF = "spark.pykafka.logLevel"
#: Above CRITICAL: nothing is logged.
OFF = logging.CRITICAL + 10
_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "off": OFF,
}
#: The accepted level names, for messages.
LEVEL_NAMES = "DEBUG, INFO, WARN, WARNING, ERROR, OFF"

_handler: logging.Handler | None = None  # the handler this process added, if any


def parse_level(text: str) -> int | None:
    """The level ``text`` names (any case, surrounding blanks ignored); None if none."""
    return _LEVELS.get(text.strip().lower())


def ensure_logging() -> None:
    """Send the sink's lines to stderr in :data:`LOG_FORMAT` when nothing else is configured."""
    global _handler  # noqa: PLW0603 - one handler per process, added once
    if _handler is not None or _package_logger.hasHandlers():
        return
    _handler = logging.StreamHandler(sys.stderr)
    _handler.setFormatter(logging.Formatter(LOG_FORMAT))
    _package_logger.addHandler(_handler)
    if _package_logger.level == logging.NOTSET:
        _package_logger.setLevel(logging.INFO)


def apply_level(level: int | None) -> None:
    """The start of a write's work in this process: its level (see the module invariants)."""
    ensure_logging()
    if level is not None:
        _package_logger.setLevel(level)
    elif _handler is not None:
        _package_logger.setLevel(logging.INFO)


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
