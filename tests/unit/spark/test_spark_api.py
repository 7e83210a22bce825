"""The writers' bases follow what the running PySpark offers (``spark_api.py``), and a task's
input reaches the write loop as Arrow record batches whether Spark hands it batches or rows
(``executor/rows.py``)."""

from __future__ import annotations

import datetime
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import Row
from pyspark.sql import datasource as spark_datasource
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kafka_sink.spark import spark_api
from kafka_sink.spark.executor.rows import arrow_batches

HEADER = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", StringType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("headers", ArrayType(HEADER)),
        StructField("timestamp", TimestampType()),
        StructField("event", StructType([StructField("id", LongType())])),
    ]
)


@pytest.fixture
def pyspark_4_0(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """``spark_api`` as loaded by a PySpark without a streaming Arrow writer class (4.0)."""
    monkeypatch.delattr(spark_datasource, "DataSourceStreamArrowWriter", raising=False)
    yield importlib.reload(spark_api)
    monkeypatch.undo()
    importlib.reload(spark_api)


def test_on_this_pyspark_the_stream_writer_is_its_streaming_arrow_writer() -> None:
    assert spark_api.ARROW_STREAM_WRITER is hasattr(spark_datasource, "DataSourceStreamArrowWriter")
    if spark_api.ARROW_STREAM_WRITER:
        assert spark_api.StreamWriterBase is spark_datasource.DataSourceStreamArrowWriter


def test_without_a_streaming_arrow_writer_the_stream_writer_is_an_arrow_writer(
    pyspark_4_0: object,
) -> None:
    # PySpark 4.0's write function hands Arrow batches to any DataSourceArrowWriter, streaming
    # or not; the stream writer API is DataSourceStreamWriter's: the base is both.
    assert spark_api.ARROW_STREAM_WRITER is False
    base = spark_api.StreamWriterBase
    assert issubclass(base, spark_datasource.DataSourceStreamWriter)
    assert issubclass(base, spark_datasource.DataSourceArrowWriter)


def test_the_installed_pyspark_hands_the_stream_writer_arrow_batches() -> None:
    """The worker that runs a write (``pyspark/sql/worker/write_into_data_source.py``) hands
    Arrow record batches to a writer of an Arrow class and Rows to any other: the sink's stream
    writer must be of one of the classes the installed PySpark tests for, or its tasks would
    take the per-row fallback (``rows.arrow_batches``) and only be slower. Run on every PySpark
    the suites run on (4.3 and 4.0)."""
    from pyspark.sql.worker import write_into_data_source

    source = Path(write_into_data_source.__file__).read_text(encoding="utf-8")
    arrow_classes = [
        name
        for name in ("DataSourceArrowWriter", "DataSourceStreamArrowWriter")
        if f"isinstance(writer, {name}):\n" in source
    ]
    assert arrow_classes, "the write worker no longer tests for an Arrow writer class"
    handed = [
        name
        for name in arrow_classes
        if issubclass(spark_api.StreamWriterBase, getattr(spark_datasource, name))
    ]
    assert handed, (arrow_classes, spark_api.StreamWriterBase.__mro__)
    # Each Arrow branch writes the batches as they come; only the last one converts to Rows.
    for name in handed:
        branch = source.split(f"isinstance(writer, {name}):", 1)[1].lstrip().split("\n", 1)[0]
        assert branch == "res = writer.write(iterator)", branch


def test_batches_pass_through_untouched() -> None:
    batch = pa.record_batch([pa.array([b"v"])], names=["value"])
    out = list(arrow_batches(iter([batch, batch]), SCHEMA))
    assert out == [batch, batch]
    assert out[0] is batch


def test_rows_become_batches_of_the_inputs_arrow_schema_in_bounded_chunks() -> None:
    when = datetime.datetime(2026, 3, 1, 12, 30, 15, 250_000)  # naive: local wall time
    rows = [
        Row(
            key=b"k%d" % i if i % 3 else None,
            value=f"v{i}",
            topic="t" if i % 2 else None,
            partition=i % 4,
            headers=[Row(key="h", value=b"x%d" % i)] if i % 5 == 0 else None,
            timestamp=when if i != 7 else None,
            event=Row(id=i),
        )
        for i in range(10)
    ]
    batches = list(arrow_batches(iter(rows), SCHEMA, rows_per_batch=4))
    assert [b.num_rows for b in batches] == [4, 4, 2]
    table = pa.Table.from_batches(batches)
    assert table.schema.names == SCHEMA.fieldNames()
    assert table.column("key").to_pylist() == [b"k%d" % i if i % 3 else None for i in range(10)]
    assert table.column("value").to_pylist() == [f"v{i}" for i in range(10)]
    assert table.column("partition").type == pa.int32()
    assert table.column("headers").to_pylist()[5] == [{"key": "h", "value": b"x5"}]
    assert table.column("headers").to_pylist()[1] is None
    assert table.column("event").to_pylist()[3] == {"id": 3}
    stamps = table.column("timestamp").to_pylist()
    assert stamps[7] is None
    # The same instant as Spark's own hand-off: the naive value read in local time.
    assert stamps[0] == when.astimezone(datetime.UTC)


def test_an_empty_input_gives_no_batch() -> None:
    assert list(arrow_batches(iter([]), SCHEMA)) == []


class _RefusedError(Exception):
    """What PySpark raises: an error that names its condition."""

    def __init__(self, condition: str) -> None:
        super().__init__(f"[{condition}] ...")
        self.condition = condition

    def getCondition(self) -> str:
        return self.condition


class _Registration:
    def __init__(self, refusal: Exception | None) -> None:
        self.refusal = refusal
        self.calls: list[type] = []

    def register(self, source: type) -> None:
        self.calls.append(source)
        if self.refusal is not None:
            raise self.refusal


class _Session:
    def __init__(self, refusal: Exception | None = None) -> None:
        self.dataSource = _Registration(refusal)


def test_registering_where_pyspark_keeps_the_discovered_source_succeeds() -> None:
    from kafka_sink.spark.datasource import PyKafkaDataSource
    from kafka_sink.spark.workers import register_source

    session = _Session(_RefusedError("DATA_SOURCE_ALREADY_EXISTS"))
    register_source(session)  # PySpark 4.0 with the package installed: discovered already
    assert session.dataSource.calls == [PyKafkaDataSource]
    fresh = _Session()
    register_source(fresh)
    assert fresh.dataSource.calls == [PyKafkaDataSource]


def test_any_other_refusal_of_the_registration_is_raised() -> None:
    from kafka_sink.spark.workers import register_source

    with pytest.raises(_RefusedError):
        register_source(_Session(_RefusedError("DATA_SOURCE_TYPE_MISMATCH")))
    with pytest.raises(RuntimeError):
        register_source(_Session(RuntimeError("no condition")))


class _BoundSource:
    """What a classic session's data source manager answers for the discovered source."""

    def __init__(self, python: str) -> None:
        self.python = python

    def sessionState(self) -> _BoundSource:
        return self

    def dataSourceManager(self) -> _BoundSource:
        return self

    def lookupDataSource(self, name: str) -> _BoundSource:
        assert name == "pykafka"
        return self

    def dataSourceCls(self) -> _BoundSource:
        return self

    def pythonExec(self) -> str:
        return self.python


def _discovered_session(bound: str) -> _Session:
    session = _Session(_RefusedError("DATA_SOURCE_ALREADY_EXISTS"))
    session._jsparkSession = _BoundSource(bound)  # type: ignore[attr-defined]
    return session


def test_register_refuses_a_discovered_source_bound_to_another_interpreter(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from kafka_sink.sink_errors import SinkWorkerError
    from kafka_sink.spark import workers

    workers_python = str(tmp_path / "cluster-env" / "python")
    monkeypatch.setattr(workers, "check_workers", lambda spark: workers_python)
    with pytest.raises(SinkWorkerError) as info:
        workers.register(_discovered_session("/usr/bin/python3"))
    message = str(info.value)
    assert "/usr/bin/python3" in message and workers_python in message
    assert "PYSPARK_DRIVER_PYTHON" in message


def test_register_accepts_a_discovered_source_bound_to_the_workers_interpreter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kafka_sink.spark import workers

    monkeypatch.setattr(workers, "check_workers", lambda spark: sys.executable)
    workers.register(_discovered_session(sys.executable))
    # A session that cannot say what the source is bound to (Spark Connect) is not refused.
    workers.register(_Session(_RefusedError("DATA_SOURCE_ALREADY_EXISTS")))


@pytest.fixture
def new_york(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The worker's local time zone is not UTC."""
    import time

    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_nested_naive_timestamps_name_the_same_instant_as_top_level_ones(new_york: None) -> None:
    schema = StructType(
        [
            StructField("value", StringType()),
            StructField("timestamp", TimestampType()),
            StructField("event", StructType([StructField("at", TimestampType())])),
            StructField("times", ArrayType(TimestampType())),
        ]
    )
    noon = datetime.datetime(2024, 1, 1, 12, 0)  # local wall time, as Spark gives it
    row = Row(value="v", timestamp=noon, event=Row(at=noon), times=[noon, None])
    table = pa.Table.from_batches(list(arrow_batches(iter([row]), schema)))
    instant = datetime.datetime(2024, 1, 1, 17, 0, tzinfo=datetime.UTC)
    assert table.column("timestamp").to_pylist() == [instant]
    assert table.column("event").to_pylist() == [{"at": instant}]
    assert table.column("times").to_pylist() == [[instant, None]]
