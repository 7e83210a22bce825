"""Prefix claims: a ``transactionalIdPrefix`` belongs to one exactly-once write at a time.

Role: two writes given the same ``transactionalIdPrefix`` (queries, batch jobs with
``idempotencyKey`` or without) would sweep, and so abort, each other's open transactions. The
Kafka intent store keeps a claim per prefix (key ``prefix:<prefix>``, value the owning query
key: a streaming query's id, or a keyed job's record key; ``kafka_intents.py``):

- :func:`refuse_foreign_claim` (read-only) runs in every ``streamWriter()`` call, planning and
  commit, in the planning of every batch job with ``idempotencyKey`` (whatever its prefix), and
  in a batch job's ``writer()`` given an explicit prefix: a prefix another query key claimed is
  refused with a :class:`~kafka_sink.sink_errors.SinkOptionError` naming the prefix, the owner
  and the fixes. It runs before the fence is taken, so a refused write never fences the owner
  nor sweeps its prefix.
- :func:`take_claim` runs once the driver holds the fence (``fence.py``; a keyed job's run:
  ``idempotency.py``) and writes the claim through it. Two writes starting at once both
  InitProducerId the shared fence; the one fenced before its claim write commits is refused,
  with the fence's own error when the claim is then its own key's or nobody's (another run of
  the same query or key fenced it).
- A batch job without ``idempotencyKey`` given a prefix only refuses a foreign claim, then takes
  the fence (``job_fence.py``) but no claim: its owner would be its write id, new for each job,
  so a killed job's claim would refuse every later write of the prefix until released.

Invariants: only the Kafka store keeps claims (a file store lives in one query's checkpoint, so
it sees no other query); the claim never names a secret.

Not covered: a claim is read and written in the write's own intent topic only. A write given
the same prefix and another ``intentTopic`` (or ``intentStore=checkpoint``) does not see it,
takes the prefix's fence and sweeps the owner's open transactions: every write of a prefix must
use the same intent topic (docs/exactly-once.md, "What is not covered").
"""

from __future__ import annotations

from typing import Protocol

from kafka_sink.sink_errors import SinkFencedError, SinkOptionError
from kafka_sink.spark.driver.eos.intents import IntentStore

__all__ = ["refuse_foreign_claim", "take_claim"]


class _ClaimStore(Protocol):
    topic: str

    def claim_owner(self, prefix: str) -> str | None: ...

    def claim(self, prefix: str, query_key: str) -> None: ...


def _claims(store: IntentStore) -> _ClaimStore | None:
    return store if hasattr(store, "claim_owner") else None  # type: ignore[return-value]


def refuse_foreign_claim(store: IntentStore, prefix: str, query_key: str) -> None:
    """Raise unless ``prefix`` is unclaimed or claimed by ``query_key``."""
    claims = _claims(store)
    if claims is None:
        return
    owner = claims.claim_owner(prefix)
    if owner is not None and owner != query_key:
        raise _refusal(claims.topic, prefix, owner)


def take_claim(store: IntentStore, prefix: str, query_key: str) -> None:
    """Claim ``prefix`` for ``query_key`` through the fence the store writes with."""
    claims = _claims(store)
    if claims is None:
        return
    owner = claims.claim_owner(prefix)
    if owner == query_key:
        return
    if owner is not None:
        raise _refusal(claims.topic, prefix, owner)
    try:
        claims.claim(prefix, query_key)
    except SinkFencedError as exc:
        # Fenced before the claim landed: by another write starting at the same time, or by
        # another run of this one (the same query key), whose own error says so.
        if claims.claim_owner(prefix) in (None, query_key):
            raise
        raise SinkOptionError(
            f"transactionalIdPrefix {prefix!r} was taken by another exactly-once write starting "
            f"at the same time ({exc}). Fix: give each write its own transactionalIdPrefix"
        ) from exc


def _refusal(topic: str, prefix: str, owner: str) -> SinkOptionError:
    return SinkOptionError(
        f"transactionalIdPrefix {prefix!r} belongs to another exactly-once write (a streaming "
        f"query, or a batch job with another idempotencyKey; its key {owner!r}): two writes "
        "sharing a prefix would abort each other's transactions. Fix: give this write another "
        "transactionalIdPrefix (a batch job with idempotencyKey may leave the option out: each "
        "key then gets a prefix of its own); or, if that write is gone for good, "
        "release the prefix: kafka_sink.release_prefix({'bootstrap.servers': ...}, "
        f"{prefix!r}, {topic!r})"
    )
