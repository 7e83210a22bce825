"""The sink's per-batch metrics in a real streaming query: commit documents, report, Pushgateway.

A file-source stream of three micro-batches (60, 40 and 50 rows, gzip) writes to a real Kafka
with ``metricsPushGateway`` set to a real Prometheus Pushgateway (``LocalPushgateway``). Then:
each commit document's ``metrics`` section counts, per topic-partition, exactly what an
independent consumer (kafka-python) reads; ``python -m kafka_sink report --plot`` on the
checkpoint prints the three batches and writes a PNG that reads back as an image; and the
Pushgateway holds the query's ``pykafka_records_total`` series, read back over its HTTP API.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from sparkutil import KAFKA_OPTIONS, commit_docs

from kafka_sink.report.plot import plot_rows
from kafka_sink.report.reader import load_commits
from kafka_sink.report.table import report_rows
from kafka_sink.testing.oracle import read_all

INPUT_SCHEMA = "id BIGINT, k STRING"
SIZES = (60, 40, 50)

pytestmark = pytest.mark.slow


def _write_inputs(directory: Path, start: int, count: int, name: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{name}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for i in range(start, start + count):
            f.write(json.dumps({"id": i, "k": f"k{i % 7}"}) + "\n")
    tmp.rename(directory / f"{name}.json")


def test_commit_documents_report_and_pushgateway_carry_what_kafka_holds(
    spark, kafka_bootstrap, topic_factory, pushgateway, tmp_path
) -> None:
    topic = topic_factory(partitions=3)
    inputs, checkpoint = tmp_path / "in", tmp_path / "ck"
    start = 0
    for n, size in enumerate(SIZES):
        _write_inputs(inputs, start, size, f"f{n}")
        start += size
    total = sum(SIZES)
    query_name = f"metrics_{topic.replace('-', '_')[-20:]}"
    df = (
        spark.readStream.schema(INPUT_SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .json(str(inputs))
        .selectExpr("k AS key", "repeat(CAST(id AS STRING), 20) AS value")
    )
    query = (
        df.writeStream.format("pykafka")
        .queryName(query_name)
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .options(**KAFKA_OPTIONS)
        .option("kafka.compression.type", "gzip")
        .option("topic", topic)
        .option("checkpointLocation", str(checkpoint))
        .option("metricsPushGateway", pushgateway.url)
        .option("metricsJob", "pykafka-test")
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180)
    assert query.exception() is None

    records = read_all(kafka_bootstrap, topic, expected=total)
    assert len(records) == total
    read_per_partition = Counter((r.topic, r.partition) for r in records)
    on_broker_bytes = sum(len(r.value) + len(r.key or b"") for r in records)

    docs = commit_docs(checkpoint / "pykafka-commits")
    assert [d["batch_id"] for d in docs] == [0, 1, 2]
    counted: Counter[tuple[str, int]] = Counter()
    for doc, size in zip(docs, SIZES, strict=True):
        metrics = doc["metrics"]
        assert metrics["records"] == doc["record_count"] == size
        assert metrics["errors"] == 0 and metrics["requests"] >= 1
        assert metrics["produce_latency_ms_max"] >= metrics["produce_latency_ms_avg"] > 0
        assert metrics["compression_ratio"] > 1  # gzip over repeated digits
        assert metrics["uncompressed_bytes"] > metrics["compressed_bytes"] > 0
        for p in metrics["partitions"]:
            counted[(p["topic"], p["partition"])] += p["records"]
    assert counted == read_per_partition
    total_uncompressed = sum(d["metrics"]["uncompressed_bytes"] for d in docs)
    assert total_uncompressed > on_broker_bytes  # the record framing comes on top of the payload

    png = tmp_path / "report.png"
    report = subprocess.run(
        [sys.executable, "-m", "kafka_sink", "report", str(checkpoint), "--plot", str(png)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert report.returncode == 0, report.stderr
    lines = report.stdout.splitlines()
    assert "3 batches" in lines[0]
    assert [line.split()[:3] for line in lines if line.split()[:1] in (["0"], ["1"], ["2"])] == [
        ["0", "1", "60"],
        ["1", "1", "40"],
        ["2", "1", "50"],
    ]
    assert lines[-2].split()[:3] == ["total", "3", str(total)]
    import matplotlib.image

    image = matplotlib.image.imread(str(png))
    assert image.shape[0] >= 800 and image.shape[1] >= 800
    assert float(image[..., :3].std()) > 0.05  # drawn, not blank
    # The same picture drawn here: every series, one point per batch, from the documents.
    read_back = load_commits(str(checkpoint)).documents
    drawn = plot_rows(report_rows(read_back), str(tmp_path / "again.png"), title="t")
    # (the documents round rows/s to 0.1)
    assert drawn["rows/s"]["rows/s"] == pytest.approx(
        [d["metrics"]["records_per_s"] for d in docs], abs=0.05
    )
    assert drawn["retries"]["retries"] == [0.0, 0.0, 0.0]
    assert all(v > 0 for v in drawn["produce latency (ms)"]["max"])
    assert len(drawn["commit time (ms)"]["commit time (ms)"]) == 3
    assert all(v > 0 for v in drawn["MB/s (as sent)"]["MB/s (as sent)"])

    groups = [
        g
        for g in pushgateway.metrics()
        if g["labels"].get("job") == "pykafka-test" and g["labels"].get("query") == query_name
    ]
    assert len(groups) == 1
    pushed = groups[0]["pykafka_records_total"]["metrics"]
    assert {
        (m["labels"]["topic"], int(m["labels"]["partition"])): int(float(m["value"]))
        for m in pushed
    } == dict(read_per_partition)
    batch_records = groups[0]["pykafka_batch_records"]["metrics"][0]["value"]
    assert int(float(batch_records)) == SIZES[-1]
