"""A batch job's ``idempotencyKey``: re-running the job with the same key writes its rows once.

Role: orchestrators retry a failed job by running it again on the same data. With option
``idempotencyKey`` (exactly-once batch writes) the job's record in the intent store outlives the
job and is keyed by the job's identity (:func:`job_identity`: the transactional prefix, the topic
set and the key), so a re-run finds what an earlier run of the same key did. While Spark plans
the write, before any task runs, :func:`plan_job` reads that record:

- done: the key was completed before; the run's tasks write nothing and its commit sends nothing
  to Kafka (the returned :class:`CompletedJob` travels to them in the write's plan);
- an intent not yet finished (a run died or failed after recording its commit): the recorded
  commit is finished (``EosCommitter.recover``), then as done;
- none: the run writes everything, as a job without the key does.

Then it aborts the prefix's open transactions that no unfinished intent names (a run that died
before its intent leaves them open, holding read_committed readers back until
``transaction.timeout.ms``) and logs how many. Once a run's commit is over,
:func:`record_completion` stamps the done record with the key, the run's write id and the time,
which a later run of the key reports. The key plays the part of Delta Lake's idempotent writes'
``txnAppId`` and ``txnVersion`` together: one key names one write.

Runs of one key at the same time (an orchestrator that triggers a job twice) are serialised by
the fence of the job's prefix (``fence.py``: the id ``<prefix>.fence``), as a streaming query's
drivers are. Every run's planning, before it reads the record, refuses a prefix another write
claimed (``claims.py``: the planning never sweeps a prefix it does not own), then takes the
fence with a new InitProducerId (``job_fence.py``), which fences every earlier run of the key
still going, and claims the prefix for the key; the plan carries the fence's token to the run's
commit (``EosPlan.fence_token``), which writes through it and never takes it again. So a run
that a later one fenced is refused by Kafka at its next intent-store write, and ends nothing at
its next sweep or abort: it fails with :class:`~kafka_sink.spark.driver.eos.fence.SinkFencedError`
saying another run of the key took it over (``job_fence.JobFence``), and the later run writes the
job once, finishing what the earlier one recorded. The store itself refuses to turn a done
record back into an intent or a partial one (``intents.refuse_replacing_done``).

Invariants:
- :func:`job_identity` is a pure function of (key, ``topic`` option, ``transactionalIdPrefix``
  option): every run of the same job gets the same prefix (by default
  ``pykafka-job-<16 hex digits>``) and the same record key (``job-<32 hex digits>``). Rows that
  carry their topic count as one topic set, :data:`TOPIC_COLUMN_MARKER`.
- The sink never deletes a key's record: a key is remembered as long as the store keeps it.
- A recorded commit that Kafka lost part of is recorded PARTIAL by the committer: the re-run
  writes the lost Spark partitions and only fingerprints the committed ones (the datasource puts
  the record in the plan), as a streaming batch's re-run does. An intent still unfinished after
  ``recover`` (marked lost by an older release) fails the planning naming the key, the
  transactions lost and what the user can do.
- At most one run of a key holds its fence; only that run writes the key's record or ends
  transactions of its prefix. A planning fenced before it ends fails before any task writes.
- At run time it imports the standard library and the intent records only (the driver's
  workers import it for every exactly-once batch write).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kafka_sink.sink_errors import SinkError, SinkIdempotencyError
from kafka_sink.spark.driver.eos.intents import DONE, INTENT, PARTIAL, BatchRecord, IntentStore
from kafka_sink.spark.driver.eos.plan_store import with_last_record
from kafka_sink.spark.eos_plan import CompletedJob, EosPlan, parse_transactional_id
from kafka_sink.spark.logs import ensure_logging, logger

if TYPE_CHECKING:
    from kafka_sink.spark.driver.eos.committer import EosCommitter

__all__ = [
    "TOPIC_COLUMN_MARKER",
    "CompletedJob",
    "JobIdentity",
    "SinkIdempotencyError",
    "job_identity",
    "job_plan",
    "plan_job",
    "record_completion",
]

#: The topic set of a job whose rows carry their topic (no ``topic`` option).
TOPIC_COLUMN_MARKER = "topic column"
# What a completed run stamps on the done record (see record_completion).
_KEY = "idempotency_key"
_WRITE_ID = "write_id"
_COMPLETED_AT_MS = "completed_at_ms"
# The committer's mark of an intent whose transactions Kafka lost: the ids it lost.
_LOST = "lost"
# A keyed job is one atomic write: batch 0 of its record.
JOB_BATCH_ID = 0


@dataclass(frozen=True)
class JobIdentity:
    """Who a keyed batch job is, the same on every run of it."""

    idempotency_key: str
    #: The ``topic`` option, or :data:`TOPIC_COLUMN_MARKER`.
    topics: str
    #: The start of the job's transactional ids.
    prefix: str
    #: The key of the job's record in the intent store.
    query_key: str


def _digest(*parts: str) -> str:
    # JSON keeps the parts apart whatever characters they hold.
    return hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()


def job_identity(key: str, *, topic: str | None, prefix: str | None) -> JobIdentity:
    """The identity of the batch job written with ``idempotencyKey`` ``key``."""
    topics = topic if topic is not None else TOPIC_COLUMN_MARKER
    chosen = prefix if prefix is not None else "pykafka-job-" + _digest(topics, key)[:16]
    return JobIdentity(
        idempotency_key=key,
        topics=topics,
        prefix=chosen,
        query_key="job-" + _digest(chosen, topics, key)[:32],
    )


def job_plan(
    committer: EosCommitter, identity: JobIdentity, plan: EosPlan, *, write_id: str
) -> EosPlan:
    """``plan`` once :func:`plan_job` settled the run: the earlier completion (the tasks write
    nothing), or the key's partial record (``EosPlan.with_last_record``); and the run's fence,
    which its commit writes through."""
    completed = plan_job(committer, identity, write_id=write_id)
    if completed is None:
        # A keyed job is one batch (0) of a stable record: a partly committed run is re-run as
        # a streaming batch would be.
        plan = with_last_record(plan, committer.store.last(plan.query_key))
    fence = committer.fence
    return replace(plan, completed=completed, fence_token=None if fence is None else fence.token)


def plan_job(
    committer: EosCommitter, identity: JobIdentity, *, write_id: str
) -> CompletedJob | None:
    """Settle a keyed job before its tasks run (see the module docstring).

    Returns the earlier completion when the key is done (after finishing a recorded commit),
    None when the run is to write everything. Raises :class:`SinkIdempotencyError` when the key's
    recorded commit was partly lost, and what ``recover`` raises when Kafka cannot be told to
    finish a recorded commit now (nothing new is written; the next run tries again).
    """
    ensure_logging()  # the planning runs in a driver-side worker Spark starts bare
    before = committer.store.last(identity.query_key)
    record = committer.recover()
    if record is not None and record.state == INTENT:
        raise SinkIdempotencyError(_lost_message(identity, record))
    aborted = committer.sweep_leftovers()
    logger.info(
        "pykafka exactly-once: aborted %d open transaction(s) of prefix %r that no recorded "
        "commit names, before the tasks of idempotencyKey %r run",
        aborted,
        identity.prefix,
        identity.idempotency_key,
    )
    if committer.fence is not None:
        # A run of the key planned since fenced this one (its sweep then ended nothing): this
        # run stops before any task writes.
        committer.fence.check("planning the job")
    if record is None or record.state == PARTIAL:
        # Nothing recorded: write everything. Partly committed: the re-run writes what Kafka
        # lost, and the tasks of the committed partitions only show their rows are the same
        # (the plan carries the record to them: ``EosPlan.with_last_record``).
        return None
    if before is not None and before.state == INTENT:
        # This run finished what an earlier one recorded: it is the run that completed the key.
        record_completion(
            committer.store,
            identity.query_key,
            identity.idempotency_key,
            write_id=write_id,
            wall_ms=committer.clock.wall_ms(),
        )
        record = committer.store.last(identity.query_key) or record
    return _completed(identity, record)


def record_completion(
    store: IntentStore, query_key: str, idempotency_key: str, *, write_id: str, wall_ms: int
) -> None:
    """Stamp the done record of ``query_key`` (the identity of ``idempotency_key``) with who
    completed it and when, once: a stamp is kept. One that cannot be written costs only the
    report; the done record stands."""
    try:
        record = store.last(query_key)
        if record is None or record.state != DONE or _KEY in record.extra:
            return
        extra = {
            **record.extra,
            _KEY: idempotency_key,
            _WRITE_ID: write_id,
            _COMPLETED_AT_MS: str(wall_ms),
        }
        store.write(
            BatchRecord(record.query_key, record.batch_id, DONE, record.transactions, extra)
        )
    except (OSError, SinkError) as exc:
        logger.warning(
            "pykafka exactly-once: idempotencyKey %r is completed, but who completed it and when "
            "could not be recorded: %s",
            idempotency_key,
            exc,
        )


def _completed(identity: JobIdentity, record: BatchRecord) -> CompletedJob:
    at = record.extra.get(_COMPLETED_AT_MS)
    return CompletedJob(
        idempotency_key=identity.idempotency_key,
        write_id=record.extra.get(_WRITE_ID),
        completed_at_ms=int(at) if at is not None and at.isdigit() else None,
    )


def _lost_message(identity: JobIdentity, record: BatchRecord) -> str:
    lost = [t for t in record.extra.get(_LOST, "").split(",") if t]
    parsed = [parse_transactional_id(identity.prefix, t) for t in lost]
    partitions = sorted({p[0] for p in parsed if p is not None})
    return (
        f"idempotencyKey {identity.idempotency_key!r} (topics: {identity.topics}; prefix "
        f"{identity.prefix!r}): an earlier run recorded its commit, but Kafka lost "
        f"{len(lost) or 'some'} of its transaction(s) {lost} (Spark partitions {partitions}) "
        "before they could be committed (the driver was away "
        "longer than transaction.timeout.ms); the rows of its other transactions are visible. "
        "Writing the job again would show those rows twice, so this run writes nothing. Fix: "
        "write the rows of the lost transactions' Spark partitions with a new idempotencyKey, "
        f"or delete the key's intent record {identity.query_key!r} to write the whole job "
        "again (its visible rows then appear twice): with intentStore=checkpoint the file "
        f"{identity.query_key}.json under <commitLog>/pykafka-intents, with intentStore=kafka "
        "a tombstone (a record with a null value) of that key in the intentTopic"
    )
