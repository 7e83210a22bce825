"""The driver's side of an exactly-once plan: the intent store it names, and what planning
reads back into it.

Role: :class:`~kafka_sink.spark.eos_plan.EosPlan` is what the writers carry to the tasks, so it
lives beside them and loads nothing of the driver. Opening its intent store (a file, memory or a
compacted topic, behind the fence when the driver holds one), carrying a partial batch's record
into it, and dropping a committed batch job's record are the driver's alone: here.

Invariants:
- A plan with neither ``intent_topic`` nor ``intent_dir`` keeps its intents in this process
  (``_MEMORY_STORES``): enough for a batch job, whose one ``commit()`` runs where it was planned.
- Only a plan with an intent topic loads the Kafka client in the driver's workers.
"""

from __future__ import annotations

from dataclasses import replace

from kafka_sink.sink_errors import SinkError
from kafka_sink.spark.driver.eos.fence import DriverFence, FencedStore
from kafka_sink.spark.driver.eos.intents import (
    PARTIAL,
    BatchRecord,
    FileIntentStore,
    IntentStore,
    MemoryIntentStore,
)
from kafka_sink.spark.eos_plan import EosPlan, PartialBatch
from kafka_sink.spark.logs import logger

__all__ = ["forget_batch_job", "open_intent_store", "with_last_record"]

# Processes without a durable place for intents (a batch job without a local commitLog) keep
# them here: enough for the one commit() call that uses them.
_MEMORY_STORES: dict[str, MemoryIntentStore] = {}


def with_last_record(plan: EosPlan, record: BatchRecord | None) -> EosPlan:
    """``plan``, carrying ``record``'s batch to its tasks when the record is partial."""
    if record is None or record.state != PARTIAL or not record.committed:
        return plan
    return replace(plan, partial=PartialBatch(record.batch_id, dict(record.committed)))


def open_intent_store(
    plan: EosPlan, producer_config: dict[str, str], fence: DriverFence | None = None
) -> IntentStore:
    """``plan``'s store; with ``fence``, its writes go through the fence."""
    if plan.intent_topic is not None:
        # Only this store needs a Kafka client (the admin and network stack): a write whose
        # intents live on disk or in memory does not load it in the driver's workers.
        from kafka_sink.spark.driver.eos.kafka_intents import KafkaIntentStore

        kafka_store = KafkaIntentStore.open(producer_config, plan.intent_topic, fence=fence)
        if plan.new_key_from is not None:
            kafka_store.known_new_from(plan.query_key, plan.new_key_from)
        return kafka_store
    store: IntentStore
    if plan.intent_dir is not None:
        store = FileIntentStore(plan.intent_dir)
    else:
        store = _MEMORY_STORES.setdefault(plan.query_key, MemoryIntentStore())
    return store if fence is None else FencedStore(store, fence)


def forget_batch_job(plan: EosPlan, store: IntentStore) -> None:
    """Drop a committed batch job's record, so the store does not grow with every job."""
    _MEMORY_STORES.pop(plan.query_key, None)
    try:
        store.delete(plan.query_key)
    except (OSError, SinkError) as exc:  # the job is committed; the record is bookkeeping
        logger.warning(
            "pykafka exactly-once: the job is committed, but its intent record %r could "
            "not be deleted: %s",
            plan.query_key,
            exc,
        )
