"""Exactly-once delivery: transactional ids, the intent-store interface and the broker's bound.

Role: the pieces of ``deliveryGuarantee=exactly-once`` that both sides of a write share. Each
Spark task attempt writes its rows in its own Kafka transaction, prepares it and hands the
:class:`~kafka_sink.prepared.PreparedTransaction` to the driver, which commits every
transaction of the batch as a roll-forward log over an :class:`IntentStore` (``eos_commit``).

Transactional ids. A write uses ``<prefix>-<partition id>-<slot>``, where the prefix is the
``transactionalIdPrefix`` option or ``pykafka-<query id>`` (streaming) / ``pykafka-<write id>``
(batch job), and the slot is the task's attempt number. So:

- Concurrent attempts of one partition (a retry while a lost attempt still runs, a speculative
  copy) never share an id: Spark numbers the attempts of a task within a stage attempt
  distinctly. (PySpark does not expose the stage attempt number; a stage re-attempt restarts
  attempt numbers at 0, and a zombie attempt of the earlier stage attempt would share its id
  with the new attempt 0: the later InitProducerId fences the zombie, whose transaction then
  never reaches the driver. Neither reaches Kafka's read_committed readers twice.)
- The set of ids of a streaming query is bounded: partitions x attempt slots, normally one id
  per partition (one more for each retry or speculative copy ever seen), reused from batch to
  batch. The coordinator keeps every id for ``transactional.id.expiration.ms`` (7 days), so a
  query with one-second triggers keeps a fixed number of ids instead of millions.
- An id is reused only once the batch that last used it is durably done, because reusing an id
  (InitProducerId) aborts whatever that id left open. Within a run, Spark plans batch N+1 only
  after commit(N) returned, and commit(N) writes "done" before it returns. After a restart, the
  driver finishes any recorded intent (``eos_commit.recover``) while planning, before any task
  of the re-run is launched, so a re-run's InitProducerId can only abort transactions no intent
  names (those of failed attempts, which must not survive anyway).
- A batch job's ids are new for each job (its write id is unique): ``partitions x attempts``
  ids per job.

Invariants:
- :class:`BatchRecord` and :class:`IntentStore` are the interface the durable stores implement
  (files here, a compacted topic in ``intent_store``); ``write`` is durable when it returns,
  ``last`` returns the latest record of a query, ``delete`` forgets a query.
- ``transactional_id`` and ``parse_transactional_id`` round-trip; ids of other writes (another
  prefix, or a prefix that merely starts with ours) do not parse.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from kafka_sink.prepared import PreparedTransaction

__all__ = [
    "DEFAULT_TRANSACTION_TIMEOUT_MS",
    "DONE",
    "INTENT",
    "BatchRecord",
    "FileIntentStore",
    "IntentStore",
    "MemoryIntentStore",
    "default_prefix",
    "parse_transactional_id",
    "transactional_id",
]

INTENT = "intent"
DONE = "done"
#: ``transaction.timeout.ms`` when the brokers' ``transaction.max.timeout.ms`` cannot be learned
#: (Kafka's default for that broker setting).
DEFAULT_TRANSACTION_TIMEOUT_MS = 900_000
_DEFAULT_PREFIX_HEAD = "pykafka-"


@dataclass(frozen=True)
class BatchRecord:
    """One step of a batch's commit: the intent (before the first EndTxn) or done."""

    query_key: str  # streaming query id, or the batch job's write id
    batch_id: int
    state: str  # INTENT or DONE
    transactions: tuple[PreparedTransaction, ...]
    extra: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.state not in (INTENT, DONE):
            raise ValueError(f"BatchRecord.state must be {INTENT!r} or {DONE!r}: {self.state!r}")


class IntentStore(Protocol):
    def last(self, query_key: str) -> BatchRecord | None: ...

    def write(self, record: BatchRecord) -> None: ...

    def delete(self, query_key: str) -> None:
        """Forget ``query_key`` (a batch job's key once its commit is over)."""

    def close(self) -> None: ...


def default_prefix(query_or_write_id: str) -> str:
    """The default ``transactionalIdPrefix``: derived from the query id or the write id."""
    return _DEFAULT_PREFIX_HEAD + query_or_write_id


def transactional_id(prefix: str, partition_id: int, slot: int) -> str:
    """The id of the transaction of Spark partition ``partition_id``, attempt slot ``slot``."""
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


# -- stores -----------------------------------------------------------------------------------


def record_to_json(record: BatchRecord) -> dict[str, object]:
    return {
        "query_key": record.query_key,
        "batch_id": record.batch_id,
        "state": record.state,
        "transactions": [
            {
                "transactional_id": t.transactional_id,
                "producer_id": t.producer_id,
                "producer_epoch": t.producer_epoch,
                "partitions": [[topic, p] for topic, p in t.partitions],
            }
            for t in record.transactions
        ],
        "extra": dict(record.extra),
    }


def record_from_json(data: Mapping[str, object]) -> BatchRecord:
    txns = data["transactions"]
    assert isinstance(txns, list)
    extra = data.get("extra") or {}
    assert isinstance(extra, dict)
    batch_id = data["batch_id"]
    assert isinstance(batch_id, int)
    return BatchRecord(
        query_key=str(data["query_key"]),
        batch_id=batch_id,
        state=str(data["state"]),
        transactions=tuple(
            PreparedTransaction(
                str(t["transactional_id"]),
                int(t["producer_id"]),
                int(t["producer_epoch"]),
                tuple((str(tp[0]), int(tp[1])) for tp in t["partitions"]),
            )
            for t in txns
        ),
        extra={str(k): str(v) for k, v in extra.items()},
    )


class MemoryIntentStore:
    """An in-process store: for tests, and for a batch job that has nowhere durable to write."""

    def __init__(self) -> None:
        self._records: dict[str, BatchRecord] = {}
        self.history: list[BatchRecord] = []
        self._lock = threading.Lock()

    def last(self, query_key: str) -> BatchRecord | None:
        with self._lock:
            return self._records.get(query_key)

    def write(self, record: BatchRecord) -> None:
        with self._lock:
            self._records[record.query_key] = record
            self.history.append(record)

    def delete(self, query_key: str) -> None:
        with self._lock:
            self._records.pop(query_key, None)

    def close(self) -> None:
        pass


class FileIntentStore:
    """One JSON file per query in a local directory, replaced atomically and fsynced.

    Durable on the driver's disk only (``intentStore=checkpoint``): as durable as a local
    checkpoint, which does not survive the loss of the driver host either; the Kafka-topic
    store (``intent_store``) is the default and the one for remote checkpoints.
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory
        os.makedirs(directory, exist_ok=True)

    def _path(self, query_key: str) -> str:
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", query_key)
        return os.path.join(self.directory, f"{safe}.json")

    def last(self, query_key: str) -> BatchRecord | None:
        try:
            with open(self._path(query_key), encoding="utf-8") as f:
                return record_from_json(json.load(f))
        except FileNotFoundError:
            return None

    def write(self, record: BatchRecord) -> None:
        path = self._path(record.query_key)
        tmp = f"{path}.{os.getpid()}.{time.monotonic_ns()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(record_to_json(record), f, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        self._sync_directory()

    def delete(self, query_key: str) -> None:
        try:
            os.unlink(self._path(query_key))
        except FileNotFoundError:
            return
        self._sync_directory()

    def _sync_directory(self) -> None:
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        pass
