"""The commit log in S3, against a real S3-compatible server (S3Proxy, filesystem backend).

What the sink stored is read back from the server's backend directory on disk, not through S3:
an object ``s3a://<bucket>/<key>`` is the file ``<basedir>/<bucket>/<key>``.

Spark itself writes its checkpoint through Hadoop, which has no s3a client without hadoop-aws
and the AWS SDK bundle (hundreds of MB), so the Spark queries here keep a local checkpoint and
put ``commitLog`` in S3; the default under an s3a checkpoint is shown by calling the data source
on the driver as Spark does (plan, then commit) against the same server.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sparkutil import KAFKA_OPTIONS, committed_ranges, observed_ranges

from kafka_sink.sink_errors import SinkOptionError
from kafka_sink.spark.commit_log.document import (
    PartitionRange,
    PyKafkaCommitMessage,
    write_document,
)
from kafka_sink.spark.datasource import PyKafkaDataSource
from kafka_sink.spark.options import SinkOptions
from kafka_sink.testing.oracle import read_all
from kafka_sink.testing.s3 import LocalS3

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9"}  # never contacted: nothing here sends


@dataclass
class S3Spark:
    spark: Any
    server: LocalS3
    bucket: str
    #: ``with env(vars):`` the Python workers Spark starts for pykafka see ``vars``.
    env: Callable[[dict[str, str]], Any]


@pytest.fixture
def s3_spark(spark, spark_env, local_s3: LocalS3, bucket: str) -> S3Spark:
    return S3Spark(spark, local_s3, bucket, spark_env)


def _on_disk(server: LocalS3, bucket: str, key: str) -> Path:
    return server.basedir / bucket / key


def _docs(directory: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))]


def test_commit_file_lands_in_s3_whole_and_a_rewrite_keeps_the_first(aws, bucket) -> None:
    prefix = f"s3a://{bucket}/{uuid.uuid4().hex[:8]}/pykafka-commits"
    opts = SinkOptions.from_options({**BASE, "commitlog": prefix})
    assert opts.check_commit_dir(streaming=False) == prefix
    directory = _on_disk(aws, bucket, prefix.split("/", 3)[3])
    assert not [p for p in directory.iterdir() if p.is_file()]  # the probe object is gone
    where = write_document(prefix, "0.json", {"batch_id": 0, "n": 1})
    assert where == f"{prefix}/0.json"
    assert json.loads((directory / "0.json").read_text()) == {"batch_id": 0, "n": 1}
    write_document(prefix, "0.json", {"batch_id": 0, "n": 2})  # the batch re-run on restart
    names = sorted(p.name for p in directory.iterdir() if p.is_file())
    assert names[0] == "0.json" and names[1].startswith("0.json.replaced-") and len(names) == 2
    assert json.loads((directory / "0.json").read_text())["n"] == 2
    assert json.loads((directory / names[1]).read_text())["n"] == 1


def test_missing_bucket_fails_on_the_driver_with_the_location(aws) -> None:
    opts = SinkOptions.from_options({**BASE, "commitlog": "s3a://no-such-bucket-x/commits"})
    with pytest.raises(SinkOptionError) as info:
        opts.check_commit_dir(streaming=False)
    message = str(info.value)
    assert "option 'commitLog'" in message and "s3a://no-such-bucket-x/commits" in message
    assert "Bucket 'no-such-bucket-x' not found" in message and "bucket must exist" in message
    assert "allow_bucket_creation" not in message  # pyarrow's option is not the user's


def test_default_commit_log_under_an_s3a_checkpoint(aws, bucket, monkeypatch) -> None:
    """Plan and commit micro-batch 0 as Spark does on the driver: the file lands under the
    checkpoint's pykafka-commits in the bucket. No broker: the preflight is skipped."""
    from kafka_sink.spark import datasource

    monkeypatch.setattr(datasource, "check_write", lambda *_a, **_k: None)
    run = uuid.uuid4().hex[:8]
    source = PyKafkaDataSource(
        {**BASE, "topic": "t", "checkpointLocation": f"s3a://{bucket}/{run}/ck"}
    )
    from pyspark.sql.types import StringType, StructField, StructType

    schema = StructType([StructField("value", StringType())])
    source.streamWriter(schema, False)  # planning: probes the location
    message = PyKafkaCommitMessage(0, 0, 7, 0, (PartitionRange("t", 0, 100, 109, 10),))
    source.streamWriter(schema, False).commit([message], 0)
    doc = json.loads(_on_disk(aws, bucket, f"{run}/ck/pykafka-commits/0.json").read_text())
    assert doc["batch_id"] == 0 and doc["record_count"] == 10
    assert doc["offsets"][0]["first_offset"] == 100 and doc["offsets"][0]["last_offset"] == 109


def test_stream_commit_log_in_s3_matches_kafka(
    s3_spark, kafka_bootstrap, topic_factory, tmp_path
) -> None:
    spark, local_s3, bucket = s3_spark.spark, s3_spark.server, s3_spark.bucket
    topic = topic_factory(partitions=2)
    key = f"{uuid.uuid4().hex[:8]}/commits"
    inputs = tmp_path / "in"
    inputs.mkdir()
    for n in range(2):
        (inputs / f"f{n}.json").write_text(
            "".join(json.dumps({"id": i}) + "\n" for i in range(n * 30, n * 30 + 30))
        )
    with s3_spark.env(local_s3.env()):
        query = (
            spark.readStream.schema("id BIGINT")
            .option("maxFilesPerTrigger", 1)
            .json(str(inputs))
            .selectExpr("CAST(id AS STRING) AS value")
            .writeStream.format("pykafka")
            .option("kafka.bootstrap.servers", kafka_bootstrap)
            .options(**KAFKA_OPTIONS)
            .option("topic", topic)
            .option("checkpointLocation", str(tmp_path / "ck"))
            .option("commitLog", f"s3a://{bucket}/{key}")
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
    assert query.exception() is None
    records = read_all(kafka_bootstrap, topic, expected=60)
    assert sorted(int(r.value) for r in records) == list(range(60))
    docs = _docs(_on_disk(local_s3, bucket, key))
    assert [d["batch_id"] for d in docs] == [0, 1]
    assert [d["record_count"] for d in docs] == [30, 30]
    assert not (tmp_path / "ck" / "pykafka-commits").exists()  # commitLog wins over the default
    merged: dict[tuple[str, int], tuple[int, int, int]] = {}
    for doc in docs:
        for tp, (lo, hi, n) in committed_ranges(doc).items():
            was = merged.get(tp, (lo, hi, 0))
            merged[tp] = (min(was[0], lo), max(was[1], hi), was[2] + n)
    assert merged == observed_ranges(records)


def test_bad_s3_credentials_fail_before_any_record(
    s3_spark, kafka_bootstrap, topic_factory
) -> None:
    spark, local_s3, bucket = s3_spark.spark, s3_spark.server, s3_spark.bucket
    topic = topic_factory(partitions=1)
    wrong = "not-the-secret-" + uuid.uuid4().hex
    location = f"s3a://{bucket}/{uuid.uuid4().hex[:8]}/commits"
    with s3_spark.env(local_s3.env(secret_key=wrong)), pytest.raises(Exception) as info:
        (
            spark.range(0, 20, 1, 2)
            .selectExpr("CAST(id AS STRING) AS value")
            .write.format("pykafka")
            .mode("append")
            .option("kafka.bootstrap.servers", kafka_bootstrap)
            .option("topic", topic)
            .option("commitLog", location)
            .save()
        )
    message = str(info.value)
    assert "PYTHON_DATA_SOURCE_ERROR" in message  # raised while planning, not in a task
    assert f"option 'commitLog' names a location the driver cannot write: {location}" in message
    assert "ACCESS_DENIED" in message and "AWS_ACCESS_KEY_ID" in message
    assert wrong not in message and local_s3.secret_key not in message
    assert read_all(kafka_bootstrap, topic) == []
