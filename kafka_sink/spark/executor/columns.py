"""Arrow record batch -> the producer's bulk-send columns, one group per topic.

Role: the executor-side half of the input contract (``schema.py`` is the driver-side half). Given
an Arrow batch that Spark hands a task (``task.py``), produce per topic the value and key columns
as Arrow binary arrays, the partition column (int32, null = "the partitioner decides"), the
timestamps (numpy int64 epoch ms) and, when present, the headers. Values and keys are
``records.arrow.BinaryArray`` (``binary_column``: strings become their UTF-8 bytes, a null-typed
column binary nulls), the type ``send_columns`` takes as it is.

Invariants:
- No per-row Python for value, key, topic, partition and timestamp: casts, masks and filters are
  ``pyarrow.compute`` / numpy. Headers are the exception: the producer takes them as a list per
  row, so they are converted row by row, and only when some row has any.
- Rows keep their input order within each topic group (so within each topic-partition).
- A null or empty topic, a timestamp before 1970, a null header key, or a partition outside the
  topic's partitions raises ``record_errors.BadRecordError`` (a :class:`SinkDataError`) naming
  the row (its index within the task's input) and the fix, for the task's record error policy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from kafka_sink.records.arrow import BinaryArray, binary_column, int_column, valid_mask
from kafka_sink.sink_errors import SinkDataError
from kafka_sink.spark.executor.record_errors import BadRecordError
from kafka_sink.spark.schema import InputLayout

__all__ = ["TopicColumns", "check_partitions", "merge_groups", "timestamps_ms", "topic_columns"]

Header = tuple[str, bytes | None]

# Arrow timestamp units -> (multiplier, divisor) to epoch milliseconds.
_TO_MS = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1_000), "ns": (1, 1_000_000)}


@dataclass(frozen=True)
class TopicColumns:
    """The rows of one batch bound for one topic, ready for ``send_columns``."""

    topic: str
    values: BinaryArray
    keys: BinaryArray | None
    partitions: pa.Int32Array | None
    timestamps_ms: npt.NDArray[np.int64] | None
    headers: list[list[Header]] | None
    #: Index of the first row of the source batch within the task's input (for messages).
    row_base: int = 0
    #: For a batch split by topic, each row's index in the source batch; None when unsplit.
    source_rows: pa.Array | None = None

    @property
    def num_rows(self) -> int:
        return len(self.values)

    def row_number(self, index: int) -> int:
        """The task-input row number of this group's row ``index``."""
        if self.source_rows is None:
            return self.row_base + index
        return self.row_base + int(self.source_rows[index].as_py())


def timestamps_ms(array: pa.Array, now_ms: int) -> npt.NDArray[np.int64]:
    """Epoch milliseconds from a timestamp (any unit) or int64-millis column; nulls -> now."""
    millis: npt.NDArray[np.int64]
    if pa.types.is_timestamp(array.type):
        unit = array.type.unit
        raw = int_column(array.cast(pa.int64()), 0, np.int64)
        mul, div = _TO_MS[unit]
        # Floor, not truncate: an instant before 1970 must not move later.
        millis = np.floor_divide(raw * mul, div)
    else:
        millis = int_column(array.cast(pa.int64()), 0, np.int64)
    if array.null_count:
        millis[~valid_mask(array)] = now_ms
    return millis


def _headers(
    array: pa.Array, topic: str, row_number: Callable[[int], int]
) -> list[list[Header]] | None:
    """Per-row header lists, or None when no row has a header (the common, fast case)."""
    lengths = pc.list_value_length(array).fill_null(0)
    if len(array) == 0 or pc.max(lengths).as_py() == 0:
        return None
    rows: list[list[Header]] = []
    for index, row in enumerate(array.to_pylist()):
        if not row:
            rows.append([])
            continue
        out: list[Header] = []
        for item in row:
            if item is None or item["key"] is None:
                raise BadRecordError(
                    row_number(index),
                    topic,
                    f"row {row_number(index)} has a null header (or a null header key) in column "
                    "'headers'. Fix: filter such entries out, e.g. filter(headers, h -> h.key IS "
                    "NOT NULL).",
                    code="invalid_header",
                    stage="HEADER_CONVERTER",
                )
            out.append((item["key"], item["value"]))
        rows.append(out)
    return rows


def _first_index(mask: pa.Array) -> int:
    indices = pc.indices_nonzero(mask)
    return int(indices[0].as_py()) if len(indices) else -1


def topic_columns(
    batch: pa.RecordBatch,
    layout: InputLayout,
    topic_option: str | None,
    *,
    now_ms: int,
    row_base: int = 0,
) -> list[TopicColumns]:
    """Split ``batch`` by topic into send-ready columns.

    ``row_base`` is the index of the batch's first row within the task's input, for messages.
    """
    if batch.num_rows == 0:
        return []
    if topic_option is not None:
        return [_columns(batch, layout, topic_option, now_ms, row_base, source_rows=None)]
    if not layout.topic_column:
        raise SinkDataError("no topic: neither the 'topic' option nor a 'topic' column is set")

    topics = batch.column("topic")
    if topics.null_count:
        row = row_base + _first_index(topics.is_null())
        raise BadRecordError(
            row,
            None,
            f"row {row} has a null 'topic' and no 'topic' option is set. Fix: set "
            ".option('topic', 'name') as a default, or fill the column, e.g. "
            "coalesce(topic, 'name').",
            code="null_topic",
        )
    distinct = pc.unique(topics).to_pylist()
    if len(distinct) == 1:
        return [_columns(batch, layout, str(distinct[0]), now_ms, row_base, source_rows=None)]
    groups = []
    for name in distinct:
        mask = pc.equal(topics, pa.scalar(name, topics.type))
        groups.append(
            _columns(
                batch.filter(mask),
                layout,
                str(name),
                now_ms,
                row_base,
                source_rows=pc.indices_nonzero(mask),
            )
        )
    return groups


def _columns(
    batch: pa.RecordBatch,
    layout: InputLayout,
    topic: str,
    now_ms: int,
    row_base: int,
    *,
    source_rows: pa.Array | None,
) -> TopicColumns:
    def row_number(index: int) -> int:
        if source_rows is None:
            return row_base + index
        return row_base + int(source_rows[index].as_py())

    if not topic:
        raise BadRecordError(
            row_number(0),
            None,
            f"row {row_number(0)} has an empty 'topic'. Fix: filter such rows out, or set "
            ".option('topic', 'name').",
            code="null_topic",
        )
    values = binary_column(batch.column("value"), "value")
    keys = binary_column(batch.column("key"), "key") if layout.key_column else None
    if keys is not None and keys.null_count == len(keys):
        keys = None
    partitions: pa.Int32Array | None = None
    if layout.partition_column:
        column = batch.column("partition")
        if column.null_count < len(column):
            partitions = column if column.type == pa.int32() else column.cast(pa.int32())
    timestamps = (
        timestamps_ms(batch.column("timestamp"), now_ms) if layout.timestamp is not None else None
    )
    if timestamps is not None and len(timestamps) and int(timestamps.min()) < 0:
        index = int(np.argmax(timestamps < 0))
        raise BadRecordError(
            row_number(index),
            topic,
            f"row {row_number(index)} has a 'timestamp' before 1970-01-01 "
            f"({int(timestamps[index])} ms): Kafka record timestamps are non-negative epoch "
            "milliseconds (-1 means 'no timestamp'). Fix: filter such rows out, set their "
            "timestamp to null (null means the current time), or drop the 'timestamp' column.",
            code="invalid_timestamp",
        )
    headers = (
        _headers(batch.column("headers"), topic, row_number) if layout.headers_column else None
    )
    return TopicColumns(topic, values, keys, partitions, timestamps, headers, row_base, source_rows)


def check_partitions(columns: TopicColumns, num_partitions: int) -> None:
    """Raise ``BadRecordError`` (a :class:`SinkDataError`) for the first ``partition`` value not
    in [0, num_partitions)."""
    partitions = columns.partitions
    if partitions is None:
        return
    stats: Any = pc.min_max(partitions)
    low, high = stats["min"].as_py(), stats["max"].as_py()
    if low is None or (low >= 0 and high < num_partitions):
        return
    bad = pc.or_(pc.less(partitions, 0), pc.greater_equal(partitions, num_partitions))
    index = _first_index(pc.fill_null(bad, False))
    value = partitions[index].as_py()
    raise BadRecordError(
        columns.row_number(index),
        columns.topic,
        f"row {columns.row_number(index)} (topic '{columns.topic}') has partition {value}, "
        f"which is out of range: the topic has {num_partitions} partitions "
        f"(0..{num_partitions - 1}). Fix: use a partition that exists (or null to let the "
        "partitioner choose), or add partitions to the topic.",
        code="partition_out_of_range",
    )


def merge_groups(groups: list[TopicColumns], row_base: int) -> list[TopicColumns]:
    """One group per topic from groups of contiguous runs of one batch (the runs between bad
    rows), so a batch with bad rows is still sent in one call per topic. ``row_base`` is the
    batch's first row; every row keeps its task-input number."""
    by_topic: dict[str, list[TopicColumns]] = {}
    for group in groups:
        by_topic.setdefault(group.topic, []).append(group)
    if all(len(runs) == 1 for runs in by_topic.values()):
        return groups
    return [_merged(runs, row_base) if len(runs) > 1 else runs[0] for runs in by_topic.values()]


def _merged(runs: list[TopicColumns], row_base: int) -> TopicColumns:
    sizes = [run.num_rows for run in runs]
    source_rows = np.concatenate(
        [
            (run.row_base - row_base)
            + (
                np.arange(run.num_rows, dtype=np.int64)
                if run.source_rows is None
                else np.asarray(run.source_rows, dtype=np.int64)
            )
            for run in runs
        ]
    )

    def column(parts: list[pa.Array | None]) -> Any:
        present = [part for part in parts if part is not None]
        if not present:
            return None
        kind = present[0].type
        return pa.concat_arrays(
            [
                pa.nulls(n, kind) if part is None else part
                for part, n in zip(parts, sizes, strict=True)
            ]
        )

    stamps = [run.timestamps_ms for run in runs]
    headers = [run.headers for run in runs]
    return TopicColumns(
        runs[0].topic,
        pa.concat_arrays([run.values for run in runs]),
        column([run.keys for run in runs]),
        column([run.partitions for run in runs]),
        None if any(s is None for s in stamps) else np.concatenate(stamps),  # type: ignore[arg-type]
        None
        if all(h is None for h in headers)
        else [row for h, n in zip(headers, sizes, strict=True) for row in (h or [[]] * n)],
        row_base,
        pa.array(source_rows, pa.int64()),
    )
