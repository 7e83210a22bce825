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
and metadata), trying the transaction's partitions in turn.

Invariants:
- Only a control batch of the transaction's producer id, at an epoch >= its epoch, at or after
  its first offset counts: other producers' markers, and data batches, are passed over. Markers
  are appended in offset order, so the first match is this transaction's (a later transaction of
  the same producer id starts after it).
- Nothing is ever guessed: a marker that cannot be read is
  :class:`TransactionOutcomeUnknownError` (naming the transactional id, each partition tried and
  why it told nothing, the errors kept in ``causes``), never taken as an abort.
- A marker absent up to the high watermark is a leader that has not caught up
  (:class:`MarkerNotReachedError`, retriable): the caller asks only once the coordinator no longer
  holds the transaction open, when every marker is written and acknowledged by the in-sync
  replicas, so a newly elected leader whose high watermark is still behind it answers short.
  Likewise an offset out of range above the log start (a leader whose log ends before the
  transaction's data). :meth:`ControlRecordReader.transaction_outcome` asks again, the
  transaction's other partitions first, until its deadline; an offset below the log start
  (retention or compaction removed the data) or a refused Fetch (TOPIC_AUTHORIZATION_FAILED: the
  principal lacks READ on the topic) ends that partition's part at once.
- Every read is bounded by one deadline per transaction; a moved leader or a lost connection is
  retried within it after a metadata refresh.
- Reads are read_uncommitted: a marker is itself what decides, and the last stable offset may
  be held back by other producers' open transactions.
- What one answer's batches decode to is bounded as a consumer's Fetch is (``records/fetched.py``:
  64 MiB): any producer may write to a data partition, and a decompression bomb there fails
  that partition's read with a :class:`~kafka_sink.errors.DecodeLimitError` naming the topic,
  partition and offset (the outcome is then read from another partition, or unknown), instead
  of inflating in the driver.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

from kafka_sink.admin.client import Deadline
from kafka_sink.admin.topic_log import TopicLog
from kafka_sink.errors import (
    CorruptRecordError,
    DecodeLimitError,
    KafkaError,
    KafkaTimeoutError,
    OffsetOutOfRangeError,
    error_for_code,
)
from kafka_sink.prepared import PreparedTransaction, TopicPartition
from kafka_sink.records.batch import batch_spans, decode_batch
from kafka_sink.records.fetched import (
    CONTROL_TYPE_COMMIT,
    MAX_DECODED_BYTES,
    complete_batches_size,
    control_type,
)
from kafka_sink.wire.messages.fetch import FetchResponse
from kafka_sink.wire.messages.list_offsets import READ_UNCOMMITTED

__all__ = [
    "ControlRecordReader",
    "MarkerNotReachedError",
    "TransactionOutcomeUnknownError",
    "marker_after",
    "scan_for_outcome",
]


class TransactionOutcomeUnknownError(KafkaError):
    """No marker of a transaction could be read from its partitions: its outcome is unknown.

    ``causes``: per partition tried, the error that kept it from telling (the last one seen).
    """

    def __init__(
        self, message: str, causes: Mapping[TopicPartition, KafkaError] | None = None
    ) -> None:
        super().__init__(message)
        self.causes: dict[TopicPartition, KafkaError] = dict(causes or {})


class MarkerNotReachedError(TransactionOutcomeUnknownError):
    """A partition's leader answered up to a high watermark (or a log end) short of the marker.

    Retriable: the marker is written and acknowledged by the in-sync replicas before the id can
    move on, so a leader without it below its high watermark has not caught up (a newly elected
    one). ``resume_from``: the offset the next read of the partition starts at.
    """

    retriable = True

    def __init__(self, message: str, resume_from: int) -> None:
        super().__init__(message)
        self.resume_from = resume_from


def marker_after(
    partition: FetchResponse.PartitionData,
    fetch_offset: int,
    prepared: PreparedTransaction,
    topic: str = "",
    *,
    max_decoded_bytes: int = MAX_DECODED_BYTES,
) -> tuple[bool | None, int]:
    """The outcome (True: COMMIT) of the first marker of ``prepared`` in one fetched partition,
    None when there is none in it, and the offset to fetch next.

    The answer's batches may decode to ``max_decoded_bytes`` in all, as a consumer's Fetch
    (``records/fetched.py``): the batches past it are left for the next fetch, and a first batch
    past it alone raises :class:`~kafka_sink.errors.DecodeLimitError` naming the topic,
    partition and offset.
    """
    if partition.error_code:
        where = f"{topic}-{partition.partition_index}"
        error = error_for_code(partition.error_code, f"Fetch {where} at {fetch_offset}")
        assert error is not None
        if isinstance(error, OffsetOutOfRangeError):
            raise _out_of_range(where, fetch_offset, partition.log_start_offset) from error
        raise error
    data = partition.records or b""
    whole = complete_batches_size(data)
    next_offset = fetch_offset
    room = max_decoded_bytes
    view = memoryview(data).cast("B")[:whole]
    for start, end in batch_spans(view) if whole else []:
        try:
            batch = decode_batch(view[start:end], max_decoded_bytes=room)
        except CorruptRecordError as exc:
            if next_offset > fetch_offset and isinstance(exc, DecodeLimitError):
                break  # no room left in this answer: the next fetch starts at this batch
            raise _located(exc, topic, partition.partition_index) from None
        room -= batch.decoded_bytes
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
    ``first_offset`` by ``fetch(offset)``); retriable errors are retried until ``deadline``,
    except :class:`MarkerNotReachedError` (no marker up to the leader's high watermark), which
    is raised for the caller to ask again."""
    topic, index = tp
    offset = first_offset
    attempts = 0
    while True:
        deadline.waiting_for = f"Fetch({topic}-{index} at {offset})"
        try:
            answer = fetch(offset)
            outcome, following = marker_after(answer, offset, prepared, topic)
        except KafkaError as exc:
            if isinstance(exc, MarkerNotReachedError) or deadline.is_own(exc) or not exc.retriable:
                raise
            deadline.last_error = exc
            refresh()
            back_off(attempts, deadline)
            attempts += 1
            continue
        if outcome is not None:
            return outcome
        if following >= answer.high_watermark:
            # Not retried here: the caller asks the transaction's other partitions meanwhile.
            raise MarkerNotReachedError(
                f"no COMMIT or ABORT marker of transaction {prepared.transactional_id!r} "
                f"(producer id {prepared.producer_id}, epoch >= {prepared.producer_epoch}) in "
                f"{topic}-{index} from offset {first_offset} up to the leader's high watermark "
                f"{answer.high_watermark} (a leader that has not caught up with the marker)",
                resume_from=following,
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
        first offset is known and that tells, within one deadline; raises
        :class:`TransactionOutcomeUnknownError` when none tells (see the module docstring).
        """
        tid = prepared.transactional_id
        known = sorted(tp for tp in prepared.partitions if first_offsets.get(tp, -1) >= 0)
        if not known:
            raise TransactionOutcomeUnknownError(
                f"the first offsets of transaction {tid!r} in its partitions are not known (the "
                "commit was recorded without them), so its markers cannot be read"
            )
        deadline = self._deadline(f"reading the marker of transaction {tid!r}")
        pending = {tp: first_offsets[tp] for tp in known}  # where each partition's read resumes
        causes: dict[TopicPartition, KafkaError] = {}
        rounds = 0
        while True:
            for tp in list(pending):
                fetch = functools.partial(self._fetch_uncommitted, tp, deadline)
                try:
                    return scan_for_outcome(
                        fetch,
                        prepared,
                        tp,
                        pending[tp],
                        deadline=deadline,
                        back_off=self.client.back_off,
                        refresh=self.client.metadata.request_update,
                    )
                except MarkerNotReachedError as exc:  # a leader behind: asked again below
                    causes[tp] = exc
                    pending[tp] = exc.resume_from
                except KafkaError as exc:
                    if deadline.is_own(exc):
                        raise _unknown(prepared, causes, exc) from exc
                    causes[tp] = exc
                    del pending[tp]
            if not pending:
                raise _unknown(prepared, causes, None) from next(iter(causes.values()))
            self.client.metadata.request_update()
            try:
                self.client.back_off(rounds, deadline)
            except KafkaTimeoutError as exc:
                if not deadline.is_own(exc):
                    raise
                raise _unknown(prepared, causes, exc) from exc
            rounds += 1

    def _fetch_uncommitted(
        self, tp: TopicPartition, deadline: Deadline, offset: int
    ) -> FetchResponse.PartitionData:
        return self._fetch_partition(tp[0], tp[1], offset, deadline, READ_UNCOMMITTED)[1]


def _located(exc: CorruptRecordError, topic: str, partition: int) -> CorruptRecordError:
    """``exc`` again, naming the topic and partition too (its message names the offset)."""
    kind = DecodeLimitError if isinstance(exc, DecodeLimitError) else CorruptRecordError
    return kind(
        f"cannot read {topic}-{partition} for a transaction marker: {exc}",
        topic=topic,
        partition=partition,
        offset=exc.offset,
        last_offset=exc.last_offset,
        checksum_ok=exc.checksum_ok,
    )


def _out_of_range(where: str, offset: int, log_start: int) -> KafkaError:
    """Why ``offset`` is out of range: above the log start, a leader whose log ends short of it
    (retriable, as a leader behind); below it, removed by retention or compaction (final)."""
    if 0 <= log_start <= offset:
        return MarkerNotReachedError(
            f"{where}: offset {offset} is beyond the leader's log end (a leader that has not "
            "caught up)",
            resume_from=offset,
        )
    start = f" {log_start}" if log_start >= 0 else ""
    return OffsetOutOfRangeError(
        f"{where}: offset {offset} is below the log start offset{start} (OFFSET_OUT_OF_RANGE): "
        "retention or compaction removed the transaction's records (and perhaps its marker)"
    )


def _unknown(
    prepared: PreparedTransaction,
    causes: Mapping[TopicPartition, KafkaError],
    timeout: KafkaError | None,
) -> TransactionOutcomeUnknownError:
    each = "; ".join(f"{t}-{p}: {error}" for (t, p), error in sorted(causes.items()))
    ended = f" ({timeout})" if timeout is not None else ""
    return TransactionOutcomeUnknownError(
        f"no COMMIT or ABORT marker of transaction {prepared.transactional_id!r} (producer id "
        f"{prepared.producer_id}, epoch >= {prepared.producer_epoch}) could be read{ended}: "
        + (each or "no partition answered"),
        causes,
    )
