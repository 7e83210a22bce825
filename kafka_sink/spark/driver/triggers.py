"""Refuse the streaming triggers under which PySpark hands a Python sink no rows.

Role: under ``trigger(continuous=...)`` no task of a Python sink ever runs ``write()``; Spark
commits epoch after epoch with a None message per task while the source's offsets advance, so
every row would be lost. No option or argument tells the sink the trigger; the checkpoint does:

- A micro-batch is planned after Spark wrote its offsets (``<checkpoint>/offsets/<N>``) and
  before it commits it (``commits/<N>``), so every ``streamWriter()`` call of a micro-batch query
  (planning and commit) sees a batch whose offsets have no commit yet.
- A continuous query asks for its writer once, when it starts, before any epoch's offsets are
  written: no such batch. :func:`refuse_without_pending_batch` fails the query there.
- Its epochs' commits then carry no message of the sink (:func:`refuse_unwritten_commit`), a
  backstop for a checkpoint this module cannot read (not a local ``checkpointLocation`` option):
  Spark logs the refusal and records no epoch as done, so nothing is lost.

Invariants: a micro-batch query is never refused (a planning or commit call always sees its
pending batch); a checkpoint that cannot be read or listed is not refused here. Real-time mode
(``trigger(realTime=...)``) is refused by Spark itself for Python sinks.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from pyspark.sql.datasource import WriterCommitMessage

from kafka_sink.sink_errors import SinkModeError
from kafka_sink.spark.commit_log.document import PyKafkaCommitMessage
from kafka_sink.spark.commit_log.store import as_local_path

__all__ = ["refuse_unwritten_commit", "refuse_without_pending_batch"]

_WHY = (
    "PySpark hands a Python sink no rows under trigger(continuous=...), so every row would be "
    "lost while the source's offsets advance"
)
_FIX = (
    "Fix: use a micro-batch trigger, .trigger(processingTime='1 second') for low latency or "
    ".trigger(availableNow=True)"
)


def refuse_without_pending_batch(checkpoint_location: str | None) -> None:
    """Fail a ``streamWriter()`` call that plans no micro-batch (see the module docstring)."""
    local = as_local_path(checkpoint_location) if checkpoint_location else None
    if local is None:
        return
    offsets = _latest(os.path.join(local, "offsets"))
    commits = _latest(os.path.join(local, "commits"))
    if offsets is not None and (commits is None or offsets > commits):
        return
    raise SinkModeError(
        "format('pykafka') refuses this streaming query: Spark asked for its writer with no "
        f"micro-batch to plan in checkpoint {local} (last offsets {_shown(offsets)}, last "
        f"commit {_shown(commits)}), which is what a continuous trigger does. {_WHY}. {_FIX}"
    )


def planned_batch(checkpoint_location: str | None) -> int | None:
    """The micro-batch a ``streamWriter()`` call plans: the checkpoint's latest ``offsets`` entry
    when it is above its latest ``commits`` entry; None when that cannot be read (a checkpoint
    that is not a local or mounted directory) or no batch is pending."""
    local = as_local_path(checkpoint_location) if checkpoint_location else None
    if local is None:
        return None
    offsets = _latest(os.path.join(local, "offsets"))
    commits = _latest(os.path.join(local, "commits"))
    if offsets is not None and (commits is None or offsets > commits):
        return offsets
    return None


def refuse_unwritten_commit(messages: Sequence[WriterCommitMessage | None], batch_id: int) -> None:
    """Fail a commit none of whose tasks ran ``write()``, before Spark records it as done.

    In a micro-batch every task calls ``write()``, with no rows too, and returns a message.
    """
    if not messages or any(isinstance(m, PyKafkaCommitMessage) for m in messages):
        return
    raise SinkModeError(
        f"format('pykafka') refuses to commit epoch {batch_id}: none of its {len(messages)} "
        f"tasks ran the sink. {_WHY}. Nothing was committed. {_FIX}"
    )


def _latest(directory: str) -> int | None:
    try:
        names = os.listdir(directory)
    except OSError:
        return None
    numbers = [int(name) for name in names if name.isdigit()]
    return max(numbers) if numbers else None


def _shown(number: int | None) -> str:
    return "none" if number is None else str(number)
