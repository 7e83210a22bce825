"""The plan of an exactly-once write: its transactional ids and where its intents are kept.

Role: ``deliveryGuarantee=exactly-once`` writes each Spark task attempt's rows in a Kafka
transaction of its own, which the task prepares (``spark/executor/task.py``) and the driver commits
(``committer.py``). While planning, the driver settles an :class:`EosPlan` (``datasource.py``):
the prefix of the write's transactional ids, the intent store's key and which store holds the
intents. The writers carry the plan to the tasks (it is picklable); the tasks build their ids
from it and the driver opens its intent store from it.

A partly committed batch. When the planning finds the query's last batch partial (Kafka lost
some of its transactions after others committed; ``committer.py``), the plan carries that
batch's id and its committed Spark partitions with their rows' fingerprints
(:class:`PartialBatch`). The re-run's task of such a partition (same batch id, from Spark's
``streaming.sql.batchId``) writes nothing: it hands back the fingerprint of the rows it was
given, and the driver's commit checks it against the recorded one.

Transactional ids. A write uses ``<prefix>-<partition id>-<slot>``, where the prefix is the
``transactionalIdPrefix`` option or ``pykafka-<query id>`` (streaming) / ``pykafka-<write id>``
(batch job) / ``pykafka-job-<hash>`` (batch job with ``idempotencyKey``, the same on every run of
the key: ``idempotency.py``), and the slot is one of ``slots.SLOTS_PER_PARTITION`` (8) per Spark
partition. So:

- Attempts of one partition that run at the same time do not share an id. Spark's attempt
  number cannot tell them apart (it restarts at 0 when a stage is re-attempted while tasks of
  the earlier stage attempt, or of an earlier run of the query, may still run; PySpark exposes
  no stage attempt number), so a task attempt asks the coordinators for the state of its
  partition's ids before its InitProducerId and takes one that no attempt holds open
  (``slots.py``: the attempt number's slot when free). With every slot held, the task fails
  and Spark retries it.
- The residual race: two attempts that ask at the same moment may take the same free slot; the
  later InitProducerId fences the earlier, whose next write fails (a task failure Spark
  retries). The one harmful interleaving, an attempt that stalls between its describe and its
  InitProducerId for as long as another attempt needs to initialise, write and prepare on the
  same id, aborts a prepared transaction; the driver's check of the batch's transactions
  before its first commit fails that batch with nothing of it visible, and its re-run writes it.
- The set of ids of a query is bounded by partitions x 8, normally one id per partition (the
  attempt number's slot, 0), reused from batch to batch. The coordinator keeps every id for
  ``transactional.id.expiration.ms`` (7 days), so a query with one-second triggers keeps a
  fixed number of ids instead of millions.
- An id is reused only once the batch that last used it is durably done, because reusing an id
  (InitProducerId) aborts whatever that id left open. Within a run, Spark plans batch N+1 only
  after commit(N) returned, and commit(N) writes "done" before it returns. After a restart, the
  driver finishes any recorded intent (``EosCommitter.recover``) while planning, before any task
  of the re-run is launched; an id whose transaction is still open (a failed attempt's, not yet
  swept) is skipped by the slot choice rather than aborted.
- A batch job's ids are new for each job (its write id is unique): at most partitions x 8 ids
  per job. A job with ``idempotencyKey`` reuses its key's ids on every run of the key.

Invariants:
- ``transactional_id`` and ``parse_transactional_id`` round-trip; ids of other writes (another
  prefix, or a prefix that merely starts with ours) do not parse.
- An :class:`EosPlan` holds names only (no client, no store): it pickles, and building it opens
  nothing. A streaming query's plan is ``fenced``, and so is a keyed batch job's and a batch
  job's given ``transactionalIdPrefix``: its driver's store writes go through the prefix's
  fence (``fence.py``; the id ``<prefix>.fence`` does not parse as a task's id). A fenced batch
  job's plan carries the fence's token from its planning to its commit (``fence_token``: ids
  and an epoch, no secret).
  ``open_store`` loads the Kafka store (and its client) only for ``intent_topic``, so
  the driver's workers of a write that keeps its intents elsewhere never load the network stack.
- A plan with neither ``intent_topic`` nor ``intent_dir`` keeps its intents in this process
  (``_MEMORY_STORES``), which suffices for a batch job: its one ``commit()`` call runs in the
  process that planned it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from kafka_sink.spark.fingerprint import Fingerprint

__all__ = [
    "SLOTS_PER_PARTITION",
    "CompletedJob",
    "EosPlan",
    "FenceToken",
    "PartialBatch",
    "default_prefix",
    "parse_transactional_id",
    "transactional_id",
]

_DEFAULT_PREFIX_HEAD = "pykafka-"

#: Transactional ids per Spark partition: a task attempt takes one no other attempt holds open
#: (``executor/slots.py``); the driver's sweeps look at all of them (``driver/eos/aborted.py``).
SLOTS_PER_PARTITION = 8


def default_prefix(query_or_write_id: str) -> str:
    """The default ``transactionalIdPrefix``: derived from the query id or the write id."""
    return _DEFAULT_PREFIX_HEAD + query_or_write_id


def transactional_id(prefix: str, partition_id: int, slot: int) -> str:
    """The id of the transaction of Spark partition ``partition_id`` in slot ``slot``."""
    if partition_id < 0 or slot < 0:
        raise ValueError(f"partition id and slot must be >= 0, got {partition_id}, {slot}")
    return f"{prefix}-{partition_id}-{slot}"


def parse_transactional_id(prefix: str, tid: str) -> tuple[int, int] | None:
    """(partition id, slot) of an id this prefix built, else None."""
    head = prefix + "-"
    if not tid.startswith(head):
        return None
    match = re.fullmatch(r"(0|[1-9][0-9]*)-(0|[1-9][0-9]*)", tid[len(head) :])
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2))


@dataclass(frozen=True)
class FenceToken:
    """What the coordinator last told this driver about the fence id."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    sequence: int = 0  # Transactions V1: the next record's sequence (the epoch stays)
    taken: str = ""  # the id of the InitProducerId that took the fence (kept across writes)
    #: The highest batch this driver may have recorded: the one after the store's latest
    #: record it last read while planning (-1: none known). Kept across writes.
    planned: int = -1


@dataclass(frozen=True)
class PartialBatch:
    """A batch Kafka committed only in part: which Spark partitions are visible, and with which
    rows (None: not known, so no re-run of that partition can be shown to be the same)."""

    batch_id: int
    committed: Mapping[int, Fingerprint | None] = field(default_factory=dict)


@dataclass(frozen=True)
class CompletedJob:
    """An earlier run completed this key: what the run that finds it reports (picklable)."""

    idempotency_key: str
    #: The write id of the run that completed it; None when its record was not stamped.
    write_id: str | None
    #: When it completed (epoch ms); None when its record was not stamped.
    completed_at_ms: int | None

    def describe(self) -> str:
        by = f"write {self.write_id}" if self.write_id else "an earlier run"
        when = (
            time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.completed_at_ms / 1000))
            if self.completed_at_ms is not None
            else "an unrecorded time"
        )
        return f"idempotencyKey {self.idempotency_key!r} was already completed by {by} at {when}"


@dataclass(frozen=True)
class EosPlan:
    """What an exactly-once write settled on the driver while planning (picklable)."""

    #: The start of every transactional id of the write.
    prefix: str
    #: The intent store's key: the streaming query id, the batch job's write id, or the
    #: record key of its ``idempotencyKey`` identity.
    query_key: str
    #: Local directory of the intent store (``intentStore=checkpoint``); None with neither this
    #: nor ``intent_topic``: in-process only (see ``_MEMORY_STORES``).
    intent_dir: str | None
    #: The intent topic (``intentStore=kafka``); takes precedence over ``intent_dir``.
    intent_topic: str | None = None
    #: Whether the driver holds the prefix's fence (``fence.py``): a streaming query's writes,
    #: a batch job's with ``idempotencyKey`` (each run takes it: ``idempotency.py``), and a
    #: batch job's without the key given ``transactionalIdPrefix`` (the prefix may be another
    #: write's too: ``job_fence.py``). A batch job's with a prefix of its own (``pykafka-<write
    #: id>``) never: no other write has it.
    fenced: bool = False
    #: A batch job's plan (keyed or not): when fenced, its planning takes the fence anew and
    #: its commit writes through the planning's token (``fence_token``).
    batch_job: bool = False
    #: A fenced batch job's fence as its planning left it: the commit writes through it (it
    #: never takes the fence again, which would fence a later write of the prefix).
    fence_token: FenceToken | None = None
    #: A batch job's ``idempotencyKey``: its record is kept once its commit is over.
    idempotency_key: str | None = None
    #: Set when an earlier run completed the key: the tasks and the commit write nothing.
    completed: CompletedJob | None = None
    #: The query's last batch, when Kafka committed it only in part (its re-run's tasks of the
    #: committed partitions write nothing).
    partial: PartialBatch | None = None
    #: A batch job's new write id in the intent topic: no record of it lies below this offset
    #: (the partition's end when the job was planned), so its commit reads only from there.
    new_key_from: int | None = None
    #: The driver's wall clock (ms) when the write was planned, before any of its tasks began a
    #: transaction: how far the driver's clock is at least ahead of the brokers' follows from the
    #: transactions' start times (``committer._brokers_now``). None: not known. Not part of
    #: what the plan settled, so plans compare equal without it.
    planned_wall_ms: int | None = field(default=None, compare=False)
    #: A streaming planning's batch, read from a local checkpoint (None: not known): a planning
    #: for a batch no driver recorded yet may take back a fence gone stale (``fence.py``).
    planned_batch: int | None = field(default=None, compare=False)

    def committed_partition(self, batch_id: int, partition_id: int) -> bool:
        """Whether Kafka already committed ``partition_id`` of batch ``batch_id``."""
        partial = self.partial
        return (
            partial is not None
            and partial.batch_id == batch_id
            and partition_id in partial.committed
        )
