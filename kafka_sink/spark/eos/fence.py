"""A streaming exactly-once query's fence: one transactional id that only its newest driver holds.

Role: a driver of an earlier run of a query (a driver pod or application master replaced while
it was cut off) may wake up while the new driver commits. It must not abort the new driver's
transactions, overwrite its intent records or report committed data as lost. Kafka's own
fencing does it: every query prefix owns the transactional id ``<prefix>.fence``
(:func:`fence_id`; ``plan.parse_transactional_id`` does not parse it, so no sweep touches it).

- The first planning on a driver (``EosCommitter.for_plan`` from ``datasource.py``, before the
  store is read, an intent rolled forward or anything swept) sends InitProducerId on the fence
  id. That fences every earlier holder: each earlier driver of the query, and every other query
  given the same ``transactionalIdPrefix`` (they share the fence id).
- The driver keeps the fence's :class:`FenceToken` (producer id, epoch; the next sequence under
  Transactions V1) where all its Python workers see it: a file next to ``logs.first_on_driver``'s
  markers in the driver's ``SPARK_LOCAL_DIRS``, replaced atomically. The planning worker and the
  commit worker of one driver run one after the other, never at once, so the file has one
  writer at a time. Without ``SPARK_LOCAL_DIRS`` (not under Spark) the token lives in the process.
- The commit worker never acquires: a driver without a token there holds no fence.
- Every write of the Kafka intent store goes through the fence as a transaction of its own
  (``kafka_intents.py``); a fenced driver's write is refused by Kafka and raises
  :class:`SinkFencedError`. The file and memory stores cannot write through a transaction:
  :class:`FencedStore` checks the fence (DescribeTransactions) before each write, which narrows
  the window to that check.
- Sweeps and aborts check the fence (:meth:`DriverFence.check`) after listing and before
  ending anything: a newer driver's tasks begin their transactions after its InitProducerId on
  the fence, so nothing they opened is in a listing that preceded a successful check.

Invariants:
- :meth:`DriverFence.check` passes only while the coordinator shows the fence id at exactly the
  producer id and epoch this driver last recorded; a higher epoch, another producer id or an
  unknown id means another driver took over.
- The fence is acquired at most once per driver and query key, and never in the commit worker.
- Standard library only at import: the Kafka clients are reached through injected callables.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from types import FrameType
from typing import TYPE_CHECKING

from kafka_sink.spark.eos.intents import BatchRecord, IntentStore
from kafka_sink.spark.errors import SinkError

if TYPE_CHECKING:
    from kafka_sink.admin.transactions import TransactionListing

__all__ = [
    "FENCE_SUFFIX",
    "DriverFence",
    "FenceToken",
    "FencedStore",
    "SinkFencedError",
    "fence_id",
    "in_commit_worker",
    "open_fence",
]

FENCE_SUFFIX = ".fence"
# The file of pyspark's worker that commits or aborts a streaming batch.
_COMMIT_WORKER = "python_streaming_sink_runner"
# Tokens of this process when there is no Spark local directory to share them through.
_HELD: dict[str, FenceToken] = {}


class SinkFencedError(SinkError):
    """A newer run of the query (or another query with the same prefix) holds the fence."""


def fence_id(prefix: str) -> str:
    """The fence's transactional id of ``prefix`` (never a task's id: no ``-<n>-<n>`` tail)."""
    return prefix + FENCE_SUFFIX


@dataclass(frozen=True)
class FenceToken:
    """What the coordinator last told this driver about the fence id."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    sequence: int = 0  # Transactions V1: the next record's sequence (the epoch stays)


class DriverFence:
    """The fence one driver holds for one query (see the module docstring)."""

    def __init__(
        self,
        prefix: str,
        query_key: str,
        token: FenceToken,
        *,
        describe: Callable[[str], TransactionListing | None],
    ) -> None:
        self.prefix = prefix
        self.query_key = query_key
        self._token = token
        self._describe = describe

    @property
    def token(self) -> FenceToken:
        return self._token

    def advance(self, token: FenceToken) -> None:
        """Record where the fence stands after one of this driver's writes through it."""
        self._token = token
        _save(self.prefix, self.query_key, token)

    def why_not_held(self) -> str | None:
        """None while this driver holds the fence, else what the coordinator shows instead."""
        now = self._describe(self._token.transactional_id)
        if now is None:
            return f"the coordinator does not know {self._token.transactional_id!r}"
        if (now.producer_id, now.producer_epoch) == (
            self._token.producer_id,
            self._token.producer_epoch,
        ):
            return None
        return (
            f"the coordinator shows {self._token.transactional_id!r} at producer id "
            f"{now.producer_id}, epoch {now.producer_epoch}; this driver holds producer id "
            f"{self._token.producer_id}, epoch {self._token.producer_epoch}"
        )

    def check(self, doing: str) -> None:
        """Raise :class:`SinkFencedError` unless this driver still holds the fence."""
        why = self.why_not_held()
        if why is not None:
            raise self.error(doing, why)

    def error(self, doing: str, why: object) -> SinkFencedError:
        return SinkFencedError(
            f"exactly-once: this driver was fenced while {doing}: a newer run of the query (or "
            f"another query given the same transactionalIdPrefix {self.prefix!r}) took over "
            f"({why}). This driver ends no transaction and writes no intent any more; the newer "
            "driver finishes what this one recorded. Fix: none if the query was restarted "
            "elsewhere; otherwise give each query its own transactionalIdPrefix"
        )


class FencedStore:
    """An intent store that cannot write through a transaction, behind a fence check."""

    def __init__(self, store: IntentStore, fence: DriverFence) -> None:
        self.store = store
        self.fence = fence

    def last(self, query_key: str) -> BatchRecord | None:
        return self.store.last(query_key)

    def write(self, record: BatchRecord) -> None:
        self.fence.check(f"writing the {record.state} record of batch {record.batch_id}")
        self.store.write(record)

    def delete(self, query_key: str) -> None:
        self.fence.check(f"deleting the intent record of {query_key!r}")
        self.store.delete(query_key)

    def close(self) -> None:
        self.store.close()


def open_fence(
    prefix: str,
    query_key: str,
    *,
    init: Callable[[str], tuple[int, int]],
    describe: Callable[[str], TransactionListing | None],
    before_acquire: Callable[[], None] = lambda: None,
) -> DriverFence:
    """This driver's fence of ``prefix``: the token it keeps, else a new InitProducerId (the
    planning only; ``before_acquire`` runs first, to refuse a prefix another query owns)."""
    token = _load(prefix, query_key)
    if token is None:
        if in_commit_worker():
            raise SinkFencedError(
                f"exactly-once: this driver holds no fence of transactionalIdPrefix {prefix!r} "
                "when committing (its planning never took it); it ends nothing. Fix: restart "
                "the query"
            )
        before_acquire()
        producer_id, epoch = init(fence_id(prefix))
        token = FenceToken(fence_id(prefix), producer_id, epoch)
        _save(prefix, query_key, token)
    return DriverFence(prefix, query_key, token, describe=describe)


def in_commit_worker() -> bool:
    """True inside pyspark's worker that commits or aborts a streaming batch."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if _COMMIT_WORKER in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


def _path(prefix: str, query_key: str) -> str | None:
    local_dir = os.environ.get("SPARK_LOCAL_DIRS", "").split(",")[0]
    if not local_dir or not os.path.isdir(local_dir):
        return None
    digest = hashlib.sha256(f"{prefix}\0{query_key}".encode()).hexdigest()[:16]
    return os.path.join(local_dir, f"pykafka-fence-{digest}.json")


def _load(prefix: str, query_key: str) -> FenceToken | None:
    path = _path(prefix, query_key)
    if path is None:
        return _HELD.get(f"{prefix}\0{query_key}")
    try:
        with open(path, encoding="utf-8") as f:
            return FenceToken(**json.load(f))
    except FileNotFoundError:
        return None


def _save(prefix: str, query_key: str, token: FenceToken) -> None:
    path = _path(prefix, query_key)
    if path is None:
        _HELD[f"{prefix}\0{query_key}"] = token
        return
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(asdict(token), f)
    os.replace(tmp, path)
