"""KafkaProducer: the public facade (Java's KafkaProducer) and the bulk path for columns.

Role: validates the config, wires Metadata + NetworkClient + RecordAccumulator + Sender (+ the
TransactionManager for idempotence) and starts the sender thread. ``send()`` partitions a record
and appends it to the accumulator; ``send_columns()`` partitions whole Arrow columns with numpy,
seals them into record batches (records.columnar.seal_columns) and queues those, returning one
BulkSendFuture with per-partition offsets instead of a future per record.

Invariants:
- ``send()`` blocks only for metadata of a new topic and for buffer memory, each bounded by
  ``max.block.ms``; then it raises (KafkaTimeoutError / BufferExhaustedError) with a message
  saying why. It never blocks on the network otherwise.
- Every record accepted by ``send()``/``send_columns()`` ends acknowledged or failed on its
  future, including on ``close(timeout)``: whatever cannot be delivered in time is failed, never
  dropped and never left pending.
- The producer layer never touches sockets; all I/O is the sender thread's network client.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kafka_sink.clock import SYSTEM_CLOCK, Clock
from kafka_sink.errors import (
    ConfigError,
    InvalidTopicError,
    KafkaError,
    KafkaTimeoutError,
    ProducerClosedError,
    RecordTooLargeError,
    TopicAuthorizationFailedError,
)
from kafka_sink.net.metadata import Metadata, PartitionInfo
from kafka_sink.net.network_client import NetworkClient, NetworkConfig
from kafka_sink.producer.accumulator import RecordAccumulator
from kafka_sink.producer.config import ProducerConfig
from kafka_sink.producer.futures import (
    BulkSendFuture,
    Callback,
    FutureRecordMetadata,
    PartitionOffsets,
    RecordMetadata,
)
from kafka_sink.producer.partitioner import BuiltInPartitioner
from kafka_sink.producer.sender import Sender
from kafka_sink.producer.transaction_manager import TransactionManager
from kafka_sink.records.batch import BATCH_HEADER_SIZE, SealedBatch, estimate_record_size
from kafka_sink.records.columnar import CompressionRatioEstimator, seal_columns
from kafka_sink.records.compression import CompressionType
from kafka_sink.records.murmur2 import murmur2, partitions_for_keys

log = logging.getLogger(__name__)

__all__ = [
    "BulkSendFuture",
    "FutureRecordMetadata",
    "KafkaProducer",
    "PartitionOffsets",
    "RecordMetadata",
]

_producer_ids = iter(range(1, 2**62))
_producer_ids_lock = threading.Lock()
_SNAPSHOT_EVERY = 1024


def _yield_gil() -> None:
    """Let the sender thread run now rather than after the interpreter's switch interval.

    Every syscall the sender makes (poll, send, recv) releases the GIL; a caller thread busy
    appending would then hold it for up to ``sys.getswitchinterval()`` (5 ms) before the sender
    gets it back, which starves the network. Yielding once per new batch keeps the sender's
    waits short at a cost of one cheap syscall per batch.
    """
    time.sleep(0)


# Per-record bytes beyond key and value, as an upper bound (the builder's varint overhead).
_RECORD_OVERHEAD = 21 + 10


def _as_bytes(what: str, data: object) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    if isinstance(data, str):
        return data.encode("utf-8")
    raise TypeError(
        f"{what} must be bytes, bytearray, memoryview, str or None; got {type(data).__name__}"
    )


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
        out.append((name, None if value is None else _as_bytes(f"header {name!r}", value)))
    return out


def build_network_config(config: ProducerConfig, client_id: str) -> NetworkConfig:
    """Translate the producer config into the network client's settings."""
    return NetworkConfig(
        bootstrap_servers=list(config.bootstrap_servers),
        client_id=client_id,
        request_timeout_ms=config.request_timeout_ms,
        reconnect_backoff_ms=config.reconnect_backoff_ms,
        reconnect_backoff_max_ms=config.reconnect_backoff_max_ms,
        max_in_flight=config.max_in_flight,
        send_buffer_bytes=config.send_buffer_bytes,
        receive_buffer_bytes=config.receive_buffer_bytes,
        connections_max_idle_ms=config.connections_max_idle_ms,
        socket_connection_setup_timeout_ms=config.socket_connection_setup_timeout_ms,
        socket_connection_setup_timeout_max_ms=config.socket_connection_setup_timeout_max_ms,
        security_protocol=config.security_protocol,
        sasl_mechanism=config.sasl_mechanism if config.uses_sasl else None,
        sasl_username=config.sasl_username,
        sasl_password=config.sasl_password,
        tls=config.tls_config(),
        metadata_max_age_ms=config.metadata_max_age_ms,
        retry_backoff_ms=config.retry_backoff_ms,
        retry_backoff_max_ms=config.retry_backoff_max_ms,
        # Java's producer metadata asks brokers to auto-create topics (if they allow it).
        allow_auto_topic_creation=True,
    )


class KafkaProducer:
    """A thread-safe Kafka producer with Java 4.x semantics and defaults.

    ``KafkaProducer({"bootstrap.servers": "host:9092", ...})``; keys are Kafka's dotted producer
    config names (values may be strings). See :class:`ProducerConfig`.
    """

    def __init__(self, config: Mapping[str, object], *, clock: Clock | None = None) -> None:
        self.config = cfg = ProducerConfig.from_mapping(config)
        if cfg.transactional_id is not None:
            raise ConfigError(
                "transactional.id: transactions are not implemented by this producer; "
                "remove transactional.id (idempotence is on by default)"
            )
        self._clock = clock or SYSTEM_CLOCK
        if cfg.client_id:
            self.client_id = cfg.client_id
        else:
            with _producer_ids_lock:
                self.client_id = f"producer-{next(_producer_ids)}"
        self._compression = CompressionType.from_name(cfg.compression_type)
        self._compression_level = cfg.compression_level
        # Per topic, as Java's CompressionRatioEstimator: lets batch.size bound the compressed
        # size of bulk batches (a racy float update between callers only shifts a cut point).
        self._ratio_estimators: dict[str, CompressionRatioEstimator] = {}
        self._metadata = Metadata(
            metadata_max_age_ms=cfg.metadata_max_age_ms,
            retry_backoff_ms=cfg.retry_backoff_ms,
            retry_backoff_max_ms=cfg.retry_backoff_max_ms,
        )
        self._network = NetworkClient(
            build_network_config(cfg, self.client_id), self._metadata, self._clock
        )
        self._accumulator = RecordAccumulator(
            clock=self._clock,
            batch_size=cfg.batch_size,
            linger_ms=cfg.linger_ms,
            buffer_memory=cfg.buffer_memory,
            delivery_timeout_ms=cfg.delivery_timeout_ms,
            compression_type=self._compression,
            compression_level=self._compression_level,
            wakeup=self._network.wakeup,
        )
        self._transaction_manager = TransactionManager() if cfg.enable_idempotence else None
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
            max_in_flight=cfg.max_in_flight,
            retry_backoff_ms=cfg.retry_backoff_ms,
            retry_backoff_max_ms=cfg.retry_backoff_max_ms,
        )
        self._partitioner = BuiltInPartitioner(cfg.batch_size)
        self._ignore_keys = cfg.partitioner_ignore_keys
        self._max_block_ms = cfg.max_block_ms
        # Records above this many key+value bytes get the exact size check.
        self._size_check_threshold = (
            min(cfg.max_request_size, cfg.buffer_memory) - BATCH_HEADER_SIZE - _RECORD_OVERHEAD
        )
        self._closed = False
        self._close_lock = threading.Lock()
        self._append = self._accumulator.append
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

    # -- metadata -------------------------------------------------------------------------

    def _partitions(self, topic: str, partition: int | None) -> tuple[PartitionInfo, ...]:
        parts = self._metadata.fetch().partitions.get(topic)
        if parts is not None and (partition is None or partition < len(parts)):
            return parts
        return self._wait_on_metadata(topic, partition, self._max_block_ms)

    def _wait_on_metadata(
        self, topic: str, partition: int | None, max_block_ms: int
    ) -> tuple[PartitionInfo, ...]:
        if not isinstance(topic, str) or not topic:
            raise TypeError(f"topic must be a non-empty str, got {topic!r}")
        metadata = self._metadata
        metadata.add_topic(topic)
        start = self._clock.now_ms()
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
                raise KafkaTimeoutError(self._metadata_timeout_message(topic, partition, parts))
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
        value: bytes | bytearray | memoryview | str | None = None,
        key: bytes | bytearray | memoryview | str | None = None,
        partition: int | None = None,
        headers: Sequence[tuple[str, bytes | None]] | Mapping[str, bytes | None] | None = None,
        timestamp_ms: int | None = None,
        callback: Callback | None = None,
    ) -> FutureRecordMetadata:
        """Queue one record; returns its future. Raises for invalid input, closed producer,
        oversized records and metadata / buffer waits past max.block.ms."""
        if self._closed:
            raise ProducerClosedError("cannot send: the producer is closed")
        if self._sender.fatal_error is not None:
            raise self._sender.fatal_error
        if value is not None and type(value) is not bytes:
            value = _as_bytes("value", value)
        if key is not None and type(key) is not bytes:
            key = _as_bytes("key", key)
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
            if key is not None and not self._ignore_keys:
                partition = (murmur2(key) & 0x7FFFFFFF) % num_partitions
            else:
                partition = self._partitioner.sticky_partition(
                    topic, num_partitions, lambda: _with_leader(parts)
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
                available=lambda: _with_leader(parts),
            )
        if new_batch:
            # A new batch means the previous one is full and sendable: wake the sender. (Java
            # also wakes on every append behind a full batch; here that would be a syscall per
            # record while the sender is busy anyway.)
            self._network.wakeup()
            _yield_gil()
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
        if size > cfg.max_request_size:
            raise RecordTooLargeError(
                f"record for {topic}-{partition} is {size} bytes when serialized, larger than "
                f"max.request.size={cfg.max_request_size}"
            )
        if size > cfg.buffer_memory:
            raise RecordTooLargeError(
                f"record for {topic}-{partition} is {size} bytes when serialized, larger than "
                f"buffer.memory={cfg.buffer_memory}"
            )

    # -- bulk path ------------------------------------------------------------------------

    def send_columns(
        self,
        topic: str,
        values: Any,
        keys: Any = None,
        *,
        partitions: Any = None,
        headers: Sequence[Sequence[tuple[str, bytes | None]] | None] | None = None,
        timestamps_ms: int | Any = None,
    ) -> BulkSendFuture:
        """Queue whole columns of records; one future for all of them.

        ``values``/``keys``: pyarrow binary/string arrays (nulls allowed) or sequences of
        ``bytes | None``. ``partitions``: None, or an int32 array where null (pyarrow) or -1
        means "the partitioner decides". Rows keep their order within each partition.
        Validation (partition range, record sizes) happens before anything is queued, so an
        error queues nothing. Blocks for buffer memory like ``send()``.
        """
        self._ensure_open()
        values_arr = _as_binary_array(values, "values")
        n = len(values_arr)
        keys_arr = None if keys is None else _as_binary_array(keys, "keys")
        if keys_arr is not None and len(keys_arr) != n:
            raise ValueError(f"keys has {len(keys_arr)} rows, values has {n}")
        if headers is not None and len(headers) != n:
            raise ValueError(f"headers has {len(headers)} rows, values has {n}")
        ts_arr: Any
        if timestamps_ms is None:
            ts_arr = self._clock.wall_ms()
        elif isinstance(timestamps_ms, int):
            ts_arr = timestamps_ms
        else:
            ts_arr = np.asarray(
                timestamps_ms.to_numpy(zero_copy_only=False)
                if isinstance(timestamps_ms, pa.Array | pa.ChunkedArray)
                else timestamps_ms,
                dtype=np.int64,
            )
            if ts_arr.shape != (n,):
                raise ValueError(f"timestamps_ms has {ts_arr.shape[0]} rows, values has {n}")
        future = BulkSendFuture(topic)
        if n == 0:
            future._seal()
            return future
        max_partition = -1
        explicit = None
        if partitions is not None:
            explicit = _partition_array(partitions, n)
            max_partition = int(explicit.max())
        parts_info = self._partitions(topic, max_partition if max_partition >= 0 else None)
        assigned = self._assign_partitions(
            topic=topic,
            parts=parts_info,
            values=values_arr,
            keys=keys_arr,
            explicit=explicit,
            n=n,
        )

        # Group rows by partition (stable: order within a partition is input order), then seal
        # every partition's rows in one call: batches never span a partition's segment.
        cfg = self.config
        estimator = self._ratio_estimators.get(topic)
        if estimator is None:
            estimator = self._ratio_estimators.setdefault(topic, CompressionRatioEstimator())
        first = int(assigned[0])
        v, k, h, t = values_arr, keys_arr, headers, ts_arr
        if bool((assigned == first).all()):
            group_partitions = [first]
            group_ends = [n]
        else:
            order = np.argsort(assigned, kind="stable")
            sorted_parts = assigned[order]
            bounds = (np.flatnonzero(np.diff(sorted_parts)) + 1).tolist()
            group_partitions = sorted_parts[[0, *bounds]].tolist()
            group_ends = [*bounds, n]
            take = pa.array(order)
            v = values_arr.take(take)
            k = None if keys_arr is None else keys_arr.take(take)
            h = None if headers is None else [headers[i] for i in order.tolist()]
            t = ts_arr if isinstance(ts_arr, int) else ts_arr[order]
        sealed_all = seal_columns(
            v,
            k,
            timestamps_ms=t,
            headers=h,
            compression_type=self._compression,
            compression_level=self._compression_level,
            batch_size=cfg.batch_size,
            ratio_estimator=estimator,
            segment_ends=group_ends,
        )
        sealed_by_partition: list[tuple[int, list[SealedBatch]]] = []
        group = 0
        rows = 0
        current: list[SealedBatch] = []
        for sealed in sealed_all:
            if sealed.size_bytes > cfg.max_request_size and sealed.record_count == 1:
                raise RecordTooLargeError(
                    f"a record for {topic}-{group_partitions[group]} is {sealed.size_bytes} "
                    f"bytes when serialized, larger than max.request.size="
                    f"{cfg.max_request_size}; nothing from this call was queued"
                )
            current.append(sealed)
            rows += sealed.record_count
            if rows == group_ends[group]:
                sealed_by_partition.append((group_partitions[group], current))
                current = []
                group += 1
        _yield_gil()  # sealing is long and GIL-bound: let the sender make progress

        now_ms = self._clock.now_ms()
        acc = self._accumulator
        try:
            for partition, batches in sealed_by_partition:
                for sealed in batches:
                    batch = acc.append_sealed(topic, partition, sealed, self._max_block_ms, now_ms)
                    future._add(
                        partition, sealed.record_count, sealed.last_offset_delta, batch.result
                    )
        finally:
            future._seal()
        # Appending is quick (no encoding left): one wakeup for the whole call, then let the
        # sender drain at once instead of after the next seal's first switch interval.
        self._network.wakeup()
        _yield_gil()
        return future

    def _assign_partitions(
        self,
        *,
        topic: str,
        parts: Sequence[PartitionInfo],
        values: Any,
        keys: Any,
        explicit: np.ndarray[Any, np.dtype[np.int32]] | None,
        n: int,
    ) -> np.ndarray[Any, np.dtype[np.int32]]:
        num_partitions = len(parts)
        if explicit is not None:
            if int(explicit.max()) >= num_partitions:
                raise ValueError(
                    f"partition {int(explicit.max())} is out of range for topic {topic!r} "
                    f"with {num_partitions} partitions"
                )
            assigned = explicit.copy()
            undecided = assigned < 0
        else:
            assigned = np.full(n, -1, dtype=np.int32)
            undecided = np.ones(n, dtype=bool)
        if not undecided.any():
            return assigned
        if keys is not None and not self._ignore_keys:
            key_valid = np.asarray(keys.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
            keyed = undecided & key_valid
            if keyed.any():
                rows = np.flatnonzero(keyed)
                if len(rows) == n:
                    assigned = partitions_for_keys(keys, num_partitions).astype(np.int32)
                else:
                    assigned[rows] = partitions_for_keys(keys.take(pa.array(rows)), num_partitions)
                undecided = undecided & ~key_valid
        if undecided.any():
            rows = np.flatnonzero(undecided)
            sizes = _lengths(values, rows) + _RECORD_OVERHEAD
            if keys is not None:
                sizes += _lengths(keys, rows)
            chunk = np.cumsum(sizes) // max(self.config.batch_size, 1)
            chunk -= chunk[0]
            chosen = self._partitioner.sticky_chunks(
                topic, num_partitions, int(chunk[-1]) + 1, lambda: _with_leader(parts)
            )
            assigned[rows] = np.asarray(chosen, dtype=np.int32)[chunk]
        return assigned

    # -- flush / close --------------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until all earlier sends completed.

        Record failures are reported on their futures (as in Java); a KafkaTimeoutError is raised
        if ``timeout`` seconds pass first (the records stay queued).
        """
        if self._thread.ident == threading.get_ident():
            raise KafkaError("flush() cannot be called from a producer callback")
        acc = self._accumulator
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


def _with_leader(parts: Sequence[PartitionInfo]) -> list[int]:
    return [p.partition for p in parts if p.leader_id >= 0]


def _as_binary_array(data: Any, what: str) -> Any:
    if isinstance(data, pa.ChunkedArray):
        data = data.combine_chunks()
    if isinstance(data, pa.Array):
        if pa.types.is_string(data.type) or pa.types.is_large_string(data.type):
            return data.cast(
                pa.large_binary() if pa.types.is_large_string(data.type) else pa.binary()
            )
        if (
            pa.types.is_binary(data.type)
            or pa.types.is_large_binary(data.type)
            or pa.types.is_null(data.type)
        ):
            return data
        raise TypeError(f"{what} must be a binary or string column, got {data.type}")
    try:
        return pa.array([None if x is None else _as_bytes(what, x) for x in data], type=pa.binary())
    except TypeError:
        raise
    except Exception as exc:
        raise TypeError(f"{what} must be a sequence of bytes | None: {exc}") from None


def _partition_array(partitions: Any, n: int) -> np.ndarray[Any, np.dtype[np.int32]]:
    if isinstance(partitions, pa.ChunkedArray):
        partitions = partitions.combine_chunks()
    if isinstance(partitions, pa.Array):
        arr = np.asarray(
            pc.fill_null(partitions.cast(pa.int32()), -1).to_numpy(zero_copy_only=False),
            dtype=np.int32,
        )
    else:
        arr = np.asarray(partitions, dtype=np.int32)
    if arr.shape != (n,):
        raise ValueError(f"partitions has {arr.shape[0] if arr.ndim else 0} rows, values has {n}")
    if (arr < -1).any():
        raise ValueError("partitions must be >= 0 (or -1 / null for the partitioner)")
    return arr


def _lengths(column: Any, rows: np.ndarray[Any, Any]) -> np.ndarray[Any, np.dtype[np.int64]]:
    if pa.types.is_null(column.type):
        return np.zeros(len(rows), dtype=np.int64)
    lengths = pc.fill_null(pc.binary_length(column), 0).to_numpy(zero_copy_only=False)
    out: np.ndarray[Any, np.dtype[np.int64]] = np.asarray(lengths, dtype=np.int64)[rows]
    return out
