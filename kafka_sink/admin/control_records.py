"""Whether a prepared transaction was committed or aborted, read from its partitions' markers.

Role: the coordinator forgets a transaction's outcome once its transactional id moves on. After
an EndTxn(commit) whose answer was lost, a later InitProducerId on the same id leaves the id
Empty at a newer epoch whether the commit was applied first or the transaction was fenced
(aborted) first. The partitions still hold the answer: the coordinator ends a transaction by
writing a control batch (a marker, COMMIT or ABORT) of its producer id, at an epoch at or above
the transaction's, into every partition it wrote, after its data. :func:`scan_for_outcome` reads
one partition from the transaction's first offset up to the high watermark, read_uncommitted,
and returns the first such marker's type; :class:`ControlRecordReader` does it against the
partition leaders (Fetch, through :class:`~kafka_sink.admin.topic_log.TopicLog`'s connection
and metadata).

Invariants:
- Only a control batch of the transaction's producer id, at an epoch >= its epoch, at or after
  its first offset counts: other producers' markers, and data batches, are passed over. Markers
  are appended in offset order, so the first match is this transaction's (a later transaction of
  the same producer id starts after it).
- A marker absent up to the high watermark is an error (:class:`TransactionOutcomeUnknownError`
  naming the transactional id and the partition), never taken as an abort: the caller asks only
  once the coordinator no longer holds the transaction open, when every marker is written.
- Every read is bounded by one deadline; a moved leader or a lost connection is retried within
  it after a metadata refresh; any other error raises at once.
- Reads are read_uncommitted: a marker is itself what decides, and the last stable offset may
  be held back by other producers' open transactions.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

from kafka_sink.admin.client import Deadline
from kafka_sink.admin.topic_log import TopicLog
from kafka_sink.errors import KafkaError, error_for_code
from kafka_sink.prepared import PreparedTransaction, TopicPartition
from kafka_sink.records.batch import read_batches
from kafka_sink.records.fetched import CONTROL_TYPE_COMMIT, complete_batches_size, control_type
from kafka_sink.wire.messages.fetch import FetchResponse
from kafka_sink.wire.messages.list_offsets import READ_UNCOMMITTED

__all__ = [
    "ControlRecordReader",
    "TransactionOutcomeUnknownError",
    "marker_after",
    "scan_for_outcome",
]


class TransactionOutcomeUnknownError(KafkaError):
    """No marker of a transaction could be read from its partitions: its outcome is unknown."""


def marker_after(
    partition: FetchResponse.PartitionData,
    fetch_offset: int,
    prepared: PreparedTransaction,
    topic: str = "",
) -> tuple[bool | None, int]:
    """The outcome (True: COMMIT) of the first marker of ``prepared`` in one fetched partition,
    None when there is none in it, and the offset to fetch next."""
    if partition.error_code:
        error = error_for_code(
            partition.error_code, f"Fetch {topic}-{partition.partition_index} at {fetch_offset}"
        )
        assert error is not None
        raise error
    data = partition.records or b""
    whole = complete_batches_size(data)
    next_offset = fetch_offset
    for batch in read_batches(memoryview(data)[:whole]) if whole else []:
        last = batch.base_offset + batch.last_offset_delta
        next_offset = max(next_offset, last + 1)
        if (
            last >= fetch_offset
            and batch.producer_id == prepared.producer_id
            and batch.producer_epoch >= prepared.producer_epoch
        ):
            kind = control_type(batch)
            if kind is not None:
                return kind == CONTROL_TYPE_COMMIT, next_offset
    return None, next_offset


def scan_for_outcome(
    fetch: Callable[[int], FetchResponse.PartitionData],
    prepared: PreparedTransaction,
    tp: TopicPartition,
    first_offset: int,
    *,
    deadline: Deadline,
    back_off: Callable[[int, Deadline], None],
    refresh: Callable[[], None] = lambda: None,
) -> bool:
    """Whether ``prepared`` was committed, from its marker in ``tp`` (read from
    ``first_offset`` by ``fetch(offset)``); retriable errors are retried until ``deadline``."""
    topic, index = tp
    offset = first_offset
    attempts = 0
    while True:
        deadline.waiting_for = f"Fetch({topic}-{index} at {offset})"
        try:
            answer = fetch(offset)
            outcome, following = marker_after(answer, offset, prepared, topic)
        except KafkaError as exc:
            if deadline.is_own(exc) or not exc.retriable:
                raise
            deadline.last_error = exc
            refresh()
            back_off(attempts, deadline)
            attempts += 1
            continue
        if outcome is not None:
            return outcome
        if following >= answer.high_watermark:
            raise TransactionOutcomeUnknownError(
                f"no COMMIT or ABORT marker of transaction {prepared.transactional_id!r} "
                f"(producer id {prepared.producer_id}, epoch >= {prepared.producer_epoch}) in "
                f"{topic}-{index} from offset {first_offset} up to its high watermark "
                f"{answer.high_watermark}: whether it was committed cannot be told"
            )
        if following <= offset:
            # Nothing whole came back below the high watermark: ask again, within the deadline.
            back_off(attempts, deadline)
            attempts += 1
            continue
        offset = following
        attempts = 0


class ControlRecordReader(TopicLog):
    """Reads transactions' outcomes from their markers (one connection pool; ``close()`` it)."""

    def transaction_outcome(
        self, prepared: PreparedTransaction, first_offsets: Mapping[TopicPartition, int]
    ) -> bool:
        """Whether ``prepared`` was committed, read from the first of its partitions whose
        first offset is known; raises :class:`TransactionOutcomeUnknownError` when none tells.
        """
        known = sorted(tp for tp in prepared.partitions if first_offsets.get(tp, -1) >= 0)
        if not known:
            raise TransactionOutcomeUnknownError(
                f"the first offsets of transaction {prepared.transactional_id!r} in its "
                f"partitions are not known, so its markers cannot be read"
            )
        errors: list[str] = []
        for tp in known:
            deadline = self._deadline(
                f"reading the marker of transaction {prepared.transactional_id!r} in "
                f"{tp[0]}-{tp[1]}"
            )
            fetch = functools.partial(self._fetch_uncommitted, tp, deadline)
            try:
                return scan_for_outcome(
                    fetch,
                    prepared,
                    tp,
                    first_offsets[tp],
                    deadline=deadline,
                    back_off=self.client.back_off,
                    refresh=self.client.metadata.request_update,
                )
            except KafkaError as exc:
                errors.append(str(exc))
        raise TransactionOutcomeUnknownError("; ".join(errors))

    def _fetch_uncommitted(
        self, tp: TopicPartition, deadline: Deadline, offset: int
    ) -> FetchResponse.PartitionData:
        return self._fetch_partition(tp[0], tp[1], offset, deadline, READ_UNCOMMITTED)[1]
