"""A :class:`~kafka_sink.admin.topic_log.TopicLog` over the coordinator model, for the intent store.

Role: the Kafka intent store's fenced writes are tested against the same model of the
transaction coordinator as the commits (``coordinator.py``): ``append_transactional`` is a
transactional Produce v12 on the model (which refuses a fenced producer with PRODUCER_FENCED or
INVALID_PRODUCER_ID_MAPPING), then EndTxn v5 commit (which bumps the epoch); ``append`` is a
plain write, visible at once. Reads are read_committed: the last stable offset stops at the
first record of a transaction still open, and records of aborted transactions are skipped.
Markers are written at once (as in the model), so a committed record is readable at once.
``tail`` settles the records past the last stable offset as ``TopicLog.tail`` does, waiting on
the coordinator's clock (``poll_ms`` at a time, up to ``timeout_ms``) while one of the key's is
in an open transaction.
A slow broker: :attr:`CoordinatedTopicLog.write_delay_ms` of the coordinator's clock pass (the
reaper running) before each transactional write is applied; a write whose ``timeout_ms`` is
shorter gives up when it has passed (KafkaTimeoutError), nothing applied.

On a coordinator in Transactions V1 mode the epoch stays across ends, so the partition checks
sequences as a leader does: a producer's next record at the epoch it last wrote must carry the
next sequence, a record at a newer epoch sequence 0 (else OUT_OF_ORDER_SEQUENCE_NUMBER); a record
at the sequence of the producer's last batch is a duplicate, answered with that batch's offset
and not appended, whether that batch was committed or aborted. As ``TopicLog`` does, the state
handed back carries the next sequence, an abort hands on the sequence after the aborted batch,
and a write steps back once when that batch never landed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from kafka_sink.admin.topic_log import OpenTransactionError, ProducerState, Tail
from kafka_sink.errors import KafkaTimeoutError, OutOfOrderSequenceNumberError
from kafka_sink.records.batch import Record
from tests.fakes.coordinator import ONGOING, FakeCoordinator

_PLAIN = 0  # the serial of records written without a transaction (always visible)


class CoordinatedTopicLog:
    """One cluster's small topics, kept in ``coordinator.log`` (see the module docstring)."""

    def __init__(self, coordinator: FakeCoordinator) -> None:
        self.coordinator = coordinator
        coordinator.committed.add(_PLAIN)
        # (topic, partition, producer id) -> (epoch, sequence, offset) of its last batch (V1):
        # the leader's producer state.
        self._batches: dict[tuple[str, int, int], tuple[int, int, int]] = {}
        #: How long each transactional write takes (a slow broker), on the coordinator's clock.
        self.write_delay_ms = 0
        #: The log's own bound (``max.block.ms``): how long ``tail`` waits for an open
        #: transaction, polling every ``poll_ms`` of the coordinator's clock (the reaper runs).
        self.timeout_ms = 60_000
        self.poll_ms = 100
        #: The ``timeout_ms`` each transactional write was given (None: the log's own bound).
        self.write_timeouts: list[int | None] = []

    def close(self) -> None:
        pass

    def transactions_v2(self, topic: str, partition: int) -> bool:
        return self.coordinator.transaction_version >= 2

    def append(
        self,
        topic: str,
        partition: int,
        key: bytes,
        value: bytes | None,
        *,
        timeout_ms: int | None = None,
    ) -> int:
        entries = self.coordinator.log.setdefault((topic, partition), [])
        entries.append((_PLAIN, (key, value)))
        return len(entries) - 1

    def append_transactional(
        self,
        topic: str,
        partition: int,
        key: bytes,
        value: bytes | None,
        state: ProducerState,
        *,
        timeout_ms: int | None = None,
    ) -> tuple[int, ProducerState]:
        self.write_timeouts.append(timeout_ms)
        if self.write_delay_ms:
            if timeout_ms is not None and timeout_ms < self.write_delay_ms:
                self.coordinator.advance(max(timeout_ms, 0))
                raise KafkaTimeoutError(
                    f"appending to {topic}-{partition} did not finish within {timeout_ms} ms"
                )
            self.coordinator.advance(self.write_delay_ms)
        tid = state.transactional_id
        v1 = self.coordinator.transaction_version == 1
        try:
            duplicate_of = self._duplicate_of(topic, partition, state) if v1 else None
        except OutOfOrderSequenceNumberError:
            if state.sequence == 0:
                raise
            state = replace(state, sequence=state.sequence - 1)
            duplicate_of = self._duplicate_of(topic, partition, state)
        self.coordinator.write(
            tid,
            state.producer_id,
            state.producer_epoch,
            (topic, partition),
            (key, value),
            duplicate=duplicate_of is not None,
        )
        offset = len(self.coordinator.log[(topic, partition)]) - 1
        if duplicate_of is not None:
            offset = duplicate_of
        elif v1:
            self._batches[(topic, partition, state.producer_id)] = (
                state.producer_epoch,
                state.sequence,
                offset,
            )
        pid, epoch = self.coordinator.end_txn(tid, state.producer_id, state.producer_epoch, True)
        return offset, ProducerState(tid, pid, epoch, state.sequence + 1 if v1 else 0)

    def _duplicate_of(self, topic: str, partition: int, state: ProducerState) -> int | None:
        """The offset of the batch a V1 write repeats, None for a new one; a gap raises."""
        last = self._batches.get((topic, partition, state.producer_id))
        if last is None:
            return None
        epoch, sequence, offset = last
        if state.producer_epoch == epoch and state.sequence == sequence:
            return offset
        expected = sequence + 1 if state.producer_epoch == epoch else 0
        if state.sequence != expected:
            raise OutOfOrderSequenceNumberError(
                f"{topic}-{partition}: sequence {state.sequence} at epoch "
                f"{state.producer_epoch}, expected {expected}"
            )
        return None

    def abort_transactional(
        self, topic: str, partition: int, state: ProducerState
    ) -> ProducerState:
        tid = state.transactional_id
        pid, epoch = self.coordinator.end_txn(tid, state.producer_id, state.producer_epoch, False)
        v1 = self.coordinator.transaction_version == 1
        return ProducerState(tid, pid, epoch, state.sequence + 1 if v1 else 0)

    def end_offset(self, topic: str, partition: int, *, at_least: int = 0) -> int:
        open_serials = {m.serial for m in self.coordinator.txns.values() if m.state == ONGOING}
        entries = self.coordinator.log.get((topic, partition), [])
        for offset, (serial, _row) in enumerate(entries):
            if serial in open_serials:
                return offset
        return len(entries)

    def tail(
        self,
        topic: str,
        partition: int,
        key: bytes,
        *,
        start: int = 0,
        stable_at_least: int = 0,
        at_least: int = 0,
        own_producer_id: int = -1,
        on_corrupt: object = None,
    ) -> Tail:
        waited = 0
        while True:
            stable = self.end_offset(topic, partition, at_least=stable_at_least)
            open_serials = {
                m.serial
                for m in self.coordinator.txns.values()
                if m.state == ONGOING and m.producer_id != own_producer_id
            }
            entries = self.coordinator.log.get((topic, partition), [])
            end = len(entries)
            latest: Record | None = None
            undecided: list[int] = []
            for offset in range(max(stable, start), end):
                serial, row = entries[offset]
                found, value = row  # type: ignore[misc]
                if found != key:
                    continue
                if serial in self.coordinator.committed:
                    latest = Record(offset, 0, found, value)
                elif serial in open_serials:
                    undecided.append(offset)
            pending = [o for o in undecided if latest is None or o > latest.offset]
            if not pending:
                return Tail(stable, end, latest)
            if waited >= self.timeout_ms:
                raise OpenTransactionError(topic, partition, stable, end, pending)
            self.coordinator.advance(self.poll_ms)
            waited += self.poll_ms

    def read(
        self, topic: str, partition: int, start: int, end: int, *, on_corrupt: object = None
    ) -> Iterator[Record]:
        entries = self.coordinator.log.get((topic, partition), [])
        for offset in range(start, min(end, len(entries))):
            serial, row = entries[offset]
            if serial in self.coordinator.committed:
                key, value = row  # type: ignore[misc]
                yield Record(offset, 0, key, value)
