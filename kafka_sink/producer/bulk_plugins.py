"""The per-record stage of ``send_columns()`` when interceptors or serializers are configured.

Role: ``send()`` semantics for a whole call. Each row becomes a :class:`ProducerRecord` that goes
through the interceptors' ``on_send`` (in order, for every row), then through the serializers;
the results are turned back into columns for the bulk path (``producer.bulk``), which partitions,
seals and queues them as usual. Without interceptors and serializers this module is not used and
the bulk path stays free of per-row Python.

Invariants:
- ``on_send`` may change a record's key, value, headers, partition and timestamp; it may not
  change the topic (a call writes one topic and returns one BulkSendFuture): a changed topic fails
  the call, naming the record, with nothing queued. A partition an interceptor sets is then an
  explicit partition (checked against the topic's partitions like any other).
- Every row has been through ``on_send`` before the first serializer runs; from then on any
  failure of the call acknowledges every row not queued with that exception
  (:class:`BulkAcknowledgements`), so each row gets exactly one ``on_acknowledgement``.
- A serializer failure raises SerializationError naming the record, and nothing is queued.
- Serializers are never called for a null key or value (as in ``send()``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from kafka_sink.errors import SerializationError
from kafka_sink.producer.interceptors import (
    BulkAcknowledgements,
    ProducerInterceptors,
    ProducerRecord,
)
from kafka_sink.producer.plugins import Serializer

__all__ = ["StagedColumns", "intercept_and_serialize"]

Header = tuple[str, bytes | None]


@dataclass(frozen=True, slots=True)
class StagedColumns:
    """``send_columns()`` arguments after the per-record stage, plus the acknowledgements."""

    values: Any
    keys: Any
    partitions: Any
    headers: Sequence[Sequence[Header] | None] | None
    timestamps_ms: Any
    acks: BulkAcknowledgements | None


def _rows(data: Any, n: int | None, what: str) -> list[Any]:
    out: list[Any]
    if isinstance(data, pa.ChunkedArray | pa.Array):
        out = data.to_pylist()
    elif isinstance(data, np.ndarray):
        out = data.tolist()
    else:
        try:
            out = list(data)
        except TypeError:
            raise TypeError(f"{what} must be a column (pyarrow array or sequence)") from None
    if n is not None and len(out) != n:
        raise ValueError(f"{what} has {len(out)} rows, values has {n}")
    return out


def _row_headers(row: int, headers: Any) -> tuple[Header, ...]:
    if not headers:
        return ()
    items = headers.items() if hasattr(headers, "items") else headers
    out = []
    for item in items:
        try:
            name, value = item
        except (TypeError, ValueError):
            raise TypeError(
                f"headers[{row}]: a header must be a (str, bytes | None) pair"
            ) from None
        out.append((name, value))
    return tuple(out)


def intercept_and_serialize(
    topic: str,
    values: Any,
    keys: Any,
    *,
    partitions: Any,
    headers: Sequence[Sequence[Header] | None] | None,
    timestamps_ms: Any,
    interceptors: ProducerInterceptors | None,
    key_serializer: Serializer | None,
    value_serializer: Serializer | None,
) -> StagedColumns:
    """Run ``on_send`` and the serializers over every row; see the module invariants."""
    value_rows = _rows(values, None, "values")
    n = len(value_rows)
    key_rows = [None] * n if keys is None else _rows(keys, n, "keys")
    header_rows: list[Any] = [None] * n if headers is None else _rows(headers, n, "headers")
    if partitions is None:
        partition_rows: list[Any] = [None] * n
    else:
        partition_rows = [
            None if p is None or p == -1 else p for p in _rows(partitions, n, "partitions")
        ]
    if timestamps_ms is None or isinstance(timestamps_ms, int | np.integer):
        ts_rows: list[Any] = [None if timestamps_ms is None else int(timestamps_ms)] * n
    else:
        ts_rows = _rows(timestamps_ms, n, "timestamps_ms")

    if headers is None:
        records = [
            ProducerRecord(topic, p, k, v, (), ts)
            for p, k, v, ts in zip(partition_rows, key_rows, value_rows, ts_rows, strict=True)
        ]
    else:
        records = [
            ProducerRecord(
                topic,
                partition_rows[i],
                key_rows[i],
                value_rows[i],
                _row_headers(i, header_rows[i]),
                ts_rows[i],
            )
            for i in range(n)
        ]
    acks: BulkAcknowledgements | None = None
    if interceptors is not None:
        on_send = interceptors.on_send
        sent = [on_send(record) for record in records]
        unchanged = all(a is b for a, b in zip(sent, records, strict=True))
        records = sent
        acks = BulkAcknowledgements(interceptors, topic, [r.partition for r in records])
        if unchanged and key_serializer is None and value_serializer is None:
            # Observing interceptors only: the call's own columns go on, no rebuild.
            return StagedColumns(values, keys, partitions, headers, timestamps_ms, acks)
    try:
        return _columns(topic, records, key_serializer, value_serializer, acks)
    except BaseException as exc:
        if acks is not None:
            acks.fail_unqueued(exc)
        raise


def _columns(
    topic: str,
    records: list[ProducerRecord],
    key_serializer: Serializer | None,
    value_serializer: Serializer | None,
    acks: BulkAcknowledgements | None,
) -> StagedColumns:
    n = len(records)
    out_values: list[Any] = [None] * n
    out_keys: list[Any] = [None] * n
    out_partitions: list[int | None] = [None] * n
    out_headers: list[list[Header] | None] = [None] * n
    out_ts: list[int | None] = [None] * n
    for i, record in enumerate(records):
        if record.topic != topic:
            raise ValueError(
                f"record {i} of this call: an interceptor changed its topic from {topic!r} to "
                f"{record.topic!r}; send_columns() writes one topic per call (use send() for "
                "records an interceptor reroutes); nothing from this call was queued"
            )
        hdrs = list(record.headers)
        key, value = record.key, record.value
        try:
            if key_serializer is not None:
                key = key_serializer(topic, key, hdrs)
            if value_serializer is not None:
                value = value_serializer(topic, value, hdrs)
        except SerializationError as exc:
            raise SerializationError(
                f"record {i} of this call: {exc}; nothing from this call was queued"
            ) from exc.__cause__
        partition = record.partition
        if partition is not None and (
            isinstance(partition, bool)
            or not isinstance(partition, int | np.integer)
            or partition < 0
        ):
            raise ValueError(
                f"record {i} of this call: partition must be a non-negative int or None, got "
                f"{partition!r}; nothing from this call was queued"
            )
        out_values[i], out_keys[i], out_partitions[i] = value, key, partition
        out_headers[i] = hdrs or None
        out_ts[i] = record.timestamp
    return StagedColumns(
        values=out_values,
        keys=None if all(k is None for k in out_keys) else out_keys,
        partitions=(
            None
            if all(p is None for p in out_partitions)
            else pa.array(out_partitions, type=pa.int32())
        ),
        headers=None if all(h is None for h in out_headers) else out_headers,
        timestamps_ms=(
            None if all(t is None for t in out_ts) else pa.array(out_ts, type=pa.int64())
        ),
        acks=acks,
    )
