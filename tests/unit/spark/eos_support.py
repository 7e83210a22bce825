"""What the committer's tests on the fake coordinator share: tasks writing rows, the committer on
the manual clock, an intent store whose writes can be made to fail."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable

from kafka_sink.sink_errors import SinkError
from kafka_sink.spark.driver.eos.committer import EosCommitter, TaskTransaction, TransactionOps
from kafka_sink.spark.driver.eos.intents import BatchRecord, MemoryIntentStore
from kafka_sink.spark.driver.eos.plan_store import with_last_record
from kafka_sink.spark.eos_plan import EosPlan
from kafka_sink.spark.fingerprint import Fingerprint
from tests.fakes.coordinator import FakeCoordinator, coordinator_ops

PREFIX = "pykafka-q1"
TOPIC = "t"
TIMEOUT_MS = 60_000


class StoreUnavailableError(SinkError):
    """The intent store could not be reached (scripted)."""


class FaultyStore(MemoryIntentStore):
    """A memory store whose next reads or writes fail: before the write, or after it landed."""

    def __init__(self) -> None:
        super().__init__()
        self.fail_writes: list[str | None] = []  # "before" / "after", one per coming write
        self.fail_reads = 0

    def last(self, query_key: str) -> BatchRecord | None:
        if self.fail_reads:
            self.fail_reads -= 1
            raise StoreUnavailableError("the intent store did not answer (scripted)")
        return super().last(query_key)

    def write(self, record: BatchRecord) -> None:
        when = self.fail_writes.pop(0) if self.fail_writes else None
        if when == "before":
            raise StoreUnavailableError("the intent store refused the write (scripted)")
        super().write(record)
        if when == "after":
            raise StoreUnavailableError("the intent store's answer was lost (scripted)")


def rows(batch_id: int, partition: int, count: int = 3) -> list[str]:
    """The rows a task of ``batch_id`` writes for ``partition`` (the same on every re-run)."""
    return [f"b{batch_id}-p{partition}-r{i}" for i in range(count)]


def fingerprint(values: Iterable[str]) -> Fingerprint:
    """An order-insensitive fingerprint of fake rows, as a task computes one of real rows."""
    items = list(values)
    digest = sum(
        int.from_bytes(hashlib.blake2b(v.encode(), digest_size=8).digest(), "little") for v in items
    )
    return Fingerprint(len(items), digest % (1 << 64))


def run_tasks(
    coordinator: FakeCoordinator,
    batch_id: int,
    partitions: Iterable[int] = (0, 1, 2),
    slot: int = 0,
) -> list[TaskTransaction]:
    """Each partition's task: InitProducerId on its id, write its rows, hand back the handle."""
    out = []
    for p in partitions:
        written = rows(batch_id, p)
        first = len(coordinator.log.get((TOPIC, p), []))  # the offset its first row gets
        prepared = coordinator.begin(f"{PREFIX}-{p}-{slot}", {(TOPIC, p): written}, TIMEOUT_MS)
        out.append(TaskTransaction(p, prepared, fingerprint(written), (((TOPIC, p), first),)))
    return out


def rerun_tasks(
    coordinator: FakeCoordinator,
    batch_id: int,
    last: BatchRecord | None,
    partitions: Iterable[int] = (0, 1, 2),
) -> tuple[list[TaskTransaction], dict[int, Fingerprint]]:
    """The batch's re-run as planned after ``last``: a task of a partition an earlier run
    committed writes nothing and hands back its rows' fingerprint; the others write."""
    plan = with_last_record(EosPlan(PREFIX, "q1", None), last)
    skipped = {
        p: fingerprint(rows(batch_id, p))
        for p in partitions
        if plan.committed_partition(batch_id, p)
    }
    written = [p for p in partitions if p not in skipped]
    return run_tasks(coordinator, batch_id, written), skipped


def committer(
    coordinator: FakeCoordinator, store: MemoryIntentStore, ops: TransactionOps | None = None
) -> EosCommitter:
    """The driver's committer over the fake, sleeping on its manual clock (the reaper runs)."""
    return EosCommitter(
        store,
        ops if ops is not None else coordinator_ops(coordinator),
        query_key="q1",
        prefix=PREFIX,
        transaction_timeout_ms=TIMEOUT_MS,
        clock=coordinator.clock,
        sleep_ms=coordinator.advance,
    )


def visible_counts(coordinator: FakeCoordinator) -> Counter[object]:
    return Counter(coordinator.visible_rows())


def expected_rows(
    batch_ids: Iterable[int], partitions: Iterable[int] = (0, 1, 2)
) -> Counter[object]:
    return Counter(r for b in batch_ids for p in partitions for r in rows(b, p))
