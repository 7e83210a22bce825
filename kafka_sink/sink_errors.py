"""Errors raised by the pykafka sink: the Spark data source and the registry formats.

Role: one small hierarchy so users (and tests) can tell a bad option, a bad input schema, bad
data and a streaming mode the sink cannot serve apart. Option and schema errors are raised on the
driver, in ``writer()`` / ``streamWriter()``, before any task runs; data errors are raised inside
a task and fail it; a mode error by the driver's first commit of a streaming query.

Invariants:
- Every message names what is wrong (the option or column), what was found and how to fix it,
  on one line: it is the last line of the traceback Spark shows.
- Messages never quote option values that could be secrets; they name keys only.
"""

from __future__ import annotations

from kafka_sink.errors import ConfigError, KafkaTimeoutError

__all__ = [
    "SinkDataError",
    "SinkDeliveryTimeoutError",
    "SinkError",
    "SinkModeError",
    "SinkOptionError",
    "SinkSchemaError",
    "SinkWorkerError",
]


class SinkError(ValueError):
    """Base class of the data source's own errors."""


class SinkOptionError(SinkError, ConfigError):
    """An option given to ``format("pykafka")`` is unknown, refused or invalid."""


class SinkSchemaError(SinkError):
    """The DataFrame does not match the Kafka sink's input contract (column names and types)."""


class SinkWorkerError(SinkError):
    """The Python Spark starts for its workers cannot import the sink (``workers.register``)."""


class SinkModeError(SinkError):
    """The streaming query runs in a mode in which PySpark hands a Python sink no rows."""


class SinkDataError(SinkError):
    """A row cannot be written (null topic, partition out of range, null header key)."""


class SinkDeliveryTimeoutError(KafkaTimeoutError):
    """A task's records were not all acknowledged in time; the message lists what was pending.

    Not a :class:`SinkError`: the data is fine, Kafka (or the producer) is not, so the task's
    producer is closed and replaced.
    """
