"""The sink's per-batch metrics: a task's delta, the driver's sums, the document, the push.

Tasks run with ``MeteredFakeProducer`` (a fake producer keeping the producer's snapshot);
the batch sums are checked on hand-made task metrics with the manual clock; the push goes to a
fake Pushgateway (an HTTP server recording what it is sent) and to a port nobody listens on.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pyarrow as pa
import pytest

from kafka_sink.clock import ManualClock
from kafka_sink.sink_errors import SinkOptionError
from kafka_sink.spark.commit_log.document import PyKafkaCommitMessage
from kafka_sink.spark.executor import producer_cache
from kafka_sink.spark.metrics import (
    PartitionMetrics,
    TaskMeter,
    TaskMetrics,
    batch_metrics,
    metrics_summary,
    prometheus,
)
from kafka_sink.spark.options import SinkOptions
from kafka_sink.spark.schema import InputLayout
from kafka_sink.spark.writer import PyKafkaStreamWriter
from tests.fakes.producer_metrics import MeteredFakeProducer, Snapshot, Totals
from tests.fakes.spark import FakeProducer

LAYOUT = InputLayout(False, False, False, False, None)


@pytest.fixture(autouse=True)
def metered(monkeypatch):
    FakeProducer.instances = []
    producer_cache.close_all()
    monkeypatch.setattr(producer_cache, "_create", MeteredFakeProducer)
    yield FakeProducer.instances
    producer_cache.close_all()


def _stream(tmp_path, **extra: str) -> PyKafkaStreamWriter:
    opts = {
        "kafka.bootstrap.servers": "h:1",
        "topic": "t",
        "checkpointlocation": str(tmp_path),
        "queryname": "q1",
        **extra,
    }
    return PyKafkaStreamWriter(
        SinkOptions.from_options(opts), LAYOUT, streaming=True, overwrite=False, write_id="s"
    )


def _batch(n: int) -> pa.RecordBatch:
    return pa.record_batch({"value": [b"x"] * n})


# -- a task's delta --------------------------------------------------------------------------------


def test_a_task_carries_its_own_delta_not_the_cached_producers_totals(tmp_path, metered) -> None:
    writer = _stream(tmp_path)
    first = writer.write(iter([_batch(4)]))
    second = writer.write(iter([_batch(3), _batch(2)]))
    [producer] = metered  # one cached producer served both tasks
    assert isinstance(first, PyKafkaCommitMessage) and isinstance(second, PyKafkaCommitMessage)
    assert first.metrics is not None and second.metrics is not None
    assert first.metrics.records == 4
    assert second.metrics.records == 5
    assert {(p.topic, p.partition): p.records for p in second.metrics.partitions} == {
        ("t", 1): 3,
        ("t", 0): 2,
    }
    assert second.metrics.requests == 2 and second.metrics.request_latency_ms_sum == 10.0
    assert producer.resets == 2  # each lease reset the producer's maxima
    assert second.metrics.first_record_wall_ms is None  # no transaction
    assert second.to_json()["duration_ms"] == second.metrics.duration_ms


def test_a_producer_without_snapshots_gives_no_metrics(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(producer_cache, "_create", FakeProducer)
    message = _stream(tmp_path).write(iter([_batch(2)]))
    assert isinstance(message, PyKafkaCommitMessage) and message.metrics is None


def test_the_meter_times_the_task_and_its_transactions_first_record() -> None:
    clock = ManualClock(now_ms=1_000, wall_ms=50_000)
    meter = TaskMeter(clock)
    producer = MeteredFakeProducer({})
    clock.advance(30)
    meter.lease(producer)
    producer.send_columns("t", pa.array([b"a", b"b"]))
    clock.advance(70)
    metrics = meter.result(producer, transactional=True)
    assert metrics is not None
    assert (metrics.started_wall_ms, metrics.first_record_wall_ms) == (50_000, 50_030)
    assert metrics.duration_ms == 100
    assert metrics.partitions == (PartitionMetrics("t", 0, 2, 20, 8, 1, 0, 0),)


def test_snapshot_delta_drops_unchanged_partitions_and_keeps_the_later_maxima() -> None:
    before = Snapshot({("t", 0): Totals(5, 50, 20, 1)}, 1, 4.0, 4.0)
    after = Snapshot({("t", 0): Totals(5, 50, 20, 1), ("t", 1): Totals(2, 20, 8, 1)}, 2, 9.0, 5.0)
    delta = after.minus(before)
    assert dict(delta.partitions) == {("t", 1): Totals(2, 20, 8, 1)}
    assert (delta.requests, delta.request_latency_ms_sum, delta.request_latency_ms_max) == (
        1,
        5.0,
        5.0,
    )


# -- the driver's sums -----------------------------------------------------------------------------


def _task(
    records: dict[int, int],
    *,
    requests: int = 2,
    latency_sum: float = 10.0,
    latency_max: float = 7.0,
    started: int = 10_000,
    duration: int = 500,
    first: int | None = None,
    retries: int = 0,
) -> TaskMetrics:
    parts = tuple(
        PartitionMetrics("t", p, n, 100 * n, 25 * n, 1, 0, retries) for p, n in records.items()
    )
    return TaskMetrics(
        parts, requests, latency_sum, latency_max, 3.0, 2.0, started, duration, first
    )


def test_batch_metrics_sum_per_partition_and_take_ratios_of_sums() -> None:
    section = batch_metrics(
        [
            (0, _task({0: 100, 1: 50}, requests=2, latency_sum=10.0, latency_max=7.0)),
            (
                1,
                _task(
                    {1: 50},
                    requests=3,
                    latency_sum=30.0,
                    latency_max=20.0,
                    duration=900,
                    started=10_200,
                    retries=4,
                ),
            ),
        ],
        commit_duration_ms=40,
        committed_wall_ms=12_000,
    )
    assert section is not None
    assert section["records"] == 200
    assert [(p["partition"], p["records"]) for p in section["partitions"]] == [(0, 100), (1, 100)]
    assert section["records"] == sum(p["records"] for p in section["partitions"])
    assert (section["uncompressed_bytes"], section["compressed_bytes"]) == (20_000, 5_000)
    assert section["compression_ratio"] == 4.0
    assert section["produce_latency_ms_avg"] == 8.0  # 40 ms over 5 requests, not (5 + 10) / 2
    assert section["produce_latency_ms_max"] == 20.0
    assert section["retries"] == 4
    assert section["throttle_time_ms_sum"] == 6.0 and section["throttle_time_ms_max"] == 2.0
    assert section["slowest_task"] == {"partition_id": 1, "duration_ms": 900}
    assert section["commit_duration_ms"] == 40
    assert section["write_duration_ms"] == 2_000  # first task's start -> the commit
    assert section["records_per_s"] == 100.0
    assert "transactions" not in section
    assert json.loads(json.dumps(section)) == section


def test_batch_metrics_time_each_transaction_from_its_first_record_to_the_commit() -> None:
    section = batch_metrics(
        [(0, _task({0: 1}, first=10_000)), (1, _task({1: 1}, first=11_000))],
        commit_duration_ms=5,
        committed_wall_ms=12_000,
    )
    assert section is not None
    assert section["transactions"] == {
        "count": 2,
        "first_record_to_commit_ms_max": 2_000,
        "first_record_to_commit_ms_avg": 1_500.0,
    }


def test_no_task_metrics_no_section() -> None:
    assert batch_metrics([], commit_duration_ms=1, committed_wall_ms=1) is None


def test_the_summary_has_what_a_person_scans_for() -> None:
    section = batch_metrics(
        [(0, _task({0: 1_000}, retries=2))], commit_duration_ms=1, committed_wall_ms=10_500
    )
    assert section is not None
    assert metrics_summary(section) == (
        "1000 records, 0.03 MB, 2000 rows/s, latency avg 5.0 ms max 7.0 ms, 2 retries"
    )


# -- the commit document and its line --------------------------------------------------------------


def test_a_commit_document_carries_the_metrics_section_and_its_line_the_numbers(
    tmp_path, caplog
) -> None:
    writer = _stream(tmp_path)
    messages = [writer.write(iter([_batch(4)])), writer.write(iter([_batch(3)]))]
    with caplog.at_level(logging.INFO, logger="kafka_sink"):
        writer.commit(messages, 7)
    document = json.loads((tmp_path / "pykafka-commits" / "7.json").read_text())
    metrics = document["metrics"]
    assert metrics["records"] == document["record_count"] == 7
    assert {(p["partition"], p["records"]) for p in metrics["partitions"]} == {(0, 4), (1, 3)}
    assert metrics["tasks_measured"] == 2 and metrics["commit_duration_ms"] >= 0
    assert metrics["produce_latency_ms_avg"] == 5.0
    [line] = [r.getMessage() for r in caplog.records if "pykafka commit" in r.getMessage()]
    assert "7 records, 0.00 MB" in line and "rows/s" in line and "0 retries" in line


def test_an_abort_document_has_no_metrics_section(tmp_path) -> None:
    writer = _stream(tmp_path)
    writer.abort([writer.write(iter([_batch(2)])), None], 3)
    document = json.loads((tmp_path / "pykafka-commits" / "3.aborted.json").read_text())
    assert "metrics" not in document


# -- the options -----------------------------------------------------------------------------------


def _options(**extra: str) -> SinkOptions:
    return SinkOptions.from_options({"kafka.bootstrap.servers": "h:1", "topic": "t", **extra})


def test_push_gateway_options_parse_with_a_default_job() -> None:
    opts = _options(metricspushgateway="pg:9091")
    assert (opts.metrics_push_gateway, opts.metrics_job) == ("http://pg:9091", "pykafka")
    opts = _options(metricspushgateway="https://pg", metricsjob="etl")
    assert (opts.metrics_push_gateway, opts.metrics_job) == ("https://pg", "etl")


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ({"metricsjob": "etl"}, "'metricsJob'.*'metricsPushGateway', which is not set"),
        ({"metricspushgateway": " "}, "'metricsPushGateway' is empty"),
        ({"metricspushgateway": "ftp://pg"}, "not an http\\(s\\) URL"),
        ({"metricspushgateway": "pg:1", "metricsjob": "a b"}, "'metricsJob' is 'a b'"),
    ],
)
def test_bad_push_gateway_options_are_refused_naming_them(extra, match) -> None:
    with pytest.raises(SinkOptionError, match=match):
        _options(**extra)


def test_a_push_gateway_without_prometheus_client_is_refused_naming_the_extra(
    monkeypatch,
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "prometheus_client" else real(name, *a),
    )
    with pytest.raises(SinkOptionError, match=r"pip install 'pykafka-sink\[prometheus\]'"):
        _options(metricspushgateway="pg:9091")


def test_the_gateways_password_never_shows() -> None:
    opts = _options(metricspushgateway="http://u:s3cret@pg:9091")
    assert "s3cret" not in repr(opts)
    with pytest.raises(SinkOptionError) as info:
        _options(metricspushgateway="ftp://u:s3cret@pg")
    assert "s3cret" not in str(info.value)


# -- the push --------------------------------------------------------------------------------------


class _Gateway(BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[str, str, str]]] = []

    def do_PUT(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"])).decode()
        _Gateway.received.append(("PUT", self.path, body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def gateway():
    _Gateway.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Gateway)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Gateway.received
    server.shutdown()
    server.server_close()


def _samples(body: str) -> dict[str, float]:
    out = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_each_commit_pushes_the_querys_series(tmp_path, gateway) -> None:
    url, received = gateway
    prometheus._TOTALS.clear()
    writer = _stream(tmp_path, metricspushgateway=url, metricsjob="etl")
    writer.commit([writer.write(iter([_batch(4)])), writer.write(iter([_batch(3)]))], 0)
    writer.commit([writer.write(iter([_batch(4)]))], 1)
    assert [(m, p) for m, p, _ in received] == [("PUT", "/metrics/job/etl/query/q1")] * 2
    samples = _samples(received[-1][2])
    assert samples['pykafka_records_total{partition="0",topic="t"}'] == 8.0
    assert samples['pykafka_records_total{partition="1",topic="t"}'] == 3.0
    assert samples["pykafka_produce_latency_seconds_count"] == 3.0
    assert samples["pykafka_produce_latency_seconds_sum"] == pytest.approx(0.015)
    assert samples["pykafka_batch_records"] == 4.0
    assert samples["pykafka_batch_id"] == 1.0
    assert samples["pykafka_batches_total"] == 2.0
    assert samples['pykafka_compressed_bytes_total{partition="0",topic="t"}'] == 32.0


def test_partition_series_are_bounded_per_query() -> None:
    totals = prometheus._Totals()
    partitions = [
        {
            "topic": "t",
            "partition": p,
            "records": 1,
            "uncompressed_bytes": 1,
            "compressed_bytes": 1,
        }
        for p in range(prometheus.MAX_PARTITION_SERIES + 10)
    ]
    totals.add(
        {
            "partitions": partitions,
            "retries": 0,
            "errors": 0,
            "requests": 0,
            "produce_latency_ms_avg": None,
            "throttle_time_ms_sum": 0.0,
        }
    )
    assert len(totals.records) == prometheus.MAX_PARTITION_SERIES + 1
    assert totals.records[("t", "other")] == 10


def test_a_failed_push_is_a_warning_and_the_batch_is_committed(tmp_path, caplog) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Gateway)
    port = server.server_address[1]
    server.server_close()  # nobody listens there now
    writer = _stream(tmp_path, metricspushgateway=f"http://u:pw12345@127.0.0.1:{port}")
    message = writer.write(iter([_batch(2)]))
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="kafka_sink"):
        writer.commit([message], 0)
    assert time.monotonic() - started < prometheus.PUSH_TIMEOUT_S + 2
    assert (tmp_path / "pykafka-commits" / "0.json").exists()
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    text = warning.getMessage()
    assert "pushing batch 0 to the Pushgateway" in text and "commit file" in text
    assert "pw12345" not in text


class _Transactional:
    """The exactly-once strategy's shape around a metered producer: a prepared transaction."""

    def acquire(self, task: Any) -> MeteredFakeProducer:
        return MeteredFakeProducer({})

    def finish(self, producer: MeteredFakeProducer, bound_s: float) -> Any:
        from kafka_sink.prepared import PreparedTransaction

        return PreparedTransaction("p-0-0", 1, 0, (("t", 0),))

    def fail(self, producer: MeteredFakeProducer, write: Any, exc: BaseException) -> None:
        pass


def test_an_exactly_once_task_carries_its_transactions_first_record_time(monkeypatch) -> None:
    from kafka_sink.spark.executor import task as task_module

    monkeypatch.setattr(producer_cache, "release", lambda producer: None)
    before_ms = int(time.time() * 1000)
    write = task_module._TaskWrite(
        _options(), LAYOUT, task_module._TaskInfo(3, 0, 9, 5), fingerprinted=True
    )
    message = write.run(_Transactional(), iter([_batch(2), _batch(3)]))
    assert message.transaction is not None and message.metrics is not None
    first = message.metrics.first_record_wall_ms
    assert first is not None and before_ms <= first <= int(time.time() * 1000)
    assert message.metrics.records == 5
