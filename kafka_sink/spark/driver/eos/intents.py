"""The exactly-once intent records and the stores that keep them on a disk or in memory.

Role: the driver commits the transactions of a batch as a roll-forward log (``committer.py``):
before its first EndTxn it writes the batch's intent (every transaction it is about to commit),
and once all are committed it writes done; a batch of which Kafka lost some transactions after
others committed ends partial (the Spark partitions committed, with the fingerprints of their
rows, and the ones lost). :class:`BatchRecord` is one such step and
:class:`IntentStore` the interface the stores implement: :class:`FileIntentStore` (a local
directory, ``intentStore=checkpoint``), :class:`MemoryIntentStore` (one process: tests, and a
batch job with nowhere durable to write) and, in ``kafka_intents.py``, the compacted Kafka topic
(``intentStore=kafka``, the default). :func:`record_to_json` / :func:`record_from_json` are the
JSON form the file and topic stores share.

Invariants:
- ``write`` is durable when it returns (the file store replaces the file atomically and fsyncs
  it and its directory); ``last`` returns the latest record of a query key, None when there is
  none; ``delete`` forgets a query key (a batch job's, once its commit is over).
- A record's state is ``INTENT``, ``DONE`` or ``PARTIAL``; anything else is refused when it is
  built. An intent names, per transaction, the fingerprint of its task's rows; an intent or a
  partial record names the Spark partitions earlier runs of the batch committed (``committed``,
  their fingerprints, None where unknown); a partial record the ones lost (``lost``). An intent
  names, per transaction, the first offsets its task's writes were acknowledged at.
- No store replaces a done record with an intent or a partial record of that batch or an
  earlier one (:func:`refuse_replacing_done`, raising :class:`DoneRecordReplacedError`): a
  writer that read the store before another finished the batch cannot undo it. The memory
  store checks under its lock, the file store under a lock on its directory (processes of one
  host), the Kafka store before its append (through the fence, so atomic against another
  fenced writer).
- ``record_from_json(record_to_json(r)) == r``.
- It imports the standard library, the transaction handle and the fingerprint value only: the
  driver's workers of every write import it. Records written without the fingerprint fields
  read back with them empty.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from kafka_sink.prepared import PreparedTransaction, TopicPartition
from kafka_sink.sink_errors import DoneRecordReplacedError
from kafka_sink.spark.fingerprint import Fingerprint

__all__ = [
    "DONE",
    "INTENT",
    "PARTIAL",
    "BatchRecord",
    "DoneRecordReplacedError",
    "FileIntentStore",
    "IntentStore",
    "MemoryIntentStore",
    "record_from_json",
    "record_to_json",
]

INTENT = "intent"
DONE = "done"
PARTIAL = "partial"
_STATES = (INTENT, DONE, PARTIAL)


@dataclass(frozen=True)
class BatchRecord:
    """One step of a batch's commit: the intent (before the first EndTxn), done, or partial
    (some transactions committed, the others lost by Kafka)."""

    query_key: str  # streaming query id, or the batch job's write id
    batch_id: int
    state: str  # INTENT or DONE
    transactions: tuple[PreparedTransaction, ...]
    extra: Mapping[str, str] = field(default_factory=dict)
    #: Per transactional id of ``transactions``: the fingerprint of its task's rows.
    fingerprints: Mapping[str, Fingerprint] = field(default_factory=dict)
    #: Spark partition -> fingerprint of what an earlier run of the batch committed for it.
    committed: Mapping[int, Fingerprint | None] = field(default_factory=dict)
    #: PARTIAL: the Spark partitions whose transactions Kafka lost (the re-run writes them).
    lost: tuple[int, ...] = ()
    #: Per transactional id of ``transactions``: the first offset its task's writes were
    #: acknowledged at, per topic-partition (where its marker is read from: ``outcomes.py``).
    first_offsets: Mapping[str, tuple[tuple[TopicPartition, int], ...]] = field(
        default_factory=dict
    )

    def __post_init__(self) -> None:
        if self.state not in _STATES:
            raise ValueError(f"BatchRecord.state must be one of {_STATES}: {self.state!r}")


def refuse_replacing_done(current: BatchRecord | None, record: BatchRecord) -> None:
    """Raise :class:`DoneRecordReplacedError` when writing ``record`` over ``current`` (the
    store's latest record of its key) would undo a done batch: an intent or a partial record of
    that batch or an earlier one. Done over done (a completion's stamp), the next batch's
    intent and anything after a delete pass."""
    if current is None or current.state != DONE or record.state == DONE:
        return
    if record.batch_id > current.batch_id:
        return
    raise DoneRecordReplacedError(
        f"exactly-once: refused to write the {record.state} record of batch {record.batch_id} "
        f"of {record.query_key!r}: batch {current.batch_id} is already done, finished by "
        "another writer after this one read the store (another run of the same "
        "idempotencyKey, or a newer driver of the query). The done record stands: this writer "
        "stops here, and no re-run writes that batch again"
    )


class IntentStore(Protocol):
    def last(self, query_key: str) -> BatchRecord | None: ...

    def write(self, record: BatchRecord) -> None: ...

    def delete(self, query_key: str) -> None:
        """Forget ``query_key`` (a batch job's key once its commit is over)."""

    def close(self) -> None: ...


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
        "fingerprints": {tid: f.to_text() for tid, f in record.fingerprints.items()},
        "committed": {
            str(p): None if f is None else f.to_text() for p, f in record.committed.items()
        },
        "lost": list(record.lost),
        "first_offsets": {
            tid: [[topic, p, offset] for (topic, p), offset in offsets]
            for tid, offsets in record.first_offsets.items()
        },
    }


def record_from_json(data: Mapping[str, object]) -> BatchRecord:
    txns = data["transactions"]
    assert isinstance(txns, list)
    extra = data.get("extra") or {}
    assert isinstance(extra, dict)
    batch_id = data["batch_id"]
    assert isinstance(batch_id, int)
    fingerprints = data.get("fingerprints") or {}
    committed = data.get("committed") or {}
    lost = data.get("lost") or []
    first_offsets = data.get("first_offsets") or {}
    assert isinstance(fingerprints, dict) and isinstance(committed, dict)
    assert isinstance(first_offsets, dict)
    assert isinstance(lost, list)
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
        fingerprints={str(k): Fingerprint.from_text(str(v)) for k, v in fingerprints.items()},
        committed={
            int(k): None if v is None else Fingerprint.from_text(str(v))
            for k, v in committed.items()
        },
        lost=tuple(int(p) for p in lost),
        first_offsets={
            str(tid): tuple(((str(t), int(p)), int(o)) for t, p, o in offsets)
            for tid, offsets in first_offsets.items()
        },
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
            refuse_replacing_done(self._records.get(record.query_key), record)
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
    store (``kafka_intents``) is the default and the one for remote checkpoints.
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
        # The check and the replace under one lock (on the directory: no lock file is left):
        # two processes of one host cannot both pass the check, then replace each other's record.
        lock = os.open(self.directory, os.O_RDONLY)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            refuse_replacing_done(self.last(record.query_key), record)
            tmp = f"{path}.{os.getpid()}.{time.monotonic_ns()}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(record_to_json(record), f, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
            self._sync_directory()
        finally:
            os.close(lock)  # releases the lock

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
