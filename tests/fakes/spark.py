"""Spark-side fakes: stand-ins for the producers a task leases, with futures done at once.

``FakeProducer`` records every ``send_columns`` call and completes its futures with chosen
offsets or errors; ``FakeTxnProducer`` adds the transactional calls and records them in order.
``spark_checkpoint`` lays out a streaming checkpoint as Spark has it when it plans a batch;
``from_commit_worker`` calls a function from a frame of pyspark's commit worker's file, as Spark's
commit call of a streaming batch builds its writer (``streamWriter()``: no start work there).
Tests install them with ``monkeypatch.setattr(producer_cache, "_create", FakeProducer)`` and
``monkeypatch.setattr(task, "_create_transactional", FakeTxnProducer)``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from kafka_sink.prepared import PreparedTransaction
from kafka_sink.producer.futures import PartitionOffsets

_T = TypeVar("_T")
# The commit worker's file, as pyspark names it (what eos/fence.in_commit_worker looks for).
COMMIT_WORKER_FILE = "/site-packages/pyspark/sql/worker/python_streaming_sink_runner.py"


def from_commit_worker(call: Callable[[], _T]) -> _T:
    """``call()`` made from a frame of the commit worker's file, as Spark's commit call is."""
    scope: dict[str, Any] = {"call": call}
    exec(compile("result = call()", COMMIT_WORKER_FILE, "exec"), scope)
    result: _T = scope["result"]
    return result


class FakeFuture:
    def __init__(self, result: dict[int, PartitionOffsets] | None, error: Exception | None):
        self._result, self._error = result, error

    def done(self) -> bool:
        return True

    def get(self, timeout: float | None = None) -> dict[int, PartitionOffsets]:
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result


class FakeProducer:
    """Puts every row of a call in partition ``len(values) % 2``, offsets counting up."""

    instances: ClassVar[list[FakeProducer]] = []

    def __init__(self, config: dict[str, str]) -> None:
        self.config = config
        self.calls: list[dict[str, Any]] = []
        self.next_offset = {0: 0, 1: 0}
        self.fail_with: Exception | None = None
        self.closed = False
        self.flushed = 0
        FakeProducer.instances.append(self)

    def send_columns(self, topic, values, keys=None, *, partitions=None, headers=None,
                     timestamps_ms=None, track_rows=False):  # fmt: skip
        self.calls.append(
            {
                "topic": topic,
                "values": values.to_pylist(),
                "partitions": partitions,
                "keys": None if keys is None else keys.to_pylist(),
                "headers": headers,
                "timestamps_ms": timestamps_ms,
                "track_rows": track_rows,
            }
        )
        if self.fail_with is not None:
            return FakeFuture(None, self.fail_with)
        p = len(values) % 2
        first = self.next_offset[p]
        self.next_offset[p] += len(values)
        return FakeFuture({p: PartitionOffsets(first, first + len(values) - 1, len(values))}, None)

    def flush(self, timeout: float | None = None) -> None:
        self.flushed += 1

    def close(self, timeout: float | None = None) -> None:
        self.closed = True

    def partitions_for(self, topic: str) -> list[int]:
        return [0, 1]


class FakeTxnProducer(FakeProducer):
    """FakeProducer plus the transactional calls, in order."""

    txn_instances: ClassVar[list[FakeTxnProducer]] = []

    def __init__(self, config: dict[str, str]) -> None:
        super().__init__(config)
        self.events: list[str] = []
        FakeTxnProducer.txn_instances.append(self)

    def init_transactions(self, timeout: float | None = None) -> None:
        self.events.append("init")

    def begin_transaction(self) -> None:
        self.events.append("begin")

    def prepare_transaction(self, timeout: float | None = None) -> PreparedTransaction:
        self.events.append("prepare")
        return PreparedTransaction(self.config["transactional.id"], 42, 3, (("t", 0), ("t", 1)))

    def abort_transaction(self, timeout: float | None = None) -> None:
        self.events.append("abort")

    def close(self, timeout: float | None = None) -> None:
        self.events.append("close")
        super().close(timeout)


def spark_checkpoint(directory: Path, query_id: str = "q1") -> Path:
    """A streaming checkpoint as Spark leaves it when it asks for the writer of batch 0: the
    query's metadata, and the batch's offsets (written before the batch is planned)."""
    directory.mkdir()
    (directory / "metadata").write_text(json.dumps({"id": query_id}) + "\n")
    (directory / "offsets").mkdir()
    (directory / "offsets" / "0").write_text("v1\n")
    return directory
