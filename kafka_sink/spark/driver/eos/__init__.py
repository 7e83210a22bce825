"""Exactly-once delivery: a Kafka transaction per task attempt, committed by the driver.

Modules: ``plan`` (transactional ids and the :class:`~kafka_sink.spark.eos_plan.EosPlan` a write
carries to its tasks), ``intents`` (the intent records, the store interface and the file and
memory stores), ``kafka_intents`` (the intent store on a compacted Kafka topic), ``committer``
(the driver's roll-forward commit over an intent store), ``fence`` (a streaming query's fence:
only its newest driver writes intents and ends transactions), ``job_fence`` (the same fence
for the runs of one ``idempotencyKey``: the newest run writes), ``claims`` (one write per
``transactionalIdPrefix``), ``idempotency`` (a batch job's ``idempotencyKey``), ``start`` (a
streaming query's start: abort what an earlier run left open, before the first batch's tasks)
and ``timeout`` (``transaction.timeout.ms`` against the brokers' maximum). The task side
(begin, write, prepare, abort on failure) is ``spark/executor/task.py``.

Invariants: an intent is durable before the first EndTxn of its batch; a transaction an intent
names is only ever committed; the driver's paths here never load the producer, numpy or
``pyarrow.compute``; ``plan`` and ``intents`` open no client, and the Kafka store's client is
loaded only when a plan names an intent topic.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["release_prefix"]


def release_prefix(
    producer_config: Mapping[str, str], prefix: str, topic: str = "pykafka-commit-intents"
) -> None:
    """Release ``prefix``'s claim in the intent topic, for a query that is gone for good (its
    next user claims it). ``producer_config``: ``{"bootstrap.servers": ...}`` and security."""
    from kafka_sink.spark.driver.eos.kafka_intents import release_prefix as release

    release(producer_config, prefix, topic)
