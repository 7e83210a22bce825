"""The plan of an exactly-once write: its transactional ids and where its intents are kept.

Role: ``deliveryGuarantee=exactly-once`` writes each Spark task attempt's rows in a Kafka
transaction of its own, which the task prepares (``spark/task.py``) and the driver commits
(``committer.py``). While planning, the driver settles an :class:`EosPlan` (``datasource.py``):
the prefix of the write's transactional ids, the intent store's key and which store holds the
intents. The writers carry the plan to the tasks (it is picklable); the tasks build their ids
from it and the driver opens its intent store from it.

Transactional ids. A write uses ``<prefix>-<partition id>-<slot>``, where the prefix is the
``transactionalIdPrefix`` option or ``pykafka-<query id>`` (streaming) / ``pykafka-<write id>``
(batch job), and the slot is one of ``slots.SLOTS_PER_PARTITION`` (8) per Spark partition. So:

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
  per job.

Invariants:
- ``transactional_id`` and ``parse_transactional_id`` round-trip; ids of other writes (another
  prefix, or a prefix that merely starts with ours) do not parse.
- An :class:`EosPlan` holds names only (no client, no store): it pickles, and building it opens
  nothing. A streaming query's plan is ``fenced``: its driver's store writes go through the
  prefix's fence (``fence.py``; the id ``<prefix>.fence`` does not parse as a task's id).
  ``open_store`` loads the Kafka store (and its client) only for ``intent_topic``, so
  the driver's workers of a write that keeps its intents elsewhere never load the network stack.
- A plan with neither ``intent_topic`` nor ``intent_dir`` keeps its intents in this process
  (``_MEMORY_STORES``), which suffices for a batch job: its one ``commit()`` call runs in the
  process that planned it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kafka_sink.spark.eos.fence import DriverFence, FencedStore
from kafka_sink.spark.eos.intents import FileIntentStore, IntentStore, MemoryIntentStore
from kafka_sink.spark.errors import SinkError
from kafka_sink.spark.logs import logger

__all__ = ["EosPlan", "default_prefix", "parse_transactional_id", "transactional_id"]

_DEFAULT_PREFIX_HEAD = "pykafka-"
# Processes without a durable place for intents (a batch job without a local commitLog) keep
# them here: enough for the one commit() call that uses them.
_MEMORY_STORES: dict[str, MemoryIntentStore] = {}


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
class EosPlan:
    """What an exactly-once write settled on the driver while planning (picklable)."""

    #: The start of every transactional id of the write.
    prefix: str
    #: The intent store's key: the streaming query id, or the batch job's write id.
    query_key: str
    #: Local directory of the intent store (``intentStore=checkpoint``); None with neither this
    #: nor ``intent_topic``: in-process only (see ``_MEMORY_STORES``).
    intent_dir: str | None
    #: The intent topic (``intentStore=kafka``); takes precedence over ``intent_dir``.
    intent_topic: str | None = None
    #: Whether the driver holds the prefix's fence (``fence.py``): a streaming query's writes.
    #: A batch job's never: its fence would fence a streaming query given the same prefix.
    fenced: bool = False

    def open_store(
        self, producer_config: dict[str, str], fence: DriverFence | None = None
    ) -> IntentStore:
        """The plan's store; with ``fence``, its writes go through the fence."""
        if self.intent_topic is not None:
            # Only this store needs a Kafka client (the admin and network stack): a write whose
            # intents live on disk or in memory does not load it in the driver's workers.
            from kafka_sink.spark.eos.kafka_intents import KafkaIntentStore

            return KafkaIntentStore.open(producer_config, self.intent_topic, fence=fence)
        store: IntentStore
        if self.intent_dir is not None:
            store = FileIntentStore(self.intent_dir)
        else:
            store = _MEMORY_STORES.setdefault(self.query_key, MemoryIntentStore())
        return store if fence is None else FencedStore(store, fence)

    def forget_batch_job(self, store: IntentStore) -> None:
        """Drop a committed batch job's record, so the store does not grow with every job."""
        _MEMORY_STORES.pop(self.query_key, None)
        try:
            store.delete(self.query_key)
        except (OSError, SinkError) as exc:  # the job is committed; the record is bookkeeping
            logger.warning(
                "pykafka exactly-once: the job is committed, but its intent record %r could "
                "not be deleted: %s",
                self.query_key,
                exc,
            )
