"""Prefix claims: a ``transactionalIdPrefix`` belongs to one streaming query at a time.

Role: two queries (or a query and a batch job) given the same ``transactionalIdPrefix`` would
sweep, and so abort, each other's open transactions. The Kafka intent store keeps a claim per
prefix (key ``prefix:<prefix>``, value the owning query key; ``kafka_intents.py``):

- :func:`refuse_foreign_claim` (read-only) runs in every ``streamWriter()`` call, planning and
  commit, and in a batch job's ``writer()`` given an explicit prefix: a prefix another query
  key claimed is refused with a :class:`~kafka_sink.spark.errors.SinkOptionError` naming the
  prefix, the owner and the fixes. It runs before the fence is taken, so a refused query never
  fences the owner.
- :func:`take_claim` runs once the driver holds the fence (``fence.py``) and writes the claim
  through it. Two queries starting at once both InitProducerId the shared fence; the one fenced
  before its claim write commits is refused.

Invariants: only the Kafka store keeps claims (a file store lives in one query's checkpoint, so
it sees no other query); the claim never names a secret.
"""

from __future__ import annotations

from typing import Protocol

from kafka_sink.spark.eos.fence import SinkFencedError
from kafka_sink.spark.eos.intents import IntentStore
from kafka_sink.spark.errors import SinkOptionError

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
        raise SinkOptionError(
            f"transactionalIdPrefix {prefix!r} was taken by another query starting at the same "
            f"time ({exc}). Fix: give each query its own transactionalIdPrefix"
        ) from exc


def _refusal(topic: str, prefix: str, owner: str) -> SinkOptionError:
    return SinkOptionError(
        f"transactionalIdPrefix {prefix!r} belongs to another exactly-once query (query key "
        f"{owner!r}): two writes sharing a prefix would abort each other's transactions. Fix: "
        "give this write another transactionalIdPrefix; or, if that query is gone for good, "
        "release the prefix: kafka_sink.spark.eos.release_prefix({'bootstrap.servers': ...}, "
        f"{prefix!r}, {topic!r})"
    )
