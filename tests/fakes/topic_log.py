"""A :class:`~kafka_sink.admin.topic_log.TopicLog` over the coordinator model, for the intent store.

Role: the Kafka intent store's fenced writes are tested against the same model of the
transaction coordinator as the commits (``coordinator.py``): ``append_transactional`` is a
transactional Produce v12 on the model (which refuses a fenced producer with PRODUCER_FENCED or
INVALID_PRODUCER_ID_MAPPING), then EndTxn v5 commit (which bumps the epoch); ``append`` is a
plain write, visible at once. Reads are read_committed: the last stable offset stops at the
first record of a transaction still open, and records of aborted transactions are skipped.
Markers are written at once (as in the model), so a committed record is readable at once.
"""

from __future__ import annotations

from collections.abc import Iterator

from kafka_sink.admin.topic_log import ProducerState
from kafka_sink.records.batch import Record
from tests.fakes.coordinator import ONGOING, FakeCoordinator

_PLAIN = 0  # the serial of records written without a transaction (always visible)


class CoordinatedTopicLog:
    """One cluster's small topics, kept in ``coordinator.log`` (see the module docstring)."""

    def __init__(self, coordinator: FakeCoordinator) -> None:
        self.coordinator = coordinator
        coordinator.committed.add(_PLAIN)

    def close(self) -> None:
        pass

    def append(self, topic: str, partition: int, key: bytes, value: bytes | None) -> int:
        entries = self.coordinator.log.setdefault((topic, partition), [])
        entries.append((_PLAIN, (key, value)))
        return len(entries) - 1

    def append_transactional(
        self, topic: str, partition: int, key: bytes, value: bytes | None, state: ProducerState
    ) -> tuple[int, ProducerState]:
        tid = state.transactional_id
        self.coordinator.write(
            tid, state.producer_id, state.producer_epoch, (topic, partition), (key, value)
        )
        offset = len(self.coordinator.log[(topic, partition)]) - 1
        pid, epoch = self.coordinator.end_txn(tid, state.producer_id, state.producer_epoch, True)
        return offset, ProducerState(tid, pid, epoch)

    def abort_transactional(
        self, topic: str, partition: int, state: ProducerState
    ) -> ProducerState:
        tid = state.transactional_id
        pid, epoch = self.coordinator.end_txn(tid, state.producer_id, state.producer_epoch, False)
        return ProducerState(tid, pid, epoch)

    def end_offset(self, topic: str, partition: int, *, at_least: int = 0) -> int:
        open_serials = {m.serial for m in self.coordinator.txns.values() if m.state == ONGOING}
        entries = self.coordinator.log.get((topic, partition), [])
        for offset, (serial, _row) in enumerate(entries):
            if serial in open_serials:
                return offset
        return len(entries)

    def read(self, topic: str, partition: int, start: int, end: int) -> Iterator[Record]:
        entries = self.coordinator.log.get((topic, partition), [])
        for offset in range(start, min(end, len(entries))):
            serial, row = entries[offset]
            if serial in self.coordinator.committed:
                key, value = row  # type: ignore[misc]
                yield Record(offset, 0, key, value)
