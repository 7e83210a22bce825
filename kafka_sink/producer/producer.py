"""KafkaProducer: the public facade (Java's KafkaProducer) and the bulk path for columns.

Role: validates the config, wires Metadata + NetworkClient + RecordAccumulator + Sender (+ the
TransactionManager for idempotence) and starts the sender thread. ``send()`` partitions a record
and appends it to the accumulator (a keyed bytes record with nothing else set, no plugins and no
transaction goes straight to its partition's open batch when that has room: the same bytes,
future and errors as the general path, without its branches); ``send_columns()`` hands whole
Arrow columns to the bulk path (``producer.bulk``), which partitions them with numpy, seals them
into record batches and queues each batch as it is sealed, returning one BulkSendFuture with
per-partition offsets instead of a future per record. Configured plugins (``producer.plugins``)
sit in front, in Java's order: interceptors' ``on_send`` -> serializers -> partitioner
(``partitioner.class`` replaces the built-in one for records without an explicit partition);
``send_columns()`` runs the per-record part through ``producer.bulk_plugins`` only when
interceptors or serializers are configured.

Invariants:
- ``send()`` blocks only for metadata of a new topic and for buffer memory, each bounded by
  ``max.block.ms``; then it raises (KafkaTimeoutError / BufferExhaustedError) with a message
  saying why. It never blocks on the network otherwise. ``send_columns()`` blocks the same way,
  with ``max.block.ms`` bounding each batch's wait for memory; a call that fails after queueing
  part of its rows says so on the exception (``queued_future``).
- Every record accepted by ``send()``/``send_columns()`` ends acknowledged or failed on its
  future, including on ``close(timeout)``: whatever cannot be delivered in time is failed, never
  dropped and never left pending.
- The producer layer never touches sockets; all I/O is the sender thread's network client.
- With ``transactional.id`` (Java's transactional API: ``init_transactions``,
  ``begin_transaction``, ``commit_transaction``, ``abort_transaction``, and
  ``prepare_transaction`` for a transaction another process ends), ``send()`` and
  ``send_columns()`` are refused outside a transaction and after a transaction error; every
  transactional call waits at most its ``timeout`` (seconds) or ``max.block.ms``, and repeating a
  call that timed out resumes the same wait.
- A serializer failure raises SerializationError with nothing queued. With interceptors, every
  record that went through ``on_send`` gets exactly one ``on_acknowledgement`` (before the
  caller's callback), whether it fails inside ``send()``, fails in delivery or is acknowledged;
  interceptors and the custom partitioner are closed by ``close()`` after the sender stopped.
- A topic stays in metadata requests while it is used and is dropped after
  ``metadata.max.idle.ms`` without use (Java's rule). "Used" is marked on every
  ``send_columns()``/``partitions_for()`` call and whenever ``send()`` opens a new batch for the
  topic (not on every ``send()``: that would take the metadata lock per record); an open batch
  is drained within ``linger.ms`` once its leader is reachable, and the sender re-adds a topic
  it holds records for, so a topic in use is never lost.
- Metrics (``producer.metrics``, docs/metrics.md): ``metrics()`` under the Java client's names;
  the sender records per request and per batch outcome, this facade the ``*-time-ns-total``
  sums of its blocking calls, nothing per record; ``metrics_snapshot()`` copies cumulative
  counters; ``metrics.reporter`` is told of every metric and closed with the producer.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from kafka_sink.clock import SYSTEM_CLOCK, Clock
from kafka_sink.errors import (
    IllegalStateError,
    InvalidTopicError,
    KafkaError,
    KafkaTimeoutError,
    ProducerClosedError,
    RecordTooLargeError,
    TopicAuthorizationFailedError,
)
from kafka_sink.net.metadata import Metadata, PartitionInfo
from kafka_sink.net.network_client import NetworkClient
from kafka_sink.net.presets import apply_preset
from kafka_sink.prepared import PreparedTransaction
from kafka_sink.producer.accumulator import RecordAccumulator
from kafka_sink.producer.bulk import BulkAppender, bulk_columns
from kafka_sink.producer.bulk_plugins import intercept_and_serialize
from kafka_sink.producer.config import ProducerConfig
from kafka_sink.producer.framing import PARTITION_FRAMING, request_framing, topic_framing
from kafka_sink.producer.futures import (
    BulkSendFuture,
    Callback,
    FutureRecordMetadata,
    PartitionOffsets,
    RecordMetadata,
)
from kafka_sink.producer.interceptors import (
    BulkAcknowledgements,
    ProducerInterceptors,
    ProducerRecord,
)
from kafka_sink.producer.metrics import (
    KafkaMetric,
    MetricConfig,
    MetricName,
    ProducerMetrics,
    ProducerMetricsSnapshot,
)
from kafka_sink.producer.partitioner import BuiltInPartitioner, partitions_with_leader
from kafka_sink.producer.plugins import (
    METRIC_REPORTERS_KEY,
    METRICS_REPORTER_KEY,
    CustomPartitioner,
    Serializer,
    load_interceptors,
    load_metrics_reporter,
    load_partitioner,
    load_serializer,
)
from kafka_sink.producer.sender import Sender
from kafka_sink.producer.txn.manager import TransactionManager
from kafka_sink.records.batch import BATCH_HEADER_SIZE, as_bytes, estimate_record_size
from kafka_sink.records.compression import CompressionType
from kafka_sink.records.murmur2 import murmur2_unsigned, partition_for_key

if TYPE_CHECKING:
    from kafka_sink.producer.txn.requests import TransactionalRequestResult

log = logging.getLogger(__name__)

__all__ = [
    "BulkSendFuture",
    "FutureRecordMetadata",
    "KafkaProducer",
    "PartitionOffsets",
    "ProducerRecord",
    "RecordMetadata",
]

_producer_ids = iter(range(1, 2**62))
_producer_ids_lock = threading.Lock()
_SNAPSHOT_EVERY = 1024


# Per-record bytes beyond key and value, as an upper bound (the builder's varint overhead).
_RECORD_OVERHEAD = 21 + 10
# A topic's entry in a ProduceRequest, at Kafka's longest topic name (249 characters, ASCII),
# and one partition's: records below the fast path's threshold fit a request however named.
_LONGEST_TOPIC_FRAMING = topic_framing("t" * 249) + PARTITION_FRAMING


def _as_headers(headers: object) -> list[tuple[str, bytes | None]]:
    if isinstance(headers, Mapping):
        items: Any = headers.items()
    elif isinstance(headers, list | tuple):
        items = headers
    else:
        raise TypeError("headers must be a list of (str, bytes | None) pairs or a mapping")
    out: list[tuple[str, bytes | None]] = []
    for item in items:
        try:
            name, value = item
        except (TypeError, ValueError):
            raise TypeError(f"a header must be a (str, bytes | None) pair, got {item!r}") from None
        if not isinstance(name, str):
            raise TypeError(f"header names must be str, got {type(name).__name__}")
        out.append((name, None if value is None else as_bytes(f"header {name!r}", value)))
    return out


class KafkaProducer:
    """A thread-safe Kafka producer with Java 4.x semantics and defaults.

    ``KafkaProducer({"bootstrap.servers": "host:9092", ...})``; keys are Kafka's dotted producer
    config names (values may be strings). See :class:`ProducerConfig`. ``preset`` names a
    managed service (``msk-iam``, ``confluent-cloud``, ``event-hubs``, ``google``) whose
    settings fill in what ``config`` leaves out and whose limits it must keep
    (:mod:`kafka_sink.net.presets`).
    """

    def __init__(
        self,
        config: Mapping[str, object],
        *,
        clock: Clock | None = None,
        preset: str | None = None,
    ) -> None:
        if preset is not None:
            # A managed service's settings fill in what ``config`` leaves out (net/presets.py).
            config = apply_preset(preset, config)
        self.config = cfg = ProducerConfig.from_mapping(config)
        self._clock = clock or SYSTEM_CLOCK
        # Plugins are instantiated first: a failing constructor leaves no thread or socket.
        self._key_serializer: Serializer | None = (
            None
            if cfg.key_serializer is None
            else load_serializer("key.serializer", cfg.key_serializer)
        )
        self._value_serializer: Serializer | None = (
            None
            if cfg.value_serializer is None
            else load_serializer("value.serializer", cfg.value_serializer)
        )
        self._custom_partitioner: CustomPartitioner | None = (
            None if cfg.partitioner_class is None else load_partitioner(cfg.partitioner_class)
        )
        self._interceptors: ProducerInterceptors | None = (
            ProducerInterceptors(load_interceptors(cfg.interceptor_classes))
            if cfg.interceptor_classes
            else None
        )
        self._metrics = ProducerMetrics(
            MetricConfig(cfg.metrics_num_samples, cfg.metrics_sample_window_ms),
            self._clock,
            reporters=[
                load_metrics_reporter(spec, key)
                for key, specs in (
                    (METRICS_REPORTER_KEY, (cfg.metrics_reporter,) if cfg.metrics_reporter else ()),
                    (METRIC_REPORTERS_KEY, cfg.metric_reporters),
                )
                for spec in specs
            ],
            # Real time in nanoseconds, or the test's clock (milliseconds) scaled.
            nanos=time.perf_counter_ns if clock is None else None,
        )
        # Records go through the per-record plugin stage (interceptors, serializers) first.
        self._plugged = (
            self._interceptors is not None
            or self._key_serializer is not None
            or self._value_serializer is not None
        )
        if cfg.client_id:
            self.client_id = cfg.client_id
        elif cfg.transactional_id is not None:
            self.client_id = f"producer-{cfg.transactional_id}"
        else:
            with _producer_ids_lock:
                self.client_id = f"producer-{next(_producer_ids)}"
        self._metadata = Metadata(
            metadata_max_age_ms=cfg.metadata_max_age_ms,
            metadata_max_idle_ms=cfg.metadata_max_idle_ms,
            retry_backoff_ms=cfg.retry_backoff_ms,
            retry_backoff_max_ms=cfg.retry_backoff_max_ms,
        )
        network_config = cfg.network_config(
            self.client_id,
            max_in_flight=cfg.max_in_flight,
            # Java's producer metadata asks brokers to auto-create topics (if they allow it).
            allow_auto_topic_creation=True,
        )
        self._network = NetworkClient(network_config, self._metadata, self._clock)
        self._accumulator = RecordAccumulator(
            clock=self._clock,
            batch_size=cfg.batch_size,
            linger_ms=cfg.linger_ms,
            buffer_memory=cfg.buffer_memory,
            delivery_timeout_ms=cfg.delivery_timeout_ms,
            compression_type=CompressionType.from_name(cfg.compression_type),
            compression_level=cfg.compression_level,
            wakeup=self._network.wakeup,
        )
        self._transaction_manager = (
            TransactionManager(
                cfg.transactional_id, transaction_timeout_ms=cfg.transaction_timeout_ms
            )
            if cfg.enable_idempotence
            else None
        )
        # Sends are checked against the transaction state (None: not transactional).
        self._txn: TransactionManager | None = (
            self._transaction_manager if cfg.transactional_id is not None else None
        )
        # max.request.size bounds the whole request, its framing included (framing.py).
        self._request_framing = request_framing(self.client_id, cfg.transactional_id)
        self._sender = Sender(
            accumulator=self._accumulator,
            metadata=self._metadata,
            network=self._network,
            clock=self._clock,
            transaction_manager=self._transaction_manager,
            acks=cfg.acks,
            retries=cfg.retries,
            request_timeout_ms=cfg.request_timeout_ms,
            delivery_timeout_ms=cfg.delivery_timeout_ms,
            max_request_size=cfg.max_request_size,
            request_framing=self._request_framing,
            max_in_flight=cfg.max_in_flight,
            retry_backoff_ms=cfg.retry_backoff_ms,
            retry_backoff_max_ms=cfg.retry_backoff_max_ms,
            metrics=self._metrics,
        )
        self._accumulator.metrics = self._metrics
        self._register_gauges()
        self._partitioner = BuiltInPartitioner(self._accumulator.batch_size)
        self._ignore_keys = cfg.partitioner_ignore_keys
        self._max_block_ms = cfg.max_block_ms
        # Records above this many key+value bytes get the exact size check.
        self._size_check_threshold = (
            min(
                cfg.max_request_size - self._request_framing - _LONGEST_TOPIC_FRAMING,
                cfg.buffer_memory,
            )
            - BATCH_HEADER_SIZE
            - _RECORD_OVERHEAD
        )
        self._bulk = BulkAppender(
            accumulator=self._accumulator,
            partitioner=self._partitioner,
            clock=self._clock,
            max_block_ms=cfg.max_block_ms,
            max_request_size=cfg.max_request_size,
            request_framing=self._request_framing,
            ignore_keys=cfg.partitioner_ignore_keys,
            wakeup=self._network.wakeup,
            custom_partitioner=self._custom_partitioner,
        )
        self._closed = False
        self._close_lock = threading.Lock()
        self._append = self._accumulator.append
        self._try_append_to_open = self._accumulator.try_append_to_open
        # send()'s fast path: keyed records partitioned by murmur2, nothing between send() and
        # the accumulator (no plugins, no custom partitioner, no transaction state to check).
        self._keyed_fast_path = (
            not self._plugged
            and self._custom_partitioner is None
            and not self._ignore_keys
            and self._txn is None
        )
        self._wall_ms = self._clock.wall_ms
        self._cluster = self._metadata.fetch()
        self._sends_since_snapshot = 0
        self._network.bootstrap(self._clock.now_ms())
        self._thread = threading.Thread(
            target=self._sender.run,
            name=f"kafka-producer-network-thread | {self.client_id}",
            daemon=True,
        )
        self._thread.start()

    # -- metrics --------------------------------------------------------------------------

    def _register_gauges(self) -> None:
        acc = self._accumulator
        metadata = self._metadata

        def metadata_age(_config: MetricConfig, now_ms: int) -> float:
            age = metadata.ms_since_successful_update(now_ms)
            return float("nan") if age is None else age / 1000.0

        add = self._metrics.add_gauge
        add(
            "buffer-total-bytes",
            "The maximum amount of buffer memory the client can use (whether or not it is "
            "currently used).",
            lambda _c, _n: float(acc.buffer_memory),
        )
        add(
            "buffer-available-bytes",
            "The total amount of buffer memory that is not being used (either unallocated or in "
            "the free list).",
            lambda _c, _n: float(acc.available_memory),
        )
        add(
            "metadata-age",
            "The age in seconds of the current producer metadata being used.",
            metadata_age,
        )

    @contextlib.contextmanager
    def _timed(self, what: str) -> Iterator[None]:
        """Add the block's duration to ``<what>-time-ns-total``, also when it raises."""
        nanos = self._metrics.nanos
        start = nanos()
        try:
            yield
        finally:
            self._metrics.record_time_ns(what, nanos() - start)

    def metrics(self, raw: bool = False) -> dict[Any, Any]:
        """The producer's metrics under the Java client's names (see docs/metrics.md).

        ``raw=False`` (as kafka-python): ``{group key: {metric name: value}}``, the group key
        being the group and its tag values joined with "." (``"producer-metrics"``,
        ``"producer-topic-metrics.<topic>"``, ``"producer-node-metrics.node-<id>"``).
        ``raw=True``: ``{MetricName: KafkaMetric}``; ``KafkaMetric.value()`` measures now.
        """
        registered: Mapping[MetricName, KafkaMetric] = self._metrics.registry.metrics()
        if raw:
            return dict(registered)
        grouped: dict[str, dict[str, float]] = {}
        for name, metric in registered.items():
            grouped.setdefault(name.group_key, {})[name.name] = metric.value()
        return grouped

    def metrics_snapshot(self, reset_maxima: bool = False) -> ProducerMetricsSnapshot:
        """Cumulative totals since the producer started, per topic-partition and per request
        (``later.minus(earlier)`` is what happened in between). ``reset_maxima`` starts the
        latency and throttle maxima afresh after this snapshot."""
        return self._metrics.counters.take(reset_maxima)

    # -- metadata -------------------------------------------------------------------------

    def _partitions(self, topic: str, partition: int | None) -> tuple[PartitionInfo, ...]:
        self._metadata.add_topic(topic, self._clock.now_ms())  # marks it used (max.idle.ms)
        parts = self._metadata.fetch().partitions.get(topic)
        if parts is not None and (partition is None or partition < len(parts)):
            return parts
        return self._wait_on_metadata(topic, partition, self._max_block_ms)

    def _wait_on_metadata(
        self, topic: str, partition: int | None, max_block_ms: int
    ) -> tuple[PartitionInfo, ...]:
        with self._timed("metadata-wait"):
            return self._await_metadata(topic, partition, max_block_ms)

    def _await_metadata(
        self, topic: str, partition: int | None, max_block_ms: int
    ) -> tuple[PartitionInfo, ...]:
        if not isinstance(topic, str) or not topic:
            raise TypeError(f"topic must be a non-empty str, got {topic!r}")
        metadata = self._metadata
        start = self._clock.now_ms()
        metadata.add_topic(topic, start)
        deadline = start + max_block_ms
        while True:
            if self._closed:
                raise ProducerClosedError("cannot send: the producer is closed")
            self._cluster = metadata.fetch()
            parts = self._cluster.partitions.get(topic)
            if parts is not None and (partition is None or partition < len(parts)):
                return parts
            topic_error = metadata.topic_error(topic)
            if isinstance(topic_error, TopicAuthorizationFailedError):
                raise topic_error
            if isinstance(topic_error, InvalidTopicError):
                # Final, as in Java: no metadata refresh makes a bad name valid.
                raise InvalidTopicError(
                    f"topic {topic!r} is not a valid topic name (names are 1 to 249 characters "
                    "of ASCII letters, digits, '.', '_' and '-')"
                )
            remaining = deadline - self._clock.now_ms()
            if remaining <= 0:
                timeout = KafkaTimeoutError(self._metadata_timeout_message(topic, partition, parts))
                # What the brokers last said of the topic (UNKNOWN_TOPIC_OR_PARTITION: it does
                # not exist), for a caller that tells a missing topic from an unreachable one.
                timeout.topic_error = metadata.topic_error(topic)
                raise timeout
            version = metadata.request_update()
            self._sender.wakeup()
            with contextlib.suppress(KafkaTimeoutError):
                metadata.await_update(version, min(remaining, 1000))

    def _metadata_timeout_message(
        self, topic: str, partition: int | None, parts: tuple[PartitionInfo, ...] | None
    ) -> str:
        if parts is not None and partition is not None:
            return (
                f"partition {partition} of topic {topic!r} (partition count {len(parts)}) is "
                f"not present in metadata after {self._max_block_ms} ms (max.block.ms)"
            )
        why = ""
        topic_error = self._metadata.topic_error(topic)
        last_error = self._metadata.last_error()
        if topic_error is not None:
            why = (
                f": the brokers report {topic_error} (does the topic exist? automatic topic "
                "creation may be disabled)"
            )
        elif last_error is not None:
            servers = ",".join(self.config.bootstrap_servers)
            why = f": no broker reachable (bootstrap.servers={servers}; last error: {last_error})"
        else:
            # Connected (or connecting) but no answer yet: a listener that is not Kafka or
            # expects another security.protocol, or a broker that does not respond.
            servers = ",".join(self.config.bootstrap_servers)
            why = (
                f": no metadata for it came back from the brokers (bootstrap.servers={servers}, "
                f"security.protocol={self.config.security_protocol})"
            )
        return (
            f"topic {topic!r} not present in metadata after {self._max_block_ms} ms "
            f"(max.block.ms){why}"
        )

    def partitions_for(self, topic: str) -> list[int]:
        """The partition ids of ``topic``, waiting up to max.block.ms for metadata."""
        self._ensure_open()
        return [p.partition for p in self._partitions(topic, None)]

    # -- send -----------------------------------------------------------------------------

    def _ensure_open(self) -> None:
        if self._closed:
            raise ProducerClosedError("cannot send: the producer is closed")
        if self._sender.fatal_error is not None:
            raise self._sender.fatal_error

    def send(  # noqa: PLR0917 - Java's / kafka-python's send() signature
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        headers: Sequence[tuple[str, bytes | None]] | Mapping[str, bytes | None] | None = None,
        timestamp_ms: int | None = None,
        callback: Callback | None = None,
    ) -> FutureRecordMetadata:
        """Queue one record; returns its future. Raises for invalid input, closed producer,
        oversized records and metadata / buffer waits past max.block.ms.

        ``value``/``key``: bytes, bytearray, memoryview, str (written as UTF-8) or None; with
        ``value.serializer``/``key.serializer`` set, anything the serializer takes.

        With plugins configured the record goes interceptors' ``on_send`` -> serializers ->
        partitioner -> accumulator, as in Java; a serializer failure raises SerializationError
        and queues nothing."""
        # The common case (bytes key and value, no partition, headers or timestamp, no plugins,
        # not transactional) into an open batch with room: _send's steps without the branches
        # it cannot take. Anything else, including opening a batch, goes through _send.
        if (
            type(key) is bytes
            and type(value) is bytes
            and partition is None
            and headers is None
            and timestamp_ms is None
            and self._keyed_fast_path
            and not self._closed
            and self._sender.fatal_error is None
        ):
            parts = self._cluster.partitions.get(topic)
            if parts is not None and len(key) + len(value) <= self._size_check_threshold:
                future = self._try_append_to_open(
                    topic,
                    # records.murmur2.partition_for_key, inlined: the call costs 20-50 ns, 1-2%
                    # of a send() (test_send_fast_path holds the two to each other).
                    (murmur2_unsigned(key) & 0x7FFFFFFF) % len(parts),
                    self._wall_ms(),
                    key,
                    value,
                    callback,
                )
                if future is not None:
                    return future
        if self._plugged:
            return self._send_plugged(topic, value, key, partition, headers, timestamp_ms, callback)
        return self._send(topic, value, key, partition, headers, timestamp_ms, callback)

    def _send_plugged(  # noqa: PLR0917 - send()'s arguments
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        headers: Sequence[tuple[str, bytes | None]] | Mapping[str, bytes | None] | None,
        timestamp_ms: int | None,
        callback: Callback | None,
    ) -> FutureRecordMetadata:
        hdrs = _as_headers(headers) if headers else []
        interceptors = self._interceptors
        if interceptors is not None:
            record = interceptors.on_send(
                ProducerRecord(topic, partition, key, value, tuple(hdrs), timestamp_ms)
            )
            topic, partition, key, value = record.topic, record.partition, record.key, record.value
            hdrs, timestamp_ms = list(record.headers), record.timestamp
        try:
            if self._key_serializer is not None:
                key = self._key_serializer(topic, key, hdrs)
            if self._value_serializer is not None:
                value = self._value_serializer(topic, value, hdrs)
            future = self._send(
                topic,
                value,
                key,
                partition,
                hdrs,
                timestamp_ms,
                callback if interceptors is None else None,
            )
        except BaseException as exc:
            if interceptors is not None:
                interceptors.on_send_error(topic, partition, exc)
            raise
        if interceptors is not None:
            future.add_callback(_InterceptorCallback(interceptors, future, callback))
        return future

    def _send(  # noqa: PLR0917 - send()'s arguments
        self,
        topic: str,
        value: bytes | bytearray | memoryview | str | None,
        key: bytes | bytearray | memoryview | str | None,
        partition: int | None,
        headers: Sequence[tuple[str, bytes | None]] | Mapping[str, bytes | None] | None,
        timestamp_ms: int | None,
        callback: Callback | None,
    ) -> FutureRecordMetadata:
        if self._closed:
            raise ProducerClosedError("cannot send: the producer is closed")
        if self._sender.fatal_error is not None:
            raise self._sender.fatal_error
        if self._txn is not None:
            self._txn.ensure_can_send()
        if value is not None and type(value) is not bytes:
            value = as_bytes("value", value)
        if key is not None and type(key) is not bytes:
            key = as_bytes("key", key)
        hdrs: list[tuple[str, bytes | None]] | tuple[()] = _as_headers(headers) if headers else ()
        # The cluster snapshot is re-read every _SNAPSHOT_EVERY sends (and whenever it lacks
        # the topic or partition): a partition-count change is seen a few sends late at most,
        # while send() saves a lock round trip per record.
        self._sends_since_snapshot += 1
        if self._sends_since_snapshot >= _SNAPSHOT_EVERY:
            self._sends_since_snapshot = 0
            self._cluster = self._metadata.fetch()
        parts = self._cluster.partitions.get(topic)
        if parts is None or (partition is not None and partition >= len(parts)):
            parts = self._wait_on_metadata(topic, partition, self._max_block_ms)
        num_partitions = len(parts)
        sticky = False
        if partition is None:
            if self._custom_partitioner is not None:
                partition = self._custom_partitioner.partition(topic, key, num_partitions)
            elif key is not None and not self._ignore_keys:
                partition = partition_for_key(key, num_partitions)
            else:
                partition = self._partitioner.sticky_partition(
                    topic, num_partitions, lambda: partitions_with_leader(parts)
                )
                sticky = True
        elif type(partition) is not int or partition < 0:
            raise ValueError(f"partition must be a non-negative int, got {partition!r}")
        if timestamp_ms is None:
            timestamp_ms = self._wall_ms()
        elif type(timestamp_ms) is not int or timestamp_ms < 0:
            raise ValueError(f"timestamp_ms must be a non-negative int, got {timestamp_ms!r}")
        size = (0 if key is None else len(key)) + (0 if value is None else len(value))
        if hdrs or size > self._size_check_threshold:
            self._check_record_size(topic, partition, key, value, hdrs)
        future, batch_is_full, new_batch = self._append(
            topic, partition, timestamp_ms, key, value, hdrs, callback, self._max_block_ms
        )
        if sticky:
            self._partitioner.update_partition_info(
                topic,
                partition,
                size + _RECORD_OVERHEAD,
                num_partitions,
                enforce_switch=batch_is_full,
                available=lambda: partitions_with_leader(parts),
            )
        if new_batch:
            # A new batch means the previous one is full and sendable: wake the sender. (Java
            # also wakes on every append behind a full batch; here that would be a syscall per
            # record while the sender is busy anyway.)
            self._metadata.add_topic(topic, self._clock.now_ms())  # used (max.idle.ms)
            # send()'s fast path never re-reads the snapshot: it only appends to open batches,
            # and every new batch passes here.
            self._cluster = self._metadata.fetch()
            # No GIL hand-over here (time.sleep(0), as the bulk path does per sealed batch):
            # per ~100 records it costs more than it gains; the sender takes the GIL within
            # the switch interval (5 ms), while linger.ms is 5 ms by default and
            # buffer.memory holds far more than that interval's appends.
            self._network.wakeup()
        return future

    def _check_record_size(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]],
    ) -> None:
        size = estimate_record_size(key, value, headers) + BATCH_HEADER_SIZE
        cfg = self.config
        # Alone in a request, the record still needs the request's framing around its batch.
        in_request = size + self._request_framing + topic_framing(topic) + PARTITION_FRAMING
        if in_request > cfg.max_request_size:
            raise RecordTooLargeError(
                f"record for {topic}-{partition} is {size} bytes when serialized, and a request "
                f"carrying it {in_request} bytes, larger than "
                f"max.request.size={cfg.max_request_size}. Fix: raise max.request.size and the "
                "topic's max.message.bytes with it, or send smaller records"
            )
        if size > cfg.buffer_memory:
            raise RecordTooLargeError(
                f"record for {topic}-{partition} is {size} bytes when serialized, larger than "
                f"buffer.memory={cfg.buffer_memory}. Fix: raise buffer.memory above it"
            )

    # -- bulk path ------------------------------------------------------------------------

    def send_columns(
        self,
        topic: str,
        values: object,
        keys: object = None,
        *,
        partitions: object = None,
        headers: Sequence[Sequence[tuple[str, bytes | None]] | None] | None = None,
        timestamps_ms: object = None,
        track_rows: bool = False,
    ) -> BulkSendFuture:
        """Queue whole columns of records; one future for all of them.

        ``values``/``keys``: pyarrow binary/string arrays (nulls allowed) or sequences of
        ``bytes | None``; they are normalised once, here, to ``records.arrow.BinaryArray`` (a
        Binary or LargeBinary array is taken as it is, which is what the Spark sink hands).
        ``partitions``: None, or an int32 array where null (pyarrow) or -1
        means "the partitioner decides". ``timestamps_ms``: None (now), one int for every row,
        or an int64 column where null means now; negative timestamps are refused as by
        ``send()``. Rows keep their order within each partition.

        Input is checked (shapes, partition range, timestamps, record sizes against
        max.request.size and buffer.memory) before anything is queued, so such an error queues
        nothing. Rows are then sealed and queued incrementally, so buffer.memory bounds the
        call's encoded data; each batch waits up to max.block.ms for buffer memory (as each
        record does in ``send()``), then BufferExhaustedError is raised.

        If the call fails after part of it was queued, the exception carries
        ``queued_future``: the BulkSendFuture of exactly the records queued before the failure
        (they are delivered or fail like any others). Wait for it (``get()``/``exception()``)
        to learn their outcome and offsets; an exception without that attribute queued nothing.

        With interceptors or serializers configured, every row goes through them as a record
        would in ``send()`` (values/keys may then be any objects the serializers take), at a
        per-row cost; ``on_send`` may not change a row's topic. A ``partitioner.class`` is
        called once per row without an explicit partition. See ``producer.bulk_plugins``.

        ``track_rows=True`` keeps, per queued batch, the call's row numbers it holds (a few
        bytes a row until the batch completes), so ``BulkSendFuture.failed_rows()`` can name the
        rows whose record failed (e.g. RecordTooLargeError once the sender split an oversized
        batch down to that record, InvalidRecordError) while the others are delivered.
        """
        self._ensure_open()
        if self._txn is not None:
            self._txn.ensure_can_send()
        acks: BulkAcknowledgements | None = None
        if self._plugged:
            staged = intercept_and_serialize(
                topic,
                values,
                keys,
                partitions=partitions,
                headers=headers,
                timestamps_ms=timestamps_ms,
                interceptors=self._interceptors,
                key_serializer=self._key_serializer,
                value_serializer=self._value_serializer,
            )
            values, keys, partitions = staged.values, staged.keys, staged.partitions
            headers, timestamps_ms, acks = staged.headers, staged.timestamps_ms, staged.acks
        try:
            columns = bulk_columns(
                values,
                keys,
                partitions=partitions,
                headers=headers,
                timestamps_ms=timestamps_ms,
                wall_ms=self._wall_ms,
            )
            if columns.length == 0:
                future = BulkSendFuture(topic, track_rows=track_rows)
                future._seal()
                return future
            max_partition = columns.max_partition
            parts_info = self._partitions(topic, max_partition if max_partition >= 0 else None)
            return self._bulk.append(topic, parts_info, columns, acks=acks, track_rows=track_rows)
        except BaseException as exc:
            if acks is not None:
                acks.fail_unqueued(exc)
            raise

    # -- transactions ---------------------------------------------------------------------

    def _transactional(self, operation: str) -> TransactionManager:
        if self._closed:
            raise ProducerClosedError(f"cannot call {operation}: the producer is closed")
        if self._txn is None:
            raise IllegalStateError(
                f"cannot call {operation}: transactions need transactional.id in the config"
            )
        if self._thread.ident == threading.get_ident():
            raise KafkaError(f"{operation} cannot be called from a producer callback")
        return self._txn

    def _timeout_ms(self, timeout: float | None) -> int:
        return self._max_block_ms if timeout is None else max(int(timeout * 1000), 0)

    def _await_transactional(
        self, tm: TransactionManager, result: TransactionalRequestResult, timeout: float | None
    ) -> None:
        """Wake the sender for the request behind ``result`` and wait for it: ``timeout``
        seconds, or max.block.ms; a KafkaTimeoutError says what it was still waiting for."""
        acc = self._accumulator
        self._sender.wakeup()
        result.wait(self._timeout_ms(timeout), lambda: tm.describe_wait(acc.has_incomplete()))

    def init_transactions(self, timeout: float | None = None) -> None:
        """Register ``transactional.id`` with its transaction coordinator (Java's
        ``initTransactions``); call once before the first ``begin_transaction()``.

        Finds the coordinator (FindCoordinator) and sends InitProducerId, which fences every
        earlier producer with the same transactional id and completes or aborts whatever
        transaction it left open. **That includes a transaction this producer prepared with
        prepare_transaction()**: complete it (``complete_transaction``) before calling this
        again with the same id, or it is aborted. Waits up to ``timeout`` seconds
        (``max.block.ms`` by default); on KafkaTimeoutError, calling again resumes the wait.
        """
        tm = self._transactional("init_transactions()")
        with self._timed("txn-init"):
            self._await_transactional(tm, tm.initialize_transactions(), timeout)

    def begin_transaction(self) -> None:
        """Start a transaction: records sent until ``commit_transaction()`` or
        ``abort_transaction()`` become visible to read_committed consumers all together or not
        at all. Needs ``init_transactions()`` first; does not block."""
        tm = self._transactional("begin_transaction()")
        with self._timed("txn-begin"):
            tm.begin_transaction(self._clock.now_ms())

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Send everything queued, wait for every acknowledgement, then commit (EndTxn).

        Raises AbortableTransactionError when a record of the transaction failed (call
        ``abort_transaction()``; the producer stays usable), ProducerFencedError or another
        fatal error when the producer cannot go on (close it). Waits up to ``timeout`` seconds
        (``max.block.ms`` by default); on KafkaTimeoutError the commit goes on in the
        background and calling ``commit_transaction()`` again resumes the wait.
        """
        tm = self._transactional("commit_transaction()")
        with self._timed("txn-commit"):
            self._await_transactional(tm, tm.begin_commit(), timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the open transaction: records still queued are not sent (their futures fail
        with TransactionAbortedError), records in flight are waited for, then EndTxn(abort).
        Also the way out of an abortable error. Waits up to ``timeout`` seconds
        (``max.block.ms`` by default); calling again after a KafkaTimeoutError resumes."""
        tm = self._transactional("abort_transaction()")
        with self._timed("txn-abort"):
            self._await_transactional(tm, tm.begin_abort(), timeout)

    def prepare_transaction(self, timeout: float | None = None) -> PreparedTransaction:
        """Flush, wait until every record of the open transaction is acknowledged, and return
        the handle another process needs to end it, without ending it.

        The returned ``PreparedTransaction`` (transactional id, producer id and epoch, the
        partitions written; picklable) is ended with ``complete_transaction(config, prepared,
        commit=...)`` from any process. The transaction must be ended within
        ``transaction.timeout.ms`` of its first record, or the broker aborts it. A transaction
        that wrote nothing gives a handle with no partitions: there is nothing to end.

        Afterwards this producer refuses sends, commit and abort until ``init_transactions()``
        is called again, and that call **aborts the prepared transaction** if it is still open
        (InitProducerId fences the id): complete it first. Raises AbortableTransactionError if a
        record failed; waits up to ``timeout`` seconds (``max.block.ms`` by default), and
        calling again after a KafkaTimeoutError resumes.
        """
        tm = self._transactional("prepare_transaction()")
        tm.ensure_can_send()
        timeout_ms = self._timeout_ms(timeout)
        try:
            self.flush(timeout_ms / 1000.0)
        except KafkaTimeoutError as exc:
            raise KafkaTimeoutError(
                f"prepare_transaction() timed out after {timeout_ms} ms waiting for the "
                f"transaction's records to be acknowledged ({exc}); call prepare_transaction() "
                "again to resume"
            ) from exc
        return tm.prepare()

    # -- flush / close --------------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until all earlier sends completed.

        Record failures are reported on their futures (as in Java); a KafkaTimeoutError is raised
        if ``timeout`` seconds pass first (the records stay queued).
        """
        if self._thread.ident == threading.get_ident():
            raise KafkaError("flush() cannot be called from a producer callback")
        acc = self._accumulator
        with self._timed("flush"):
            acc.begin_flush()
            self._network.wakeup()
            try:
                acc.await_flush_completion(None if timeout is None else int(timeout * 1000))
            finally:
                acc.end_flush()

    def close(self, timeout: float | None = None) -> None:
        """Flush and stop. After ``timeout`` seconds, records not yet delivered fail with
        ProducerClosedError (never dropped silently). ``timeout=None`` waits for delivery, which
        delivery.timeout.ms (+ request.timeout.ms for the last attempt) bounds; past that bound
        whatever is left is failed as well, so close() never hangs."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        in_callback = self._thread.ident == threading.get_ident()
        if in_callback:
            timeout = 0
        elif timeout is None:
            cfg = self.config
            timeout = (cfg.delivery_timeout_ms + cfg.request_timeout_ms) / 1000.0 + 5.0
        self._sender.initiate_close()
        if not in_callback:
            self._thread.join(timeout)
        if self._thread.is_alive():
            self._sender.force_close()
            if not in_callback:
                self._thread.join(5.0)
        if self._thread.is_alive() and not in_callback:
            log.warning("producer sender thread did not stop; failing what is left")
            self._sender.abort_incomplete(ProducerClosedError("the producer was closed"))
        self._metadata.close()
        # After the sender stopped: no on_acknowledgement can follow an interceptor's close().
        if self._interceptors is not None:
            self._interceptors.close()
        if self._custom_partitioner is not None:
            self._custom_partitioner.close()
        self._metrics.registry.close()

    def __enter__(self) -> KafkaProducer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"KafkaProducer(client_id={self.client_id!r}, {state})"


class _InterceptorCallback:
    """Per record: the interceptors' on_acknowledgement, then the caller's callback (Java's order).

    Runs on the I/O thread when the record's batch completes.
    """

    __slots__ = ("_callback", "_future", "_interceptors")

    def __init__(
        self,
        interceptors: ProducerInterceptors,
        future: FutureRecordMetadata,
        callback: Callback | None,
    ) -> None:
        self._interceptors = interceptors
        self._future = future
        self._callback = callback

    def __call__(self, metadata: RecordMetadata | None, exc: BaseException | None) -> None:
        if metadata is not None:
            self._interceptors.on_acknowledgement(metadata, None)
        else:
            result = self._future._result
            self._interceptors.on_send_error(
                result.topic, result.partition, exc or KafkaError("unknown failure")
            )
        if self._callback is not None:
            self._callback(metadata, exc)
