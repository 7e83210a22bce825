"""Sender: the producer's I/O loop, steppable with ``run_once(now_ms)`` (Java's Sender).

Theory of operation, one ``run_once``:

1. Idempotence bookkeeping: apply a requested epoch bump, re-stamp partitions whose sequences
   were reset, and (when there is no producer id yet) send InitProducerId to the least loaded
   node. Nothing is produced without a producer id when idempotence is on. A transactional
   producer instead fails every incomplete batch on a fatal error, holds an accumulator flush
   while its transaction completes, fails the queued batches never sent while it aborts, and
   sends the next coordinator request through ``producer.txn.coordinator``; its Produce
   requests carry the transactional id (v11 at most under Transactions V1).
2. ``accumulator.ready`` names the leader nodes with sendable data; topics whose leader is
   unknown get a metadata update requested. Nodes that are not connected (the client starts
   connecting) or are at ``max.in.flight.requests.per.connection`` are skipped this round.
3. ``accumulator.drain`` takes one batch per partition per node; batches past
   ``delivery.timeout.ms`` are expired (failed with KafkaTimeoutError).
4. One ProduceRequest per node is sent; then ``network.poll`` does the I/O and completes
   requests, whose callbacks run the response handling below on this thread.

Response handling, per partition: success completes the batch with the broker's base offset;
retriable errors (and disconnects / request timeouts) put the batch back at the head of its
deque with exponential backoff and jitter, as long as ``retries`` and ``delivery.timeout.ms``
allow; invalid-metadata errors request a metadata refresh (and apply Produce v10+ leader hints);
MESSAGE_TOO_LARGE splits a multi-record batch in two (the halves take over its sequence range)
or fails a single record with RecordTooLargeError. INVALID_RECORD (and CORRUPT_MESSAGE) naming
records of a multi-record batch (the response's record_errors) splits it so each named record
travels alone and the others in batches of their own, in record order; the named ones are then
refused alone and fail with the broker's error, the others are written (Java fails the whole
batch instead); INVALID_TIMESTAMP (a record outside the topic's
message.timestamp.before/after.max.ms) is split the same way. INVALID_RECORD or INVALID_TIMESTAMP
without record_errors (an older broker) splits in halves, as
MESSAGE_TOO_LARGE does; a single record named by CORRUPT_MESSAGE fails at once (the broker
validated it: a retry gets the same answer), while CORRUPT_MESSAGE naming no record stays
retriable (damage in transit). Every other error fails only that batch.
With idempotence, a batch that fails for good (expired, retries spent, non-retriable error)
leaves the other batches' sequences alone: the TransactionManager marks its range unresolved
and decides once nothing of the partition is in flight whether an epoch bump is needed, so a
record the broker already holds is never resent under new sequence numbers. Whatever the
outcome of an attempt, its partition is unmuted at the end of its handling (Java's
completeBatch), so ``max.in.flight.requests.per.connection=1`` never stalls a partition.

Metrics (``producer.metrics``): each Produce request's batches are recorded when it is sent,
its latency and throttle time when it is answered, and each batch's outcome (acknowledged,
retried, failed for good, split) where it is decided; ``metrics=None`` records nothing.

The Sender reads the TransactionManager and reports to it through its methods (id and epoch
from InitProducerId, batch outcomes, fatal errors); it never assigns the manager's fields.

Invariants: only this thread touches the network client (other threads only call
``wakeup``); a batch is completed exactly once; a retried batch is resent byte for byte; no
batch is forgotten: each ends acknowledged or failed, also on close (``force_close`` fails
whatever is left) and when this thread crashes (the accumulator is closed, then everything
incomplete is failed, in a loop until nothing is left).
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from kafka_sink.errors import (
    BrokerResponseError,
    CorruptMessageError,
    DuplicateSequenceNumberError,
    FencedLeaderEpochError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    MessageTooLargeError,
    NotLeaderOrFollowerError,
    ProducerClosedError,
    RecordTooLargeError,
    TransactionAbortedError,
    error_for_code,
)
from kafka_sink.net.metadata import ExponentialBackoff, Node
from kafka_sink.net.network_client import ClientRequest, ClientResponse
from kafka_sink.producer.batch import ProducerBatch
from kafka_sink.producer.txn.coordinator import (
    CoordinatorMetadata,
    CoordinatorNetwork,
    TransactionalSender,
)
from kafka_sink.records.batch import RecordBatchBuilder, read_batches
from kafka_sink.wire.messages import InitProducerIdRequest, ProduceRequest, ProduceResponse

if TYPE_CHECKING:
    from kafka_sink.clock import Clock
    from kafka_sink.net.metadata import Cluster
    from kafka_sink.producer.accumulator import RecordAccumulator
    from kafka_sink.producer.metrics import ProducerMetrics
    from kafka_sink.producer.txn.manager import TransactionManager

log = logging.getLogger(__name__)

_MAX_POLL_MS = 1000


class NetworkClientLike(CoordinatorNetwork, Protocol):
    """The NetworkClient surface the sender uses (a fake implements it in unit tests): what
    coordinator requests need, and the produce path's own calls."""

    def in_flight_count(self, node_id: int) -> int: ...
    def last_connect_error(self, node_id: int) -> KafkaError | None: ...
    def poll(self, timeout_ms: int, now_ms: int) -> list[ClientResponse]: ...
    def wakeup(self) -> None: ...
    def close(self) -> None: ...


class MetadataLike(CoordinatorMetadata, Protocol):
    def add_topic(self, topic: str, now_ms: int | None = None) -> bool: ...
    def time_to_next_update(self, now_ms: int) -> int: ...
    def update_leader(
        self, topic: str, partition: int, leader_id: int, leader_epoch: int, node: Node | None = ...
    ) -> bool: ...


class Sender:
    def __init__(
        self,
        *,
        accumulator: RecordAccumulator,
        metadata: MetadataLike,
        network: NetworkClientLike,
        clock: Clock,
        transaction_manager: TransactionManager | None = None,
        acks: int = -1,
        retries: int = 2**31 - 1,
        request_timeout_ms: int = 30000,
        delivery_timeout_ms: int = 120000,
        max_request_size: int = 1048576,
        request_framing: int = 0,
        max_in_flight: int = 5,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        rng: random.Random | None = None,
        metrics: ProducerMetrics | None = None,
    ) -> None:
        self.accumulator = accumulator
        # None records nothing (the benchmarks' A/B switch); the facade always passes one.
        self.metrics = metrics
        self.metadata = metadata
        self.network = network
        self.clock = clock
        self.transaction_manager = transaction_manager
        self.acks = acks
        self.retries = retries
        self.request_timeout_ms = request_timeout_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.max_request_size = max_request_size
        # What every ProduceRequest carries besides its topics (framing.py): counted in drain.
        self.request_framing = request_framing
        self.max_in_flight = max_in_flight
        self.guarantee_message_order = max_in_flight == 1
        self._retry_backoff = ExponentialBackoff(retry_backoff_ms, retry_backoff_max_ms, rng=rng)
        self._retry_backoff_ms = retry_backoff_ms
        self._running = True
        self._forced = False
        self._in_flight_batches: dict[int, list[ProducerBatch]] = {}
        self.fatal_error: KafkaError | None = None
        self.thread_error: BaseException | None = None
        self.stopped = threading.Event()
        # The idempotent producer's InitProducerId (a transactional one's goes through _txn).
        self._init_in_flight = False
        self._init_attempts = 0
        self._next_init_attempt_ms = 0
        self._txn: TransactionalSender | None = None
        # A commit sends everything queued at once (linger.ms does not apply): this run holds
        # one accumulator flush while the transaction is completing.
        self._flushing = False
        if transaction_manager is not None and transaction_manager.is_transactional:
            self._txn = TransactionalSender(
                transaction_manager,
                network,
                metadata,
                retry_backoff_ms=retry_backoff_ms,
                retry_backoff_max_ms=retry_backoff_max_ms,
                rng=rng,
                on_fatal_error=self._on_fatal_error,
            )

    # -- the loop -------------------------------------------------------------------------

    def run(self) -> None:
        """Thread body: run until closed; then drain what is left unless forced."""
        try:
            while self._running:
                self.run_once(self.clock.now_ms())
            if self._txn is not None and not self._forced:
                self._txn.abort_open_transaction_on_close()
            while not self._forced and (
                self.accumulator.has_incomplete()
                or self._has_in_flight()
                or (self._txn is not None and self._txn.has_pending_requests())
            ):
                self.run_once(self.clock.now_ms())
            if self._forced:
                self.abort_incomplete(
                    ProducerClosedError(
                        "the producer was closed before these records could be delivered"
                    )
                )
        except BaseException as exc:  # a bug or a fatal I/O error; never lose records silently
            log.exception("producer sender thread crashed")
            self.thread_error = exc
            error = KafkaError(f"the producer's sender thread stopped: {exc!r}")
            # send() raises this from now on, and nothing queued is left pending.
            self.fatal_error = error
            self.accumulator.close()
            self.abort_incomplete(error)
        finally:
            try:
                self.network.close()
            finally:
                self.stopped.set()

    def initiate_close(self) -> None:
        self._running = False
        self.accumulator.close()
        self.network.wakeup()

    def force_close(self) -> None:
        self._forced = True
        self.initiate_close()

    def wakeup(self) -> None:
        self.network.wakeup()

    def _has_in_flight(self) -> bool:
        return any(self._in_flight_batches.values())

    def run_once(self, now_ms: int) -> None:
        poll_timeout = _MAX_POLL_MS
        tm = self.transaction_manager
        if self._txn is not None:
            poll_timeout = min(poll_timeout, self._run_transactional(self._txn, now_ms))
        elif tm is not None:
            poll_timeout = min(poll_timeout, self._maybe_init_producer_id(tm, now_ms))
        poll_timeout = min(poll_timeout, self._send_producer_data(now_ms))
        if self._txn is not None and self._txn.wants_run_now():
            poll_timeout = 0  # a partition of the transaction waits for AddPartitionsToTxn
        self.network.poll(max(poll_timeout, 0), now_ms)

    def _on_fatal_error(self, error: KafkaError) -> None:
        """The transaction coordinator's answer ended the producer: send() raises ``error``."""
        self.fatal_error = error

    # -- transactions ---------------------------------------------------------------------

    def _run_transactional(self, txn: TransactionalSender, now_ms: int) -> int:
        """The transactional work of one run (Java's maybeSendAndPollTransactionalRequest);
        returns the longest the poll may wait.

        A fatal error fails every incomplete batch. While a transaction is aborting or has an
        abortable error, the queued batches never sent fail (TransactionAbortedError); batches
        in flight or queued for a retry are left to finish, since whether the broker wrote them
        is not known yet. Then the next coordinator request goes out.
        """
        tm = txn.tm
        fatal = tm.fatal_error
        if fatal is not None:
            if self.fatal_error is None:
                self.fatal_error = fatal
            if self.accumulator.has_incomplete():
                self.abort_incomplete(fatal)
            return _MAX_POLL_MS
        tm.maybe_resolve_sequences()
        completing = tm.is_completing()
        if completing != self._flushing:
            if completing:
                self.accumulator.begin_flush()
            else:
                self.accumulator.end_flush()
            self._flushing = completing
        if tm.has_abortable_error() or tm.is_aborting():
            self._abort_undrained(tm)
        return txn.send_next_request(now_ms, self.accumulator.has_incomplete())

    def _abort_undrained(self, tm: TransactionManager) -> None:
        dropped = self.accumulator.abort_undrained_unsequenced()
        if not dropped:
            return
        cause = tm.last_error
        reason = f": {cause}" if cause is not None else ""
        for batch in dropped:
            error = TransactionAbortedError(
                f"{batch.record_count} record(s) for {batch.topic}-{batch.partition} were not "
                f"sent: their transaction ({tm.describe_id()}) is being aborted{reason}"
            )
            error.__cause__ = cause
            self.fail_batch(batch, error)

    # -- idempotence ----------------------------------------------------------------------

    def _maybe_init_producer_id(self, tm: TransactionManager, now_ms: int) -> int:
        if tm.fatal_error is not None:
            return _MAX_POLL_MS
        tm.maybe_resolve_sequences()
        if not tm.bump_idempotent_epoch_and_reset_id_if_needed():
            for tp in tm.start_sequences_at_beginning_if_ready():
                log.info(
                    "producer epoch %d: %s-%d re-sequenced from 0", tm.producer_epoch, tp[0], tp[1]
                )
            return _MAX_POLL_MS
        if self._init_in_flight:
            return _MAX_POLL_MS
        if now_ms < self._next_init_attempt_ms:
            return self._next_init_attempt_ms - now_ms
        node_id = self.network.least_loaded_node(now_ms)
        if node_id is None:
            return self._retry_backoff_ms
        if not self.network.ready(node_id, now_ms):
            return max(min(self.network.connection_delay(node_id, now_ms), _MAX_POLL_MS), 1)
        request = InitProducerIdRequest(
            transactional_id=None,
            transaction_timeout_ms=2147483647,
            producer_id=tm.producer_id,
            producer_epoch=tm.producer_epoch,
        )
        self._init_in_flight = True

        def on_response(response: ClientResponse) -> None:
            self._handle_init_producer_id(tm, response)

        self.network.send(ClientRequest(node_id, request, None, now_ms, on_response), now_ms)
        return 0

    def _handle_init_producer_id(self, tm: TransactionManager, response: ClientResponse) -> None:
        self._init_in_flight = False
        now_ms = response.received_ms
        body = response.response
        error: KafkaError | None
        if body is None:
            error = response.error or KafkaConnectionError(
                "disconnected while initializing the producer id"
            )
        else:
            error = error_for_code(body.error_code)
            if error is None:
                self._init_attempts = 0
                tm.set_producer_id_and_epoch(body.producer_id, body.producer_epoch)
                log.debug("producer id %d epoch %d", body.producer_id, body.producer_epoch)
                return
        self._init_attempts += 1
        if error.retriable or body is None:
            self._next_init_attempt_ms = now_ms + self._retry_backoff.backoff_ms(
                self._init_attempts - 1
            )
            if error.invalid_metadata:
                self.metadata.request_update()
            return
        # Fatal for the producer (e.g. CLUSTER_AUTHORIZATION_FAILED): fail everything queued.
        tm.transition_to_fatal_error(error)
        self.fatal_error = error
        log.error("InitProducerId failed, the idempotent producer cannot send: %s", error)
        self.abort_incomplete(error)

    # -- produce --------------------------------------------------------------------------

    def _send_producer_data(self, now_ms: int) -> int:
        cluster = self.metadata.fetch()
        acc = self.accumulator
        result = acc.ready(cluster, now_ms)
        if result.unknown_leader_topics:
            for topic in result.unknown_leader_topics:
                self.metadata.add_topic(topic, now_ms)
            self.metadata.request_update()
        poll_timeout = result.next_ready_check_delay_ms
        ready_nodes: list[int] = []
        for node_id in result.ready_nodes:
            if not self.network.ready(node_id, now_ms):
                poll_timeout = min(poll_timeout, self.network.connection_delay(node_id, now_ms))
                continue
            if self.network.in_flight_count(node_id) >= self.max_in_flight:
                continue
            ready_nodes.append(node_id)

        tm = self.transaction_manager
        if tm is not None and (not tm.has_producer_id() or tm.fatal_error is not None):
            ready_nodes = []
        drained = (
            acc.drain(
                cluster,
                ready_nodes,
                self.max_request_size,
                now_ms,
                tm,
                request_framing=self.request_framing,
            )
            if ready_nodes
            else {}
        )
        if self.guarantee_message_order:
            for batches in drained.values():
                for batch in batches:
                    acc.mute(batch.tp)

        expired = acc.expired_batches(now_ms)
        for batch in expired:
            self.fail_batch(
                batch,
                KafkaTimeoutError(
                    f"Expiring {batch.record_count} record(s) for {batch.topic}-"
                    f"{batch.partition}: {now_ms - batch.created_ms} ms has passed since batch "
                    f"creation (delivery.timeout.ms={self.delivery_timeout_ms}); "
                    + self._why_not_sent(batch, cluster)
                ),
            )
        if expired and tm is not None:
            poll_timeout = 0  # settle the sequences the expired batches left unresolved
        next_expiry = acc.next_expiry_ms()
        if next_expiry is not None:
            poll_timeout = min(poll_timeout, max(next_expiry - now_ms, 0))

        for node_id, batches in drained.items():
            self._send_produce_request(node_id, batches, now_ms)
        if drained:
            poll_timeout = 0
        if result.unknown_leader_topics:
            poll_timeout = min(
                poll_timeout, max(self.metadata.time_to_next_update(now_ms), self._retry_backoff_ms)
            )
        return poll_timeout

    def _why_not_sent(self, batch: ProducerBatch, cluster: Cluster) -> str:
        if batch.attempts:
            return f"{batch.attempts} attempt(s) failed; last error: {batch.last_error}"
        if cluster.leader_for(batch.topic, batch.partition) is None:
            return "the partition's leader was never known (topic missing or brokers unreachable)"
        tm = self.transaction_manager
        if tm is not None and not tm.has_producer_id():
            return "no producer id could be obtained (brokers unreachable?)"
        leader = cluster.leader_for(batch.topic, batch.partition)
        error = None if leader is None else self.network.last_connect_error(leader.node_id)
        if error is not None:
            # Say why (a refused SASL token or TLS handshake, an unreachable address): the
            # connection failures themselves are only logged.
            return f"the leader could not be reached: {error}"
        return "the leader could not be reached"

    def _send_produce_request(
        self, node_id: int, batches: list[ProducerBatch], now_ms: int
    ) -> None:
        by_topic: dict[str, list[ProduceRequest.PartitionProduceData]] = {}
        batch_map: dict[tuple[str, int], ProducerBatch] = {}
        for batch in batches:
            try:
                records = batch.encode()
            except Exception as exc:  # a codec failure fails only this batch
                self.fail_batch(batch, KafkaError(f"could not encode the batch: {exc!r}"))
                if self.guarantee_message_order:
                    self.accumulator.unmute(batch.tp)
                continue
            by_topic.setdefault(batch.topic, []).append(
                ProduceRequest.PartitionProduceData(batch.partition, records)
            )
            batch_map[batch.tp] = batch
        if not batch_map:
            return
        version = None
        tm = self.transaction_manager
        transactional_id = None
        if self._txn is not None and tm is not None:
            transactional_id = tm.transactional_id
            version = self._txn.produce_version(node_id)
        request = ProduceRequest(
            transactional_id=transactional_id,
            acks=self.acks,
            timeout_ms=self.request_timeout_ms,
            topic_data=[
                ProduceRequest.TopicProduceData(topic, parts) for topic, parts in by_topic.items()
            ],
        )
        in_flight = self._in_flight_batches.setdefault(node_id, [])
        in_flight.extend(batch_map.values())
        if self.metrics is not None:
            self.metrics.record_sent(node_id, batch_map.values(), now_ms)

        def on_response(response: ClientResponse) -> None:
            self._handle_produce_response(node_id, batch_map, response)

        client_request = ClientRequest(
            node_id, request, version, now_ms, on_response, expect_response=self.acks != 0
        )
        try:
            self.network.send(client_request, now_ms)
        except KafkaError as exc:
            log.debug("send to node %d failed: %s", node_id, exc)
            self._handle_produce_response(
                node_id,
                batch_map,
                ClientResponse(client_request, None, True, False, exc, now_ms),
            )

    def _handle_produce_response(
        self,
        node_id: int,
        batch_map: dict[tuple[str, int], ProducerBatch],
        response: ClientResponse,
    ) -> None:
        now_ms = response.received_ms
        if self.metrics is not None:
            self.metrics.record_completed()
        in_flight = self._in_flight_batches.get(node_id)
        if in_flight:
            ids = {id(b) for b in batch_map.values()}
            in_flight[:] = [b for b in in_flight if id(b) not in ids]
        for batch in batch_map.values():
            batch.in_request = False
        body = response.response
        if response.disconnected or response.timed_out or (body is None and self.acks != 0):
            if response.error is not None:
                error: KafkaError = response.error
            elif response.timed_out:
                error = KafkaTimeoutError(
                    f"produce request to node {node_id} timed out after "
                    f"request.timeout.ms={self.request_timeout_ms}"
                )
            else:
                error = KafkaConnectionError(f"disconnected from node {node_id}")
            self.metadata.request_update()
            for batch in batch_map.values():
                self._complete_batch_error(batch, error, now_ms, None, None)
            return
        if body is None:  # acks=0: done once written; the broker says nothing
            for batch in batch_map.values():
                self._complete_batch(batch, -1, -1)
            return
        assert isinstance(body, ProduceResponse)
        if self.metrics is not None:
            self.metrics.record_answered(
                node_id, response.request_latency_ms, body.throttle_time_ms, now_ms
            )
        remaining = dict(batch_map)
        acked: list[tuple[ProducerBatch, int, int]] = []
        for topic_response in body.responses:
            for p in topic_response.partition_responses:
                batch = remaining.pop((topic_response.name, p.index), None)  # type: ignore[arg-type]
                if batch is None:
                    continue
                if p.error_code == 0:
                    acked.append((batch, p.base_offset, p.log_append_time_ms))
                    continue
                message = p.error_message
                if p.record_errors:
                    details = "; ".join(
                        f"record {e.batch_index}: {e.batch_index_error_message}"
                        for e in p.record_errors[:5]
                    )
                    message = f"{message or ''} ({details})".strip()
                err = error_for_code(p.error_code, message)
                assert err is not None
                self._complete_batch_error(batch, err, now_ms, p, body)
        if acked:
            if self.metrics is not None:
                # Counted for the whole response at once, and before any batch completes: a
                # caller woken by its batch (flush) finds it in metrics_snapshot().
                self.metrics.record_acked_many([b for b, _, _ in acked if not b.is_done()])
            for batch, base_offset, log_append_ms in acked:
                self._complete_batch(batch, base_offset, log_append_ms, counted=True)
        for batch in remaining.values():
            self._complete_batch_error(
                batch,
                KafkaConnectionError(
                    f"node {node_id} answered without a result for {batch.topic}-{batch.partition}"
                ),
                now_ms,
                None,
                None,
            )

    # -- completion -----------------------------------------------------------------------

    def _complete_batch(
        self, batch: ProducerBatch, base_offset: int, log_append_ms: int, *, counted: bool = False
    ) -> None:
        """Complete an acknowledged batch; ``counted``: its ack is in the metrics already."""
        tm = self.transaction_manager
        if tm is not None:
            tm.handle_completed_batch(batch)
        if not counted and self.metrics is not None and not batch.is_done():
            self.metrics.record_acked_many((batch,))  # before done() wakes a waiter
        if batch.done(base_offset, log_append_ms, None):
            self.accumulator.deallocate(batch)
        if self.guarantee_message_order:
            self.accumulator.unmute(batch.tp)

    def fail_batch(self, batch: ProducerBatch, error: BaseException) -> None:
        """Fail ``batch`` for good. Its partition stays muted if it was: a batch failed while
        in a request is unmuted by its response handling, a queued one was never muted."""
        tm = self.transaction_manager
        if tm is not None:
            tm.handle_failed_batch(batch, error)
        batch.in_request = False
        if batch.done(-1, -1, error) and self.metrics is not None:
            self.metrics.record_error(batch, self.clock.now_ms())
        # Also when it was completed elsewhere: a done batch must not stay incomplete.
        self.accumulator.deallocate(batch)

    def _complete_batch_error(
        self,
        batch: ProducerBatch,
        error: KafkaError,
        now_ms: int,
        partition_response: ProduceResponse.PartitionProduceResponse | None,
        body: ProduceResponse | None,
    ) -> None:
        """Handle a failed attempt: split, retry or fail; then unmute the partition on every
        path (Java's completeBatch), so max.in.flight.requests.per.connection=1 never stalls."""
        try:
            self._handle_batch_error(batch, error, now_ms, partition_response, body)
        finally:
            if self.guarantee_message_order:
                self.accumulator.unmute(batch.tp)

    def _handle_batch_error(
        self,
        batch: ProducerBatch,
        error: KafkaError,
        now_ms: int,
        partition_response: ProduceResponse.PartitionProduceResponse | None,
        body: ProduceResponse | None,
    ) -> None:
        if batch.is_done():
            return  # already failed by close(); nothing more to do
        tm = self.transaction_manager
        if isinstance(error, DuplicateSequenceNumberError) and tm is not None:
            self._complete_batch(batch, -1, -1)
            return
        if (
            isinstance(error, MessageTooLargeError)
            and batch.record_count > 1
            and self._split_and_reenqueue(batch, now_ms)
        ):
            return
        if isinstance(error, InvalidRecordError | InvalidTimestampError | CorruptMessageError):
            named = _named_records(batch, partition_response)
            halves = isinstance(error, InvalidRecordError | InvalidTimestampError)
            if batch.record_count > 1 and (named or halves):
                counts = _isolating_counts(batch.record_count, named) if named else None
                if self._split_and_reenqueue(batch, now_ms, counts, reason=error):
                    return
            if named:
                # The broker validated the record and refused it: the same bytes get the same
                # answer, so a CORRUPT_MESSAGE naming it is not retried.
                self.fail_batch(batch, error)
                return
        if isinstance(error, MessageTooLargeError):
            error = RecordTooLargeError(
                f"{batch.topic}-{batch.partition}: the broker rejected a batch of "
                f"{batch.record_count} record(s) ({batch.estimated_size_bytes()} bytes) as too "
                "large (MESSAGE_TOO_LARGE): the record exceeds the topic's max.message.bytes "
                "or the broker's message.max.bytes"
            )
            error.__cause__ = None
        if self._can_retry(batch, error, now_ms):
            if error.invalid_metadata:
                self._apply_leader_hint(batch, error, partition_response, body)
                self.metadata.request_update()
            log.debug("retrying %r after %s", batch, error)
            batch.last_error = error
            self._reenqueue(batch, now_ms)
            if self.metrics is not None:
                self.metrics.record_retry(batch, now_ms)
            return
        if error.retriable and now_ms - batch.created_ms >= self.delivery_timeout_ms:
            timeout = KafkaTimeoutError(
                f"Expiring {batch.record_count} record(s) for {batch.topic}-{batch.partition}: "
                f"delivery.timeout.ms={self.delivery_timeout_ms} passed after "
                f"{batch.attempts + 1} attempt(s); last error: {error}"
            )
            timeout.__cause__ = error
            self.fail_batch(batch, timeout)
            return
        if (
            isinstance(error, InvalidProducerEpochError)
            and tm is not None
            and not tm.is_transactional
        ):
            tm.request_epoch_bump_for_partition(batch.tp)
        self.fail_batch(batch, error)

    def _can_retry(self, batch: ProducerBatch, error: KafkaError, now_ms: int) -> bool:
        if now_ms - batch.created_ms >= self.delivery_timeout_ms:
            return False
        if batch.attempts >= self.retries:
            return False
        if self.accumulator.closed and self._forced:
            return False
        tm = self.transaction_manager
        if tm is not None:
            return tm.can_retry(batch, error)
        return bool(error.retriable)

    def _reenqueue(self, batch: ProducerBatch, now_ms: int) -> None:
        backoff = self._retry_backoff.backoff_ms(batch.attempts)
        self.accumulator.reenqueue(batch, now_ms, backoff)

    def _apply_leader_hint(
        self,
        batch: ProducerBatch,
        error: KafkaError,
        partition_response: ProduceResponse.PartitionProduceResponse | None,
        body: ProduceResponse | None,
    ) -> None:
        if partition_response is None or body is None:
            return
        if not isinstance(error, NotLeaderOrFollowerError | FencedLeaderEpochError):
            return
        leader = partition_response.current_leader
        if leader is None or leader.leader_id < 0 or leader.leader_epoch < 0:
            return
        node = None
        for endpoint in body.node_endpoints or ():
            if endpoint.node_id == leader.leader_id:
                node = Node(endpoint.node_id, endpoint.host, endpoint.port, endpoint.rack)
        self.metadata.update_leader(
            batch.topic, batch.partition, leader.leader_id, leader.leader_epoch, node
        )

    def _split_and_reenqueue(
        self,
        batch: ProducerBatch,
        now_ms: int,
        counts: list[int] | None = None,
        reason: KafkaError | None = None,
    ) -> bool:
        """Java's split of an oversized batch: re-batch its records in parts, keep futures.

        ``counts``: the records of each part, in record order (default: two halves). The
        broker refused the whole batch, so nothing of it was written and the parts take over
        its sequence range in order. Each new batch completes the original batch's result when
        all are done (with the first error, for flush); the futures handed out by send() and
        the bulk future resolve through the parts, each record to the outcome and offset of the
        part that carried it. A split is not a retry: the parts keep the attempts and go to the
        head of the queue at once. Returns False if splitting is not possible (then the batch
        fails).
        """
        try:
            encoded = batch.encode()
            records = [r for b in read_batches(encoded, verify_crc=False) for r in b.records]
        except Exception:
            return False
        if len(records) < 2:
            return False
        sealed = batch.sealed
        assert sealed is not None
        if counts is None:
            half = max((len(records) + 1) // 2, 1)
            counts = [half, len(records) - half]
        if sum(counts) != len(records) or len(counts) < 2 or min(counts) < 1:
            return False
        parts = []
        start = 0
        for count in counts:
            parts.append(records[start : start + count])
            start += count
        new_batches: list[ProducerBatch] = []
        for part in parts:
            builder = RecordBatchBuilder(
                compression_type=sealed.compression_type,
                compression_level=self.accumulator.compression_level,
                batch_size=2**31 - 1,
            )
            for rec in part:
                builder.append(rec.timestamp_ms, rec.key, rec.value, rec.headers)
            child = ProducerBatch(
                batch.topic, batch.partition, batch.created_ms, sealed=builder.seal()
            )
            new_batches.append(child)
        tm = self.transaction_manager
        if tm is not None and batch.has_sequence:
            tm.replace_split(batch, new_batches)
        # Before any part can complete: record futures resolve through the parts.
        starts = [sum(counts[:i]) for i in range(len(counts))]
        batch.result.set_parts(
            [(start, child.result) for start, child in zip(starts, new_batches, strict=True)]
        )
        _chain_split(batch, new_batches, starts)
        batch.result.add_done_callback(lambda _r: self.accumulator.deallocate(batch))
        for child in reversed(new_batches):
            child.attempts = batch.attempts
            self.accumulator.reenqueue_split(child, batch, now_ms)
        if self.metrics is not None:
            self.metrics.record_split(now_ms)
        log.info(
            "split a batch of %d records for %s-%d into %d after %s",
            len(records),
            batch.topic,
            batch.partition,
            len(new_batches),
            "MESSAGE_TOO_LARGE" if reason is None else reason,
        )
        return True

    # -- abort ----------------------------------------------------------------------------

    def abort_incomplete(self, error: BaseException) -> None:
        """Fail every batch not yet completed (queued or in flight), again and again until
        none is left: a batch opened meanwhile (before the accumulator refused appends) is
        failed as well, never left pending."""
        acc = self.accumulator
        while True:
            batches = acc.undrained_batches()
            batches.extend(acc.incomplete_batches())
            if not batches:
                break
            for batch in batches:
                self.fail_batch(batch, error)
        self._in_flight_batches.clear()


def _named_records(
    batch: ProducerBatch, response: ProduceResponse.PartitionProduceResponse | None
) -> list[int]:
    """The batch's records the broker named in ``record_errors`` (ascending, in range)."""
    if response is None or not response.record_errors:
        return []
    n = batch.record_count
    return sorted({e.batch_index for e in response.record_errors if 0 <= e.batch_index < n})


def _isolating_counts(record_count: int, named: list[int]) -> list[int]:
    """Part sizes, in record order, that put each named record alone and the runs of records
    between them together: 5 records naming [2] -> [2, 1, 2]."""
    counts: list[int] = []
    start = 0
    for index in named:
        if index > start:
            counts.append(index - start)
        counts.append(1)
        start = index + 1
    if start < record_count:
        counts.append(record_count - start)
    return counts


def _chain_split(parent: ProducerBatch, children: list[ProducerBatch], starts: list[int]) -> None:
    """Complete ``parent`` from its split children: base offset, first error (in record
    order). ``starts``: each child's first record's delta in the parent."""
    state: dict[str, Any] = {"left": len(children), "bases": {}, "errors": {}}
    lock = threading.Lock()

    def on_child(index: int) -> Callable[[Any], None]:
        def done(result: Any) -> None:
            with lock:
                if result.error is not None:
                    state["errors"][index] = result.error
                if result.base_offset >= 0:
                    state["bases"][index] = result.base_offset - starts[index]
                state["left"] -= 1
                finished = state["left"] == 0
            if finished:
                # The first written part's base, as if the records had stayed together (each
                # record's own offset comes from its part: ProduceRequestResult.record_result).
                errors, bases = state["errors"], state["bases"]
                error = errors[min(errors)] if errors else None
                parent.done(bases[min(bases)] if bases else -1, -1, error)

        return done

    for i, child in enumerate(children):
        child.result.add_done_callback(on_child(i))


__all__ = ["BrokerResponseError", "Sender"]
