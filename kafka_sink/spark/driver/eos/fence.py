"""A streaming exactly-once query's fence: one transactional id that only its newest driver holds.

Role: a driver of an earlier run of a query (a driver pod or application master replaced while
it was cut off) may wake up while the new driver commits. It must not abort the new driver's
transactions, overwrite its intent records or report committed data as lost. Kafka's own
fencing does it: every query prefix owns the transactional id ``<prefix>.fence``
(:func:`fence_id`; ``plan.parse_transactional_id`` does not parse it, so no sweep touches it).

- A planning that starts the query on a driver (``EosCommitter.for_plan`` from
  ``datasource.py``, before the store is read, an intent rolled forward or anything swept) sends
  InitProducerId on the fence id. That fences every earlier holder: each earlier driver of the
  query, and every other query given the same ``transactionalIdPrefix`` (they share the fence
  id). A planning starts the query when the driver holds no token for it (its first planning,
  or the first after the token was dropped), or when the last batch planned on this driver
  never reached its commit or abort (``start.py``'s pending marker: that run was stopped
  mid-batch).
- A planning whose token is no longer the coordinator's (one DescribeTransactions per planning;
  a planning that gets no answer goes on with its token) cannot tell which run of the query it
  serves (Spark keeps the run id in the JVM): the query started again in a long-lived
  application (a Spark Connect server, a notebook) after another application ran it, or an
  older run of the query planning again after a newer driver took over (a driver cut off
  between batches while its replacement started). It takes the fence back only when no other
  driver went on with the query since this driver last planned: the store's latest record of
  the query is not after the batch this driver last planned (:attr:`FenceToken.planned`, kept
  with the token: the batch after the store's latest record its planning read,
  :meth:`DriverFence.planning`), and no transaction of the query's task ids is open that an
  unfinished intent does not name (a newer driver's batch in flight). Otherwise it raises
  :class:`SinkFencedError` and drops the token: an older run stops there without fencing the
  newer driver, and a restart refused so (the other run went on, then stopped) takes the fence
  when started again, holding no token then. What stays open: a newer driver that took the
  fence and has neither recorded a batch nor opened a transaction yet (between its planning's
  InitProducerId and its tasks' first writes) is not seen, and an older run planning in that
  window takes the fence back; the newer driver is then stopped at its commit, and its restart
  fences the older run for good once it recorded a batch.
- Each take has an id of its own (:attr:`FenceToken.taken`), kept with the token across the
  writes through it; the query's start work (``start.py``) runs once per take.
- A fence found lost is forgotten: :meth:`DriverFence.error` drops the token, so the next
  planning on this driver takes the fence anew instead of failing on a stale token.
- Under Transactions V2 every write through the fence ends with an EndTxn that bumps the epoch.
  When that EndTxn was applied but its answer lost, the write fails while the coordinator moved
  on: :meth:`DriverFence.relearn` asks the coordinator and takes its epoch when it is exactly
  the next one with the transaction ended, so the driver is not left one epoch behind and
  reported fenced.
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
- The fence is acquired only by a planning that starts the query (no token, a batch left
  pending here, or a batch the checkpoint plans after every batch the store recorded) or finds
  no other driver went on since (above), never in the commit worker; the token is dropped
  whenever this driver's fence is found lost, and by a stale planning that is refused.
- :attr:`FenceToken.planned` only grows within a take and is kept across the writes through
  the fence; a take sets it from the store read right after its InitProducerId.
- :meth:`DriverFence.relearn` adopts only the producer id it holds, at exactly the next epoch,
  with the transaction being or having been ended (Prepare or Complete, Commit or Abort), and
  only for a fence whose writes bump the epoch (Transactions V2). Another driver's take leaves
  the id Empty at a later epoch; caught between the abort its InitProducerId does first and the
  InitProducerId's end, the epoch adopted is refused at the next write, or that write lands
  before the take completes, and the other driver reads the store after it.
- Standard library, ``kafka_sink.errors`` and ``spark.logs`` only at import: the Kafka clients
  are reached through injected callables.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from types import FrameType
from typing import TYPE_CHECKING

from kafka_sink.errors import KafkaError, UnsupportedVersionError
from kafka_sink.sink_errors import SinkError, SinkFencedError
from kafka_sink.spark.driver.eos.intents import BatchRecord, IntentStore
from kafka_sink.spark.eos_plan import FenceToken
from kafka_sink.spark.logs import warn_once

if TYPE_CHECKING:
    from kafka_sink.admin.transactions import TransactionListing

__all__ = [
    "FENCE_SUFFIX",
    "PENDING",
    "DriverFence",
    "FenceToken",
    "FencedStore",
    "SinkFencedError",
    "batch_pending",
    "drop_token",
    "fence_id",
    "in_commit_worker",
    "open_fence",
    "pending_path",
    "take_id",
]

log = logging.getLogger("kafka_sink.spark")

FENCE_SUFFIX = ".fence"
# The file of pyspark's worker that commits or aborts a streaming batch.
_COMMIT_WORKER = "python_streaming_sink_runner"
# Tokens of this process when there is no Spark local directory to share them through.
_HELD: dict[str, FenceToken] = {}
# The coordinator's states of a transaction this fence's own EndTxn ended.
_ENDED = frozenset({"PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort"})


def fence_id(prefix: str) -> str:
    """The fence's transactional id of ``prefix`` (never a task's id: no ``-<n>-<n>`` tail)."""
    return prefix + FENCE_SUFFIX


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
        self._token = replace(token, taken=self._token.taken, planned=self._token.planned)
        _save(self.prefix, self.query_key, self._token)

    def planning(self, last: BatchRecord | None) -> None:
        """A planning of this driver read ``last`` (the store's latest record of the query):
        the batch it plans is at most the one after. Kept while the token kept is this take's
        (a token dropped since is not brought back)."""
        planned = _next_batch(last)
        if planned <= self._token.planned:
            return
        self._token = replace(self._token, planned=planned)
        held = _load(self.prefix, self.query_key)
        if held is not None and held.taken == self._token.taken:
            _save(self.prefix, self.query_key, replace(held, planned=planned))

    def relearn(self) -> bool:
        """After a write through the fence whose EndTxn may have been applied unanswered
        (Transactions V2 only): take the coordinator's epoch when it is exactly the next one of
        this producer id with the transaction ended (see the module's invariants). True when the
        token moved."""
        now = self._describe(self._token.transactional_id)
        held = self._token
        if (
            now is None
            or now.producer_id != held.producer_id
            or now.producer_epoch != held.producer_epoch + 1
            or now.state not in _ENDED
        ):
            return False
        log.warning(
            "pykafka exactly-once: the fence %r moved to epoch %d by this driver's own EndTxn, "
            "whose answer was lost; continuing at that epoch",
            held.transactional_id,
            now.producer_epoch,
        )
        self.advance(FenceToken(held.transactional_id, now.producer_id, now.producer_epoch))
        return True

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
        """The error of a fence found lost; the token is dropped (see the module docstring)."""
        drop_token(self.prefix, self.query_key, self._token.taken)
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
    latest: Callable[[], BatchRecord | None] = lambda: None,
    open_elsewhere: Callable[[BatchRecord | None], Sequence[str]] = lambda last: (),
    planning_batch: int | None = None,
) -> DriverFence:
    """This driver's fence of ``prefix``: the token it keeps, else (the planning only) a new
    InitProducerId; when the coordinator no longer shows the token kept, a new InitProducerId
    only if this planning starts the query or no other driver made progress since (see the
    module docstring), else :class:`SinkFencedError`. ``before_acquire`` runs first, to refuse a
    prefix another query owns; ``latest`` reads the store's latest record of the query;
    ``open_elsewhere(last)`` lists the open transactions of the query's task ids that ``last``
    (an unfinished intent) does not name; ``planning_batch`` is the batch this planning is for,
    when the checkpoint tells it (a planning for a batch after every one the store recorded is
    a start of the query from its checkpoint, as in a restart after another run went on)."""
    token = _load(prefix, query_key)
    if in_commit_worker():
        if token is None:
            raise SinkFencedError(
                f"exactly-once: this driver holds no fence of transactionalIdPrefix {prefix!r} "
                "when committing (its planning never took it, or it was found lost since); it "
                "ends nothing. Fix: restart the query"
            )
        return DriverFence(prefix, query_key, token, describe=describe)
    if token is not None:
        fence = DriverFence(prefix, query_key, token, describe=describe)
        try:
            why = fence.why_not_held()
        except KafkaError as exc:
            # No answer (brokers before Kafka 3.0 have no DescribeTransactions): go on with the
            # token; a fence lost meanwhile is found at the next fenced step, as before.
            message = (
                f"pykafka exactly-once: could not check the fence of transactionalIdPrefix "
                f"{prefix!r} while planning ({exc}); going on with the one this driver holds"
            )
            if isinstance(exc, UnsupportedVersionError):
                warn_once("fence-check-unsupported", message)  # every planning would say it
            else:
                log.warning("%s", message)
            return fence
        if why is None:
            return fence
        if not batch_pending(query_key) and not _plans_a_new_batch(planning_batch, latest):
            since = _progress_since(token, latest, open_elsewhere)
            if since is not None:
                drop_token(prefix, query_key, token.taken)
                raise SinkFencedError(
                    f"exactly-once: another run of the query took the fence of "
                    f"transactionalIdPrefix {prefix!r} over since this driver last planned a "
                    f"batch of it ({why}), and has gone on since: {since}. This planning is "
                    "not a start of the query on this driver, so it may be an older run of the "
                    "query planning again after a newer driver took over: it stops here rather "
                    "than fence the newer driver, ends no transaction and writes no intent, and "
                    "this driver forgets its fence. Fix: none if the query runs elsewhere now; "
                    "if this is a restart of the query after that other run stopped, start the "
                    "query again: its planning then takes the fence"
                )
        log.warning(
            "pykafka exactly-once: another driver took the fence of transactionalIdPrefix %r "
            "since this driver last held it (%s), and made no progress on the query since; "
            "this planning starts the query again here and takes the fence back",
            prefix,
            why,
        )
    before_acquire()
    producer_id, epoch = init(fence_id(prefix))
    token = FenceToken(fence_id(prefix), producer_id, epoch, taken=uuid.uuid4().hex)
    _save(prefix, query_key, token)
    fence = DriverFence(prefix, query_key, token, describe=describe)
    # Read after the take: no earlier holder can write the store any more.
    fence.planning(latest())
    return fence


def _plans_a_new_batch(
    planning_batch: int | None, latest: Callable[[], BatchRecord | None]
) -> bool:
    """Whether this planning is for a batch after every one the intent store recorded: then it
    is a start from the checkpoint (a restart after another run of the query went on and
    stopped), not an older run planning a batch a newer driver recorded already."""
    if planning_batch is None:
        return False
    try:
        last = latest()
    except (KafkaError, SinkError):
        return False  # cannot tell: the stricter rule decides
    return last is None or planning_batch > last.batch_id


def _progress_since(
    token: FenceToken,
    latest: Callable[[], BatchRecord | None],
    open_elsewhere: Callable[[BatchRecord | None], Sequence[str]],
) -> str | None:
    """What another driver of the query did since this driver last planned (None: nothing)."""
    try:
        last = latest()
        if last is not None and last.batch_id > token.planned:
            return (
                f"the intent store's latest record of the query is of batch {last.batch_id}, "
                f"after batch {token.planned}, the last this driver planned"
            )
        found = list(open_elsewhere(last))
    except (KafkaError, SinkError) as exc:
        return f"what it did could not be read ({exc}), so it is taken to have gone on"
    if found:
        shown = ", ".join(sorted(found)[:5]) + (", ..." if len(found) > 5 else "")
        return f"transactions of the query that this driver did not start are open ({shown})"
    return None


def _next_batch(last: BatchRecord | None) -> int:
    return 0 if last is None else last.batch_id + 1


def take_id(prefix: str, query_key: str) -> str:
    """The id of this driver's current take of ``prefix``'s fence ("" when it holds none)."""
    token = _load(prefix, query_key)
    return "" if token is None else token.taken


def drop_token(prefix: str, query_key: str, taken: str) -> None:
    """Forget this driver's token of ``prefix`` (a fence found lost), unless the token kept now
    is of another take than ``taken`` (a later planning took the fence again since)."""
    held = _load(prefix, query_key)
    if held is None or held.taken != taken:
        return
    path = _path(prefix, query_key)
    if path is None:
        _HELD.pop(f"{prefix}\0{query_key}", None)
        return
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


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


def pending_path(query_key: str) -> str | None:
    """The marker of a batch of ``query_key`` planned on this driver and not yet committed or
    aborted (``start.py`` sets and clears it); None without a Spark local directory."""
    local_dir = os.environ.get("SPARK_LOCAL_DIRS", "").split(",")[0]
    if not local_dir or not os.path.isdir(local_dir):
        return None
    digest = hashlib.sha256(query_key.encode()).hexdigest()[:16]
    return os.path.join(local_dir, f"pykafka-pending-{digest}")


def batch_pending(query_key: str) -> bool:
    """Whether the last batch of ``query_key`` planned on this driver never reached its commit
    or abort: a planning now starts the query again (``start.py``)."""
    path = pending_path(query_key)
    if path is None:
        return query_key in PENDING
    return os.path.exists(path)


# Query keys planned and not yet committed or aborted in this process, when there is no Spark
# local directory to share the marker through.
PENDING: set[str] = set()
