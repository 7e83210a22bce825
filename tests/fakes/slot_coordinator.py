"""A model of Kafka's transaction coordinator (Transactions V2), and producers that use it.

``FakeCoordinator`` keeps, per transactional id, what ``TransactionMetadata`` keeps: producer
id, epoch, state and the partitions of the open transaction, plus the rows each transaction
wrote, so a test can ask what a read_committed reader would see. It follows the answers that
matter to exactly-once (see Kafka's ``TransactionCoordinator``):

- InitProducerId on an id whose transaction is Ongoing aborts it (CompleteAbort) and bumps the
  epoch; on a new id it hands out a new producer id at epoch 0 (state Empty);
- a write with an epoch older than the id's current one is fenced (``ProducerFencedError``);
  the first write of a transaction moves it to Ongoing;
- EndTxn(commit) needs the transaction Ongoing at exactly that producer id and epoch, else the
  commit is refused as lost (``TransactionLostError``); a repeated commit of a committed one
  succeeds;
- DescribeTransactions answers (state, producer id, epoch), None for an id it never saw.

``CoordinatedProducer`` is a transactional producer of one id on top of it, shaped like the
:class:`~tests.fakes.spark.FakeTxnProducer` a task leases; ``describe_states`` has the shape of
``kafka_sink.spark.eos.slots.describe_states``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kafka_sink.errors import ProducerFencedError, TransactionLostError
from kafka_sink.prepared import PreparedTransaction
from kafka_sink.producer.futures import PartitionOffsets
from tests.fakes.spark import FakeFuture

__all__ = ["CoordinatedProducer", "FakeCoordinator", "IdState"]


@dataclass
class IdState:
    producer_id: int
    epoch: int
    state: str = "Empty"
    partitions: set[tuple[str, int]] = field(default_factory=set)
    rows: list[bytes] = field(default_factory=list)


@dataclass
class FakeCoordinator:
    ids: dict[str, IdState] = field(default_factory=dict)
    #: Rows of committed transactions, in commit order: what read_committed readers see.
    visible: list[bytes] = field(default_factory=list)
    #: Every id ever initialised (the coordinator keeps them for transactional.id.expiration.ms).
    ever_used: set[str] = field(default_factory=set)
    describes: list[tuple[str, ...]] = field(default_factory=list)
    _next_pid: int = 1000

    def init_producer_id(self, tid: str) -> tuple[int, int]:
        self.ever_used.add(tid)
        current = self.ids.get(tid)
        if current is None:
            self._next_pid += 1
            self.ids[tid] = IdState(self._next_pid, 0)
            return self._next_pid, 0
        if current.state == "Ongoing":  # fenced: the open transaction is aborted
            current.epoch += 1
            self._drop(current, "CompleteAbort")
        current.epoch += 1
        current.state = "Empty"
        return current.producer_id, current.epoch

    def write(self, tid: str, pid: int, epoch: int, tp: tuple[str, int], rows: list[bytes]) -> None:
        current = self.ids[tid]
        if (current.producer_id, current.epoch) != (pid, epoch):
            raise ProducerFencedError(f"{tid}: epoch {epoch} is fenced by {current.epoch}")
        current.state = "Ongoing"
        current.partitions.add(tp)
        current.rows.extend(rows)

    def end(self, prepared: PreparedTransaction, commit: bool) -> None:
        current = self.ids.get(prepared.transactional_id)
        key = (prepared.producer_id, prepared.producer_epoch)
        retried = current is not None and (current.producer_id, current.epoch - 1) == key
        if retried and commit and current is not None and current.state == "CompleteCommit":
            return  # a retried commit (EndTxn v5 bumped the epoch)
        if current is None or (current.producer_id, current.epoch) != key:
            if commit:
                raise TransactionLostError(f"{prepared.transactional_id} is lost")
            return
        if current.state != "Ongoing":
            if commit:
                raise TransactionLostError(f"{prepared.transactional_id} is {current.state}")
            return
        current.epoch += 1
        if commit:
            self.visible.extend(current.rows)
        self._drop(current, "CompleteCommit" if commit else "CompleteAbort")

    def time_out(self, tid: str) -> None:
        """The coordinator's reaper aborts an expired transaction (fencing its producer)."""
        current = self.ids[tid]
        if current.state == "Ongoing":
            current.epoch += 1
            self._drop(current, "CompleteAbort")

    def state(self, tid: str) -> str | None:
        current = self.ids.get(tid)
        return None if current is None else current.state

    def describe_states(self, config: Mapping[str, str], ids: Sequence[str]) -> list[str | None]:
        self.describes.append(tuple(ids))
        return [self.state(t) for t in ids]

    def open_ids(self) -> list[str]:
        return sorted(t for t, s in self.ids.items() if s.state == "Ongoing")

    @staticmethod
    def _drop(current: IdState, state: str) -> None:
        current.state = state
        current.partitions = set()
        current.rows = []


class CoordinatedProducer:
    """A transactional producer of ``config["transactional.id"]`` over a :class:`FakeCoordinator`.

    Every row goes to partition 0 of its topic; futures are done at once.
    """

    coordinator: ClassVar[FakeCoordinator]
    instances: ClassVar[list[CoordinatedProducer]] = []

    def __init__(self, config: dict[str, str]) -> None:
        self.config = config
        self.tid = config["transactional.id"]
        self.pid = -1
        self.epoch = -1
        self.partitions: set[tuple[str, int]] = set()
        self.next_offset = 0
        self.closed = False
        CoordinatedProducer.instances.append(self)

    def init_transactions(self, timeout: float | None = None) -> None:
        self.pid, self.epoch = self.coordinator.init_producer_id(self.tid)

    def begin_transaction(self) -> None:
        self.partitions = set()

    def send_columns(self, topic: str, values: Any, keys: Any = None, **kw: Any) -> FakeFuture:
        rows = [bytes(v) for v in values.to_pylist()]
        try:
            self.coordinator.write(self.tid, self.pid, self.epoch, (topic, 0), rows)
        except ProducerFencedError as exc:
            return FakeFuture(None, exc)
        self.partitions.add((topic, 0))
        first = self.next_offset
        self.next_offset += len(rows)
        return FakeFuture({0: PartitionOffsets(first, first + len(rows) - 1, len(rows))}, None)

    def flush(self, timeout: float | None = None) -> None:
        pass

    def prepare_transaction(self, timeout: float | None = None) -> PreparedTransaction:
        return PreparedTransaction(self.tid, self.pid, self.epoch, tuple(sorted(self.partitions)))

    def abort_transaction(self, timeout: float | None = None) -> None:
        self.coordinator.end(self.prepare_transaction(), commit=False)

    def close(self, timeout: float | None = None) -> None:
        self.closed = True

    def partitions_for(self, topic: str) -> list[int]:
        return [0]
