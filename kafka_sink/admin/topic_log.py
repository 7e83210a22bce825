"""A small topic as a durable log: create it, append one record, read a range back.

Role: what the exactly-once intent store needs from Kafka, without a producer or a consumer:
``ensure_topic`` (Metadata, CreateTopics), ``topic_config`` (DescribeConfigs), ``replicas``
(Metadata), ``append`` (one Produce with ``acks=all``), ``end_offset`` (ListOffsets), ``read``
(Fetch) and ``tail`` (what lies past the last stable offset, for one key), and the writes of a
fenced writer: ``init_producer_id`` (InitProducerId on its transactional id, which fences every
earlier holder of the id) and ``append_transactional`` (one record in a transaction of its own,
committed before it returns). It picks no partition
itself: the caller names one (no key hashing, so no numpy).
Blocking, on the caller's thread, through :class:`~kafka_sink.admin.client.AdminClient`, so
bootstrap, TLS and SASL settings mean what they mean for the producer and secrets stay out of
messages.

Invariants:
- Every call is bounded by one deadline (``timeout_ms``, default ``max.block.ms``; an append
  may be given a shorter one); its timeout names the operation and the last error seen.
- Retriable broker errors (a moved leader, NOT_ENOUGH_REPLICAS, a lost connection) are retried
  with backoff after a metadata refresh; other errors raise at once.
- ``append`` returns only once the partition leader acknowledged the record with ``acks=all``:
  it is then on every in-sync replica (at least ``min.insync.replicas``). The record goes without
  a producer id, so a retry after a lost answer may store it twice; callers append records whose
  repetition is harmless (the intent store keeps the latest per key).
- ``append_transactional`` writes as Kafka's transactional producer does. Under Transactions V2
  (finalized ``transaction.version`` >= 2): Produce v12 with the transactional id, producer id
  and epoch at sequence 0 (the broker adds the partition to the transaction), then EndTxn v5
  commit, which bumps the epoch; the new :class:`ProducerState` is returned and the caller
  keeps it for its next write. Under V1: AddPartitionsToTxn v3, Produce v11 or below at the
  state's next sequence (the epoch stays, so sequences go on), EndTxn v4 or below. A writer
  whose epoch another InitProducerId superseded is refused by the broker or the coordinator
  (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, INVALID_PRODUCER_ID_MAPPING): that error raises,
  and the record never becomes visible to a read_committed reader. After another failure the
  caller ends the transaction with ``abort_transactional`` (under V2 that bumps the epoch too).
  Under V1 (or under either version when the abort itself failed, the transaction still open)
  the failed batch may or may not be in the log: the state after it goes one sequence past it,
  and the next write steps back once when the leader answers OUT_OF_ORDER_SEQUENCE_NUMBER (the
  batch never landed). Never a sequence the leader already
  holds: it would answer that write as a retry and append nothing.
- ``tail`` reads past the last stable offset for one key: ListOffsets read_committed, then
  Fetch read_uncommitted up to the high watermark; a data record of the key counts as committed
  when written without a transaction or when its producer's next marker in the range is a
  commit, aborted when it is an abort, and open when no marker follows yet. It polls while a
  record of the key is open after the key's latest committed one, and raises
  :class:`OpenTransactionError` (naming the topic, partition, range and offsets) at its
  deadline: an open record is never taken for absent. Undecodable batches there are treated as
  ``read`` treats them.
- Other reads are read_committed (ListOffsets and Fetch with isolation_level 1): ``end_offset`` is
  the last stable offset, and ``read`` yields the data records with ``start <= offset < end``
  in offset order, without the records of aborted transactions and without control batches
  (``records/fetched.py``); offsets compaction removed are simply absent. A start below the
  log start offset reads from the log start.
- A read never ends short of ``end``: a Fetch answer whose high watermark is below ``end`` (a
  newly elected leader whose high watermark has not caught up, or a broker that is no longer the
  leader) is retried after a metadata refresh until the deadline, never taken as the end of the
  log. ``end_offset(..., at_least=n)`` likewise retries a listing below ``n`` (an offset the
  caller has already seen). So a leader change between ListOffsets and Fetch cannot make a
  reader miss the latest record and return an older one.
- ListOffsets and Fetch carry the partition's leader epoch from the metadata
  (``current_leader_epoch``, ListOffsets v4+, Fetch v9+): a broker with another view of the
  leadership answers FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH instead of data, and the call
  refreshes the metadata and retries.
- Fetch is sent at v12 at most, where topics travel by name, with ``max_bytes`` 4 MiB. What one
  answer may decode to is bounded by ``records/fetched.py`` (64 MiB, sixteen times that): a
  batch that alone inflates past it, or that cannot be decoded at all, raises
  :class:`~kafka_sink.errors.CorruptRecordError` naming the topic, partition and offset, or is
  handed to the reader's ``on_corrupt`` and passed over.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from kafka_sink.admin.client import AdminClient, Deadline
from kafka_sink.admin.transactions import end_transaction, init_producer_id
from kafka_sink.errors import (
    BrokerResponseError,
    CorruptRecordError,
    DuplicateSequenceNumberError,
    KafkaConnectionError,
    KafkaError,
    OffsetNotAvailableError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceNumberError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
    error_for_code,
)
from kafka_sink.net.metadata import PartitionInfo
from kafka_sink.prepared import PreparedTransaction
from kafka_sink.records.batch import (
    CONTROL_FLAG,
    TRANSACTIONAL_FLAG,
    Record,
    RecordBatchBuilder,
    SealedBatch,
    batch_header,
    batch_spans,
    decode_batch,
)
from kafka_sink.records.compression import CompressionType
from kafka_sink.records.fetched import (
    CONTROL_TYPE_COMMIT,
    MAX_DECODED_BYTES,
    complete_batches_size,
    control_type,
    fetched_records,
)
from kafka_sink.wire.api import ApiKey
from kafka_sink.wire.messages import (
    AddPartitionsToTxnRequest,
    CreateTopicsRequest,
    DescribeConfigsRequest,
    FetchRequest,
    ListOffsetsRequest,
    ProduceRequest,
)
from kafka_sink.wire.messages.describe_configs import RESOURCE_TYPE_TOPIC
from kafka_sink.wire.messages.fetch import FetchResponse
from kafka_sink.wire.messages.list_offsets import (
    LATEST_TIMESTAMP,
    READ_COMMITTED,
    READ_UNCOMMITTED,
)

__all__ = ["OpenTransactionError", "ProducerState", "Tail", "TopicLog"]

T = TypeVar("T")

_POLL_MS = 100
_LAST_NAMED_FETCH_VERSION = 12
_FETCH_MAX_BYTES = 4 * 1024 * 1024
_TV2_LEVEL = 2  # transaction.version from which Produce v12 adds the partition itself
_TV2_PRODUCE_VERSION = 12
_TV1_PRODUCE_MAX = 11
_ADD_PARTITIONS_MAX = 3  # v4+ is broker-to-broker


@dataclass(frozen=True)
class ProducerState:
    """Where a fenced writer stands: its id, producer id, epoch and next sequence (V1 only:
    under Transactions V2 every transaction starts a new epoch at sequence 0)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    sequence: int = 0


@dataclass(frozen=True)
class Tail:
    """A partition past its last stable offset, for one key (:meth:`TopicLog.tail`)."""

    stable: int  # the last stable offset listed
    end: int  # the high watermark read up to
    # The key's committed record with the highest offset at or above the range's start, read
    # with read_uncommitted (a read_committed read up to ``stable`` does not show it).
    latest: Record | None


class OpenTransactionError(KafkaError):
    """Records of the key lie in a transaction still open past the last stable offset, and the
    deadline passed before it ended: whether they are the key's latest is not known yet."""

    def __init__(
        self, topic: str, partition: int, stable: int, end: int, offsets: list[int]
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.stable = stable
        self.end = end
        self.offsets = offsets
        shown = ", ".join(str(o) for o in offsets[:5]) + (" ..." if len(offsets) > 5 else "")
        super().__init__(
            f"{topic}-{partition} has a transaction still open at its last stable offset "
            f"{stable} (high watermark {end}), and the records of the key at offsets {shown} "
            "in that open range belong to a transaction that has neither committed nor aborted "
            "yet"
        )


class TopicLog:
    """Blocking access to small topics of one cluster (one connection pool, closed by close())."""

    def __init__(self, client: AdminClient, *, timeout_ms: int) -> None:
        self.client = client
        self.timeout_ms = timeout_ms

    @classmethod
    def from_config(cls, config: Mapping[str, object], timeout_s: float | None = None) -> TopicLog:
        client, cfg = AdminClient.from_config(config)
        timeout_ms = cfg.max_block_ms if timeout_s is None else int(timeout_s * 1000)
        return cls(client, timeout_ms=timeout_ms)

    def close(self) -> None:
        self.client.close()

    # -- topics -----------------------------------------------------------------------------

    def brokers(self) -> list[int]:
        """Node ids of the cluster's brokers."""
        return self.client.brokers(self._deadline("listing the brokers"))

    def partition_count(self, topic: str) -> int | None:
        """Partitions of ``topic``; None when the cluster does not have it."""
        deadline = self._deadline(f"looking up topic {topic!r}")
        return self._retrying(deadline, lambda: self._partition_count(topic, deadline))

    def ensure_topic(
        self,
        topic: str,
        *,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str],
    ) -> int:
        """Create ``topic`` unless it exists (a concurrent creator wins quietly); its partitions."""
        deadline = self._deadline(f"creating topic {topic!r}")

        def attempt() -> int:
            found = self._partition_count(topic, deadline)
            if found is not None:
                return found
            request = CreateTopicsRequest(
                topics=[
                    CreateTopicsRequest.CreatableTopic(
                        name=topic,
                        num_partitions=partitions,
                        replication_factor=replication_factor,
                        assignments=[],
                        configs=[
                            CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                            for k, v in sorted(configs.items())
                        ],
                    )
                ],
                timeout_ms=max(deadline.remaining_ms(), 1),
            )
            response = self._ask_any_broker(request, f"CreateTopics({topic!r})", deadline)
            for result in response.topics:
                error = error_for_code(result.error_code, result.error_message)
                if error is not None and not isinstance(error, TopicAlreadyExistsError):
                    raise error
            self.client.metadata.request_update()
            # Until the metadata shows leaders, the next attempt finds the topic "missing" and
            # CreateTopics answers TOPIC_ALREADY_EXISTS: retried as a moved leader.
            raise KafkaConnectionError(f"topic {topic!r} has no leaders in the metadata yet")

        return self._retrying(deadline, attempt)

    def topic_config(self, topic: str, keys: list[str]) -> dict[str, str]:
        """The current values of ``keys`` for ``topic`` (DescribeConfigs)."""
        deadline = self._deadline(f"reading the configuration of topic {topic!r}")

        def attempt() -> dict[str, str]:
            request = DescribeConfigsRequest(
                resources=[
                    DescribeConfigsRequest.DescribeConfigsResource(
                        resource_type=RESOURCE_TYPE_TOPIC,
                        resource_name=topic,
                        configuration_keys=keys,
                    )
                ],
                include_synonyms=False,
                include_documentation=False,
            )
            response = self._ask_any_broker(request, f"DescribeConfigs({topic!r})", deadline)
            out: dict[str, str] = {}
            for result in response.results:
                error = error_for_code(result.error_code, result.error_message)
                if error is not None:
                    raise error
                for entry in result.configs:
                    if entry.value is not None:
                        out[entry.name] = entry.value
            return out

        return self._retrying(deadline, attempt)

    def replicas(self, topic: str, partition: int) -> tuple[int, ...]:
        """The replica node ids of ``topic-partition`` (Metadata; the topic must exist)."""
        deadline = self._deadline(f"looking up the replicas of {topic}-{partition}")
        return self._retrying(
            deadline, lambda: self._partition(topic, partition, deadline).replicas
        )

    # -- data -------------------------------------------------------------------------------

    def append(
        self,
        topic: str,
        partition: int,
        key: bytes,
        value: bytes | None,
        *,
        timeout_ms: int | None = None,
    ) -> int:
        """Append one record with ``acks=all``; its offset once every in-sync replica has it.
        ``timeout_ms`` bounds the call below the log's own bound."""
        batch = _one_record_batch(key, value).encode()
        deadline = self._deadline(f"appending to {topic}-{partition}", timeout_ms)
        return self._retrying(deadline, lambda: self._produce(topic, partition, batch, deadline))

    def init_producer_id(self, transactional_id: str, transaction_timeout_ms: int) -> ProducerState:
        """InitProducerId on ``transactional_id``: fences every earlier holder of the id."""
        deadline = self._deadline(f"initialising transactional id {transactional_id!r}")
        pid, epoch = init_producer_id(
            self.client, transactional_id, transaction_timeout_ms, deadline
        )
        return ProducerState(transactional_id, pid, epoch)

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
        """Append one record in a transaction of ``state`` and commit it; its offset (-1 when a
        retry found it already written) and the state for the next write. ``timeout_ms`` bounds
        the call below the log's own bound."""
        deadline = self._deadline(
            f"appending to {topic}-{partition} as {state.transactional_id!r}", timeout_ms
        )
        leader, _epoch = self._retrying(deadline, lambda: self._leader(topic, partition, deadline))
        tv2 = self._retrying(deadline, lambda: self._transactions_v2(leader, deadline))
        sequence = 0 if tv2 else state.sequence
        if not tv2:
            self._add_partition(topic, partition, state, deadline)

        def produce(base_sequence: int) -> int:
            batch = _one_record_batch(key, value).encode(
                producer_id=state.producer_id,
                producer_epoch=state.producer_epoch,
                base_sequence=base_sequence,
                is_transactional=True,
            )
            return self._retrying(
                deadline,
                lambda: self._produce(
                    topic,
                    partition,
                    batch,
                    deadline,
                    transactional_id=state.transactional_id,
                    tv2=tv2,
                ),
            )

        try:
            offset = produce(sequence)
        except OutOfOrderSequenceNumberError:
            if sequence == 0:
                raise
            # A V1 abort, or an abort that failed, hands on the sequence after the failed batch
            # (``abort_transactional``, the intent store); the leader asks for the one before
            # when that batch never reached the log. Not a duplicate: the leader's last sequence
            # is not the one asked.
            sequence -= 1
            offset = produce(sequence)
        handle = PreparedTransaction(
            state.transactional_id, state.producer_id, state.producer_epoch, ((topic, partition),)
        )
        bumped = end_transaction(self.client, handle, True, deadline)
        if bumped is None:
            return offset, replace(state, sequence=sequence + 1)
        return offset, ProducerState(state.transactional_id, bumped[0], bumped[1])

    def abort_transactional(
        self, topic: str, partition: int, state: ProducerState
    ) -> ProducerState:
        """EndTxn(abort) for ``state`` after a failed ``append_transactional``, so its record
        never becomes visible and holds no reader back; the state for the next write."""
        deadline = self._deadline(f"aborting {state.transactional_id!r}")
        handle = PreparedTransaction(
            state.transactional_id, state.producer_id, state.producer_epoch, ((topic, partition),)
        )
        bumped = end_transaction(self.client, handle, False, deadline)
        if bumped is None:
            # V1 keeps the epoch: the aborted batch may be in the log at ``state.sequence``, and a
            # next write at that sequence would be answered as a retry of it, with nothing
            # appended (the next record silently lost). So the next write goes after it.
            return replace(state, sequence=state.sequence + 1)
        return ProducerState(state.transactional_id, bumped[0], bumped[1])

    def end_offset(self, topic: str, partition: int, *, at_least: int = 0) -> int:
        """The last stable offset of ``topic-partition`` (ListOffsets, read_committed): where a
        read_committed read ends now. With no transaction open on the partition it is the offset
        the next record appended gets.

        ``at_least`` is a last stable offset the caller has already seen: a smaller answer comes
        from a leader that has not caught up yet, and is retried until the deadline instead of
        returned. (Never pass the offset of a record read or written above the last stable
        offset: a transaction left open below it holds the answer lower for its timeout.)
        """
        deadline = self._deadline(f"listing the end offset of {topic}-{partition}")
        return self._retrying(
            deadline,
            lambda: self._list_end(topic, partition, READ_COMMITTED, at_least, deadline),
        )

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
        on_corrupt: Callable[[CorruptRecordError], None] | None = None,
    ) -> Tail:
        """What a read_committed read up to the last stable offset cannot show of ``key``.

        Lists the last stable offset (at least ``stable_at_least``), then reads from there (or
        from ``start``, when higher) up to the high watermark (at least ``at_least``) with
        read_uncommitted, and settles each record of ``key`` by the marker its transaction wrote
        after it (commit or abort; a record written without a transaction is committed). While a
        record of ``key`` is in a transaction still open, with no committed record of ``key``
        after it, the answer is not known: the call polls again until the deadline, then raises
        :class:`OpenTransactionError` naming the range. The open transaction of
        ``own_producer_id`` (the caller's own, after a write of it failed) is not waited for:
        only the caller's next write or abort ends it.
        """
        deadline = self._deadline(f"reading {topic}-{partition} past its last stable offset")
        attempts = 0
        while True:
            stable = self._retrying(
                deadline,
                lambda: self._list_end(topic, partition, READ_COMMITTED, stable_at_least, deadline),
            )
            first = max(stable, start)
            end, latest, pending = self._settle(
                topic,
                partition,
                key,
                start=first,
                at_least=max(at_least, first),
                deadline=deadline,
                own_producer_id=own_producer_id,
                on_corrupt=on_corrupt,
            )
            if not pending:
                return Tail(stable, end, latest)
            if deadline.remaining_ms() <= 0:
                raise OpenTransactionError(topic, partition, stable, end, pending)
            try:
                self.client.back_off(attempts, deadline)
            except KafkaError as exc:
                if not deadline.is_own(exc):
                    raise
                raise OpenTransactionError(topic, partition, stable, end, pending) from None
            attempts += 1

    def read(
        self,
        topic: str,
        partition: int,
        start: int,
        end: int,
        *,
        on_corrupt: Callable[[CorruptRecordError], None] | None = None,
    ) -> Iterator[Record]:
        """The records of ``topic-partition`` at ``start <= offset < end``, in offset order.

        A batch that cannot be decoded raises CorruptRecordError naming the topic, partition and
        offset. With ``on_corrupt``, a data batch that cannot be decoded is handed to it instead
        (it may raise) and passed over; the read goes on after it.
        """
        deadline = self._deadline(f"reading {topic}-{partition} from offset {start} to {end}")
        position = start
        skip = on_corrupt is not None
        while position < end:
            records, following, skipped = self._retrying(
                deadline,
                functools.partial(
                    self._fetch, topic, partition, position, end, deadline, skip_corrupt=skip
                ),
            )
            if following <= position:
                return  # the leader has nothing at or after ``position``
            position = following
            for error in skipped:
                assert on_corrupt is not None
                on_corrupt(error)
            for record in records:
                if record.offset >= end:
                    return
                yield record

    # -- steps ------------------------------------------------------------------------------

    def _list_end(
        self, topic: str, partition: int, isolation: int, at_least: int, deadline: Deadline
    ) -> int:
        """One ListOffsets(latest) at ``isolation``: the last stable offset (read_committed) or
        the high watermark (read_uncommitted); a leader answering below ``at_least`` is behind."""
        leader, epoch = self._leader(topic, partition, deadline)
        request = ListOffsetsRequest(
            topics=[
                ListOffsetsRequest.ListOffsetsTopic(
                    name=topic,
                    partitions=[
                        ListOffsetsRequest.ListOffsetsPartition(
                            partition_index=partition,
                            current_leader_epoch=epoch,
                            timestamp=LATEST_TIMESTAMP,
                        )
                    ],
                )
            ],
            isolation_level=isolation,
        )
        deadline.waiting_for = f"ListOffsets({topic}-{partition}) on node {leader}"
        response = self.client.request(leader, request, deadline)
        answer = response.topics[0].partitions[0]
        error = error_for_code(answer.error_code)
        if error is not None:
            raise error
        if answer.offset < at_least:
            raise _behind(topic, partition, leader, int(answer.offset), at_least)
        return int(answer.offset)

    def _settle(
        self,
        topic: str,
        partition: int,
        key: bytes,
        *,
        start: int,
        at_least: int,
        deadline: Deadline,
        own_producer_id: int,
        on_corrupt: Callable[[CorruptRecordError], None] | None,
    ) -> tuple[int, Record | None, list[int]]:
        """Read ``[start, high watermark)`` read_uncommitted: the high watermark, the committed
        record of ``key`` with the highest offset, and the offsets of the records of ``key``
        still in an open transaction after it."""
        committed: list[Record] = []
        # producer id -> the records of ``key`` its transaction holds, awaiting its marker
        waiting: dict[int, list[Record]] = {}
        position = start
        end = at_least
        while True:
            leader, data = self._retrying(
                deadline,
                functools.partial(
                    self._fetch_partition, topic, partition, position, deadline, READ_UNCOMMITTED
                ),
            )
            if data.error_code:
                error = error_for_code(data.error_code, f"Fetch {topic}-{partition} at {position}")
                assert error is not None
                if (
                    isinstance(error, OffsetOutOfRangeError)
                    and 0 <= position < data.log_start_offset
                ):
                    position = data.log_start_offset
                    continue
                if error.retriable:
                    deadline.last_error = error
                    self.client.metadata.request_update()
                    self.client.back_off(0, deadline)
                    continue
                raise error
            if data.high_watermark < end:
                deadline.last_error = _behind(topic, partition, leader, data.high_watermark, end)
                self.client.metadata.request_update()
                self.client.back_off(0, deadline)
                continue
            end = data.high_watermark
            if position >= end:
                break
            following = self._settle_batches(
                topic,
                partition,
                key,
                data=data,
                position=position,
                end=end,
                committed=committed,
                waiting=waiting,
                on_corrupt=on_corrupt,
            )
            if following <= position:
                break  # nothing at or after ``position`` (a compacted tail)
            position = following
        latest = max(committed, key=lambda r: r.offset, default=None)
        floor = -1 if latest is None else latest.offset
        pending = sorted(
            r.offset
            for pid, rs in waiting.items()
            if pid != own_producer_id
            for r in rs
            if r.offset > floor
        )
        return end, latest, pending

    def _settle_batches(
        self,
        topic: str,
        partition: int,
        key: bytes,
        *,
        data: FetchResponse.PartitionData,
        position: int,
        end: int,
        committed: list[Record],
        waiting: dict[int, list[Record]],
        on_corrupt: Callable[[CorruptRecordError], None] | None,
    ) -> int:
        """Sort the records of ``key`` in one read_uncommitted answer; the next offset to fetch."""
        raw = data.records or b""
        view = memoryview(raw).cast("B")[: complete_batches_size(raw)]
        following = position
        for lo, hi in batch_spans(view):
            header = batch_header(view, lo)
            last = header.base_offset + header.last_offset_delta
            if header.base_offset >= end:
                return max(following, end)
            following = max(following, last + 1)
            if last < position:
                continue
            try:
                batch = decode_batch(view[lo:hi], max_decoded_bytes=MAX_DECODED_BYTES)
            except CorruptRecordError as exc:
                located = CorruptRecordError(
                    f"cannot read {topic}-{partition}: {exc}",
                    topic=topic,
                    partition=partition,
                    offset=exc.offset if exc.offset is not None else header.base_offset,
                    last_offset=exc.last_offset if exc.last_offset is not None else last,
                    checksum_ok=exc.checksum_ok,
                )
                if on_corrupt is None or header.attributes & CONTROL_FLAG:
                    raise located from None
                on_corrupt(located)
                continue
            marker = control_type(batch)
            if marker is not None:
                if marker == CONTROL_TYPE_COMMIT:
                    committed.extend(waiting.pop(header.producer_id, []))
                else:
                    waiting.pop(header.producer_id, None)
                continue
            mine = [r for r in batch.records if r.key == key and position <= r.offset < end]
            if not mine:
                continue
            if header.attributes & TRANSACTIONAL_FLAG and header.producer_id >= 0:
                waiting.setdefault(header.producer_id, []).extend(mine)
            else:
                committed.extend(mine)
        return following

    def _produce(
        self,
        topic: str,
        partition: int,
        batch: bytes,
        deadline: Deadline,
        *,
        transactional_id: str | None = None,
        tv2: bool = False,
    ) -> int:
        """One Produce with ``acks=all`` to the partition's leader; the record's offset."""
        leader, _epoch = self._leader(topic, partition, deadline)
        version: int | None = None
        if transactional_id is not None:
            # V2 needs v12 (the broker adds the partition); under V1 v12 would ask it to.
            ceiling = _TV2_PRODUCE_VERSION if tv2 else _TV1_PRODUCE_MAX
            version = min(self.client.api_version(leader, ApiKey.PRODUCE, deadline), ceiling)
            if tv2 and version < _TV2_PRODUCE_VERSION:
                raise UnsupportedVersionError(
                    f"node {leader} finalized transaction.version 2 but speaks Produce "
                    f"v{version} only"
                )
        request = ProduceRequest(
            transactional_id=transactional_id,
            acks=-1,
            timeout_ms=max(min(self.client.request_timeout_ms, deadline.remaining_ms()), 1),
            topic_data=[
                ProduceRequest.TopicProduceData(
                    name=topic,
                    partition_data=[
                        ProduceRequest.PartitionProduceData(index=partition, records=batch)
                    ],
                )
            ],
        )
        deadline.waiting_for = f"Produce to {topic}-{partition} on node {leader}"
        response = self.client.request(leader, request, deadline, version)
        answer = response.responses[0].partition_responses[0]
        error = error_for_code(answer.error_code, answer.error_message)
        if isinstance(error, DuplicateSequenceNumberError):
            return -1  # a retry of a write the broker already has
        if error is not None:
            raise error
        return int(answer.base_offset)

    def _transactions_v2(self, node: int, deadline: Deadline) -> bool:
        level = self.client.finalized_feature(node, "transaction.version", deadline)
        return level >= _TV2_LEVEL

    def _add_partition(
        self, topic: str, partition: int, state: ProducerState, deadline: Deadline
    ) -> None:
        """AddPartitionsToTxn (Transactions V1): the partition joins the state's transaction."""
        request = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=state.transactional_id,
            v3_and_below_producer_id=state.producer_id,
            v3_and_below_producer_epoch=state.producer_epoch,
            v3_and_below_topics=[
                AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(
                    name=topic, partitions=[partition]
                )
            ],
        )
        node: int | None = None

        def attempt() -> None:
            nonlocal node
            if node is None:
                node = self.client.find_coordinator(state.transactional_id, deadline)
            version = min(
                self.client.api_version(node, ApiKey.ADD_PARTITIONS_TO_TXN, deadline),
                _ADD_PARTITIONS_MAX,
            )
            deadline.waiting_for = f"AddPartitionsToTxn({state.transactional_id!r}) on {node}"
            response = self.client.request(node, request, deadline, version)
            for result in response.results_by_topic_v3_and_below:
                for each in result.results_by_partition:
                    error = error_for_code(each.partition_error_code)
                    if error is not None:
                        raise error

        def moved() -> None:
            nonlocal node
            node = None

        self.client.retrying(deadline, attempt, on_moved=moved)

    def _fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        end: int,
        deadline: Deadline,
        *,
        skip_corrupt: bool,
    ) -> tuple[list[Record], int, list[CorruptRecordError]]:
        """Records from ``offset``, the offset after them and the batches passed over as
        undecodable, from a leader that has ``end``."""
        leader, data = self._fetch_partition(topic, partition, offset, deadline, READ_COMMITTED)
        try:
            fetched = fetched_records(
                data, offset, read_committed=True, topic=topic, skip_corrupt=skip_corrupt
            )
        except OffsetOutOfRangeError:
            if offset >= data.log_start_offset >= 0 or data.log_start_offset < 0:
                raise
            return [], data.log_start_offset, []  # compaction or retention moved the start
        if fetched.high_watermark < end:
            # Its log is shorter than the one ListOffsets saw: what it lacks may hold the newest
            # record, so this answer must not end the read.
            raise _behind(topic, partition, leader, fetched.high_watermark, end)
        if fetched.next_offset == offset and not fetched.records:
            # No batch at or after ``offset``: compaction emptied the rest of a cleaned segment
            # (the next batch starts the active segment), or there is nothing more at all.
            return [], max(offset, fetched.high_watermark), []
        return fetched.records, fetched.next_offset, fetched.skipped

    def _fetch_partition(
        self, topic: str, partition: int, offset: int, deadline: Deadline, isolation_level: int
    ) -> tuple[int, FetchResponse.PartitionData]:
        """One Fetch of ``topic-partition`` from ``offset``: the leader asked and its answer."""
        leader, epoch = self._leader(topic, partition, deadline)
        version = min(
            self.client.api_version(leader, ApiKey.FETCH, deadline), _LAST_NAMED_FETCH_VERSION
        )
        request = FetchRequest(
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=_FETCH_MAX_BYTES,
            topics=[
                FetchRequest.FetchTopic(
                    topic=topic,
                    partitions=[
                        FetchRequest.FetchPartition(
                            partition=partition,
                            current_leader_epoch=epoch,
                            fetch_offset=offset,
                            partition_max_bytes=_FETCH_MAX_BYTES,
                        )
                    ],
                )
            ],
            forgotten_topics_data=[],
            isolation_level=isolation_level,
        )
        deadline.waiting_for = f"Fetch({topic}-{partition} at {offset}) on node {leader}"
        response = self.client.request(leader, request, deadline, version)
        error = error_for_code(response.error_code)
        if error is not None:
            raise error
        data: FetchResponse.PartitionData = response.responses[0].partitions[0]
        return leader, data

    def _ask_any_broker(self, request: Any, what: str, deadline: Deadline) -> Any:
        node = self.client.brokers(deadline)[0]
        deadline.waiting_for = f"{what} on node {node}"
        return self.client.request(node, request, deadline)

    def _partition_count(self, topic: str, deadline: Deadline) -> int | None:
        """Partitions of ``topic`` once each has a leader; None when the cluster has no such topic
        (judged on metadata fetched after this call began, never on an older snapshot)."""
        metadata = self.client.metadata
        metadata.add_topic(topic)
        fresh = False
        while True:
            parts = metadata.partitions_for(topic)
            if parts and all(p.leader_id >= 0 for p in parts):
                return len(parts)
            error = metadata.topic_error(topic)
            if fresh and isinstance(error, UnknownTopicOrPartitionError):
                return None
            if error is not None and not error.retriable:
                raise error
            self._await_metadata(f"the metadata of topic {topic!r}", deadline)
            fresh = True

    def _await_metadata(self, what: str, deadline: Deadline) -> None:
        """Poll until the metadata is updated once more (bounded by ``deadline``)."""
        metadata = self.client.metadata
        deadline.waiting_for = what
        version = metadata.request_update()
        while metadata.version <= version:
            deadline.check()
            self.client.network.poll(
                max(min(_POLL_MS, deadline.remaining_ms()), 0), self.client.clock.now_ms()
            )
            last = metadata.last_error()
            if last is not None:
                deadline.last_error = last

    def _partition(self, topic: str, partition: int, deadline: Deadline) -> PartitionInfo:
        count = self._partition_count(topic, deadline)
        if count is None:
            raise KafkaError(f"topic {topic!r} does not exist")
        parts: list[PartitionInfo] = self.client.metadata.partitions_for(topic) or []
        info = next((p for p in parts if p.partition == partition), None)
        if info is None:
            raise KafkaError(f"topic {topic!r} has no partition {partition} (it has {count})")
        return info

    def _leader(self, topic: str, partition: int, deadline: Deadline) -> tuple[int, int]:
        """The leader's node id and the leader epoch the metadata knows (-1: unknown)."""
        info = self._partition(topic, partition, deadline)
        node = self.client.metadata.leader_for(topic, partition)
        if node is None:
            self.client.metadata.request_update()
            raise KafkaConnectionError(f"no leader for {topic}-{partition} yet")
        return int(node.node_id), int(info.leader_epoch)

    def transactions_v2(self, topic: str, partition: int) -> bool:
        """Whether a transactional write to ``topic-partition`` runs under Transactions V2 (its
        EndTxn bumps the epoch)."""
        deadline = self._deadline(f"asking the transaction version of {topic}-{partition}")
        leader, _epoch = self._retrying(deadline, lambda: self._leader(topic, partition, deadline))
        return self._retrying(deadline, lambda: self._transactions_v2(leader, deadline))

    def _deadline(self, operation: str, timeout_ms: int | None = None) -> Deadline:
        bound = self.timeout_ms if timeout_ms is None else max(0, min(timeout_ms, self.timeout_ms))
        return Deadline(self.client.clock, bound, operation)

    def _retrying(self, deadline: Deadline, step: Callable[[], T]) -> T:
        attempts = 0
        while True:
            try:
                return step()
            except KafkaError as exc:
                if deadline.is_own(exc) or not exc.retriable:
                    raise
                deadline.last_error = exc
                if exc.invalid_metadata or isinstance(exc, BrokerResponseError):
                    self.client.metadata.request_update()
            self.client.back_off(attempts, deadline)
            attempts += 1


def _behind(topic: str, partition: int, node: int, found: int, wanted: int) -> KafkaError:
    """The retriable error for a leader whose log ends at ``found``, short of ``wanted``."""
    return OffsetNotAvailableError(
        f"node {node} answered for {topic}-{partition} with a log ending at offset {found}, "
        f"below offset {wanted} already seen (a leader that has not caught up)"
    )


def _one_record_batch(key: bytes, value: bytes | None) -> SealedBatch:
    builder = RecordBatchBuilder(
        compression_type=CompressionType.ZSTD, batch_size=max(len(value or b"") * 2, 1 << 16)
    )
    builder.append(int(time.time() * 1000), key, value)
    return builder.seal()
